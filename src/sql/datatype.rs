//! The `cuckoofilter` SQL type: a hand-laid varlena read in place, its text and
//! binary I/O, and the per-call cache that keeps a toasted filter detoasted once per
//! query instead of once per row.
//!
//! In memory a value is: the 4-byte varlena length, 4 reserved zero bytes (so that
//! what follows is 8-aligned), then the filter layout of `filter::layout` with
//! native-order integers. The text form is `cf1:` followed by standard base64 of the
//! serialized (little-endian) layout; the binary form is the serialized layout.

use std::sync::atomic::AtomicU64;

use base64::Engine;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::filter::layout::{self, check_buckets, parse_header, HEADER_BYTES};
use crate::filter::{FormatError, Header, Params, Table};

/// Varlena length word plus 4 reserved bytes in front of the header.
pub const VALUE_PREFIX: usize = 8;
/// The largest value fits a palloc (1 GB): 2^26 buckets of 8 bytes is 512 MB.
pub const MAX_VALUE_BUCKET_LOG2: u8 = 26;
pub const TEXT_PREFIX: &str = "cf1:";

/// A filter value in memory: a 4-byte-header, uncompressed, 8-aligned varlena whose
/// header has been checked against its length.
#[derive(Clone, Copy)]
pub struct FilterValue {
    ptr: *mut pg_sys::varlena,
}

impl FilterValue {
    /// Wraps an in-memory varlena after checking alignment, header and length.
    ///
    /// # Safety
    /// `ptr` must point to a readable 4-byte-header uncompressed varlena that stays
    /// valid for as long as the returned value is used.
    pub unsafe fn from_ptr(ptr: *mut pg_sys::varlena) -> FilterValue {
        // SAFETY: the caller guarantees a 4-byte-header varlena.
        let len = unsafe { pgrx::varlena::varsize_4b(ptr) };
        let v = FilterValue { ptr };
        let ok = ptr as usize % 8 == 0 && len >= VALUE_PREFIX + HEADER_BYTES && {
            let h = v.header();
            h.magic == layout::MAGIC
                && h.bucket_count_log2 <= MAX_VALUE_BUCKET_LOG2
                && h.params().check().is_ok()
                && (len - VALUE_PREFIX) as u64 == h.params().serialized_len()
        };
        if !ok {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                "corrupted cuckoofilter value",
                format!("{len}-byte value at {ptr:p} does not match its header")
            );
        }
        v
    }

    pub fn as_datum(&self) -> pg_sys::Datum {
        pg_sys::Datum::from(self.ptr)
    }

    pub fn header(&self) -> &Header {
        // SAFETY: checked in `from_ptr`/`alloc`: the value is at least prefix + header
        // bytes long and 8-aligned, so the header is aligned and in bounds; `Header`
        // is plain bytes plus an `AtomicU64`, valid for any bit pattern.
        unsafe { &*((self.ptr as *const u8).add(VALUE_PREFIX) as *const Header) }
    }

    pub fn buckets(&self) -> &[AtomicU64] {
        let n = self.header().params().bucket_count() as usize;
        // SAFETY: the length check in `from_ptr`/`alloc` guarantees `n` 8-aligned
        // words after the header; `AtomicU64` has the layout of `u64`, and all
        // access goes through atomics.
        unsafe {
            std::slice::from_raw_parts((self.ptr as *const u8).add(VALUE_PREFIX + HEADER_BYTES) as *const AtomicU64, n)
        }
    }

    pub fn table(&self) -> Table<'_> {
        Table::new(self.header(), self.buckets())
    }

    pub fn total_len(&self) -> usize {
        VALUE_PREFIX + self.header().params().serialized_len() as usize
    }

    /// A fresh, writable copy in the current memory context.
    pub fn copy(&self) -> FilterValue {
        let len = self.total_len();
        // SAFETY: palloc returns MAXALIGN (8) aligned memory of `len` bytes, and the
        // source is `len` readable bytes.
        unsafe {
            let p = pg_sys::palloc(len) as *mut u8;
            std::ptr::copy_nonoverlapping(self.ptr as *const u8, p, len);
            FilterValue { ptr: p as *mut pg_sys::varlena }
        }
    }

    /// The serialized (little-endian) layout: header then bucket words.
    pub fn serialize(&self) -> Vec<u8> {
        self.table().serialize()
    }
}

/// Allocates an empty filter value with these parameters in the current memory
/// context, or raises 54000 if it would be too large for a value.
pub fn alloc_value(params: &Params) -> FilterValue {
    if params.bucket_count_log2 > MAX_VALUE_BUCKET_LOG2 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("a cuckoofilter value holds at most 2^{MAX_VALUE_BUCKET_LOG2} buckets")
        );
    }
    let len = VALUE_PREFIX + params.serialized_len() as usize;
    // SAFETY: palloc0 returns zeroed, 8-aligned memory of `len` bytes (at most
    // 512 MB + 40, under MaxAllocSize); the header is written in place before use.
    unsafe {
        let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        std::ptr::write((p as *mut u8).add(VALUE_PREFIX) as *mut Header, params.header(0));
        FilterValue { ptr: p }
    }
}

/// Builds a value from serialized bytes after validating every field.
pub fn deserialize(bytes: &[u8]) -> Result<FilterValue, FormatError> {
    let (params, items) = parse_header(bytes)?;
    if params.bucket_count_log2 > MAX_VALUE_BUCKET_LOG2 {
        return Err(FormatError::BadParams(format!(
            "bucket count 2^{} is larger than a value can hold (2^{MAX_VALUE_BUCKET_LOG2})",
            params.bucket_count_log2
        )));
    }
    let words = || bytes[HEADER_BYTES..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
    check_buckets(&params, items, words())?;
    let v = alloc_value(&params);
    v.header().item_count.store(items, std::sync::atomic::Ordering::Relaxed);
    for (dst, w) in v.buckets().iter().zip(words()) {
        dst.store(w, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(v)
}

/// Malformed input, text or binary: 22P02 with the precise reason as detail.
fn invalid_input(e: impl std::fmt::Display) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        "invalid input syntax for type cuckoofilter",
        e.to_string()
    );
}

/// Remembers the last toasted filter this call site detoasted, keyed by its toast
/// pointer, so a filter read from a table (or an InitPlan) is fetched once per
/// query, not once per row. Lives zero-initialised in `fn_extra` (`fn_mcxt`).
#[repr(C)]
pub struct DetoastCache {
    key: [u8; 16],
    value: *mut pg_sys::varlena,
    /// This cache's mapping record (created on first use); when its `base` is set,
    /// `value` lives in that huge-page mapping rather than in fn_mcxt.
    mapping: *mut Mapping,
}

/// The anonymous mapping holding a cache's current large filter, unmapped when the
/// cache replaces it or when `fn_mcxt` goes away (a memory-context callback
/// registered once per cache), whichever is first.
#[repr(C)]
struct Mapping {
    base: *mut std::ffi::c_void,
    len: usize,
    callback: pg_sys::MemoryContextCallback,
}

/// Filters at least this large are copied into memory backed by transparent huge
/// pages: probing a large filter takes a TLB miss per bucket otherwise, which is
/// costly (a nested page walk) on virtual machines.
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

unsafe extern "C-unwind" fn unmap_on_reset(arg: *mut std::ffi::c_void) {
    // SAFETY: `arg` is the Mapping registered with this callback; it is only
    // unmapped once because `base` is cleared after unmapping.
    unsafe {
        let m = &mut *(arg as *mut Mapping);
        if !m.base.is_null() {
            libc::munmap(m.base, m.len);
            m.base = std::ptr::null_mut();
        }
    }
}

impl DetoastCache {
    /// Drops the cached value.
    unsafe fn release(&mut self) {
        // SAFETY: `value` and `mapping` were set by `store` and belong to the cache;
        // a value in the mapping is unmapped (once: `base` is cleared), any other
        // was palloc'd in fn_mcxt.
        unsafe {
            if !self.mapping.is_null() && !(*self.mapping).base.is_null() {
                unmap_on_reset(self.mapping as *mut std::ffi::c_void);
            } else if !self.value.is_null() {
                pg_sys::pfree(self.value as *mut std::ffi::c_void);
            }
        }
        self.value = std::ptr::null_mut();
    }

    /// Keeps `detoasted` (palloc'd in the current context) for the life of
    /// `cx`: large values move into a huge-page mapping, others are copied into
    /// `cx`. Returns the cached copy.
    unsafe fn store(&mut self, key: [u8; 16], detoasted: *mut pg_sys::varlena, cx: pg_sys::MemoryContext) -> *mut pg_sys::varlena {
        // SAFETY: `detoasted` is a palloc'd 4-byte-header varlena of `len` bytes;
        // the mapping is at least `len` bytes past its 2 MB-aligned start. The one
        // Mapping record of this cache lives in `cx` with the callback that unmaps
        // whatever it holds when `cx` goes away.
        unsafe {
            self.release();
            let len = pgrx::varlena::varsize_4b(detoasted);
            let mut copy = std::ptr::null_mut::<pg_sys::varlena>();
            if len >= HUGE_PAGE_MIN_BYTES {
                if self.mapping.is_null() {
                    // Allocated before anything is mapped, so an error here leaks nothing.
                    let m = pg_sys::MemoryContextAlloc(cx, std::mem::size_of::<Mapping>()) as *mut Mapping;
                    m.write(Mapping {
                        base: std::ptr::null_mut(),
                        len: 0,
                        callback: pg_sys::MemoryContextCallback { func: Some(unmap_on_reset), arg: m as *mut _, next: std::ptr::null_mut() },
                    });
                    pg_sys::MemoryContextRegisterResetCallback(cx, &mut (*m).callback);
                    self.mapping = m;
                }
                let map_len = len + 2 * HUGE_PAGE;
                let base = libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if base != libc::MAP_FAILED {
                    let start = (base as usize + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
                    // Advice before first touch, so faults allocate huge pages.
                    libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
                    std::ptr::copy_nonoverlapping(detoasted as *const u8, start as *mut u8, len);
                    (*self.mapping).base = base;
                    (*self.mapping).len = map_len;
                    copy = start as *mut pg_sys::varlena;
                }
            }
            if copy.is_null() {
                copy = pg_sys::MemoryContextAlloc(cx, len) as *mut pg_sys::varlena;
                std::ptr::copy_nonoverlapping(detoasted as *const u8, copy as *mut u8, len);
            }
            pg_sys::pfree(detoasted as *mut std::ffi::c_void);
            self.key = key;
            self.value = copy;
            copy
        }
    }
}

/// Per-call-site state in `fn_extra`; all-zero is the valid initial state.
#[repr(C)]
pub struct CallCache {
    pub filter: DetoastCache,
    pub key: super::keys::KeyHasher,
}

/// The call site's cache, created zeroed in `fn_mcxt` on first use.
///
/// # Safety
/// `fcinfo` must be a valid call frame whose `fn_extra` is only used through this
/// function.
pub unsafe fn call_cache<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a mut CallCache {
    // SAFETY: the caller guarantees a valid frame; fn_extra is either null or the
    // CallCache this function allocated in fn_mcxt, which lives as long as flinfo.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            (*flinfo).fn_extra = pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, std::mem::size_of::<CallCache>());
        }
        &mut *((*flinfo).fn_extra as *mut CallCache)
    }
}

/// Reads filter argument `n` without copying it when it is already in memory.
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`.
pub unsafe fn filter_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize, cache: &mut DetoastCache) -> FilterValue {
    // SAFETY: the caller guarantees argument `n` is a non-null cuckoofilter datum,
    // i.e. a pointer to a varlena in one of its storage forms.
    unsafe {
        let raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<pg_sys::varlena>();
        if pgrx::varlena::varatt_is_1b_e(raw)
            && pgrx::varlena::vartag_external(raw) == pg_sys::vartag_external::VARTAG_ONDISK as u8
        {
            // The 16-byte varatt_external (size, toast relation, value id) names the
            // stored value; it cannot change while this query's snapshot can see it.
            let mut key = [0u8; 16];
            std::ptr::copy_nonoverlapping((raw as *const u8).add(2), key.as_mut_ptr(), 16);
            if !cache.value.is_null() && cache.key == key {
                // Checked by `from_ptr` when it was cached.
                return FilterValue { ptr: cache.value };
            }
            let detoasted = pg_sys::pg_detoast_datum_copy(raw);
            FilterValue::from_ptr(detoasted);
            let cached = cache.store(key, detoasted, (*(*fcinfo).flinfo).fn_mcxt);
            return FilterValue { ptr: cached };
        }
        // In memory already, or short, compressed, in-memory-external: no cache.
        filter_arg_once(fcinfo, n)
    }
}

/// Filter argument `n` for a one-shot read (output, count, info, a union input),
/// and `filter_arg`'s path for values not stored out of line: in place when
/// possible, otherwise detoasted into the current memory context, without
/// touching the call site's cache.
///
/// # Safety
/// As for [`filter_arg`].
pub unsafe fn filter_arg_once(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> FilterValue {
    // SAFETY: as for `filter_arg`; a plain, aligned 4-byte-header value is read in
    // place, any other form is detoasted into a new palloc'd copy (short, compressed
    // and external forms are small, rare, or read once here).
    unsafe {
        let raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<pg_sys::varlena>();
        if pgrx::varlena::varatt_is_4b_u(raw) && raw as usize % 8 == 0 {
            return FilterValue::from_ptr(raw);
        }
        FilterValue::from_ptr(pg_sys::pg_detoast_datum_copy(raw))
    }
}

/// Filter argument `n` as a fresh writable copy in the current memory context.
///
/// # Safety
/// As for [`filter_arg`].
pub unsafe fn filter_arg_copy(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> FilterValue {
    // SAFETY: as above; pg_detoast_datum_copy always returns a new palloc'd,
    // 4-byte-header, uncompressed varlena.
    unsafe {
        let raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<pg_sys::varlena>();
        FilterValue::from_ptr(pg_sys::pg_detoast_datum_copy(raw))
    }
}

v1_functions! {
    /// `cuckoofilter_in(cstring)`: `cf1:` + base64 of the serialized layout.
    fn cuckoofilter_in(fcinfo) {
        // SAFETY: the input function's argument 0 is a non-null C string.
        let text = unsafe {
            std::ffi::CStr::from_ptr(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<std::ffi::c_char>())
        };
        let text = text.to_str().unwrap_or_else(|_| invalid_input("input is not valid UTF-8"));
        let Some(body) = text.strip_prefix(TEXT_PREFIX) else {
            invalid_input(format!("input must start with \"{TEXT_PREFIX}\""));
        };
        // Refuse what cannot be a value before decoding it.
        let max_body = 4 * (HEADER_BYTES + (8usize << MAX_VALUE_BUCKET_LOG2)).div_ceil(3);
        if body.len() > max_body {
            invalid_input(format!("{} characters is longer than any cuckoofilter value", body.len()));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap_or_else(|e| invalid_input(format!("bad base64: {e}")));
        deserialize(&bytes).unwrap_or_else(|e| invalid_input(e)).as_datum()
    }

    fn cuckoofilter_out(fcinfo) {
        // SAFETY: argument 0 is a non-null cuckoofilter (the function is strict).
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        let mut text = String::with_capacity(TEXT_PREFIX.len() + v.total_len() * 4 / 3 + 4);
        text.push_str(TEXT_PREFIX);
        base64::engine::general_purpose::STANDARD.encode_string(v.serialize(), &mut text);
        let c = std::ffi::CString::new(text).expect("base64 has no NUL");
        // SAFETY: pstrdup copies the NUL-terminated string into the current context.
        pg_sys::Datum::from(unsafe { pg_sys::pstrdup(c.as_ptr()) })
    }

    /// `cuckoofilter_recv(internal)`: the serialized layout, exactly.
    fn cuckoofilter_recv(fcinfo) {
        // SAFETY: argument 0 of a receive function is a StringInfo.
        let bytes = unsafe {
            let buf = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<pg_sys::StringInfoData>();
            let remaining = ((*buf).len - (*buf).cursor) as usize;
            let p = pg_sys::pq_getmsgbytes(buf, remaining as i32);
            std::slice::from_raw_parts(p as *const u8, remaining)
        };
        match deserialize(bytes) {
            Ok(v) => v.as_datum(),
            Err(e) => invalid_input(e),
        }
    }

    fn cuckoofilter_send(fcinfo) {
        // SAFETY: argument 0 is a non-null cuckoofilter (the function is strict).
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        bytea_datum(&v.serialize())
    }
}

/// A new bytea holding `bytes`, in the current memory context.
pub fn bytea_datum(bytes: &[u8]) -> pg_sys::Datum {
    let len = pg_sys::VARHDRSZ + bytes.len();
    // SAFETY: palloc of `len` bytes; the length word and payload are written within.
    unsafe {
        let p = pg_sys::palloc(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(pg_sys::VARHDRSZ), bytes.len());
        pg_sys::Datum::from(p)
    }
}
