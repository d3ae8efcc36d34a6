//! Turning keys into 64-bit hashes, and hashes into a fingerprint and candidate
//! buckets. Keys are hashed with xxh3-64 under the seed stored in the filter header;
//! the same bytes give the same hash on every platform.
//!
//! # Buckets for any table size (the fastrange mapping)
//!
//! With `m` buckets, `lo` the low and `hi` the high 32 bits of a key's hash:
//!
//! - fingerprint `f = ⌊hi·(2^b − 1) / 2^32⌋ + 1`, in `1..2^b` (0 marks an empty slot);
//! - primary bucket `i1 = ⌊lo·m / 2^32⌋` ("fastrange": a multiply and a shift
//!   instead of a division, uniform over `0..m` for any `m`);
//! - alternate bucket `i2 = (H(f) − i1) mod m`, with `H(f) = ⌊hi32(mix(f))·m / 2^32⌋`.
//!
//! The alternate is an involution for every `m`: `(H(f) − ((H(f) − i) mod m)) mod m
//! = i`, so a fingerprint stored in either bucket finds the other from the bucket
//! index and the fingerprint alone, and can be moved without its key, exactly as
//! with the power-of-two XOR rule (`i XOR H(f)`), which only stays inside the table
//! when `m` is a power of two. `H` is a real hash of the fingerprint, so a key's
//! two buckets are spread over the whole table, and `i2` is uniform when `i1` is.
//! (The pair `{i1, i2}` is the same for all keys with the same `f` and the same
//! `i1 + i2 mod m`; equally, under XOR it is the same for the same `i1 XOR i2`.)
//!
//! `i1` is nondecreasing in `lo`: hashes sorted by their low 32 bits are sorted by
//! primary bucket for every table size. The bulk build and the merge of parallel
//! partial states rely on this; it lets workers sort before the table size is known.
//!
//! Filters written by cuckoo 0.1.0 use the power-of-two XOR mapping
//! (`i1 = h mod m`, `i2 = i1 XOR (mix(f) mod m)`) with the same fingerprint; their
//! values say so and keep it, so they answer exactly as before.

use super::layout::{Geometry, Mapping};
use xxhash_rust::xxh3::xxh3_64_with_seed;

#[inline]
pub fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, seed)
}

/// Integers of every width hash as the little-endian bytes of their `int8` value,
/// so `42::int2`, `42::int4` and `42::int8` are the same key.
#[inline]
pub fn hash_i64(seed: u64, v: i64) -> u64 {
    xxh3_64_with_seed(&v.to_le_bytes(), seed)
}

/// The murmur3 64-bit finalizer: a cheap, full-avalanche mix used to hash a
/// fingerprint into a bucket offset. It must be a real hash of the fingerprint (not
/// the fingerprint itself), or alternate buckets would sit next to the primary one.
#[inline(always)]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// `⌊x·m / 2^32⌋` for `x < 2^32`, `m ≤ 2^32`: uniform onto `0..m`.
#[inline(always)]
pub fn fastrange32(x: u64, m: u64) -> u64 {
    ((x & 0xffff_ffff) * m) >> 32
}

/// The key of a hash in bucket order: its low 32 bits (which give the primary
/// bucket under the fastrange mapping) first, then its high 32 bits.
#[inline(always)]
pub fn bucket_order_key(hash: u64) -> u64 {
    hash.rotate_left(32)
}

impl Geometry {
    /// Fingerprint from the high 32 bits of the hash, scaled onto `1..2^f` (0 means
    /// an empty slot). Multiply-shift keeps it uniform without a division.
    #[inline(always)]
    pub fn fingerprint(&self, hash: u64) -> u64 {
        (((hash >> 32) * self.fingerprint_mask) >> 32) + 1
    }

    /// Primary bucket: from the low 32 bits of the hash.
    #[inline(always)]
    pub fn primary(&self, hash: u64) -> u64 {
        match self.mapping {
            Mapping::Fastrange => fastrange32(hash, self.bucket_count),
            Mapping::PowerOfTwoXor => hash & self.bucket_mask,
        }
    }

    /// The other candidate bucket of a fingerprint that sits in `bucket`. Its own
    /// inverse, so a stored fingerprint can always be moved without its key.
    #[inline(always)]
    pub fn alternate(&self, bucket: u64, fp: u64) -> u64 {
        match self.mapping {
            Mapping::Fastrange => {
                let h = fastrange32(mix64(fp) >> 32, self.bucket_count);
                if h >= bucket {
                    h - bucket
                } else {
                    h + self.bucket_count - bucket
                }
            }
            Mapping::PowerOfTwoXor => bucket ^ (mix64(fp) & self.bucket_mask),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::layout::Params;

    #[test]
    fn xxh3_is_the_published_function() {
        // Reference values of XXH3_64bits_withSeed; pinning them guarantees every
        // platform hashes identically.
        assert_eq!(hash_bytes(0, b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(hash_bytes(0, b"a"), 0xe6c6_32b6_1e96_4e1f);
        assert_eq!(hash_i64(0, 42), xxh3_64_with_seed(&[42, 0, 0, 0, 0, 0, 0, 0], 0));
    }

    #[test]
    fn alternate_is_an_involution_inside_the_table_for_every_size() {
        for m in (1..200u64).chain([1000, 4095, 4096, 4097, 999_983, 1 << 32]) {
            let g = Geometry::new(&Params {
                fingerprint_bits: 12,
                slots_per_bucket: 4,
                bucket_count: m,
                seed: 0,
                mapping: Mapping::Fastrange,
            });
            for fp in 1..300u64 {
                for i in [0, 1, m / 2, m - 1].into_iter().filter(|&i| i < m) {
                    let j = g.alternate(i, fp);
                    assert!(j < m, "m {m} fp {fp} i {i} -> {j}");
                    assert_eq!(g.alternate(j, fp), i, "m {m} fp {fp} i {i}");
                }
            }
        }
    }

    #[test]
    fn primary_is_monotone_in_the_low_bits() {
        for m in [1u64, 3, 1000, 999_983] {
            let g = Geometry::new(&Params {
                fingerprint_bits: 12,
                slots_per_bucket: 4,
                bucket_count: m,
                seed: 0,
                mapping: Mapping::Fastrange,
            });
            let mut last = 0;
            for lo in (0..(1u64 << 32)).step_by(65_537) {
                let i = g.primary(lo | 0xdead_beef << 32);
                assert!(i >= last && i < m);
                last = i;
            }
        }
    }

    #[test]
    fn alternates_spread_over_the_table() {
        // For a fixed primary bucket, fingerprints send keys to many different
        // alternates (not clustered near the primary).
        let m = 100_003;
        let g = Geometry::new(&Params {
            fingerprint_bits: 12,
            slots_per_bucket: 4,
            bucket_count: m,
            seed: 0,
            mapping: Mapping::Fastrange,
        });
        let alts: std::collections::HashSet<u64> = (1..4096).map(|fp| g.alternate(500, fp)).collect();
        assert!(alts.len() > 4000);
        let near = alts.iter().filter(|&&a| a.abs_diff(500) < 1000).count();
        assert!(near < 100, "{near} of 4095 alternates within 1000 buckets");
    }
}
