//! The errors of named filters that more than one place raises: a filter that
//! does not exist, a registry change that failed, durable changes not open.
//! Each has its SQLSTATE and, where the user can act, a hint.

use pgrx::prelude::*;

use crate::region::RegionError;

/// Raises an ERROR with a SQLSTATE, a message and an optional hint.
pub(super) fn fail(code: PgSqlErrorCode, message: String, hint: Option<&str>) -> ! {
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
    }
}

pub(super) fn closed_error() -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "durable cuckoo filters cannot be changed now: the cuckoo durability worker is not running".into(),
        Some("It starts with the server and restarts within a second after an error; see the server log. It needs a free max_worker_processes slot."),
    )
}
