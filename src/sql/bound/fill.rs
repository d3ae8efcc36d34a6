//! Filling a bound filter from its table (`cf_bind`, `cf_rebuild`): every row
//! version that some snapshot may still see gives its key a copy (up to the
//! cap, see `region::binding`), and a version already deleted by a
//! transaction that had committed when the fill began also queues its
//! delete, as its deleting transaction's trigger did (into the queue the
//! fill replaces).
//!
//! The table is read with `SnapshotAny`, each tuple judged as VACUUM judges
//! it (`HeapTupleSatisfiesVacuum` against the horizon taken before the scan):
//! dead tuples are left out, every other one is in.
//!
//! # Writers go on (`cf_rebuild`)
//!
//! `cf_bind` keeps writers out for the fill (`SHARE ROW EXCLUSIVE`);
//! `cf_rebuild` only keeps out DDL and other fills (`SHARE UPDATE
//! EXCLUSIVE`), as `CREATE INDEX CONCURRENTLY` does. Its filter is made
//! again first (probes answer "maybe" until the fill commits), then a
//! snapshot `S0` is taken, then the binding's slot is released and claimed
//! again (`T0`: the queue of the old contents goes), then the table is read.
//! Writers meanwhile:
//!
//! - A version's key is added after its row is written (its `AFTER`
//!   trigger's flush). A version the scan did not find was written after the
//!   scan read its page, so after `T0`: its key goes to the new filter (a
//!   writer whose filter was replaced finds it again; its `AFTER` trigger
//!   fires after its write, so after `T0`). A version found by both gets two
//!   copies: a false positive once it is deleted, never a false negative.
//! - Before that, the writing statement's own queries may see the row (its
//!   `BEFORE` trigger set its key aside, see `binding`). A writer sees `T0`
//!   as its binding's slot claimed again (`Binding::refresh`, also before
//!   each probe): keys its `BEFORE` trigger added to the old filter are added
//!   to the new one again, deletes it buffered and had not queued go to the
//!   new queue, and the deletes of unmatched copies in the old filter are
//!   dropped. A `BEFORE` trigger that found the filter missing (while it is
//!   made again) sets its key aside all the same (`binding::Orphans`), for
//!   the filter once it is back.
//! - A delete goes to the new queue from a transaction still running at
//!   `T0`, so one that had not committed when `S0` was taken; the scan queues
//!   a delete only for a version whose deleting transaction had committed
//!   when `S0` was taken, whose own queued delete went with the old queue. So
//!   no version's delete is queued twice. A transaction that committed
//!   between `S0` and `T0` loses its deletes: false positives.
//! - `S0` stays registered until the fill's copies are in: the horizon then
//!   precedes every transaction that can queue into the new queue, so none of
//!   their deletes is applied (and none races the fill's copies) before the
//!   fill is done, and no version such a transaction deleted is dead for the
//!   scan.
//!
//! A version the scan leaves out as dead may still be seen by a hot
//! standby's query (without `hot_standby_feedback`): the fill logs the
//! horizon first, so that the standby resolves that conflict as it does for
//! a pruned page before its catalog can name the new contents.

use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::binding::{find_column, relation_name, target_of};
use super::shared::with_lock;
use crate::region::binding::COPY_CAP;
use crate::region::wal::MANY_MAX;
use crate::region::Tally;
use crate::sql::keys::KeyHasher;
use crate::sql::named::errors::fail;

/// The full transaction ID of a 32-bit one no older than 2^31 transactions.
fn full_xid(xid: pg_sys::TransactionId) -> u64 {
    // SAFETY: reads the next transaction ID.
    let next = unsafe { pg_sys::ReadNextFullTransactionId().value };
    let x = xid.into_inner() as u64;
    let (epoch, lo) = (next >> 32, next & 0xFFFF_FFFF);
    if x > lo && epoch > 0 {
        ((epoch - 1) << 32) | x
    } else {
        (epoch << 32) | x
    }
}

/// A new identity for the contents a fill makes in a filter that is not
/// durable: random, never 0, and below 2^63 (stored as a bigint).
fn new_identity() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: fills the 8 bytes given.
    let ok = unsafe { pg_sys::pg_strong_random(b.as_mut_ptr().cast(), b.len()) };
    let mut v = u64::from_le_bytes(b);
    if !ok {
        // SAFETY: reads the clock and this process's ID.
        v = unsafe { (pg_sys::GetCurrentTimestamp() as u64).rotate_left(17) ^ pg_sys::MyProcPid as u64 };
    }
    (v >> 1).max(1)
}

/// Reads the table `relid` for binding `name` (bound to column `col`) and
/// fills its filter; returns the row versions whose keys it holds now. What
/// identifies the contents it made (a durable filter's generation, else a new
/// random identity kept in the binding's slot) goes into the catalog row in
/// the same transaction: a probe trusts the filter only once the catalog's
/// committed row names it (`binding::filter_ready`).
pub(super) fn fill(name: &str, relid: pg_sys::Oid, col: &str) -> i64 {
    super::binding::forget(name);
    let target = target_of(name);
    // S0, then T0 (see the module documentation).
    let s0 = Snapshot::take();
    // A fresh slot: deletes queued for the contents this fill replaces are
    // dropped with the old epoch.
    let db = crate::sql::named::call::current_db();
    with_lock(|a, lk| {
        if let Some(i) = a.find(db, name) {
            a.release(lk, i);
        }
    });
    let (slot, epoch) = super::binding::slot_of(name, target.owner());
    let (versions, copies, deletes) = read_leaves(name, relid, col, &target, &s0);
    let saturated = versions as u64 - copies.len() as u64;
    for chunk in copies.chunks(MANY_MAX * 16) {
        pgrx::check_for_interrupts!();
        let done = target.write(c"filling a bound durable cuckoo filter", |chain, gen| {
            let mut tally = Tally::default();
            let refused = super::binding::insert_logged(chain, gen, chunk, &mut tally);
            (refused, tally)
        });
        match done {
            Some((refused, tally)) => {
                target.count(&tally);
                if refused > 0 {
                    fail(
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
                        format!("cuckoo filter \"{name}\" is full: {refused} keys of its table could not be added"),
                        Some("Raise cuckoo.shared_memory or the caps on filter bytes, or bind with a higher false-positive rate."),
                    );
                }
            }
            None => fail(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("cuckoo filter \"{name}\" was dropped or replaced while it was filled"),
                None,
            ),
        }
    }
    super::shared::area().slot(slot).set_table(relid.to_u32(), super::catalog::column_number(relid, col));
    count_read(&target, slot, epoch, saturated, &deletes);
    s0.release();
    record_identity(name, slot, &target);
    versions
}

/// The snapshot a fill takes before it claims its slot (`S0`, see the module
/// documentation), registered until released: the scan queues the deletes of
/// the transactions that had committed then, and this backend's horizon
/// stays at or before them all.
struct Snapshot(pg_sys::Snapshot);

impl Snapshot {
    /// Unregisters it (if the fill fails first, the resource owner does).
    fn release(self) {
        // SAFETY: registered by take, once.
        unsafe { pg_sys::UnregisterSnapshot(self.0) };
    }

    fn take() -> Snapshot {
        // SAFETY: a new MVCC snapshot, registered with the current resource
        // owner (released with it if the fill fails).
        Snapshot(unsafe { pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot()) })
    }

    /// Whether transaction `xid` (maybe a subtransaction) had committed when
    /// the snapshot was taken.
    fn committed(&self, xid: pg_sys::TransactionId) -> bool {
        // SAFETY: status lookups of a transaction ID read from a tuple of a
        // table this backend holds a lock on; the snapshot is registered.
        unsafe { !pg_sys::XidInMVCCSnapshot(xid, self.0) && pg_sys::TransactionIdDidCommit(xid) }
    }
}

/// Reads the leaves of `relid` (`leaves_of`) for binding `name`: the
/// versions read, the copies to add (`capped`) and the deletes to queue.
fn read_leaves(
    name: &str,
    relid: pg_sys::Oid,
    col: &str,
    target: &crate::sql::named::call::BoundTarget,
    s0: &Snapshot,
) -> (i64, Vec<u64>, Vec<(u64, u64)>) {
    let mut keys: Vec<u64> = Vec::new();
    let mut deletes: Vec<(u64, u64)> = Vec::new();
    let mut newest_dead = None;
    for leaf in leaves_of(relid) {
        let h = scan_versions(name, leaf, col, target, s0, &mut keys, &mut deletes);
        // The newest, in the circular order of transaction IDs.
        newest_dead = match newest_dead {
            // SAFETY: a comparison of two transaction IDs.
            Some(n) if !unsafe { pg_sys::TransactionIdFollows(h, n) } => Some(n),
            _ => Some(h),
        };
    }
    if let Some(xid) = newest_dead {
        log_horizon(target, xid);
    }
    let versions = keys.len() as i64;
    (versions, capped(keys), deletes)
}

/// Before the fill's copies go in: a hot standby's queries whose snapshots
/// may see versions the scan left out as dead (deleted by `xid` or before)
/// are resolved first, as for a pruned page (a durable filter; nothing is
/// logged for another).
fn log_horizon(target: &crate::sql::named::call::BoundTarget, xid: pg_sys::TransactionId) {
    let (durable, gen) = target.identity();
    if durable && xid != pg_sys::InvalidTransactionId {
        crate::sql::named::log::log(&crate::region::wal::Record::Horizon {
            gen,
            db: crate::sql::named::call::current_db(),
            xid: xid.into_inner(),
        });
    }
}

/// Records in binding slot `slot` (of `epoch`) what reading its table left
/// besides the copies added: the versions left without a copy (their key
/// saturated), and the deletes of versions already deleted, queued.
fn count_read(
    target: &crate::sql::named::call::BoundTarget,
    slot: usize,
    epoch: u32,
    saturated: u64,
    deletes: &[(u64, u64)],
) {
    super::shared::area().slot(slot).saturated.fetch_add(saturated, Ordering::Relaxed);
    for chunk in deletes.chunks(MANY_MAX) {
        super::binding::queue_deletes(target, slot, epoch, chunk);
    }
}

/// A copy per version, up to the cap per key, sorted.
fn capped(mut keys: Vec<u64>) -> Vec<u64> {
    keys.sort_unstable();
    let mut copies: Vec<u64> = crate::filter::vec_with_capacity(keys.len());
    let mut i = 0;
    while i < keys.len() {
        let mut j = i;
        while j < keys.len() && keys[j] == keys[i] {
            j += 1;
        }
        for _ in 0..(j - i).min(COPY_CAP as usize) {
            copies.push(keys[i]);
        }
        i = j;
    }
    copies
}

/// `ATTACH PARTITION` of table `part` (maybe itself partitioned) under the
/// partitioned table that binding `name` follows (its event trigger, at the
/// end of the command): the rows of its leaves, which no trigger of the
/// binding saw, get their keys, and their deleted versions still visible
/// their deletes, as a statement writing them would (the keys are logged
/// and added before the command's transaction can commit; its lock on
/// `part` keeps writers out meanwhile). Returns the versions read; 0 when
/// the filter is missing (`cf_rebuild` then fills every partition).
pub(super) fn fill_attached(name: &str, part: pg_sys::Oid, col: &str) -> i64 {
    let Some(target) = crate::sql::named::call::BoundTarget::find(name) else { return 0 };
    let s0 = Snapshot::take();
    let (versions, copies, deletes) = read_leaves(name, part, col, &target, &s0);
    super::binding::with_binding(name, col, |b| {
        for chunk in copies.chunks(MANY_MAX) {
            pgrx::check_for_interrupts!();
            super::binding::add_versions(b, chunk);
        }
        count_read(&b.target, b.slot, b.epoch, versions as u64 - copies.len() as u64, &deletes);
    });
    s0.release();
    versions
}

/// The tables whose rows a binding to `relid` holds: `relid`, or the leaf
/// partitions of a partitioned table (at every level).
pub(super) fn leaves_of(relid: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: a syscache lookup.
    if unsafe { pg_sys::get_rel_relkind(relid) } != pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char {
        return vec![relid];
    }
    super::catalog::with_safe_path(|| {
        pgrx::spi::Spi::connect(|c| {
            let rows = c.select(
                "SELECT relid FROM pg_catalog.pg_partition_tree($1) WHERE isleaf ORDER BY relid",
                None,
                &[relid.into()],
            )?;
            let mut out = Vec::new();
            for r in rows {
                if let Some(o) = r.get::<pg_sys::Oid>(1)? {
                    out.push(o);
                }
            }
            Ok::<_, pgrx::spi::Error>(out)
        })
    })
    .unwrap_or_else(|e| {
        fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not list partitions: {e}"), None)
    })
}

/// Reads table `relid` (a heap table) for binding `name`: the key of every
/// version some snapshot may still see goes to `keys`, and the delete of
/// each such version deleted by a transaction committed in `s0` to
/// `deletes`. Returns the newest transaction that may have deleted a
/// version left out as dead (the one before the horizon).
fn scan_versions(
    name: &str,
    relid: pg_sys::Oid,
    col: &str,
    target: &crate::sql::named::call::BoundTarget,
    s0: &Snapshot,
    keys: &mut Vec<u64>,
    deletes: &mut Vec<(u64, u64)>,
) -> pg_sys::TransactionId {
    // SAFETY: the relation is opened and closed here; tuples are read under
    // their buffer's share lock for the visibility test, as index builds do.
    unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        if (*(*rel).rd_rel).relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char {
            fail(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("cannot bind a cuckoo filter to \"{}\": only heap tables (and partitioned tables whose partitions all are) can be bound", relation_name(rel)),
                None,
            );
        }
        if (*rel).rd_tableam != pg_sys::GetHeapamTableAmRoutine() {
            fail(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("cannot bind a cuckoo filter to \"{}\": only heap tables can be bound", relation_name(rel)),
                None,
            );
        }
        let Some((attnum, typid, collation)) = find_column(rel, col) else {
            fail(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{col}\" of relation \"{}\" does not exist", relation_name(rel)),
                None,
            )
        };
        // DDL and other fills are kept out by the caller's lock (cf_bind,
        // cf_rebuild, ATTACH PARTITION); writers may go on.
        if !pg_sys::CheckRelationLockedByMe(rel, pg_sys::ShareUpdateExclusiveLock as i32, true) {
            fail(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "cannot fill cuckoo filter \"{name}\" without a SHARE UPDATE EXCLUSIVE lock on \"{}\"",
                    relation_name(rel)
                ),
                Some("Use cf_bind() or cf_rebuild(), which take it."),
            );
        }
        // An enum column's keys are its labels: a label renamed by a
        // transaction still running would be hashed as it was, and its
        // event trigger would not see this binding's new contents. The
        // type's share lock waits for such a rename (which holds an
        // exclusive one) and keeps the next out until this one commits; the
        // labels are then read afresh.
        let base = pg_sys::getBaseType(typid);
        if pg_sys::get_typtype(base) == pg_sys::TYPTYPE_ENUM as std::ffi::c_char {
            pg_sys::LockDatabaseObject(pg_sys::TypeRelationId, base, 0, pg_sys::ShareLock as i32);
            pg_sys::AcceptInvalidationMessages();
        }
        let mcxt = pg_sys::CurrentMemoryContext;
        let mut hasher: KeyHasher = std::mem::zeroed();
        hasher.resolve_type(typid, collation, mcxt);
        hasher.prepare(target.key, mcxt);
        let horizon = pg_sys::GetOldestNonRemovableTransactionId(rel);
        let slot_ = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &pg_sys::TTSOpsHeapTuple);
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN
            | pg_sys::ScanOptions::SO_ALLOW_STRAT
            | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        let scan = pg_sys::heap_beginscan(
            rel,
            &raw mut pg_sys::SnapshotAnyData,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            flags,
        );
        let hscan = scan as *mut pg_sys::HeapScanDescData;
        let mut n = 0usize;
        loop {
            let tup = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tup.is_null() {
                break;
            }
            n += 1;
            if n.is_multiple_of(4096) {
                pgrx::check_for_interrupts!();
            }
            let buf = (*hscan).rs_cbuf;
            pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_SHARE as i32);
            let state = pg_sys::HeapTupleSatisfiesVacuum(tup, horizon, buf);
            let deleter = match state {
                pg_sys::HTSV_Result::HEAPTUPLE_RECENTLY_DEAD | pg_sys::HTSV_Result::HEAPTUPLE_DELETE_IN_PROGRESS => {
                    let h = (*tup).t_data;
                    let xmax = if (*h).t_infomask as u32 & pg_sys::HEAP_XMAX_IS_MULTI != 0 {
                        pg_sys::HeapTupleGetUpdateXid(h)
                    } else {
                        (*h).t_choice.t_heap.t_xmax
                    };
                    Some(xmax)
                }
                _ => None,
            };
            pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_UNLOCK as i32);
            if state == pg_sys::HTSV_Result::HEAPTUPLE_DEAD {
                continue;
            }
            pg_sys::ExecStoreHeapTuple(tup, slot_, false);
            pg_sys::slot_getsomeattrs_int(slot_, attnum as i32);
            let at = attnum as usize - 1;
            if *(*slot_).tts_isnull.add(at) {
                pg_sys::ExecClearTuple(slot_);
                continue;
            }
            let d = *(*slot_).tts_values.add(at);
            if let Some(h) = hasher.hash_datum_for(d, target.seed) {
                crate::filter::push(keys, h);
                if let Some(x) = deleter {
                    if x != pg_sys::InvalidTransactionId && s0.committed(x) {
                        crate::filter::push(deletes, (h, full_xid(x)));
                    }
                }
            }
            pg_sys::ExecClearTuple(slot_);
        }
        pg_sys::heap_endscan(scan);
        pg_sys::ExecDropSingleTupleTableSlot(slot_);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as i32);
        // The transaction before the horizon (normal IDs wrap from the
        // first, 3, to the last).
        match horizon.into_inner() {
            0..=2 => pg_sys::InvalidTransactionId,
            3 => pg_sys::TransactionId::from(u32::MAX),
            h => pg_sys::TransactionId::from(h - 1),
        }
    }
}

/// Drops binding `name`'s filter and, with `make` (capacity, false-positive
/// rate, durable, key type), makes it again, empty, through `cf_drop` and
/// `cf_create` (which refuse a bound name but during this call), as the
/// current role. Frees the binding's slot first: deletes queued for the old
/// contents go, and probes answer "maybe" until a fill or a `TRUNCATE`
/// records the new contents in the catalog. The caller registered the
/// transaction callbacks (which clear the flag if this fails).
pub(super) fn remake(name: &str, make: Option<(i64, f64, bool, pg_sys::Oid)>) {
    super::binding::forget(name);
    let db = crate::sql::named::call::current_db();
    with_lock(|a, lk| {
        if let Some(i) = a.find(db, name) {
            a.release(lk, i);
        }
    });
    // SAFETY: backend-local.
    unsafe { super::binding::REMAKING = Some(name.to_string()) };
    let nsp = super::catalog::ext_schema();
    let done = super::catalog::with_safe_path(|| {
        pgrx::spi::Spi::run_with_args(&format!("SELECT {nsp}.cf_drop($1)"), &[name.into()]).and_then(|()| match make {
            Some((cap, fpp, durable, typ)) => pgrx::spi::Spi::run_with_args(
                &format!("SELECT {nsp}.cf_create($1, $2, $3, $4, $5::pg_catalog.regtype)"),
                &[name.into(), cap.into(), fpp.into(), durable.into(), typ.into()],
            ),
            None => Ok(()),
        })
    });
    // SAFETY: backend-local.
    unsafe { super::binding::REMAKING = None };
    done.unwrap_or_else(|e| {
        fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not make the filter again: {e}"), None)
    });
}

/// What identifies the contents just made for binding `name` in `slot`
/// (`durable_identity` of `target`'s generation if durable, else a new
/// identity kept in the slot),
/// recorded in the catalog row in this transaction: probes trust them once it
/// commits.
fn record_identity(name: &str, slot: usize, target: &crate::sql::named::call::BoundTarget) -> u64 {
    let id = match target.identity() {
        (true, gen) => super::binding::durable_identity(gen),
        (false, _) => {
            let id = new_identity();
            super::shared::area().slot(slot).set_built(id);
            id
        }
    };
    let q = format!("UPDATE {} SET built = $2 WHERE name = $1", super::catalog::bindings_table());
    super::catalog::as_catalog_owner(|| pgrx::spi::Spi::run_with_args(&q, &[name.into(), (id as i64).into()]))
        .unwrap_or_else(|e| {
            fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not update the binding: {e}"), None)
        });
    id
}

/// `TRUNCATE` of bound table `relid` (its statement trigger): each of its
/// bindings whose filter is there gets an empty one in its place, made as
/// the filter's owner with its parameters, and recorded in the catalog in
/// this transaction. Committed, probes trust the empty filter (the table is
/// empty for every snapshot then: `TRUNCATE` is not MVCC-safe); rolled back,
/// the catalog still names the old contents, which are gone, so every key is
/// a maybe until `cf_rebuild`. No snapshot can probe meanwhile: `TRUNCATE`
/// holds the table's `ACCESS EXCLUSIVE` lock, which every query over it
/// waits for.
pub(super) fn truncated(relid: pg_sys::Oid) {
    for name in super::catalog::bindings_of(relid) {
        let Some(old) = crate::sql::named::call::BoundTarget::find(&name) else { continue };
        let (fpp, durable) = old.params();
        let owner = pg_sys::Oid::from(old.owner());
        let Some(col) = super::catalog::row(&name).map(|r| r.col) else { continue };
        let attnum = super::catalog::column_number(relid, &col);
        // SAFETY: a syscache lookup of a column of the locked table.
        let typ = unsafe { pg_sys::get_atttype(relid, attnum) };
        super::catalog::as_role(owner, || remake(&name, Some((1024, fpp, durable, typ))));
        let target = target_of(&name);
        let (slot, _) = super::binding::slot_of(&name, target.owner());
        super::shared::area().slot(slot).set_table(relid.to_u32(), attnum);
        record_identity(&name, slot, &target);
    }
}
