//! The `cuckoofilter` SQL type: a hand-laid varlena read in place, its text and
//! binary I/O, and the per-call cache that keeps a toasted filter detoasted once per
//! query instead of once per row.
//!
//! In memory a value is: the 4-byte varlena length, 4 reserved zero bytes, then the
//! serialized filter, in one of three formats:
//! - format 2 (`filter::dense`), what this version writes for one table: dense
//!   buckets without migration counters, any bucket count;
//! - format 3 (`filter::multi`), since 0.7.0: several format-2 tables (a union of
//!   filters of different shapes, a snapshot of a named filter that grew);
//! - format 1 (`filter::layout`), what 0.1.0 wrote: a 32-byte header and 64-bit
//!   bucket words (8-aligned, native order in memory), read in place as they were.
//!   Probes answer exactly as 0.1.0 did; functions that change a format-1 value
//!   return a format-2 value with format 1's bucket mapping, which answers the same.
//!
//! The text form is `cf2:` (`cf3:`, or `cf1:` for format 1) followed by standard base64 of
//! the serialized filter; the binary form is the serialized filter. Both are
//! validated completely on input.

use std::sync::atomic::AtomicU64;

use base64::Engine;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::filter::dense::{self, Dense, DenseHeader, DenseLayout, KeyType, V2_HEADER_BYTES};
use crate::filter::chain::Growth;
use crate::filter::layout::{self, parse_v1, Mapping as BucketMapping, V1Header, FORMAT_V1, FORMAT_V2, V1_HEADER_BYTES};
use crate::filter::multi::{self, MultiHeader, FORMAT_V3};
use crate::filter::{FormatError, OwnedFilter, Params, Table};

/// Varlena length word plus 4 reserved bytes in front of the filter.
pub const VALUE_PREFIX: usize = 8;
/// Format-1 values were limited to 2^26 buckets (512 MB).
pub const MAX_V1_BUCKET_LOG2: u8 = 26;
/// The largest value: PostgreSQL's allocation limit (1 GB − 1).
pub const MAX_VALUE_BYTES: u64 = 0x3fff_ffff;

/// A filter value in memory: a 4-byte-header, uncompressed varlena whose header
/// has been checked against its length (8-aligned if format 1).
#[derive(Clone, Copy)]
pub struct FilterValue {
    ptr: *mut pg_sys::varlena,
    version: u8,
}

fn text_prefix(version: u8) -> &'static str {
    match version {
        FORMAT_V1 => "cf1:",
        FORMAT_V3 => "cf3:",
        _ => "cf2:",
    }
}

impl FilterValue {
    /// Wraps an in-memory varlena after checking its header against its length
    /// (the buckets were checked when the value was made or read from input).
    ///
    /// # Safety
    /// `ptr` must point to a readable 4-byte-header uncompressed varlena that stays
    /// valid for as long as the returned value is used.
    pub unsafe fn from_ptr(ptr: *mut pg_sys::varlena) -> FilterValue {
        // SAFETY: the caller guarantees a 4-byte-header varlena of `len` bytes.
        let len = unsafe { pgrx::varlena::varsize_4b(ptr) };
        let bytes = (len >= VALUE_PREFIX + 8).then(|| {
            // SAFETY: as above; the slice covers the varlena after its prefix.
            unsafe { std::slice::from_raw_parts((ptr as *const u8).add(VALUE_PREFIX), len - VALUE_PREFIX) }
        });
        let version = match bytes.map(layout::format_version) {
            Some(Ok(FORMAT_V2)) if dense::parse_v2(bytes.unwrap()).is_ok() => FORMAT_V2,
            Some(Ok(FORMAT_V3)) if multi::parse_v3(bytes.unwrap()).is_ok() => FORMAT_V3,
            Some(Ok(FORMAT_V1)) if ptr as usize % 8 == 0 && check_v1_in_place(bytes.unwrap()) => FORMAT_V1,
            _ => corrupted(len, ptr),
        };
        FilterValue { ptr, version }
    }

    /// Wraps a value that `from_ptr` checked before (a cached one).
    ///
    /// # Safety
    /// `ptr` was accepted by `from_ptr` and is still valid and unchanged.
    unsafe fn trusted(ptr: *mut pg_sys::varlena) -> FilterValue {
        // SAFETY: a checked value has its version byte after the prefix and magic.
        let version = unsafe { *(ptr as *const u8).add(VALUE_PREFIX + 4) };
        FilterValue { ptr, version }
    }

    pub fn as_datum(&self) -> pg_sys::Datum {
        pg_sys::Datum::from(self.ptr)
    }

    pub fn format_version(&self) -> u8 {
        self.version
    }

    /// The serialized filter after the prefix (format 1: words in native order).
    fn body(&self) -> &[u8] {
        // SAFETY: checked in `from_ptr`/`alloc_v2`: at least the prefix is present
        // and the varlena is `len` bytes long.
        unsafe {
            let len = pgrx::varlena::varsize_4b(self.ptr);
            std::slice::from_raw_parts((self.ptr as *const u8).add(VALUE_PREFIX), len - VALUE_PREFIX)
        }
    }

    fn v1_header(&self) -> &V1Header {
        debug_assert_eq!(self.version, FORMAT_V1);
        // SAFETY: a checked format-1 value is 8-aligned and holds the 32-byte
        // header after its prefix; `V1Header` is plain bytes plus an `AtomicU64`,
        // valid for any bit pattern.
        unsafe { &*((self.ptr as *const u8).add(VALUE_PREFIX) as *const V1Header) }
    }

    /// A format-1 value's bucket words, read in place through the lock-free table
    /// (nothing changes them: values are immutable).
    fn v1_table(&self) -> Table<'_> {
        let h = self.v1_header();
        let p = h.params();
        // SAFETY: the length check guarantees `bucket_count` 8-aligned words after
        // the header; `AtomicU64` has the layout of `u64`.
        let words = unsafe {
            std::slice::from_raw_parts(
                (self.ptr as *const u8).add(VALUE_PREFIX + V1_HEADER_BYTES) as *const AtomicU64,
                p.bucket_count as usize,
            )
        };
        Table::new(p, &h.item_count, words)
    }

    fn v2_header(&self) -> DenseHeader {
        dense::parse_v2(self.body()).expect("checked in from_ptr")
    }

    /// A format-2 value's dense buckets.
    fn dense(&self) -> Dense<'_> {
        let h = self.v2_header();
        Dense::new(&h.params, &self.body()[V2_HEADER_BYTES..])
    }

    fn v3_header(&self) -> MultiHeader {
        multi::parse_v3(self.body()).expect("checked in from_ptr")
    }

    /// The type of its keys, as recorded (format 1 records none).
    pub fn key_type(&self) -> KeyType {
        match self.version {
            FORMAT_V1 => KeyType::NONE,
            FORMAT_V3 => self.v3_header().key(),
            _ => self.v2_header().key,
        }
    }

    /// The tables, each with its header (format 1 and 2: one).
    pub fn tables(&self) -> Vec<DenseHeader> {
        match self.version {
            FORMAT_V1 => {
                let p = self.v1_header().params();
                vec![DenseHeader { params: p, items: self.item_count(), capacity: self.capacity(), key: KeyType::NONE }]
            }
            FORMAT_V3 => self.v3_header().parts.iter().map(|p| p.header).collect(),
            _ => vec![self.v2_header()],
        }
    }

    /// How the value grows when an insert finds every table full (format 3
    /// only: a snapshot of a named filter that grows).
    pub fn growth(&self) -> Option<Growth> {
        match self.version {
            FORMAT_V3 => self.v3_header().growth,
            _ => None,
        }
    }

    pub fn seed(&self) -> u64 {
        match self.version {
            FORMAT_V1 => self.v1_header().params().seed,
            FORMAT_V3 => self.v3_header().seed(),
            _ => self.v2_header().params.seed,
        }
    }

    pub fn item_count(&self) -> u64 {
        match self.version {
            FORMAT_V1 => self.v1_table().item_count(),
            FORMAT_V3 => self.v3_header().items(),
            _ => self.v2_header().items,
        }
    }

    /// The capacity the filter was sized for (format 1: its slots at the shape's
    /// planned load, as 0.1.0 reported it; format 3: its tables' sum).
    pub fn capacity(&self) -> u64 {
        match self.version {
            FORMAT_V1 => crate::filter::sizing::planned_capacity(&self.v1_header().params()),
            FORMAT_V3 => self.v3_header().capacity(),
            _ => self.v2_header().capacity,
        }
    }

    /// The false-positive bound at the filter's load now (format 3: the sum of
    /// its tables' bounds).
    pub fn fpp_bound(&self) -> f64 {
        self.tables().iter().map(|t| crate::filter::sizing::expected_fpp(&t.params, t.items)).sum::<f64>().min(1.0)
    }

    /// Whether a key with this hash may be in the filter.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        match self.version {
            FORMAT_V1 => self.v1_table().contains(hash),
            FORMAT_V3 => multi::contains_checked(self.body(), hash),
            _ => self.dense().contains(hash),
        }
    }

    /// `contains` for many hashes at once, prefetching ahead.
    pub fn contains_many(&self, hashes: &[u64], out: &mut [bool]) {
        match self.version {
            FORMAT_V1 => self.v1_table().contains_many(hashes, out),
            FORMAT_V3 => {
                let h = self.v3_header();
                multi::contains_many(&multi::tables(self.body(), &h), hashes, out)
            }
            _ => self.dense().contains_many(hashes, out),
        }
    }

    /// The bucket words of table `i`, one per bucket (format 1's as stored,
    /// format 2's and 3's decoded).
    pub fn table_words(&self, i: usize) -> Box<dyn Iterator<Item = u64> + '_> {
        match self.version {
            FORMAT_V1 => {
                let t = self.v1_table();
                Box::new(t.bucket_words().iter().map(|w| w.load(std::sync::atomic::Ordering::Relaxed)))
            }
            FORMAT_V3 => {
                let h = self.v3_header();
                let d = multi::tables(self.body(), &h).swap_remove(i);
                let m = h.parts[i].header.params.bucket_count;
                Box::new((0..m).map(move |j| d.word(j)))
            }
            _ => {
                let d = self.dense();
                Box::new((0..self.v2_header().params.bucket_count).map(move |j| d.word(j)))
            }
        }
    }

    /// Private copies of the tables as bucket words, to change (insert,
    /// delete, union).
    pub fn to_owned_tables(&self) -> Vec<OwnedFilter> {
        self.tables().iter().enumerate().map(|(i, t)| OwnedFilter::from_words(t.params, t.capacity, self.table_words(i))).collect()
    }

    pub fn total_len(&self) -> usize {
        VALUE_PREFIX + self.body().len()
    }

    /// The serialized filter (little-endian).
    pub fn serialize(&self) -> Vec<u8> {
        let body = self.body();
        if self.version != FORMAT_V1 {
            return body.to_vec();
        }
        // Format 1 keeps its words in native order in memory.
        let mut out = body.to_vec();
        out[16..24].copy_from_slice(&self.seed().to_le_bytes());
        out[24..32].copy_from_slice(&self.item_count().to_le_bytes());
        for (chunk, w) in out[V1_HEADER_BYTES..].chunks_exact_mut(8).zip(self.table_words(0)) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

fn corrupted(len: usize, ptr: *mut pg_sys::varlena) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        "corrupted cuckoofilter value",
        format!("{len}-byte value at {ptr:p} does not match its header")
    );
}

/// Whether the body of an in-memory format-1 value has a valid header that
/// matches its length (and 0.1.0's size limit). In memory its integers are in
/// native order; the header check reads them as serialized (little-endian).
fn check_v1_in_place(body: &[u8]) -> bool {
    if body.len() < V1_HEADER_BYTES {
        return false;
    }
    let mut h = [0u8; V1_HEADER_BYTES];
    h.copy_from_slice(&body[..V1_HEADER_BYTES]);
    for at in [16, 24] {
        let native = u64::from_ne_bytes(h[at..at + 8].try_into().unwrap());
        h[at..at + 8].copy_from_slice(&native.to_le_bytes());
    }
    matches!(layout::parse_v1_header(&h), Ok((_, _, len)) if len == body.len() as u64 && h[8] <= MAX_V1_BUCKET_LOG2)
}

/// The largest bucket count a value of this shape can have (1 GB).
pub fn max_value_buckets(shape: &crate::filter::sizing::Shape) -> u64 {
    let p = Params {
        fingerprint_bits: shape.bits,
        slots_per_bucket: shape.slots,
        bucket_count: 1,
        seed: 0,
        mapping: BucketMapping::Fastrange,
    };
    let bits = dense::bucket_bits(&p) as u64;
    ((MAX_VALUE_BYTES - VALUE_PREFIX as u64 - 64) * 8 / bits).min(layout::MAX_BUCKET_COUNT)
}

/// Raises 54000 when a value with these parameters would be too large.
pub fn check_value_size(params: &Params) {
    let len = VALUE_PREFIX as u64 + dense::serialized_len(params);
    if len > MAX_VALUE_BYTES {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            "cuckoofilter value would be too large",
            format!("{} buckets take {len} bytes; a value holds at most {MAX_VALUE_BYTES}", params.bucket_count)
        );
    }
}

/// Raises 54000 when a value of tables with these parameters would be too
/// large (one table: format 2; more: format 3).
pub fn check_tables_value_size(params: &[Params]) {
    if params.len() == 1 {
        return check_value_size(&params[0]);
    }
    let len = VALUE_PREFIX as u64 + multi::serialized_len(params);
    if len > MAX_VALUE_BYTES || params.len() > multi::MAX_VALUE_TABLES {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            "cuckoofilter value would be too large",
            format!("{} tables take {len} bytes; a value holds at most {} tables and {MAX_VALUE_BYTES} bytes", params.len(), multi::MAX_VALUE_TABLES)
        );
    }
}

/// A format-2 value holding the filter `f` (bucket words) with keys of type
/// `key`, in the current memory context.
pub fn value_from_filter(f: &OwnedFilter, key: KeyType) -> FilterValue {
    value_from_words(&multi::header_of(f, key), f.words())
}

/// A value of these tables: format 2 for one table that does not grow, else
/// format 3.
pub fn value_from_tables(tables: &[OwnedFilter], key: KeyType, growth: Option<Growth>) -> FilterValue {
    if tables.len() == 1 && growth.is_none() {
        return value_from_filter(&tables[0], key);
    }
    let headers: Vec<DenseHeader> = tables.iter().map(|t| multi::header_of(t, key)).collect();
    value_from_headers(&headers, growth, |i| tables[i].words())
}

/// A format-3 value of tables with these headers, whose bucket words `words(i)`
/// gives, in the current memory context; 54000 if it would be too large.
pub fn value_from_headers<'w, I: Iterator<Item = u64> + 'w>(headers: &[DenseHeader], growth: Option<Growth>, words: impl FnMut(usize) -> I) -> FilterValue {
    let params: Vec<Params> = headers.iter().map(|h| h.params).collect();
    check_tables_value_size(&params);
    let len = VALUE_PREFIX + multi::serialized_len(&params) as usize;
    // SAFETY: palloc0 returns zeroed memory of `len` bytes (at most MaxAllocSize,
    // checked above); the length word is set and the filter encoded within.
    unsafe {
        let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        let body = std::slice::from_raw_parts_mut((p as *mut u8).add(VALUE_PREFIX), len - VALUE_PREFIX);
        multi::encode_into(growth, headers, words, body);
        FilterValue { ptr: p, version: FORMAT_V3 }
    }
}

/// A format-2 value with header `h` and these bucket words, in the current memory
/// context.
pub fn value_from_words(h: &DenseHeader, words: impl Iterator<Item = u64>) -> FilterValue {
    check_value_size(&h.params);
    let len = VALUE_PREFIX + dense::serialized_len(&h.params) as usize;
    // SAFETY: palloc0 returns zeroed memory of `len` bytes (at most MaxAllocSize,
    // checked above); the length word is set and the filter encoded within.
    unsafe {
        let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        let body = std::slice::from_raw_parts_mut((p as *mut u8).add(VALUE_PREFIX), len - VALUE_PREFIX);
        dense::encode_into(h, words, body);
        FilterValue { ptr: p, version: FORMAT_V2 }
    }
}

/// Builds a value from serialized bytes after validating every field and bucket.
/// Format 1 stays format 1 (its bytes, and so its text and binary output, are
/// kept as they were).
pub fn deserialize(bytes: &[u8]) -> Result<FilterValue, FormatError> {
    match layout::format_version(bytes)? {
        FORMAT_V1 => {
            let (params, items) = parse_v1(bytes)?;
            if params.bucket_count > 1 << MAX_V1_BUCKET_LOG2 {
                return Err(FormatError::BadParams(format!(
                    "bucket count {} is larger than a format-1 value can hold (2^{MAX_V1_BUCKET_LOG2})",
                    params.bucket_count
                )));
            }
            let words = || bytes[V1_HEADER_BYTES..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
            let counted = crate::filter::Geometry::new(&params).occupied_total(words());
            if counted != items {
                return Err(FormatError::ItemCountMismatch { header: items, counted });
            }
            let len = VALUE_PREFIX + bytes.len();
            // SAFETY: palloc returns 8-aligned memory of `len` bytes (at most 512 MB
            // + 40); the prefix, header and words are written within.
            unsafe {
                let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
                pgrx::varlena::set_varsize_4b(p, len as i32);
                let body = (p as *mut u8).add(VALUE_PREFIX);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), body, V1_HEADER_BYTES);
                let words_out = body.add(V1_HEADER_BYTES) as *mut u64;
                for (i, w) in words().enumerate() {
                    words_out.add(i).write(w);
                }
                // Native order in memory, as 0.1.0 kept them.
                (body.add(16) as *mut u64).write(params.seed);
                (body.add(24) as *mut u64).write(items);
                Ok(FilterValue { ptr: p, version: FORMAT_V1 })
            }
        }
        FORMAT_V2 => {
            let h = dense::parse_v2(bytes)?;
            if h.key.kind == dense::KEY_BUILTIN && !crate::sql::keys::builtin_key_type_ok(h.key.oid) {
                return Err(FormatError::BadParams(format!("key type OID {} is not a built-in type with a hash function", h.key.oid)));
            }
            if (VALUE_PREFIX + bytes.len()) as u64 > MAX_VALUE_BYTES {
                return Err(FormatError::BadParams(format!("{} bytes is larger than a value can hold", bytes.len())));
            }
            Dense::new(&h.params, &bytes[V2_HEADER_BYTES..]).validate(h.items)?;
            let len = VALUE_PREFIX + bytes.len();
            // SAFETY: palloc0 of `len` bytes; the length word and body are written within.
            unsafe {
                let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
                pgrx::varlena::set_varsize_4b(p, len as i32);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(VALUE_PREFIX), bytes.len());
                Ok(FilterValue { ptr: p, version: FORMAT_V2 })
            }
        }
        FORMAT_V3 => {
            let h = multi::parse_v3(bytes)?;
            let key = h.key();
            if key.kind == dense::KEY_BUILTIN && !crate::sql::keys::builtin_key_type_ok(key.oid) {
                return Err(FormatError::BadParams(format!("key type OID {} is not a built-in type with a hash function", key.oid)));
            }
            if (VALUE_PREFIX + bytes.len()) as u64 > MAX_VALUE_BYTES {
                return Err(FormatError::BadParams(format!("{} bytes is larger than a value can hold", bytes.len())));
            }
            multi::validate_v3(bytes, &h)?;
            let len = VALUE_PREFIX + bytes.len();
            // SAFETY: palloc0 of `len` bytes; the length word and body are written within.
            unsafe {
                let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
                pgrx::varlena::set_varsize_4b(p, len as i32);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(VALUE_PREFIX), bytes.len());
                Ok(FilterValue { ptr: p, version: FORMAT_V3 })
            }
        }
        v => Err(FormatError::UnsupportedVersion(v)),
    }
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

/// The probe layout of the last format-2 value probed at a call site, keyed by
/// the value's length and header bytes. `FilterValue::from_ptr` checks a value
/// from exactly these (its length and header), so a value with the same length and
/// header bytes passes the same checks and has the same layout: a value read in
/// place on every row (a short one, or an InitPlan result) is parsed once, not
/// once per row. All-zero (`valid` false) is the empty state.
#[repr(C)]
pub struct LayoutCache {
    valid: bool,
    len: usize,
    header: [u8; V2_HEADER_BYTES],
    layout: std::mem::MaybeUninit<DenseLayout>,
    /// The key type the header records.
    key: KeyType,
}

/// Tables of a format-3 value this call site probes again and again: kept for
/// the value in the detoast cache (keyed by its toast pointer, which names the
/// stored value for the query), so that each probe reads no header. Values of
/// more tables than this are read as they are.
const MULTI_CACHE_TABLES: usize = 32;

#[repr(C)]
pub struct MultiCache {
    valid: bool,
    toast_key: [u8; 16],
    tables: usize,
    seed: u64,
    key: KeyType,
    /// Each table's layout, and where its buckets start and how long they are.
    layouts: [std::mem::MaybeUninit<(DenseLayout, usize, usize)>; MULTI_CACHE_TABLES],
}

/// Per-call-site state in `fn_extra`; all-zero is the valid initial state.
#[repr(C)]
pub struct CallCache {
    pub filter: DetoastCache,
    pub key: crate::sql::keys::KeyHasher,
    pub layout: LayoutCache,
    pub multi: MultiCache,
}

/// `cf_contains(f, key)` for the filter at argument `n` and the key at `key_arg`:
/// through the call site's detoast and layout caches.
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`; argument `key_arg` is a non-null key of the call site's
/// key type.
pub unsafe fn probe_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize, key_arg: usize) -> bool {
    // SAFETY: the caller guarantees the arguments; `ptr` is a 4-byte-header varlena of `len` bytes
    // (a cached detoasted copy, or the argument in place, or a fresh copy).
    unsafe {
        let cache = call_cache(fcinfo);
        let (ptr, checked) = resolve_filter_arg(fcinfo, n, &mut cache.filter);
        let len = pgrx::varlena::varsize_4b(ptr);
        let body_at = (ptr as *const u8).add(VALUE_PREFIX);
        let lc = &mut cache.layout;
        // A cached length is that of a checked format-2 value, longer than the
        // prefix and header, so the header is read only once the lengths match.
        let hit = lc.valid && lc.len == len && std::slice::from_raw_parts(body_at, V2_HEADER_BYTES) == lc.header;
        if !hit {
            let v = if checked { FilterValue::trusted(ptr) } else { FilterValue::from_ptr(ptr) };
            if v.version == FORMAT_V1 {
                let h = cache.key.hash_arg(fcinfo, key_arg, v.seed());
                return v.contains(h);
            }
            if v.version == FORMAT_V3 {
                let k = *body_at.add(6) as usize;
                if !checked || k > MULTI_CACHE_TABLES {
                    let Some(h) = cache.key.hash_arg_for(fcinfo, key_arg, v.seed(), v.key_type()) else { return false };
                    return v.contains(h);
                }
                // A value from the detoast cache: its tables' layouts are kept
                // for as long as the cache holds it.
                let mc = &mut cache.multi;
                if !mc.valid || mc.toast_key != cache.filter.key {
                    mc.valid = false;
                    let mh = v.v3_header();
                    for (slot, p) in mc.layouts.iter_mut().zip(&mh.parts) {
                        slot.write((DenseLayout::new(&p.header.params), p.start + V2_HEADER_BYTES, p.len - V2_HEADER_BYTES));
                    }
                    mc.tables = mh.parts.len();
                    mc.seed = mh.seed();
                    mc.key = mh.key();
                    mc.toast_key = cache.filter.key;
                    mc.valid = true;
                }
                let Some(h) = cache.key.hash_arg_for(fcinfo, key_arg, mc.seed, mc.key) else { return false };
                let body = std::slice::from_raw_parts(body_at, len - VALUE_PREFIX);
                return mc.layouts[..mc.tables].iter().rev().any(|l| {
                    let (layout, start, n) = l.assume_init();
                    Dense::with_layout(layout, &body[start..start + n]).contains(h)
                });
            }
            lc.key = v.key_type();
            lc.valid = false;
            lc.layout.write(DenseLayout::new(&v.v2_header().params));
            lc.header.copy_from_slice(std::slice::from_raw_parts(body_at, V2_HEADER_BYTES));
            lc.len = len;
            lc.valid = true;
        }
        let layout = lc.layout.assume_init();
        let Some(h) = cache.key.hash_arg_for(fcinfo, key_arg, layout.seed(), lc.key) else { return false };
        let buckets = std::slice::from_raw_parts(body_at.add(V2_HEADER_BYTES), len - VALUE_PREFIX - V2_HEADER_BYTES);
        Dense::with_layout(layout, buckets).contains(h)
    }
}

/// `n` zeroed elements allocated in the current memory context (an ERROR, not
/// an abort, when memory runs out; freed with the context).
pub fn palloc_slice<'a, T: Copy>(n: usize) -> &'a mut [T] {
    // SAFETY: a zeroed allocation of n elements of a Copy type whose all-zero
    // bit pattern is valid (integers, booleans, datums), aligned to 8 by palloc.
    unsafe {
        let p = pg_sys::MemoryContextAllocExtended(
            pg_sys::CurrentMemoryContext,
            (n.max(1)).checked_mul(std::mem::size_of::<T>()).expect("allocation size"),
            (pg_sys::MCXT_ALLOC_HUGE | pg_sys::MCXT_ALLOC_ZERO) as i32,
        ) as *mut T;
        std::slice::from_raw_parts_mut(p, n)
    }
}

/// Batched `cf_contains` for the filter at argument `n`: `hashes` gives the
/// keys' hashes under the filter's seed (with the call site's key hasher); the
/// answers are in the same order.
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`.
pub unsafe fn probe_many_arg<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
    n: usize,
    hashes: impl FnOnce(&mut crate::sql::keys::KeyHasher, u64, KeyType) -> &'a [u64],
) -> &'a [bool] {
    // SAFETY: as documented; the value is checked (`from_ptr`) unless the cache
    // checked it when it stored it.
    unsafe {
        let cache = call_cache(fcinfo);
        let (ptr, checked) = resolve_filter_arg(fcinfo, n, &mut cache.filter);
        let v = if checked { FilterValue::trusted(ptr) } else { FilterValue::from_ptr(ptr) };
        let hs = hashes(&mut cache.key, v.seed(), v.key_type());
        let out = palloc_slice::<bool>(hs.len());
        v.contains_many(hs, out);
        out
    }
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

/// Filter argument `n` as a 4-byte-header varlena: a toasted value from the call
/// site's cache (fetched and checked once; `true`), else in place or detoasted
/// into the current context, not yet checked (`false`).
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`.
unsafe fn resolve_filter_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize, cache: &mut DetoastCache) -> (*mut pg_sys::varlena, bool) {
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
                return (cache.value, true);
            }
            let detoasted = pg_sys::pg_detoast_datum_copy(raw);
            FilterValue::from_ptr(detoasted);
            return (cache.store(key, detoasted, (*(*fcinfo).flinfo).fn_mcxt), true);
        }
        // In memory already, or short, compressed, in-memory-external: no cache.
        (in_memory(raw), false)
    }
}

/// A filter datum that is not stored out of line, as a 4-byte-header varlena: in
/// place when it is one (plain and 8-aligned), else a detoasted copy in the
/// current memory context (short, compressed and in-memory-external forms are
/// small or rare).
///
/// # Safety
/// `raw` must be a non-null `cuckoofilter` datum.
pub(crate) unsafe fn in_memory(raw: *mut pg_sys::varlena) -> *mut pg_sys::varlena {
    // SAFETY: the caller guarantees a varlena in one of its storage forms;
    // pg_detoast_datum_copy returns a new palloc'd 4-byte-header varlena.
    unsafe {
        if pgrx::varlena::varatt_is_4b_u(raw) && raw as usize % 8 == 0 {
            return raw;
        }
        pg_sys::pg_detoast_datum_copy(raw)
    }
}

/// Filter argument `n` for a one-shot read (output, count, info, a union input):
/// in place when possible, otherwise detoasted into the current memory context,
/// without touching the call site's cache (`probe_arg` reads through it).
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`.
pub unsafe fn filter_arg_once(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> FilterValue {
    // SAFETY: the caller guarantees a cuckoofilter at `n`; `in_memory` gives a
    // 4-byte-header varlena that lives at least as long as this call.
    unsafe { FilterValue::from_ptr(in_memory(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr())) }
}

v1_functions! {
    /// `cuckoofilter_in(cstring)`: `cf2:` (or `cf1:`) + base64 of the serialized filter.
    fn cuckoofilter_in(fcinfo) {
        // SAFETY: the input function's argument 0 is a non-null C string.
        let text = unsafe {
            std::ffi::CStr::from_ptr(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<std::ffi::c_char>())
        };
        let text = text.to_str().unwrap_or_else(|_| invalid_input("input is not valid UTF-8"));
        let (prefix_version, body) = match (text.strip_prefix("cf2:"), text.strip_prefix("cf3:"), text.strip_prefix("cf1:")) {
            (Some(b), _, _) => (FORMAT_V2, b),
            (None, Some(b), _) => (FORMAT_V3, b),
            (None, None, Some(b)) => (FORMAT_V1, b),
            _ => invalid_input("input must start with \"cf2:\" or \"cf3:\" (or \"cf1:\", written by cuckoo 0.1.0)"),
        };
        // Refuse what cannot be a value before decoding it.
        let max_body = 4 * (MAX_VALUE_BYTES as usize).div_ceil(3);
        if body.len() > max_body {
            invalid_input(format!("{} characters is longer than any cuckoofilter value", body.len()));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap_or_else(|e| invalid_input(format!("bad base64: {e}")));
        let v = deserialize(&bytes).unwrap_or_else(|e| invalid_input(e));
        if v.format_version() != prefix_version {
            invalid_input(format!(
                "prefix \"{}\" does not match format version {}",
                text_prefix(prefix_version),
                v.format_version()
            ));
        }
        v.as_datum()
    }

    fn cuckoofilter_out(fcinfo) {
        // SAFETY: argument 0 is a non-null cuckoofilter (the function is strict).
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        let prefix = text_prefix(v.format_version());
        let mut text = String::with_capacity(prefix.len() + v.total_len() * 4 / 3 + 4);
        text.push_str(prefix);
        base64::engine::general_purpose::STANDARD.encode_string(v.serialize(), &mut text);
        let c = std::ffi::CString::new(text).expect("base64 has no NUL");
        // SAFETY: pstrdup copies the NUL-terminated string into the current context.
        pg_sys::Datum::from(unsafe { pg_sys::pstrdup(c.as_ptr()) })
    }

    /// `cuckoofilter_recv(internal)`: the serialized filter, exactly.
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
