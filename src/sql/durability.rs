//! Keeping durable filters across checkpoints, restarts and crashes: checkpoint
//! *cuts* written to files (`region::files`, in `cuckoo/` in the data
//! directory), the durability background worker that makes them, and the
//! restore of the files when shared memory is set up.
//!
//! # The constraint
//!
//! PostgreSQL recycles WAL older than the last checkpoint's redo position, and
//! replay starts there with the region as the postmaster restored it. So before
//! a checkpoint completes, every durable filter must be on disk as of some WAL
//! position after its redo position (or unchanged since its files), and replay
//! must find there, for each filter, exactly the changes its files do not hold.
//!
//! # Cuts
//!
//! A cut of filter `G` (see [`cut`]) takes the registry lock (so no creation,
//! drop, publish or grant of `G` is logged meanwhile), pauses `G`'s writers and
//! waits until none is inside an operation (readers are not waited for), logs a
//! `CUT` record, marks the units (1 kB of bucket words, `region::durable`) that
//! changed since `G`'s last cut, and lets the writers go. Every change of `G`
//! logged before `CUT` is in the words at that moment, none logged after: the
//! marked units as they are then, written over `G`'s previous files, are `G` as
//! of `CUT`. Writers that change a marked unit before the cut has copied it
//! copy it aside first (one unit's copy), so the cut takes each unit as of
//! `CUT` while writers go on. The units go to a new *delta* file named by the
//! end of `CUT` (its *stamp*), written under a temporary name, synced and
//! renamed: `G`'s files are a *base* and the deltas since, and `G` as of the
//! last stamp is the base with the deltas written over it in order. Only the
//! units that changed are written: nothing when nothing changed.
//!
//! A new generation (created or published) first gets a base; when the deltas
//! since a base add up to its size (or to 64 files), the cut writes a new base
//! (a *compaction*) and removes the older files. Files are removed only then
//! and when a generation is dropped or replaced, and only after a WAL record
//! says so (a compaction's `CUT` with the base flag followed by the base's
//! contents in the WAL, or a `DISCARD`): a base backup that copied the
//! directory while files went away finds in its WAL from its start what it is
//! missing. Files otherwise never change once named, so a backup (or a crash)
//! sees each one whole or not at all.
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
//! cover a position after R or every change it ever had. A pass that fails
//! (a file cannot be written) is repeated, and the checkpoint waits meanwhile.
//!
//! # Replay
//!
//! The postmaster restores every generation's files before anything forks
//! ([`restore`]); each filter remembers its stamp, and replay skips its records
//! ending at or before it. Replay applies the rest and at each `CUT` writes the
//! filter's changed units to its own files, as the primary did: a standby (and
//! crash recovery) keeps files as of every cut it replayed, so a restartpoint,
//! which cannot be held back, always finds them. The end of recovery writes
//! what changed since the last cut, before the end-of-recovery checkpoint. At a
//! clean shutdown the worker freezes durable changes, waits for those in
//! flight, and makes a last pass (its `CUT` records precede the shutdown
//! checkpoint, so a standby that restarts from that checkpoint has the files).
//! A worker that cannot make that last pass stops the server with a PANIC:
//! the next start recovers from the last checkpoint, whose files are complete.

use std::path::Path;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::shared_fns::{my_slot, with_registry_lock};
use super::wal::{log, logged_bytes, meta_of, placeholder, reason};
use crate::filter::Geometry;
use crate::region::durable::UNIT_WORDS;
use crate::region::files::{self, FileWriter, Header, Kind, Name};
use crate::region::registry::{CHANGED_WORDS, DURABLE_FROZEN, DURABLE_OPEN, NEEDS_BASE};
use crate::region::saved::{self, FileKind};
use crate::region::wal::{ContentKind, Meta, Record, CHUNK_WORDS};
use crate::region::registry::Pin;
use crate::region::{EntryInfo, Locked, Region};

/// 0.4.0's file of saved filters (read once after an update, then removed).
pub const LEGACY_FILE: &str = "cuckoo_filters.dat";

/// Set in a filter's changed bits when its next base must also go to the WAL
/// (it was restored from 0.4.0's file, which a backup may not hold).
pub const LOG_BASE: u64 = 8;

/// Records ending at or before this position are in 0.4.0's saved file the
/// region was restored from (set by the postmaster before it forks anything).
static mut LEGACY_STAMP: u64 = 0;

pub fn legacy_stamp() -> u64 {
    // SAFETY: written once by the postmaster before replay starts.
    unsafe { LEGACY_STAMP }
}

fn dir() -> &'static Path {
    Path::new(files::DIR)
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

// ----- restore ------------------------------------------------------------------

/// Restores every durable filter from its files into a region just
/// initialised (in the postmaster, before any other process runs). Never
/// raises an error: damaged files and filters that do not fit are reported in
/// the log, and their filters kept as needing a reload.
pub fn restore(r: &Region) {
    // SAFETY: single-threaded postmaster, before forking.
    unsafe { LEGACY_STAMP = 0 };
    // SAFETY: only the postmaster runs now; nothing else uses the region.
    let lk = unsafe { Locked::assume() };
    let _ = files::remove_temporary(dir());
    let by_gen = match files::list(dir()) {
        Ok(m) => m,
        Err(e) => {
            pgrx::warning!("cuckoo: cannot read the directory {}: {e}; durable filters are restored only by WAL replay, if any", files::DIR);
            r.note_restore_incomplete();
            Default::default()
        }
    };
    // Newest generation first: an older one of the same name (replaced, its
    // files not yet removed) is skipped.
    for (gen, names) in by_gen.iter().rev() {
        match files::chain(dir(), names) {
            Ok(c) => restore_chain(r, &lk, *gen, &c),
            Err(why) => restore_damaged(r, &lk, *gen, names, &why),
        }
    }
    if Path::new(LEGACY_FILE).exists() {
        restore_legacy(r, &lk);
    }
}

fn restore_chain(r: &Region, lk: &Locked, gen: u64, c: &files::Chain) {
    let meta = &c.last.meta;
    if r.find(meta.db, &meta.name).is_some() {
        return;
    }
    let spec = meta.new_filter();
    let base_has_contents = c.has_contents;
    let failed = std::cell::RefCell::new(None);
    let made = if base_has_contents {
        let fill = |out: &mut [u64]| {
            if let Err(e) = files::load(dir(), c, out) {
                *failed.borrow_mut() = Some(e);
            }
        };
        r.create(lk, &spec, &meta.params, Some(&fill), &mut |_, _| gen)
    } else {
        r.create_placeholder(lk, &spec, &meta.params, gen, c.last.reason.max(reason::NOT_RESTORED))
    };
    match made {
        Ok(info) => {
            let _ = r.set_readers(lk, &info, meta.readers);
            let info = r.entry_info(info.index).expect("just made");
            let why = match &*failed.borrow() {
                Some(e) => {
                    pgrx::warning!("cuckoo: durable filter \"{}\" (database {}) could not be read back from its files: {e}; it is kept as needing a reload", meta.name, meta.db);
                    reason::FILES_DAMAGED
                }
                // A later file that does not follow on: a base backup copied
                // while a compaction removed files (recovery then installs the
                // base the compaction logged, which clears this), or damage.
                None if base_has_contents && c.unreachable > 0 => reason::FILES_INCOMPLETE,
                None if base_has_contents => c.last.reason,
                None => 0,
            };
            if why != 0 {
                let _ = r.set_reload(lk, &info, gen, why);
            }
            r.set_stamp(info.index, c.last.name.stamp, c.base_bytes, c.delta_bytes, c.files.len() as u64 - 1);
            // The files are current.
            r.take_changed(info.index);
            if c.unreachable > 0 {
                pgrx::log!(
                    "cuckoo: durable filter \"{}\" (database {}): its files as of {} are followed by {} newer file(s) that do not follow on; it needs a reload unless recovery installs a base of it",
                    meta.name,
                    meta.db,
                    lsn(c.last.name.stamp),
                    c.unreachable
                );
            }
        }
        Err(_) => {
            // No room: keep the name (and the files, for a later restart with
            // more shared memory).
            match placeholder(r, lk, None, &spec, meta, gen, reason::NO_ROOM) {
                Ok(()) => {
                    if let Some(info) = r.find(meta.db, &meta.name) {
                        r.set_stamp(info.index, c.last.name.stamp, c.base_bytes, c.delta_bytes, c.files.len() as u64 - 1);
                        r.take_changed(info.index);
                    }
                    pgrx::log!(
                        "cuckoo: durable filter \"{}\" (database {}, {} bytes) does not fit in cuckoo.shared_memory; it is kept as needing a reload",
                        meta.name,
                        meta.db,
                        Region::bytes_for(&meta.params, true)
                    );
                }
                Err(e) => {
                    pgrx::warning!("cuckoo: durable filter \"{}\" (database {}) could not be restored at all: {e}; its files are kept", meta.name, meta.db);
                    r.note_restore_incomplete();
                }
            }
        }
    }
}

/// A generation whose files cannot be used: kept as needing a reload if any of
/// them still says what the filter is.
fn restore_damaged(r: &Region, lk: &Locked, gen: u64, names: &[Name], why: &str) {
    let meta = names.iter().rev().find_map(|n| files::read_header(&dir().join(n.file_name())).ok()).map(|h| h.meta);
    match meta {
        Some(meta) if r.find(meta.db, &meta.name).is_none() => {
            pgrx::warning!("cuckoo: the files of durable filter \"{}\" (database {}) are damaged ({why}); it is kept as needing a reload", meta.name, meta.db);
            let spec = meta.new_filter();
            if placeholder(r, lk, None, &spec, &meta, gen, reason::FILES_DAMAGED).is_ok() {
                if let Some(info) = r.find(meta.db, &meta.name) {
                    r.set_stamp(info.index, 0, 0, 0, 0);
                    // Leave the damaged files alone (nothing is written for it
                    // until it is published again or dropped).
                    r.take_changed(info.index);
                }
            }
        }
        Some(_) => {}
        None => {
            pgrx::warning!("cuckoo: the files of durable filter generation {gen:016X} in {} are damaged ({why}); the filter they held is lost unless WAL replay restores it (the files are kept)", files::DIR);
            r.note_restore_incomplete();
        }
    }
}

/// 0.4.0's saved file: filters not restored from newer files come from it, and
/// their first cut writes their base (to the WAL too: a backup taken before
/// that may not hold the old file).
fn restore_legacy(r: &Region, lk: &Locked) {
    let bytes = match std::fs::read(LEGACY_FILE) {
        Ok(b) => b,
        Err(e) => {
            pgrx::warning!("cuckoo: cannot read {LEGACY_FILE}: {e}; durable filters are not restored from it");
            return;
        }
    };
    let (kind, stamp, filters) = match saved::decode(&bytes) {
        Ok(x) => x,
        Err(why) => {
            pgrx::warning!("cuckoo: ignoring {LEGACY_FILE}: {why}; durable filters are restored only by WAL replay, if any");
            return;
        }
    };
    for f in &filters {
        if r.find(f.meta.db, &f.meta.name).is_some() {
            continue;
        }
        let spec = f.meta.new_filter();
        let why = match (kind, &f.words) {
            (FileKind::Saved, Some(words)) => {
                let fill = |out: &mut [u64]| out.copy_from_slice(words);
                match r.create(lk, &spec, &f.meta.params, Some(&fill), &mut |_, _| f.gen) {
                    Ok(info) => {
                        let _ = r.set_readers(lk, &info, f.meta.readers);
                        r.set_stamp(info.index, stamp, 0, 0, 0);
                        r.mark_changed(info.index, LOG_BASE);
                        continue;
                    }
                    Err(_) => reason::NO_ROOM,
                }
            }
            (FileKind::Saved, None) => f.reason.max(1),
            (FileKind::Live, _) => reason::NOT_SAVED,
        };
        if placeholder(r, lk, None, &spec, &f.meta, f.gen, why).is_err() {
            pgrx::warning!("cuckoo: durable filter \"{}\" (database {}) could not be restored at all", f.meta.name, f.meta.db);
        }
    }
    if kind == FileKind::Saved {
        // SAFETY: single-threaded postmaster, before forking.
        unsafe { LEGACY_STAMP = stamp };
    }
}

pub fn lsn(x: u64) -> String {
    format!("{:X}/{:X}", x >> 32, x as u32)
}

// ----- cuts -------------------------------------------------------------------------

/// Whether filter `info`'s next cut should write a new base instead of a delta.
fn compaction_due(r: &Region, info: &EntryInfo) -> bool {
    let s = r.durable_stats(info.index);
    s.deltas >= 64 || s.delta_bytes >= s.base_bytes.max(1 << 20)
}

/// Why a cut failed; `named`: its file may exist under its name (only the
/// directory's sync failed), so that the chain may hold it or not.
struct CutError {
    message: String,
    named: bool,
}

impl From<String> for CutError {
    fn from(message: String) -> CutError {
        CutError { message, named: false }
    }
}

/// Writes filter `info`'s cut at `stamp`: `marked` units (already marked in
/// its unit states, all of them for a base) into a new file, and for a
/// compaction its contents to the WAL; returns the file's size. Takes every
/// marked unit even when the file cannot be written. `pin` was taken while
/// `info` was current; it is released once the units are taken, before any
/// I/O.
#[allow(clippy::too_many_arguments)]
fn write_cut(r: &Region, info: &EntryInfo, pin: Option<Pin<'_>>, stamp: u64, base: bool, marked: &[u32], prev: u64, log_base: bool, in_worker: bool) -> Result<u64, CutError> {
    // Units are taken (copied into this process's memory) first, as fast as
    // possible, so that writers stop copying them aside; a base is taken in
    // one go, a delta likewise (at most the filter's size). A base stores
    // only units with something in them (the rest are zero).
    let mut taken: Vec<(u32, Vec<u64>)> = Vec::new();
    if let Some(units) = r.units(info) {
        let mut buf = vec![0u64; UNIT_WORDS as usize];
        for &u in marked {
            units.take(u, &mut buf);
            if !base || buf.iter().any(|&w| w != 0) {
                taken.push((u, buf.clone()));
            }
        }
    }
    drop(pin);
    let params = info.params.ok_or("a filter without parameters".to_string())?;
    let meta = meta_of(info, params);
    let g = Geometry::new(&params);
    // Files keep reasons that describe the contents, not the server's memory
    // (a filter restored without room keeps its contents in its files).
    let kept_reason = if info.reload_reason == reason::NO_ROOM && info.blocks == 0 { 0 } else { info.reload_reason };
    let header = Header {
        name: Name { gen: info.gen, stamp, kind: if base { Kind::Base } else { Kind::Delta } },
        prev: if base { 0 } else { prev },
        reason: kept_reason,
        has_contents: !(base && info.blocks == 0),
        meta: meta.clone(),
        units: taken.len() as u64,
    };
    if log_base {
        log_cut_contents(info.gen, stamp, &meta, &g, &taken);
    }
    let mut w = FileWriter::create(dir(), &header).map_err(|e| format!("cannot create a file in {}: {e}", files::DIR))?;
    for (i, (u, words)) in taken.iter().enumerate() {
        w.unit(*u, words).map_err(|e| format!("cannot write {}: {e}", header.name.file_name()))?;
        if in_worker && i == taken.len() / 2 {
            test_pause(&mut w);
        }
    }
    if in_worker && taken.is_empty() {
        test_pause(&mut w);
    }
    let file_bytes = w.finish().map_err(|e| CutError { named: matches!(e, files::Finish::Named(_)), message: format!("cannot write {}: {e}", header.name.file_name()) })?;
    if base {
        // The new base is in place: the older files are no longer read. One
        // that cannot be removed now goes at the filter's next base or drop.
        if let Err(e) = files::remove(dir(), info.gen, stamp) {
            pgrx::warning!("cuckoo: could not remove files older than {}: {e}", header.name.file_name());
        }
    }
    Ok(file_bytes)
}

/// `cuckoo.debug_cut_write_delay`: half of the file is out (flushed, under its
/// temporary name); wait while the setting asks for it (a reload that lowers
/// it ends the wait).
fn test_pause(w: &mut FileWriter) {
    let started = Instant::now();
    let mut flushed = false;
    loop {
        reload_config_if_asked();
        let delay = super::shared_fns::CUT_WRITE_DELAY_MS.get().max(0) as u128;
        if started.elapsed().as_millis() >= delay {
            return;
        }
        if !flushed {
            let _ = w.flush();
            flushed = true;
        }
        // SAFETY: a plain sleep.
        unsafe { pg_sys::pg_usleep(20_000) };
    }
}

/// Logs a compaction's base (the units with something in them) as contents
/// of kind `Cut`.
fn log_cut_contents(gen: u64, cut: u64, meta: &Meta, g: &Geometry, units: &[(u32, Vec<u64>)]) {
    let begin = log(&Record::ContentBegin { kind: ContentKind::Cut, gen, cut, meta: meta.clone() });
    let mut items = 0u64;
    let mut run: Vec<u64> = Vec::new();
    let mut run_start = 0u64;
    let flush = |run: &mut Vec<u64>, at: u64| {
        if !run.is_empty() {
            log(&Record::ContentChunk { begin, offset: at, words: std::mem::take(run) });
        }
    };
    let n = meta.params.bucket_count;
    for (u, words) in units {
        let at = *u as u64 * UNIT_WORDS;
        let len = (n - at).min(UNIT_WORDS) as usize;
        items += g.occupied_total(words[..len].iter().copied());
        if run.is_empty() || run_start + run.len() as u64 != at || run.len() + len > CHUNK_WORDS {
            flush(&mut run, run_start);
            run_start = at;
        }
        run.extend_from_slice(&words[..len]);
    }
    flush(&mut run, run_start);
    log(&Record::ContentEnd { begin, items });
}

/// Cuts filter `info` on the primary (see the module documentation), if it
/// changed and is still there.
fn cut(r: &Region, info: &EntryInfo) -> Result<(), String> {
    let slot = my_slot();
    let start = logged_bytes();
    let prepared = with_registry_lock(|_, _| {
        let now = r.entry_info(info.index).filter(|e| e.gen == info.gen && e.durable)?;
        if r.changed(now.index) == 0 {
            return None;
        }
        let paused_at = Instant::now();
        let paused = r.pause_writers(now.index);
        // Writers are pinned for one operation; this waits for those inside one
        // (spinning a while, then sleeping between checks).
        r.drain_writers(|waits| {
            if waits >= 64 {
                // SAFETY: a plain sleep (interrupts are held under the lock).
                unsafe { pg_sys::pg_usleep(50) };
            }
            true
        });
        let changed = r.take_changed(now.index);
        // (A placeholder's files keep the contents it had: never rebase them.)
        let base = changed & NEEDS_BASE != 0 || now.blocks > 0 && compaction_due(r, &now);
        // A base goes to the WAL too unless the filter never had files (a new
        // generation, whose creation or publish is in the WAL since the last
        // checkpoint): see the module documentation.
        let logged = base && now.blocks > 0 && (changed & NEEDS_BASE == 0 || changed & LOG_BASE != 0);
        let end = log(&Record::Cut { gen: now.gen, base, logged });
        let marked = r.units(&now).map(|u| u.mark(base)).unwrap_or_default();
        // Read-pinned while the units are taken: the blocks stay even if the
        // filter is dropped or replaced meanwhile.
        let pin = r.pin(slot);
        drop(paused);
        let pause = paused_at.elapsed();
        let stats = r.durable_stats(now.index);
        Some((now, changed, base, logged, end, marked, pin, stats, pause))
    });
    let Some((now, changed, base, log_base, end, marked, pin, stats, pause)) = prepared else { return Ok(()) };
    let prev = stats.stamp;
    let started = Instant::now();
    // SAFETY: flushes the WAL up to the cut before any file names it.
    unsafe { pg_sys::XLogFlush(end) };
    let res = write_cut(r, &now, pin, end, base, &marked, prev, log_base, true);
    let still = r.entry_info(now.index).filter(|e| e.gen == now.gen);
    match res {
        Ok(file_bytes) => {
            let wal_bytes = logged_bytes() - start;
            if still.is_some() {
                r.record_cut(now.index, end, base, file_bytes, wal_bytes);
            }
            pgrx::debug1!(
                "cuckoo: checkpoint cut of \"{}\" at {}: writers paused {} us, {} of {} units to a {} ({} bytes, {} bytes of WAL) in {} ms, {} writer waits for a full copy pool",
                now.name,
                lsn(end),
                pause.as_micros(),
                marked.len(),
                r.units(&now).map_or(0, |u| u.count()),
                if base { "base" } else { "delta" },
                file_bytes,
                wal_bytes,
                started.elapsed().as_millis(),
                r.durable_stats(now.index).pool_waits.saturating_sub(stats.pool_waits)
            );
            Ok(())
        }
        Err(e) if e.named => {
            // The file may be in the chain or not, whatever a crash leaves:
            // stop, as PostgreSQL does when it cannot sync, and recover from
            // the last checkpoint (whose files are complete).
            pgrx::ereport!(
                PgLogLevel::PANIC,
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!("cuckoo: durable filter \"{}\": {}", now.name, e.message)
            );
            unreachable!("PANIC does not return")
        }
        Err(e) => {
            // Nothing of this cut counts: what it took must go into the next.
            // (Pinned again: the blocks must still be the filter's.)
            if let Some(pin) = r.pin(my_slot()) {
                let same = r.entry_info(now.index).is_some_and(|e| e.gen == now.gen && e.start_block == now.start_block && e.blocks == now.blocks);
                if same {
                    if let Some(units) = r.units(&now) {
                        units.mark_changed(&marked);
                    }
                    r.mark_changed(now.index, changed);
                }
                drop(pin);
            }
            Err(format!("durable filter \"{}\": {}", now.name, e.message))
        }
    }
}

/// Removes the files of generations that no longer exist, each after a
/// `DISCARD` record (see the module documentation).
fn remove_discarded(r: &Region) -> Result<(), String> {
    if r.restore_incomplete() {
        // Some generation may be missing from the registry only because its
        // files could not be read at start-up: remove nothing until a restart.
        return Ok(());
    }
    let live: std::collections::HashSet<u64> = r.list_all().into_iter().filter(|i| i.durable).map(|i| i.gen).collect();
    let on_disk = files::list(dir()).map_err(|e| format!("cannot read {}: {e}", files::DIR))?;
    for gen in on_disk.keys().filter(|g| !live.contains(g)) {
        let end = log(&Record::Discard { gen: *gen });
        // SAFETY: flushes the WAL up to the record before the files go.
        unsafe { pg_sys::XLogFlush(end) };
        files::remove(dir(), *gen, u64::MAX).map_err(|e| format!("cannot remove the files of generation {gen:016X}: {e}"))?;
    }
    Ok(())
}

/// Gives up what a cut of this worker's that an error interrupted left marked
/// (its file was never written): the units count as changed again, their pool
/// slots are freed, and writers stop waiting for them.
fn abandon_marks(r: &Region) {
    for info in r.list_all().into_iter().filter(|i| i.durable && i.blocks > 0) {
        let slot = my_slot();
        let Some(_pin) = r.pin(slot) else { continue };
        if !r.still_current(info.index, info.seq) {
            continue;
        }
        if let Some(units) = r.units(&info) {
            if units.abandon_marks() > 0 {
                r.mark_changed(info.index, CHANGED_WORDS);
            }
        }
    }
    // No unit is marked now: slots still taken belong to filters replaced or
    // dropped since (their units are no longer reachable).
    r.reset_pool();
}

/// Cuts every durable filter that changed and removes discarded files.
fn pass(r: &Region) -> Result<(), String> {
    let mut failed = None;
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        if r.changed(info.index) == 0 {
            continue;
        }
        if let Err(e) = cut(r, &info) {
            failed.get_or_insert(e);
        }
    }
    if r.take_files_to_remove() {
        if let Err(e) = remove_discarded(r) {
            r.note_files_to_remove();
            failed.get_or_insert(e);
        }
    }
    match failed {
        None => Ok(()),
        Some(e) => Err(e),
    }
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

/// Reports a failed pass (at most every ten seconds).
fn warn_failed(e: &str) {
    // SAFETY: the worker is single-threaded.
    unsafe {
        if LAST_WARNING.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            LAST_WARNING = Some(Instant::now());
            pgrx::warning!("cuckoo: a checkpoint cut failed: {e}; checkpoints wait until it succeeds (WAL is kept meanwhile)");
        }
    }
}

/// Freezes durable changes, waits until none is in flight, makes a last pass
/// and lets checkpoints go: the worker's last act, however it stops.
fn stop(r: &Region) {
    // SAFETY: the worker is single-threaded.
    if unsafe { STOPPED } {
        return;
    }
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
    unsafe { STOPPING = true };
    abandon_marks(r);
    // Durable writers check the state while pinned: once every writer pinned
    // before the freeze is gone, nothing durable is being logged. Writers stay
    // pinned for one operation.
    let since = Instant::now();
    while !r.set_durable_state(DURABLE_FROZEN, 1 << 12) {
        if since.elapsed() > Duration::from_secs(10) {
            pgrx::log!("cuckoo: still waiting for sessions inside durable filter operations before the last checkpoint cut");
        }
        // SAFETY: a plain sleep.
        unsafe { pg_sys::pg_usleep(1000) };
    }
    let mut tries = 0;
    loop {
        match pass(r) {
            Ok(()) => break,
            Err(e) if tries < 10 => {
                tries += 1;
                pgrx::warning!("cuckoo: the last checkpoint cut failed: {e}; trying again");
                // SAFETY: a plain sleep.
                unsafe { pg_sys::pg_usleep(200_000) };
            }
            Err(e) => {
                // Letting a checkpoint complete now would leave changes that are
                // neither on file nor in the WAL it keeps: stop the server
                // instead, so that the next start recovers from the last
                // checkpoint, whose files are complete.
                pgrx::ereport!(
                    PgLogLevel::PANIC,
                    PgSqlErrorCode::ERRCODE_IO_ERROR,
                    format!("cuckoo: cannot write the durable filters' last checkpoint cut: {e}"),
                    "The next start recovers them from the WAL since the last checkpoint."
                );
            }
        }
    }
    set_delay((pg_sys::DELAY_CHKPT_START | pg_sys::DELAY_CHKPT_COMPLETE) as i32, false);
    unsafe { STOPPED = true };
}

#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    // SAFETY: the process is exiting; an error may have left the registry lock
    // held (this callback runs before PostgreSQL's own cleanup would release it).
    unsafe { pg_sys::LWLockReleaseAll() };
    stop(super::shared_fns::region());
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
        match pass(r) {
            Ok(()) => return redo,
            Err(e) => {
                warn_failed(&e);
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

/// Rereads the configuration file if a SIGHUP asked for it (the worker only).
fn reload_config_if_asked() {
    if BackgroundWorker::sighup_received() {
        // SAFETY: rereads the configuration file, as a SIGHUP asks.
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
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
    let _ = files::remove_temporary(dir());
    // An earlier worker that stopped on an error may have left a cut unfinished.
    abandon_marks(r);
    // Files of generations the registry no longer has may be left from before
    // a restart (an older generation of a name, whose removal did not happen).
    r.note_files_to_remove();
    // Whatever is not on file yet (restored from 0.4.0's file, or left by an
    // earlier worker that could not finish) is written before changes open.
    let mut covered = pass_if_needed(r, 0);
    // 0.4.0's file goes once every filter is on file, before any change (a
    // filter dropped later must not come back from it).
    while Path::new(LEGACY_FILE).exists() {
        match std::fs::remove_file(LEGACY_FILE).and_then(|()| std::fs::File::open(".")?.sync_all()) {
            Ok(()) => pgrx::log!("cuckoo: durable filters are now kept in {}; removed {LEGACY_FILE}", files::DIR),
            Err(e) => {
                warn_failed(&format!("could not remove {LEGACY_FILE}: {e}"));
                retry_later(r);
            }
        }
    }
    with_registry_lock(|r, _| r.set_durable_state(DURABLE_OPEN, 0));
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

// ----- replay (the startup process) ----------------------------------------------------

/// Replay of a `CUT` record ending at `end` whose contents do not follow (and
/// the end of recovery): writes filter `gen`'s changes since its files, if
/// any, to its own files, as the primary did.
pub fn replay_cut(r: &Region, gen: u64, base: bool, end: u64) {
    let Some(info) = r.find_gen(gen) else { return };
    if r.durable_stats(info.index).stamp >= end || r.changed(info.index) == 0 {
        return;
    }
    cut_in_replay(r, &info, base, end);
}

/// Writes filter `info`'s changes to its files at `stamp` in replay or at the
/// end of recovery (this process is its only writer). Raises an ERROR if the
/// files cannot be written: replay must not go on past a cut it could not keep.
pub fn cut_in_replay(r: &Region, info: &EntryInfo, force_base: bool, stamp: u64) {
    let changed = r.take_changed(info.index);
    let base = force_base && info.blocks > 0 || changed & NEEDS_BASE != 0;
    let slot = my_slot();
    let Some(pin) = r.pin(slot) else { error!("cuckoo: process slot out of range") };
    if !r.still_current(info.index, info.seq) {
        return;
    }
    let marked = r.units(info).map(|u| u.mark(base)).unwrap_or_default();
    let prev = r.durable_stats(info.index).stamp;
    let res = write_cut(r, info, Some(pin), stamp, base, &marked, prev, false, false);
    match res {
        Ok(file_bytes) => r.record_cut(info.index, stamp, base, file_bytes, 0),
        Err(e) => {
            if let Some(units) = r.units(info) {
                units.mark_changed(&marked);
            }
            r.mark_changed(info.index, changed);
            pgrx::ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!("cuckoo: cannot write the checkpoint cut of durable filter \"{}\" at {}: {}", info.name, lsn(stamp), e.message),
                "Replay stops here so that no restartpoint can pass a cut that is not on file; fix the cause (for example free disk space) and restart."
            );
        }
    }
}

/// The end of recovery: every filter's changes since its last cut go to its
/// files, as of `end`, before the end-of-recovery checkpoint.
pub fn cut_after_recovery(r: &Region, end: u64) {
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        replay_cut(r, info.gen, false, end);
    }
}

/// Replay of a `DISCARD` record: the generation's files go (and the filter, if
/// it is still here).
pub fn replay_discard(gen: u64) {
    if let Err(e) = files::remove(dir(), gen, u64::MAX) {
        pgrx::warning!("cuckoo: could not remove the files of generation {gen:016X}: {e}");
    }
}
