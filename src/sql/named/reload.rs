//! Filters that need a reload: the reasons a durable filter's contents can be
//! lost (kept as a code in its registry entry and in the WAL), the error that
//! probes of such a filter raise, and the placeholder entry that keeps its
//! name, owner and grant until it is published again.

use pgrx::prelude::*;

use super::errors::fail;
use crate::region::wal::Meta;
use crate::region::{EntryInfo, Locked, NewFilter, Region, RegionError};

/// Reasons a filter must be published again (the registry stores the code).
pub mod reason {
    pub const REPLAY_FULL: u64 = 1;
    pub const NO_ROOM: u64 = 2;
    pub const NOT_SAVED: u64 = 3;
    pub const NOT_RESTORED: u64 = 4;
    pub const FILES_DAMAGED: u64 = 5;
    pub const FILES_INCOMPLETE: u64 = 6;
    pub const RESTART_GAP: u64 = 7;
    pub const FILES_MISSING: u64 = 8;
    pub const REPLAY_REFUSED: u64 = 9;
    /// Never a filter's reason: a bit of a file header's reason, set when the
    /// file was written by replay of a copy (a base backup) that may lack
    /// changes, before recovery proved it whole; restore reads it as
    /// "unverified" (beside the reason in the other bits), not as a reload.
    pub const UNVERIFIED_COPY: u64 = 1 << 32;

    pub fn text(code: u64) -> &'static str {
        match code {
            FILES_DAMAGED => "its files in the data directory are damaged",
            FILES_INCOMPLETE => "a file it needs is missing from the data directory (a later one is there) and recovery did not restore it",
            REPLAY_FULL => "recovery could not re-insert a key (the filter was too full to replay its changes in log order)",
            NO_ROOM => "it did not fit in cuckoo.shared_memory when it was restored",
            NOT_SAVED => "the server stopped without saving it and recovery did not restore it",
            NOT_RESTORED => "replay could not install its contents (old copies stayed in use)",
            RESTART_GAP => "this node restarted from a checkpoint that its files do not cover (its primary recovered from a crash, or this node could not write its files), and recovery has not yet restored the filter from the WAL",
            FILES_MISSING => "its files are missing from the data directory",
            REPLAY_REFUSED => "recovery met a WAL record of it that it could not apply",
            _ => "its contents were lost",
        }
    }
}

/// The error for a filter whose contents were lost.
pub(super) fn needs_reload(info: &EntryInfo) -> ! {
    let bound = super::errors::is_bound(&info.name);
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("cuckoo filter \"{}\" needs a reload: {}", info.name, reason::text(info.reload_reason)),
        Some(if bound {
            "It is bound to a table: fill it again from the table with cf_rebuild()."
        } else {
            "Publish its contents again with cf_publish (for example from cf_agg over the source table), or drop it."
        }),
    )
}

/// Keeps filter `spec` as generation `gen` needing a reload: the existing
/// entry of that name is marked in place (no space needed), or a placeholder
/// is made.
pub(super) fn placeholder(
    r: &Region,
    lk: &Locked,
    existing: Option<&EntryInfo>,
    spec: &NewFilter<'_>,
    meta: &Meta,
    gen: u64,
    why: u64,
) -> Result<(), RegionError> {
    match existing {
        Some(e) => {
            // The entry's contents are of another generation (or were lost):
            // they go, so that nothing of this generation is ever applied to
            // them or filed as its contents.
            if r.clear_contents(lk, e, &meta.params, meta.capacity, meta.fpp, meta.key, meta.growth, gen, why).is_err()
            {
                // No retired record free now: mark in place, with a reason that
                // never counts as contents.
                r.set_reload(lk, e, gen, reason::NOT_RESTORED)?;
            }
            if let Some(info) = r.find(meta.db, &meta.name) {
                r.set_readers(lk, &info, meta.readers)?;
            }
            Ok(())
        }
        None => {
            let info = r.create_placeholder(lk, spec, &meta.params, gen, why)?;
            r.set_readers(lk, &info, meta.readers)
        }
    }
}
