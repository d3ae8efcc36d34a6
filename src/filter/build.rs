//! Preparing a batch of key hashes for a bulk build: bucket order and
//! deduplication. Inserting in bucket order walks the table sequentially instead of
//! taking a cache miss per key.

/// Sorts hashes so that their primary buckets in a table of `2^log2` buckets
/// ascend: the low `log2` bits become the most significant part of the sort key.
pub fn sort_in_bucket_order(hashes: &mut [u64], log2: u32) {
    hashes.sort_unstable_by_key(|&h| h.rotate_right(log2));
}

/// Sorts in bucket order and removes repeated hashes (repeated keys); returns the
/// number of distinct hashes, which now fill the front of the slice.
pub fn dedup_in_bucket_order(hashes: &mut [u64], log2: u32) -> usize {
    sort_in_bucket_order(hashes, log2);
    let mut n = 0;
    for i in 0..hashes.len() {
        if n == 0 || hashes[i] != hashes[n - 1] {
            hashes[n] = hashes[i];
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
