//! Operations on a filter's bucket words: lookup, insert, delete and merge. They run
//! over a caller-provided header and slice of atomic words, with no pointers and no
//! allocation inside the table, so the same code serves a `cuckoofilter` value and a
//! filter in shared memory.
//!
//! Lookup is the two-phase lookup of the lock-free concurrent filter; insert into a
//! bucket with room and delete are single compare-and-swaps; when both candidate
//! buckets are full, insert discovers a path read-only and breadth-first, packs it
//! into one integer, and migrates fingerprints backwards along it.
//!
//! Concurrency status: every word access is atomic and every update a
//! compare-and-swap, but a fingerprint move is a copy into the target followed by a
//! clear of the source. That is exact for a single writer (a value being built or
//! changed by one backend, with any number of readers); making moves safe against
//! concurrent deleters is the lock-free core's job.

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{Geometry, Header, Params};

/// The insert found no free slot within the search bound: the filter is full.
/// Nothing that was stored before the call has been lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Path discovery examines at most this many buckets.
const MAX_BFS_NODES: usize = 2048;
/// Discovery restarts this often before an insert gives up as full. Restarts only
/// happen when the table changed under the path, which a single writer never sees.
const MAX_DISCOVERY_ROUNDS: usize = 16;

/// A view of one filter: its header and its bucket words.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    header: &'a Header,
    buckets: &'a [AtomicU64],
    g: Geometry,
}

/// A path from a start bucket to a bucket with a free slot, packed into one integer:
/// bit 0 says which start bucket (0 = primary, 1 = alternate), then 2 bits per step
/// give the slot whose fingerprint moves on. Bucket indices are not stored: they are
/// re-derived from the start bucket and the fingerprints read along the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    pub bits: u32,
    pub depth: u32,
}

impl Path {
    fn slot(&self, step: u32) -> u32 {
        (self.bits >> (1 + 2 * step)) & 3
    }
    fn push(&self, slot: u32) -> Path {
        Path { bits: self.bits | (slot << (1 + 2 * self.depth)), depth: self.depth + 1 }
    }
}

impl<'a> Table<'a> {
    /// `buckets.len()` must equal the header's bucket count; the header's parameters
    /// must have passed [`Params::check`].
    #[inline]
    pub fn new(header: &'a Header, buckets: &'a [AtomicU64]) -> Table<'a> {
        let params = header.params();
        debug_assert_eq!(buckets.len() as u64, params.bucket_count(), "bucket slice does not match header");
        Table { header, buckets, g: Geometry::new(&params) }
    }

    /// Deepest path whose breadth-first tree (two roots, `b` children per node)
    /// fits the node budget; also bounded by the 32-bit path encoding.
    fn max_depth(&self) -> u32 {
        let b = self.g.slots.max(2) as usize;
        let (mut depth, mut level, mut total) = (0u32, 2usize, 2usize);
        while depth < 15 && total + level * b <= MAX_BFS_NODES {
            level *= b;
            total += level;
            depth += 1;
        }
        depth
    }

    pub fn params(&self) -> Params {
        self.header.params()
    }

    pub fn geometry(&self) -> &Geometry {
        &self.g
    }

    pub fn item_count(&self) -> u64 {
        self.header.item_count.load(Ordering::Relaxed)
    }

    pub fn bucket_words(&self) -> &'a [AtomicU64] {
        self.buckets
    }

    #[inline(always)]
    fn load(&self, i: u64) -> u64 {
        self.buckets[i as usize].load(Ordering::Acquire)
    }

    #[inline(always)]
    fn cas(&self, i: u64, old: u64, new: u64) -> Result<u64, u64> {
        self.buckets[i as usize].compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
    }

    /// Whether a key with this hash may be in the filter.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        let fp = self.g.fingerprint(hash);
        self.contains_fingerprint(self.g.primary(hash), fp)
    }

    /// Two-phase lookup. Phase 1 reads both candidate buckets; phase 2 reads them
    /// again. A miss in both phases can only be a false negative if the fingerprint
    /// moved back and forth between the buckets during the reads, which takes at
    /// least three moves; each move raises both buckets' counters past their
    /// maximum, so that leaves `t1' ≥ t1+2`, `t2' ≥ t2+2` and `t2' ≥ t1+3`. Only
    /// then does the lookup retry. Counter distances are taken modulo the counter
    /// width (≥ 16 bits); a reader is fooled only if one bucket's counter advances by
    /// a full 2^16 while it reads four words.
    #[inline]
    pub fn contains_fingerprint(&self, i1: u64, fp: u64) -> bool {
        let g = &self.g;
        let i2 = g.alternate(i1, fp);
        loop {
            let w1 = self.load(i1);
            let w2 = self.load(i2);
            if g.find(w1, fp).is_some() || g.find(w2, fp).is_some() {
                return true;
            }
            let w1b = self.load(i1);
            let w2b = self.load(i2);
            if g.find(w1b, fp).is_some() || g.find(w2b, fp).is_some() {
                return true;
            }
            let (t1, t2, t1b, t2b) = (g.counter(w1), g.counter(w2), g.counter(w1b), g.counter(w2b));
            let moved_back_and_forth = g.counter_distance(t1, t1b) >= 2
                && g.counter_distance(t2, t2b) >= 2
                && g.counter_distance(t1, t2b) >= 3;
            if !moved_back_and_forth {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    /// Adds a key. On `Err(Full)` every fingerprint stored before is still stored.
    pub fn insert(&self, hash: u64) -> Result<(), Full> {
        self.insert_fingerprint(self.g.primary(hash), self.g.fingerprint(hash))
    }

    /// Adds `fp` whose candidate buckets are `i1` and its alternate.
    pub fn insert_fingerprint(&self, i1: u64, fp: u64) -> Result<(), Full> {
        let i2 = self.g.alternate(i1, fp);
        for _ in 0..MAX_DISCOVERY_ROUNDS {
            if self.try_add(i1, fp) || self.try_add(i2, fp) {
                self.header.item_count.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            let Some(path) = self.discover_path(i1, i2) else {
                return Err(Full);
            };
            let start = if path.bits & 1 == 0 { i1 } else { i2 };
            // After a successful migration the start bucket has a free slot, unless
            // another writer took it; then discovery runs again.
            if self.migrate_path(start, path) && self.try_add(start, fp) {
                self.header.item_count.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        }
        Err(Full)
    }

    /// Inserts many hashes into a table nobody else can see yet (a value being
    /// built), in three passes that keep memory access sequential: each key into
    /// its primary bucket in bucket order; the keys left over, sorted by their
    /// alternate bucket, into that; the rest through the general insert. `hashes`
    /// must be in primary-bucket order (see `build::sort_in_bucket_order`).
    ///
    /// The caller guarantees exclusive access for the duration of the call: the
    /// first two passes use plain loads and stores, not compare-and-swap. On
    /// `Err(Full)` the table holds a subset of the keys and must be discarded.
    pub fn bulk_insert_exclusive(&self, hashes: &[u64]) -> Result<(), Full> {
        let g = &self.g;
        let place = |i: u64, fp: u64| -> bool {
            let w = self.buckets[i as usize].load(Ordering::Relaxed);
            match g.find(w, 0) {
                Some(s) => {
                    self.buckets[i as usize].store(g.with_slot(w, s, fp), Ordering::Relaxed);
                    true
                }
                None => false,
            }
        };
        let mut placed = 0u64;
        let mut left: Vec<u64> = Vec::new();
        for &h in hashes {
            if place(g.primary(h), g.fingerprint(h)) {
                placed += 1;
            } else {
                left.push(h);
            }
        }
        let alternate = |h: u64| g.alternate(g.primary(h), g.fingerprint(h));
        super::build::sort_by_key_bits(&mut left, g.bucket_mask.count_ones(), alternate);
        let mut rest: Vec<u64> = Vec::new();
        for &h in &left {
            if place(alternate(h), g.fingerprint(h)) {
                placed += 1;
            } else {
                rest.push(h);
            }
        }
        self.header.item_count.fetch_add(placed, Ordering::Relaxed);
        rest.iter().try_for_each(|&h| self.insert(h))
    }

    /// Puts `fp` into a free slot of bucket `i` with one compare-and-swap.
    fn try_add(&self, i: u64, fp: u64) -> bool {
        let mut w = self.load(i);
        loop {
            let Some(s) = self.g.find(w, 0) else { return false };
            match self.cas(i, w, self.g.with_slot(w, s, fp)) {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Read-only breadth-first search from both candidate buckets for a bucket with
    /// a free slot, at most `max_depth` moves away.
    pub fn discover_path(&self, i1: u64, i2: u64) -> Option<Path> {
        // (bucket, path) queue on the stack: no allocation inside table operations,
        // and no 32 KB zero-fill per call either.
        let mut queue = [std::mem::MaybeUninit::<(u64, Path)>::uninit(); MAX_BFS_NODES];
        queue[0].write((i1, Path { bits: 0, depth: 0 }));
        queue[1].write((i2, Path { bits: 1, depth: 0 }));
        let (mut head, mut tail) = (0usize, 2usize);
        let max_depth = self.max_depth();
        while head < tail {
            // SAFETY: entries below `tail` have been written.
            let (bucket, path) = unsafe { queue[head].assume_init() };
            head += 1;
            let w = self.load(bucket);
            if self.g.find(w, 0).is_some() {
                return Some(path);
            }
            if path.depth < max_depth {
                for s in 0..self.g.slots {
                    if tail == MAX_BFS_NODES {
                        break;
                    }
                    let next = self.g.alternate(bucket, self.g.slot(w, s));
                    queue[tail].write((next, path.push(s)));
                    tail += 1;
                }
            }
        }
        None
    }

    /// Walks a discovered path backwards, from the free slot toward the start,
    /// moving one fingerprint per step. Returns false (with every fingerprint still
    /// stored) if the table changed so that the path no longer leads to room.
    fn migrate_path(&self, start: u64, path: Path) -> bool {
        let mut buckets = [0u64; 17];
        let mut fps = [0u64; 16];
        buckets[0] = start;
        for step in 0..path.depth as usize {
            let fp = self.g.slot(self.load(buckets[step]), path.slot(step as u32));
            if fp == 0 {
                return false;
            }
            fps[step] = fp;
            buckets[step + 1] = self.g.alternate(buckets[step], fp);
        }
        for step in (0..path.depth as usize).rev() {
            let (from, to) = (buckets[step], buckets[step + 1]);
            if from == to {
                continue;
            }
            if !self.move_fingerprint(from, path.slot(step as u32), fps[step], to) {
                return false;
            }
        }
        true
    }

    /// Moves `fp` from slot `s` of bucket `from` into a free slot of `to`, raising
    /// both counters to `max(from, to) + 1` (modulo the counter width).
    fn move_fingerprint(&self, from: u64, s: u32, fp: u64, to: u64) -> bool {
        let g = &self.g;
        loop {
            let wf = self.load(from);
            let wt = self.load(to);
            if g.slot(wf, s) != fp {
                return false;
            }
            let Some(free) = g.find(wt, 0) else { return false };
            let (cf, ct) = (g.counter(wf), g.counter(wt));
            let next = if g.counter_distance(cf, ct) < (g.counter_mask >> 1) { ct } else { cf };
            let next = (next + 1) & g.counter_mask;
            if self.cas(to, wt, g.with_counter(g.with_slot(wt, free, fp), next)).is_err() {
                continue;
            }
            let mut wf = wf;
            loop {
                if g.slot(wf, s) != fp {
                    // The source copy vanished after we copied it; take our copy back
                    // out so the fingerprint is not duplicated.
                    self.remove_one(to, fp);
                    return false;
                }
                match self.cas(from, wf, g.with_counter(g.with_slot(wf, s, 0), next)) {
                    Ok(_) => return true,
                    Err(now) => wf = now,
                }
            }
        }
    }

    /// Clears one copy of `fp` from bucket `i`.
    fn remove_one(&self, i: u64, fp: u64) -> bool {
        let mut w = self.load(i);
        loop {
            let Some(s) = self.g.find(w, fp) else { return false };
            match self.cas(i, w, self.g.with_slot(w, s, 0)) {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Removes one copy of a key's fingerprint. False if neither candidate bucket
    /// holds it.
    pub fn delete(&self, hash: u64) -> bool {
        let (i1, fp) = (self.g.primary(hash), self.g.fingerprint(hash));
        let removed = self.remove_one(i1, fp) || self.remove_one(self.g.alternate(i1, fp), fp);
        if removed {
            self.header.item_count.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Moves every fingerprint of `other` into this table. `other` may have more
    /// buckets (a power-of-two multiple): a fingerprint in bucket `j` there belongs
    /// in bucket `j mod m` here, one of its two candidates in the smaller table. On
    /// `Err(Full)` the caller must discard this table: it holds part of `other`.
    pub fn merge_from(&self, other: &Table<'_>) -> Result<(), Full> {
        assert!(self.params().mergeable_with(&other.params()).is_ok());
        assert!(other.g.bucket_mask >= self.g.bucket_mask);
        for (j, word) in other.buckets.iter().enumerate() {
            let w = word.load(Ordering::Acquire);
            for s in 0..other.g.slots {
                let fp = other.g.slot(w, s);
                if fp != 0 {
                    self.insert_fingerprint(j as u64 & self.g.bucket_mask, fp)?;
                }
            }
        }
        Ok(())
    }
}

/// A filter that owns its memory; used to build values and by tests and benches.
pub struct OwnedFilter {
    header: Header,
    buckets: Box<[AtomicU64]>,
}

impl OwnedFilter {
    pub fn new(params: Params) -> OwnedFilter {
        params.check().expect("valid parameters");
        let buckets = (0..params.bucket_count()).map(|_| AtomicU64::new(0)).collect();
        OwnedFilter { header: params.header(0), buckets }
    }

    pub fn table(&self) -> Table<'_> {
        Table::new(&self.header, &self.buckets)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::filter::hash::hash_i64;
    use crate::filter::layout::DEFAULT_SEED;
    use crate::filter::sizing::{fpp_bound, size_for, DEFAULT_FPP};
    use std::collections::HashMap;

    /// Deterministic SplitMix64 stream, so every failure reproduces.
    pub struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    fn params(b: u8, f: u8, log2: u8) -> Params {
        Params { fingerprint_bits: f, slots_per_bucket: b, bucket_count_log2: log2, seed: DEFAULT_SEED }
    }

    fn fill_until_full(filter: &OwnedFilter, rng: &mut Rng) -> Vec<u64> {
        let t = filter.table();
        let mut keys = Vec::new();
        loop {
            let k = rng.next();
            match t.insert(hash_i64(DEFAULT_SEED, k as i64)) {
                Ok(()) => keys.push(k),
                Err(Full) => return keys,
            }
        }
    }

    #[test]
    fn no_false_negatives_and_fpp_within_target() {
        // Fill to the planned capacity, then probe a million keys never inserted.
        let cap = 200_000u64;
        let p = size_for(cap, DEFAULT_FPP, 26).unwrap();
        let f = OwnedFilter::new(p);
        let t = f.table();
        let mut rng = Rng(1);
        let keys: Vec<u64> = (0..cap).map(|_| rng.next()).collect();
        for &k in &keys {
            t.insert(hash_i64(DEFAULT_SEED, k as i64)).unwrap();
        }
        assert_eq!(t.item_count(), cap);
        for &k in &keys {
            assert!(t.contains(hash_i64(DEFAULT_SEED, k as i64)));
        }
        let set: std::collections::HashSet<u64> = keys.iter().copied().collect();
        let probes = 1_000_000u64;
        let mut fp = 0u64;
        let mut probed = 0u64;
        while probed < probes {
            let k = rng.next();
            if set.contains(&k) {
                continue;
            }
            probed += 1;
            fp += t.contains(hash_i64(DEFAULT_SEED, k as i64)) as u64;
        }
        let rate = fp as f64 / probes as f64;
        let load = cap as f64 / p.slot_count() as f64;
        assert!(rate <= DEFAULT_FPP, "measured fpp {rate} above target");
        assert!(rate <= fpp_bound(4, 12, load) * 1.1, "measured fpp {rate} above bound at load {load}");
    }

    #[test]
    fn load_before_first_failure() {
        // The planned maximum loads in `sizing::SHAPES` must be reachable.
        for (b, f, planned) in crate::filter::sizing::SHAPES {
            for seed in 0..3 {
                let filter = OwnedFilter::new(params(b, f, 14));
                let keys = fill_until_full(&filter, &mut Rng(seed));
                let load = keys.len() as f64 / filter.table().params().slot_count() as f64;
                assert!(load > planned, "b={b}: first failure at load {load}, planned {planned}");
            }
        }
    }

    #[test]
    fn full_filter_keeps_every_item() {
        for (b, f, _) in crate::filter::sizing::SHAPES {
            let filter = OwnedFilter::new(params(b, f, 8));
            let mut rng = Rng(7);
            let keys = fill_until_full(&filter, &mut rng);
            let t = filter.table();
            // Many more failing inserts: each must leave all earlier items in place.
            for _ in 0..2000 {
                let _ = t.insert(hash_i64(DEFAULT_SEED, rng.next() as i64));
            }
            let stored = t.item_count();
            assert!(stored >= keys.len() as u64);
            for k in &keys {
                assert!(t.contains(hash_i64(DEFAULT_SEED, *k as i64)), "lost {k}");
            }
            let counted: u64 =
                t.bucket_words().iter().map(|w| t.geometry().occupied(w.load(Ordering::Relaxed)) as u64).sum();
            assert_eq!(counted, stored);
        }
    }

    #[test]
    fn random_operations_match_a_multiset() {
        // Insert/delete/lookup against a model multiset: no false negatives, exact
        // counts, delete of an absent key reports false when no fingerprint matches.
        let f = OwnedFilter::new(params(4, 12, 10));
        let t = f.table();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut rng = Rng(3);
        let universe = 3000u64;
        for _ in 0..200_000 {
            let k = rng.next() % universe;
            let h = hash_i64(DEFAULT_SEED, k as i64);
            match rng.next() % 3 {
                0 => {
                    if model.values().map(|&c| c as u64).sum::<u64>() < 3500 && model.get(&k).copied().unwrap_or(0) < 2 {
                        if t.insert(h).is_ok() {
                            *model.entry(k).or_default() += 1;
                        }
                    }
                }
                1 => {
                    if model.get(&k).copied().unwrap_or(0) > 0 {
                        assert!(t.delete(h), "delete of a present key failed");
                        *model.get_mut(&k).unwrap() -= 1;
                    }
                }
                _ => {
                    if model.get(&k).copied().unwrap_or(0) > 0 {
                        assert!(t.contains(h), "false negative for {k}");
                    }
                }
            }
            assert_eq!(t.item_count(), model.values().map(|&c| c as u64).sum::<u64>());
        }
        for (k, c) in model {
            let h = hash_i64(DEFAULT_SEED, k as i64);
            for _ in 0..c {
                assert!(t.delete(h));
            }
        }
        assert_eq!(t.item_count(), 0);
        assert!(t.bucket_words().iter().all(|w| w.load(Ordering::Relaxed) & t.geometry().slots_mask == 0));
    }

    #[test]
    fn delete_of_absent_key_is_false() {
        let f = OwnedFilter::new(params(4, 12, 10));
        let t = f.table();
        assert!(!t.delete(hash_i64(DEFAULT_SEED, 5)));
        t.insert(hash_i64(DEFAULT_SEED, 5)).unwrap();
        assert!(t.delete(hash_i64(DEFAULT_SEED, 5)));
        assert!(!t.delete(hash_i64(DEFAULT_SEED, 5)));
        assert_eq!(t.item_count(), 0);
    }

    #[test]
    fn merge_keeps_both_sides_and_folds_larger_tables() {
        let mut rng = Rng(11);
        let a = OwnedFilter::new(params(4, 12, 12));
        let b = OwnedFilter::new(params(4, 12, 14));
        let ka: Vec<u64> = (0..5000).map(|_| rng.next()).collect();
        let kb: Vec<u64> = (0..5000).map(|_| rng.next()).collect();
        for k in &ka {
            a.table().insert(hash_i64(DEFAULT_SEED, *k as i64)).unwrap();
        }
        for k in &kb {
            b.table().insert(hash_i64(DEFAULT_SEED, *k as i64)).unwrap();
        }
        a.table().merge_from(&b.table()).unwrap();
        assert_eq!(a.table().item_count(), 10_000);
        for k in ka.iter().chain(&kb) {
            assert!(a.table().contains(hash_i64(DEFAULT_SEED, *k as i64)));
        }
        // Merging into a table too small fails and says so.
        let small = OwnedFilter::new(params(4, 12, 10));
        assert_eq!(small.table().merge_from(&a.table()), Err(Full));
    }

    #[test]
    fn bulk_insert_matches_single_inserts() {
        for (b, f, load) in crate::filter::sizing::SHAPES {
            let p = params(b, f, 12);
            let n = (p.slot_count() as f64 * load) as usize;
            let mut rng = Rng(21);
            let mut hashes: Vec<u64> = (0..n).map(|_| hash_i64(DEFAULT_SEED, rng.next() as i64)).collect();
            crate::filter::build::sort_in_bucket_order(&mut hashes, 12);
            let bulk = OwnedFilter::new(p);
            bulk.table().bulk_insert_exclusive(&hashes).unwrap();
            assert_eq!(bulk.table().item_count(), n as u64);
            for &h in &hashes {
                assert!(bulk.table().contains(h));
            }
            let counted: u64 = bulk.table().bucket_words().iter()
                .map(|w| bulk.table().geometry().occupied(w.load(Ordering::Relaxed)) as u64).sum();
            assert_eq!(counted, n as u64);
        }
    }

    #[test]
    fn path_encoding_round_trips() {
        let p = Path { bits: 1, depth: 0 }.push(3).push(0).push(2);
        assert_eq!(p.depth, 3);
        assert_eq!(p.bits & 1, 1);
        assert_eq!((p.slot(0), p.slot(1), p.slot(2)), (3, 0, 2));
    }
}
