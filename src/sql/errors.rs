//! Errors that values and named filters raise alike, with their SQLSTATEs.
//! (Named filters' own are in `named/errors.rs`.)

use pgrx::prelude::*;

use crate::filter::SizingError;

/// 22003: an insert of a key that has no equal among the filter's keys (42.5
/// into an integer filter).
pub fn no_equal_key_error() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        "the key has no equal among the cuckoo filter's keys",
        "A whole number in the range of the filter's key type can be inserted; this one is not."
    );
}

/// Raises 22023 for a sizing error.
pub fn sizing_error(e: SizingError) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string());
}

pub fn full_error(what: &str, detail: String) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, what.to_string(), detail);
}
