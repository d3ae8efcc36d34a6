//! Named filters in PostgreSQL shared memory, from the bottom up:
//!
//! - `errors`: the errors several places raise;
//! - `attach`: the settings, the shared-memory hooks, the region and its
//!   registry lock, this process's slot;
//! - `reload`: filters whose contents were lost (reasons, placeholders);
//! - `log`: writing changes to the WAL, and the commit that waits for it;
//! - `cut`: checkpoint cuts of durable filters into files;
//! - `restore`: reading the files back when shared memory is set up;
//! - `replay`: the WAL resource manager's replay;
//! - `worker`: the durability background worker;
//! - `citus`: on a Citus cluster, which filter a by-name call in a
//!   distributed query may use;
//! - `cluster`: the functions that publish a value to every node of a Citus
//!   cluster and record it;
//! - `pin`: a distributed query's lookups pinned to the publishes recorded
//!   when it was planned;
//! - `call`: how a function call reaches a filter (name, rights, pins, the
//!   caps a growing filter keeps to);
//! - `roles`: `DROP ROLE` of a role that owns filters is refused;
//! - `functions`: the SQL functions over filter names;
//! - `view`: the rows of the `cuckoo_filters`, `cuckoo_region` and
//!   `cuckoo_usage` views.
//!
//! Each module uses only modules listed above it. The region itself is
//! `crate::region` (no pgrx).

pub mod attach;
pub mod call;
pub mod citus;
pub mod cluster;
pub mod cut;
pub mod errors;
pub mod functions;
pub mod log;
pub mod pin;
pub mod reload;
pub mod replay;
pub mod restore;
pub mod roles;
pub mod view;
pub mod worker;

/// From `_PG_init`: when loaded at server start, the settings and hooks (the
/// `DROP ROLE` check among them), the WAL resource manager, the commit
/// callback and the durability worker.
/// Loaded on first use instead, values work and named filters explain what is
/// missing.
pub fn init() {
    if !attach::init(restore::restore) {
        return;
    }
    roles::register();
    replay::register();
    log::register_commit_flush();
    worker::register();
}
