//! The aggregates `cf_agg` and `cf_union_agg`, with their support functions.
//!
//! `cf_agg` is sized automatically, so it cannot fill a filter while rows arrive:
//! its state (`internal`) collects the 64-bit key hashes in memory of the aggregate
//! context; the final function deduplicates them, sizes the filter for their
//! number and inserts them in bucket order. Partial states serialize as the list of
//! hashes and combine by concatenation, so a parallel plan loses nothing and
//! answers exactly as the serial one. The `CREATE AGGREGATE` is written by hand in
//! `sql/cuckoo.sql` (pgrx 0.18 emits a wrong deserial signature, pgrx issue 2351).
//!
//! `cf_union_agg` keeps a `cuckoofilter` as its state and merges each input into it,
//! in place once the state is the aggregate's own in-memory copy (a new value is
//! made only when an input has fewer buckets, since a union folds into the smaller
//! table).

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::datatype::{alloc_value, bytea_datum, call_cache, filter_arg_once, FilterValue, MAX_VALUE_BUCKET_LOG2};
use super::value_fns::{full_error, sizing_error, union_into};
use crate::filter::build::{dedup_in_bucket_order, sort_in_bucket_order};
use crate::filter::layout::DEFAULT_SEED;
use crate::filter::sizing::{size_for, SizingError, DEFAULT_FPP};

/// The `cf_agg` transition state, allocated in the aggregate memory context. The
/// hash array grows by doubling with `repalloc_huge`, so it is accounted to and
/// freed with that context, also when the query fails.
#[repr(C)]
struct HashList {
    len: usize,
    cap: usize,
    data: *mut u64,
    /// 0 until a row names an fpp.
    fpp: f64,
    /// 0 until a row names a capacity; the filter is sized for at least this many.
    capacity: u64,
}

impl HashList {
    unsafe fn new_in(cx: pg_sys::MemoryContext, cap: usize) -> *mut HashList {
        // SAFETY: allocations in a live memory context; the struct is fully written.
        unsafe {
            let cap = cap.max(64);
            let s = pg_sys::MemoryContextAlloc(cx, std::mem::size_of::<HashList>()) as *mut HashList;
            let data = pg_sys::MemoryContextAllocHuge(cx, cap * 8) as *mut u64;
            s.write(HashList { len: 0, cap, data, fpp: 0.0, capacity: 0 });
            s
        }
    }

    fn reserve(&mut self, extra: usize) {
        if self.len + extra > self.cap {
            let cap = (self.len + extra).next_power_of_two();
            // SAFETY: `data` is a chunk from MemoryContextAllocHuge; repalloc_huge
            // keeps it in the same context.
            self.data = unsafe { pg_sys::repalloc_huge(self.data as *mut std::ffi::c_void, cap * 8) as *mut u64 };
            self.cap = cap;
        }
    }

    #[inline]
    fn push(&mut self, h: u64) {
        if self.len == self.cap {
            self.reserve(1);
        }
        // SAFETY: reserve guarantees len < cap.
        unsafe { self.data.add(self.len).write(h) };
        self.len += 1;
    }

    fn hashes(&mut self) -> &mut [u64] {
        // SAFETY: the first `len` elements are initialised.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }

    fn set_capacity(&mut self, capacity: i64) {
        if self.capacity == 0 {
            if capacity < 1 {
                sizing_error(SizingError::Capacity(format!("capacity must be at least 1, got {capacity}")));
            }
            self.capacity = capacity as u64;
        } else if self.capacity != capacity as u64 {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("cf_agg needs the same capacity for every row, got {} and {capacity}", self.capacity)
            );
        }
    }

    fn set_fpp(&mut self, fpp: f64) {
        if self.fpp == 0.0 {
            if let Err(e) = size_for(1, fpp, MAX_VALUE_BUCKET_LOG2) {
                sizing_error(e);
            }
            self.fpp = fpp;
        } else if self.fpp != fpp {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("cf_agg needs the same fpp for every row, got {} and {fpp}", self.fpp)
            );
        }
    }
}

/// The aggregate memory context, or an error if not called as an aggregate.
unsafe fn agg_context(fcinfo: pg_sys::FunctionCallInfo, name: &str) -> pg_sys::MemoryContext {
    let mut cx: pg_sys::MemoryContext = std::ptr::null_mut();
    // SAFETY: valid frame; AggCheckCallContext only inspects fcinfo->context.
    if unsafe { pg_sys::AggCheckCallContext(fcinfo, &mut cx) } == 0 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{name} can only be called as part of an aggregate")
        );
    }
    cx
}

unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<&'static mut HashList> {
    // SAFETY: a non-null `internal` argument of these functions is always a
    // HashList made by this module.
    unsafe {
        if pgrx::fcinfo::pg_arg_is_null(fcinfo, n) {
            None
        } else {
            Some(&mut *pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<HashList>())
        }
    }
}

/// Builds the smallest filter that takes every hash, growing the table if the
/// planned size turns out too tight.
fn build_from_hashes(state: Option<&mut HashList>) -> FilterValue {
    let (hashes, fpp, capacity, kept_len): (&mut [u64], f64, u64, Option<&mut usize>) = match state {
        Some(s) => {
            let fpp = if s.fpp == 0.0 { DEFAULT_FPP } else { s.fpp };
            let capacity = s.capacity;
            // SAFETY: the first `len` elements are initialised; `len` is only
            // lowered (to the distinct count) through the returned reference.
            let hashes = unsafe { std::slice::from_raw_parts_mut(s.data, s.len) };
            (hashes, fpp, capacity, Some(&mut s.len))
        }
        None => (&mut [], DEFAULT_FPP, 0, None),
    };
    let size = |n: usize| size_for((n as u64).max(capacity).max(1), fpp, MAX_VALUE_BUCKET_LOG2);
    // Sort for the size the raw count needs: with no duplicates (the common case)
    // the deduplicating sort is already in the final bucket order.
    let mut sorted_log2 = size(hashes.len()).map_or(MAX_VALUE_BUCKET_LOG2, |p| p.bucket_count_log2) as u32;
    let distinct = dedup_in_bucket_order(hashes, sorted_log2);
    if let Some(len) = kept_len {
        *len = distinct; // the same set of keys, without repeats
    }
    let hashes = &mut hashes[..distinct];
    let mut params = match size(distinct) {
        Ok(p) => p,
        Err(SizingError::Capacity(why)) => full_error("too many distinct keys for one cuckoofilter value", why),
        Err(e) => sizing_error(e),
    };
    params.seed = DEFAULT_SEED;
    loop {
        let log2 = params.bucket_count_log2 as u32;
        if log2 != sorted_log2 {
            sort_in_bucket_order(hashes, log2);
            sorted_log2 = log2;
        }
        let v = alloc_value(&params);
        if v.table().bulk_insert_exclusive(hashes).is_ok() {
            return v;
        }
        // SAFETY: `v` was allocated above by palloc and is not referenced anymore.
        unsafe { pg_sys::pfree(v.as_datum().cast_mut_ptr()) };
        if params.bucket_count_log2 >= MAX_VALUE_BUCKET_LOG2 {
            full_error("too many distinct keys for one cuckoofilter value", format!("{distinct} distinct keys"));
        }
        params.bucket_count_log2 += 1;
    }
}

v1_functions! {
    /// `cf_agg_trans(internal, anyelement [, float8 [, bigint]]) -> internal`.
    fn cf_agg_trans(fcinfo) {
        // SAFETY: declared (internal, anyelement[, float8[, bigint]]) and non-strict, so each
        // argument is checked for NULL before it is read.
        unsafe {
            // A non-null internal state can only come from the executor, so the
            // (FFI) context check is needed only when the state is created.
            let state = match state_arg(fcinfo, 0) {
                Some(s) => s,
                None => &mut *HashList::new_in(agg_context(fcinfo, "cf_agg_trans"), 1024),
            };
            if (*fcinfo).nargs > 2 && !pgrx::fcinfo::pg_arg_is_null(fcinfo, 2) {
                state.set_fpp(f64::from_bits(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 2).value() as u64));
            }
            if (*fcinfo).nargs > 3 && !pgrx::fcinfo::pg_arg_is_null(fcinfo, 3) {
                state.set_capacity(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 3).value() as i64);
            }
            if !pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
                let h = call_cache(fcinfo).key.hash_arg(fcinfo, 1, DEFAULT_SEED);
                state.push(h);
            }
            pg_sys::Datum::from(state as *mut HashList)
        }
    }

    /// `cf_agg_combine(internal, internal) -> internal`: concatenates hash lists.
    fn cf_agg_combine(fcinfo) {
        // SAFETY: non-strict (internal, internal); NULLs are checked.
        unsafe {
            let cx = agg_context(fcinfo, "cf_agg_combine");
            match (state_arg(fcinfo, 0), state_arg(fcinfo, 1)) {
                (None, None) => pgrx::fcinfo::pg_return_null(fcinfo),
                (Some(a), None) => pg_sys::Datum::from(a as *mut HashList),
                (a, Some(b)) => {
                    let a = match a {
                        Some(a) => a,
                        // The first state must live in the aggregate context.
                        None => &mut *HashList::new_in(cx, b.len),
                    };
                    if a.fpp == 0.0 {
                        a.fpp = b.fpp;
                    } else if b.fpp != 0.0 {
                        a.set_fpp(b.fpp);
                    }
                    if a.capacity == 0 {
                        a.capacity = b.capacity;
                    } else if b.capacity != 0 {
                        a.set_capacity(b.capacity as i64);
                    }
                    a.reserve(b.len);
                    std::ptr::copy_nonoverlapping(b.data, a.data.add(a.len), b.len);
                    a.len += b.len;
                    pg_sys::Datum::from(a as *mut HashList)
                }
            }
        }
    }

    /// `cf_agg_serial(internal) -> bytea`: fpp (f64), capacity (u64), count (u64),
    /// hashes (u64), all little-endian.
    fn cf_agg_serial(fcinfo) {
        // SAFETY: strict; arg 0 is our HashList.
        let s = unsafe {
            agg_context(fcinfo, "cf_agg_serial");
            state_arg(fcinfo, 0).expect("strict")
        };
        let mut out = Vec::with_capacity(24 + 8 * s.len);
        out.extend_from_slice(&s.fpp.to_le_bytes());
        out.extend_from_slice(&s.capacity.to_le_bytes());
        out.extend_from_slice(&(s.len as u64).to_le_bytes());
        for h in s.hashes() {
            out.extend_from_slice(&h.to_le_bytes());
        }
        bytea_datum(&out)
    }

    /// `cf_agg_deserial(bytea, internal) -> internal`.
    fn cf_agg_deserial(fcinfo) {
        // SAFETY: strict; arg 0 is a bytea.
        unsafe {
            // Checked for misuse only; like PostgreSQL's own deserial functions this
            // builds the state in the current (short-lived) context, and the combine
            // function copies it into the aggregate context.
            agg_context(fcinfo, "cf_agg_deserial");
            let cx = pg_sys::CurrentMemoryContext;
            let raw = pg_sys::pg_detoast_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr());
            let bytes = std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(raw) as *const u8,
                pgrx::varlena::varsize_any_exhdr(raw),
            );
            let bad = || -> ! {
                ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION, "malformed cf_agg partial state");
            };
            if bytes.len() < 24 {
                bad();
            }
            let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
            let n = word(2);
            if (bytes.len() - 24) as u64 != n.saturating_mul(8) {
                bad();
            }
            let s = &mut *HashList::new_in(cx, n as usize);
            s.fpp = f64::from_bits(word(0));
            s.capacity = word(1);
            for c in bytes[24..].chunks_exact(8) {
                s.push(u64::from_le_bytes(c.try_into().unwrap()));
            }
            pg_sys::Datum::from(s as *mut HashList)
        }
    }

    /// `cf_agg_final(internal) -> cuckoofilter`. It reorders and deduplicates the
    /// state's hashes in place; the set they describe is unchanged, so the
    /// aggregate can still be finalized again or advanced further.
    fn cf_agg_final(fcinfo) {
        // SAFETY: non-strict (internal); NULL means no rows.
        unsafe {
            agg_context(fcinfo, "cf_agg_final");
            build_from_hashes(state_arg(fcinfo, 0)).as_datum()
        }
    }

    /// `cf_union_trans(cuckoofilter, cuckoofilter) -> cuckoofilter`: the transition
    /// and combine function of `cf_union_agg`. In an aggregate the state (arg 0) is
    /// the aggregate's own copy and is merged into in place; called directly it
    /// behaves like `cf_union`.
    fn cf_union_trans(fcinfo) {
        // SAFETY: strict; both arguments are cuckoofilters.
        unsafe {
            let mut cx: pg_sys::MemoryContext = std::ptr::null_mut();
            let in_agg = pg_sys::AggCheckCallContext(fcinfo, &mut cx) != 0;
            let raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<pg_sys::varlena>();
            let state = if in_agg && pgrx::varlena::varatt_is_4b_u(raw) && raw as usize % 8 == 0 {
                FilterValue::from_ptr(raw)
            } else {
                // First call (the state may still be a toast pointer) or a direct
                // call: work on a copy; the executor adopts the new pointer.
                super::datatype::filter_arg_copy(fcinfo, 0)
            };
            let input = filter_arg_once(fcinfo, 1);
            union_into(state, input).as_datum()
        }
    }
}

