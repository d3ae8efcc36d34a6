//! Filters bound to a table column (`cf_bind`): their shared state beside the
//! region (a slot per binding, with its counters and its *remover gate*), the
//! queue of deletes that wait until no snapshot can see the deleted row
//! versions, and the rule that decides when a row version's key gets a copy
//! of its own in the filter. Nothing here depends on pgrx; the SQL glue
//! (`sql::bound`) supplies the lock, the clock and the transaction horizon.
//!
//! # One copy per row version, up to a cap
//!
//! A bound filter holds a multiset: every row version whose key it covers put
//! one copy of the key's fingerprint into the key's bucket pair, and a delete
//! that became safe (its transaction committed, and every snapshot that could
//! see the deleted version is gone) takes one copy out. Deletes are then exact
//! by arithmetic: a copy is removed only for a version that had one, so the
//! copies of a key never fall below the versions that still need them.
//!
//! A pair holds at most `2b` fingerprints, so a key with many rows (a foreign
//! key column) cannot have a copy per row. A version whose insert finds
//! [`COPY_CAP`] copies or more in its key's pair adds none, and from then on
//! the key is *saturated*: a remover that finds `COPY_CAP` copies or more
//! removes nothing (the delete is refused and counted; the key stays, a false
//! positive, until `cf_rebuild`). Saturation is absorbing: inserts only add,
//! removes stop at the cap, so the count never falls below the cap again.
//! Copies of another key with the same fingerprint and pair count too; that
//! only saturates the pair sooner.
//!
//! # The remover gate
//!
//! "Found the cap, added nothing" must not race a remover that read fewer
//! copies a moment before and removes after. Each binding has a gate word: a
//! remover adds `EPOCH + 1` when it starts (a new epoch, one more active) and
//! subtracts 1 when it ends. An insert reads the gate before it counts copies
//! and again after; if a remover was active at the first read, or the gate
//! moved in between, every key it was about to leave without a copy gets one
//! after all. Otherwise no remover overlapped its count, and every remover
//! that starts later counts after it and finds the cap too (sequentially
//! consistent accesses throughout). `loom_tests` checks every interleaving of
//! the race, `tests` the steps of each.

use crate::filter::sync::{AtomicU64, Ordering};

/// Copies of a key's fingerprint at which its pair is saturated (see the
/// module documentation): a version finding this many adds none, and a
/// remover finding this many removes none.
pub const COPY_CAP: u64 = 3;

/// One more remover active, in a new epoch.
const GATE_START: u64 = (1 << 24) + 1;
const GATE_ACTIVE: u64 = (1 << 24) - 1;

/// Longest binding name in bytes (the named filter's limit).
pub const BOUND_NAME_BYTES: usize = 63;
const NAME_WORDS: usize = 8;
const AREA_MAGIC: u64 = 0x6375_636b_6f6f_4244; // "cuckooBD"

/// A pending delete: the key's hash under the filter's seed, the full ID of
/// the (sub)transaction that deleted the version, and the binding's slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PendingDelete {
    pub slot: u32,
    /// The slot's `epoch` when queued: an entry of a binding that was
    /// replaced since is dropped, not applied to its successor.
    pub epoch: u32,
    pub hash: u64,
    pub fxid: u64,
}

/// Why no slot was claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRefused {
    /// Every slot is taken.
    Full,
    /// The filter's owner holds `held` slots, its cap.
    RoleCap { held: usize },
}

/// What to do with a pending delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its transaction is still running, or a snapshot may still see the
    /// version: keep it.
    Wait,
    /// Committed, and older than every snapshot: remove a copy now.
    Apply,
    /// Aborted (the version is still there), or its binding is gone: drop it.
    Discard,
}

/// A binding's slot: who it is and what it counts. Name and database change
/// only under the area's lock; the counters are atomics.
#[repr(C)]
pub struct BoundSlot {
    /// 0: free; else the binding's `epoch` (never 0), new at each claim.
    epoch: AtomicU64,
    db: AtomicU64,
    name_len: AtomicU64,
    name: [AtomicU64; NAME_WORDS],
    gate: AtomicU64,
    /// The bound table's OID and the column's number, as the process that
    /// claimed the slot read them from the catalog (0: not known yet).
    table: AtomicU64,
    /// Deletes waiting in the queue.
    pub pending: AtomicU64,
    /// Deletes that could not be queued (the queue was full): their keys stay.
    pub dropped: AtomicU64,
    /// Deletes applied (a copy removed).
    pub applied: AtomicU64,
    /// Deletes refused at a saturated pair, or where the filter could not
    /// tell which of its tables held the copy: their keys stay.
    pub refused: AtomicU64,
    /// Queued deletes whose transaction aborted.
    pub discarded: AtomicU64,
    /// Versions that found their pair saturated and added no copy.
    pub saturated: AtomicU64,
    /// When deletes were last applied, in the caller's clock.
    pub last_apply: AtomicU64,
    /// What identifies the contents the last fill made, for a filter that
    /// is not durable (a durable filter's generation does): set by the
    /// fill, 0 until then.
    built: AtomicU64,
    /// The identity the catalog confirmed as a committed fill's (0: none
    /// yet): a cache of that check.
    ready: AtomicU64,
    /// The role that owns the binding's filter (for the cap per role).
    owner: AtomicU64,
}

#[repr(C)]
struct AreaHeader {
    magic: AtomicU64,
    slots: AtomicU64,
    queue_cap: AtomicU64,
    /// Entries in the queue (under the lock).
    queue_len: AtomicU64,
    next_epoch: AtomicU64,
    /// Background rebuilds asked for lately (under the lock): a key naming
    /// the binding (0: free) and when, in the caller's clock.
    asks: [[AtomicU64; 2]; ASKS],
    /// When the running background rebuild started, in the caller's clock
    /// (0: none runs): one at a time in the cluster.
    rebuilder: AtomicU64,
}

/// Background rebuilds remembered at once (`Area::ask_rebuild`).
pub const ASKS: usize = 16;

/// The shared state of bound filters, over memory the caller reserved
/// ([`Area::bytes`]).
#[derive(Clone, Copy)]
pub struct Area {
    header: &'static AreaHeader,
    slots: &'static [BoundSlot],
    queue: *mut PendingDelete,
    queue_cap: usize,
}

// SAFETY: the queue is touched only under the area's lock (`QueueLocked`);
// everything else is atomics.
unsafe impl Send for Area {}
// SAFETY: as above.
unsafe impl Sync for Area {}

/// Proof that the caller holds the area's lock.
pub struct QueueLocked(());

impl QueueLocked {
    /// # Safety
    /// The caller holds the area's lock until the value is dropped.
    pub unsafe fn assume() -> QueueLocked {
        QueueLocked(())
    }
}

fn pad(n: usize) -> usize {
    n.div_ceil(64) * 64
}

impl Area {
    /// Bytes for `slots` bindings and a queue of `queue` deletes.
    pub fn bytes(slots: usize, queue: usize) -> usize {
        pad(size_of::<AreaHeader>()) + pad(slots * size_of::<BoundSlot>()) + queue * size_of::<PendingDelete>()
    }

    /// Lays the area out over `base` (zeroed memory of [`Area::bytes`], or
    /// an area laid out before when `existing`).
    ///
    /// # Safety
    /// `base` is 64-byte aligned, valid for [`Area::bytes`]`(slots, queue)`
    /// bytes for the rest of the process, and used for nothing else.
    pub unsafe fn init(base: *mut u8, slots: usize, queue: usize, existing: bool) -> Area {
        // SAFETY: as documented; the header, slots and entries are plain
        // atomics and integers, valid when zeroed.
        unsafe {
            if !existing {
                std::ptr::write_bytes(base, 0, Area::bytes(slots, queue));
            }
            let header = &*(base as *const AreaHeader);
            let slot_base = base.add(pad(size_of::<AreaHeader>())) as *const BoundSlot;
            let queue_base = base.add(pad(size_of::<AreaHeader>()) + pad(slots * size_of::<BoundSlot>()));
            if !existing {
                header.slots.store(slots as u64, Ordering::Relaxed);
                header.queue_cap.store(queue as u64, Ordering::Relaxed);
                header.next_epoch.store(1, Ordering::Relaxed);
                header.magic.store(AREA_MAGIC, Ordering::Release);
            }
            Area {
                header,
                slots: std::slice::from_raw_parts(slot_base, slots),
                queue: queue_base as *mut PendingDelete,
                queue_cap: queue,
            }
        }
    }

    /// The slot of the binding `name` of database `db`, claimed if it has none
    /// (`None`: every slot is taken). Returns its index and epoch.
    pub fn slot_for(&self, lk: &QueueLocked, db: u32, name: &str) -> Option<(usize, u32)> {
        self.slot_for_owner(lk, db, name, 0, None).ok()
    }

    /// The same for a binding whose filter role `owner` owns, claimed only
    /// while that role holds fewer than `cap` slots (when given).
    pub fn slot_for_owner(
        &self,
        _lk: &QueueLocked,
        db: u32,
        name: &str,
        owner: u32,
        cap: Option<usize>,
    ) -> Result<(usize, u32), SlotRefused> {
        if let Some(i) = self.find(db, name) {
            return Ok((i, self.slots[i].epoch.load(Ordering::Relaxed) as u32));
        }
        if let Some(cap) = cap {
            let held = self
                .slots
                .iter()
                .filter(|s| s.epoch.load(Ordering::Relaxed) != 0 && s.owner.load(Ordering::Relaxed) == owner as u64)
                .count();
            if held >= cap {
                return Err(SlotRefused::RoleCap { held });
            }
        }
        let i = self.slots.iter().position(|s| s.epoch.load(Ordering::Relaxed) == 0).ok_or(SlotRefused::Full)?;
        let s = &self.slots[i];
        let mut epoch = self.header.next_epoch.fetch_add(1, Ordering::Relaxed) as u32 as u64;
        if epoch == 0 {
            epoch = self.header.next_epoch.fetch_add(1, Ordering::Relaxed) as u32 as u64;
        }
        for c in [
            &s.table,
            &s.pending,
            &s.dropped,
            &s.applied,
            &s.refused,
            &s.discarded,
            &s.saturated,
            &s.last_apply,
            &s.built,
            &s.ready,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        s.db.store(db as u64, Ordering::Relaxed);
        let b = name.as_bytes();
        let mut words = [0u64; NAME_WORDS];
        for (k, &c) in b.iter().take(BOUND_NAME_BYTES).enumerate() {
            words[k / 8] |= (c as u64) << (8 * (k % 8));
        }
        for (w, v) in s.name.iter().zip(words) {
            w.store(v, Ordering::Relaxed);
        }
        s.name_len.store(b.len().min(BOUND_NAME_BYTES) as u64, Ordering::Relaxed);
        s.owner.store(owner as u64, Ordering::Relaxed);
        s.epoch.store(epoch, Ordering::Release);
        Ok((i, epoch as u32))
    }

    /// Whether a background rebuild of the binding that `key` names (never
    /// 0) may be asked for at time `now`: not if one was asked less than
    /// `every` ago (then it is running, or it failed and is not tried again
    /// so soon). Remembers this one, in a free entry or the oldest (only
    /// the last `ASKS` bindings asked for are told apart).
    pub fn ask_rebuild(&self, _lk: &QueueLocked, key: u64, now: u64, every: u64) -> bool {
        let asks = &self.header.asks;
        if let Some(e) = asks.iter().find(|e| e[0].load(Ordering::Relaxed) == key) {
            if now.saturating_sub(e[1].load(Ordering::Relaxed)) < every {
                return false;
            }
            e[1].store(now, Ordering::Relaxed);
            return true;
        }
        let e = asks
            .iter()
            .min_by_key(|e| (e[0].load(Ordering::Relaxed) != 0, e[1].load(Ordering::Relaxed)))
            .expect("ASKS > 0");
        e[0].store(key, Ordering::Relaxed);
        e[1].store(now, Ordering::Relaxed);
        true
    }

    /// Whether `key` was asked for (`ask_rebuild`) less than `every` before
    /// `now`, without asking.
    pub fn asked_within(&self, _lk: &QueueLocked, key: u64, now: u64, every: u64) -> bool {
        self.header
            .asks
            .iter()
            .any(|e| e[0].load(Ordering::Relaxed) == key && now.saturating_sub(e[1].load(Ordering::Relaxed)) < every)
    }

    /// Claims the one background rebuild that may run (under the lock): not
    /// while one started less than `lease` before `now` runs (one whose
    /// process never ran or vanished is forgotten after `lease`).
    pub fn claim_rebuilder(&self, _lk: &QueueLocked, now: u64, lease: u64) -> bool {
        let at = self.header.rebuilder.load(Ordering::Relaxed);
        if at != 0 && now.saturating_sub(at) < lease && at <= now {
            return false;
        }
        self.header.rebuilder.store(now.max(1), Ordering::Relaxed);
        true
    }

    /// The background rebuild claimed at `stamp` (`claim_rebuilder`'s `now`,
    /// at least 1) ended, or was not started: its claim goes, unless another
    /// took over after its lease.
    pub fn release_rebuilder(&self, stamp: u64) {
        let _ = self.header.rebuilder.compare_exchange(stamp.max(1), 0, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The slot of `name` in `db` and its epoch, if claimed.
    pub fn find_epoch(&self, db: u32, name: &str) -> Option<(usize, u32)> {
        let i = self.find(db, name)?;
        let epoch = self.slots[i].epoch.load(Ordering::Acquire) as u32;
        // Claimed by another binding between the two reads: none.
        (epoch != 0 && self.slots[i].is(db, name)).then_some((i, epoch))
    }

    /// The slot of `name` in `db`, if claimed.
    pub fn find(&self, db: u32, name: &str) -> Option<usize> {
        self.slots.iter().position(|s| s.epoch.load(Ordering::Acquire) != 0 && s.is(db, name))
    }

    /// Frees a binding's slot and drops its queued deletes (`cf_unbind`, a
    /// binding ended): an entry queued later under the old epoch is dropped
    /// when seen.
    pub fn release(&self, lk: &QueueLocked, slot: usize) {
        self.retain(lk, |e| e.slot as usize != slot);
        self.slots[slot].epoch.store(0, Ordering::Release);
    }

    /// Slot `i`.
    pub fn slot(&self, i: usize) -> &'static BoundSlot {
        &self.slots[i]
    }

    /// Whether slot `i` still holds the binding of `epoch`.
    pub fn current(&self, i: usize, epoch: u32) -> bool {
        self.slots.get(i).is_some_and(|s| s.epoch.load(Ordering::Acquire) as u32 == epoch && epoch != 0)
    }

    /// Queues deletes of slot `slot` (epoch `epoch`); those that do not fit are
    /// counted as dropped. Returns how many were queued.
    pub fn push(&self, _lk: &QueueLocked, slot: usize, epoch: u32, hashes: &[(u64, u64)]) -> usize {
        let len = self.header.queue_len.load(Ordering::Relaxed) as usize;
        let n = hashes.len().min(self.queue_cap - len);
        for (k, &(hash, fxid)) in hashes[..n].iter().enumerate() {
            // SAFETY: len + k < queue_cap; the queue is ours under the lock.
            unsafe { self.queue.add(len + k).write(PendingDelete { slot: slot as u32, epoch, hash, fxid }) };
        }
        self.header.queue_len.store((len + n) as u64, Ordering::Relaxed);
        let s = &self.slots[slot];
        s.pending.fetch_add(n as u64, Ordering::Relaxed);
        s.dropped.fetch_add((hashes.len() - n) as u64, Ordering::Relaxed);
        n
    }

    /// Takes out of the queue the entries of `slot` that `verdict` says to
    /// apply (into `out`, in queue order) or to discard, keeping the rest in
    /// order; entries of an old epoch are discarded. Returns how many entries
    /// of the slot's current epoch it took out (applied or discarded).
    pub fn take(
        &self,
        _lk: &QueueLocked,
        slot: usize,
        mut verdict: impl FnMut(&PendingDelete) -> Verdict,
        out: &mut Vec<PendingDelete>,
    ) -> u64 {
        let s = &self.slots[slot];
        let epoch = s.epoch.load(Ordering::Relaxed) as u32;
        let mut discarded = 0;
        let mut taken = 0;
        let mut old = 0;
        self.retain(_lk, |e| {
            if e.slot as usize != slot {
                return true;
            }
            old += (e.epoch != epoch) as u64;
            let v = if e.epoch != epoch { Verdict::Discard } else { verdict(e) };
            match v {
                Verdict::Wait => true,
                Verdict::Apply => {
                    out.push(*e);
                    taken += 1;
                    false
                }
                Verdict::Discard => {
                    discarded += 1;
                    false
                }
            }
        });
        s.pending.fetch_sub((taken + discarded).min(s.pending.load(Ordering::Relaxed)), Ordering::Relaxed);
        s.discarded.fetch_add(discarded, Ordering::Relaxed);
        taken + discarded - old
    }

    /// Whether [`Self::take`] would take any of `slot`'s entries of its
    /// current epoch out: one `verdict` does not say to keep. (Entries of an
    /// old epoch are not counted: `take` drops them whatever the verdict.)
    pub fn any_to_take(
        &self,
        _lk: &QueueLocked,
        slot: usize,
        mut verdict: impl FnMut(&PendingDelete) -> Verdict,
    ) -> bool {
        let epoch = self.slots[slot].epoch.load(Ordering::Relaxed) as u32;
        let len = self.header.queue_len.load(Ordering::Relaxed) as usize;
        (0..len).any(|r| {
            // SAFETY: r is below len; the queue is ours under the lock.
            let e = unsafe { self.queue.add(r).read() };
            e.slot as usize == slot && e.epoch == epoch && verdict(&e) != Verdict::Wait
        })
    }

    /// Keeps the queue's entries for which `keep` says so, in order.
    fn retain(&self, _lk: &QueueLocked, mut keep: impl FnMut(&PendingDelete) -> bool) {
        let len = self.header.queue_len.load(Ordering::Relaxed) as usize;
        let mut w = 0;
        for r in 0..len {
            // SAFETY: r and w are below len; the queue is ours under the lock.
            unsafe {
                let e = self.queue.add(r).read();
                if keep(&e) {
                    self.queue.add(w).write(e);
                    w += 1;
                }
            }
        }
        self.header.queue_len.store(w as u64, Ordering::Relaxed);
    }

    /// Entries in the queue, over every binding.
    pub fn queued(&self) -> u64 {
        self.header.queue_len.load(Ordering::Relaxed)
    }

    /// Entries the queue has room for (as of now: other backends push too).
    pub fn room(&self) -> u64 {
        (self.queue_cap as u64).saturating_sub(self.queued())
    }

    /// The claimed slots: index, database and name.
    pub fn claimed(&self) -> Vec<(usize, u32, String)> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            if s.epoch.load(Ordering::Acquire) != 0 {
                out.push((i, s.db.load(Ordering::Relaxed) as u32, s.name()));
            }
        }
        out
    }
}

impl BoundSlot {
    fn name(&self) -> String {
        let n = (self.name_len.load(Ordering::Relaxed) as usize).min(BOUND_NAME_BYTES);
        let mut b = Vec::with_capacity(n);
        for k in 0..n {
            b.push((self.name[k / 8].load(Ordering::Relaxed) >> (8 * (k % 8))) as u8);
        }
        String::from_utf8_lossy(&b).into_owned()
    }

    fn is(&self, db: u32, name: &str) -> bool {
        self.db.load(Ordering::Relaxed) as u32 == db && self.name() == name
    }

    /// Records the bound table and column (as the catalog says).
    pub fn set_table(&self, table: u32, attnum: i16) {
        self.table.store(((attnum as u16 as u64) << 32) | table as u64, Ordering::Release);
    }

    /// The bound table and column, if recorded.
    pub fn table(&self) -> Option<(u32, i16)> {
        let t = self.table.load(Ordering::Acquire);
        (t != 0).then_some((t as u32, (t >> 32) as u16 as i16))
    }

    /// The role that owns the binding's filter (0: not recorded).
    pub fn owner(&self) -> u32 {
        self.owner.load(Ordering::Relaxed) as u32
    }

    /// Records the identity of the contents a fill made (not durable filters).
    pub fn set_built(&self, id: u64) {
        self.built.store(id, Ordering::Release);
    }

    /// The identity of the contents the last fill made (0: none recorded).
    pub fn built(&self) -> u64 {
        self.built.load(Ordering::Acquire)
    }

    /// Records that the catalog confirmed `id` as a committed fill's.
    pub fn set_ready(&self, id: u64) {
        self.ready.store(id, Ordering::Release);
    }

    /// The identity last confirmed as a committed fill's (0: none).
    pub fn ready(&self) -> u64 {
        self.ready.load(Ordering::Acquire)
    }

    /// The remover gate (see the module documentation).
    pub fn gate(&self) -> &AtomicU64 {
        &self.gate
    }
}

/// A remover's turn at a binding's gate: started by [`Removing::start`], ended
/// when dropped (also when unwinding).
pub struct Removing<'a>(&'a AtomicU64);

impl<'a> Removing<'a> {
    pub fn start(gate: &'a AtomicU64) -> Removing<'a> {
        gate.fetch_add(GATE_START, Ordering::SeqCst);
        Removing(gate)
    }
}

impl Drop for Removing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An insert's view of the gate: read before it counts copies
/// ([`InsertCheck::before`]) and again after ([`InsertCheck::held`]).
#[derive(Clone, Copy)]
pub struct InsertCheck(u64);

impl InsertCheck {
    pub fn before(gate: &AtomicU64) -> InsertCheck {
        InsertCheck(gate.load(Ordering::SeqCst))
    }

    /// Whether a remover was active at the first read: then every version gets
    /// a copy, whatever it counts.
    pub fn removing(&self) -> bool {
        self.0 & GATE_ACTIVE != 0
    }

    /// Whether no remover overlapped the count: the versions that found their
    /// pair saturated may go without a copy.
    ///
    /// The second read is a read-modify-write: it reads the latest value of
    /// the gate, and a remover whose start comes after it in the gate's order
    /// synchronizes with it, so the remover's count sees every copy this
    /// insert's thread added or saw before (a plain load would be enough under
    /// a single total order of sequentially consistent accesses, which loom
    /// does not model; the model fails with one).
    pub fn held(&self, gate: &AtomicU64) -> bool {
        !self.removing() && gate.fetch_add(0, Ordering::SeqCst) == self.0
    }
}

/// Which of the versions whose keys are `hashes` add a copy, given each key's
/// copies as `copies` counts them (for an insert): `true` for those that do.
/// Follows the gate protocol; `saturated` counts those that do not. `copies`
/// is called at most once per hash, in order, and only after the gate's
/// first read (so it may count them all at its first call).
pub fn versions_to_copy(
    gate: &AtomicU64,
    hashes: &[u64],
    mut copies: impl FnMut(u64) -> u64,
    saturated: &mut u64,
) -> Vec<bool> {
    let check = InsertCheck::before(gate);
    if check.removing() {
        return vec![true; hashes.len()];
    }
    let mut out: Vec<bool> = hashes.iter().map(|&h| copies(h) < COPY_CAP).collect();
    if out.iter().all(|&b| b) {
        return out;
    }
    if !check.held(gate) {
        out.iter_mut().for_each(|b| *b = true);
        return out;
    }
    *saturated += out.iter().filter(|&&b| !b).count() as u64;
    out
}

/// Whether a remover (inside [`Removing`]) may take a copy of a key that has
/// `copies` copies.
pub fn may_remove(copies: u64) -> bool {
    copies < COPY_CAP
}

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;
