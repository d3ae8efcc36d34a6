//! SQL functions over `cuckoofilter` values: probe, insert, delete, union, create
//! empty, count and describe. Values are immutable from SQL: changing functions
//! return a new value.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::datatype::{alloc_value, call_cache, filter_arg, filter_arg_copy, filter_arg_once, FilterValue, MAX_VALUE_BUCKET_LOG2};
use crate::filter::sizing::{self, planned_capacity, size_for, SizingError};
use crate::filter::Full;

/// Raises 22023 for a sizing error.
pub fn sizing_error(e: SizingError) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string());
}

pub fn full_error(what: &str, detail: String) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, what.to_string(), detail);
}

/// Union of two values: the result has the smaller bucket count (a fingerprint's
/// bucket in a larger table folds onto one of its candidates in a smaller one).
/// `dst` is modified in place when it is at least as small as `src`; otherwise a
/// new value is returned.
pub fn union_into(dst: FilterValue, src: FilterValue) -> FilterValue {
    let (pd, ps) = (dst.header().params(), src.header().params());
    if let Err(why) = pd.mergeable_with(&ps) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "cannot union cuckoo filters with different parameters",
            why
        );
    }
    let (dst_items, src_items) = (dst.table().item_count(), src.table().item_count());
    let (into, from) = if pd.bucket_count_log2 <= ps.bucket_count_log2 { (dst, src) } else { (src.copy(), dst) };
    if let Err(Full) = into.table().merge_from(&from.table()) {
        full_error(
            "cuckoo filter union does not fit",
            format!(
                "{dst_items} + {src_items} items do not fit the {} slots of the smaller filter; build both with the same capacity (cf_agg(key, fpp, capacity))",
                into.header().params().slot_count()
            ),
        );
    }
    into
}

v1_functions! {
    /// `cf_contains(cuckoofilter, anyelement) -> boolean`, reading the filter in
    /// place (or from this call site's detoast cache).
    fn cf_contains_value(fcinfo) {
        // SAFETY: strict function: both arguments are non-null; arg 0 is a
        // cuckoofilter, arg 1 is anyelement.
        unsafe {
            let cache = call_cache(fcinfo);
            let v = filter_arg(fcinfo, 0, &mut cache.filter);
            let h = cache.key.hash_arg(fcinfo, 1, v.header().seed);
            pg_sys::Datum::from(v.table().contains(h))
        }
    }

    /// `cf_insert(cuckoofilter, anyelement) -> cuckoofilter`.
    fn cf_insert_value(fcinfo) {
        // SAFETY: strict; arg 0 cuckoofilter, arg 1 anyelement.
        unsafe {
            let v = filter_arg_copy(fcinfo, 0);
            let h = call_cache(fcinfo).key.hash_arg(fcinfo, 1, v.header().seed);
            if v.table().insert(h).is_err() {
                full_error(
                    "cuckoo filter is full",
                    format!("it holds {} items in {} slots", v.table().item_count(), v.header().params().slot_count()),
                );
            }
            v.as_datum()
        }
    }

    /// `cf_delete(cuckoofilter, anyelement) -> cuckoofilter`: removes one copy of
    /// the key's fingerprint; the value is unchanged if there is none.
    fn cf_delete_value(fcinfo) {
        // SAFETY: strict; arg 0 cuckoofilter, arg 1 anyelement.
        unsafe {
            let v = filter_arg_copy(fcinfo, 0);
            let h = call_cache(fcinfo).key.hash_arg(fcinfo, 1, v.header().seed);
            v.table().delete(h);
            v.as_datum()
        }
    }

    /// `cf_union(cuckoofilter, cuckoofilter) -> cuckoofilter`.
    fn cf_union_value(fcinfo) {
        // SAFETY: strict; both arguments are cuckoofilters.
        unsafe {
            let a = filter_arg_copy(fcinfo, 0);
            let b = filter_arg_once(fcinfo, 1);
            union_into(a, b).as_datum()
        }
    }

    /// `cf_empty(capacity bigint, fpp float8) -> cuckoofilter`.
    fn cf_empty(fcinfo) {
        // SAFETY: strict; arg 0 is int8, arg 1 is float8 (both by value).
        let (capacity, fpp) = unsafe {
            (
                pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).value() as i64,
                f64::from_bits(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as u64),
            )
        };
        if capacity < 1 {
            sizing_error(SizingError::Capacity(format!("capacity must be at least 1, got {capacity}")));
        }
        let params = size_for(capacity as u64, fpp, MAX_VALUE_BUCKET_LOG2).unwrap_or_else(|e| sizing_error(e));
        alloc_value(&params).as_datum()
    }

    /// `cf_count(cuckoofilter) -> bigint`: occupied slots.
    fn cf_count(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter.
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        pg_sys::Datum::from(v.table().item_count() as i64)
    }

    /// `cf_info(cuckoofilter) -> jsonb`.
    fn cf_info(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter.
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        let p = v.header().params();
        let items = v.table().item_count();
        let capacity = planned_capacity(&p);
        let info = serde_json::json!({
            "capacity": capacity,
            "items": items,
            "load_factor": items as f64 / p.slot_count() as f64,
            "fingerprint_bits": p.fingerprint_bits,
            "bucket_size": p.slots_per_bucket,
            "buckets": p.bucket_count(),
            "bytes": v.total_len(),
            "bits_per_item": if items > 0 { Some(8.0 * v.total_len() as f64 / items as f64) } else { None },
            "fpp": sizing::expected_fpp(&p, items),
            "fpp_at_capacity": sizing::expected_fpp(&p, capacity),
            "hash": "xxh3_64",
            "seed": format!("{:#018x}", p.seed),
            "format_version": crate::filter::layout::FORMAT_VERSION,
        });
        pgrx::JsonB(info).into_datum().expect("jsonb")
    }
}
