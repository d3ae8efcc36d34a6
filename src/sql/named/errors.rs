//! The errors of named filters that more than one place raises: a filter that
//! does not exist, a registry change that failed, a cap per role or database
//! passed, durable changes not open. Each has its SQLSTATE and, where the user
//! can act, a hint.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::region::RegionError;
use crate::region::{LimitHit, LimitKind};

/// Raises an ERROR with a SQLSTATE, a message and an optional hint.
pub(crate) fn fail(code: PgSqlErrorCode, message: String, hint: Option<&str>) -> ! {
    let mut report = pgrx::pg_sys::panic::ErrorReport::new(code, message, "cuckoo");
    if let Some(h) = hint {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

pub(super) fn not_found(name: &str) -> ! {
    fail(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("cuckoo filter \"{name}\" does not exist"), None)
}

pub(super) fn region_error(name: &str, e: RegionError) -> ! {
    match e {
        RegionError::NotFound => not_found(name),
        RegionError::Exists => {
            fail(PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT, format!("cuckoo filter \"{name}\" already exists"), None)
        }
        RegionError::NoSpace { .. } => fail(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!("not enough cuckoo shared memory for filter \"{name}\": {e}"),
            Some("Drop unused filters, create a smaller one, or raise cuckoo.shared_memory (takes effect at restart)."),
        ),
        RegionError::NoEntries { .. } => fail(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!("no room for cuckoo filter \"{name}\": {e}"),
            Some("Drop unused filters or raise cuckoo.shared_memory (one entry per 64 kB)."),
        ),
        RegionError::BadName(why) => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, why, None),
        RegionError::BadParams(_) => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string(), None),
        RegionError::Busy => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
            format!("cuckoo filter \"{name}\" cannot be changed now: {e}"),
            None,
        ),
        RegionError::Closed => closed_error(),
        RegionError::OverLimit(hit) => over_limit(name, &hit, false),
    }
}

/// A role's name, or how to name one that no longer exists.
pub(super) fn role_text(oid: u32) -> String {
    // SAFETY: noerr lookup; null for a role that does not exist.
    unsafe {
        let p = pg_sys::GetUserNameFromId(pg_sys::Oid::from(oid), true);
        if p.is_null() {
            format!("role with OID {oid}")
        } else {
            format!("role \"{}\"", CStr::from_ptr(p).to_string_lossy())
        }
    }
}

/// A database's name, or how to name one that no longer exists.
pub(super) fn database_text(oid: u32) -> String {
    // SAFETY: a syscache lookup; null for a database that does not exist.
    unsafe {
        let p = pg_sys::get_database_name(pg_sys::Oid::from(oid));
        if p.is_null() {
            format!("database with OID {oid}")
        } else {
            format!("database \"{}\"", CStr::from_ptr(p).to_string_lossy())
        }
    }
}

/// A change to filter `name` that would pass a cap (`growing`: an insert
/// whose filter is full and could not add a table): 53200, the message
/// naming whose cap, the hint the setting and the figures.
pub(super) fn over_limit(name: &str, hit: &LimitHit, growing: bool) -> ! {
    let (whose, setting, scope) = match hit.kind {
        LimitKind::RoleFilters => (role_text(hit.owner), "cuckoo.max_filters_per_role", "in all databases"),
        LimitKind::RoleBytes => (role_text(hit.owner), "cuckoo.max_bytes_per_role", "in all databases"),
        LimitKind::DatabaseFilters => (database_text(hit.db), "cuckoo.max_filters_per_database", "of all roles"),
        LimitKind::DatabaseBytes => (database_text(hit.db), "cuckoo.max_bytes_per_database", "of all roles"),
    };
    let bytes = matches!(hit.kind, LimitKind::RoleBytes | LimitKind::DatabaseBytes);
    let what = if bytes { "shared memory" } else { "filters" };
    let message = if growing {
        format!(
            "cuckoo filter \"{name}\" is full and cannot grow: a new table would exceed the cap on {what} of {whose}"
        )
    } else {
        format!("cuckoo filter \"{name}\" would exceed the cap on {what} of {whose}")
    };
    let mut whose = whose;
    whose[..1].make_ascii_uppercase();
    let verb = if matches!(hit.kind, LimitKind::RoleFilters | LimitKind::RoleBytes) { "owns" } else { "holds" };
    let usage = if bytes {
        let needs = if growing { "the filter's next table needs" } else { "this needs" };
        let besides = if hit.replacing { format!(" besides \"{name}\"") } else { String::new() };
        format!(
            "{whose} {verb} {} bytes of filters{besides} ({scope}), {needs} {} more, and {setting} allows {} bytes.",
            hit.used, hit.requested, hit.cap
        )
    } else {
        let filters = |n: u64| if n == 1 { "1 filter".to_string() } else { format!("{n} filters") };
        format!("{whose} {verb} {} ({scope}) and {setting} allows {}.", filters(hit.used), hit.cap)
    };
    let hint = if growing {
        format!(
            "{usage} The keys inserted before stay. Drop filters with cf_drop, or ask a superuser to raise {setting}."
        )
    } else {
        format!("{usage} Drop filters with cf_drop, make a smaller one, or ask a superuser to raise {setting}.")
    };
    fail(PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, message, Some(&hint))
}

pub(super) fn closed_error() -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "durable cuckoo filters cannot be changed now: the cuckoo durability worker is not running".into(),
        Some("It starts with the server and restarts within a second after an error; see the server log. It needs a free max_worker_processes slot."),
    )
}

/// Set by `sql::bound`: whether filter `name` is bound to a table (and is
/// not being made again by its binding in this transaction).
pub(crate) static mut BOUND_RESERVED: Option<fn(&str) -> bool> = None;

/// Refuses to create, change or drop filter `name` by name while it is bound
/// to a table (55006): its contents follow the table, and only the binding's
/// functions (`cf_unbind`, `cf_rebuild`) and triggers change them.
pub(crate) fn refuse_if_bound(name: &str) {
    if is_bound(name) {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
            format!("cuckoo filter \"{name}\" is bound to a table"),
            Some("A bound filter changes only with its table: cf_rebuild() fills it again, cf_unbind() ends the binding."),
        );
    }
}

/// Whether filter `name` is bound to a table (see [`BOUND_RESERVED`]).
pub(crate) fn is_bound(name: &str) -> bool {
    // SAFETY: BOUND_RESERVED is set once, in _PG_init.
    unsafe { *std::ptr::addr_of!(BOUND_RESERVED) }.is_some_and(|f| f(name))
}
