//! A filter's shape and hashing ([`Params`]), the geometry of the 64-bit bucket
//! words that the lock-free table works on ([`Geometry`]), and the two headers in
//! front of bucket words: format 1 (values written by cuckoo 0.1.0, read in place)
//! and the header of a named filter in shared memory. The dense format-2 value
//! layout is `dense.rs`.
//!
//! # Bucket words
//!
//! A bucket word holds `b` fingerprints of `f` bits each in its low `b·f` bits (slot
//! `s` at bit `s·f`; 0 means empty) and a migration counter in the remaining high
//! bits, which must number at least [`MIN_COUNTER_BITS`]. One word per bucket means a
//! bucket, counter included, is read and compare-and-swapped with one instruction.
//!
//! # Format 1 (read only)
//!
//! Values written by 0.1.0, all integers little-endian when serialized:
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
//! Their bucket count is a power of two and their buckets are found with
//! [`Mapping::PowerOfTwoXor`]; format-2 values record their mapping.

use std::fmt;

use super::atomic::AtomicU64;

pub const MAGIC: [u8; 4] = *b"CKOF";
pub const FORMAT_V1: u8 = 1;
pub const FORMAT_V2: u8 = 2;
/// xxh3, 64-bit output, seeded (`xxhash_rust::xxh3::xxh3_64_with_seed`).
pub const HASH_XXH3_64: u8 = 1;
/// The seed every filter made by this project uses. Any seed read from a header is
/// honoured; filters can only be merged when their seeds agree.
pub const DEFAULT_SEED: u64 = 0x6375_636b_6f6f_2131; // "cuckoo!1"
pub const V1_HEADER_BYTES: usize = 32;
/// Fewer counter bits than this would let a counter wrap while a reader is between
/// its two reads of a bucket; see the lookup in `table.rs`.
pub const MIN_COUNTER_BITS: u32 = 16;
pub const MIN_FINGERPRINT_BITS: u8 = 4;
/// Fingerprints come from the high 32 bits of the key hash.
pub const MAX_FINGERPRINT_BITS: u8 = 32;
/// Path encoding spends 2 bits per slot index, so a bucket has at most 4 slots.
pub const MAX_SLOTS_PER_BUCKET: u8 = 4;
/// Bucket indices come from the low 32 bits of the key hash (the fingerprint from
/// the high 32, so the two stay independent): at most 2^32 buckets.
pub const MAX_BUCKET_COUNT: u64 = 1 << 32;

/// How a key's hash and fingerprint give its two candidate buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Format 1's: `m` a power of two, `i1 = h mod m` (low bits),
    /// `i2 = i1 XOR (mix(f) mod m)`.
    PowerOfTwoXor = 1,
    /// Any `m`: `i1 = ⌊lo32(h)·m / 2^32⌋`, `i2 = (H(f) − i1) mod m` with
    /// `H(f) = ⌊hi32(mix(f))·m / 2^32⌋`. See `hash.rs` for why this is an
    /// involution and why `i1` is monotone in the hash.
    Fastrange = 2,
}

impl Mapping {
    pub fn from_code(code: u8) -> Option<Mapping> {
        match code {
            1 => Some(Mapping::PowerOfTwoXor),
            2 => Some(Mapping::Fastrange),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mapping::PowerOfTwoXor => "power-of-two xor",
            Mapping::Fastrange => "fastrange",
        }
    }
}

/// The parameters that define a filter's shape and hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub fingerprint_bits: u8,
    pub slots_per_bucket: u8,
    pub bucket_count: u64,
    pub seed: u64,
    pub mapping: Mapping,
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
        if !(MIN_FINGERPRINT_BITS..=MAX_FINGERPRINT_BITS).contains(&f)
            || (f as u32) * (b as u32) + MIN_COUNTER_BITS > 64
        {
            return Err(FormatError::BadParams(format!(
                "{f} fingerprint bits: need {MIN_FINGERPRINT_BITS} to {MAX_FINGERPRINT_BITS}, fitting {b} slots and a {MIN_COUNTER_BITS}-bit counter in a 64-bit bucket"
            )));
        }
        let m = self.bucket_count;
        if m == 0 || m > MAX_BUCKET_COUNT {
            return Err(FormatError::BadParams(format!("bucket count {m} is not between 1 and 2^32")));
        }
        if self.mapping == Mapping::PowerOfTwoXor && !m.is_power_of_two() {
            return Err(FormatError::BadParams(format!(
                "bucket count {m} is not a power of two, which the power-of-two xor mapping needs"
            )));
        }
        Ok(())
    }

    pub fn slot_count(&self) -> u64 {
        self.bucket_count * self.slots_per_bucket as u64
    }

    /// Whether fingerprints of `other` can be moved into this filter (a union):
    /// same hashing and fingerprint layout, and a bucket for each of them here.
    /// With the fastrange mapping a fingerprint's bucket depends on the bucket
    /// count, so the counts must be equal; format 1's power-of-two tables fold a
    /// larger table onto a smaller one.
    pub fn mergeable_with(&self, other: &Params) -> Result<(), String> {
        if self.seed != other.seed {
            return Err(format!("hash seeds differ ({:#x} and {:#x})", self.seed, other.seed));
        }
        if self.mapping != other.mapping {
            return Err(format!(
                "bucket mappings differ ({} and {}): filters written by cuckoo 0.1.0 can only be combined with each other",
                self.mapping.name(),
                other.mapping.name()
            ));
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
        if self.mapping == Mapping::Fastrange && self.bucket_count != other.bucket_count {
            return Err(format!("bucket counts differ ({} and {})", self.bucket_count, other.bucket_count));
        }
        Ok(())
    }
}

/// The format-1 header as it lies in memory in front of a 0.1.0 value's bucket
/// words. `repr(C)` with only naturally aligned fields: 32 bytes, no padding.
#[repr(C)]
pub struct V1Header {
    pub magic: [u8; 4],
    pub version: u8,
    pub hash_algorithm: u8,
    pub fingerprint_bits: u8,
    pub slots_per_bucket: u8,
    pub bucket_count_log2: u8,
    pub reserved: [u8; 7],
    pub seed: u64,
    pub item_count: AtomicU64,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<V1Header>() == V1_HEADER_BYTES);

impl V1Header {
    /// The parameters, if the shape fields are valid (call `parse_v1` on input).
    pub fn params(&self) -> Params {
        Params {
            fingerprint_bits: self.fingerprint_bits,
            slots_per_bucket: self.slots_per_bucket,
            bucket_count: 1u64 << self.bucket_count_log2.min(32),
            seed: self.seed,
            mapping: Mapping::PowerOfTwoXor,
        }
    }
}

/// The header of a named filter's bucket words in shared memory (and of an
/// [`super::OwnedFilter`]): the shape, and the item count that the lock-free table
/// keeps next to its words. 40 bytes, 8-aligned; never stored on disk.
#[repr(C)]
pub struct WordsHeader {
    pub fingerprint_bits: u8,
    pub slots_per_bucket: u8,
    pub mapping: u8,
    pub reserved: [u8; 5],
    pub seed: u64,
    pub bucket_count: u64,
    pub capacity: u64,
    pub item_count: AtomicU64,
}

pub const WORDS_HEADER_BYTES: usize = 40;
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<WordsHeader>() == WORDS_HEADER_BYTES);

impl WordsHeader {
    pub fn new(p: &Params, capacity: u64, items: u64) -> WordsHeader {
        WordsHeader {
            fingerprint_bits: p.fingerprint_bits,
            slots_per_bucket: p.slots_per_bucket,
            mapping: p.mapping as u8,
            reserved: [0; 5],
            seed: p.seed,
            bucket_count: p.bucket_count,
            capacity,
            item_count: AtomicU64::new(items),
        }
    }

    pub fn params(&self) -> Params {
        Params {
            fingerprint_bits: self.fingerprint_bits,
            slots_per_bucket: self.slots_per_bucket,
            bucket_count: self.bucket_count,
            seed: self.seed,
            mapping: Mapping::from_code(self.mapping).unwrap_or(Mapping::Fastrange),
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
    BadBucket { bucket: u64, why: &'static str },
    PaddingNotZero,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::TooShort(n) => write!(f, "{n} bytes is shorter than a header"),
            FormatError::BadMagic => write!(f, "wrong magic number"),
            FormatError::UnsupportedVersion(v) => {
                write!(f, "unsupported format version {v} (this build reads {FORMAT_V1} and {FORMAT_V2})")
            }
            FormatError::UnsupportedHash(h) => write!(f, "unsupported hash algorithm {h}"),
            FormatError::ReservedNotZero => write!(f, "reserved header bytes are not zero"),
            FormatError::BadParams(m) => write!(f, "{m}"),
            FormatError::LengthMismatch { expected, actual } => {
                write!(f, "body is {actual} bytes but the header describes {expected} bytes")
            }
            FormatError::ItemCountMismatch { header, counted } => {
                write!(f, "header claims {header} items but the buckets hold {counted}")
            }
            FormatError::BadBucket { bucket, why } => write!(f, "bucket {bucket}: {why}"),
            FormatError::PaddingNotZero => write!(f, "bits after the last bucket are not zero"),
        }
    }
}

/// The format version of serialized bytes (after checking the magic number).
pub fn format_version(bytes: &[u8]) -> Result<u8, FormatError> {
    if bytes.len() < 8 {
        return Err(FormatError::TooShort(bytes.len()));
    }
    if bytes[0..4] != MAGIC {
        return Err(FormatError::BadMagic);
    }
    Ok(bytes[4])
}

/// The start every format shares: at least `header_len` bytes, the magic, this
/// format's version, the hash algorithm.
pub fn check_header_start(bytes: &[u8], header_len: usize, version: u8) -> Result<(), FormatError> {
    if bytes.len() < header_len {
        return Err(FormatError::TooShort(bytes.len()));
    }
    if bytes[0..4] != MAGIC {
        return Err(FormatError::BadMagic);
    }
    if bytes[4] != version {
        return Err(FormatError::UnsupportedVersion(bytes[4]));
    }
    if bytes[5] != HASH_XXH3_64 {
        return Err(FormatError::UnsupportedHash(bytes[5]));
    }
    Ok(())
}

/// Reads and validates a format-1 header (its first 32 serialized, little-endian
/// bytes); returns the parameters, the item count and the length the whole
/// filter must have.
pub fn parse_v1_header(bytes: &[u8]) -> Result<(Params, u64, u64), FormatError> {
    check_header_start(bytes, V1_HEADER_BYTES, FORMAT_V1)?;
    if bytes[9..16].iter().any(|&b| b != 0) {
        return Err(FormatError::ReservedNotZero);
    }
    if bytes[8] > 32 {
        return Err(FormatError::BadParams(format!("bucket count 2^{} is larger than 2^32", bytes[8])));
    }
    let params = Params {
        fingerprint_bits: bytes[6],
        slots_per_bucket: bytes[7],
        bucket_count: 1u64 << bytes[8],
        seed: u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
        mapping: Mapping::PowerOfTwoXor,
    };
    params.check()?;
    let item_count = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
    if item_count > params.slot_count() {
        return Err(FormatError::BadParams(format!(
            "item count {item_count} exceeds the {} slots",
            params.slot_count()
        )));
    }
    Ok((params, item_count, V1_HEADER_BYTES as u64 + 8 * params.bucket_count))
}

/// Reads and validates a format-1 header from serialized (little-endian) bytes and
/// checks that the length of `bytes` matches the described body exactly.
pub fn parse_v1(bytes: &[u8]) -> Result<(Params, u64), FormatError> {
    let (params, items, expected) = parse_v1_header(bytes)?;
    if bytes.len() as u64 != expected {
        return Err(FormatError::LengthMismatch { expected, actual: bytes.len() });
    }
    Ok((params, items))
}

/// Where each field sits in a bucket word, and how keys find their buckets,
/// derived once from the parameters.
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
    pub bucket_count: u64,
    /// `bucket_count − 1` (a mask only for the power-of-two mapping).
    pub bucket_mask: u64,
    pub mapping: Mapping,
    /// Bit 0 of every slot, and the top bit of every slot (for the SWAR test).
    slot_lows: u64,
    slot_highs: u64,
}

impl Geometry {
    /// Answers `contains` for each hash in order, while `prefetch` is given the
    /// two buckets of the hash 16 places later: many cache misses in flight at
    /// once although each lookup is long. The batched lookups of both layouts.
    #[inline(always)]
    pub fn lookup_batch(
        &self,
        hashes: &[u64],
        out: &mut [bool],
        prefetch: impl Fn(u64),
        contains: impl Fn(u64) -> bool,
    ) {
        const PREFETCH_AHEAD: usize = 16;
        assert_eq!(hashes.len(), out.len());
        for i in 0..hashes.len() {
            if let Some(&ahead) = hashes.get(i + PREFETCH_AHEAD) {
                let (j1, fp) = (self.primary(ahead), self.fingerprint(ahead));
                prefetch(j1);
                prefetch(self.alternate(j1, fp));
            }
            out[i] = contains(hashes[i]);
        }
    }

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
            bucket_count: p.bucket_count,
            bucket_mask: p.bucket_count - 1,
            mapping: p.mapping,
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

    /// Slots of `word` holding `fp` (non-zero).
    #[inline(always)]
    pub fn copies(&self, word: u64, fp: u64) -> u32 {
        (0..self.slots).filter(|&s| self.slot(word, s) == fp).count() as u32
    }

    /// Slot index holding `fp`, if any.
    #[inline(always)]
    pub fn find(&self, word: u64, fp: u64) -> Option<u32> {
        (0..self.slots).find(|&s| self.slot(word, s) == fp)
    }

    /// The fingerprints of a word (0 for empty slots), in slot order.
    #[inline(always)]
    pub fn slots_of(&self, word: u64) -> [u64; 4] {
        let mut out = [0u64; 4];
        for (s, o) in out.iter_mut().enumerate().take(self.slots as usize) {
            *o = self.slot(word, s as u32);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(f: u8, b: u8, m: u64, mapping: Mapping) -> Params {
        Params { fingerprint_bits: f, slots_per_bucket: b, bucket_count: m, seed: 0, mapping }
    }

    #[test]
    fn shapes_outside_the_encoding_are_rejected() {
        let x = Mapping::PowerOfTwoXor;
        let r = Mapping::Fastrange;
        assert!(p(12, 4, 1024, x).check().is_ok());
        assert!(p(12, 4, 1000, r).check().is_ok());
        assert!(p(12, 4, 1000, x).check().is_err(), "xor mapping needs a power of two");
        assert!(p(32, 1, 10, r).check().is_ok());
        assert!(p(33, 1, 10, r).check().is_err(), "wider than the 32 hash bits fingerprints come from");
        assert!(p(13, 4, 10, r).check().is_err(), "counter narrower than 16 bits");
        assert!(p(3, 4, 10, r).check().is_err());
        assert!(p(12, 5, 10, r).check().is_err());
        assert!(p(12, 0, 10, r).check().is_err());
        assert!(p(12, 4, 0, r).check().is_err());
        assert!(p(12, 4, (1 << 32) + 1, r).check().is_err());
        assert!(p(12, 4, 1 << 32, r).check().is_ok());
    }

    #[test]
    fn unions_need_equal_shapes_under_fastrange() {
        let a = p(12, 4, 1000, Mapping::Fastrange);
        assert!(a.mergeable_with(&a).is_ok());
        assert!(a.mergeable_with(&p(12, 4, 1001, Mapping::Fastrange)).unwrap_err().contains("bucket counts"));
        assert!(a.mergeable_with(&p(12, 4, 1024, Mapping::PowerOfTwoXor)).unwrap_err().contains("mappings"));
        let x = p(12, 4, 1024, Mapping::PowerOfTwoXor);
        assert!(x.mergeable_with(&p(12, 4, 4096, Mapping::PowerOfTwoXor)).is_ok());
    }
}
