//! The one memory layout every cuckoo filter uses, in a `cuckoofilter` value and in
//! shared memory alike: a 32-byte header followed by `2^bucket_count_log2` bucket
//! words of 64 bits. This module owns the header, the bucket-word geometry and the
//! complete validation of serialized bytes.
//!
//! Serialized form (text and binary I/O, and the bytes of a value after its varlena
//! prefix), all integers little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `b"CKOF"` |
//! | 4  | 1 | format version (1) |
//! | 5  | 1 | hash algorithm (1 = xxh3-64) |
//! | 6  | 1 | fingerprint bits `f` |
//! | 7  | 1 | slots per bucket `b` |
//! | 8  | 1 | log2 of the bucket count |
//! | 9  | 7 | reserved, zero |
//! | 16 | 8 | hash seed |
//! | 24 | 8 | item count (occupied slots) |
//! | 32 | 8·m | bucket words |
//!
//! A bucket word holds `b` fingerprints of `f` bits each in its low `b·f` bits (slot
//! `s` at bit `s·f`; 0 means empty) and a migration counter in the remaining high
//! bits, which must number at least [`MIN_COUNTER_BITS`]. One word per bucket means a
//! bucket, counter included, is read and compare-and-swapped with one instruction.

use std::fmt;

use super::sync::AtomicU64;

pub const MAGIC: [u8; 4] = *b"CKOF";
pub const FORMAT_VERSION: u8 = 1;
/// xxh3, 64-bit output, seeded (`xxhash_rust::xxh3::xxh3_64_with_seed`).
pub const HASH_XXH3_64: u8 = 1;
/// The seed every filter made by this project uses. Any seed read from a header is
/// honoured; filters can only be merged when their seeds agree.
pub const DEFAULT_SEED: u64 = 0x6375_636b_6f6f_2131; // "cuckoo!1"
pub const HEADER_BYTES: usize = 32;
/// Fewer counter bits than this would let a counter wrap while a reader is between
/// its two reads of a bucket; see the lookup in `table.rs`.
pub const MIN_COUNTER_BITS: u32 = 16;
pub const MIN_FINGERPRINT_BITS: u8 = 4;
/// Fingerprints come from the high 32 bits of the key hash.
pub const MAX_FINGERPRINT_BITS: u8 = 32;
/// Path encoding spends 2 bits per slot index, so a bucket has at most 4 slots.
pub const MAX_SLOTS_PER_BUCKET: u8 = 4;
/// Bucket indices are taken from the low 32 bits of the key hash, the fingerprint
/// from the high 32, so the two stay independent.
pub const MAX_BUCKET_COUNT_LOG2: u8 = 32;

/// The header as it lies in memory in front of the bucket words. `repr(C)` with
/// only naturally aligned fields: 32 bytes, no padding. Multi-byte fields are in
/// native byte order in memory and little-endian when serialized.
#[repr(C)]
pub struct Header {
    pub magic: [u8; 4],
    pub version: u8,
    pub hash_algorithm: u8,
    pub fingerprint_bits: u8,
    pub slots_per_bucket: u8,
    pub bucket_count_log2: u8,
    pub reserved: [u8; 7],
    pub seed: u64,
    /// Occupied slots. Changed atomically together with (not inside) the bucket
    /// words, so that a shared filter can count without locks.
    pub item_count: AtomicU64,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Header>() == HEADER_BYTES);
#[cfg(not(loom))]
const _: () = assert!(std::mem::align_of::<Header>() == 8);

/// The parameters that define a filter's shape and hashing; everything in the header
/// except the item count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub fingerprint_bits: u8,
    pub slots_per_bucket: u8,
    pub bucket_count_log2: u8,
    pub seed: u64,
}

impl Params {
    /// Checks the shape rules; the message names the first rule broken.
    pub fn check(&self) -> Result<(), FormatError> {
        let (f, b) = (self.fingerprint_bits, self.slots_per_bucket);
        if !(1..=MAX_SLOTS_PER_BUCKET).contains(&b) {
            return Err(FormatError::BadParams(format!(
                "slots per bucket must be between 1 and {MAX_SLOTS_PER_BUCKET}, got {b}"
            )));
        }
        if f < MIN_FINGERPRINT_BITS || f > MAX_FINGERPRINT_BITS || (f as u32) * (b as u32) + MIN_COUNTER_BITS > 64 {
            return Err(FormatError::BadParams(format!(
                "{f} fingerprint bits: need {MIN_FINGERPRINT_BITS} to {MAX_FINGERPRINT_BITS}, fitting {b} slots and a {MIN_COUNTER_BITS}-bit counter in a 64-bit bucket"
            )));
        }
        if self.bucket_count_log2 > MAX_BUCKET_COUNT_LOG2 {
            return Err(FormatError::BadParams(format!(
                "bucket count 2^{} is larger than 2^{MAX_BUCKET_COUNT_LOG2}",
                self.bucket_count_log2
            )));
        }
        Ok(())
    }

    pub fn bucket_count(&self) -> u64 {
        1u64 << self.bucket_count_log2
    }

    pub fn slot_count(&self) -> u64 {
        self.bucket_count() * self.slots_per_bucket as u64
    }

    /// Bytes of header plus bucket words.
    pub fn serialized_len(&self) -> u64 {
        HEADER_BYTES as u64 + 8 * self.bucket_count()
    }

    pub fn header(&self, item_count: u64) -> Header {
        Header {
            magic: MAGIC,
            version: FORMAT_VERSION,
            hash_algorithm: HASH_XXH3_64,
            fingerprint_bits: self.fingerprint_bits,
            slots_per_bucket: self.slots_per_bucket,
            bucket_count_log2: self.bucket_count_log2,
            reserved: [0; 7],
            seed: self.seed,
            item_count: AtomicU64::new(item_count),
        }
    }

    /// Whether two filters hash and lay out fingerprints the same way, so that the
    /// fingerprints of one can be moved into the other. Bucket counts may differ.
    pub fn mergeable_with(&self, other: &Params) -> Result<(), String> {
        if self.seed != other.seed {
            return Err(format!("hash seeds differ ({:#x} and {:#x})", self.seed, other.seed));
        }
        if self.fingerprint_bits != other.fingerprint_bits {
            return Err(format!(
                "fingerprint sizes differ ({} and {} bits)",
                self.fingerprint_bits, other.fingerprint_bits
            ));
        }
        if self.slots_per_bucket != other.slots_per_bucket {
            return Err(format!(
                "bucket sizes differ ({} and {} slots)",
                self.slots_per_bucket, other.slots_per_bucket
            ));
        }
        Ok(())
    }
}

impl Header {
    pub fn params(&self) -> Params {
        Params {
            fingerprint_bits: self.fingerprint_bits,
            slots_per_bucket: self.slots_per_bucket,
            bucket_count_log2: self.bucket_count_log2,
            seed: self.seed,
        }
    }
}

/// Why serialized bytes were rejected. Every variant is a user-input error: the
/// glue reports it as `invalid_text_representation` (22P02).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    TooShort(usize),
    BadMagic,
    UnsupportedVersion(u8),
    UnsupportedHash(u8),
    ReservedNotZero,
    BadParams(String),
    LengthMismatch { expected: u64, actual: usize },
    ItemCountMismatch { header: u64, counted: u64 },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::TooShort(n) => {
                write!(f, "{n} bytes is shorter than the {HEADER_BYTES}-byte header")
            }
            FormatError::BadMagic => write!(f, "wrong magic number"),
            FormatError::UnsupportedVersion(v) => {
                write!(f, "unsupported format version {v} (this build reads {FORMAT_VERSION})")
            }
            FormatError::UnsupportedHash(h) => write!(f, "unsupported hash algorithm {h}"),
            FormatError::ReservedNotZero => write!(f, "reserved header bytes are not zero"),
            FormatError::BadParams(m) => write!(f, "{m}"),
            FormatError::LengthMismatch { expected, actual } => write!(
                f,
                "body is {actual} bytes but the header describes {expected} bytes"
            ),
            FormatError::ItemCountMismatch { header, counted } => write!(
                f,
                "header claims {header} items but the buckets hold {counted}"
            ),
        }
    }
}

/// Reads and validates a header from the first 32 serialized (little-endian) bytes
/// and checks that the length of `bytes` matches the described body exactly.
pub fn parse_header(bytes: &[u8]) -> Result<(Params, u64), FormatError> {
    if bytes.len() < HEADER_BYTES {
        return Err(FormatError::TooShort(bytes.len()));
    }
    if bytes[0..4] != MAGIC {
        return Err(FormatError::BadMagic);
    }
    if bytes[4] != FORMAT_VERSION {
        return Err(FormatError::UnsupportedVersion(bytes[4]));
    }
    if bytes[5] != HASH_XXH3_64 {
        return Err(FormatError::UnsupportedHash(bytes[5]));
    }
    if bytes[9..16].iter().any(|&b| b != 0) {
        return Err(FormatError::ReservedNotZero);
    }
    let params = Params {
        fingerprint_bits: bytes[6],
        slots_per_bucket: bytes[7],
        bucket_count_log2: bytes[8],
        seed: u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
    };
    params.check()?;
    let item_count = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
    if item_count > params.slot_count() {
        return Err(FormatError::BadParams(format!(
            "item count {item_count} exceeds the {} slots",
            params.slot_count()
        )));
    }
    let expected = params.serialized_len();
    if bytes.len() as u64 != expected {
        return Err(FormatError::LengthMismatch { expected, actual: bytes.len() });
    }
    Ok((params, item_count))
}

/// Writes the serialized (little-endian) form of a header.
pub fn write_header(params: &Params, item_count: u64, out: &mut [u8]) {
    out[0..4].copy_from_slice(&MAGIC);
    out[4] = FORMAT_VERSION;
    out[5] = HASH_XXH3_64;
    out[6] = params.fingerprint_bits;
    out[7] = params.slots_per_bucket;
    out[8] = params.bucket_count_log2;
    out[9..16].fill(0);
    out[16..24].copy_from_slice(&params.seed.to_le_bytes());
    out[24..32].copy_from_slice(&item_count.to_le_bytes());
}

/// Where each field sits in a bucket word, derived once from the parameters.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub fingerprint_bits: u32,
    pub slots: u32,
    pub fingerprint_mask: u64,
    /// All fingerprint bits of a word (the low `b·f` bits).
    pub slots_mask: u64,
    pub counter_shift: u32,
    pub counter_bits: u32,
    pub counter_mask: u64,
    pub bucket_mask: u64,
    /// Bit 0 of every slot, and the top bit of every slot (for the SWAR test).
    slot_lows: u64,
    slot_highs: u64,
}

impl Geometry {
    pub fn new(p: &Params) -> Geometry {
        let f = p.fingerprint_bits as u32;
        let b = p.slots_per_bucket as u32;
        let counter_shift = f * b;
        Geometry {
            fingerprint_bits: f,
            slots: b,
            fingerprint_mask: (1u64 << f) - 1,
            slots_mask: (1u64 << counter_shift) - 1,
            counter_shift,
            counter_bits: 64 - counter_shift,
            counter_mask: u64::MAX >> counter_shift,
            bucket_mask: p.bucket_count() - 1,
            slot_lows: (0..b).fold(0, |m, s| m | 1u64 << (s * f)),
            slot_highs: (0..b).fold(0, |m, s| m | 1u64 << (s * f + f - 1)),
        }
    }

    #[inline(always)]
    pub fn slot(&self, word: u64, s: u32) -> u64 {
        (word >> (s * self.fingerprint_bits)) & self.fingerprint_mask
    }

    #[inline(always)]
    pub fn with_slot(&self, word: u64, s: u32, fp: u64) -> u64 {
        let shift = s * self.fingerprint_bits;
        (word & !(self.fingerprint_mask << shift)) | (fp << shift)
    }

    #[inline(always)]
    pub fn counter(&self, word: u64) -> u64 {
        word >> self.counter_shift
    }

    #[inline(always)]
    pub fn with_counter(&self, word: u64, counter: u64) -> u64 {
        (word & self.slots_mask) | (counter << self.counter_shift)
    }

    /// Counter arithmetic is modulo `2^counter_bits`.
    #[inline(always)]
    pub fn counter_distance(&self, from: u64, to: u64) -> u64 {
        to.wrapping_sub(from) & self.counter_mask
    }

    #[inline(always)]
    pub fn occupied(&self, word: u64) -> u32 {
        (0..self.slots).filter(|&s| self.slot(word, s) != 0).count() as u32
    }

    /// Occupied slots over many bucket words.
    pub fn occupied_total(&self, words: impl Iterator<Item = u64>) -> u64 {
        words.map(|w| self.occupied(w) as u64).sum()
    }

    /// Whether any slot of `word` holds `fp` (non-zero), testing all slots at once:
    /// XOR makes matching slots zero, and `(x - lows) & !x & highs` is non-zero
    /// exactly when some slot of `x` is zero (a borrow can only start at a zero
    /// slot, so it never invents one).
    #[inline(always)]
    pub fn holds(&self, word: u64, fp: u64) -> bool {
        let x = (word & self.slots_mask) ^ fp.wrapping_mul(self.slot_lows);
        x.wrapping_sub(self.slot_lows) & !x & self.slot_highs != 0
    }

    /// Slot index holding `fp`, if any.
    #[inline(always)]
    pub fn find(&self, word: u64, fp: u64) -> Option<u32> {
        (0..self.slots).find(|&s| self.slot(word, s) == fp)
    }
}

/// Checks the bucket words of a parsed filter: the number of occupied slots equals the header's item count.
pub fn check_buckets(params: &Params, item_count: u64, words: impl Iterator<Item = u64>) -> Result<(), FormatError> {
    let counted = Geometry::new(params).occupied_total(words);
    if counted != item_count {
        return Err(FormatError::ItemCountMismatch { header: item_count, counted });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_outside_the_encoding_are_rejected() {
        let p = |f: u8, b: u8, log2: u8| Params { fingerprint_bits: f, slots_per_bucket: b, bucket_count_log2: log2, seed: 0 };
        assert!(p(12, 4, 10).check().is_ok());
        assert!(p(32, 1, 10).check().is_ok());
        assert!(p(33, 1, 10).check().is_err(), "wider than the 32 hash bits fingerprints come from");
        assert!(p(40, 1, 10).check().is_err());
        assert!(p(13, 4, 10).check().is_err(), "counter narrower than 16 bits");
        assert!(p(3, 4, 10).check().is_err());
        assert!(p(12, 5, 10).check().is_err());
        assert!(p(12, 0, 10).check().is_err());
        assert!(p(12, 4, 33).check().is_err());
    }
}
