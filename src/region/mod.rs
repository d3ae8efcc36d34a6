//! The shared region that holds named filters: its block allocator (a fail-safe
//! tagged allocator without locks, over runs of blocks), the registry of filters
//! by (database, name) with epoch-based reclamation, the checkpoint units, files
//! and WAL records of durable filters. Nothing here depends on pgrx.
//!
//! This file is the region's front: its modules are private, and what the SQL
//! glue uses is exported here (`tests/tools/layering.py` checks that nothing
//! goes around it).

mod allocator;
mod bound;
mod durable;
mod epoch;
mod files;
mod record;
mod registry;
mod saved;

// The front: everything the SQL glue may use is named here; the modules
// above are private.

pub use durable::UNIT_WORDS;
pub use registry::tables::RegionTables;
pub use registry::{
    published_fpp, DurableGate, EntryInfo, Layout, LimitHit, LimitKind, Limits, Locked, NewFilter, Pin, Region,
    RegionError, SnapshotBusy, Stamp, StatTotals, Tally, UsageRow, BLOCK_BYTES, CHANGED_META, CHANGED_WORDS,
    NEEDS_BASE, READERS_NONE, READERS_PUBLIC, UNVERIFIED,
};
pub use registry::{word_offsets, TableSpec};
pub use saved::{decode as decode_saved, FileKind};

/// Filters bound to a table column (`bound.rs`): their slots, the queue of
/// pending deletes, and the copy cap with its remover gate.
pub mod binding {
    pub use super::bound::{
        may_remove, versions_to_copy, Area, BoundSlot, PendingDelete, QueueLocked, Removing, SlotRefused, Verdict,
        BOUND_NAME_BYTES, COPY_CAP,
    };
}

/// The WAL records of durable filters (`record.rs`): what the SQL layer logs
/// and replays.
pub mod wal {
    pub use super::record::{ContentKind, ExtKind, Kind, Meta, QueueCounts, Record, CHUNK_WORDS, MANY_MAX};
}

/// The checkpoint files of durable filters (`files.rs`): cuts, deltas and the
/// coverage file.
pub mod disk {
    pub use super::files::{
        chain, foreign, list, load, read_coverage, read_coverage_as, read_header, remove, remove_temporary,
        write_coverage, write_coverage_as, Chain, CoverEntry, Coverage, FileWriter, Finish, Header, Kind, Name,
        COVERAGE, DIR,
    };
}
