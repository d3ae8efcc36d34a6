//! Keeping durable filters across restarts, crashes and checkpoints: the saved
//! file (`cuckoo_filters.dat` in the data directory), and the durability
//! background worker that logs an image pass after every checkpoint's redo
//! position and saves the filters when it stops.
//!
//! # Why every checkpoint is followed by a complete image pass
//!
//! PostgreSQL 15 offers no checkpoint hook, but a checkpoint waits, after
//! fixing its redo position (phase 1), for every process that has
//! `DELAY_CHKPT_START` set in its PGPROC when it looks, and, after flushing
//! buffers (phase 2), for every process with `DELAY_CHKPT_COMPLETE` set when it
//! looks; it waits until that process clears the flag. The worker keeps both
//! flags set (it holds a virtual transaction ID for it, as the waits require)
//! and repeats: (1) if the redo position moved past the last one it covered, it
//! logs a pass; (2) it clears `DELAY_CHKPT_START` for a moment and sets it
//! again; (3) as (1); (4) it clears `DELAY_CHKPT_COMPLETE` for a moment and sets
//! it again. Take a checkpoint whose redo position R was fixed at time T_R,
//! which checks `START` holders at T_s and `COMPLETE` holders at T_c
//! (T_R < T_s < T_c), and writes its record after T_c:
//! - If `START` was set at T_s, the checkpoint waited until a step (2) cleared
//!   it, and T_c comes later. If `COMPLETE` is set at T_c, it waits for the
//!   next step (4), which follows a step (3) that read the redo position after
//!   T_R; if `COMPLETE` is clear at T_c, we are inside a step (4), after the
//!   step (3) of the same round, which also read after T_s > T_R. Either way a
//!   pass that began after R is in the WAL before the checkpoint record.
//! - If `START` was clear at T_s, we were inside a step (2); the step (3) after
//!   it reads the redo position after T_s > T_R, and whether `COMPLETE` is set
//!   at T_c (the checkpoint waits for a later step (4)) or clear (T_c is inside
//!   the step (4) that follows that step (3)), the pass precedes the record.
//! So a completed checkpoint always has a complete pass after its redo
//! position, and recovery from it rebuilds every durable filter.
//!
//! Durable changes are accepted only while the worker runs and has logged its
//! first pass (the region's durable state is open). When it stops (shutdown,
//! or an error), it first freezes durable changes and waits until none is in
//! flight, then saves every durable filter to the file with the WAL position
//! of the freeze: a checkpoint that completes while the worker is absent has
//! no pass after it, but no durable change was logged after the file either.
//! The end of recovery saves the file too (the end-of-recovery checkpoint runs
//! before the worker starts). When durable changes open, the file is rewritten
//! as a *live* list of names: if the server then stops without saving (the
//! worker killed), the next start shows those filters as needing a reload
//! unless recovery restores them from the WAL.

use std::io::Write;
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::shared_fns::{my_slot, with_registry_lock};
use super::wal::{log, log_content, meta_of, placeholder, reason};
use crate::filter::Geometry;
use crate::region::registry::{DURABLE_FROZEN, DURABLE_OPEN};
use crate::region::saved::{self, FileKind, SavedFilter};
use crate::region::wal::{ContentKind, Record};
use crate::region::{Locked, Region};

/// The file, relative to the data directory (every server process's working
/// directory).
pub const FILE: &str = "cuckoo_filters.dat";

/// Records ending at or before this position are in the saved file the region
/// was restored from (set by the postmaster before it forks anything).
static mut FILE_STAMP: u64 = 0;

pub fn file_stamp() -> u64 {
    // SAFETY: written once by the postmaster before replay starts.
    unsafe { FILE_STAMP }
}

/// Registers the worker (from `_PG_init`, while preloading).
pub fn register_worker() {
    BackgroundWorkerBuilder::new("cuckoo durability")
        .set_type("cuckoo durability")
        .set_library("cuckoo")
        .set_function("cuckoo_durability_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Restores the saved filters into a region just initialised (in the
/// postmaster, before any other process runs). Never raises an error: a damaged
/// file or filters that do not fit are reported in the log.
pub fn restore(r: &Region) {
    // SAFETY: single-threaded postmaster, before forking.
    unsafe { FILE_STAMP = 0 };
    let bytes = match std::fs::read(FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            pgrx::warning!("cuckoo: cannot read {FILE}: {e}; durable filters are not restored from it");
            return;
        }
    };
    let (kind, stamp, filters) = match saved::decode(&bytes) {
        Ok(x) => x,
        Err(why) => {
            pgrx::warning!("cuckoo: ignoring {FILE}: {why}; durable filters are restored only by WAL replay, if any");
            return;
        }
    };
    // SAFETY: only the postmaster runs now; nothing else uses the region.
    let lk = unsafe { Locked::assume() };
    let mut lost = Vec::new();
    for f in &filters {
        let spec = f.meta.new_filter();
        let why = match (kind, &f.words) {
            (FileKind::Saved, Some(words)) => {
                let fill = |out: &mut [u64]| out.copy_from_slice(words);
                match r.create(&lk, &spec, &f.meta.params, Some(&fill), &mut |_, _| f.gen) {
                    Ok(info) => {
                        let _ = r.set_readers(&lk, &info, f.meta.readers);
                        continue;
                    }
                    Err(_) => reason::NO_ROOM,
                }
            }
            (FileKind::Saved, None) => f.reason.max(1),
            (FileKind::Live, _) => reason::NOT_SAVED,
        };
        if let Err(e) = placeholder(r, &lk, None, &spec, &f.meta, f.gen, why) {
            lost.push(format!("\"{}\" (database {}): {e}", f.meta.name, f.meta.db));
        }
        if why == reason::NO_ROOM {
            pgrx::log!(
                "cuckoo: durable filter \"{}\" (database {}, {} bytes) does not fit in cuckoo.shared_memory; it is kept as needing a reload",
                f.meta.name,
                f.meta.db,
                Region::bytes_for(&f.meta.params)
            );
        }
    }
    if !lost.is_empty() {
        pgrx::warning!("cuckoo: durable filters that could not be restored at all: {}", lost.join(", "));
    }
    if kind == FileKind::Saved {
        // SAFETY: single-threaded postmaster, before forking.
        unsafe { FILE_STAMP = stamp };
    }
}

/// Every durable filter of the region: contents for usable ones when `words`.
/// Call where no durable change can be in flight (frozen, or in recovery).
fn collect(r: &Region, words: bool) -> Vec<SavedFilter> {
    let slot = my_slot();
    let mut out = Vec::new();
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        let Some(params) = info.params else { continue };
        let meta = meta_of(&info, params);
        if !info.usable() || !words {
            out.push(SavedFilter { gen: info.gen, reason: info.reload_reason, meta, items: 0, words: None });
            continue;
        }
        let mut buf = vec![0u64; params.bucket_count as usize];
        {
            let Some(_pin) = r.pin(slot) else { continue };
            if !r.still_current(info.index, info.seq) {
                continue;
            }
            r.table(&info).copy_words(&mut buf);
        }
        let items = Geometry::new(&params).occupied_total(buf.iter().copied());
        out.push(SavedFilter { gen: info.gen, reason: 0, meta, items, words: Some(buf) });
    }
    out
}

/// Writes the file atomically (temporary file, fsync, rename, fsync of the
/// directory).
fn write_file(bytes: &[u8]) -> std::io::Result<()> {
    let tmp = format!("{FILE}.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, FILE)?;
    std::fs::File::open(".")?.sync_all()
}

fn save(r: &Region, kind: FileKind, stamp: u64) {
    let filters = collect(r, kind == FileKind::Saved);
    let n = filters.len();
    match write_file(&saved::encode(kind, stamp, &filters)) {
        Ok(()) => pgrx::debug1!("cuckoo: wrote {FILE} ({kind:?}, {n} filters)"),
        Err(e) => pgrx::warning!(
            "cuckoo: could not write {FILE}: {e}; {}",
            if kind == FileKind::Saved {
                "durable filters will not come back after a restart unless WAL replay restores them"
            } else {
                "the file left from the last stop no longer describes the filters"
            }
        ),
    }
}

/// End of recovery (the startup process): saves the replayed filters.
pub fn save_after_recovery(end: u64) {
    save(super::shared_fns::region(), FileKind::Saved, end);
}

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

static mut SAVED_ON_EXIT: bool = false;

/// Freezes durable changes, waits until none is in flight, saves the file and
/// lets checkpoints go: the worker's last act, however it stops.
fn stop(r: &Region) {
    // SAFETY: the worker is single-threaded.
    if unsafe { SAVED_ON_EXIT } {
        return;
    }
    unsafe { SAVED_ON_EXIT = true };
    with_registry_lock(|r, _| r.set_durable_state(DURABLE_FROZEN, 0));
    // Durable writers check the state while pinned: once every pin taken
    // before the freeze is gone, nothing durable is being logged. Sessions
    // stay pinned for one operation; after about ten seconds something is
    // wrong, and the file is saved anyway, with a warning.
    let mut drained = false;
    for _ in 0..10_000 {
        if r.set_durable_state(DURABLE_FROZEN, 1 << 10) {
            drained = true;
            break;
        }
        // SAFETY: a plain sleep.
        unsafe { pg_sys::pg_usleep(1000) };
    }
    if !drained {
        // A change still in flight has not been acknowledged to anyone; the
        // file holds it or not, either is a state the filter could have had.
        pgrx::warning!("cuckoo: sessions stayed inside filter operations for 10 s while durable filters were being saved; changes they had not finished may be missing from {FILE}");
    }
    // SAFETY: reads the WAL insert position.
    let stamp = unsafe { pg_sys::GetXLogInsertRecPtr() };
    save(r, FileKind::Saved, stamp);
    set_delay((pg_sys::DELAY_CHKPT_START | pg_sys::DELAY_CHKPT_COMPLETE) as i32, false);
}

#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    // SAFETY: the process is exiting; an error may have left the registry lock
    // held (this callback runs before PostgreSQL's own cleanup would release it).
    unsafe { pg_sys::LWLockReleaseAll() };
    stop(super::shared_fns::region());
}

/// Logs a complete image pass; returns the redo position read before it began.
fn pass(_r: &Region) -> u64 {
    // SAFETY: reads the shared redo position.
    let redo = unsafe { pg_sys::GetRedoRecPtr() };
    // Under the registry lock, so that every creation or publish logged before
    // PASS_BEGIN is linked (and listed) and every later one is logged after it.
    let (begin, list) = with_registry_lock(|r, _| (log(&Record::PassBegin), r.list_all()));
    let slot = my_slot();
    let mut n = 0;
    for listed in list.into_iter().filter(|i| i.durable) {
        let Some(params) = listed.params else { continue };
        let mut buf = if listed.usable() { vec![0u64; params.bucket_count as usize] } else { Vec::new() };
        let mut waits = 0u64;
        loop {
            // Each filter is logged under the registry lock: no publish, drop or
            // grant can come between reading its entry and logging its image, so
            // the image is of the generation that is current when it is logged,
            // with its current grant. (Waiting for pinned writers under the lock
            // cannot deadlock: nobody takes the lock while pinned.)
            let logged = with_registry_lock(|r, _| {
                let Some(now) = r.entry_info(listed.index).filter(|e| e.gen == listed.gen && e.durable) else {
                    // Dropped or republished since PASS_BEGIN: that change was
                    // logged after it and stands for itself.
                    return Some(false);
                };
                let meta = meta_of(&now, params);
                if !now.usable() {
                    log(&Record::Placeholder { gen: now.gen, reason: now.reload_reason, meta });
                    return Some(true);
                }
                let pin = r.pin(slot)?;
                if !r.still_current(now.index, now.seq) {
                    return None;
                }
                let imaged = r.image(&now, slot, &mut buf, 1 << 22, |words, items| {
                    log_content(ContentKind::Image, now.gen, &meta, words, items);
                });
                drop(pin);
                imaged.ok().map(|()| true)
            });
            match logged {
                Some(counted) => {
                    n += counted as u64;
                    break;
                }
                None => {
                    // Some process stayed inside a filter operation; the pass
                    // must complete, so try again (checkpoints wait meanwhile).
                    waits += 1;
                    if waits % 1000 == 0 {
                        pgrx::warning!("cuckoo: the checkpoint image of filter \"{}\" has waited {} s for sessions inside filter operations", listed.name, waits / 1000);
                    }
                    pgrx::check_for_interrupts!();
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    log(&Record::PassDone { begin, filters: n });
    redo
}

fn pass_if_needed(r: &Region, covered: u64) -> u64 {
    // SAFETY: reads the shared redo position.
    let redo = unsafe { pg_sys::GetRedoRecPtr() };
    if redo > covered {
        pass(r)
    } else {
        covered
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

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn cuckoo_durability_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(None, None);
    let r = super::shared_fns::region();
    // SAFETY: starts a transaction that stays open for the worker's life: it
    // gives this process the virtual transaction ID that checkpoints need to
    // wait for its flags. It takes no snapshot and holds no xid or lock.
    unsafe {
        pg_sys::StartTransactionCommand();
        pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0));
    }
    set_delay((pg_sys::DELAY_CHKPT_START | pg_sys::DELAY_CHKPT_COMPLETE) as i32, true);
    let mut covered = pass(r);
    save(r, FileKind::Live, 0);
    with_registry_lock(|r, _| r.set_durable_state(DURABLE_OPEN, 0));
    pgrx::log!("cuckoo: durability worker started; durable filters accept changes");
    loop {
        covered = pass_if_needed(r, covered);
        release(pg_sys::DELAY_CHKPT_START);
        covered = pass_if_needed(r, covered);
        release(pg_sys::DELAY_CHKPT_COMPLETE);
        if !BackgroundWorker::wait_latch(Some(Duration::from_millis(50))) {
            break;
        }
    }
    stop(r);
    pgrx::log!("cuckoo: durability worker stopped; durable filters saved to {FILE}");
    // SAFETY: exit code 1 asks the postmaster to start the worker again (after
    // its restart interval) unless the server is shutting down.
    unsafe { pg_sys::proc_exit(1) };
}
