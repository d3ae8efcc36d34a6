//! Pins, writer pauses and consistent copies: an operation pins its epoch slot
//! while it uses a filter (see "When space is reused" in the parent module),
//! a writer pins as one so that pauses wait for it, and a snapshot or a
//! checkpoint cut pauses a filter's writers and waits until none is inside
//! an operation, to read the filter as of one moment.

use super::tables::TableInfo;
use super::types::word_offsets;
use super::*;

impl Region {
    /// Marks the calling process (epoch slot `slot`) as reading filters until the
    /// returned guard is dropped. `None` if `slot` is out of range.
    pub fn pin(&self, slot: usize) -> Option<Pin<'_>> {
        let s = &*self.slots().get(slot)?.pinned;
        epoch::pin(&self.header().epoch, s, false);
        Some(Pin { slot: s })
    }

    /// As [`Self::pin`], for a process that may change bucket words: pauses
    /// (snapshots, checkpoint cuts) wait for writers only.
    pub fn pin_writer(&self, slot: usize) -> Option<Pin<'_>> {
        let s = &*self.slots().get(slot)?.pinned;
        epoch::pin(&self.header().epoch, s, true);
        Some(Pin { slot: s })
    }

    pub(super) fn slots(&self) -> &[EpochSlot] {
        self.at(self.lay.slots_at, self.lay.slots)
    }

    pub(super) fn slot_words(&self) -> impl Iterator<Item = &AtomicU64> {
        self.slots().iter().map(|s| &*s.pinned)
    }

    /// Holds entry `index`'s writers off until the guard is dropped (writers
    /// that see the pause unpin and wait): the caller then waits for the
    /// writers already pinned to drain ([`epoch::writers_drained`]).
    pub fn pause_writers(&self, index: usize) -> PausedWriters<'_> {
        let e = &self.entries()[index];
        e.writers_paused.fetch_add(1, Ordering::SeqCst);
        PausedWriters(&e.writers_paused)
    }

    /// Waits until every process pinned as a writer before this call has
    /// unpinned: after each check that finds one still pinned, asks
    /// `keep_waiting` (with the number of such checks so far, from 0) and
    /// spins. Returns false if it said to give up.
    pub fn drain_writers(&self, mut keep_waiting: impl FnMut(u64) -> bool) -> bool {
        let target = epoch::advance(&self.header().epoch);
        let backoff = crossbeam_utils::Backoff::new();
        let mut waits = 0u64;
        while !epoch::writers_drained(self.slot_words(), target) {
            if !keep_waiting(waits) {
                return false;
            }
            waits += 1;
            spin(&backoff);
        }
        true
    }

    /// Whether a snapshot holds entry `index`'s writers off. A writer checks this
    /// while pinned, after `still_current`; if true it must unpin and wait until
    /// it turns false.
    #[inline]
    pub fn writers_paused(&self, index: usize) -> bool {
        self.entries()[index].writers_paused.load(Ordering::SeqCst) != 0
    }

    /// Copies the bucket words of filter `info`'s tables `handles` (all its
    /// published tables, as read before) into `out`, one table after another,
    /// so that the copy is the whole filter at one moment, and returns each
    /// table's shape and item count (the occupied slots of the copy); `None`
    /// if the filter has other tables by now (the caller sizes `out` again).
    /// Call pinned (slot `slot`) after `still_current`.
    ///
    /// Inserts and deletes change one word at a time, but together they can shift
    /// a fingerprint from a word not yet copied to one already copied (an insert of
    /// a second copy before a delete of the first; a move). So a copy counts only
    /// if a second pass finds every word unchanged and no table added; after a
    /// few failed attempts, the snapshot pauses the filter's writers: it raises
    /// the pause, waits until every process that might not have seen it has
    /// unpinned (the epoch protocol), copies, and lifts the pause. Writers that
    /// see the pause wait unpinned, so lookups, other filters and other
    /// snapshots are never held up, and writers of this filter only for one
    /// copy (a table is only ever added by a writer). `SnapshotBusy` if
    /// processes stayed pinned for `patience` waits.
    pub fn snapshot(
        &self,
        info: &EntryInfo,
        _slot: usize,
        handles: &[u64],
        out: &mut [u64],
        patience: u64,
    ) -> Result<Option<Vec<TableInfo>>, SnapshotBusy> {
        let Some(tables) = self.tables(info) else { return Ok(Some(Vec::new())) };
        let same = || tables.handles() == handles;
        // Each table with the range of `out` its words go to.
        let parts: Vec<(Table<'_>, std::ops::Range<usize>, u64)> = handles
            .iter()
            .zip(word_offsets(handles.iter().map(|&h| self.header_of(h).bucket_count)))
            .map(|(&h, at)| {
                let t = self.table_of(h);
                (t, at..at + t.params().bucket_count as usize, self.header_of(h).capacity)
            })
            .collect();
        let copy = |out: &mut [u64]| parts.iter().for_each(|(t, r, _)| t.copy_words(&mut out[r.clone()]));
        let equal = |out: &[u64]| parts.iter().all(|(t, r, _)| t.words_equal(&out[r.clone()]));
        let infos = |out: &[u64]| {
            parts
                .iter()
                .map(|(t, r, capacity)| TableInfo {
                    params: t.params(),
                    capacity: *capacity,
                    items: t.occupied_in(&out[r.clone()]),
                })
                .collect::<Vec<_>>()
        };
        for _ in 0..3 {
            if !same() {
                return Ok(None);
            }
            copy(out);
            if equal(out) && same() {
                return Ok(Some(infos(out)));
            }
        }
        #[cfg(all(test, not(loom)))]
        tests::PAUSED_SNAPSHOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _paused = self.pause_writers(info.index);
        if !self.drain_writers(|waits| waits < patience) {
            return Err(SnapshotBusy);
        }
        if !same() {
            return Ok(None);
        }
        copy(out);
        Ok(Some(infos(out)))
    }

    /// Whether entry `index` is still at sequence number `seq` (call while pinned:
    /// then a match means the filter it described cannot be reclaimed before the
    /// pin ends).
    #[inline]
    pub fn still_current(&self, index: usize, seq: u64) -> bool {
        self.entries()[index].seq.load(Ordering::SeqCst) == seq
    }
}
