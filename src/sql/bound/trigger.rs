//! The triggers that keep a bound filter in step with its table: the row
//! triggers (`cf_bound_row`, `BEFORE` and `AFTER`) that hash each written
//! row's key, the statement
//! trigger (`cf_bound_flush`) that hands the statement's keys to the filter
//! and its deletes to the queue, and the transaction callbacks that do the
//! same before a commit or a `PREPARE TRANSACTION` (for writers that fire
//! row triggers only, as logical replication's apply does) and forget them
//! on an abort.
//!
//! A row version's key is in the filter before its transaction can commit,
//! and before the writing statement's own queries can see the row: new
//! versions' keys are buffered before the row is written (the `BEFORE`
//! trigger; the `AFTER` one adds those it changed), and flushed before any
//! query starts, at the end of each statement, and at the latest just before
//! the commit record. A deleted version's key is queued with the ID
//! of the (sub)transaction that deleted it (`apply` takes it out later). An
//! `UPDATE` whose new version's key hashes as the old one's changes nothing.
//! Keys buffered when the transaction aborts belong to rows that never
//! existed for anyone and are dropped; a subtransaction's abort keeps them
//! (they may be an outer statement's: false positives at worst).

use std::borrow::Cow;
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::apply;
use super::binding::{
    depth, enter, forget_all, key_of, leave, reset_depth, sub_ended, sub_started, with_binding, BINDINGS,
};
use super::shared::area;
use crate::region::wal::MANY_MAX;
use crate::sql::named::errors::fail;

/// The full ID of the current (sub)transaction, assigning one if need be.
fn current_fxid() -> u64 {
    // SAFETY: assigns or reads the current subtransaction's ID.
    unsafe { pg_sys::GetCurrentFullTransactionId().value }
}

/// Flushes every binding's statement keys (with `early`, also those the
/// `BEFORE` trigger buffered); then, for the relation `rel` if given,
/// applies the deletes that became safe.
pub(super) fn flush_all(rel: Option<pg_sys::Relation>, early: bool) {
    if early {
        // Keys set aside while a filter was missing join its binding's if it
        // is back (`with_binding` takes them).
        for (name, col) in super::binding::orphan_bindings() {
            with_binding(&name, &col, |_| ());
        }
    }
    let names: Vec<String> = BINDINGS.with(|bs| {
        let mut bs = bs.borrow_mut();
        for b in bs.iter_mut() {
            if early {
                b.flush_early();
            }
            let queued = b.flush();
            // A statement on a partition fires no statement trigger of the
            // binding (it is on the partitioned table): its deletes are
            // applied here, at the end of the statement, against the most
            // conservative horizon.
            if queued && rel.is_none() && b.partitioned {
                apply::maybe_apply(b, None, false);
            }
        }
        bs.iter().map(|b| b.name.clone()).collect()
    });
    super::binding::after_flush();
    if let Some(rel) = rel {
        for name in names {
            BINDINGS.with(|bs| {
                let mut bs = bs.borrow_mut();
                // Only for the bound table itself: another relation's horizon
                // (a temporary table's) may ignore other sessions' snapshots.
                if let Some(b) = bs.iter_mut().find(|b| b.name == name) {
                    // SAFETY: rel is the open relation of the firing trigger.
                    let relid = unsafe { (*rel).rd_id }.to_u32();
                    if area().slot(b.slot).table().map(|(t, _)| t) == Some(relid) {
                        apply::maybe_apply(b, Some(rel), false);
                    }
                }
            });
        }
    }
}

static mut PREV_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_RUN: pg_sys::ExecutorRun_hook_type = None;
static mut PREV_FINISH: pg_sys::ExecutorFinish_hook_type = None;
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// From `_PG_init`: the executor hooks that hand buffered keys to the
/// filters before a query runs and when a statement finishes, and that
/// count the executor depth; the transaction callbacks (which keep it
/// right after errors).
pub(super) fn init() {
    // SAFETY: _PG_init runs once per process before any query; the previous
    // hooks are kept and called.
    unsafe {
        PREV_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(start);
        PREV_RUN = pg_sys::ExecutorRun_hook;
        pg_sys::ExecutorRun_hook = Some(run);
        PREV_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(finish);
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
    }
    register_callbacks();
    super::binding::init();
}

// PostgreSQL's own ExecutorFinish, called by its symbol: an ERROR it raises
// (an AFTER trigger's) reaches PostgreSQL's handler as the longjmp it is,
// through this hook's frame, which holds nothing to drop.
unsafe extern "C-unwind" {
    #[link_name = "standard_ExecutorFinish"]
    fn raw_standard_executor_finish(query_desc: *mut pg_sys::QueryDesc);
    #[link_name = "standard_ExecutorStart"]
    fn raw_standard_executor_start(query_desc: *mut pg_sys::QueryDesc, eflags: std::ffi::c_int);
    #[link_name = "standard_ExecutorRun"]
    fn raw_standard_executor_run(
        query_desc: *mut pg_sys::QueryDesc,
        direction: pg_sys::ScanDirection::Type,
        count: u64,
        execute_once: bool,
    );
}

/// The hook: a utility statement counts as an executor depth (a `COPY` fires
/// its row triggers without an executor of its own), and its end settles
/// the keys set aside at that depth, as a query's does.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: the arguments PostgreSQL passed, passed on; the depth is
    // backend-local.
    unsafe {
        enter();
        crate::sql::call_process_utility(
            PREV_UTILITY,
            pstmt,
            query_string,
            read_only_tree,
            context,
            params,
            query_env,
            dest,
            qc,
        );
        if depth() > 0 && !pg_sys::IsInParallelMode() {
            settle_at(depth());
        }
        leave();
    }
}

/// The hook: counts the executor depth while a query runs (its `BEFORE`
/// triggers fire then).
unsafe extern "C-unwind" fn run(
    query_desc: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
    execute_once: bool,
) {
    // SAFETY: the executor's own arguments, passed on; the depth is
    // backend-local.
    unsafe {
        let fires = fires_triggers(query_desc);
        if fires {
            enter();
        }
        match PREV_RUN {
            Some(prev) => prev(query_desc, direction, count, execute_once),
            None => raw_standard_executor_run(query_desc, direction, count, execute_once),
        }
        if fires {
            leave();
        }
    }
}

/// Whether a query fires its own `AFTER` triggers when it finishes. One run
/// with `EXEC_FLAG_SKIP_TRIGGERS` leaves them to the query that ran it (a
/// foreign key's action, run by that query's `AFTER` trigger; every plain
/// `SELECT`): it does not count as deeper, so that the keys its `BEFORE`
/// triggers set aside are settled with that query's, after its `AFTER`
/// triggers, which fire then, had their chance to match them.
///
/// # Safety
/// `query_desc` is a started query's.
unsafe fn fires_triggers(query_desc: *mut pg_sys::QueryDesc) -> bool {
    // SAFETY: as documented.
    unsafe {
        let estate = (*query_desc).estate;
        estate.is_null() || (*estate).es_top_eflags & pg_sys::EXEC_FLAG_SKIP_TRIGGERS as i32 == 0
    }
}

/// The hook: before any query runs (a trigger's query, the statement after
/// a `COPY` through a parent, a cached plan), keys this backend buffered go
/// to their filters, so that a query that can see the rows finds their keys.
/// Keys the `BEFORE` trigger buffered go too before a parallel plan starts
/// (its workers' probes cannot reach this backend's buffers); a probe in
/// this backend adds them itself (`cf_bound_contains`).
unsafe extern "C-unwind" fn start(query_desc: *mut pg_sys::QueryDesc, eflags: std::ffi::c_int) {
    // SAFETY: the executor's own arguments, passed on; the planned
    // statement is the query's.
    unsafe {
        let stmt = (*query_desc).plannedstmt;
        flush_buffered(!stmt.is_null() && (*stmt).parallelModeNeeded);
        match PREV_START {
            Some(prev) => prev(query_desc, eflags),
            None => raw_standard_executor_start(query_desc, eflags),
        }
    }
}

/// The hook: once a statement's `AFTER` triggers have fired, keys still
/// buffered go to their filters. Rows written through a partitioned or
/// inheritance parent fire the bound table's row triggers but not its
/// statement trigger; without this, their keys would wait for the commit,
/// and the writing transaction's next statements would miss them.
///
/// The keys its `BEFORE` triggers set aside that no `AFTER` trigger took
/// are then settled (`Binding::settle`), unless the query leaves its `AFTER`
/// triggers to the query that ran it (`fires_triggers`): that one's end
/// settles them.
unsafe extern "C-unwind" fn finish(query_desc: *mut pg_sys::QueryDesc) {
    // SAFETY: the executor's own argument, passed on; its state is read
    // before it is finished; the depth is backend-local.
    unsafe {
        let fires = fires_triggers(query_desc);
        if fires {
            enter();
        }
        match PREV_FINISH {
            Some(prev) => prev(query_desc),
            None => raw_standard_executor_finish(query_desc),
        }
        if fires {
            if !pg_sys::IsInParallelMode() {
                settle_at(depth());
            }
            leave();
        }
        flush_buffered(false);
    }
}

/// Settles every binding's keys set aside at depth `d` or deeper (their
/// statements ended).
fn settle_at(d: u32) {
    super::binding::settle_orphans(d);
    BINDINGS.with(|bs| {
        if let Ok(mut bs) = bs.try_borrow_mut() {
            for b in bs.iter_mut() {
                b.settle(d);
            }
        }
    });
}

/// Flushes this backend's buffered keys and deletes, if any, and with
/// `early` the keys the `BEFORE` trigger buffered (not from within a flush,
/// whose own work may run a query; not in parallel mode, where nothing may
/// be written and nothing is buffered).
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn flush_buffered(early: bool) {
    // SAFETY: a read of this process's state.
    if unsafe { pg_sys::IsInParallelMode() } {
        return;
    }
    // Also when a binding's slot was claimed again (a rebuild: its keys
    // set aside and added go to the new filter, `Binding::refresh`), or keys
    // wait for a filter to come back (`binding::Orphans`), before a probe.
    let any = BINDINGS.with(|bs| {
        bs.try_borrow().is_ok_and(|bs| {
            bs.iter().any(|b| {
                !b.inserts.is_empty()
                    || !b.deletes.is_empty()
                    || (early && (b.early_waiting() || (!b.early.is_empty() && !area().current(b.slot, b.epoch))))
            })
        })
    }) || (early && super::binding::orphans_waiting());
    if any {
        flush_all(None, early);
    }
}

static mut CALLBACKS: bool = false;

/// Set by `cf_bound_ddl_quiet` while the DDL event trigger changes a
/// binding's triggers itself; cleared when the transaction ends.
pub(super) static mut DDL_QUIET: bool = false;

/// Registers the transaction callbacks once per backend.
pub(super) fn register_callbacks() {
    // SAFETY: backend-local flag; the callbacks stay registered for the
    // backend's life.
    unsafe {
        if CALLBACKS {
            return;
        }
        pg_sys::RegisterXactCallback(Some(at_xact), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(at_subxact), std::ptr::null_mut());
        CALLBACKS = true;
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn at_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    match event {
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE => {
            flush_all(None, false);
            // (A full queue met here asks for the worker at this backend's
            // next flush; an ask left by an earlier one may come from the
            // flush above: it only reads the system caches and registers
            // the worker, which cannot fail the commit.)
            BINDINGS.with(|bs| bs.borrow_mut().iter_mut().for_each(|b| b.unmatched_deletes()));
        }
        pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT => {
            forget_all();
            // SAFETY: backend-local.
            unsafe {
                DDL_QUIET = false;
                super::binding::REMAKING = None;
                reset_depth();
            }
        }
        pg_sys::XactEvent::XACT_EVENT_COMMIT | pg_sys::XactEvent::XACT_EVENT_PREPARE => {
            // SAFETY: backend-local.
            unsafe {
                DDL_QUIET = false;
                super::binding::REMAKING = None;
                reset_depth();
            }
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn at_subxact(
    event: pg_sys::SubXactEvent::Type,
    my: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    // Buffered keys of an aborted subtransaction go, others stay: they may
    // be an outer (sub)transaction's (a partition written through its
    // parent fires no statement trigger of its own; another trigger may
    // catch an error in a subtransaction). Buffered deletes of an aborted
    // subtransaction are dropped when applied (its ID aborted).
    match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_START_SUB => sub_started(my),
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => {
            super::binding::end_subxact(my, parent, false);
            sub_ended(my, true);
            // SAFETY: backend-local.
            unsafe {
                DDL_QUIET = false;
                super::binding::REMAKING = None;
            }
        }
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
            super::binding::end_subxact(my, parent, true);
            sub_ended(my, false);
        }
        _ => {}
    }
}

/// The trigger's data, or the error for a call outside a trigger.
///
/// # Safety
/// `fcinfo` is a valid frame.
unsafe fn trigger_data(fcinfo: pg_sys::FunctionCallInfo, what: &str) -> *mut pg_sys::TriggerData {
    // SAFETY: as documented; the context is a node when set.
    unsafe {
        let ctx = (*fcinfo).context;
        if ctx.is_null() || (*ctx).type_ != pg_sys::NodeTag::T_TriggerData {
            fail(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                format!("{what} must be called as a trigger"),
                None,
            );
        }
        ctx as *mut pg_sys::TriggerData
    }
}

/// The trigger's two arguments (the binding's name and column), borrowed
/// from the trigger (no copy per row: the row triggers fire once per row);
/// None unless it has exactly two.
///
/// # Safety
/// `td` is a valid trigger call's data; the arguments live as long as the
/// trigger call.
unsafe fn trigger_args<'a>(td: *mut pg_sys::TriggerData) -> Option<[Cow<'a, str>; 2]> {
    // SAFETY: as documented: tgargs holds tgnargs C strings.
    unsafe {
        let t = (*td).tg_trigger;
        if (*t).tgnargs != 2 {
            return None;
        }
        let arg = |i: usize| CStr::from_ptr(*(*t).tgargs.add(i)).to_string_lossy();
        Some([arg(0), arg(1)])
    }
}

v1_functions! {
    /// `cf_bound_row()`: the `AFTER INSERT OR UPDATE OR DELETE ... FOR EACH
    /// ROW` trigger of a bound table, and its `BEFORE INSERT OR UPDATE ...
    /// FOR EACH ROW` trigger, with the binding's name and column as
    /// arguments.
    ///
    /// The `BEFORE` one buffers each new version's key before the row is
    /// written: the row becomes visible to the writing statement's own
    /// queries (a `RETURNING` function, a data-modifying `WITH`, an `AFTER`
    /// trigger that fires first) before the `AFTER` triggers fire, and the
    /// executor hook or a probe hands buffered keys to the filter first. The
    /// `AFTER` one sees the version as written (a later `BEFORE` trigger or
    /// a generated column may have changed its key): it buffers the key
    /// unless the `BEFORE` one did, and queues the old version's for
    /// deletion.
    fn cf_bound_row(fcinfo) {
        // SAFETY: called by the trigger manager with a TriggerData context.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let td = trigger_data(fcinfo, "cf_bound_row()");
            let ev = (*td).tg_event;
            let timing = ev & pg_sys::TRIGGER_EVENT_TIMINGMASK;
            let op = ev & pg_sys::TRIGGER_EVENT_OPMASK;
            let before = timing == pg_sys::TRIGGER_EVENT_BEFORE && op != pg_sys::TRIGGER_EVENT_DELETE;
            if ev & pg_sys::TRIGGER_EVENT_ROW == 0 || !(before || timing == pg_sys::TRIGGER_EVENT_AFTER) {
                fail(
                    PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                    "cf_bound_row() must be an AFTER ... FOR EACH ROW or BEFORE INSERT OR UPDATE ... FOR EACH ROW trigger".into(),
                    None,
                );
            }
            let Some([name, col]) = trigger_args(td) else {
                fail(
                    PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                    "cf_bound_row() takes the binding's name and column".into(),
                    None,
                )
            };
            register_callbacks();
            let rel = (*td).tg_relation;
            let tgname = CStr::from_ptr((*(*td).tg_trigger).tgname).to_bytes();
            let full = with_binding(&name, &col, |b| {
                let own = if before { &b.early_trigger } else { &b.row_trigger };
                if tgname != own.as_bytes() {
                    fail(
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                        format!("trigger \"{}\" is not the row trigger of cuckoo filter \"{name}\"", String::from_utf8_lossy(tgname)),
                        Some("Bound filters are kept only by the triggers cf_bind() makes."),
                    );
                }
                let seed = b.target.seed;
                let c = b.column(rel);
                let (old, new) = match op {
                    pg_sys::TRIGGER_EVENT_INSERT => (None, key_of(c, (*td).tg_trigslot, seed)),
                    pg_sys::TRIGGER_EVENT_DELETE => (key_of(c, (*td).tg_trigslot, seed), None),
                    pg_sys::TRIGGER_EVENT_UPDATE => {
                        (key_of(c, (*td).tg_trigslot, seed), key_of(c, (*td).tg_newslot, seed))
                    }
                    _ => (None, None),
                };
                if old.is_some() && old == new {
                    return false;
                }
                if before {
                    if let Some(h) = new {
                        b.buffer_early(h);
                    }
                    return b.inserts.len() >= MANY_MAX;
                }
                if let Some(h) = new {
                    b.buffer_new(h);
                }
                if let Some(h) = old {
                    b.deletes.push((h, current_fxid()));
                }
                b.inserts.len() >= MANY_MAX || b.deletes.len() >= MANY_MAX
            });
            if full.is_none() && super::binding::missing(&name, &col, tgname, before, rel) && op != pg_sys::TRIGGER_EVENT_DELETE {
                // The filter is missing: a key set aside now, or taken
                // back, in case it comes back during the statement.
                let new = if op == pg_sys::TRIGGER_EVENT_UPDATE { (*td).tg_newslot } else { (*td).tg_trigslot };
                let old = (op == pg_sys::TRIGGER_EVENT_UPDATE).then_some((*td).tg_trigslot);
                if before {
                    super::binding::orphan_early(&name, &col, rel, old, new);
                } else if super::binding::orphans_waiting() {
                    super::binding::orphan_taken(&name, &col, rel, new);
                }
            }
            if full == Some(true) {
                with_binding(&name, &col, |b| b.flush());
                super::binding::after_flush();
            }
            if before {
                // The row goes on as it is.
                let tuple = if op == pg_sys::TRIGGER_EVENT_UPDATE { (*td).tg_newtuple } else { (*td).tg_trigtuple };
                return pg_sys::Datum::from(tuple);
            }
            pg_sys::Datum::from(0usize)
        }
    }

    /// `cf_bound_flush()`: the `AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    /// ... FOR EACH STATEMENT` trigger of a bound table: the statement's keys
    /// go to the filter, its deletes to the queue, and deletes that became
    /// safe are applied; after a `TRUNCATE`, the filter is emptied as of the
    /// transaction's commit (`fill::truncated`).
    fn cf_bound_flush(fcinfo) {
        // SAFETY: called by the trigger manager with a TriggerData context.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let td = trigger_data(fcinfo, "cf_bound_flush()");
            register_callbacks();
            if (*td).tg_event & pg_sys::TRIGGER_EVENT_OPMASK == pg_sys::TRIGGER_EVENT_TRUNCATE {
                super::fill::truncated((*(*td).tg_relation).rd_id);
            } else {
                flush_all(Some((*td).tg_relation), false);
            }
            pg_sys::Datum::from(0usize)
        }
    }
}
