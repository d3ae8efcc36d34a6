//! A binding as one backend uses it: its filter (found by name), its shared
//! slot, the bound column in each relation that fires its triggers (with a
//! hasher for it), and the keys and deletes of the statement running; and
//! how a statement's keys go into the filter (a copy per version, up to the
//! cap, by the remover gate's rules: `region::binding`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::shared::{area, with_lock};
use crate::filter::{vec_filled, Full};
use crate::region::binding::{versions_to_copy, SlotRefused};
use crate::region::wal::{QueueCounts, Record, MANY_MAX};
use crate::region::Tally;
use crate::sql::batch::{batch_record, log_refused};
use crate::sql::keys::{key_type_of, KeyHasher};
use crate::sql::named::call::BoundTarget;
use crate::sql::named::errors::fail;
use crate::sql::named::log::log;

/// How one relation's rows give the key of a binding: the bound column's
/// number and type in that relation (a partition's may differ from its
/// parent's), and the hasher for it.
pub(super) struct Column {
    relid: pg_sys::Oid,
    /// The tuple descriptor the column was found in: a new one (after DDL)
    /// makes the trigger look the column up again.
    tupdesc: pg_sys::TupleDesc,
    attnum: i16,
    typid: pg_sys::Oid,
    hasher: Box<KeyHasher>,
    /// `REL_CHANGES` when the relation was last checked to be the bound
    /// table or one of its partitions.
    checked: u64,
}

/// How many executors (or utility statements) are running or finishing in
/// this backend, one inside another (`trigger`'s hooks count them): a
/// statement's `BEFORE` row triggers fire while it runs, its `AFTER` ones
/// while it finishes, both at one depth, and a statement a trigger runs is
/// deeper. Keys the `BEFORE` trigger sets aside carry it, so that a
/// statement's end settles its own keys, never an outer statement's. An
/// error skips the decrements: a subtransaction's abort restores the depth
/// it started at, a transaction's end zero.
static mut DEPTH: u32 = 0;
/// The depth each running subtransaction started at.
static mut SUB_DEPTHS: Vec<(pg_sys::SubTransactionId, u32)> = Vec::new();

/// The current executor depth (see `DEPTH`).
pub(super) fn depth() -> u32 {
    // SAFETY: backend-local.
    unsafe { DEPTH }
}

/// An executor or utility statement starts.
pub(super) fn enter() {
    // SAFETY: backend-local.
    unsafe { DEPTH += 1 };
}

/// An executor or utility statement ends.
pub(super) fn leave() {
    // SAFETY: backend-local.
    unsafe { DEPTH = DEPTH.saturating_sub(1) };
}

/// The transaction ended.
pub(super) fn reset_depth() {
    // SAFETY: backend-local.
    unsafe {
        DEPTH = 0;
        (*std::ptr::addr_of_mut!(SUB_DEPTHS)).clear();
    }
}

/// Subtransaction `my` started.
pub(super) fn sub_started(my: pg_sys::SubTransactionId) {
    // SAFETY: backend-local.
    unsafe { (*std::ptr::addr_of_mut!(SUB_DEPTHS)).push((my, DEPTH)) };
}

/// Subtransaction `my` ended (`aborted`: the depth it started at again).
pub(super) fn sub_ended(my: pg_sys::SubTransactionId, aborted: bool) {
    // SAFETY: backend-local.
    unsafe {
        let subs = &mut *std::ptr::addr_of_mut!(SUB_DEPTHS);
        if let Some(i) = subs.iter().rposition(|&(s, _)| s == my) {
            if aborted {
                DEPTH = subs[i].1;
            }
            subs.truncate(i);
        }
    }
}

/// Counts the relation cache invalidations this backend received: a
/// partition detached (or attached elsewhere) keeps its descriptor, so a
/// column found before must be checked again against the catalog.
static mut REL_CHANGES: u64 = 0;

unsafe extern "C-unwind" fn rel_changed(_arg: pg_sys::Datum, _relid: pg_sys::Oid) {
    // SAFETY: backend-local counter.
    unsafe { REL_CHANGES = REL_CHANGES.wrapping_add(1) };
}

/// From `_PG_init`: counts relation cache invalidations (`REL_CHANGES`).
pub(super) fn init() {
    // SAFETY: registers a callback for the process's life, once, from
    // _PG_init.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(rel_changed), pg_sys::Datum::from(0usize)) };
}

/// Whether attribute `attnum` of `td` is still column `col` of type `typid`.
///
/// # Safety
/// `td` is a valid tuple descriptor.
unsafe fn still_there(td: pg_sys::TupleDesc, attnum: i16, col: &str, typid: pg_sys::Oid) -> bool {
    // SAFETY: as documented; attnum was found in this descriptor before.
    unsafe {
        if attnum < 1 || attnum as i32 > (*td).natts {
            return false;
        }
        let a = &(*td).attrs.as_slice((*td).natts as usize)[attnum as usize - 1];
        !a.attisdropped && a.atttypid == typid && CStr::from_ptr(a.attname.data.as_ptr()).to_bytes() == col.as_bytes()
    }
}

/// A binding as this backend uses it: its filter, its shared slot, and the
/// keys and deletes of the statement running.
pub(super) struct Binding {
    pub name: String,
    col: String,
    pub target: BoundTarget,
    pub slot: usize,
    pub epoch: u32,
    columns: Vec<Column>,
    /// The name of the binding's row trigger (`cf_bound_triggers` makes it):
    /// only that trigger may write the binding (another one naming it, on
    /// the same table, would queue each delete twice).
    pub row_trigger: String,
    /// The name of the binding's `BEFORE` row trigger.
    pub early_trigger: String,
    pub inserts: Vec<u64>,
    /// The subtransaction that buffered each of `inserts` (its keys go when
    /// it aborts: its rows never existed for anyone; they pass to its
    /// parent when it commits).
    pub insert_subs: Vec<pg_sys::SubTransactionId>,
    pub deletes: Vec<(u64, u64)>,
    /// New versions' keys the `BEFORE` trigger buffered, in order, that no
    /// `AFTER` trigger has matched yet. They go to the filter only when a
    /// probe may look before the `AFTER` triggers fire (`flush_early`): a
    /// key of a version never written (a row skipped, an `INSERT ... ON
    /// CONFLICT` that met its conflict, a key a later `BEFORE` trigger
    /// changed) then costs nothing. The `AFTER` trigger of the same version
    /// finds its key here (a statement's `AFTER` row triggers fire in the
    /// order its rows were written, so it is mostly the first): added
    /// already, it adds no second copy; else it buffers it as usual.
    pub early: VecDeque<Early>,
    /// Keys the `BEFORE` trigger added to the filter that no `AFTER` trigger
    /// took (their statement ended, or their subtransaction aborted): their
    /// copies are queued for deletion at commit (`unmatched_deletes`).
    /// Matching is only a saving: a version that finds no match adds its
    /// own copy, and only a copy that no version took is deleted.
    pub unmatched: Vec<u64>,
    /// Whether the bound table is partitioned (its rows are written through
    /// its partitions' triggers).
    pub partitioned: bool,
}

/// A key the `BEFORE` trigger buffered: its hash, the subtransaction and
/// the executor depth (`trigger::depth`) that buffered it, and whether it
/// was added to the filter.
#[derive(Clone, Copy)]
pub(super) struct Early {
    hash: u64,
    sub: pg_sys::SubTransactionId,
    depth: u32,
    added: bool,
}

/// How far from either end of `Binding::early` an `AFTER` trigger looks for
/// its key (rows skipped before it; a statement run by a trigger).
const EARLY_LOOK: usize = 16;

/// The names `cf_bound_triggers` gives binding `name`'s row triggers:
/// `cuckoo_` and the first 16 hex digits of the name's MD5, then `_row` (the
/// `AFTER` one); `zz_`, the same, then `_new` (the `BEFORE` one).
fn row_trigger_names(name: &str) -> (String, String) {
    let c = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: md5(text) of a fresh text datum; its result is a text.
    unsafe {
        let t = pg_sys::cstring_to_text(c.as_ptr());
        let d = pg_sys::OidFunctionCall1Coll(
            pg_sys::Oid::from(pg_sys::F_MD5_TEXT),
            pg_sys::InvalidOid,
            pg_sys::Datum::from(t),
        );
        let hex = pg_sys::text_to_cstring(d.cast_mut_ptr());
        let s = CStr::from_ptr(hex).to_string_lossy().into_owned();
        pg_sys::pfree(hex.cast());
        let hex = &s[..16.min(s.len())];
        (format!("cuckoo_{hex}_row"), format!("zz_cuckoo_{hex}_new"))
    }
}

thread_local! {
    pub(super) static BINDINGS: RefCell<Vec<Binding>> = const { RefCell::new(Vec::new()) };
}

/// The binding whose filter `fill::remake` is dropping or making again (the
/// only change by name a bound filter allows); cleared when it returns and
/// when the (sub)transaction ends (`trigger`'s callbacks).
pub(super) static mut REMAKING: Option<String> = None;

/// The memory every binding's hashers keep: this backend's life.
fn hasher_context() -> pg_sys::MemoryContext {
    // SAFETY: TopMemoryContext lives as long as the backend.
    unsafe { pg_sys::TopMemoryContext }
}

/// The filter under a binding's name, or the error that says it is missing.
pub(super) fn target_of(name: &str) -> BoundTarget {
    match BoundTarget::find(name) {
        Some(t) => t,
        None => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" bound to a table is missing or needs a reload"),
            Some("Rebuild it from its table with cf_rebuild()."),
        ),
    }
}

/// Whether filter `name` (`durable` or not, of generation `gen`) holds the
/// contents a committed fill made, so that a probe may trust a "no": its
/// identity (a durable filter's generation, else the one the fill kept in
/// the binding's slot) is the one the catalog's row records. A fill whose
/// transaction was cancelled or failed, or a server that crashed in one,
/// leaves a filter the catalog does not name: every key is then a maybe
/// until `cf_rebuild`. The check is cached in the slot. Also says whether the
/// answer lasts: not when it rests on a catalog row this transaction wrote
/// (its own rebuild or `TRUNCATE`), which a rollback to a savepoint may
/// undo while the filter stays.
pub(super) fn filter_ready(name: &str, durable: bool, gen: u64) -> (bool, bool) {
    let Some(a) = super::shared::area_if_loaded() else { return (false, true) };
    let db = crate::sql::named::call::current_db();
    let slot = a.find_epoch(db, name);
    let id = match (durable, slot) {
        (true, _) => durable_identity(gen),
        (false, Some((i, _))) => a.slot(i).built(),
        (false, None) => 0,
    };
    if id == 0 {
        return (false, true);
    }
    // The slot read is the binding's only if it was not claimed again since.
    if slot.is_some_and(|(i, epoch)| a.slot(i).ready() == id && a.current(i, epoch)) {
        return (true, true);
    }
    let row = super::catalog::row(name);
    let ok = row.as_ref().and_then(|r| r.built) == Some(id);
    // A row this transaction wrote (its cf_rebuild or TRUNCATE, not
    // committed) holds for this transaction only: not cached for others.
    let mine = row.is_some_and(|r| r.mine);
    if ok && !mine {
        if let Some((i, epoch)) = slot.filter(|&(i, epoch)| a.current(i, epoch)) {
            a.slot(i).set_ready(id);
            // Claimed again meanwhile: the cache may name another's contents.
            if !a.current(i, epoch) {
                a.slot(i).set_ready(0);
            }
        }
    }
    (ok, !mine)
}

/// Whether binding `name`'s filter is there and holds what a committed fill
/// made (else its probe answers "maybe" for every key).
pub(super) fn trusted(name: &str) -> bool {
    BoundTarget::find(name).is_some_and(|t| {
        let (durable, gen) = t.identity();
        filter_ready(name, durable, gen).0
    })
}

/// What identifies a durable filter's contents of generation `gen` in the
/// catalog: the generation, this cluster's system identifier and this
/// database, hashed (never 0, below 2^63). Generations are unique only within
/// a cluster: a row that `pg_upgrade`, or a restore into another cluster,
/// carried must not name a filter made there that happens to get its
/// generation (it would be trusted before its fill committed). A standby, a
/// crash recovery and a restored base backup keep the system identifier.
pub(super) fn durable_identity(gen: u64) -> u64 {
    // SAFETY: reads the control file's identifier, and this database's OID.
    let (sys, db) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::MyDatabaseId.to_u32()) };
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&gen.to_le_bytes());
    b[8..16].copy_from_slice(&sys.to_le_bytes());
    b[16..].copy_from_slice(&db.to_le_bytes());
    (xxhash_rust::xxh3::xxh3_64(&b) >> 1).max(1)
}

/// The shared slot of binding `name` of this database (claimed if need be,
/// for its filter's owner `owner`, within the cap per role).
pub(super) fn slot_of(name: &str, owner: u32) -> (usize, u32) {
    let db = crate::sql::named::call::current_db();
    let cap = super::shared::role_cap();
    let mut got = with_lock(|a, lk| a.slot_for_owner(lk, db, name, owner, cap));
    if got.is_err() && release_dropped_databases() > 0 {
        got = with_lock(|a, lk| a.slot_for_owner(lk, db, name, owner, cap));
    }
    match got {
        Ok(s) => s,
        Err(SlotRefused::Full) => fail(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!("no slot is free for cuckoo filter \"{name}\" bound to a table"),
            Some("Raise cuckoo.max_bound_filters (a restart is needed), or unbind filters no longer used."),
        ),
        Err(SlotRefused::RoleCap { held }) => fail(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!("the owner of cuckoo filter \"{name}\" has {held} bound filters in use, its limit"),
            Some("cuckoo.max_bound_filters_per_role caps them; unbind filters no longer used."),
        ),
    }
}

/// Queues deletes `ds` (key hash, deleting transaction) of binding slot
/// `slot` (of `epoch`) for filter `target`. For a durable filter this is a
/// writer's operation that logs the change of its account of queued deletes
/// (a `QUEUE` record), which its files and the WAL carry: the deletes a
/// restart or crash loses with the queue (in shared memory) are then counted
/// in `cuckoo_filters.dropped_deletes`, on every node.
pub(super) fn queue_deletes(target: &BoundTarget, slot: usize, epoch: u32, ds: &[(u64, u64)]) {
    if ds.is_empty() {
        return;
    }
    if area().room() < ds.len() as u64 {
        // The queue is full, perhaps of a dropped database's deletes, which
        // nothing would ever take out: their slots are freed first. If that
        // is not room enough, some will be dropped: a background worker is
        // asked to empty the queue of what is safe (`after_flush`).
        release_dropped_databases();
        if area().room() < ds.len() as u64 {
            OVERFLOWED.with(|o| o.set(true));
        }
    }
    if !target.identity().0 {
        with_lock(|a, lk| a.push(lk, slot, epoch, ds));
        return;
    }
    let done = target.write_account(|_, gen| {
        let add = with_lock(|a, lk| {
            // An entry queued under a binding's old epoch is dropped when
            // seen: it is not this filter's.
            let current = a.current(slot, epoch);
            let n = a.push(lk, slot, epoch, ds) as u64;
            let add = QueueCounts { queued: n, dropped: ds.len() as u64 - n, ..QueueCounts::default() };
            if current {
                target.add_queue_counts(&add);
            }
            current.then_some(add)
        });
        if let Some(add) = add {
            log(&Record::Queue { gen, add });
        }
    });
    if done.is_none() {
        // The filter was dropped or replaced since the binding found it:
        // queued under its slot as before (an old epoch's entries are
        // dropped when seen).
        with_lock(|a, lk| a.push(lk, slot, epoch, ds));
    }
}

thread_local! {
    /// A flush of this backend found the queue of deletes without room.
    static OVERFLOWED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// After a flush, outside the bindings' borrow: if it found the queue of
/// deletes full, a background worker is asked to apply what is safe
/// (`rebuild::ask_apply`, at most every 10 s in the cluster).
pub(super) fn after_flush() {
    if OVERFLOWED.with(|o| o.replace(false)) {
        super::rebuild::ask_apply();
    }
}

/// Frees the slots of bindings whose database was dropped (nothing can use
/// them again; `DROP DATABASE` runs no trigger that could). Returns how many.
fn release_dropped_databases() -> usize {
    // A database created since this backend last read the catalog must be
    // seen.
    // SAFETY: processes pending invalidations, outside any catalog scan.
    unsafe { pg_sys::AcceptInvalidationMessages() };
    let a = area();
    let gone: Vec<(usize, u32)> = a
        .claimed()
        .into_iter()
        .filter(|(_, db, _)| !crate::sql::named::call::database_exists(*db))
        .filter_map(|(_, db, n)| a.find_epoch(db, &n))
        .collect();
    with_lock(|a, lk| gone.iter().filter(|&&(i, epoch)| a.current(i, epoch)).map(|&(i, _)| a.release(lk, i)).count())
}

/// Runs `f` on this backend's state of binding `name` (bound to column `col`),
/// loading it if need be. `None` when the binding's filter is missing (it
/// needs a rebuild; nothing uses it until then, so its table's writes are
/// not followed).
pub(super) fn with_binding<T>(name: &str, col: &str, f: impl FnOnce(&mut Binding) -> T) -> Option<T> {
    BINDINGS.with(|bs| {
        let mut bs = bs.borrow_mut();
        let at = match bs.iter().position(|b| b.name == name) {
            Some(i) => {
                if bs[i].col != col {
                    // Bound again, to another column: loaded afresh.
                    bs.remove(i);
                    None
                } else if !bs[i].refresh() {
                    // Unbound since, or its filter is missing.
                    bs.remove(i);
                    return None;
                } else {
                    Some(i)
                }
            }
            None => None,
        };
        let i = match at {
            Some(i) => i,
            None => {
                let Some((target, slot, epoch)) = find_slot(name) else {
                    // Missing: its table's writes are not followed until a
                    // rebuild (`missing`).
                    return None;
                };
                let (row_trigger, early_trigger) = row_trigger_names(name);
                bs.push(Binding {
                    name: name.to_string(),
                    col: col.to_string(),
                    target,
                    slot,
                    epoch,
                    columns: Vec::new(),
                    row_trigger,
                    early_trigger,
                    inserts: Vec::new(),
                    insert_subs: Vec::new(),
                    deletes: Vec::new(),
                    early: VecDeque::new(),
                    unmatched: Vec::new(),
                    partitioned: false,
                });
                bs.len() - 1
            }
        };
        if orphans_waiting() {
            // Keys set aside while its filter was missing (`Orphans`), hashed
            // as every filter `cf_create` makes hashes them.
            let mut back = adopt_orphans(name, col);
            if bs[i].target.seed == crate::filter::DEFAULT_SEED {
                bs[i].early.append(&mut back);
            }
        }
        Some(f(&mut bs[i]))
    })
}

/// The filter of binding `name` and its slot, as `refresh` needs them: the
/// slot first, then the filter found again (a fill makes the filter again
/// before it claims the slot again), so that a slot claimed by a fill goes
/// with the filter it fills.
fn find_slot(name: &str) -> Option<(BoundTarget, usize, u32)> {
    let first = BoundTarget::find(name)?;
    let (slot, epoch) = slot_of(name, first.owner());
    let target = BoundTarget::find(name)?;
    Some((target, slot, epoch))
}

impl Binding {
    /// Follows the binding to its current slot and filter if its slot was
    /// claimed again since this backend loaded it (a `cf_rebuild` running
    /// alongside this transaction's writes, or the binding ended and made
    /// again; see `fill`): keys buffered and not added go to the new filter,
    /// deletes buffered and not queued to the new queue (their transaction
    /// is running, so the fill left them to it); keys the `BEFORE` trigger
    /// added (to the old filter) are added to the new one again, and the
    /// deletes of the copies it added that no version took, gone with the
    /// old filter, are dropped. Returns false, with every buffer emptied, if
    /// the binding's filter is missing (unbound, or waiting for
    /// `cf_rebuild`).
    pub(super) fn refresh(&mut self) -> bool {
        while !area().current(self.slot, self.epoch) {
            let Some((target, slot, epoch)) = find_slot(&self.name) else {
                self.inserts.clear();
                self.insert_subs.clear();
                self.deletes.clear();
                self.early.clear();
                self.unmatched.clear();
                return false;
            };
            if target.key != self.target.key {
                // Bound again with another key type: the columns' hashers go.
                self.columns.clear();
            }
            (self.target, self.slot, self.epoch) = (target, slot, epoch);
            self.unmatched.clear();
            let again: Vec<u64> = self.early.iter().filter(|e| e.added).map(|e| e.hash).collect();
            if !again.is_empty() {
                add_copies(self, &again);
            }
        }
        true
    }

    /// The column of relation `rel` that holds the key, checked against the
    /// relation's current tuple descriptor.
    ///
    /// # Safety
    /// `rel` is an open relation.
    pub(super) unsafe fn column(&mut self, rel: pg_sys::Relation) -> &mut Column {
        // SAFETY: as documented.
        let (i, tab) = unsafe { column_in(&mut self.columns, &self.name, &self.col, rel, Some(self.target.key)) };
        if let Some(tab) = tab {
            // SAFETY: rel is open.
            let relid = unsafe { (*rel).rd_id };
            self.partitioned = tab != relid;
            area().slot(self.slot).set_table(tab.to_u32(), super::catalog::column_number(tab, &self.col));
        }
        &mut self.columns[i]
    }

    /// Buffers the key `h` of a new version, from the `BEFORE` trigger.
    pub(super) fn buffer_early(&mut self, h: u64) {
        // SAFETY: reads this backend's subtransaction.
        let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
        self.early.push_back(Early { hash: h, sub, depth: depth(), added: false });
    }

    /// Sets aside a key the `BEFORE` trigger buffered that no version took:
    /// its copy, if it was added, is deleted at commit.
    fn set_aside(&mut self, e: Early) {
        if e.added {
            self.unmatched.push(e.hash);
        }
    }

    /// Buffers the key `h` of a new version, from the `AFTER` trigger,
    /// unless the `BEFORE` trigger of the same statement (and so of the same
    /// subtransaction) buffered it already.
    pub(super) fn buffer_new(&mut self, h: u64) {
        // SAFETY: reads this backend's subtransaction.
        let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
        let depth = depth();
        let is = |e: &Early| e.hash == h && e.sub == sub && e.depth == depth;
        let found = if let Some(i) = self.early.iter().take(EARLY_LOOK).position(is) {
            // Those of this statement before it are rows never written;
            // others (an outer statement's, when a trigger runs this one)
            // stay, in order.
            let mut others = Vec::new();
            for _ in 0..i {
                let e = self.early.pop_front().expect("counted");
                if e.depth == depth {
                    self.set_aside(e);
                } else {
                    others.push(e);
                }
            }
            let found = self.early.pop_front();
            for e in others.into_iter().rev() {
                self.early.push_front(e);
            }
            found
        } else if let Some(j) = self.early.iter().rev().take(EARLY_LOOK).position(is) {
            // A statement run by a trigger (its rows come last).
            self.early.remove(self.early.len() - 1 - j)
        } else {
            None
        };
        if found.is_some_and(|e| e.added) {
            return;
        }
        self.inserts.push(h);
        self.insert_subs.push(sub);
    }

    /// Adds the keys the `BEFORE` trigger buffered to the filter (a probe
    /// may look before their `AFTER` triggers fire).
    /// (Those not added yet are the last ones: keys come at the back, and
    /// each flush adds all.)
    pub(super) fn flush_early(&mut self) {
        if !self.refresh() {
            return;
        }
        let hs: Vec<u64> = self.early.iter().rev().take_while(|e| !e.added).map(|e| e.hash).collect();
        if hs.is_empty() {
            return;
        }
        add_versions(self, &hs);
        self.early.iter_mut().rev().take(hs.len()).for_each(|e| e.added = true);
    }

    /// Whether the `BEFORE` trigger buffered keys not added yet.
    pub(super) fn early_waiting(&self) -> bool {
        self.early.back().is_some_and(|e| !e.added)
    }

    /// The statements at executor depth `d` and deeper ended (their `AFTER`
    /// triggers fired): keys set aside at depth `d` that no `AFTER` trigger
    /// took are of versions never written. Those set aside deeper (a query
    /// that left its `AFTER` triggers to an outer one, a statement run
    /// without an executor) may be of versions whose `AFTER` triggers are
    /// still to fire: they are added to the filter, and their copies
    /// deleted at commit (a version that finds no match adds its own). They
    /// are the last ones: every key set aside since the statement at depth
    /// `d` started is at `d` or deeper.
    pub(super) fn settle(&mut self, d: u32) {
        let mut add = Vec::new();
        while self.early.back().is_some_and(|e| e.depth >= d) {
            let e = self.early.pop_back().expect("checked");
            if e.depth == d {
                self.set_aside(e);
            } else {
                if !e.added {
                    add.push(e.hash);
                }
                self.unmatched.push(e.hash);
            }
        }
        if !add.is_empty() {
            add_versions(self, &add);
        }
    }

    /// The transaction ends: every key set aside that no `AFTER` trigger
    /// took is of a version never written.
    fn settle_all(&mut self) {
        while let Some(e) = self.early.pop_front() {
            self.set_aside(e);
        }
    }

    /// At commit: the copies the `BEFORE` trigger added for versions never
    /// written are queued for deletion as the transaction's own deletes
    /// (applied once it committed and no snapshot predates it). Each queued
    /// delete matches a copy buffered and not matched, so every written
    /// version keeps its copy.
    pub(super) fn unmatched_deletes(&mut self) {
        self.settle_all();
        if self.unmatched.is_empty() || !self.refresh() {
            return;
        }
        // SAFETY: the transaction is still in progress (its pre-commit).
        let fxid = unsafe { pg_sys::GetTopFullTransactionId().value };
        let ds: Vec<(u64, u64)> = self.unmatched.drain(..).map(|h| (h, fxid)).collect();
        queue_deletes(&self.target, self.slot, self.epoch, &ds);
    }

    /// Flushes the statement's keys: inserts into the filter, deletes into
    /// the queue. Returns whether deletes were queued.
    pub(super) fn flush(&mut self) -> bool {
        if !self.refresh() {
            return false;
        }
        if !self.inserts.is_empty() {
            // Kept until added: a flush that fails (a full filter) inside a
            // subtransaction that is caught leaves them for the next flush
            // (they may be an outer statement's rows; a key added twice is
            // only a false positive).
            let hs = self.inserts.clone();
            add_versions(self, &hs);
            self.inserts.clear();
            self.insert_subs.clear();
        }
        if self.deletes.is_empty() {
            return false;
        }
        let ds = std::mem::take(&mut self.deletes);
        queue_deletes(&self.target, self.slot, self.epoch, &ds);
        true
    }
}

/// The index in `columns` of relation `rel`'s column that holds binding
/// `name`'s key (column `col`), found again or made (then with the bound
/// table, checked against the catalog: a trigger made by hand on another
/// table may name this binding), hashing as `key` (the filter's key type;
/// without one, the column's type's).
///
/// # Safety
/// `rel` is an open relation.
unsafe fn column_in(
    columns: &mut Vec<Column>,
    name: &str,
    col: &str,
    rel: pg_sys::Relation,
    key: Option<crate::filter::KeyType>,
) -> (usize, Option<pg_sys::Oid>) {
    // SAFETY: as documented.
    unsafe {
        let relid = (*rel).rd_id;
        let tupdesc = (*rel).rd_att;
        if let Some(i) = columns.iter().position(|c| c.relid == relid) {
            // The same descriptor, and the column still there under its
            // name and type (a descriptor may be reused in place).
            let c = &columns[i];
            if c.tupdesc == tupdesc && still_there(tupdesc, c.attnum, col, c.typid) {
                // Detached since, or bound no longer: checked again.
                let now = REL_CHANGES;
                if c.checked != now {
                    super::catalog::require_bound(name, relid, col);
                    columns[i].checked = now;
                }
                return (i, None);
            }
            columns.remove(i);
        }
        let checked = REL_CHANGES;
        let tab = super::catalog::require_bound(name, relid, col);
        let (attnum, typid, collation) = find_column(rel, col).unwrap_or_else(|| {
            fail(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!(
                    "column \"{col}\" of relation \"{}\", to which cuckoo filter \"{name}\" is bound, does not exist",
                    relation_name(rel)
                ),
                Some("Unbind the filter (cf_unbind) or bind it again."),
            )
        });
        let key = match key {
            Some(k) if key_type_of(typid) != k => fail(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{col}\" of relation \"{}\" is no longer of the type cuckoo filter \"{name}\" was bound with",
                    relation_name(rel)
                ),
                Some("Unbind the filter (cf_unbind) and bind it again."),
            ),
            Some(k) => k,
            None => key_type_of(typid),
        };
        let mut hasher: Box<KeyHasher> = Box::new(std::mem::zeroed());
        hasher.resolve_type(typid, collation, hasher_context());
        hasher.prepare(key, hasher_context());
        columns.push(Column { relid, tupdesc, attnum, typid, hasher, checked });
        (columns.len() - 1, Some(tab))
    }
}

/// Keys the `BEFORE` trigger buffered for a binding whose filter was missing
/// then (after a restart, for a filter that is not durable; while a rebuild
/// makes it again; after DDL dropped it): the filter may be back, and
/// trusted, before the rows' `AFTER` triggers fire (a rebuild committing
/// meanwhile), when a query of the writing statement probes. They go to the
/// binding's keys set aside (`Binding::early`) once it can be loaded (see
/// `with_binding`); an `AFTER` trigger that still finds the filter missing
/// takes its own away, as a statement's end takes those of the rows it did
/// not write.
pub(super) struct Orphans {
    name: String,
    col: String,
    /// The binding's `AFTER` and `BEFORE` row triggers' names
    /// (`row_trigger_names`).
    triggers: (String, String),
    columns: Vec<Column>,
    early: VecDeque<Early>,
}

thread_local! {
    static ORPHANS: RefCell<Vec<Orphans>> = const { RefCell::new(Vec::new()) };
}

impl Orphans {
    /// The key of the row in `slot` of `rel`, hashed as every filter
    /// `cf_create` makes hashes it (None: NULL).
    ///
    /// # Safety
    /// `rel` is open and `slot` holds a row of it.
    unsafe fn key(&mut self, rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) -> Option<u64> {
        // SAFETY: as documented.
        unsafe {
            let (c, _) = column_in(&mut self.columns, &self.name, &self.col, rel, None);
            key_of(&mut self.columns[c], slot, crate::filter::DEFAULT_SEED)
        }
    }
}

thread_local! {
    /// Names that row triggers passed and that no binding has, as of
    /// `REL_CHANGES` then (a binding made since invalidates the catalog).
    static NOT_BOUND: RefCell<Vec<(String, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Whether keys wait for a binding's filter to come back (`Orphans`).
pub(super) fn orphans_waiting() -> bool {
    ORPHANS.with(|o| o.try_borrow().is_ok_and(|o| o.iter().any(|x| !x.early.is_empty())))
}

/// The names and columns of the bindings whose keys wait (`Orphans`).
pub(super) fn orphan_bindings() -> Vec<(String, String)> {
    ORPHANS
        .with(|o| o.borrow().iter().filter(|x| !x.early.is_empty()).map(|o| (o.name.clone(), o.col.clone())).collect())
}

/// A row trigger of binding `name` (column `col`) on `rel` found the
/// binding's filter missing (`with_binding` gave nothing): whether the
/// binding exists and the trigger is its own (`trigger`, by name; the
/// `BEFORE` one if `before`) on its table. Then a rebuild is asked for
/// (`rebuild::ask`). A name no binding has (triggers a restore of the schema
/// alone left, without the catalog's rows) is passed over, as before the
/// filter went missing; a trigger made by hand naming a binding is refused.
///
/// # Safety
/// `rel` is open.
pub(super) unsafe fn missing(name: &str, col: &str, trigger: &[u8], before: bool, rel: pg_sys::Relation) -> bool {
    // SAFETY: backend-local counter.
    let now = unsafe { REL_CHANGES };
    if NOT_BOUND.with(|n| n.borrow().iter().any(|(x, at)| x == name && *at == now)) {
        return false;
    }
    let known = ORPHANS.with(|o| o.borrow().iter().any(|x| x.name == name && x.col == col));
    if !known {
        if super::catalog::row(name).is_none() {
            NOT_BOUND.with(|n| {
                let mut n = n.borrow_mut();
                n.retain(|(_, at)| *at == now);
                n.push((name.to_string(), now));
            });
            return false;
        }
        ORPHANS.with(|o| {
            o.borrow_mut().push(Orphans {
                name: name.to_string(),
                col: col.to_string(),
                triggers: row_trigger_names(name),
                columns: Vec::new(),
                early: VecDeque::new(),
            })
        });
    }
    ORPHANS.with(|o| {
        let mut o = o.borrow_mut();
        let x = o.iter_mut().find(|x| x.name == name && x.col == col).expect("just found or made");
        let own = if before { &x.triggers.1 } else { &x.triggers.0 };
        if trigger != own.as_bytes() {
            fail(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "trigger \"{}\" is not the row trigger of cuckoo filter \"{name}\"",
                    String::from_utf8_lossy(trigger)
                ),
                Some("Bound filters are kept only by the triggers cf_bind() makes."),
            );
        }
        // SAFETY: as documented; checks the table against the catalog.
        unsafe { column_in(&mut x.columns, name, col, rel, None) };
    });
    super::rebuild::ask(name);
    true
}

/// From the `BEFORE` trigger of binding `name` (column `col`) on `rel`,
/// whose filter is missing (`missing` said it is its own): sets aside the
/// key of the new version in `slot`, unless it is the key of the old
/// version in `old` (an `UPDATE` that keeps the key changes nothing).
///
/// # Safety
/// `rel` is open and `slot` and `old` hold rows of it.
pub(super) unsafe fn orphan_early(
    name: &str,
    col: &str,
    rel: pg_sys::Relation,
    old: Option<*mut pg_sys::TupleTableSlot>,
    slot: *mut pg_sys::TupleTableSlot,
) {
    ORPHANS.with(|o| {
        let mut o = o.borrow_mut();
        let Some(x) = o.iter_mut().find(|x| x.name == name && x.col == col) else { return };
        // SAFETY: as documented.
        let (h, was) = unsafe { (x.key(rel, slot), old.and_then(|s| x.key(rel, s))) };
        if let Some(h) = h.filter(|&h| Some(h) != was) {
            // SAFETY: reads this backend's subtransaction.
            let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
            x.early.push_back(Early { hash: h, sub, depth: depth(), added: false });
        }
    });
}

/// From the `AFTER` trigger of binding `name` (column `col`) on `rel`, whose
/// filter is missing: the key set aside for the new version in `slot`, if
/// any, goes (the version's key is added by a rebuild, which reads it).
///
/// # Safety
/// `rel` is open and `slot` holds a row of it.
pub(super) unsafe fn orphan_taken(name: &str, col: &str, rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) {
    ORPHANS.with(|o| {
        let mut o = o.borrow_mut();
        let Some(x) = o.iter_mut().find(|x| x.name == name && x.col == col) else { return };
        if x.early.is_empty() {
            return;
        }
        // SAFETY: as documented.
        if let Some(h) = unsafe { x.key(rel, slot) } {
            // SAFETY: reads this backend's subtransaction.
            let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
            let d = depth();
            let is = |e: &Early| e.hash == h && e.sub == sub && e.depth == d;
            // Near either end, as `buffer_new` looks (a key not found goes
            // when its statement ends).
            let n = x.early.len();
            let at = x
                .early
                .iter()
                .take(EARLY_LOOK)
                .position(is)
                .or_else(|| x.early.iter().rev().take(EARLY_LOOK).position(is).map(|j| n - 1 - j));
            if let Some(j) = at {
                x.early.remove(j);
            }
        }
    });
}

/// The keys set aside for binding `name` while its filter was missing, for
/// its `early` keys (in the order they came).
fn adopt_orphans(name: &str, col: &str) -> VecDeque<Early> {
    ORPHANS.with(|o| {
        let Ok(mut o) = o.try_borrow_mut() else { return VecDeque::new() };
        match o.iter_mut().find(|x| x.name == name && x.col == col) {
            Some(x) => std::mem::take(&mut x.early),
            None => VecDeque::new(),
        }
    })
}

/// The statement at executor depth `d` ended: the keys it set aside while a
/// filter was missing go (its `AFTER` triggers fired). Those of deeper
/// statements (a query may leave its `AFTER` triggers to an outer one) stay
/// until the transaction ends, or a later statement at their depth ends.
pub(super) fn settle_orphans(d: u32) {
    ORPHANS.with(|o| {
        let Ok(mut o) = o.try_borrow_mut() else { return };
        for x in o.iter_mut() {
            x.early.retain(|e| e.depth != d);
        }
    });
}

/// The column named `col` of `rel`: its number, type and collation.
///
/// # Safety
/// `rel` is an open relation.
pub(super) unsafe fn find_column(rel: pg_sys::Relation, col: &str) -> Option<(i16, pg_sys::Oid, pg_sys::Oid)> {
    // SAFETY: as documented; the descriptor's attributes are read in place.
    unsafe {
        let td = (*rel).rd_att;
        let attrs = (*td).attrs.as_slice((*td).natts as usize);
        attrs.iter().find_map(|a| {
            let name = CStr::from_ptr(a.attname.data.as_ptr()).to_str().ok()?;
            (!a.attisdropped && name == col).then_some((a.attnum, a.atttypid, a.attcollation))
        })
    }
}

/// A relation's name, for messages.
///
/// # Safety
/// `rel` is an open relation.
pub(super) unsafe fn relation_name(rel: pg_sys::Relation) -> String {
    // SAFETY: as documented.
    unsafe { CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned() }
}

/// The key of the row in `slot` as the column hashes it (None: NULL).
///
/// # Safety
/// `slot` holds a row of the relation `col` was found in.
pub(super) unsafe fn key_of(col: &mut Column, slot: *mut pg_sys::TupleTableSlot, seed: u64) -> Option<u64> {
    // SAFETY: as documented; slot_getsomeattrs_int deforms up to the column.
    unsafe {
        let n = col.attnum as usize;
        if ((*slot).tts_nvalid as usize) < n {
            pg_sys::slot_getsomeattrs_int(slot, n as i32);
        }
        if *(*slot).tts_isnull.add(n - 1) {
            return None;
        }
        let d = *(*slot).tts_values.add(n - 1);
        col.hasher.hash_datum_for(d, seed)
    }
}

/// Adds `hs` to the filter in chunks of at most 8,192 keys, each logged
/// before it takes effect (its refusals after, as `cf_insert` of an array
/// logs them); stops after the first chunk with a refusal. Returns the keys
/// refused; `tally` counts those stored.
pub(super) fn insert_logged(
    chain: &crate::filter::Chain<'_, crate::region::RegionTables<'_>>,
    gen: u64,
    hs: &[u64],
    tally: &mut Tally,
) -> usize {
    let mut refused = 0;
    for chunk in hs.chunks(MANY_MAX) {
        let end = (gen != 0).then(|| log(&batch_record(gen, chunk, true)));
        let mut out = vec_filled(chunk.len(), Err(Full));
        chain.insert_many(chunk, false, &mut out, &mut tally.op);
        let no: Vec<(u32, u64)> =
            out.iter().enumerate().filter(|(_, r)| r.is_err()).map(|(i, _)| (i as u32, chunk[i])).collect();
        tally.stored += (chunk.len() - no.len()) as u64;
        refused += no.len();
        if let Some(end) = end {
            log_refused(gen, end, no);
        }
        if refused > 0 {
            break;
        }
    }
    refused
}

/// Adds a copy of each key in `hs` whose pair is not saturated (see
/// `region::binding`), logging them before they take effect; the statement
/// fails if the filter is full. Adds nothing if the binding's filter is
/// missing: it is being made again by a fill that will find these rows
/// (they were written before it claimed the binding's slot), or it waits
/// for `cf_rebuild` (probes answer "maybe" until then), or it was unbound.
pub(super) fn add_versions(b: &mut Binding, hs: &[u64]) {
    if b.refresh() {
        add_copies(b, hs);
    }
}

/// `add_versions` once the binding is refreshed.
///
/// Versions of one key in one statement go in rounds: each round adds (or
/// finds saturated) the next version of each key, counting its copies once
/// the earlier versions' copies are in the filter; a key found saturated
/// (at the cap, which it never leaves) takes none of its later versions.
/// Counting them all before adding any would let every version of a key
/// add a copy (a column with few values fills table after table).
fn add_copies(b: &mut Binding, hs: &[u64]) {
    let mut pending: Vec<u64> = hs.to_vec();
    while !pending.is_empty() {
        // Sized at once: growing it rehashes every key already in.
        let mut seen = KeySet::with_capacity_and_hasher(pending.len(), Default::default());
        let (round, repeats): (Vec<u64>, Vec<u64>) = pending.iter().partition(|&&h| seen.insert(h));
        let Some(added) = add_round(b, &round) else { return };
        if repeats.is_empty() {
            return;
        }
        let full: KeySet = round.iter().zip(&added).filter(|(_, &a)| !a).map(|(&h, _)| h).collect();
        let (skipped, next): (Vec<u64>, Vec<u64>) = repeats.into_iter().partition(|h| full.contains(h));
        area().slot(b.slot).saturated.fetch_add(skipped.len() as u64, std::sync::atomic::Ordering::Relaxed);
        pending = next;
    }
}

/// A set of key hashes (already uniform: hashed as they are).
type KeySet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasherId>>;

/// Hashes a key hash as itself.
#[derive(Default)]
struct KeyHasherId(u64);

impl std::hash::Hasher for KeyHasherId {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One round of `add_copies`: `hs` holds one version of each key. Returns,
/// for each, whether it added a copy (false: its key is saturated); None
/// when the binding's filter is gone (see `add_versions`).
fn add_round(b: &mut Binding, hs: &[u64]) -> Option<Vec<bool>> {
    let mut tries = 0;
    loop {
        let gate = area().slot(b.slot).gate();
        let done = b.target.write(c"writing a table bound to a durable cuckoo filter", |chain, gen| {
            let mut saturated = 0;
            // Counted all at once at the first call (after the gate's first
            // read), each table's buckets asked for a few keys ahead; each
            // count is handed out with its own hash (a count that does not
            // match its hash is taken as none: the version adds a copy).
            let mut counts: Option<std::iter::Zip<std::slice::Iter<'_, u64>, std::vec::IntoIter<u64>>> = None;
            let add = versions_to_copy(
                gate,
                hs,
                |h| match counts.get_or_insert_with(|| hs.iter().zip(chain.copies_many(hs))).next() {
                    Some((&k, n)) if k == h => n,
                    _ => 0,
                },
                &mut saturated,
            );
            let chosen: Vec<u64> = hs.iter().zip(&add).filter(|(_, &a)| a).map(|(&h, _)| h).collect();
            let mut tally = Tally::default();
            let refused = insert_logged(chain, gen, &chosen, &mut tally);
            (saturated, refused, tally, add)
        });
        match done {
            Some((saturated, refused, tally, add)) => {
                b.target.count(&tally);
                area().slot(b.slot).saturated.fetch_add(saturated, std::sync::atomic::Ordering::Relaxed);
                if refused > 0 {
                    fail(
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
                        format!("cuckoo filter \"{}\" bound to a table is full: {refused} keys could not be added", b.name),
                        Some("The rows are not written. Raise cuckoo.shared_memory or the caps on filter bytes, or rebuild the filter (cf_rebuild)."),
                    );
                }
                return Some(add);
            }
            None => {
                // Replaced (a rebuild) or dropped since it was found.
                tries += 1;
                let now = BoundTarget::find(&b.name)?;
                if now.seed != b.target.seed || now.key != b.target.key || tries > 100 {
                    fail(
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        format!("cuckoo filter \"{}\" bound to a table was replaced during the statement", b.name),
                        Some("Retry the statement."),
                    );
                }
                b.target = now;
            }
        }
    }
}

/// Forgets every binding's statement keys (a failed statement or
/// transaction: its rows never existed for anyone).
pub(super) fn forget_all() {
    ORPHANS.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            o.clear();
        }
    });
    BINDINGS.with(|bs| {
        if let Ok(mut bs) = bs.try_borrow_mut() {
            for b in bs.iter_mut() {
                b.inserts.clear();
                b.insert_subs.clear();
                b.deletes.clear();
                b.early.clear();
                b.unmatched.clear();
            }
        }
    });
}

/// Subtransaction `my` ended: the keys set aside in `early` under it pass to
/// `parent` if it committed, or go to `gone` if it aborted (they are the
/// last ones).
fn end_sub_early(
    early: &mut VecDeque<Early>,
    my: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    committed: bool,
    mut gone: impl FnMut(Early),
) {
    if committed {
        for e in early.iter_mut().rev().take_while(|e| e.sub == my) {
            e.sub = parent;
        }
    } else {
        while early.back().is_some_and(|e| e.sub == my) {
            gone(early.pop_back().expect("checked"));
        }
    }
}

/// A subtransaction ended: the keys it buffered go if it aborted (its rows
/// never existed for anyone, and a flush that failed for them must not fail
/// every later statement), or pass to its parent if it committed. Keys of
/// outer statements (rows written through a parent, whose flush an inner
/// statement attempted) stay.
pub(super) fn end_subxact(my: pg_sys::SubTransactionId, parent: pg_sys::SubTransactionId, committed: bool) {
    ORPHANS.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            for x in o.iter_mut() {
                end_sub_early(&mut x.early, my, parent, committed, |_| ());
            }
        }
    });
    BINDINGS.with(|bs| {
        if let Ok(mut bs) = bs.try_borrow_mut() {
            for b in bs.iter_mut() {
                // Both buffers are in the order keys came, each tagged with
                // the subtransaction then running: those of `my` (and of its
                // subtransactions, retagged or gone as each ended) are the
                // last ones, so the walk stops at the first of another.
                // A key the BEFORE trigger added stays in the filter for a
                // version that never was: its copy is deleted at commit.
                let mut gone = Vec::new();
                end_sub_early(&mut b.early, my, parent, committed, |e| gone.push(e));
                gone.into_iter().for_each(|e| b.set_aside(e));
                if committed {
                    for s in b.insert_subs.iter_mut().rev().take_while(|s| **s == my) {
                        *s = parent;
                    }
                } else {
                    while b.insert_subs.last() == Some(&my) {
                        b.insert_subs.pop();
                        b.inserts.pop();
                    }
                }
            }
        }
    });
}

/// Forgets this backend's state of binding `name` (it was unbound or rebuilt).
pub(super) fn forget(name: &str) {
    BINDINGS.with(|bs| bs.borrow_mut().retain(|b| b.name != name));
}

/// Runs `f` on this backend's state of binding `name` with column `col`.
pub(super) fn with_loaded<T>(name: &str, col: &str, f: impl FnOnce(&mut Binding) -> T) -> Option<T> {
    with_binding(name, col, f)
}
