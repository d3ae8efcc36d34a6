//! Lock-free, crash-safe allocation of runs of contiguous blocks of the shared
//! region: a fail-safe tagged allocator without locks (a block's leaf holds the
//! tag of the allocation that owns it, written by one compare-and-swap, so a
//! process that stops at any point leaves every block owned or free), generalised
//! from single ids to runs (docs/lockfree.md, "Named filters in the shared
//! region"). It owns
//! the meaning of the tree's words; the caller owns the memory and the block bytes.
//!
//! Layout: an implicit heap of `2 * leaves` words (`leaves` = the next power of two
//! at or above `blocks`; word 0 unused, word 1 the root, children of `i` at `2i` and
//! `2i + 1`, leaf of block `b` at `leaves + b`). A leaf holds the tag of the
//! allocation that owns the block, [`FREE`], or [`RESERVED`] for padding beyond
//! `blocks`. An inner word holds `(version << 32) | count`, where count is how many
//! leaves below are not free (padding included).
//!
//! Why a crash anywhere is harmless: every change writes a leaf first (one atomic
//! CAS, so a block is either owned or not) and fixes the ancestors' counts after.
//! Counts are therefore only hints: a search that trusts a stale "free" count fails
//! on the taken leaf, repairs the counts above that leaf and searches again, and a
//! stale "taken" count is repaired by the retried `free` or by [`BlockAllocator::recover`].
//!
//! Why the counts are exact once all operations have finished (none interrupted):
//! take an inner node P and the last modification of each of its two children (a
//! leaf CAS or a count CAS). The thread that made it goes on to update P, and each
//! update of P loads P, *then* reads both children, then CASes P with a new version.
//! Of those final updates, consider the one whose CAS comes last in P's modification
//! order. Its CAS succeeded, and versions make every value of P distinct (up to a
//! wrap, 2^32 updates of one node between a load and its CAS), so the
//! value it loaded is the one written immediately before its CAS, i.e. the other
//! thread's CAS or something after it in the chain of read-modify-writes that
//! continues that release sequence. Its acquire load therefore synchronises with
//! the other thread's release CAS, which came after that thread's child change; so
//! its reads of the children see both last modifications, and the count it writes,
//! the last one, is exact. By induction from the leaves up, every count is exact.
//! Without the version (ABA), a CAS could succeed against an equal value written
//! after the children were read (for instance a concurrent update that rewrote the
//! same count), and a stale sum would win. Reading the children before loading P
//! breaks the argument the same way. Every update CASes, even when the sum it read
//! equals P's count: returning early there is wrong even under sequential
//! consistency. Example: A=0, B=1, P=1; thread X claims A, loads P=1, reads A=1,
//! B=1 and is about to write 2; thread Y frees B, loads P=1, reads A=1, B=0, sees
//! 1 = 1 and returns; X's CAS succeeds and P says 2 over one taken leaf. Y's CAS
//! (which bumps the version) is what makes X's fail and re-read.
//!
//! This file runs past 800 lines for its tests: the unit tests and the loom
//! models (from the first `#[cfg(test)]` on, about 590 lines) sit next to the code they
//! check; the allocator itself is about 340 lines.

use crossbeam_utils::Backoff;

use crate::filter::sync::{spin, AtomicU64, Ordering};

/// Leaf value of a free block.
pub const FREE: u64 = 0;
/// Leaf value of padding beyond `blocks`: counted as taken, never handed out.
pub const RESERVED: u64 = u64::MAX;
/// Counts live in the low 32 bits of an inner word; keeping `leaves` at or below
/// 2^31 keeps the root's count below 2^32.
pub const MAX_BLOCKS: u64 = 1 << 31;

const COUNT_MASK: u64 = 0xFFFF_FFFF;
const VERSION_ONE: u64 = 1 << 32;

/// A view of the tree; cheap to copy, every process attaches its own.
#[derive(Clone, Copy)]
pub struct BlockAllocator<'a> {
    nodes: &'a [AtomicU64],
    blocks: u64,
    leaves: u64,
}

fn leaves_for(blocks: u64) -> u64 {
    blocks.clamp(1, MAX_BLOCKS).next_power_of_two()
}

impl<'a> BlockAllocator<'a> {
    /// Number of AtomicU64 words the tree needs for `blocks` blocks (implicit heap:
    /// index 1 = root, children 2i and 2i+1, leaves at [leaves, 2*leaves)).
    pub fn words_needed(blocks: u64) -> usize {
        (2 * leaves_for(blocks)) as usize
    }

    /// Initialises (single-threaded, before anyone else can see the memory): all
    /// blocks free, padding leaves RESERVED, counts consistent. The stores are
    /// relaxed: whatever publishes the memory to other processes orders them.
    ///
    /// Panics if `blocks` exceeds [`MAX_BLOCKS`] or `nodes` is shorter than
    /// [`Self::words_needed`]: a sizing bug in the caller, found at start-up.
    pub fn init(nodes: &'a [AtomicU64], blocks: u64) -> Self {
        let a = Self::attach(nodes, blocks);
        nodes[0].store(0, Ordering::Relaxed);
        for b in 0..a.leaves {
            let v = if b < blocks { FREE } else { RESERVED };
            a.word(a.leaves + b).store(v, Ordering::Relaxed);
        }
        for i in (1..a.leaves).rev() {
            let sum = a.count_of(2 * i) + a.count_of(2 * i + 1);
            a.word(i).store(sum, Ordering::Relaxed);
        }
        a
    }

    /// Attaches to an initialised tree without writing. Panics on the same sizing
    /// bugs as [`Self::init`].
    pub fn attach(nodes: &'a [AtomicU64], blocks: u64) -> Self {
        assert!(blocks <= MAX_BLOCKS, "block allocator: {blocks} blocks exceed the maximum of {MAX_BLOCKS}");
        let need = Self::words_needed(blocks);
        assert!(nodes.len() >= need, "block allocator: {} words given, {need} needed", nodes.len());
        BlockAllocator { nodes, blocks, leaves: leaves_for(blocks) }
    }

    /// Claims a run of `n` (>= 1) contiguous free blocks for `tag` (tag != FREE,
    /// != RESERVED; the caller makes tags unique per alloc/free pair). Returns the
    /// first block, or None if no run of n free blocks exists.
    ///
    /// First fit, guided by the counts. Claiming a block is a CAS FREE -> tag, so
    /// it also acquires whatever the block's previous owner wrote before its free.
    /// Under concurrency None means that no run was seen at some moment during the
    /// call: runs claimed transiently by racing allocations count as taken.
    pub fn alloc(&self, n: u64, tag: u64) -> Option<u64> {
        if n == 0 || n > self.blocks || tag == FREE || tag == RESERVED {
            return None;
        }
        let backoff = Backoff::new();
        loop {
            let start = self.scan(n, true).0?;
            match self.claim(start, n, tag) {
                Ok(()) => {
                    self.propagate(start, n);
                    return Some(start);
                }
                Err(claimed) => {
                    // Give back what this attempt took, then recount over it and
                    // over the taken leaf: if that leaf's ancestors said "free"
                    // (a claim not yet counted), the next search will not pick it
                    // again, so retries cannot loop on the same stale hint.
                    self.release(start, claimed, tag);
                    self.propagate(start, claimed + 1);
                    spin(&backoff);
                }
            }
        }
    }

    /// Releases blocks start..start+n that still carry `tag`; idempotent; always
    /// re-propagates counts over the range's ancestors, even if the leaves were
    /// already free (an earlier free may have died before fixing the parents). An
    /// out-of-range run or a FREE/RESERVED tag is a no-op.
    pub fn free(&self, start: u64, n: u64, tag: u64) {
        self.free_counting(start, n, tag);
    }

    /// Free blocks according to the root count: a hint under concurrency, exact
    /// when quiescent.
    pub fn free_blocks(&self) -> u64 {
        let taken = self.count_of(1).saturating_sub(self.leaves - self.blocks);
        self.blocks.saturating_sub(taken)
    }

    /// The longest run an [`Self::alloc`] could get now (for error messages);
    /// walks the tree, skipping wholly free or taken subtrees.
    pub fn largest_free_run(&self) -> u64 {
        self.scan(u64::MAX, false).1
    }

    /// Recovery pass: every maximal run of leaves carrying the same tag for which
    /// `in_use(tag)` is false is freed (phantom allocations whose caller died before
    /// recording them), then every count is recomputed (repairing frees that died
    /// before fixing the parents). Returns the number of blocks freed.
    pub fn recover(&self, in_use: impl Fn(u64) -> bool) -> u64 {
        let mut freed = 0;
        for (start, len, tag) in self.allocations() {
            if !in_use(tag) {
                freed += self.free_counting(start, len, tag);
            }
        }
        self.propagate(0, self.leaves);
        freed
    }

    /// Current allocations as (start, len, tag) maximal same-tag runs (diagnostics
    /// and tests).
    pub fn allocations(&self) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for b in 0..self.blocks {
            let tag = self.leaf(b);
            if tag == FREE || tag == RESERVED {
                continue;
            }
            match out.last_mut() {
                Some((start, len, t)) if *t == tag && *start + *len == b => *len += 1,
                _ => out.push((b, 1, tag)),
            }
        }
        out
    }

    /// Quiescent consistency check: every inner count equals the sum of its
    /// children, leaves are FREE/RESERVED/tag. Err with a description otherwise.
    pub fn check(&self) -> Result<(), String> {
        for b in 0..self.leaves {
            let v = self.leaf(b);
            if b < self.blocks && v == RESERVED {
                return Err(format!("block {b} is RESERVED but inside the {} blocks", self.blocks));
            }
            if b >= self.blocks && v != RESERVED {
                return Err(format!("padding leaf {b} holds {v:#x}, not RESERVED"));
            }
        }
        for i in 1..self.leaves {
            let (count, l, r) = (self.count_of(i), self.count_of(2 * i), self.count_of(2 * i + 1));
            if count != l + r {
                return Err(format!("node {i} counts {count}, its children {l} + {r}"));
            }
        }
        Ok(())
    }

    fn word(&self, i: u64) -> &AtomicU64 {
        &self.nodes[i as usize]
    }

    fn leaf(&self, block: u64) -> u64 {
        self.word(self.leaves + block).load(Ordering::Acquire)
    }

    /// Blocks taken below node `i` (a leaf counts 1 unless free).
    fn count_of(&self, i: u64) -> u64 {
        let w = self.word(i).load(Ordering::Acquire);
        if i >= self.leaves {
            (w != FREE) as u64
        } else {
            w & COUNT_MASK
        }
    }

    /// Recomputes the count of inner node `i` from its children. The load of `i`
    /// comes before the reads of the children and the CAS always bumps the version:
    /// both are what make the final counts exact (see the module comment).
    fn update(&self, i: u64) {
        let node = self.word(i);
        loop {
            let old = node.load(Ordering::Acquire);
            let sum = self.count_of(2 * i) + self.count_of(2 * i + 1);
            let new = (old & !COUNT_MASK).wrapping_add(VERSION_ONE) | sum;
            if node.compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return;
            }
        }
    }

    /// Updates every ancestor of blocks start..start+n once, level by level
    /// upwards, so each level reads children already recounted.
    fn propagate(&self, start: u64, n: u64) {
        self.propagate_levels(start, n, u32::MAX);
    }

    fn propagate_levels(&self, start: u64, n: u64, levels: u32) {
        if n == 0 {
            return;
        }
        let (mut lo, mut hi) = (self.leaves + start, self.leaves + start + n - 1);
        let mut level = 0;
        while lo > 1 && level < levels {
            lo >>= 1;
            hi >>= 1;
            for i in lo..=hi {
                self.update(i);
            }
            level += 1;
        }
    }

    /// Claims blocks start..start+n left to right; on the first taken one, returns
    /// how many it had claimed (they stay claimed: the caller releases them).
    fn claim(&self, start: u64, n: u64, tag: u64) -> Result<(), u64> {
        for k in 0..n {
            let leaf = self.word(self.leaves + start + k);
            if leaf.compare_exchange(FREE, tag, Ordering::AcqRel, Ordering::Acquire).is_err() {
                return Err(k);
            }
        }
        Ok(())
    }

    /// Frees the blocks of start..start+n that carry `tag`; returns how many.
    fn release(&self, start: u64, n: u64, tag: u64) -> u64 {
        let mut freed = 0;
        for b in start..start + n {
            let leaf = self.word(self.leaves + b);
            if leaf.compare_exchange(tag, FREE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                freed += 1;
            }
        }
        freed
    }

    fn free_counting(&self, start: u64, n: u64, tag: u64) -> u64 {
        let in_range = matches!(start.checked_add(n), Some(end) if end <= self.blocks);
        if n == 0 || !in_range || tag == FREE || tag == RESERVED {
            return 0;
        }
        let freed = self.release(start, n, tag);
        self.propagate(start, n);
        freed
    }

    /// Walks the blocks left to right through the largest aligned nodes that fit,
    /// taking a node with count 0 whole (the run grows by its length), skipping a
    /// full one (the run restarts after it) and descending into a partial one.
    /// With `first_fit`, returns the start of the first run of `n` blocks (and stops
    /// once too few blocks remain); always returns the longest run seen.
    fn scan(&self, n: u64, first_fit: bool) -> (Option<u64>, u64) {
        let (mut pos, mut run_start, mut best) = (0u64, 0u64, 0u64);
        while pos < self.blocks {
            if first_fit && self.blocks - run_start < n {
                break;
            }
            let align = if pos == 0 { self.leaves } else { 1u64 << pos.trailing_zeros() };
            let fit = 1u64 << (63 - (self.blocks - pos).leading_zeros());
            let mut len = align.min(fit);
            loop {
                // The aligned node [pos, pos + len) at the level of length `len`.
                let taken = self.count_of((self.leaves + pos) / len);
                if taken == 0 {
                    pos += len;
                    best = best.max(pos - run_start);
                    if first_fit && pos - run_start >= n {
                        return (Some(run_start), best);
                    }
                    break;
                }
                if taken >= len {
                    pos += len;
                    run_start = pos;
                    break;
                }
                // Partial, so len > 1 (a leaf counts 0 or 1).
                len /= 2;
            }
        }
        (None, best)
    }
}

/// Operations that stop part-way, as a caller that dies would leave them.
#[cfg(test)]
impl BlockAllocator<'_> {
    /// An alloc of `n` for `tag` whose caller died after claiming at most `claim`
    /// leaves and updating `levels` levels of counts above them. Returns the start
    /// of the run it was claiming.
    fn interrupted_alloc(&self, n: u64, tag: u64, claim: u64, levels: u32) -> Option<u64> {
        let start = self.scan(n, true).0?;
        let claimed = match self.claim(start, n.min(claim), tag) {
            Ok(()) => n.min(claim),
            Err(k) => k,
        };
        self.propagate_levels(start, claimed, levels);
        Some(start)
    }

    /// A free whose caller died after releasing the leaves and updating `levels`
    /// levels of counts.
    fn interrupted_free(&self, start: u64, n: u64, tag: u64, levels: u32) {
        self.release(start, n, tag);
        self.propagate_levels(start, n, levels);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
