//! The filter core: layout, sizing, hashing, the lock-free table over bucket words
//! and the dense value layout. Nothing here depends on pgrx, so it builds and tests
//! with plain `cargo test`, and the same code serves `cuckoofilter` values and
//! filters in shared memory.

pub mod build;
pub mod chain;
pub mod dense;
pub mod hash;
pub mod host;
pub mod layout;
pub mod multi;
pub mod packed;
pub mod radix;
pub mod sizing;
pub mod sync;
pub mod table;

#[cfg(all(test, not(loom)))]
mod decode_props;
#[cfg(all(test, loom))]
pub(crate) mod loom_tests;
#[cfg(all(test, not(loom)))]
mod stress_tests;

pub use layout::{FormatError, Geometry, Mapping, Params};
pub use table::newkey::NewKey;
pub use table::{Full, OpStats, OwnedFilter, Table, WriteHook};
