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
use super::radix::{index_bits, sort_by_key_bits};
use super::sizing::max_load;
use super::table::OwnedFilter;

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
    let k = prefix_bits(n);
    sort_by_key_bits(hashes, k, |h| bucket_order_key(h) >> (64 - k));
    finish_runs(hashes, k, &mut || {
        super::host::check_interrupts();
        false
    })
}

/// Bits of the bucket-order key a radix sort of `n` hashes sorts on.
fn prefix_bits(n: usize) -> u32 {
    index_bits(n as u64).clamp(1, 32)
}

/// Sorts each run of hashes with the same `k`-bit prefix of their bucket-order
/// key (`hashes` is sorted by that prefix) and drops repeats; returns the
/// number of distinct hashes, which then fill the front of the slice. Calls
/// `stop` every [`CHECK_EVERY`](super::host::CHECK_EVERY) hashes and returns
/// early (the slice then holds no useful result) when it says so.
fn finish_runs(hashes: &mut [u64], k: u32, stop: &mut impl FnMut() -> bool) -> usize {
    let n = hashes.len();
    let prefix = |h: u64| bucket_order_key(h) >> (64 - k);
    let (mut out, mut start) = (0usize, 0usize);
    let mut checked = 0usize;
    while start < n {
        if start - checked >= super::host::CHECK_EVERY {
            if stop() {
                return 0;
            }
            checked = start;
        }
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

/// Fewer hashes than this are sorted on one thread.
#[cfg(not(loom))]
pub const THREADED_SORT_FROM: usize = 1 << 20;

/// [`sort_dedup`] on up to `threads` threads (the caller's included;
/// `threads::run`): each thread counts and scatters its part of the input by
/// the high digit of the key's prefix, then sorts and deduplicates whole
/// partitions (a partition holds every copy of its hashes), and the caller
/// closes the gaps between them. The result is [`sort_dedup`]'s (it depends
/// only on the set of hashes). A pending interrupt stops every thread within
/// [`STEP`](super::threads::STEP) hashes; the caller then handles it, and if
/// that returns, sorts on its own thread.
#[cfg(not(loom))]
pub fn sort_dedup_threads(hashes: &mut [u64], threads: usize) -> usize {
    sort_dedup_threads_asking(hashes, threads, &super::host::interrupt_pending)
}

/// [`sort_dedup_threads`], asking `pending` whether an interrupt is pending.
#[cfg(not(loom))]
fn sort_dedup_threads_asking(hashes: &mut [u64], threads: usize, pending: &(dyn Fn() -> bool + Sync)) -> usize {
    use super::threads::{run as run_threads, SharedMut, STEP};
    let run = |n: usize, work: &(dyn Fn(&super::threads::Share) + Sync)| run_threads(n, pending, work);
    let n = hashes.len();
    let threads = threads.clamp(1, 64);
    if threads == 1 || n < THREADED_SORT_FROM {
        return sort_dedup(hashes);
    }
    let k = prefix_bits(n);
    let high_bits = k.min(super::radix::MAX_DIGIT_BITS);
    let low_bits = k - high_bits;
    let parts = 1usize << high_bits;
    let digit = |h: u64| ((bucket_order_key(h) >> (64 - k)) >> low_bits) as usize;
    let chunk = n.div_ceil(threads);
    // Every buffer the threads use, allocated here (they allocate nothing).
    let mut counts: Vec<usize> = super::host::vec_filled(threads * parts, 0);
    let mut scratch: Vec<u64> = super::host::vec_filled(n, 0);
    let mut distinct: Vec<usize> = super::host::vec_filled(parts, 0);
    // The phase a pending interrupt stopped (1-3), if one did.
    let stopped: u8 = 'work: {
        // Each thread counts its chunk's digits.
        let counts_at = SharedMut(counts.as_mut_ptr());
        let input: &[u64] = hashes;
        if !run(threads, &|s| {
            let mine = &input[(s.index * chunk).min(n)..((s.index + 1) * chunk).min(n)];
            // SAFETY: thread `i` writes only its own `parts` counters.
            let c = unsafe { std::slice::from_raw_parts_mut(counts_at.ptr().add(s.index * parts), parts) };
            for (i, &h) in mine.iter().enumerate() {
                if i % STEP == STEP - 1 && s.stopped() {
                    return;
                }
                c[digit(h)] += 1;
            }
        }) {
            break 'work 1;
        }
        // Where each thread's hashes of each digit go: digits in order, and
        // within a digit the threads' chunks in input order.
        let mut starts: Vec<usize> = super::host::vec_filled(parts + 1, 0);
        let mut at = 0usize;
        for d in 0..parts {
            starts[d] = at;
            for t in 0..threads {
                let c = counts[t * parts + d];
                counts[t * parts + d] = at;
                at += c;
            }
        }
        starts[parts] = n;
        let next_at = SharedMut(counts.as_mut_ptr());
        let out = SharedMut(scratch.as_mut_ptr());
        if !run(threads, &|s| {
            let mine = &input[(s.index * chunk).min(n)..((s.index + 1) * chunk).min(n)];
            // SAFETY: thread `i` uses only its own `parts` positions; the
            // prefix sums give each (thread, digit) a disjoint range of
            // `scratch` as long as its count, so every element is written once.
            unsafe {
                let next = std::slice::from_raw_parts_mut(next_at.ptr().add(s.index * parts), parts);
                for (i, &h) in mine.iter().enumerate() {
                    if i % STEP == STEP - 1 && s.stopped() {
                        return;
                    }
                    let d = digit(h);
                    out.ptr().add(next[d]).write(h);
                    next[d] += 1;
                }
            }
        }) {
            break 'work 2;
        }
        // Whole partitions to each thread, about n / threads hashes each.
        let bounds: Vec<usize> = (0..=threads)
            .map(|t| if t == threads { parts } else { starts.partition_point(|&a| a < t * chunk).min(parts) })
            .collect();
        let (src, dst, dist) =
            (SharedMut(scratch.as_mut_ptr()), SharedMut(hashes.as_mut_ptr()), SharedMut(distinct.as_mut_ptr()));
        let low_mask = if low_bits == 0 { 0 } else { (1u64 << low_bits) - 1 };
        if !run(threads, &|s| {
            let mut since = 0usize;
            for d in bounds[s.index]..bounds[s.index + 1] {
                let (a, b) = (starts[d], starts[d + 1]);
                since += b - a;
                if since >= STEP {
                    since = 0;
                    if s.stopped() {
                        return;
                    }
                }
                // SAFETY: partition `d` is the range a..b of both buffers, and
                // each partition belongs to one thread; `distinct[d]` likewise.
                unsafe {
                    let from = std::slice::from_raw_parts_mut(src.ptr().add(a), b - a);
                    let to = std::slice::from_raw_parts_mut(dst.ptr().add(a), b - a);
                    if low_bits == 0 {
                        to.copy_from_slice(from);
                    } else {
                        super::radix::lsd_sort_into(from, to, low_bits, |h| {
                            (bucket_order_key(h) >> (64 - k)) & low_mask
                        });
                    }
                    *dist.ptr().add(d) = finish_runs(to, k, &mut || false);
                }
            }
        }) {
            break 'work 3;
        }
        // Close the gaps: each partition's distinct hashes after the last's.
        let mut out = 0usize;
        for d in 0..parts {
            hashes.copy_within(starts[d]..starts[d] + distinct[d], out);
            out += distinct[d];
        }
        return out;
    };
    // Stopped for an interrupt. The input is whole until the last phase,
    // which sorts each partition from `scratch` into `hashes`; every
    // partition's hashes are then still in `scratch` (each pass of the radix
    // sort writes a whole permutation of its partition, and the
    // deduplication only rearranges `hashes`): put them back.
    if stopped == 3 {
        hashes.copy_from_slice(&scratch);
    }
    drop((counts, scratch, distinct));
    // Handle the interrupt (it usually ends the query); if it was one that
    // does not (a client connection check, a request to log memory
    // contexts...), sort here.
    super::host::check_interrupts();
    sort_dedup(hashes)
}

/// Merges runs that are each in bucket order without repeats into one such run
/// (a hash in several runs is kept once), in one pass that takes the smallest
/// head of the few runs of a parallel plan each time. A run found out of order is
/// an error (runs come from partial states, which are checked, not trusted).
pub fn merge_dedup(runs: &[&[u64]]) -> Result<Vec<u64>, RunError> {
    let mut runs: Vec<&[u64]> = runs.iter().copied().filter(|r| !r.is_empty()).collect();
    let mut out = super::host::vec_with_capacity(runs.iter().map(|r| r.len()).sum());
    let mut last: Option<u64> = None;
    let mut i = 0usize;
    while !runs.is_empty() {
        super::host::check_every(i);
        i += 1;
        let mut best = 0;
        let mut best_key = bucket_order_key(runs[0][0]);
        for (i, r) in runs.iter().enumerate().skip(1) {
            let k = bucket_order_key(r[0]);
            if k < best_key {
                best = i;
                best_key = k;
            }
        }
        let h = runs[best][0];
        if last != Some(best_key) {
            out.push(h);
            last = Some(best_key);
        }
        let r = &mut runs[best];
        if r.len() > 1 && bucket_order_key(r[1]) <= best_key {
            return Err(RunError("run not in bucket order without repeats"));
        }
        *r = &r[1..];
        if r.is_empty() {
            runs.swap_remove(best);
        }
    }
    Ok(out)
}

/// Builds a filter of `hashes` (distinct, in bucket order: primary-bucket order
/// under the fastrange mapping, whatever the bucket count) with parameters
/// `params`, recording `capacity`. If the bulk insert does not fit (a table at
/// its planned load rarely fails), the bucket count grows by 1% (at least one
/// bucket) and the build starts over, up to `max_buckets` and at most
/// [`MAX_BUILD_RETRIES`] times: the result depends only on the hashes, so equal
/// inputs give equal filters.
///
/// Hashes that no table size separates are refused at once: more than a bucket
/// pair holds (2·slots) with the same low 32 bits (so the same primary bucket at
/// every size) and the same fingerprint (so the same pair). Keys hashed by xxh3
/// never come close; only a crafted state can, and it would otherwise grow the
/// table to its limit. A build that still fails after the retries is refused as
/// well: honest hashes fit at the first or second try.
pub fn build_filter(
    hashes: &[u64],
    mut params: Params,
    mut capacity: u64,
    max_buckets: u64,
) -> Result<OwnedFilter, BuildError> {
    let mut tries = 0;
    loop {
        super::host::check_interrupts();
        let f = OwnedFilter::with_capacity(params, capacity);
        if f.table().bulk_insert_exclusive(hashes).is_ok() {
            return Ok(f);
        }
        drop(f);
        if let Some(n) = inseparable(hashes, &params) {
            return Err(BuildError::Inseparable(n));
        }
        tries += 1;
        if tries > MAX_BUILD_RETRIES
            || params.bucket_count >= max_buckets
            || params.mapping != super::layout::Mapping::Fastrange
        {
            return Err(BuildError::Full);
        }
        params.bucket_count = (params.bucket_count + 1).max(params.bucket_count * 101 / 100).min(max_buckets);
        let slots = params.slot_count() as f64;
        capacity = capacity.max((slots * max_load(params.slots_per_bucket)).floor() as u64).min(params.slot_count());
    }
}

/// How many times [`build_filter`] grows the table before it gives up.
pub const MAX_BUILD_RETRIES: u32 = 32;

/// Why [`build_filter`] built nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The hashes did not fit, even grown.
    Full,
    /// This many hashes share a primary bucket at every table size and a
    /// fingerprint: no table holds them.
    Inseparable(usize),
}

/// The largest group of hashes (in bucket order) that share their low 32
/// bits and their fingerprint under `params`, if it is more than a bucket
/// pair holds.
fn inseparable(hashes: &[u64], params: &Params) -> Option<usize> {
    let g = super::layout::Geometry::new(params);
    let limit = 2 * params.slots_per_bucket as usize;
    let mut worst = 0usize;
    let mut i = 0;
    while i < hashes.len() {
        super::host::check_every(i);
        // Equal low bits are adjacent in bucket order, their high bits
        // ascending, so equal fingerprints among them are adjacent too.
        let (lo, fp) = (hashes[i] as u32, g.fingerprint(hashes[i]));
        let mut j = i + 1;
        while j < hashes.len() && hashes[j] as u32 == lo && g.fingerprint(hashes[j]) == fp {
            j += 1;
        }
        worst = worst.max(j - i);
        i = j;
    }
    (worst > limit).then_some(worst)
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
///
/// Runs of at most [`RAW_RUN_MAX`] hashes are stored raw instead (`L` = 255, then
/// the hashes as little-endian u64): 8 bytes per distinct hash, at most 128 MB,
/// and nothing to decode. The bound per distinct hash is then 64 bits; Rice
/// coding takes over where a state could otherwise approach the 1 GB limit.
pub const RUN_HEADER_BYTES: usize = 16;
/// The largest run stored raw.
pub const RAW_RUN_MAX: u64 = 1 << 24;
const RAW: u8 = 255;

fn rice_param(n: u64) -> u32 {
    64 - index_bits(n + 1).min(64)
}

/// The largest encoding of a run of `n` distinct hashes.
#[cfg(test)]
pub fn run_size_bound(n: u64) -> u64 {
    if n <= RAW_RUN_MAX {
        return RUN_HEADER_BYTES as u64 + 8 * n;
    }
    rice_size_bound(n)
}

fn rice_size_bound(n: u64) -> u64 {
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
    if n <= RAW_RUN_MAX {
        assert!(
            hashes.windows(2).all(|w| bucket_order_key(w[0]) < bucket_order_key(w[1])),
            "run not in bucket order without repeats"
        );
        let mut out = super::host::vec_with_capacity(RUN_HEADER_BYTES + 8 * hashes.len());
        out.extend_from_slice(&n.to_le_bytes());
        out.push(RAW);
        out.extend_from_slice(&[0; 7]);
        for h in hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        return out;
    }
    encode_rice(hashes)
}

/// The Rice-coded form of a run (any length; [`encode_run`] uses it for long runs).
pub fn encode_rice(hashes: &[u64]) -> Vec<u8> {
    let n = hashes.len() as u64;
    let l = rice_param(n);
    let mut w = BitWriter { words: super::host::vec_with_capacity((rice_size_bound(n) / 8) as usize), acc: 0, used: 0 };
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
    let mut out = super::host::vec_with_capacity(RUN_HEADER_BYTES + 8 * w.words.len());
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

/// Checks a run's header and length (made by [`encode_run`]); returns its count.
pub fn check_run(bytes: &[u8]) -> Result<u64, RunError> {
    if bytes.len() >= RUN_HEADER_BYTES && bytes[8] == RAW {
        let n = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
        if bytes[9..16].iter().any(|&b| b != 0)
            || n > RAW_RUN_MAX
            || bytes.len() as u64 != RUN_HEADER_BYTES as u64 + 8 * n
        {
            return Err(RunError("bad raw run header or length"));
        }
        return Ok(n);
    }
    RunReader::new(bytes).map(|r| r.len())
}

/// The hashes of a run whose header and length are checked: a raw run in place
/// where its words are aligned little-endian u64 (no copy), else decoded. Their
/// order is checked by [`merge_dedup`].
pub fn run_hashes(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u64]>, RunError> {
    let n = check_run(bytes)?;
    if bytes[8] != RAW {
        let mut out = super::host::vec_with_capacity(n as usize);
        for (i, h) in RunReader::new(bytes)?.enumerate() {
            super::host::check_every(i);
            out.push(h?);
        }
        return Ok(std::borrow::Cow::Owned(out));
    }
    let words = &bytes[RUN_HEADER_BYTES..];
    if cfg!(target_endian = "little") && (words.as_ptr() as usize).is_multiple_of(std::mem::align_of::<u64>()) {
        // SAFETY: `check_run` verified `words` is exactly `n` 8-byte words; the
        // pointer is aligned for u64, every bit pattern is a valid u64, and the
        // target is little-endian, the order the words were written in.
        return Ok(std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(words.as_ptr() as *const u64, n as usize)
        }));
    }
    let mut out = super::host::vec_with_capacity(n as usize);
    out.extend(words.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())));
    Ok(std::borrow::Cow::Owned(out))
}

/// The hashes of a run, checked: in bucket order without repeats, exactly as many
/// as its header says.
#[cfg(test)]
pub fn decode_run(bytes: &[u8]) -> Result<Vec<u64>, RunError> {
    let n = check_run(bytes)?;
    if bytes[8] != RAW {
        return RunReader::new(bytes)?.collect();
    }
    let v: Vec<u64> =
        bytes[RUN_HEADER_BYTES..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    debug_assert_eq!(v.len() as u64, n);
    if !v.windows(2).all(|w| bucket_order_key(w[0]) < bucket_order_key(w[1])) {
        return Err(RunError("raw run not in bucket order without repeats"));
    }
    Ok(v)
}

/// Reads a Rice-coded run, checking it as it goes: yields the hashes, then `Err`
/// once if the run turns out malformed.
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
        if bytes.len() < RUN_HEADER_BYTES || !(bytes.len() - RUN_HEADER_BYTES).is_multiple_of(8) {
            return Err(RunError("run length is not a header plus whole words"));
        }
        let n = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
        let l = bytes[8] as u32;
        // Every code takes at least one bit: a larger count is a lie (and would
        // overflow the arithmetic below).
        if n > 8 * (bytes.len() - RUN_HEADER_BYTES) as u64 {
            return Err(RunError("run count larger than its bits"));
        }
        if bytes[9..16].iter().any(|&b| b != 0) || l != rice_param(n) {
            return Err(RunError("bad run header"));
        }
        let words = &bytes[RUN_HEADER_BYTES..];
        if words.len() as u64 > rice_size_bound(n) - RUN_HEADER_BYTES as u64 {
            return Err(RunError("run longer than its count allows"));
        }
        Ok(RunReader { words, left: n, l, pos: 0, prev: None, failed: false })
    }

    pub fn len(&self) -> u64 {
        self.left
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
            if (!self.pos.is_multiple_of(64) && tail != 0) || used_words * 8 != self.words.len() as u64 {
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
    use crate::filter::hash::hash_i64;
    use crate::filter::layout::{Mapping, Params, DEFAULT_SEED};
    use crate::filter::sizing::max_load;
    use crate::filter::test_rng::Rng;

    fn params(b: u8, f: u8, m: u64, mapping: Mapping) -> Params {
        Params { fingerprint_bits: f, slots_per_bucket: b, bucket_count: m, seed: DEFAULT_SEED, mapping }
    }

    /// A bulk build (hashes in bucket order, then `bulk_insert_exclusive`)
    /// stores what one-key inserts store, for both bucket mappings.
    /// A threaded sort stopped by a pending interrupt that does not end the
    /// call (a client connection check, say) in any of its phases still
    /// gives every hash: the one-thread sort's result.
    #[test]
    #[cfg(not(loom))]
    fn a_threaded_sort_stopped_in_any_phase_keeps_every_hash() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let n = 2 * THREADED_SORT_FROM;
        let mut rng = Rng(9);
        let base: Vec<u64> = (0..n).map(|_| hash_i64(DEFAULT_SEED, (rng.next() % (n as u64)) as i64)).collect();
        let mut serial = base.clone();
        let d = sort_dedup(&mut serial);
        // The caller's thread asks once per step (64k hashes) of its share of
        // each phase: about 16 times in each of the three phases here.
        for stop_at in (1usize..=60).step_by(2) {
            let asked = AtomicUsize::new(0);
            let pending = || asked.fetch_add(1, Ordering::Relaxed) + 1 >= stop_at;
            let mut threaded = base.clone();
            let t = sort_dedup_threads_asking(&mut threaded, 2, &pending);
            assert_eq!(t, d, "stopped at ask {stop_at}");
            assert!(threaded[..t] == serial[..d], "stopped at ask {stop_at}");
        }
    }

    /// The threaded sort gives what the one-thread sort gives, for any number
    /// of threads, with repeats within and across the threads' chunks.
    #[test]
    #[cfg(not(loom))]
    fn threaded_sort_matches_the_serial_one() {
        let mut rng = Rng(7);
        for n in [THREADED_SORT_FROM - 1, THREADED_SORT_FROM, 3_000_001] {
            let base: Vec<u64> =
                (0..n).map(|i| hash_i64(DEFAULT_SEED, (rng.next() % (n as u64 / 2)) as i64 + (i % 2) as i64)).collect();
            let mut serial = base.clone();
            let d = sort_dedup(&mut serial);
            for threads in [1, 2, 3, 8] {
                let mut threaded = base.clone();
                let t = sort_dedup_threads(&mut threaded, threads);
                assert_eq!(t, d, "n {n} threads {threads}");
                assert!(threaded[..t] == serial[..d], "n {n} threads {threads}");
            }
        }
    }

    #[test]
    fn bulk_insert_matches_single_inserts() {
        let mappings = [(Mapping::Fastrange, 1000), (Mapping::PowerOfTwoXor, 1024)];
        for (b, f) in [(4u8, 12u8), (3, 16), (2, 24)] {
            for (mapping, m) in mappings {
                let p = params(b, f, m, mapping);
                let n = (p.slot_count() as f64 * max_load(b)) as usize;
                let mut rng = Rng(21);
                let mut hashes: Vec<u64> = (0..n).map(|_| hash_i64(DEFAULT_SEED, rng.next() as i64)).collect();
                let distinct = sort_dedup(&mut hashes);
                assert_eq!(distinct, n);
                if mapping == Mapping::PowerOfTwoXor {
                    // Format 1's primary bucket is the low bits.
                    crate::filter::radix::sort_by_key_bits(&mut hashes, 10, |h| h);
                }
                let bulk = OwnedFilter::new(p);
                bulk.table().bulk_insert_exclusive(&hashes).unwrap();
                assert_eq!(bulk.table().item_count(), n as u64);
                for &h in &hashes {
                    assert!(bulk.table().contains(h));
                }
                let counted: u64 = bulk.words().map(|w| bulk.table().geometry().occupied(w) as u64).sum();
                assert_eq!(counted, n as u64);
            }
        }
    }

    #[test]
    fn bulk_build_of_many_keys_at_full_load_keeps_every_key() {
        // 400k keys at 95.5% load in 104,712 buckets: tens of thousands of keys take
        // the one- and two-move passes, thousands the three-move search, some the
        // general insert.
        let p = params(4, 12, 104_712, Mapping::Fastrange);
        let n = (p.slot_count() as f64 * 0.955) as usize;
        let mut rng = Rng(22);
        let mut hashes: Vec<u64> = (0..n).map(|_| rng.next()).collect();
        let distinct = sort_dedup(&mut hashes);
        let f = OwnedFilter::new(p);
        f.table().bulk_insert_exclusive(&hashes[..distinct]).unwrap();
        assert_eq!(f.table().item_count(), distinct as u64);
        let counted: u64 = f.words().map(|w| f.table().geometry().occupied(w) as u64).sum();
        assert_eq!(counted, distinct as u64);
        assert!(hashes[..distinct].iter().all(|&h| f.table().contains(h)), "a key is missing");
    }

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
        let slices: Vec<&[u64]> = runs.iter().map(|r| &r[..]).collect();
        let out = merge_dedup(&slices).unwrap();
        // Runs out of order are refused.
        let mut bad = runs[0].clone();
        bad.swap(10, 11);
        assert!(merge_dedup(&[&bad[..], &runs[1][..]]).is_err());
        assert_eq!(merge_dedup(&[]).unwrap(), Vec::<u64>::new());
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
            let raw = encode_run(&v[..m]);
            assert_eq!(raw.len(), RUN_HEADER_BYTES + 8 * m, "short runs are raw");
            assert!(raw.len() as u64 <= run_size_bound(m as u64));
            assert_eq!(decode_run(&raw).unwrap(), v[..m]);
            let rice = encode_rice(&v[..m]);
            assert!(
                rice.len() as u64 <= rice_size_bound(m as u64),
                "n {n}: {} > {}",
                rice.len(),
                rice_size_bound(m as u64)
            );
            assert_eq!(decode_run(&rice).unwrap(), v[..m]);
            assert_eq!(check_run(&rice).unwrap(), m as u64);
        }
    }

    #[test]
    fn partial_state_size_follows_distinct_keys_not_rows() {
        // 20 rows per distinct key: the run holds each hash once: 8 bytes raw, or
        // about 66 - log2(n) bits Rice-coded.
        let mut rng = Rng(8);
        let distinct: Vec<u64> = (0..50_000).map(|_| rng.next()).collect();
        let mut rows: Vec<u64> = (0..20).flat_map(|_| distinct.iter().copied()).collect();
        let m = sort_dedup(&mut rows);
        assert_eq!(m, distinct.len());
        assert_eq!(encode_run(&rows[..m]).len(), RUN_HEADER_BYTES + 8 * m);
        let bytes = encode_rice(&rows[..m]);
        let bits_per_key = 8.0 * bytes.len() as f64 / m as f64;
        assert!(bits_per_key < 66.0 - (m as f64).log2() + 0.5, "{bits_per_key}");
        // The largest state a worker sends stays under PostgreSQL's 1 GB limit up
        // to about 200M distinct keys, however many rows it read: the 100M of a
        // 500M-row table fit in one worker.
        let limit = 0x3fff_ffffu64 - 64;
        assert!(run_size_bound(100_000_000) < limit / 2);
        assert!(run_size_bound(200_000_000) < limit);
        assert!((1..=45).all(|k| run_size_bound(k * (1 << 22)) < limit));
    }

    #[test]
    fn malformed_runs_are_rejected_not_trusted() {
        let mut rng = Rng(9);
        let mut v: Vec<u64> = (0..500).map(|_| rng.next()).collect();
        let m = sort_dedup(&mut v);
        for bytes in [encode_run(&v[..m]), encode_rice(&v[..m])] {
            let read_all = |b: &[u8]| -> Result<Vec<u64>, RunError> { decode_run(b) };
            assert!(read_all(&bytes[..bytes.len() - 8]).is_err(), "truncated");
            assert!(read_all(&[bytes.clone(), vec![0; 8]].concat()).is_err(), "extra word");
            let mut b = bytes.clone();
            b[0] ^= 1; // count
            assert!(read_all(&b).is_err());
            let mut b = bytes.clone();
            b[0..8].copy_from_slice(&u64::MAX.to_le_bytes()); // a count no run can hold
            assert!(read_all(&b).is_err());
            b[8] = 0;
            assert!(read_all(&b).is_err());
            let mut b = bytes.clone();
            b[8] ^= 1; // parameter
            assert!(read_all(&b).is_err());
            let mut b = bytes.clone();
            b[9] = 1; // reserved
            assert!(read_all(&b).is_err());
            // Any flipped bit in the stream: an error or different hashes, never a
            // panic; a run that decodes is in bucket order without repeats.
            for bit in 0..8 * (bytes.len() - RUN_HEADER_BYTES) {
                let mut b = bytes.clone();
                b[RUN_HEADER_BYTES + bit / 8] ^= 1 << (bit % 8);
                if let Ok(h) = read_all(&b) {
                    assert_ne!(h, v[..m]);
                    assert!(h.windows(2).all(|w| bucket_order_key(w[0]) < bucket_order_key(w[1])));
                }
            }
            assert!(read_all(&[]).is_err());
        }
    }
}
