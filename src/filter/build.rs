//! Preparing a batch of key hashes for a bulk build: bucket order and
//! deduplication. Inserting in bucket order walks the table sequentially instead of
//! taking a cache miss per key.

/// Radix digit width: at most 2 passes for the largest value table (2^26 buckets).
const DIGIT_BITS: u32 = 13;

/// Sorts hashes so that their primary buckets in a table of `2^log2` buckets
/// ascend (an LSD radix sort on the low `log2` bits; order within a bucket is
/// unspecified).
pub fn sort_in_bucket_order(hashes: &mut [u64], log2: u32) {
    if log2 == 0 || hashes.len() < 2 {
        return;
    }
    let mut scratch = vec![0u64; hashes.len()];
    let mut shift = 0;
    let mut in_scratch = false;
    while shift < log2 {
        let bits = DIGIT_BITS.min(log2 - shift);
        let digit = |h: u64| ((h >> shift) & ((1u64 << bits) - 1)) as usize;
        let (src, dst): (&[u64], &mut [u64]) =
            if in_scratch { (&scratch, &mut *hashes) } else { (&*hashes, &mut scratch) };
        let mut offsets = vec![0usize; (1 << bits) + 1];
        for &h in src {
            offsets[digit(h) + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        for &h in src {
            let d = digit(h);
            dst[offsets[d]] = h;
            offsets[d] += 1;
        }
        in_scratch = !in_scratch;
        shift += bits;
    }
    if in_scratch {
        hashes.copy_from_slice(&scratch);
    }
}

/// Sorts in bucket order and removes repeated hashes (repeated keys); returns the
/// number of distinct hashes, which now fill the front of the slice in bucket
/// order. Equal hashes share a bucket, so each bucket's run is deduplicated alone.
pub fn dedup_in_bucket_order(hashes: &mut [u64], log2: u32) -> usize {
    sort_in_bucket_order(hashes, log2);
    let mask = (1u64 << log2) - 1;
    let (mut n, mut start) = (0usize, 0usize);
    while start < hashes.len() {
        let bucket = hashes[start] & mask;
        let mut end = start + 1;
        while end < hashes.len() && hashes[end] & mask == bucket {
            end += 1;
        }
        hashes[start..end].sort_unstable();
        for i in start..end {
            if i == start || hashes[i] != hashes[i - 1] {
                hashes[n] = hashes[i];
                n += 1;
            }
        }
        start = end;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::table::tests::Rng;

    #[test]
    fn dedup_keeps_one_of_each_in_bucket_order() {
        let mut v = vec![5u64, 1, 5, 9, 1, 1 << 40, 6];
        let n = dedup_in_bucket_order(&mut v, 2);
        assert_eq!(n, 5);
        let mut distinct = v[..n].to_vec();
        distinct.sort();
        assert_eq!(distinct, vec![1, 5, 6, 9, 1 << 40]);
        assert!(v[..n].windows(2).all(|w| (w[0] & 3) <= (w[1] & 3)));
        assert_eq!(dedup_in_bucket_order(&mut [], 3), 0);
    }

    #[test]
    fn radix_order_matches_a_comparison_sort() {
        let mut rng = Rng(5);
        for log2 in [0u32, 1, 7, 13, 14, 26] {
            let mut v: Vec<u64> = (0..20_000).map(|_| rng.next() % 5000 * 0x1_0000_0001).collect();
            let mut expected = v.clone();
            expected.sort();
            expected.dedup();
            let n = dedup_in_bucket_order(&mut v, log2);
            let mask = (1u64 << log2) - 1;
            assert!(v[..n].windows(2).all(|w| (w[0] & mask) <= (w[1] & mask)), "log2 {log2}");
            let mut got = v[..n].to_vec();
            got.sort();
            assert_eq!(got, expected, "log2 {log2}");
        }
    }
}
