//! The durability background worker (`cuckoo durability`): it holds every
//! checkpoint back until the durable filters changed before its redo position
//! are cut to files (`cut`), retries a cut that failed, and at shutdown freezes
//! durable changes and makes the last cut before the shutdown checkpoint.
//!
//! # Why every checkpoint finds the filters on disk
//!
//! PostgreSQL 15 offers no checkpoint hook, but a checkpoint waits, after
//! fixing its redo position (phase 1), for every process that has
//! `DELAY_CHKPT_START` set in its PGPROC when it looks, and, after flushing
//! buffers (phase 2), for every process with `DELAY_CHKPT_COMPLETE` set when it
//! looks; it waits until that process clears the flag. The worker keeps both
//! flags set (it holds a virtual transaction ID for it, as the waits require)
//! and repeats: (1) if the redo position moved past the last one it covered, it
//! makes a *pass*: cuts every filter that changed since its last cut (and
//! removes the files of dropped generations); (2) it clears `DELAY_CHKPT_START`
//! for a moment and sets it again; (3) as (1); (4) it clears
//! `DELAY_CHKPT_COMPLETE` for a moment and sets it again. Take a checkpoint
//! whose redo position R was fixed at time T_R, which checks `START` holders at
//! T_s and `COMPLETE` holders at T_c (T_R < T_s < T_c), and writes its record
//! after T_c:
//! - If `START` was set at T_s, the checkpoint waited until a step (2) cleared
//!   it, and T_c comes later. If `COMPLETE` is set at T_c, it waits for the
//!   next step (4), which follows a step (3) that read the redo position after
//!   T_R; if `COMPLETE` is clear at T_c, we are inside a step (4), after the
//!   step (3) of the same round, which also read after T_s > T_R. Either way a
//!   pass that began after R is complete before the checkpoint record.
//! - If `START` was clear at T_s, we were inside a step (2); the step (3) after
//!   it reads the redo position after T_s > T_R, and whether `COMPLETE` is set
//!   at T_c (the checkpoint waits for a later step (4)) or clear (T_c is inside
//!   the step (4) that follows that step (3)), the pass precedes the record.
//!
//! A pass that began after R cut every filter with a change logged before R
//! (a writer marks its filter changed before it logs), so each filter's files
//! cover a position after R or every change it ever had, and its `PASS`
//! record and coverage file say so (`cut`). A pass that fails (a file cannot
//! be written) is repeated, writing what it took again without logging it
//! again, and the checkpoint waits meanwhile.

use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use std::path::Path;

use super::attach::{region, reload_config_if_asked, with_registry_lock};
use super::cut::{abandon_marks, dir, pass, Passes};
use super::log::log;
use super::restore::LEGACY_FILE;
use crate::region::disk;
use crate::region::wal::{QueueCounts, Record};
use crate::region::DurableGate;
use crate::region::Region;

/// Registers the worker (from `_PG_init`, while preloading).
pub fn register() {
    BackgroundWorkerBuilder::new("cuckoo durability")
        .set_type("cuckoo durability")
        .set_library("cuckoo")
        .set_function("cuckoo_durability_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

// ----- the worker ----------------------------------------------------------------------

/// Sets or clears checkpoint-delay flags in this process's PGPROC.
fn set_delay(flags: i32, on: bool) {
    // SAFETY: MyProc is this process's own PGPROC; PostgreSQL changes these
    // flags the same way (a plain store read under ProcArrayLock elsewhere).
    unsafe {
        let p = &mut (*pg_sys::MyProc).delayChkptFlags;
        let v = std::ptr::read_volatile(p);
        std::ptr::write_volatile(p, if on { v | flags } else { v & !flags });
    }
    // The flag must be visible before the redo position is read next (the
    // argument above depends on that order); PostgreSQL gets the same barrier
    // from the atomics of its WAL insertion.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Set when [`stop`] begins and when it has made its last pass.
static mut STOPPING: bool = false;
static mut STOPPED: bool = false;
static mut LAST_WARNING: Option<Instant> = None;
/// The worker's passes in progress (what a failed try left to write).
static mut PASSES: Option<Passes> = None;

fn passes() -> &'static mut Passes {
    // SAFETY: the worker is single-threaded; one borrow at a time.
    unsafe { (*std::ptr::addr_of_mut!(PASSES)).get_or_insert_with(Passes::default) }
}

/// Reports a failed pass (at most every ten seconds).
fn warn_failed(e: &str, stopping: bool) {
    // SAFETY: the worker is single-threaded.
    unsafe {
        if LAST_WARNING.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            LAST_WARNING = Some(Instant::now());
            if stopping {
                pgrx::warning!("cuckoo: the last checkpoint cut before shutdown failed: {e}; the shutdown waits until it can be written (or stop the server with -m immediate: the next start recovers the durable filters from the WAL)");
            } else {
                pgrx::warning!(
                    "cuckoo: a checkpoint cut failed: {e}; checkpoints wait until it succeeds (WAL is kept meanwhile)"
                );
            }
        }
    }
}

unsafe extern "C-unwind" {
    /// `storage/pmsignal.h` (the inline `PostmasterIsAlive` calls it).
    fn PostmasterIsAliveInternal() -> bool;
}

/// Whether the postmaster is still there (the worker stops at once if not).
fn postmaster_alive() -> bool {
    // SAFETY: reads the postmaster-death pipe, as PostmasterIsAlive does.
    unsafe { PostmasterIsAliveInternal() }
}

/// Freezes durable changes, waits until none is in flight, makes a last pass
/// and lets checkpoints go: the worker's last act, however it stops.
fn stop(r: &Region) {
    // SAFETY: the worker is single-threaded.
    if unsafe { STOPPED } {
        return;
    }
    // SAFETY: as above.
    if unsafe { STOPPING } {
        // An error interrupted the last pass, and the process is exiting:
        // letting checkpoints go now could lose changes (see below).
        pgrx::ereport!(
            PgLogLevel::PANIC,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "cuckoo: the durability worker stopped before its last checkpoint cut was written".to_string(),
            "The next start recovers durable filters from the WAL since the last checkpoint."
        );
    }
    // SAFETY: as above.
    unsafe { STOPPING = true };
    abandon_marks(r);
    // Durable writers check the state while pinned: once every writer pinned
    // before the freeze is gone, nothing durable is being logged. Writers stay
    // pinned for one operation.
    let since = Instant::now();
    let mut said = since;
    while !r.set_durable_state(DurableGate::Frozen, 1 << 12) {
        if said.elapsed() > Duration::from_secs(10) {
            said = Instant::now();
            pgrx::log!(
                "cuckoo: still waiting for sessions inside durable filter operations before the last checkpoint cut"
            );
        }
        // SAFETY: a plain sleep.
        unsafe { pg_sys::pg_usleep(1000) };
    }
    // Letting a checkpoint complete before this pass is on disk would leave
    // changes that are neither on file nor in the WAL it keeps: the shutdown
    // waits until it can be written.
    loop {
        match pass(r, passes(), true) {
            Ok(()) => break,
            Err(e) => {
                warn_failed(&e, true);
                if !postmaster_alive() {
                    // No checkpoint can follow: the next start recovers.
                    // SAFETY: the worker is single-threaded; as at the end of
                    // the worker's main function.
                    unsafe {
                        STOPPED = true;
                        pg_sys::proc_exit(1);
                    }
                }
                // SAFETY: a plain sleep.
                unsafe { pg_sys::pg_usleep(1_000_000) };
            }
        }
    }
    set_delay((pg_sys::DELAY_CHKPT_START | pg_sys::DELAY_CHKPT_COMPLETE) as i32, false);
    // SAFETY: as above.
    unsafe { STOPPED = true };
}

#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    // SAFETY: the process is exiting; an error may have left the registry lock
    // held (this callback runs before PostgreSQL's own cleanup would release it).
    unsafe { pg_sys::LWLockReleaseAll() };
    stop(region());
}

/// Makes a pass if the redo position moved past `covered`, and returns the
/// redo position the files now cover. A pass that fails is repeated (every
/// second) until it succeeds, with the checkpoint-delay flags kept set: the
/// checkpoint waits meanwhile, and WAL is kept. If the server shuts down
/// meanwhile, [`stop`] makes the last attempts.
fn pass_if_needed(r: &Region, covered: u64) -> u64 {
    // SAFETY: reads the shared redo position.
    let redo = unsafe { pg_sys::GetRedoRecPtr() };
    if redo <= covered {
        return covered;
    }
    loop {
        match pass(r, passes(), false) {
            Ok(()) => return redo,
            Err(e) => {
                warn_failed(&e, false);
                retry_later(r);
            }
        }
    }
}

/// Waits a second before something that failed is tried again (the worker
/// keeps the checkpoint-delay flags meanwhile); stops the worker instead if
/// the server shuts down.
fn retry_later(r: &Region) {
    if !BackgroundWorker::wait_latch(Some(Duration::from_secs(1))) {
        stop(r);
        // SAFETY: as at the end of the worker's main function.
        unsafe { pg_sys::proc_exit(1) };
    }
}

/// Clears a checkpoint-delay flag long enough for a waiting checkpointer (it
/// looks every 10 ms) to see it, then sets it again.
fn release(flag: u32) {
    set_delay(flag as i32, false);
    // A plain sleep: a latch set meanwhile must not cut the window short.
    // SAFETY: a plain sleep.
    unsafe { pg_sys::pg_usleep(25_000) };
    set_delay(flag as i32, true);
}

/// Before durable changes open (nothing is queued or applied meanwhile):
/// the deletes a bound durable filter's account still counts as queued but
/// the shared queue does not hold were lost with it (a restart, a crash or a
/// promotion; the queue is in shared memory). Each such filter logs them as
/// settled and dropped (a `QUEUE` record): their keys stay in the filter,
/// false positives counted in `cuckoo_filters.dropped_deletes` until
/// `cf_rebuild`, and every node that replays the record agrees.
fn settle_lost_deletes() {
    let mut last = 0;
    with_registry_lock(|r, _| {
        for info in r.list_all().into_iter().filter(|i| i.durable) {
            let q = r.queue_counts(info.index);
            let lost = q.outstanding().saturating_sub(crate::sql::bound::shared::queued_for(info.db, &info.name));
            if lost == 0 {
                continue;
            }
            let add = QueueCounts { settled: lost, dropped: lost, ..QueueCounts::default() };
            last = log(&Record::Queue { gen: info.gen, add });
            r.add_queue_counts(info.index, &add);
            pgrx::log!(
                "cuckoo: {lost} queued deletes of filter \"{}\" (database {}) were lost with the queue of deletes of bound filters; their keys stay in the filter (counted in cuckoo_filters.dropped_deletes until cf_rebuild)",
                info.name,
                info.db
            );
        }
    });
    if last != 0 {
        // Sent to standbys now, not with the next record some process flushes.
        // SAFETY: flushes WAL this process wrote.
        unsafe { pg_sys::XLogFlush(last) };
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn cuckoo_durability_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(None, None);
    let r = region();
    // SAFETY: starts a transaction that stays open for the worker's life: it
    // gives this process the virtual transaction ID that checkpoints need to
    // wait for its flags. It takes no snapshot and holds no xid or lock.
    unsafe {
        pg_sys::StartTransactionCommand();
        pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0));
    }
    set_delay((pg_sys::DELAY_CHKPT_START | pg_sys::DELAY_CHKPT_COMPLETE) as i32, true);
    let _ = disk::remove_temporary(dir());
    // An earlier worker that stopped on an error may have left a cut unfinished.
    abandon_marks(r);
    // Whatever is not on file yet (restored from 0.4.0's file, or left by an
    // earlier worker that could not finish) is written before changes open.
    let mut covered = pass_if_needed(r, 0);
    // 0.4.0's file goes once every filter is on file, before any change (a
    // filter dropped later must not come back from it).
    while Path::new(LEGACY_FILE).exists() {
        match std::fs::remove_file(LEGACY_FILE).and_then(|()| std::fs::File::open(".")?.sync_all()) {
            Ok(()) => pgrx::log!("cuckoo: durable filters are now kept in {}; removed {LEGACY_FILE}", disk::DIR),
            Err(e) => {
                warn_failed(&format!("could not remove {LEGACY_FILE}: {e}"), false);
                retry_later(r);
            }
        }
    }
    settle_lost_deletes();
    with_registry_lock(|r, _| r.set_durable_state(DurableGate::Open, 0));
    pgrx::log!("cuckoo: durability worker started; durable filters accept changes");
    loop {
        reload_config_if_asked();
        covered = pass_if_needed(r, covered);
        release(pg_sys::DELAY_CHKPT_START);
        covered = pass_if_needed(r, covered);
        release(pg_sys::DELAY_CHKPT_COMPLETE);
        if !BackgroundWorker::wait_latch(Some(Duration::from_millis(50))) {
            break;
        }
    }
    stop(r);
    pgrx::log!("cuckoo: durability worker stopped; durable filters are on file");
    // SAFETY: exit code 1 asks the postmaster to start the worker again (after
    // its restart interval) unless the server is shutting down.
    unsafe { pg_sys::proc_exit(1) };
}
