//! The `cuckoofilter` value type: its storage format and text and binary forms
//! (`datatype`), the caches of its probes (`cache`), the functions over values (`functions`), and the aggregates
//! that build, merge and build in parallel (`aggregate`, and `sharded` for
//! `cf_sharded_agg`'s shippable state). Nothing here knows
//! named filters.

pub mod aggregate;
pub mod cache;
pub mod datatype;
pub mod functions;
pub mod sharded;
