//! The filter core: layout, sizing, hashing, the lock-free table over bucket
//! words, filters that grow, and the value formats. Nothing here depends on pgrx,
//! so it builds and tests with plain `cargo test`, and the same code serves
//! `cuckoofilter` values and filters in shared memory.
//!
//! This file is the core's front: its modules are private, and what the layers
//! above use is exported here (`tests/tools/layering.py` checks that nothing
//! goes around it).

mod atomic;
mod build;
mod chain;
mod dense;
mod hash;
mod host;
mod key_type;
mod layout;
mod multi;
mod packed;
mod radix;
mod sizing;
mod table;
#[cfg(not(loom))]
mod threads;

#[cfg(all(test, not(loom)))]
mod decode_props;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod stress_tests;
#[cfg(test)]
mod test_rng;

// The front: everything the layers above (the region, the SQL glue, the
// native benchmark) may use is named here; the modules above are private.

#[cfg(not(loom))]
pub use build::sort_dedup_threads;
pub use build::{
    build_filter, check_run, encode_run, merge_dedup, run_hashes, sort_dedup, BuildError, MAX_BUILD_RETRIES,
};
pub use chain::owned::OwnedChain;
pub use chain::{Chain, Deleted, Directory, Growth, Tables, DIRECTORY_BYTES, MAX_TABLES};
pub use hash::{bucket_order_key, hash_bytes, hash_i64};
pub use host::{
    check_every, push, set_interrupt_check, set_interrupt_pending, set_out_of_memory, vec_filled, vec_with_capacity,
};
pub use key_type::{KeyKind, KeyType};
pub use layout::{
    format_version, parse_v1, parse_v1_header, FormatError, Geometry, Mapping, Params, V1Header, WordsHeader,
    DEFAULT_SEED, FORMAT_V1, FORMAT_V2, MAX_BUCKET_COUNT, V1_HEADER_BYTES, WORDS_HEADER_BYTES,
};
pub use sizing::{
    expected_fpp, growth_shape, planned_capacity, shape_for, size_for_capacity, size_for_items, table_bound, Shape,
    SizingError, DEFAULT_FPP,
};
pub use table::newkey::NewKey;
pub use table::{Full, OpStats, OwnedFilter, Table, WriteHook};

/// The region's loom models run with the core's bound on preemptions.
#[cfg(all(test, loom))]
pub(crate) use loom_tests::model_with_bound;

/// The atomics and spin-wait of the lock-free structures (loom's under
/// `--cfg loom`), for the region's own.
pub mod sync {
    pub use super::atomic::{fence, spin, AtomicU32, AtomicU64, Ordering};
}

/// Format 2: a value of one table, bit-packed (`dense.rs`).
pub mod v2 {
    pub use super::dense::{
        bucket_bits, encode, encode_into, parse_v2, serialized_len, Dense, DenseHeader, DenseLayout, Encoding,
        V2_HEADER_BYTES,
    };
}

/// Format 3: a value of several tables (`multi.rs`).
pub mod v3 {
    pub use super::multi::{
        bound, check_growth, contains_checked, contains_many, delete, encode_into, header_of, insert, parse_v3,
        serialized_len, tables, union, validate_v3, MultiHeader, UnionError, FORMAT_V3, MAX_EXPANSION,
        MAX_VALUE_TABLES,
    };
}

/// A set of distinct 64-bit keys, Golomb-Rice coded, for partial aggregate
/// states shipped between nodes (`packed.rs`).
pub mod packed_keys {
    pub use super::packed::{decode_into, encode, encoded_len, fits};
}
