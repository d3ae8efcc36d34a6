//! The rows of the `cuckoo_filters` view: the current database's named
//! filters that the caller may look up, with their statistics and, for durable
//! ones, what their last checkpoint wrote; of `cuckoo_region`, the region's
//! space; of `cuckoo_usage`, what each role uses in each database, with the
//! caps in effect.

use std::ffi::CStr;

use pgrx::prelude::*;

use super::attach::{region, session_limits};
use super::call::{database_exists, db, may_access, pin_current, user};
use super::reload::reason;
use crate::region::{BLOCK_BYTES, READERS_NONE, READERS_PUBLIC};

fn role_name(oid: u64) -> Option<String> {
    // SAFETY: noerr lookup; returns null for a dropped role.
    unsafe {
        let p = pg_sys::GetUserNameFromId(pg_sys::Oid::from(oid as u32), true);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

/// Rows of the `cuckoo_filters` view: the current database's filters that the
/// caller may look up.
#[pg_extern(volatile, parallel_safe, sql = false)]
#[allow(clippy::type_complexity)]
fn cuckoo_filters_rows() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(capacity, i64),
        name!(items, i64),
        name!(load_factor, f64),
        name!(bytes, i64),
        name!(fpp, f64),
        name!(inserts, i64),
        name!(lookups, i64),
        name!(deletes, i64),
        name!(failed_inserts, i64),
        name!(lookup_retries, i64),
        name!(kicks, i64),
        name!(owner, Option<String>),
        name!(lookup_grantee, Option<String>),
        name!(durable, bool),
        name!(state, String),
        name!(reason, Option<String>),
        name!(checkpoint_write_bytes, Option<i64>),
        name!(checkpoint_wal_bytes, Option<i64>),
        name!(disk_bytes, Option<i64>),
        name!(key_type, Option<String>),
        name!(expansion, i32),
        name!(tables, i32),
    ),
> {
    let r = region();
    let who = user();
    let mut rows = Vec::new();
    for info in r.list(db()) {
        if !may_access(&info, false, who) {
            continue;
        }
        // Totals over the tables; a filter that grows reports the sum of its
        // tables' bounds at their capacity (at most the rate it keeps).
        let (mut items, mut slots, mut capacity, mut bound, mut tables, mut bytes) =
            (0u64, 0u64, 0u64, 0f64, 0i32, info.blocks * BLOCK_BYTES);
        if !info.usable() {
            slots = info.params.map_or(1, |p| p.slot_count());
            capacity = info.capacity;
        } else {
            let Some(_pin) = pin_current(r, info.index, info.seq) else { continue };
            let Some(t) = r.tables(&info) else { continue };
            for s in t.shapes() {
                // The count is changed after each bucket word, so it can lag
                // (even dip below zero for a moment when a delete overtakes an
                // insert).
                let n = s.params.slot_count();
                items += (s.items as i64).clamp(0, n as i64) as u64;
                slots += n;
                capacity += s.capacity;
                bound += crate::filter::table_bound(&s.params, s.capacity);
                tables += 1;
            }
            bytes = t.blocks() * BLOCK_BYTES;
        }
        let fpp = if info.growth.is_some() && tables > 0 { bound.min(1.0) } else { info.fpp };
        let s = r.stat_totals(info.index);
        let d = info.durable.then(|| r.durable_stats(info.index));
        let grantee = match info.readers {
            READERS_NONE => None,
            READERS_PUBLIC => Some("public".to_string()),
            role => role_name(role),
        };
        rows.push((
            info.name.clone(),
            capacity as i64,
            items as i64,
            items as f64 / slots as f64,
            bytes as i64,
            fpp,
            s.inserts as i64,
            s.lookups as i64,
            s.deletes as i64,
            s.failed_inserts as i64,
            s.lookup_retries as i64,
            s.kicks as i64,
            role_name(info.owner as u64),
            grantee,
            info.durable,
            if info.usable() { "ready" } else { "needs reload" }.to_string(),
            (!info.usable()).then(|| reason::text(info.reload_reason).to_string()),
            d.as_ref().map(|d| d.cut_file_bytes as i64),
            d.as_ref().map(|d| d.cut_wal_bytes as i64),
            d.as_ref().map(|d| (d.base_bytes + d.delta_bytes) as i64),
            crate::sql::value::functions::key_type_text(info.key),
            info.growth.map_or(0, |g| g.expansion as i32),
            tables,
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    TableIterator::new(rows)
}

/// The one row of the `cuckoo_region` view: the shared region's size and how
/// much of it filters may still take.
#[pg_extern(volatile, parallel_safe, sql = false)]
#[allow(clippy::type_complexity)]
fn cuckoo_region_rows() -> TableIterator<
    'static,
    (
        name!(size_bytes, i64),
        name!(filter_bytes, i64),
        name!(free_bytes, i64),
        name!(largest_free_bytes, i64),
        name!(releasing_bytes, i64),
        name!(filters, i32),
        name!(max_filters, i32),
    ),
> {
    let s = region().space();
    TableIterator::new(vec![(
        s.size as i64,
        s.data_bytes as i64,
        s.free_bytes as i64,
        s.largest_free_bytes as i64,
        s.releasing_bytes as i64,
        s.entries_used as i32,
        s.entries as i32,
    )])
}

/// Rows of the `cuckoo_usage` view: the filters and region bytes each role
/// owns in each database (every database that exists: the region serves the
/// cluster),
/// for the roles whose privileges the caller has (a superuser: all; others
/// their own and those they are members of), and always a row for the
/// current role in this database; with the caps in effect in this session
/// (NULL: none).
#[pg_extern(volatile, parallel_safe, sql = false)]
#[allow(clippy::type_complexity)]
fn cuckoo_usage_rows() -> TableIterator<
    'static,
    (
        name!(role, Option<String>),
        name!(database, Option<String>),
        name!(filters, i64),
        name!(bytes, i64),
        name!(max_filters_per_role, Option<i64>),
        name!(max_bytes_per_role, Option<i64>),
        name!(max_filters_per_database, Option<i64>),
        name!(max_bytes_per_database, Option<i64>),
    ),
> {
    let r = region();
    let who = user();
    // Filters of dropped databases are nobody's (the next create or publish
    // drops them).
    let mut usage: Vec<_> = r.usage_rows().into_iter().filter(|u| database_exists(u.db)).collect();
    let here = (who.to_u32(), db());
    if !usage.iter().any(|u| (u.owner, u.db) == here) {
        usage.push(crate::region::UsageRow { owner: here.0, db: here.1, usage: Default::default() });
    }
    let caps = session_limits();
    let cap = |c: Option<u64>| c.map(|v| v.min(i64::MAX as u64) as i64);
    let mut rows: Vec<_> = usage
        .into_iter()
        // SAFETY: a catalog check on valid role ids (a dropped owner's OID
        // is a member of nothing; a superuser has every role's privileges).
        .filter(|u| unsafe { pg_sys::has_privs_of_role(who, pg_sys::Oid::from(u.owner)) })
        .map(|u| {
            (
                role_name(u.owner as u64),
                database_name(u.db),
                u.usage.filters as i64,
                u.usage.bytes as i64,
                cap(caps.role_filters),
                cap(caps.role_bytes),
                cap(caps.database_filters),
                cap(caps.database_bytes),
            )
        })
        .collect();
    rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    TableIterator::new(rows)
}

fn database_name(oid: u32) -> Option<String> {
    // SAFETY: a syscache lookup; null for a database that does not exist.
    unsafe {
        let p = pg_sys::get_database_name(pg_sys::Oid::from(oid));
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}
