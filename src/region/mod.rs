//! The shared region that holds named filters: its block allocator (the fail-safe
//! tagged allocator of source §4, over runs of blocks) and the registry of filters
//! by (database, name) with epoch-based reclamation. Nothing here depends on pgrx.

pub mod allocator;
pub mod durable;
pub mod epoch;
pub mod files;
pub mod registry;
pub mod saved;
pub mod wal;

pub use registry::{EntryInfo, Layout, Locked, NewFilter, Region, RegionError, SnapshotBusy, Stamp, StatTotals};
