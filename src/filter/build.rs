//! Preparing key hashes for a bulk build: bucket order, deduplication, the merge
//! of sorted runs, and the compact encoding of a sorted run that parallel
//! aggregation ships between processes.
//!
//! Bucket order is ascending [`bucket_order_key`] (the low 32 bits of the hash,
//! then the high 32). Under the fastrange mapping the primary bucket is
//! nondecreasing in the low 32 bits whatever the table size (`hash.rs`), so a run
//! sorted this way is in bucket order for the table the final step sizes from
//! the distinct count, which no worker knows: workers sort, the leader merges.

use super::hash::bucket_order_key;
use super::layout::Params;
use super::sizing::max_load;
use super::table::{Full, OwnedFilter};

/// Radix digits of at most 11 bits keep the scatter targets (2048 cache lines)
/// within L2.
const MAX_DIGIT_BITS: u32 = 11;

/// Bits needed to write every index below `m` (0 for `m ≤ 1`).
pub fn index_bits(m: u64) -> u32 {
    if m <= 1 {
        0
    } else {
        64 - (m - 1).leading_zeros()
    }
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

/// Sorts hashes into bucket order and removes repeats (repeated keys); returns the
/// number of distinct hashes, which then fill the front of the slice. The result
/// depends only on the set of hashes, not on their input order, so a parallel
/// plan builds the same bytes as a serial one.
pub fn sort_dedup(hashes: &mut [u64]) -> usize {
    let n = hashes.len();
    if n < 2 {
        return n;
    }
    // Radix sort on a prefix of the key long enough that runs of equal prefix are
    // about one hash long, then finish each run by comparison.
    let k = index_bits(n as u64).clamp(1, 32);
    sort_by_key_bits(hashes, k, |h| bucket_order_key(h) >> (64 - k));
    let prefix = |h: u64| bucket_order_key(h) >> (64 - k);
    let (mut out, mut start) = (0usize, 0usize);
    while start < n {
        let p = prefix(hashes[start]);
        let mut end = start + 1;
        while end < n && prefix(hashes[end]) == p {
            end += 1;
        }
        let run = &mut hashes[start..end];
        if run.len() > 16 {
            run.sort_unstable_by_key(|&h| bucket_order_key(h));
        } else {
            for i in 1..run.len() {
                let mut j = i;
                while j > 0 && bucket_order_key(run[j - 1]) > bucket_order_key(run[j]) {
                    run.swap(j - 1, j);
                    j -= 1;
                }
            }
        }
        for i in start..end {
            if i == start || hashes[i] != hashes[i - 1] {
                hashes[out] = hashes[i];
                out += 1;
            }
        }
        start = end;
    }
    out
}

/// Merges runs that are each in bucket order without repeats into one such run
/// (a hash in several runs is kept once).
pub fn merge_dedup<I: Iterator<Item = u64>>(mut runs: Vec<I>, out: &mut Vec<u64>) {
    let mut heads: Vec<Option<u64>> = runs.iter_mut().map(|r| r.next()).collect();
    let mut last: Option<u64> = None;
    loop {
        // Few runs (the processes of one parallel plan): a linear scan for the
        // smallest head beats a heap.
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            if let Some(h) = h {
                if best.is_none_or(|b| bucket_order_key(*h) < bucket_order_key(heads[b].unwrap())) {
                    best = Some(i);
                }
            }
        }
        let Some(b) = best else { return };
        let h = heads[b].unwrap();
        if last != Some(h) {
            out.push(h);
            last = Some(h);
        }
        heads[b] = runs[b].next();
    }
}

/// Builds a filter of `hashes` (distinct, in bucket order: primary-bucket order
/// under the fastrange mapping, whatever the bucket count) with parameters
/// `params`, recording `capacity`. If the bulk insert does not fit (a table at
/// its planned load rarely fails), the bucket count grows by 1% (at least one
/// bucket) and the build starts over, up to `max_buckets`: the result depends only
/// on the hashes, so equal inputs give equal filters.
pub fn build_filter(hashes: &[u64], mut params: Params, mut capacity: u64, max_buckets: u64) -> Result<OwnedFilter, Full> {
    loop {
        let f = OwnedFilter::with_capacity(params, capacity);
        if f.table().bulk_insert_exclusive(hashes).is_ok() {
            return Ok(f);
        }
        if params.bucket_count >= max_buckets || params.mapping != super::layout::Mapping::Fastrange {
            return Err(Full);
        }
        params.bucket_count = (params.bucket_count + 1).max(params.bucket_count * 101 / 100).min(max_buckets);
        let slots = params.slot_count() as f64;
        capacity = capacity.max((slots * max_load(params.slots_per_bucket)).floor() as u64).min(params.slot_count());
    }
}

/// A sorted run of distinct hashes, Rice-coded: the bucket-order keys ascend, so
/// the run is stored as the gaps between them (minus one), each as a unary
/// quotient and a `L`-bit remainder, `L = 64 − ⌈log2(n + 1)⌉`.
///
/// Layout: count (u64 LE), `L` (u8), 7 zero bytes, then the bit stream in 64-bit
/// little-endian words (bit `k` of the stream is bit `k mod 64` of word `k / 64`),
/// with zero bits after the last code.
///
/// Size: each code is `q + 1 + L` bits, and the quotients sum to at most
/// `2^64 / 2^L ≤ 2n`, so a run of `n` hashes takes at most `n·(L + 3)` bits plus
/// 16 bytes: about `66 − log2 n` bits per distinct hash, whatever the number of
/// rows behind it. ([`run_size_bound`]).
pub const RUN_HEADER_BYTES: usize = 16;

fn rice_param(n: u64) -> u32 {
    64 - index_bits(n + 1).min(64)
}

/// The largest encoding of a run of `n` distinct hashes.
pub fn run_size_bound(n: u64) -> u64 {
    RUN_HEADER_BYTES as u64 + (n * (rice_param(n) as u64 + 3)).div_ceil(64) * 8
}

struct BitWriter {
    words: Vec<u64>,
    acc: u64,
    used: u32,
}

impl BitWriter {
    /// Appends the low `n ≤ 64` bits of `v`.
    fn put(&mut self, v: u64, n: u32) {
        if n == 0 {
            return;
        }
        let v = if n == 64 { v } else { v & ((1u64 << n) - 1) };
        self.acc |= v << self.used;
        if self.used + n >= 64 {
            self.words.push(self.acc);
            let spill = self.used + n - 64;
            self.acc = if spill == 0 { 0 } else { v >> (n - spill) };
            self.used = spill;
        } else {
            self.used += n;
        }
    }
}

/// Encodes hashes that are in bucket order without repeats.
pub fn encode_run(hashes: &[u64]) -> Vec<u8> {
    let n = hashes.len() as u64;
    let l = rice_param(n);
    let mut w = BitWriter { words: Vec::with_capacity((run_size_bound(n) / 8) as usize), acc: 0, used: 0 };
    let mut prev: Option<u64> = None;
    for &h in hashes {
        let k = bucket_order_key(h);
        let gap = match prev {
            None => k,
            Some(p) => {
                assert!(k > p, "run not in bucket order without repeats");
                k - p - 1
            }
        };
        prev = Some(k);
        let mut q = gap >> l;
        while q >= 64 {
            w.put(0, 64);
            q -= 64;
        }
        w.put(1 << q, q as u32 + 1);
        w.put(gap, l);
    }
    if w.used > 0 {
        w.words.push(w.acc);
    }
    let mut out = Vec::with_capacity(RUN_HEADER_BYTES + 8 * w.words.len());
    out.extend_from_slice(&n.to_le_bytes());
    out.push(l as u8);
    out.extend_from_slice(&[0; 7]);
    for x in &w.words {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Why an encoded run was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError(pub &'static str);

/// Reads a run made by [`encode_run`], checking it as it goes: yields the hashes,
/// then `Err` once if the run turns out malformed.
pub struct RunReader<'a> {
    words: &'a [u8],
    left: u64,
    l: u32,
    pos: u64,
    prev: Option<u64>,
    failed: bool,
}

impl<'a> RunReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Result<RunReader<'a>, RunError> {
        if bytes.len() < RUN_HEADER_BYTES || (bytes.len() - RUN_HEADER_BYTES) % 8 != 0 {
            return Err(RunError("run length is not a header plus whole words"));
        }
        let n = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
        let l = bytes[8] as u32;
        if bytes[9..16].iter().any(|&b| b != 0) || l != rice_param(n) {
            return Err(RunError("bad run header"));
        }
        let words = &bytes[RUN_HEADER_BYTES..];
        if words.len() as u64 > run_size_bound(n) - RUN_HEADER_BYTES as u64 {
            return Err(RunError("run longer than its count allows"));
        }
        Ok(RunReader { words, left: n, l, pos: 0, prev: None, failed: false })
    }

    pub fn len(&self) -> u64 {
        self.left
    }

    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    fn word(&self, i: u64) -> u64 {
        let at = i as usize * 8;
        self.words.get(at..at + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
    }

    fn bits_total(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// The next `n < 64` bits, or None past the end.
    fn take(&mut self, n: u32) -> Option<u64> {
        if n == 0 {
            return Some(0);
        }
        if self.pos + n as u64 > self.bits_total() {
            return None;
        }
        let (i, off) = (self.pos / 64, (self.pos % 64) as u32);
        let mut v = self.word(i) >> off;
        if off + n > 64 {
            v |= self.word(i + 1) << (64 - off);
        }
        self.pos += n as u64;
        Some(v & ((1u64 << n) - 1))
    }

    /// Zeros before the next one bit (which is consumed), or None past the end.
    fn unary(&mut self) -> Option<u64> {
        let mut q = 0u64;
        loop {
            if self.pos >= self.bits_total() {
                return None;
            }
            let (i, off) = (self.pos / 64, (self.pos % 64) as u32);
            let w = self.word(i) >> off;
            if w != 0 {
                let z = w.trailing_zeros() as u64;
                self.pos += z + 1;
                return Some(q + z);
            }
            q += 64 - off as u64;
            self.pos += 64 - off as u64;
        }
    }

    fn next_hash(&mut self) -> Result<u64, RunError> {
        let q = self.unary().ok_or(RunError("run ends early"))?;
        let r = self.take(self.l).ok_or(RunError("run ends early"))?;
        if self.l < 64 && q > (u64::MAX >> self.l) {
            return Err(RunError("gap out of range"));
        }
        let gap = (q << self.l) | r;
        let k = match self.prev {
            None => gap,
            Some(p) => p.checked_add(1).and_then(|x| x.checked_add(gap)).ok_or(RunError("gap out of range"))?,
        };
        self.prev = Some(k);
        self.left -= 1;
        if self.left == 0 {
            // Canonical end: zero bits to the end of the last word, no more words.
            let used_words = self.pos.div_ceil(64);
            let tail = self.word(self.pos / 64) >> (self.pos % 64);
            if (self.pos % 64 != 0 && tail != 0) || used_words * 8 != self.words.len() as u64 {
                return Err(RunError("bits after the last hash"));
            }
        }
        Ok(k.rotate_right(32))
    }
}

impl Iterator for RunReader<'_> {
    type Item = Result<u64, RunError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 || self.failed {
            return None;
        }
        let r = self.next_hash();
        self.failed = r.is_err();
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::table::tests::Rng;

    #[test]
    fn sort_dedup_keeps_one_of_each_in_bucket_order() {
        let mut rng = Rng(5);
        for n in [0usize, 1, 2, 17, 1000, 70_000] {
            let mut v: Vec<u64> = (0..n).map(|_| rng.next() % 5000 * 0x1_0000_0001).collect();
            let mut expected = v.clone();
            expected.sort_by_key(|&h| bucket_order_key(h));
            expected.dedup();
            let m = sort_dedup(&mut v);
            assert_eq!(v[..m], expected[..], "n {n}");
            // Independent of input order.
            let mut w: Vec<u64> = v.iter().rev().copied().collect();
            let m2 = sort_dedup(&mut w);
            assert_eq!(w[..m2], expected[..]);
        }
    }

    #[test]
    fn merge_dedup_of_overlapping_runs() {
        let mut rng = Rng(6);
        let all: Vec<u64> = (0..10_000).map(|_| rng.next()).collect();
        let mut runs: Vec<Vec<u64>> = (0..3).map(|r| all.iter().copied().filter(|h| h % 3 != r).collect()).collect();
        for r in runs.iter_mut() {
            let n = sort_dedup(r);
            r.truncate(n);
        }
        let mut out = Vec::new();
        merge_dedup(runs.iter().map(|r| r.iter().copied()).collect(), &mut out);
        let mut expected = all.clone();
        let n = sort_dedup(&mut expected);
        assert_eq!(out, expected[..n]);
    }

    #[test]
    fn runs_round_trip_within_their_size_bound() {
        let mut rng = Rng(7);
        for n in [0usize, 1, 2, 3, 100, 65_536, 200_000] {
            let mut v: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            // Extremes: the smallest and largest keys.
            if n >= 3 {
                v[0] = 0;
                v[1] = u64::MAX;
            }
            let m = sort_dedup(&mut v);
            let bytes = encode_run(&v[..m]);
            assert!(bytes.len() as u64 <= run_size_bound(m as u64), "n {n}: {} > {}", bytes.len(), run_size_bound(m as u64));
            let back: Vec<u64> = RunReader::new(&bytes).unwrap().map(|r| r.unwrap()).collect();
            assert_eq!(back, v[..m]);
        }
    }

    #[test]
    fn partial_state_size_follows_distinct_keys_not_rows() {
        // 20 rows per distinct key: the run holds each hash once, at about
        // 66 - log2(n) bits per distinct hash.
        let mut rng = Rng(8);
        let distinct: Vec<u64> = (0..50_000).map(|_| rng.next()).collect();
        let mut rows: Vec<u64> = (0..20).flat_map(|_| distinct.iter().copied()).collect();
        let m = sort_dedup(&mut rows);
        assert_eq!(m, distinct.len());
        let bytes = encode_run(&rows[..m]);
        let bits_per_key = 8.0 * bytes.len() as f64 / m as f64;
        assert!(bits_per_key < 66.0 - (m as f64).log2() + 0.5, "{bits_per_key}");
        assert!(bytes.len() < 8 * m, "smaller than the raw hashes");
    }

    #[test]
    fn malformed_runs_are_rejected_not_trusted() {
        let mut rng = Rng(9);
        let mut v: Vec<u64> = (0..500).map(|_| rng.next()).collect();
        let m = sort_dedup(&mut v);
        let bytes = encode_run(&v[..m]);
        let read_all = |b: &[u8]| -> Result<Vec<u64>, RunError> { RunReader::new(b)?.collect() };
        assert!(read_all(&bytes[..bytes.len() - 8]).is_err(), "truncated");
        assert!(read_all(&[bytes.clone(), vec![0; 8]].concat()).is_err(), "extra word");
        let mut b = bytes.clone();
        b[0] ^= 1; // count
        assert!(read_all(&b).is_err());
        let mut b = bytes.clone();
        b[8] ^= 1; // parameter
        assert!(read_all(&b).is_err());
        // Any flipped bit in the stream: an error or different hashes, never a panic.
        for bit in 0..8 * (bytes.len() - RUN_HEADER_BYTES) {
            let mut b = bytes.clone();
            b[RUN_HEADER_BYTES + bit / 8] ^= 1 << (bit % 8);
            if let Ok(h) = read_all(&b) {
                assert_ne!(h, v[..m]);
            }
        }
        assert!(read_all(&[]).is_err());
    }
}

