//! The per-call-site caches of `cuckoofilter` probes and the probes through
//! them: a toasted filter detoasted once per query instead of once per row
//! (kept in huge pages when large), a format-2 value's layout parsed once, and
//! a stored format-3 value's tables read once.

use pgrx::pg_sys;

use super::datatype::{in_memory, palloc_slice, FilterValue, VALUE_PREFIX};
use crate::filter::v2::{Dense, DenseLayout, V2_HEADER_BYTES};
use crate::filter::v3::FORMAT_V3;
use crate::filter::KeyType;
use crate::filter::FORMAT_V1;

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
    unsafe fn store(
        &mut self,
        key: [u8; 16],
        detoasted: *mut pg_sys::varlena,
        cx: pg_sys::MemoryContext,
    ) -> *mut pg_sys::varlena {
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
                        callback: pg_sys::MemoryContextCallback {
                            func: Some(unmap_on_reset),
                            arg: m as *mut _,
                            next: std::ptr::null_mut(),
                        },
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
            if v.format_version() == FORMAT_V1 {
                let h = cache.key.hash_arg(fcinfo, key_arg, v.seed());
                return v.contains(h);
            }
            if v.format_version() == FORMAT_V3 {
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
                        slot.write((
                            DenseLayout::new(&p.header.params),
                            p.start + V2_HEADER_BYTES,
                            p.len - V2_HEADER_BYTES,
                        ));
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

/// The toast pointer of a value stored in a table: its 16-byte
/// varatt_external (sizes, value ID, toast relation), which names the stored
/// value and cannot change while a snapshot can see it; None for a value in
/// any other form.
///
/// # Safety
/// `raw` is a varlena in one of its storage forms.
pub(crate) unsafe fn ondisk_toast_key(raw: *mut pg_sys::varlena) -> Option<[u8; 16]> {
    // SAFETY: as documented; an on-disk external pointer holds its
    // varatt_external after a 2-byte header.
    unsafe {
        if !pgrx::varlena::varatt_is_1b_e(raw)
            || pgrx::varlena::vartag_external(raw) != pg_sys::vartag_external::VARTAG_ONDISK as u8
        {
            return None;
        }
        let mut key = [0u8; 16];
        std::ptr::copy_nonoverlapping((raw as *const u8).add(2), key.as_mut_ptr(), 16);
        Some(key)
    }
}

/// Filter argument `n` as a 4-byte-header varlena: a toasted value from the call
/// site's cache (fetched and checked once; `true`), else in place or detoasted
/// into the current context, not yet checked (`false`).
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`.
unsafe fn resolve_filter_arg(
    fcinfo: pg_sys::FunctionCallInfo,
    n: usize,
    cache: &mut DetoastCache,
) -> (*mut pg_sys::varlena, bool) {
    // SAFETY: the caller guarantees argument `n` is a non-null cuckoofilter datum,
    // i.e. a pointer to a varlena in one of its storage forms.
    unsafe {
        let raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<pg_sys::varlena>();
        if let Some(key) = ondisk_toast_key(raw) {
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

#[cfg(feature = "pg_test")]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn toasted_filter_is_read_through_the_cache() {
        // A filter stored in a table is toasted (storage external); probing it from
        // every row must give the same answers as the in-memory value.
        Spi::run("CREATE TABLE fs AS SELECT cf_agg(g) f FROM generate_series(1, 100000) g").unwrap();
        let hits =
            Spi::get_one::<i64>("SELECT count(*) FROM generate_series(1, 100000) k, fs WHERE cf_contains(fs.f, k)")
                .unwrap();
        assert_eq!(hits, Some(100000));
    }

    #[pg_test]
    fn cache_replaced_on_every_row_gives_right_answers() {
        // Two filters just over 4 MB (cached in huge-page mappings) and a small one,
        // probed alternately: the per-call-site cache swaps (and unmaps) on every
        // call and must never answer from the wrong filter.
        Spi::run(
            "CREATE TABLE alt AS
               SELECT 1 AS id, cf_agg(g) AS f FROM generate_series(1, 3000000) g
               UNION ALL SELECT 2, cf_agg(g) FROM generate_series(5000001, 8000000) g
               UNION ALL SELECT 3, cf_agg(g) FROM generate_series(1, 10) g",
        )
        .unwrap();
        let big =
            Spi::get_one::<bool>("SELECT bool_and((cf_info(f) ->> 'bytes')::int > 4 << 20) FROM alt WHERE id < 3")
                .unwrap();
        assert_eq!(big, Some(true));
        let per_filter = Spi::get_one::<String>(
            "SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM (
               SELECT id, count(*) FILTER (WHERE cf_contains(f, k)) AS n
               FROM (SELECT k FROM generate_series(1, 300) k UNION ALL SELECT 5000000 + k FROM generate_series(1, 300) k) ks
               CROSS JOIN LATERAL (SELECT * FROM alt WHERE ks.k > 0 ORDER BY id) a GROUP BY id) s",
        )
        .unwrap()
        .unwrap();
        // Of the 600 probes, filter 1 holds 300, filter 2 the other 300, filter 3
        // ten. At a false-positive rate under 0.2%, more than 5 extra hits would
        // mean answers from the wrong filter (a wrong filter gives 300 extra).
        let counts: Vec<i64> = per_filter.split(',').map(|p| p.split(':').nth(1).unwrap().parse().unwrap()).collect();
        assert!((300..305).contains(&counts[0]), "{per_filter}");
        assert!((300..305).contains(&counts[1]), "{per_filter}");
        assert!((10..15).contains(&counts[2]), "{per_filter}");
    }
}
