//! A durable filter's checkpoint bookkeeping in the registry: what changed
//! since its last cut, the stamp its files cover, what its cuts wrote, its
//! checkpoint units and the region's copy pool, and whether durable filters
//! may change at all (open, closed or frozen). `sql::named::cut` drives it.

use super::*;
use crate::region::wal::QueueCounts;

impl Region {
    /// The copy pool of checkpoint cuts.
    pub fn pool(&self) -> Pool<'_> {
        let used = self.at::<AtomicU64>(self.lay.pool_used_at, Pool::bitmap_words(self.lay.pool_slots));
        let data = self.at::<AtomicU64>(self.lay.pool_at, self.lay.pool_slots * UNIT_WORDS);
        Pool::new(used, data, self.lay.pool_slots)
    }

    /// A durable filter's units over all its tables (`region::durable`): None
    /// for other filters and placeholders. Use while pinned, after
    /// `still_current`.
    pub fn units(&self, info: &EntryInfo) -> Option<crate::region::durable::ChainUnits<'_>> {
        if !info.durable {
            return None;
        }
        self.tables(info)?.units()
    }

    pub(super) fn durable_state_of(&self, index: usize) -> &DurableState {
        &self.entries()[index].checkpoint
    }

    /// Records what changed in durable filter `index` since its last cut.
    #[inline]
    pub fn mark_changed(&self, index: usize, bits: u64) {
        let c = &self.durable_state_of(index).changed;
        if c.load(Ordering::Relaxed) & bits != bits {
            c.fetch_or(bits, Ordering::SeqCst);
        }
    }

    /// What changed in durable filter `index` since its last cut.
    pub fn changed(&self, index: usize) -> u64 {
        self.durable_state_of(index).changed.load(Ordering::SeqCst)
    }

    /// Clears and returns what changed (a cut, with the filter's writers paused
    /// and drained, records it).
    pub fn take_changed(&self, index: usize) -> u64 {
        self.durable_state_of(index).changed.swap(0, Ordering::SeqCst)
    }

    pub fn durable_stats(&self, index: usize) -> DurableStats {
        let d = self.durable_state_of(index);
        DurableStats {
            changed: d.changed.load(Ordering::Relaxed),
            stamp: d.stamp.load(Ordering::Relaxed),
            cut_file_bytes: d.cut_file_bytes.load(Ordering::Relaxed),
            cut_wal_bytes: d.cut_wal_bytes.load(Ordering::Relaxed),
            base_bytes: d.base_bytes.load(Ordering::Relaxed),
            delta_bytes: d.delta_bytes.load(Ordering::Relaxed),
            deltas: d.deltas.load(Ordering::Relaxed),
            pool_waits: d.pool_waits.load(Ordering::Relaxed),
        }
    }

    /// Records a cut of filter `index` (only by the process that cuts): the
    /// WAL position its files now cover, and what it wrote (`base`: a whole
    /// base file, else a delta).
    pub fn record_cut(&self, index: usize, stamp: u64, base: bool, file_bytes: u64, wal_bytes: u64) {
        let d = self.durable_state_of(index);
        d.stamp.store(stamp, Ordering::Release);
        d.cut_file_bytes.store(file_bytes, Ordering::Relaxed);
        d.cut_wal_bytes.store(wal_bytes, Ordering::Relaxed);
        if base {
            d.base_bytes.store(file_bytes, Ordering::Relaxed);
            d.delta_bytes.store(0, Ordering::Relaxed);
            d.deltas.store(0, Ordering::Relaxed);
        } else {
            d.delta_bytes.fetch_add(file_bytes, Ordering::Relaxed);
            d.deltas.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The stamp a `PASS` record (or the coverage file) confirmed for filter
    /// `index`, and the stamp it was restored with.
    pub fn confirmed(&self, index: usize) -> (u64, u64) {
        let d = self.durable_state_of(index);
        (d.confirmed.load(Ordering::Acquire), d.restored.load(Ordering::Acquire))
    }

    pub fn set_confirmed(&self, index: usize, stamp: u64) {
        self.durable_state_of(index).confirmed.store(stamp, Ordering::Release);
    }

    pub fn set_restored(&self, index: usize, stamp: u64) {
        self.durable_state_of(index).restored.store(stamp, Ordering::Release);
    }

    /// Durable filter `index`'s account of its queued deletes (a bound
    /// filter's; zero for others).
    pub fn queue_counts(&self, index: usize) -> QueueCounts {
        QueueCounts::from_words(self.durable_state_of(index).queue.each_ref().map(|c| c.load(Ordering::SeqCst)))
    }

    /// Adds `d` to filter `index`'s account (inside a writer's operation,
    /// with its `QUEUE` record, or replaying that record) and marks its
    /// metadata changed for the next cut.
    pub fn add_queue_counts(&self, index: usize, d: &QueueCounts) {
        let q = &self.durable_state_of(index).queue;
        for (c, v) in q.iter().zip(d.words()) {
            if v != 0 {
                c.fetch_add(v, Ordering::SeqCst);
            }
        }
        self.mark_changed(index, CHANGED_META);
    }

    /// Sets filter `index`'s account as its files or a logged base say.
    pub fn set_queue_counts(&self, index: usize, c: &QueueCounts) {
        let q = &self.durable_state_of(index).queue;
        for (a, v) in q.iter().zip(c.words()) {
            a.store(v, Ordering::SeqCst);
        }
    }

    /// Filter `index`'s [`UNVERIFIED`] flag.
    pub fn durable_flags(&self, index: usize) -> u64 {
        self.durable_state_of(index).flags.load(Ordering::Acquire)
    }

    pub fn set_durable_flags(&self, index: usize, flags: u64) {
        self.durable_state_of(index).flags.store(flags, Ordering::Release);
    }

    /// Sets the position filter `index`'s contents cover (restored from files:
    /// `base_bytes` and `delta_bytes`/`deltas` describe them).
    pub fn set_stamp(&self, index: usize, stamp: u64, base_bytes: u64, delta_bytes: u64, deltas: u64) {
        let d = self.durable_state_of(index);
        d.stamp.store(stamp, Ordering::Release);
        d.base_bytes.store(base_bytes, Ordering::Relaxed);
        d.delta_bytes.store(delta_bytes, Ordering::Relaxed);
        d.deltas.store(deltas, Ordering::Relaxed);
    }

    /// Records that restoring the filters' files was not complete (see
    /// [`Self::restore_incomplete`]).
    pub fn note_restore_incomplete(&self) {
        self.header().restore_incomplete.store(1, Ordering::SeqCst);
    }

    /// Whether restoring the files met an error that may have left a filter
    /// out of the registry: files of generations it does not have must stay.
    pub fn restore_incomplete(&self) -> bool {
        self.header().restore_incomplete.load(Ordering::SeqCst) != 0
    }

    /// Frees every slot of the copy pool. Only while no cut is in progress and
    /// no unit is marked (a writer that claimed a slot meanwhile then fails to
    /// mark its unit and gives the slot back).
    pub fn reset_pool(&self) {
        for w in self.at::<AtomicU64>(self.lay.pool_used_at, Pool::bitmap_words(self.lay.pool_slots)) {
            w.store(0, Ordering::SeqCst);
        }
    }

    // ----- changes: the caller holds the registry lock -----

    /// Whether durable filters may be changed now.
    #[inline]
    pub fn durable_state(&self) -> DurableGate {
        match self.header().durable_state.load(Ordering::SeqCst) {
            0 => DurableGate::Closed,
            1 => DurableGate::Open,
            _ => DurableGate::Frozen,
        }
    }

    /// Sets the durable state; closing or freezing then waits (up to `patience`
    /// spins) until no process that may have seen the old state is still inside
    /// a filter operation, so that no durable change is in flight afterwards.
    /// Call unpinned. False if processes stayed pinned.
    pub fn set_durable_state(&self, state: DurableGate, patience: u64) -> bool {
        self.header().durable_state.store(state as u64, Ordering::SeqCst);
        if state == DurableGate::Open {
            return true;
        }
        self.drain_writers(|waits| waits + 1 < patience)
    }
}

/// A new generation's checkpoint bookkeeping: nothing on file yet.
pub(super) fn reset_durable(d: &DurableState, durable: bool, gen: u64) {
    d.changed.store(if durable { NEEDS_BASE | CHANGED_META } else { 0 }, Ordering::SeqCst);
    d.stamp.store(gen, Ordering::Relaxed);
    for c in [
        &d.cut_file_bytes,
        &d.cut_wal_bytes,
        &d.base_bytes,
        &d.delta_bytes,
        &d.deltas,
        &d.pool_waits,
        &d.confirmed,
        &d.restored,
        &d.flags,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    for c in &d.queue {
        c.store(0, Ordering::SeqCst);
    }
}
