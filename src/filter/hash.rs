//! Turning keys into 64-bit hashes, and hashes into a fingerprint and candidate
//! buckets. Keys are hashed with xxh3-64 under the seed stored in the filter header;
//! the same bytes give the same hash on every platform.

use super::layout::Geometry;
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

impl Geometry {
    /// Fingerprint from the high 32 bits of the hash, scaled onto `1..2^f` (0 means
    /// an empty slot). Multiply-shift keeps it uniform without a division.
    #[inline(always)]
    pub fn fingerprint(&self, hash: u64) -> u64 {
        (((hash >> 32) * self.fingerprint_mask) >> 32) + 1
    }

    /// Primary bucket from the low bits of the hash.
    #[inline(always)]
    pub fn primary(&self, hash: u64) -> u64 {
        hash & self.bucket_mask
    }

    /// The other candidate bucket of a fingerprint that sits in `bucket`. Its own
    /// inverse, so a stored fingerprint can always be moved without its key.
    #[inline(always)]
    pub fn alternate(&self, bucket: u64, fp: u64) -> u64 {
        bucket ^ (mix64(fp) & self.bucket_mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_is_the_published_function() {
        // Reference values of XXH3_64bits_withSeed; pinning them guarantees every
        // platform hashes identically.
        assert_eq!(hash_bytes(0, b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(hash_bytes(0, b"a"), 0xe6c6_32b6_1e96_4e1f);
        assert_eq!(hash_i64(0, 42), xxh3_64_with_seed(&[42, 0, 0, 0, 0, 0, 0, 0], 0));
    }
}
