//! Applying a bound filter's queued deletes once they are safe: the deleting
//! (sub)transaction committed and precedes the oldest transaction any
//! snapshot may still consider running, as VACUUM decides what it may remove
//! (`GetOldestNonRemovableTransactionId` of the bound table, which counts
//! replication slots and standbys' feedback). A delete whose transaction
//! aborted is dropped: the row is still there.
//!
//! The removal is logged after a `HORIZON` record naming the newest deleting
//! transaction of the batch, so that a hot standby first resolves the
//! conflict with its own queries that may still see those rows (see
//! `named::replay`), then replays the deletes.

use std::sync::atomic::Ordering;

use pgrx::pg_sys;

use super::binding::Binding;
use super::shared::with_lock;
use crate::filter::Chain;
use crate::region::binding::{may_remove, BoundSlot, PendingDelete, Removing, Verdict};
use crate::region::wal::{QueueCounts, Record, MANY_MAX};
use crate::region::{RegionTables, Tally};
use crate::sql::batch::batch_record;
use crate::sql::named::log::log;

/// Deletes are applied at most this often per binding by writers' statements
/// (in microseconds), so that a stream of small statements does not scan the
/// queue each time.
const APPLY_EVERY_US: i64 = 100_000;

/// What to do with a queued delete, given the horizon and the oldest
/// transaction whose status is still kept.
fn verdict(
    e: &PendingDelete,
    horizon: pg_sys::TransactionId,
    next: u64,
    oldest_clog: pg_sys::TransactionId,
) -> Verdict {
    // An entry from more than 2^31 transactions ago cannot be told from a
    // newer one by its 32-bit ID: its key stays (a false positive).
    if next.saturating_sub(e.fxid) >= 1 << 31 {
        return Verdict::Discard;
    }
    let xid = pg_sys::TransactionId::from(e.fxid as u32);
    // SAFETY: status lookups of a normal transaction ID of this cluster,
    // newer than the oldest one whose status is kept (checked first).
    unsafe {
        if pg_sys::TransactionIdPrecedes(xid, oldest_clog) {
            return Verdict::Discard;
        }
        if pg_sys::TransactionIdIsCurrentTransactionId(xid) || pg_sys::TransactionIdIsInProgress(xid) {
            return Verdict::Wait;
        }
        if pg_sys::TransactionIdDidCommit(xid) {
            if pg_sys::TransactionIdPrecedes(xid, horizon) {
                Verdict::Apply
            } else {
                Verdict::Wait
            }
        } else {
            Verdict::Discard
        }
    }
}

/// Applies binding `b`'s safe deletes if there are any and (unless `now`) it
/// was not done in the last tenth of a second. `rel` is the bound table, for
/// the horizon; without it (a statement on one of its partitions), the
/// horizon of shared catalogs is used, which no other horizon precedes.
pub(super) fn maybe_apply(b: &mut Binding, rel: Option<pg_sys::Relation>, now: bool) -> u64 {
    // SAFETY: plain reads of this process's state.
    if unsafe { pg_sys::RecoveryInProgress() } || !b.refresh() {
        return 0;
    }
    let a = super::shared::area();
    let s = a.slot(b.slot);
    if s.pending.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    // SAFETY: reads the clock.
    let t = unsafe { pg_sys::GetCurrentTimestamp() };
    let last = s.last_apply.load(Ordering::Relaxed) as i64;
    if !now && t - last < APPLY_EVERY_US && t >= last {
        return 0;
    }
    s.last_apply.store(t as u64, Ordering::Relaxed);
    // SAFETY: horizon and counters of this cluster; rel is open.
    let (horizon, next, oldest_clog) = unsafe {
        (
            pg_sys::GetOldestNonRemovableTransactionId(rel.unwrap_or(std::ptr::null_mut())),
            pg_sys::ReadNextFullTransactionId().value,
            (*pg_sys::ShmemVariableCache).oldestClogXid,
        )
    };
    apply_ready(b, |e| verdict(e, horizon, next, oldest_clog))
}

/// Takes binding `b`'s deletes that `verdict_of` says are ready or to drop
/// out of the queue, and removes a copy of each ready one's key (where the
/// pair is not saturated), logging the batch's horizon first and the
/// removals after. For a durable filter the queue is read inside the
/// writer's operation that logs the change of its account of queued deletes
/// (`binding::queue_deletes`).
fn apply_ready(b: &mut Binding, verdict_of: impl Fn(&PendingDelete) -> Verdict) -> u64 {
    let slot = b.slot;
    let s = super::shared::area().slot(slot);
    let durable = b.target.identity().0;
    let mut ready = Vec::new();
    if !durable {
        with_lock(|a, lk| a.take(lk, slot, &verdict_of, &mut ready));
        if ready.is_empty() {
            return 0;
        }
    } else if !with_lock(|a, lk| {
        a.any_to_take(lk, slot, &verdict_of) || {
            // Nothing of this binding's to take: no writer's operation (nor
            // its checks); entries of an old epoch go.
            a.take(lk, slot, |_| Verdict::Wait, &mut Vec::new());
            false
        }
    }) {
        return 0;
    }
    let db = crate::sql::named::call::current_db();
    let target = &b.target;
    let done = target.write(c"applying deletes to a bound durable cuckoo filter", |chain, gen| {
        // What leaves the queue is counted as taken out under the same lock
        // (so the view never sees it neither queued nor taken out), the
        // refused ones once known; one record says both.
        let settled = if durable {
            with_lock(|a, lk| {
                let n = a.take(lk, slot, &verdict_of, &mut ready);
                target.add_queue_counts(&QueueCounts { settled: n, ..QueueCounts::default() });
                n
            })
        } else {
            0
        };
        let (removed, refused) = if ready.is_empty() { (0, 0) } else { remove(chain, gen, s, db, &ready) };
        if durable && settled > 0 {
            target.add_queue_counts(&QueueCounts { refused, ..QueueCounts::default() });
            log(&Record::Queue { gen, add: QueueCounts { settled, refused, ..QueueCounts::default() } });
        }
        (removed, refused)
    });
    match done {
        Some((removed, refused)) => {
            b.target.count(&Tally { deleted: removed, ..Tally::default() });
            s.applied.fetch_add(removed, Ordering::Relaxed);
            s.refused.fetch_add(refused, Ordering::Relaxed);
            removed
        }
        None => {
            // The filter was replaced or dropped meanwhile: these deletes are
            // of versions the old one held; their keys stay where they are
            // (a durable filter's stay queued, and are dropped as of an old
            // epoch).
            s.refused.fetch_add(ready.len() as u64, Ordering::Relaxed);
            0
        }
    }
}

/// Removes a copy of each ready delete's key (where the pair is not
/// saturated), logging the batch's horizon first and the removals after;
/// returns the copies removed and the deletes refused.
fn remove(
    chain: &Chain<'_, RegionTables<'_>>,
    gen: u64,
    s: &BoundSlot,
    db: u32,
    ready: &[PendingDelete],
) -> (u64, u64) {
    let newest = ready.iter().map(|e| e.fxid).max().map(|f| f as u32).unwrap_or(0);
    let _turn = Removing::start(s.gate());
    if gen != 0 {
        log(&Record::Horizon { gen, db, xid: newest });
    }
    let mut removed = Vec::new();
    let mut refused = 0u64;
    for e in ready {
        if may_remove(chain.copies(e.hash)) && chain.delete(e.hash) == crate::filter::Deleted::Removed {
            removed.push(e.hash);
        } else {
            refused += 1;
        }
    }
    if gen != 0 {
        for chunk in removed.chunks(MANY_MAX) {
            log(&batch_record(gen, chunk, false));
        }
    }
    (removed.len() as u64, refused)
}
