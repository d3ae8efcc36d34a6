//! SQL functions over `cuckoofilter` values: probe, insert, delete, union, create
//! empty, count and describe. Values are immutable from SQL: changing functions
//! return a new value.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::{call_cache, probe_arg};
use super::datatype::{filter_arg_once, max_value_buckets, value_from_tables, FilterValue};
use crate::filter::v3::{self, UnionError};
use crate::filter::FORMAT_V1;
use crate::filter::{self, size_for_capacity, SizingError};
use crate::filter::{KeyKind, KeyType};
use crate::filter::{Mapping, OwnedFilter};
use crate::sql::errors::{full_error, no_equal_key_error, sizing_error};

/// The most buckets a value built at rate `fpp` may have (its shape at 1 GB);
/// 22023 for an unusable rate.
pub fn value_max_buckets(fpp: f64) -> u64 {
    filter::shape_for(fpp).map(|shape| max_value_buckets(&shape)).unwrap_or_else(|e| sizing_error(e))
}

/// What `cf_info` and the `cuckoo_filters` view show of a recorded key type:
/// the type's name, or for a type of another database (OID not found here)
/// its kind and OID; `pending` for a named filter whose first insert fixes it;
/// null if none.
pub fn key_type_text(key: KeyType) -> Option<String> {
    if !key.is_recorded() {
        return None;
    }
    if key.kind == crate::filter::KeyKind::Pending {
        return Some("pending".to_string());
    }
    // SAFETY: format_type_extended with FORMAT_TYPE_ALLOW_INVALID returns "???"
    // for an OID that is not a type here instead of raising.
    let name = unsafe {
        let s = pg_sys::format_type_extended(pg_sys::Oid::from(key.oid), -1, pg_sys::FORMAT_TYPE_ALLOW_INVALID as u16);
        std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
    };
    Some(match (name.as_str(), key.kind) {
        ("???", KeyKind::Enum) => "an enum of another database (keys are its labels)".to_string(),
        ("???", _) => format!("type OID {} of another database", key.oid),
        _ => name,
    })
}

/// The key type of the union of `a` and `b`: theirs if they agree; nothing
/// recorded if one of them records nothing (keys then hash as before key types
/// were recorded); two different recorded types cannot be unioned (22023).
pub fn union_key(a: &FilterValue, b: &FilterValue) -> KeyType {
    let (ka, kb) = (a.key_type(), b.key_type());
    if ka == kb {
        return ka;
    }
    if ka.is_recorded() && kb.is_recorded() || ka.kind == KeyKind::Enum || kb.kind == KeyKind::Enum {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "cannot union cuckoo filters of different key types",
            "Build both filters over keys of one type."
        );
    }
    KeyType::NONE
}

fn seeds_differ(why: String) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        "cannot union cuckoo filters with different hash seeds",
        why
    );
}

/// The union of two values as tables of bucket words: every key of both.
/// Tables of one shape that fit are merged into one; the others are kept
/// side by side (a value of format 3). 22023 for filters with different hash
/// seeds, 54000 past 255 tables.
pub fn union_filters(a: &FilterValue, b: &FilterValue) -> Vec<OwnedFilter> {
    match v3::union(a.copy_tables(), b.copy_tables()) {
        Ok(tables) => tables,
        Err(UnionError::Seeds(why)) => seeds_differ(why),
        Err(UnionError::TooManyTables(n)) => full_error(
            "cuckoo filter union has too many tables",
            format!(
                "the union would hold {n} tables of different shapes; a value holds at most {}",
                v3::MAX_VALUE_TABLES
            ),
        ),
    }
}

v1_functions! {
    /// `cuckoo_library_version() -> text`: the version of the shared library
    /// this session runs (after installing a new release, the preloaded library
    /// changes only at the next server restart). Update scripts declare it
    /// first, so that an update fails cleanly, before changing anything, when
    /// the server still runs an older library.
    fn cuckoo_library_version(_fcinfo) {
        // SAFETY: a text datum built in the current memory context.
        unsafe { pg_sys::Datum::from(pg_sys::cstring_to_text(concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const std::ffi::c_char)) }
    }

    /// `cf_contains(cuckoofilter, anyelement) -> boolean`, reading the filter in
    /// place (or from this call site's detoast cache).
    fn cf_contains_value(fcinfo) {
        // SAFETY: strict function: both arguments are non-null; arg 0 is a
        // cuckoofilter, arg 1 is anyelement.
        unsafe { pg_sys::Datum::from(probe_arg(fcinfo, 0, 1)) }
    }

    /// `cf_insert(cuckoofilter, anyelement) -> cuckoofilter`.
    fn cf_insert_value(fcinfo) {
        // SAFETY: strict; arg 0 cuckoofilter, arg 1 anyelement.
        unsafe {
            let v = filter_arg_once(fcinfo, 0);
            let Some(h) = call_cache(fcinfo).key.hash_arg_for(fcinfo, 1, v.seed(), v.key_type()) else { no_equal_key_error() };
            let mut tables = v.copy_tables();
            if v3::insert(&mut tables, v.growth(), h, super::datatype::MAX_MADE_BODY_BYTES).is_err() {
                let slots: u64 = tables.iter().map(|t| t.table().params().slot_count()).sum();
                full_error("cuckoo filter is full", format!("it holds {} items in {slots} slots", v.item_count()));
            }
            value_from_tables(&tables, v.key_type(), v.growth()).as_datum()
        }
    }

    /// `cf_delete(cuckoofilter, anyelement) -> cuckoofilter`: removes one copy of
    /// the key's fingerprint; the value is unchanged if there is none.
    fn cf_delete_value(fcinfo) {
        // SAFETY: strict; arg 0 cuckoofilter, arg 1 anyelement.
        unsafe {
            let v = filter_arg_once(fcinfo, 0);
            let tables = v.copy_tables();
            // A key with no equal among the filter's keys was never inserted.
            if let Some(h) = call_cache(fcinfo).key.hash_arg_for(fcinfo, 1, v.seed(), v.key_type()) {
                v3::delete(&tables, h);
            }
            value_from_tables(&tables, v.key_type(), v.growth()).as_datum()
        }
    }

    /// `cf_union(cuckoofilter, cuckoofilter) -> cuckoofilter`.
    fn cf_union_value(fcinfo) {
        // SAFETY: strict; both arguments are cuckoofilters.
        unsafe {
            let a = filter_arg_once(fcinfo, 0);
            let b = filter_arg_once(fcinfo, 1);
            value_from_tables(&union_filters(&a, &b), union_key(&a, &b), None).as_datum()
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
        let s = size_for_capacity(capacity as u64, fpp, value_max_buckets(fpp)).unwrap_or_else(|e| sizing_error(e));
        // `cf_empty(capacity, fpp, key_type)`: a filter for keys of that type.
        // SAFETY: strict; a third argument is a regtype (an OID, by value).
        let key = unsafe {
            if (*fcinfo).nargs > 2 {
                crate::sql::keys::declared_key_type(pg_sys::Oid::from(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 2).value() as u32))
            } else {
                KeyType::NONE
            }
        };
        // Written straight into the value: no table of bucket words (8 bytes
        // a bucket) for a filter that holds nothing.
        let header = crate::filter::v2::DenseHeader { params: s.params, items: 0, capacity: s.capacity, key };
        super::datatype::value_from_words(&header, std::iter::repeat_n(0, s.params.bucket_count as usize)).as_datum()
    }

    /// `cf_count(cuckoofilter) -> bigint`: occupied slots.
    fn cf_count(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter.
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        pg_sys::Datum::from(v.item_count() as i64)
    }

    /// `cf_count(cuckoofilter, key anynonarray) -> integer`: the copies of the
    /// key's fingerprint (what `CF.COUNT` answers: at least the times it was
    /// inserted and not deleted); 0 for a key with no equal among the filter's
    /// keys.
    fn cf_count_key_value(fcinfo) {
        // SAFETY: strict; arg 0 a cuckoofilter, arg 1 the key.
        unsafe {
            let v = filter_arg_once(fcinfo, 0);
            let n = match call_cache(fcinfo).key.hash_arg_for(fcinfo, 1, v.seed(), v.key_type()) {
                Some(h) => v.copies(h),
                None => 0,
            };
            pg_sys::Datum::from(n.min(i32::MAX as u64) as i32)
        }
    }

    /// `cf_info(cuckoofilter) -> jsonb`: for one table its shape; for several
    /// (format 3) the totals, and each table's shape under `tables_detail`.
    fn cf_info(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter.
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        let tables = v.tables();
        let items = v.item_count();
        let capacity = v.capacity();
        let slots: u64 = tables.iter().map(|t| t.params.slot_count()).sum();
        let encoding = |p: &crate::filter::Params| {
            if v.format_version() == FORMAT_V1 {
                "words"
            } else {
                crate::filter::v2::Encoding::for_slots(p.slots_per_bucket).name()
            }
        };
        let mapping = |p: &crate::filter::Params| match p.mapping {
            Mapping::Fastrange => "fastrange",
            Mapping::PowerOfTwoXor => "power-of-two xor",
        };
        let fpp_at_capacity = v3::bound(&tables, true);
        let mut info = serde_json::json!({
            "capacity": capacity,
            "items": items,
            "load_factor": items as f64 / slots as f64,
            "bytes": v.total_len(),
            "bits_per_item": if items > 0 { Some(8.0 * v.total_len() as f64 / items as f64) } else { None },
            "fpp": v.fpp_bound(),
            "fpp_at_capacity": fpp_at_capacity,
            "hash": "xxh3_64",
            "seed": format!("{:#018x}", v.seed()),
            "format_version": v.format_version(),
            "key_type": key_type_text(v.key_type()),
            "tables": tables.len(),
        });
        let shape = |t: &crate::filter::v2::DenseHeader| {
            serde_json::json!({
                "fingerprint_bits": t.params.fingerprint_bits,
                "bucket_size": t.params.slots_per_bucket,
                "buckets": t.params.bucket_count,
                "bucket_mapping": mapping(&t.params),
                "bucket_encoding": encoding(&t.params),
            })
        };
        let o = info.as_object_mut().expect("an object");
        if tables.len() == 1 {
            o.extend(shape(&tables[0]).as_object().expect("an object").clone());
        } else {
            let detail: Vec<serde_json::Value> = tables
                .iter()
                .map(|t| {
                    let mut d = shape(t);
                    let m = d.as_object_mut().expect("an object");
                    m.insert("capacity".into(), t.capacity.into());
                    m.insert("items".into(), t.items.into());
                    m.insert("fpp".into(), filter::expected_fpp(&t.params, t.items).into());
                    d
                })
                .collect();
            o.insert("tables_detail".into(), detail.into());
        }
        if let Some(g) = v.growth() {
            o.insert("expansion".into(), g.expansion.into());
            o.insert("growth_fpp".into(), g.fpp.into());
        }
        pgrx::JsonB(info).into_datum().expect("jsonb")
    }
}
