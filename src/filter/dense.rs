//! Format 2: the dense layout of a `cuckoofilter` value. A value is immutable
//! once built (SQL functions that change a filter return a new value), so nothing
//! in it can migrate while it is read: it needs no migration counters, and its
//! buckets are bit-packed back to back. Buckets, bucket indices and fingerprints
//! are those of the lock-free table (`table.rs`) over the same parameters; a value
//! is built or changed as bucket words ([`super::OwnedFilter`]) and then encoded
//! here, and a named filter's words are encoded into a value by a snapshot and
//! decoded from one by a publish, each in one linear pass.
//!
//! # Serialized form (also the in-memory form after the varlena prefix)
//!
//! Integers little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `b"CKOF"` |
//! | 4  | 1 | format version (2) |
//! | 5  | 1 | hash algorithm (1 = xxh3-64) |
//! | 6  | 1 | fingerprint bits `f` |
//! | 7  | 1 | slots per bucket `b` |
//! | 8  | 1 | bucket mapping (1 = power-of-two XOR, from format 1; 2 = fastrange) |
//! | 9  | 1 | bucket encoding (1 = packed, 2 = semi-sorted), determined by `b` |
//! | 10 | 1 | key type kind (0 = not recorded: every value written before 0.6.0) |
//! | 11 | 1 | reserved, zero |
//! | 12 | 4 | key type OID (0 when not recorded) |
//! | 16 | 8 | hash seed |
//! | 24 | 8 | bucket count `m` |
//! | 32 | 8 | item count (occupied slots) |
//! | 40 | 8 | capacity the filter was sized for |
//! | 48 | ⌈m·B/8⌉ + 7 | the buckets, `B` bits each, then zero bits |
//!
//! Bucket `i` is bits `i·B .. (i+1)·B` of the bucket area read as one
//! little-endian bit string (bit `k` is bit `k mod 8` of byte `k / 8`); the 7 zero
//! bytes at the end let any bucket be read with one unaligned 8-byte load.
//!
//! - **Packed** (`b` = 2 or 3): `B = b·f`, slot `j` at bits `j·f`, fingerprints in
//!   ascending order (0, empty, first).
//! - **Semi-sorted** (`b` = 4, after Fan et al., "Cuckoo Filter: Practically Better
//!   Than Bloom", CoNEXT 2014, §5.2): the 4 fingerprints of a bucket in ascending
//!   order have nondecreasing top 4 bits ("prefixes"); the sorted 4-tuple of
//!   prefixes is one of C(19, 4) = 3876 < 2^12, so it is stored as its index in 12
//!   bits instead of 16. `B = 12 + 4·(f − 4) = 4·f − 4`: one bit per slot saved.
//!   The index is the tuple's rank in the lexicographic enumeration of
//!   nondecreasing 4-tuples over `0..16` (`(0,0,0,0)` is 0, `(15,15,15,15)` is
//!   3875); then the low `f − 4` bits of slot `j` at bits `12 + j·(f − 4)`.
//!
//! Every encoding is canonical (sorted fingerprints, zero padding), so equal
//! contents give equal bytes, and input validation rejects anything else.

use super::key_type::KeyType;
use super::layout::{check_header_start, FormatError, Geometry, Mapping, Params, FORMAT_V2, HASH_XXH3_64, MAGIC};

pub const V2_HEADER_BYTES: usize = 48;

/// How a bucket's fingerprints are packed into its `B` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Packed = 1,
    SemiSorted = 2,
}

impl Encoding {
    pub fn for_slots(slots: u8) -> Encoding {
        if slots == 4 {
            Encoding::SemiSorted
        } else {
            Encoding::Packed
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Packed => "packed",
            Encoding::SemiSorted => "semi-sorted",
        }
    }
}

/// Bits of one bucket in the dense layout.
pub fn bucket_bits(p: &Params) -> u32 {
    let (b, f) = (p.slots_per_bucket as u32, p.fingerprint_bits as u32);
    match Encoding::for_slots(p.slots_per_bucket) {
        Encoding::SemiSorted => 4 * f - 4,
        Encoding::Packed => b * f,
    }
}

/// Bytes of the bucket area: the buckets, rounded up to a byte, and 7 zero bytes.
pub fn data_len(p: &Params) -> u64 {
    (p.bucket_count * bucket_bits(p) as u64).div_ceil(8) + 7
}

/// Bytes of a serialized format-2 value with these parameters.
pub fn serialized_len(p: &Params) -> u64 {
    V2_HEADER_BYTES as u64 + data_len(p)
}

/// The fields of a format-2 header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DenseHeader {
    pub params: Params,
    pub items: u64,
    pub capacity: u64,
    pub key: KeyType,
}

impl DenseHeader {
    pub fn encoding(&self) -> Encoding {
        Encoding::for_slots(self.params.slots_per_bucket)
    }

    pub fn write(&self, out: &mut [u8]) {
        let p = &self.params;
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = FORMAT_V2;
        out[5] = HASH_XXH3_64;
        out[6] = p.fingerprint_bits;
        out[7] = p.slots_per_bucket;
        out[8] = p.mapping as u8;
        out[9] = self.encoding() as u8;
        out[10] = self.key.kind as u8;
        out[11] = 0;
        out[12..16].copy_from_slice(&self.key.oid.to_le_bytes());
        out[16..24].copy_from_slice(&p.seed.to_le_bytes());
        out[24..32].copy_from_slice(&p.bucket_count.to_le_bytes());
        out[32..40].copy_from_slice(&self.items.to_le_bytes());
        out[40..48].copy_from_slice(&self.capacity.to_le_bytes());
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Reads and validates a format-2 header and checks that `bytes` is exactly as
/// long as it describes. The buckets are checked by [`Dense::validate`].
pub fn parse_v2(bytes: &[u8]) -> Result<DenseHeader, FormatError> {
    check_header_start(bytes, V2_HEADER_BYTES, FORMAT_V2)?;
    if bytes[11] != 0 {
        return Err(FormatError::ReservedNotZero);
    }
    let key = KeyType::from_parts(bytes[10], u32::from_le_bytes(bytes[12..16].try_into().unwrap()))?;
    let mapping = Mapping::from_code(bytes[8])
        .ok_or_else(|| FormatError::BadParams(format!("unknown bucket mapping {}", bytes[8])))?;
    let params = Params {
        fingerprint_bits: bytes[6],
        slots_per_bucket: bytes[7],
        bucket_count: le64(bytes, 24),
        seed: le64(bytes, 16),
        mapping,
    };
    params.check()?;
    let encoding = Encoding::for_slots(params.slots_per_bucket);
    if bytes[9] != encoding as u8 {
        return Err(FormatError::BadParams(format!(
            "bucket encoding {} does not match {} slots per bucket (expected {})",
            bytes[9], params.slots_per_bucket, encoding as u8
        )));
    }
    let (items, capacity) = (le64(bytes, 32), le64(bytes, 40));
    if items > params.slot_count() {
        return Err(FormatError::BadParams(format!("item count {items} exceeds the {} slots", params.slot_count())));
    }
    if capacity == 0 || capacity > params.slot_count() {
        return Err(FormatError::BadParams(format!(
            "capacity {capacity} is not between 1 and the {} slots",
            params.slot_count()
        )));
    }
    let expected = serialized_len(&params);
    if bytes.len() as u64 != expected {
        return Err(FormatError::LengthMismatch { expected, actual: bytes.len() });
    }
    Ok(DenseHeader { params, items, capacity, key })
}

/// Number of nondecreasing 4-tuples over `0..16`.
const SEMI_TUPLES: usize = 3876;

/// Index -> the sorted 4-tuple of prefixes, nibble `j` holding prefix `j`.
/// Indices past the last tuple decode to `0xffff` (never produced; rejected by
/// validation, and harmless if read from a corrupted stored value).
const fn build_decode() -> [u16; 4096] {
    let mut t = [0xffffu16; 4096];
    let mut idx = 0;
    let mut a = 0;
    while a < 16 {
        let mut b = a;
        while b < 16 {
            let mut c = b;
            while c < 16 {
                let mut d = c;
                while d < 16 {
                    t[idx] = (a | b << 4 | c << 8 | d << 12) as u16;
                    idx += 1;
                    d += 1;
                }
                c += 1;
            }
            b += 1;
        }
        a += 1;
    }
    t
}

/// Sorted 4-tuple of prefixes (nibbles) -> index; `0xffff` for unsorted tuples.
const fn build_encode() -> [u16; 65536] {
    let d = build_decode();
    let mut t = [0xffffu16; 65536];
    let mut i = 0;
    while i < SEMI_TUPLES {
        t[d[i] as usize] = i as u16;
        i += 1;
    }
    t
}

static DECODE: [u16; 4096] = build_decode();
static ENCODE: [u16; 65536] = build_encode();

/// Sorts up to 4 fingerprints ascending (a sorting network for 4).
#[inline(always)]
fn sort4(s: &mut [u64; 4]) {
    fn cx(s: &mut [u64; 4], a: usize, b: usize) {
        if s[a] > s[b] {
            s.swap(a, b);
        }
    }
    cx(s, 0, 1);
    cx(s, 2, 3);
    cx(s, 0, 2);
    cx(s, 1, 3);
    cx(s, 1, 2);
}

/// Everything a probe derives from a format-2 header, without the buckets: kept
/// per call site, so that a value read again and again is parsed once.
#[derive(Clone, Copy)]
pub struct DenseLayout {
    g: Geometry,
    data_len: u64,
    bucket_bits: u32,
    bucket_mask: u64,
    semi: bool,
    /// `f − 4`, the low bits of a semi-sorted fingerprint.
    low_bits: u32,
    low_mask: u64,
    seed: u64,
}

impl DenseLayout {
    pub fn new(params: &Params) -> DenseLayout {
        let bb = bucket_bits(params);
        let low_bits = (params.fingerprint_bits as u32).saturating_sub(4);
        DenseLayout {
            g: Geometry::new(params),
            data_len: data_len(params),
            bucket_bits: bb,
            bucket_mask: (1u64 << bb) - 1,
            semi: Encoding::for_slots(params.slots_per_bucket) == Encoding::SemiSorted,
            low_bits,
            low_mask: (1u64 << low_bits) - 1,
            seed: params.seed,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }
}

/// A format-2 value's buckets, read in place.
#[derive(Clone, Copy)]
pub struct Dense<'a> {
    l: DenseLayout,
    data: &'a [u8],
}

impl<'a> Dense<'a> {
    /// `data` is the bucket area described by `params` (exactly `data_len` bytes).
    pub fn new(params: &Params, data: &'a [u8]) -> Dense<'a> {
        Dense::with_layout(DenseLayout::new(params), data)
    }

    /// As `new`, with the layout derived before.
    #[inline]
    pub fn with_layout(l: DenseLayout, data: &'a [u8]) -> Dense<'a> {
        assert_eq!(data.len() as u64, l.data_len, "bucket area does not match the parameters");
        Dense { l, data }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.l.g
    }

    /// The `B` bits of bucket `i < m`.
    #[inline(always)]
    fn raw_bucket(&self, i: u64) -> u64 {
        debug_assert!(i < self.l.g.bucket_count);
        let bit = i * self.l.bucket_bits as u64;
        let byte = (bit >> 3) as usize;
        // SAFETY: `with_layout` checked `data.len() == ⌈m·B/8⌉ + 7`, and for `i < m`,
        // `⌊i·B/8⌋ + 8 ≤ ⌈m·B/8⌉ + 7`, so the 8 bytes read are inside `data`.
        let w = unsafe { (self.data.as_ptr().add(byte) as *const u64).read_unaligned() };
        (u64::from_le(w) >> (bit & 7)) & self.l.bucket_mask
    }

    /// A bucket's fingerprints in `f`-bit lanes, slot `j` at bit `j·f`: the layout
    /// of a bucket word without its counter.
    #[inline(always)]
    fn lanes(&self, raw: u64) -> u64 {
        if !self.l.semi {
            return raw;
        }
        let f = self.l.g.fingerprint_bits;
        let prefixes = DECODE[(raw & 0xfff) as usize] as u64;
        let lows = raw >> 12;
        let mut lanes = 0;
        for j in 0..4 {
            lanes |= ((prefixes >> (4 * j)) & 0xf) << (j * f + self.l.low_bits);
            lanes |= ((lows >> (j * self.l.low_bits)) & self.l.low_mask) << (j * f);
        }
        lanes
    }

    /// Bucket `i` as a bucket word (counter 0).
    #[inline]
    pub fn word(&self, i: u64) -> u64 {
        self.lanes(self.raw_bucket(i))
    }

    /// Every bucket as a bucket word, in order.
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.l.g.bucket_count).map(|i| self.word(i))
    }

    /// Whether a key with this hash may be in the filter.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        let g = &self.l.g;
        let (i1, fp) = (g.primary(hash), g.fingerprint(hash));
        let i2 = g.alternate(i1, fp);
        let (w1, w2) = (self.raw_bucket(i1), self.raw_bucket(i2));
        g.holds(self.lanes(w1), fp) | g.holds(self.lanes(w2), fp)
    }

    /// Copies of a key's fingerprint in its two buckets (once if they are one).
    pub fn copies(&self, hash: u64) -> u64 {
        let g = &self.l.g;
        let (i1, fp) = (g.primary(hash), g.fingerprint(hash));
        let i2 = g.alternate(i1, fp);
        let c1 = g.copies(self.word(i1), fp) as u64;
        if i2 == i1 {
            c1
        } else {
            c1 + g.copies(self.word(i2), fp) as u64
        }
    }

    /// Looks up many hashes, one answer each (exactly those of `contains`),
    /// prefetching buckets ahead (`Geometry::lookup_batch`).
    pub fn contains_many(&self, hashes: &[u64], out: &mut [bool]) {
        self.l.g.lookup_batch(hashes, out, |i| self.prefetch(i), |h| self.contains(h));
    }

    #[inline(always)]
    fn prefetch(&self, i: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint that never faults; bucket `i < m` starts
        // inside `data` (see `raw_bucket`).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let byte = ((i * self.l.bucket_bits as u64) >> 3) as usize;
            _mm_prefetch::<_MM_HINT_T0>(self.data.as_ptr().add(byte) as *const i8);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Occupied slots.
    pub fn count(&self) -> u64 {
        self.l.g.occupied_total(self.words())
    }

    /// Checks every bucket (canonical order, valid prefix index), that the item
    /// count matches, and that the bits after the last bucket are zero.
    pub fn validate(&self, items: u64) -> Result<(), FormatError> {
        let g = &self.l.g;
        let mut counted = 0u64;
        for i in 0..g.bucket_count {
            super::host::check_every(i as usize);
            let raw = self.raw_bucket(i);
            if self.l.semi && (raw & 0xfff) as usize >= SEMI_TUPLES {
                return Err(FormatError::BadBucket { bucket: i, why: "prefix index out of range" });
            }
            let s = g.slots_of(self.lanes(raw));
            let n = g.slots as usize;
            if s[..n].windows(2).any(|w| w[0] > w[1]) {
                return Err(FormatError::BadBucket { bucket: i, why: "fingerprints not in ascending order" });
            }
            counted += s[..n].iter().filter(|&&x| x != 0).count() as u64;
        }
        if counted != items {
            return Err(FormatError::ItemCountMismatch { header: items, counted });
        }
        let end = g.bucket_count * self.l.bucket_bits as u64;
        let first = (end / 8) as usize;
        if !end.is_multiple_of(8) && self.data[first] >> (end % 8) != 0 {
            return Err(FormatError::PaddingNotZero);
        }
        let rest = first + !end.is_multiple_of(8) as usize;
        if self.data[rest..].iter().any(|&b| b != 0) {
            return Err(FormatError::PaddingNotZero);
        }
        Ok(())
    }
}

/// One bucket word's fingerprints in canonical dense form.
#[inline]
fn encode_bucket(g: &Geometry, semi: bool, low_bits: u32, word: u64) -> u64 {
    let mut s = g.slots_of(word);
    let n = g.slots as usize;
    if n == 4 {
        sort4(&mut s);
    } else {
        s[..n].sort_unstable();
    }
    if semi {
        let low_mask = (1u64 << low_bits) - 1;
        let mut prefixes = 0u64;
        let mut raw = 0u64;
        for (j, &fp) in s.iter().enumerate() {
            prefixes |= (fp >> low_bits) << (4 * j);
            raw |= (fp & low_mask) << (12 + j as u32 * low_bits);
        }
        raw | ENCODE[prefixes as usize] as u64
    } else {
        (0..n).fold(0, |acc, j| acc | s[j] << (j as u32 * g.fingerprint_bits))
    }
}

/// Writes a format-2 value (header and buckets, `serialized_len` bytes) into `out`
/// from the bucket words of a filter with header `h`. `out` must be zeroed.
pub fn encode_into(h: &DenseHeader, words: impl Iterator<Item = u64>, out: &mut [u8]) {
    let p = &h.params;
    assert_eq!(out.len() as u64, serialized_len(p));
    debug_assert!(out.iter().all(|&b| b == 0));
    h.write(&mut out[..V2_HEADER_BYTES]);
    let g = Geometry::new(p);
    let semi = h.encoding() == Encoding::SemiSorted;
    let low_bits = (p.fingerprint_bits as u32).saturating_sub(4);
    let bb = bucket_bits(p) as u64;
    let data = &mut out[V2_HEADER_BYTES..];
    let mut n = 0u64;
    for (i, w) in words.enumerate() {
        super::host::check_every(i);
        let raw = encode_bucket(&g, semi, low_bits, w);
        let bit = i as u64 * bb;
        let at = (bit / 8) as usize;
        // Buckets are written in order into zeroed bytes: OR the bits in.
        let cur = u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        data[at..at + 8].copy_from_slice(&(cur | raw << (bit % 8)).to_le_bytes());
        n += 1;
    }
    assert_eq!(n, p.bucket_count, "word count does not match the parameters");
}

/// [`encode_into`] into a new vector.
pub fn encode(h: &DenseHeader, words: impl Iterator<Item = u64>) -> Vec<u8> {
    let mut out = vec![0u8; serialized_len(&h.params) as usize];
    encode_into(h, words, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::hash::hash_i64;
    use crate::filter::key_type::KeyKind;
    use crate::filter::layout::DEFAULT_SEED;
    use crate::filter::sizing::{size_for_capacity, size_for_items};
    use crate::filter::table::OwnedFilter;
    use crate::filter::test_rng::Rng;

    #[test]
    fn semi_sorted_tables_enumerate_every_sorted_tuple_once() {
        let mut seen = 0;
        for (idx, &t) in DECODE.iter().enumerate() {
            if idx >= SEMI_TUPLES {
                assert_eq!(t, 0xffff);
                continue;
            }
            let n = [t & 0xf, t >> 4 & 0xf, t >> 8 & 0xf, t >> 12];
            assert!(n.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(ENCODE[t as usize] as usize, idx);
            seen += 1;
        }
        assert_eq!(seen, SEMI_TUPLES);
        assert_eq!(DECODE[0], 0);
        assert_eq!(DECODE[SEMI_TUPLES - 1], 0xffff);
        // Fixed forever (on-disk format): spot-check ranks.
        assert_eq!(ENCODE[0x1000], 1);
        // (0,1,1,2) follows the 136 tuples (0,0,c,d) and (0,1,1,1).
        assert_eq!(ENCODE[0x2110], 137);
    }

    fn filled(fpp: f64, n: u64, seed: u64) -> (OwnedFilter, Vec<u64>) {
        let s = size_for_capacity(n, fpp, u64::MAX).unwrap();
        let f = OwnedFilter::with_capacity(s.params, s.capacity);
        let mut rng = Rng(seed);
        let hashes: Vec<u64> = (0..n).map(|_| hash_i64(DEFAULT_SEED, rng.next() as i64)).collect();
        for &h in &hashes {
            f.table().insert(h).unwrap();
        }
        (f, hashes)
    }

    #[test]
    fn batched_lookups_answer_like_single_ones() {
        for fpp in [0.05, 0.002, 1e-6] {
            let (f, hashes) = filled(fpp, 50_000, 7);
            let t = f.table();
            let h =
                DenseHeader { params: t.params(), items: t.item_count(), capacity: f.capacity(), key: KeyType::NONE };
            let bytes = encode(&h, f.words());
            let d = Dense::new(&h.params, &bytes[V2_HEADER_BYTES..]);
            let mut rng = Rng(5);
            // Present keys interleaved with random ones; lengths around the
            // prefetch distance too.
            let probes: Vec<u64> = hashes.iter().flat_map(|&x| [x, rng.next()]).collect();
            for len in [0, 1, 15, 16, 17, probes.len()] {
                let mut out = vec![false; len];
                d.contains_many(&probes[..len], &mut out);
                for (i, &x) in probes[..len].iter().enumerate() {
                    assert_eq!(out[i], d.contains(x), "fpp {fpp}: batched answer {i} differs");
                }
            }
            let mut out = vec![false; hashes.len()];
            d.contains_many(&hashes, &mut out);
            assert!(out.iter().all(|&b| b), "fpp {fpp}: batched false negative");
        }
    }

    #[test]
    fn dense_round_trips_and_answers_like_the_words() {
        for fpp in [0.2, 0.05, 0.01, 0.002, 0.0001, 1e-6] {
            for n in [1u64, 7, 1000, 30_011] {
                let (f, hashes) = filled(fpp, n, n);
                let t = f.table();
                let h = DenseHeader {
                    params: t.params(),
                    items: t.item_count(),
                    capacity: f.capacity(),
                    key: KeyType::NONE,
                };
                let bytes = encode(&h, f.words());
                let parsed = parse_v2(&bytes).unwrap();
                assert_eq!(parsed, h);
                let d = Dense::new(&parsed.params, &bytes[V2_HEADER_BYTES..]);
                d.validate(parsed.items).unwrap();
                for &x in &hashes {
                    assert!(d.contains(x), "fpp {fpp} n {n}: false negative");
                }
                let mut rng = Rng(99);
                for _ in 0..20_000 {
                    let x = rng.next();
                    assert_eq!(d.contains(x), t.contains(x), "fpp {fpp} n {n}: answers differ");
                }
                // Decoding gives the same multiset per bucket; re-encoding the same bytes.
                let g = Geometry::new(&parsed.params);
                for (i, w) in d.words().enumerate() {
                    let mut a = g.slots_of(w);
                    let mut b = g.slots_of(t.bucket_words()[i].load(std::sync::atomic::Ordering::Relaxed));
                    a.sort();
                    b.sort();
                    assert_eq!(a, b, "bucket {i}");
                }
                assert_eq!(encode(&parsed, d.words()), bytes);
                assert_eq!(d.count(), parsed.items);
            }
        }
    }

    #[test]
    fn key_types_round_trip_and_bad_ones_are_refused() {
        let (f, _) = filled(0.002, 100, 5);
        let t = f.table();
        let base =
            DenseHeader { params: t.params(), items: t.item_count(), capacity: f.capacity(), key: KeyType::NONE };
        // Nothing recorded: bytes 10..16 stay zero, as every value before.
        let plain = encode(&base, f.words());
        assert!(plain[10..16].iter().all(|&b| b == 0));
        for key in [
            KeyType { kind: KeyKind::Builtin, oid: 20 },
            KeyType { kind: KeyKind::Enum, oid: 16_500 },
            KeyType { kind: KeyKind::Local, oid: 70_000 },
        ] {
            let h = DenseHeader { key, ..base };
            let bytes = encode(&h, f.words());
            assert_eq!(parse_v2(&bytes).unwrap(), h);
            assert_eq!(&bytes[16..], &plain[16..], "the key type changes nothing else");
        }
        let with = |kind: u8, reserved: u8, oid: u32| {
            let mut b = plain.clone();
            b[10] = kind;
            b[11] = reserved;
            b[12..16].copy_from_slice(&oid.to_le_bytes());
            parse_v2(&b)
        };
        assert!(with(KeyKind::None as u8, 0, 20).is_err(), "an OID without a kind");
        assert!(with(KeyKind::Builtin as u8, 0, 0).is_err(), "a kind without an OID");
        assert!(with(KeyKind::Builtin as u8, 0, 16_384).is_err(), "a built-in type's OID is below 16384");
        assert!(with(KeyKind::Local as u8 + 1, 0, 20).is_err(), "a pending key type is never in a value");
        assert!(with(KeyKind::Pending as u8 + 1, 0, 20).is_err(), "an unknown kind");
        assert_eq!(with(KeyKind::Builtin as u8, 1, 20), Err(FormatError::ReservedNotZero));
    }

    #[test]
    fn semi_sorting_saves_a_bit_per_slot() {
        let s = size_for_items(1_000_000, 0.002, u64::MAX).unwrap();
        assert_eq!(bucket_bits(&s.params), 44);
        let bytes = serialized_len(&s.params) as f64;
        let bits_per_item = 8.0 * bytes / 1_000_000.0;
        assert!(bits_per_item < 11.6, "{bits_per_item}");
    }

    #[test]
    fn corrupted_buckets_are_rejected() {
        let (f, _) = filled(0.002, 500, 3);
        let t = f.table();
        let h = DenseHeader { params: t.params(), items: t.item_count(), capacity: f.capacity(), key: KeyType::NONE };
        let bytes = encode(&h, f.words());
        // Every single-bit flip in the bucket area is either rejected or gives
        // another valid filter in canonical form (a fingerprint changed in place);
        // flips in the padding, or that break the order or the count, are rejected.
        let data_bits = 8 * (bytes.len() - V2_HEADER_BYTES);
        let used_bits = (t.params().bucket_count * bucket_bits(&t.params()) as u64) as usize;
        let mut rejected = 0;
        for bit in 0..data_bits {
            let mut b = bytes.clone();
            b[V2_HEADER_BYTES + bit / 8] ^= 1 << (bit % 8);
            let p = parse_v2(&b).unwrap();
            let d = Dense::new(&p.params, &b[V2_HEADER_BYTES..]);
            match d.validate(p.items) {
                Err(_) => rejected += 1,
                Ok(()) => {
                    assert!(bit < used_bits, "flip of padding bit {bit} accepted");
                    assert_eq!(encode(&p, d.words()), b, "accepted bytes are not canonical (bit {bit})");
                }
            }
        }
        assert!(rejected >= data_bits - used_bits);
        // Header fields.
        for (at, v) in [(4, 3u8), (5, 2), (6, 13), (7, 5), (8, 0), (8, 3), (9, 1), (10, 1), (0, b'X')] {
            let mut b = bytes.clone();
            b[at] = v;
            assert!(parse_v2(&b).is_err(), "byte {at} = {v} accepted");
        }
        let mut b = bytes.clone();
        b[40..48].copy_from_slice(&0u64.to_le_bytes());
        assert!(parse_v2(&b).is_err(), "capacity 0 accepted");
        let mut b = bytes.clone();
        b[24..32].copy_from_slice(&(t.params().bucket_count + 1).to_le_bytes());
        assert!(parse_v2(&b).is_err(), "bucket count not matching the length accepted");
        assert!(parse_v2(&bytes[..bytes.len() - 1]).is_err());
        assert!(parse_v2(&[bytes.clone(), vec![0]].concat()).is_err());
    }
}
