//! Hashing a key of any SQL type to the 64-bit hash the filter core uses.
//!
//! - `int2`, `int4`, `int8` (and domains over them): xxh3 of the value as 8
//!   little-endian bytes of an `int8`, so equal values match across widths, as in
//!   PostgreSQL's integer hash family.
//! - `text`, `varchar` and `bytea`: xxh3 of the bytes. `uuid`: xxh3 of its 16 bytes.
//! - Every other type with a default hash operator class: the type's own 64-bit
//!   extended hash function with seed 0, whose result is then hashed like an
//!   `int8`. Equal values under the type's equality therefore match, as in a hash
//!   join.
//! - Keys under a nondeterministic collation are refused: their equality is not
//!   byte equality, and a filter cannot record which collation built it, so a probe
//!   under another collation could miss a key that is present.
//!
//! # Key types
//!
//! A value may record the type of its keys ([`KeyType`], see [`key_type_of`]).
//! Then keys are hashed as that type hashes them, whatever type a probe brings
//! (see [`KeyHasher::prepare`]): an enum by its label's text (so that a value
//! survives a dump and restore, which renumbers labels), a probe of another type
//! converted to the key type when PostgreSQL would call the two equal, text read
//! with the key type's input function, and anything else refused (42804) rather
//! than answered wrongly. A filter that records nothing hashes as above.

mod call;
mod hasher;
mod types;

pub use call::*;
pub use hasher::*;
pub use types::*;
