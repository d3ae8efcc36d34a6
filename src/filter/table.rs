//! The lock-free concurrent cuckoo filter: lookup, insert, delete, merge and bulk
//! build over a caller-provided header and slice of atomic bucket words. There are
//! no pointers and no allocation inside the table, so the same code serves a
//! `cuckoofilter` value and a filter in shared memory mapped at any address.
//!
//! # The algorithm
//!
//! A partial-key cuckoo filter (Fan, Andersen, Kaminsky and Mitzenmacher,
//! "Cuckoo Filter: Practically Better Than Bloom", CoNEXT 2014) made lock-free
//! by a migration counter in every bucket word, as docs/lockfree.md describes:
//!
//! - A bucket is one 64-bit word: `b` fingerprints and a counter of `c ≥ 16` bits.
//!   **Every** change to a bucket word (a fingerprint added, removed, or moved in or
//!   out) is one compare-and-swap that also adds 1 to that bucket's counter.
//! - Lookup is two-phase: read `i1` then `i2`; if neither holds `f`, read both again;
//!   if still neither, retry only when both counters advanced by at least 2, else
//!   answer "absent".
//! - Insert into a bucket with room is one CAS. Otherwise a read-only breadth-first
//!   search from both buckets finds a path to a free slot, packed into one integer
//!   ([`Path`]); migration walks it backwards, one fingerprint move per step, and
//!   restarts discovery when a step finds its target full.
//! - Delete is the two-phase scan of lookup followed by one CAS.
//!
//! # Moving a fingerprint: copy, then clear
//!
//! A move of `f` from slot `s` of bucket `S` to bucket `T` (always `f`'s two
//! candidate buckets) is two CASes: add `f` to a free slot of `T`, then clear slot
//! `s` of `S` if it still holds `f`. If it no longer does — a deleter removed that
//! copy, or another mover took it — the pair now holds one copy of `f` too many,
//! and the mover removes one copy of `f` from the pair ("undo"). Copies of the
//! same fingerprint in the same pair are indistinguishable to every operation, so
//! the filter is a multiset of fingerprints per pair, and with `L` the number of
//! copies inserted and not deleted (the logical count) and `P` the copies in the
//! words: `P = L + k`, where `k` is the number of moves between their copy and
//! their clear (or undo). Hence:
//! - no false negatives: `P ≥ L` at every instant, so a fingerprint that is
//!   logically present is always physically in one of its two buckets;
//! - a delete removes exactly one copy (one CAS clears one slot), and leaves
//!   `P ≥ L` because `L` drops with it;
//! - the item count (changed only by inserts and deletes) equals `L` exactly.
//!
//! A reader may see both copies during a move; that is harmless. A mover that dies
//! between its two CASes (a backend killed mid-insert) leaves one extra copy: a
//! possible false positive, never a false negative.
//!
//! # Why the two-phase rule is sound
//!
//! Suppose `f` is logically present throughout a lookup whose four reads (at times
//! T1 < T2 < T3 < T4: `i1`, `i2`, `i1`, `i2`) all miss it. As `P ≥ 1`, at T1 `f` is
//! in `i2`, at T2 in `i1`, at T3 in `i2`, at T4 in `i1`. So `i1` gained and then lost
//! a copy between T1 and T3, and `i2` gained and lost one between T2 and T4: each
//! counter advanced by at least 2 between the lookup's two reads of it, which is the
//! retry condition. The source adds a third condition comparing the counters of the
//! two buckets (`t2' ≥ t1 + 3`); it holds only if moves synchronise the counters
//! like Lamport clocks, and such clocks can leap by half their range in one move,
//! so after wrap-around the comparison could wrongly suppress a retry. This
//! implementation drops it: the two same-bucket conditions are exactly what the
//! argument needs. The `loom` models in `loom_tests` check it over every
//! interleaving of a lookup with back-and-forth moves.
//!
//! Counters are `c = 64 − b·f ≥ 16` bits and compared modulo `2^c`. A reader is
//! fooled only if one bucket is modified `2^16` times (or a multiple) between its
//! two reads of it, i.e. 65,536 compare-and-swaps on one cache line during one
//! lookup of four loads.
//!
//! # Lock-freedom
//!
//! Every loop retries only because another thread's CAS succeeded: a failed CAS
//! means the word changed; a lookup or delete retries only after both of its
//! buckets were changed at least twice; discovery restarts only after a move step
//! found its source or target changed. So whenever some thread is retrying, others
//! are completing steps, and the system as a whole makes progress. Inserts stop
//! with [`Full`] when discovery finds no path, or after `MAX_DISCOVERY_ROUNDS`
//! invalidated paths (under extreme contention an insert may thus report full
//! while room exists; nothing is ever lost).
//!
//! # Insert if new
//!
//! [`Table::insert_new_counted`] and [`Table::copies`] are in `newkey`, with
//! the argument for them.
//!
//! Orderings: loads are `Acquire`, CASes `AcqRel`. A reader that sees a move's
//! clear in `S` therefore also sees its earlier copy in `T`.
//!
//! The table is about 800 lines, one algorithm that does not split without
//! scattering it (insert if new, which only adds to it, is in `newkey`; the
//! tests are in `table/tests.rs`).

use crossbeam_utils::Backoff;

use super::atomic::{spin, AtomicU64, Ordering};

use super::layout::{Geometry, Mapping, Params, WordsHeader};

pub mod newkey;

/// The insert found no free slot within the search bound: the filter is full.
/// Nothing that was stored before the call has been lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Path discovery examines at most this many buckets. (Loom runs threads on small
/// stacks, and its model tables have a handful of buckets.)
#[cfg(not(loom))]
const MAX_BFS_NODES: usize = 4096;
#[cfg(loom)]
const MAX_BFS_NODES: usize = 64;
/// Discovery restarts this often before an insert gives up as full. Restarts only
/// happen when other threads changed the table under the path.
const MAX_DISCOVERY_ROUNDS: usize = 64;
/// The most moves of a path [`Table::place_by_search`] looks for.
const SEARCH_MOVES: u32 = 3;
/// The most buckets its search tree for one key holds.
const SEARCH_NODES: usize = 2 + 8 + 32 + 128;

/// Outcome of the two-phase scan.
enum Scan {
    /// Bucket and the word in which a copy was seen.
    Found(u64, u64),
    Absent,
    /// Both buckets changed twice during the scan: the copy may have been missed.
    Retry,
}

/// Told before every compare-and-swap on a bucket word: a durable filter in
/// shared memory records which parts changed since its last checkpoint cut,
/// and saves a part's contents as of the cut before it first changes
/// (`region::durable`). The call may wait, but only for another process's copy
/// of one such part.
pub trait WriteHook: Sync {
    fn before_write(&self, bucket: u64);
}

/// A view of one filter: its parameters, its item count and its bucket words.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    params: Params,
    item_count: &'a AtomicU64,
    buckets: &'a [AtomicU64],
    g: Geometry,
    hook: Option<&'a dyn WriteHook>,
}

/// What one lookup or insert did, for a shared filter's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Times a lookup repeated its two-phase scan.
    pub retries: u64,
    /// Fingerprints an insert moved to make room.
    pub kicks: u64,
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
    /// `buckets.len()` must equal the bucket count; the parameters must have
    /// passed [`Params::check`].
    #[inline]
    pub fn new(params: Params, item_count: &'a AtomicU64, buckets: &'a [AtomicU64]) -> Table<'a> {
        assert_eq!(buckets.len() as u64, params.bucket_count, "bucket slice does not match the parameters");
        Table { params, item_count, buckets, g: Geometry::new(&params), hook: None }
    }

    /// The same table, telling `hook` before each change of a bucket word.
    pub fn with_hook(self, hook: &'a dyn WriteHook) -> Table<'a> {
        Table { hook: Some(hook), ..self }
    }

    /// The table behind a words header and its words.
    pub fn with_header(header: &'a WordsHeader, buckets: &'a [AtomicU64]) -> Table<'a> {
        Table::new(header.params(), &header.item_count, buckets)
    }

    /// Deepest level of the breadth-first tree (two roots, `b` children per node)
    /// that starts within the node budget (the last level may be cut short); also
    /// bounded by the 32-bit path encoding.
    fn max_depth(&self) -> u32 {
        let b = self.g.slots.max(2) as usize;
        let (mut depth, mut level, mut total) = (0u32, 2usize, 2usize);
        while depth < 15 && total < MAX_BFS_NODES {
            level *= b;
            total += level;
            depth += 1;
        }
        depth
    }

    pub fn params(&self) -> Params {
        self.params
    }

    pub fn geometry(&self) -> &Geometry {
        &self.g
    }

    pub fn item_count(&self) -> u64 {
        self.item_count.load(Ordering::Relaxed)
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
        if let Some(h) = self.hook {
            h.before_write(i);
        }
        self.buckets[i as usize].compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
    }

    /// Whether a key with this hash may be in the filter.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        let fp = self.g.fingerprint(hash);
        self.contains_fingerprint(self.g.primary(hash), fp)
    }

    /// Two-phase scan of `fp`'s buckets (see the module documentation): where a
    /// copy was seen, or that there is none, or that it must be repeated.
    #[inline(always)]
    fn scan(&self, i1: u64, i2: u64, fp: u64) -> Scan {
        let g = &self.g;
        let seen = |w1: u64, w2: u64| {
            if g.holds(w1, fp) {
                Some(Scan::Found(i1, w1))
            } else if g.holds(w2, fp) {
                Some(Scan::Found(i2, w2))
            } else {
                None
            }
        };
        let (w1, w2) = (self.load(i1), self.load(i2));
        if let Some(found) = seen(w1, w2) {
            return found;
        }
        let (w1b, w2b) = (self.load(i1), self.load(i2));
        if let Some(found) = seen(w1b, w2b) {
            return found;
        }
        if self.changed_twice(w1, w2, w1b, w2b) {
            Scan::Retry
        } else {
            Scan::Absent
        }
    }

    /// The retry rule: both buckets' counters advanced by at least 2 between the
    /// first reads (`w1`, `w2`) and the second (`w1b`, `w2b`).
    #[inline(always)]
    fn changed_twice(&self, w1: u64, w2: u64, w1b: u64, w2b: u64) -> bool {
        let g = &self.g;
        g.counter_distance(g.counter(w1), g.counter(w1b)) >= 2 && g.counter_distance(g.counter(w2), g.counter(w2b)) >= 2
    }

    /// Whether `fp`, with candidate buckets `i1` and its alternate, may be stored.
    /// The same two-phase scan as [`Table::scan`], written so that each phase ends
    /// in one branch on a combined answer: in a run of lookups that all hit (or all
    /// miss) that branch is predictable and the processor overlaps the memory
    /// accesses of consecutive lookups.
    #[inline]
    pub fn contains_fingerprint(&self, i1: u64, fp: u64) -> bool {
        self.contains_fingerprint_counted(i1, fp, &mut OpStats::default())
    }

    /// [`Table::contains`], also counting the scan's retries into `stats`.
    #[inline]
    pub fn contains_counted(&self, hash: u64, stats: &mut OpStats) -> bool {
        self.contains_fingerprint_counted(self.g.primary(hash), self.g.fingerprint(hash), stats)
    }

    #[inline(always)]
    fn contains_fingerprint_counted(&self, i1: u64, fp: u64, stats: &mut OpStats) -> bool {
        let g = &self.g;
        let i2 = g.alternate(i1, fp);
        let backoff = Backoff::new();
        loop {
            let (w1, w2) = (self.load(i1), self.load(i2));
            if g.holds(w1, fp) | g.holds(w2, fp) {
                return true;
            }
            let (w1b, w2b) = (self.load(i1), self.load(i2));
            // Neither word changed between the phases: the answer (and the rule's,
            // whose counters did not move) is "absent". Cheap, so misses overlap.
            if (w1b == w1) & (w2b == w2) {
                return false;
            }
            if g.holds(w1b, fp) | g.holds(w2b, fp) {
                return true;
            }
            if !self.changed_twice(w1, w2, w1b, w2b) {
                return false;
            }
            stats.retries += 1;
            spin(&backoff);
        }
    }

    /// Looks up many hashes, writing one answer per hash, prefetching buckets
    /// ahead (`Geometry::lookup_batch`). The answers are exactly those of
    /// [`Table::contains`].
    pub fn contains_many(&self, hashes: &[u64], out: &mut [bool]) {
        self.g.lookup_batch(hashes, out, |i| self.prefetch(i), |h| self.contains(h));
    }

    #[inline(always)]
    fn prefetch(&self, i: u64) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: a prefetch is a hint that never faults; the address is that of a
        // bucket word inside the slice.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.buckets.as_ptr().add(i as usize) as *const i8);
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = i;
    }

    /// Asks for a key's two buckets ahead of an operation on it (a hint: many
    /// keys' cache misses then overlap).
    #[inline(always)]
    pub fn prefetch_key(&self, hash: u64) {
        let (i1, fp) = (self.g.primary(hash), self.g.fingerprint(hash));
        self.prefetch(i1);
        self.prefetch(self.g.alternate(i1, fp));
    }

    /// Adds a key. On `Err(Full)` every fingerprint stored before is still stored.
    pub fn insert(&self, hash: u64) -> Result<(), Full> {
        self.insert_fingerprint(self.g.primary(hash), self.g.fingerprint(hash))
    }

    /// [`Table::insert`], also counting the fingerprints moved into `stats`.
    pub fn insert_counted(&self, hash: u64, stats: &mut OpStats) -> Result<(), Full> {
        self.insert_fingerprint_counted(self.g.primary(hash), self.g.fingerprint(hash), stats)
    }

    /// Adds `fp` whose candidate buckets are `i1` and its alternate.
    pub fn insert_fingerprint(&self, i1: u64, fp: u64) -> Result<(), Full> {
        self.insert_fingerprint_counted(i1, fp, &mut OpStats::default())
    }

    fn insert_fingerprint_counted(&self, i1: u64, fp: u64, stats: &mut OpStats) -> Result<(), Full> {
        self.place(i1, fp, stats)?;
        self.item_count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Stores `fp` (candidate buckets `i1` and its alternate) in a free slot,
    /// moving others to make one; does not count it.
    fn place(&self, i1: u64, fp: u64, stats: &mut OpStats) -> Result<(), Full> {
        let i2 = self.g.alternate(i1, fp);
        let backoff = Backoff::new();
        for _ in 0..MAX_DISCOVERY_ROUNDS {
            if self.try_add(i1, fp) || self.try_add(i2, fp) {
                return Ok(());
            }
            let Some(path) = self.discover_path(i1, i2) else {
                return Err(Full);
            };
            let start = if path.bits & 1 == 0 { i1 } else { i2 };
            // After a successful migration the start bucket has a free slot, unless
            // another writer took it; then discovery runs again.
            if self.migrate_path(start, path, stats) && self.try_add(start, fp) {
                return Ok(());
            }
            spin(&backoff);
        }
        Err(Full)
    }

    /// Inserts many hashes into a table nobody else can see yet (a value being
    /// built): each key into its primary bucket, in bucket order; the keys left
    /// over, sorted by their alternate bucket, into that (both passes read memory
    /// in order); then paths of one and of two moves, found for batches of keys
    /// whose buckets are prefetched together, then of up to three by a search of
    /// each key's tree; the rest through the general insert. At 95.5% load
    /// (10M keys) about 10% of the keys need a move, 3% two, 0.7% three or more
    /// and 0.04% the general insert. `hashes` must be in primary-bucket order
    /// (`build::sort_dedup`).
    ///
    /// The caller guarantees exclusive access for the duration of the call: every
    /// pass but the last uses plain loads and stores, not compare-and-swap, and
    /// moves a fingerprint only between the two buckets of its pair. On
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
        for (i, &h) in hashes.iter().enumerate() {
            super::host::check_every(i);
            if place(g.primary(h), g.fingerprint(h)) {
                placed += 1;
            } else {
                super::host::push(&mut left, h);
            }
        }
        let alternate = |h: u64| g.alternate(g.primary(h), g.fingerprint(h));
        super::radix::sort_by_key_bits(&mut left, super::radix::index_bits(g.bucket_count), alternate);
        let mut rest: Vec<u64> = Vec::new();
        for (i, &h) in left.iter().enumerate() {
            super::host::check_every(i);
            if place(alternate(h), g.fingerprint(h)) {
                placed += 1;
            } else {
                super::host::push(&mut rest, h);
            }
        }
        // Third pass, for keys whose two buckets are both full (about a tenth at
        // 95% load): a path of one move, a resident of either bucket moving to its
        // own other bucket if that has room. Fourth pass, for keys without one:
        // paths of two moves.
        let mut hard: Vec<u64> = Vec::new();
        placed += self.place_by_short_paths(&rest, 1, 32, &place, &mut hard);
        let mut harder: Vec<u64> = Vec::new();
        placed += self.place_by_short_paths(&hard, 2, 16, &place, &mut harder);
        // Fifth pass: paths of up to three moves, by a search of each key's tree.
        let mut hardest: Vec<u64> = Vec::new();
        placed += self.place_by_search(&harder, &place, &mut hardest);
        self.item_count.fetch_add(placed, Ordering::Relaxed);
        // The rest take the general insert (breadth-first path search).
        hardest.iter().enumerate().try_for_each(|(i, &h)| {
            super::host::check_every(i);
            self.insert(h)
        })
    }

    /// For [`Table::bulk_insert_exclusive`]: places each key by a path of at most
    /// `moves` moves (1 or 2): into a free slot of its buckets, else a resident of
    /// one moves to its other bucket, if need be after a resident of that one moved
    /// on. Keys go in batches whose buckets are prefetched one level at a time (the
    /// keys' buckets, their residents' other buckets, and for two moves those
    /// buckets' residents' other buckets), so that the cache misses of a batch
    /// overlap instead of following one another. Keys without such a path go to
    /// `left`. Plain loads and stores (exclusive access); a fingerprint only ever
    /// moves between the two buckets of its pair. Returns the keys placed.
    fn place_by_short_paths(
        &self,
        keys: &[u64],
        moves: u32,
        batch: usize,
        place: &impl Fn(u64, u64) -> bool,
        left: &mut Vec<u64>,
    ) -> u64 {
        let g = &self.g;
        let load = |i: u64| self.buckets[i as usize].load(Ordering::Relaxed);
        let pair = |h: u64| {
            let i1 = g.primary(h);
            [i1, g.alternate(i1, g.fingerprint(h))]
        };
        let mut placed = 0;
        for (n, batch) in keys.chunks(batch).enumerate() {
            if n % 1024 == 1023 {
                super::host::check_interrupts();
            }
            for &h in batch {
                pair(h).into_iter().for_each(|b| self.prefetch(b));
            }
            for level in 1..=moves {
                for &h in batch {
                    for b in pair(h) {
                        let w = load(b);
                        for s in 0..g.slots {
                            let c = g.alternate(b, g.slot(w, s));
                            if level == 1 {
                                self.prefetch(c);
                                continue;
                            }
                            let wc = load(c);
                            for s2 in 0..g.slots {
                                self.prefetch(g.alternate(c, g.slot(wc, s2)));
                            }
                        }
                    }
                }
            }
            'keys: for &h in batch {
                let fp = g.fingerprint(h);
                let [i1, i2] = pair(h);
                if place(i1, fp) || place(i2, fp) {
                    placed += 1;
                    continue;
                }
                for b in [i1, i2] {
                    let w = load(b);
                    for s in 0..g.slots {
                        // Both buckets are full, so every slot holds a fingerprint,
                        // whose pair is {b, c} (the alternate is an involution).
                        let r = g.slot(w, s);
                        let c = g.alternate(b, r);
                        if c == b {
                            continue;
                        }
                        if place(c, r) {
                            self.buckets[b as usize].store(g.with_slot(w, s, fp), Ordering::Relaxed);
                            placed += 1;
                            continue 'keys;
                        }
                        if moves < 2 {
                            continue;
                        }
                        let wc = load(c);
                        for s2 in 0..g.slots {
                            let r2 = g.slot(wc, s2);
                            let d = g.alternate(c, r2);
                            // `d` cannot be `b` or `c`: both are full.
                            if d != c && place(d, r2) {
                                // r2 left c for d; r moves from b into its slot; the
                                // key takes r's slot in b.
                                self.buckets[c as usize].store(g.with_slot(wc, s2, r), Ordering::Relaxed);
                                self.buckets[b as usize].store(g.with_slot(w, s, fp), Ordering::Relaxed);
                                placed += 1;
                                continue 'keys;
                            }
                        }
                    }
                }
                super::host::push(left, h);
            }
        }
        placed
    }

    /// For [`Table::bulk_insert_exclusive`]: places each key by the shortest
    /// path of at most [`SEARCH_MOVES`] moves, searched breadth first over the
    /// tree of its buckets, their residents' other buckets and so on (a bucket
    /// already on the way down is not entered again). Keys go in batches whose
    /// trees are prefetched one level at a time, so that the cache misses of a
    /// level overlap. Keys without such a path go to `left`. Plain loads and
    /// stores (exclusive access); a fingerprint only ever moves between the
    /// two buckets of its pair. Returns the keys placed.
    fn place_by_search(&self, keys: &[u64], place: &impl Fn(u64, u64) -> bool, left: &mut Vec<u64>) -> u64 {
        let g = &self.g;
        let load = |i: u64| self.buckets[i as usize].load(Ordering::Relaxed);
        let has_room = |i: u64| g.find(load(i), 0).is_some();
        // (bucket, parent node, the parent's slot whose resident leads here).
        let mut nodes: Vec<(u64, u32, u32)> = super::host::vec_with_capacity(SEARCH_NODES);
        let mut placed = 0;
        for (n, batch) in keys.chunks(4).enumerate() {
            if n % 1024 == 1023 {
                super::host::check_interrupts();
            }
            // Prefetch the trees a level at a time: the buckets of level d are
            // known once level d - 1 is in cache.
            let mut frontier: Vec<u64> = super::host::vec_with_capacity(2 * batch.len());
            for &h in batch {
                let i1 = g.primary(h);
                frontier.push(i1);
                frontier.push(g.alternate(i1, g.fingerprint(h)));
            }
            for &b in &frontier {
                self.prefetch(b);
            }
            for _ in 0..SEARCH_MOVES {
                let mut next = super::host::vec_with_capacity(frontier.len() * g.slots as usize);
                for &b in &frontier {
                    let w = load(b);
                    for s in 0..g.slots {
                        let c = g.alternate(b, g.slot(w, s));
                        self.prefetch(c);
                        next.push(c);
                    }
                }
                frontier = next;
            }
            'keys: for &h in batch {
                let fp = g.fingerprint(h);
                let i1 = g.primary(h);
                let i2 = g.alternate(i1, fp);
                if place(i1, fp) || place(i2, fp) {
                    placed += 1;
                    continue;
                }
                nodes.clear();
                nodes.push((i1, u32::MAX, 0));
                nodes.push((i2, u32::MAX, 0));
                let mut level = 0..2;
                for depth in 1..=SEARCH_MOVES {
                    for at in level.clone() {
                        let b = nodes[at].0;
                        let w = load(b);
                        's: for s in 0..g.slots {
                            let c = g.alternate(b, g.slot(w, s));
                            // Not back up the way down (nor into the key's own pair).
                            let mut up = at as u32;
                            while up != u32::MAX {
                                if nodes[up as usize].0 == c {
                                    continue 's;
                                }
                                up = nodes[up as usize].1;
                            }
                            if c == i1 || c == i2 {
                                continue;
                            }
                            if has_room(c) {
                                // The path: the resident of `s` moves to `c`, then
                                // each parent's resident into the slot its child
                                // freed, and the key into the root's.
                                let (mut child, mut slot, mut node) = (c, s, at as u32);
                                loop {
                                    let (b, parent, pslot) = nodes[node as usize];
                                    let wb = load(b);
                                    let r = g.slot(wb, slot);
                                    let wc = load(child);
                                    let free = g.find(wc, 0).expect("the child has room");
                                    self.buckets[child as usize].store(g.with_slot(wc, free, r), Ordering::Relaxed);
                                    self.buckets[b as usize].store(g.with_slot(wb, slot, 0), Ordering::Relaxed);
                                    if parent == u32::MAX {
                                        let placed_root = place(b, fp);
                                        debug_assert!(placed_root);
                                        break;
                                    }
                                    (child, slot, node) = (b, pslot, parent);
                                }
                                placed += 1;
                                continue 'keys;
                            }
                            if depth < SEARCH_MOVES && nodes.len() < SEARCH_NODES {
                                nodes.push((c, at as u32, s));
                            }
                        }
                    }
                    level = level.end..nodes.len();
                }
                super::host::push(left, h);
            }
        }
        placed
    }

    /// `w` with slot `s` set to `fp` (0 clears it) and the counter advanced by one:
    /// the only way bucket words change.
    #[inline(always)]
    fn changed(&self, w: u64, s: u32, fp: u64) -> u64 {
        let g = &self.g;
        g.with_counter(g.with_slot(w, s, fp), (g.counter(w) + 1) & g.counter_mask)
    }

    /// Puts `fp` into a free slot of bucket `i` with one compare-and-swap.
    fn try_add(&self, i: u64, fp: u64) -> bool {
        let mut w = self.load(i);
        loop {
            let Some(s) = self.g.find(w, 0) else { return false };
            match self.cas(i, w, self.changed(w, s, fp)) {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Read-only breadth-first search from both candidate buckets for a bucket with
    /// a free slot, at most `max_depth` moves away.
    pub fn discover_path(&self, i1: u64, i2: u64) -> Option<Path> {
        // Queue of (bucket, path bits) packed into one word each (bucket indices are
        // below 2^32), on the stack: no allocation inside table operations, and no
        // zero-fill per call. The queue holds one level after another, so a path's
        // depth is the level being read.
        let mut queue = [std::mem::MaybeUninit::<u64>::uninit(); MAX_BFS_NODES];
        queue[0].write(i1 << 32);
        queue[1].write(i2 << 32 | 1);
        let (mut head, mut tail) = (0usize, 2usize);
        let (mut depth, mut level_end) = (0u32, 2usize);
        let max_depth = self.max_depth();
        while head < tail {
            if head == level_end {
                depth += 1;
                level_end = tail;
                // The whole level's buckets are known now: ask for them together, so
                // their cache misses overlap instead of following one another.
                // (The first 64: a search usually ends early in its level.)
                for e in &queue[head..tail.min(head + 64)] {
                    // SAFETY: entries below `tail` have been written.
                    self.prefetch(unsafe { e.assume_init() } >> 32);
                }
            }
            // SAFETY: entries below `tail` have been written.
            let entry = unsafe { queue[head].assume_init() };
            head += 1;
            let (bucket, path) = (entry >> 32, Path { bits: entry as u32, depth });
            let w = self.load(bucket);
            if self.g.find(w, 0).is_some() {
                return Some(path);
            }
            if depth < max_depth {
                for s in 0..self.g.slots {
                    if tail == MAX_BFS_NODES {
                        break;
                    }
                    let next = self.g.alternate(bucket, self.g.slot(w, s));
                    queue[tail].write(next << 32 | path.push(s).bits as u64);
                    tail += 1;
                }
            }
        }
        None
    }

    /// Walks a discovered path backwards, from the free slot toward the start,
    /// moving one fingerprint per step. Returns false (with every fingerprint still
    /// stored) if the table changed so that the path no longer leads to room.
    fn migrate_path(&self, start: u64, path: Path, stats: &mut OpStats) -> bool {
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
            stats.kicks += 1;
        }
        true
    }

    /// Copies the bucket words into `out` (one per bucket), one load each.
    pub fn copy_words(&self, out: &mut [u64]) {
        for (o, w) in out.iter_mut().zip(self.buckets) {
            *o = w.load(Ordering::Acquire);
        }
    }

    /// Whether every bucket word still equals `copy`. After [`Table::copy_words`],
    /// true means each word held its copied value from its copy until its check,
    /// an interval that contains the moment between the two passes: the copy is
    /// then the whole table at that moment (every change advances a word's
    /// counter, so an unchanged word was not changed, short of 2^16 changes).
    pub fn words_equal(&self, copy: &[u64]) -> bool {
        copy.iter().zip(self.buckets).all(|(c, w)| *c == w.load(Ordering::Acquire))
    }

    /// Occupied slots in a copy of the words (the item count that matches them).
    pub fn occupied_in(&self, words: &[u64]) -> u64 {
        self.g.occupied_total(words.iter().copied())
    }

    /// Moves `fp` from slot `s` of bucket `from` into a free slot of `to` (its
    /// alternate): copy, then clear, then undo if the source copy vanished in
    /// between (module documentation). False if the move did not happen, with every
    /// logical copy still stored.
    pub(crate) fn move_fingerprint(&self, from: u64, s: u32, fp: u64, to: u64) -> bool {
        let g = &self.g;
        loop {
            let wf = self.load(from);
            if g.slot(wf, s) != fp {
                return false;
            }
            let wt = self.load(to);
            let Some(free) = g.find(wt, 0) else { return false };
            if self.cas(to, wt, self.changed(wt, free, fp)).is_err() {
                continue;
            }
            let mut wf = wf;
            loop {
                if g.slot(wf, s) != fp {
                    // One copy too many in the pair now: take one out, from either
                    // bucket (copies of `fp` in this pair are interchangeable), with
                    // the same two-phase scan as delete, since other copies may be
                    // moving between the two buckets meanwhile.
                    let undone = self.remove_copy(to, fp);
                    debug_assert!(undone, "a move's extra copy must still be in the pair");
                    return false;
                }
                match self.cas(from, wf, self.changed(wf, s, 0)) {
                    Ok(_) => return true,
                    Err(now) => wf = now,
                }
            }
        }
    }

    /// Removes one copy of a key's fingerprint. False if neither candidate bucket
    /// holds it (by the same two-phase scan as lookup, so a copy moving back and
    /// forth is not missed).
    pub fn delete(&self, hash: u64) -> bool {
        let (i1, fp) = (self.g.primary(hash), self.g.fingerprint(hash));
        self.delete_fingerprint(i1, fp)
    }

    pub fn delete_fingerprint(&self, i1: u64, fp: u64) -> bool {
        let removed = self.remove_copy(i1, fp);
        if removed {
            self.item_count.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Clears one copy of `fp` from its pair of buckets (`i1` and its alternate),
    /// found by the two-phase scan; false if the pair holds none.
    fn remove_copy(&self, i1: u64, fp: u64) -> bool {
        let i2 = self.g.alternate(i1, fp);
        let backoff = Backoff::new();
        loop {
            match self.scan(i1, i2, fp) {
                Scan::Found(i, w) => {
                    let s = self.g.find(w, fp).expect("scan found it");
                    if self.cas(i, w, self.changed(w, s, 0)).is_ok() {
                        return true;
                    }
                }
                Scan::Absent => return false,
                Scan::Retry => spin(&backoff),
            }
        }
    }

    /// Moves every fingerprint of `other` into this table (see
    /// [`Params::mergeable_with`]): to the same bucket under the fastrange mapping
    /// (equal bucket counts); under the power-of-two XOR mapping `other` may have
    /// more buckets (a power-of-two multiple), and a fingerprint in bucket `j`
    /// there belongs in bucket `j mod m` here, one of its two candidates in the
    /// smaller table. On `Err(Full)` the caller must discard this table: it holds
    /// part of `other`.
    pub fn merge_from(&self, other: &Table<'_>) -> Result<(), Full> {
        self.merge_words(&other.params(), other.buckets.iter().map(|w| w.load(Ordering::Acquire)))
    }

    /// [`Table::merge_from`] for the bucket words of a filter with parameters
    /// `other` (a value being read, in whatever layout).
    pub fn merge_words(&self, other: &Params, words: impl Iterator<Item = u64>) -> Result<(), Full> {
        assert!(self.params().mergeable_with(other).is_ok());
        assert!(other.bucket_count >= self.g.bucket_count);
        let og = Geometry::new(other);
        let fold = |j: u64| match self.g.mapping {
            Mapping::Fastrange => j,
            Mapping::PowerOfTwoXor => j & self.g.bucket_mask,
        };
        for (j, w) in words.enumerate() {
            super::host::check_every(j);
            for s in 0..og.slots {
                let fp = og.slot(w, s);
                if fp != 0 {
                    self.insert_fingerprint(fold(j as u64), fp)?;
                }
            }
        }
        Ok(())
    }
}

/// A filter that owns its memory: a value being built or changed, and tests and
/// benches.
pub struct OwnedFilter {
    header: WordsHeader,
    buckets: Box<[AtomicU64]>,
}

impl OwnedFilter {
    /// An empty filter; `capacity` is the planned capacity it records.
    pub fn new(params: Params) -> OwnedFilter {
        OwnedFilter::with_capacity(params, super::sizing::planned_capacity(&params))
    }

    pub fn with_capacity(params: Params, capacity: u64) -> OwnedFilter {
        params.check().expect("valid parameters");
        let buckets = super::host::zeroed_words(params.bucket_count as usize);
        OwnedFilter { header: WordsHeader::new(&params, capacity, 0), buckets }
    }

    /// A filter holding these bucket words (counters are kept as they are).
    pub fn from_words(params: Params, capacity: u64, words: impl Iterator<Item = u64>) -> OwnedFilter {
        params.check().expect("valid parameters");
        let mut buckets = super::host::vec_with_capacity::<AtomicU64>(params.bucket_count as usize);
        for (i, w) in words.enumerate() {
            super::host::check_every(i);
            buckets.push(AtomicU64::new(w));
        }
        assert_eq!(buckets.len() as u64, params.bucket_count);
        let buckets = buckets.into_boxed_slice();
        let items = Geometry::new(&params).occupied_total(buckets.iter().map(|w| w.load(Ordering::Relaxed)));
        OwnedFilter { header: WordsHeader::new(&params, capacity, items), buckets }
    }

    pub fn table(&self) -> Table<'_> {
        Table::with_header(&self.header, &self.buckets)
    }

    pub fn capacity(&self) -> u64 {
        self.header.capacity
    }

    /// The bucket words, one load each (the filter is not shared).
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.buckets.iter().map(|w| w.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests;
