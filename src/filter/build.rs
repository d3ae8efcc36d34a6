//! Preparing a batch of key hashes for a bulk build: bucket order and
//! deduplication. Inserting in bucket order walks the table sequentially instead of
//! taking a cache miss per key.

/// Radix digits of at most 11 bits keep the scatter targets (2048 cache lines)
/// within L2.
const MAX_DIGIT_BITS: u32 = 11;

/// Sorts hashes so that their primary buckets in a table of `2^log2` buckets
/// ascend (an LSD radix sort on the low `log2` bits; order within a bucket is
/// unspecified).
pub fn sort_in_bucket_order(hashes: &mut [u64], log2: u32) {
    sort_by_key_bits(hashes, log2, |h| h);
}

/// Radix sort of `items` by the low `bits` bits of `key(item)`: one scatter on the
/// high digit into memory-sized partitions, then each partition (small enough for
/// the cache) sorted on the remaining low bits, in cache. Stable.
pub fn sort_by_key_bits(items: &mut [u64], bits: u32, key: impl Fn(u64) -> u64) {
    let n = items.len();
    if bits == 0 || n < 2 {
        return;
    }
    let key = |h: u64| key(h) & (u64::MAX >> (64 - bits));
    let high_bits = bits.min(MAX_DIGIT_BITS);
    let low_bits = bits - high_bits;
    let high = |h: u64| (key(h) >> low_bits) as usize;
    let mut starts = vec![0usize; (1 << high_bits) + 1];
    for &h in items.iter() {
        starts[high(h) + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut scratch: Vec<u64> = Vec::with_capacity(n);
    let mut next = starts.clone();
    // SAFETY: the prefix sums give each high digit a disjoint range of indices below
    // `n` whose sizes equal the digit counts, so every slot of `scratch` is written
    // exactly once before `set_len`.
    unsafe {
        let dst = scratch.as_mut_ptr();
        for &h in items.iter() {
            let d = high(h);
            dst.add(next[d]).write(h);
            next[d] += 1;
        }
        scratch.set_len(n);
    }
    if low_bits == 0 {
        items.copy_from_slice(&scratch);
        return;
    }
    // Each partition back into `items`, by the low bits (LSD passes in cache).
    let low_mask = (1u64 << low_bits) - 1;
    for p in 0..(1usize << high_bits) {
        let (a, b) = (starts[p], starts[p + 1]);
        lsd_sort_into(&mut scratch[a..b], &mut items[a..b], low_bits, |h| key(h) & low_mask);
    }
}

/// LSD radix sort of `src` by the low `bits` bits of `key`, ending in `dst` (same
/// length; both buffers are overwritten). Stable.
fn lsd_sort_into(src: &mut [u64], dst: &mut [u64], bits: u32, key: impl Fn(u64) -> u64) {
    let passes = bits.div_ceil(MAX_DIGIT_BITS);
    let digit_bits = bits.div_ceil(passes);
    let radix = 1usize << digit_bits;
    let mut counts = vec![0usize; radix];
    // An odd number of passes ends in `dst`; with an even number, start by moving
    // the data there so that the last pass does.
    let (mut from, mut to) = if passes % 2 == 1 { (src, dst) } else {
        dst.copy_from_slice(src);
        (dst, src)
    };
    for p in 0..passes {
        let shift = p * digit_bits;
        let digit = |h: u64| (key(h) >> shift) as usize & (radix - 1);
        counts.fill(0);
        for &h in from.iter() {
            counts[digit(h)] += 1;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &h in from.iter() {
            let d = digit(h);
            to[counts[d]] = h;
            counts[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
}

/// Sorts in bucket order and removes repeated hashes (repeated keys); returns the
/// number of distinct hashes, which now fill the front of the slice in bucket
/// order and, within a bucket, ascending, whatever the input order was. Equal
/// hashes share a bucket, so each bucket's run is deduplicated alone.
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
        // Each run is sorted, so the result does not depend on the input order
        // (a parallel plan builds the same bytes as a serial one). Runs are short
        // (a few keys per bucket): insertion sort, unless a key repeats a lot.
        let run = &mut hashes[start..end];
        if run.len() > 16 {
            run.sort_unstable();
        } else {
            for i in 1..run.len() {
                let mut j = i;
                while j > 0 && run[j - 1] > run[j] {
                    run.swap(j - 1, j);
                    j -= 1;
                }
            }
        }
        for i in start..end {
            if i == start || hashes[i] != hashes[i - 1] {
                if n != i {
                    hashes[n] = hashes[i];
                }
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
        // The result does not depend on the input order.
        let mut w = vec![1 << 40, 6, 9, 5, 1, 5, 1];
        let m = dedup_in_bucket_order(&mut w, 2);
        assert_eq!(v[..n], w[..m]);
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
