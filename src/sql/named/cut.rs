//! Checkpoint *cuts* of durable filters: the files under `cuckoo/` in the data
//! directory (`region::files`) that keep each filter as of a WAL position, so
//! that replay after a checkpoint needs only the changes logged since. The
//! worker (`worker`) makes them at checkpoints, replay at every `CUT` record
//! and at the end of recovery; `restore` reads them back.
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
//! # Replay
//!
//! The postmaster restores every generation's files before anything forks
//! (`restore`); each filter remembers its stamp, and replay skips its records
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
use std::time::Instant;

use pgrx::prelude::*;

use super::attach::{my_slot, reload_config_if_asked, with_registry_lock, CUT_WRITE_DELAY_MS};
use super::log::{log, logged_bytes, lsn, meta_of};
use super::reload::reason;
use crate::filter::Geometry;
use crate::region::durable::UNIT_WORDS;
use crate::region::files::{self, FileWriter, Header, Kind, Name};
use crate::region::registry::tables::TableSpec;
use crate::region::registry::{CHANGED_WORDS, NEEDS_BASE};
use crate::region::registry::Pin;
use crate::region::wal::{ContentKind, Meta, Record, CHUNK_WORDS};
use crate::region::{EntryInfo, Region};

/// Set in a filter's changed bits when its next base must also go to the WAL
/// (it was restored from 0.4.0's file, which a backup may not hold).
pub const LOG_BASE: u64 = 8;

pub(super) fn dir() -> &'static Path {
    Path::new(files::DIR)
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
fn write_cut(r: &Region, info: &EntryInfo, pin: Option<Pin<'_>>, stamp: u64, base: bool, marked: &[u32], tables: &[TableSpec], prev: u64, log_base: bool, in_worker: bool) -> Result<u64, CutError> {
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
    let meta = meta_of(info, tables);
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
        log_cut_contents(info.gen, stamp, &meta, &taken);
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

/// Filter `info`'s tables now (call pinned, after `still_current`, with its
/// writers paused or this process its only writer); a placeholder's table 0
/// as its entry records it.
pub(super) fn tables_now(r: &Region, info: &EntryInfo) -> Vec<TableSpec> {
    match r.tables(info) {
        Some(t) => t.specs(),
        None => vec![TableSpec { params: info.params.expect("an entry records its parameters"), capacity: info.capacity }],
    }
}

/// `cuckoo.debug_cut_write_delay`: half of the file is out (flushed, under its
/// temporary name); wait while the setting asks for it (a reload that lowers
/// it ends the wait).
fn test_pause(w: &mut FileWriter) {
    let started = Instant::now();
    let mut flushed = false;
    loop {
        reload_config_if_asked();
        let delay = CUT_WRITE_DELAY_MS.get().max(0) as u128;
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
/// of kind `Cut`: runs of words at their place among all tables' words.
fn log_cut_contents(gen: u64, cut: u64, meta: &Meta, units: &[(u32, Vec<u64>)]) {
    let begin = log(&Record::ContentBegin { kind: ContentKind::Cut, gen, cut, meta: meta.clone() });
    let mut items = 0u64;
    let mut run: Vec<u64> = Vec::new();
    let mut run_start = 0u64;
    let flush = |run: &mut Vec<u64>, at: u64| {
        if !run.is_empty() {
            log(&Record::ContentChunk { begin, offset: at, words: std::mem::take(run) });
        }
    };
    let geometries: Vec<Geometry> = meta.tables().iter().map(|t| Geometry::new(&t.params)).collect();
    for (u, words) in units {
        let Some((table, at, len)) = meta.unit_span(*u as u64) else { continue };
        items += geometries[table].occupied_total(words[..len].iter().copied());
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
        let tables = tables_now(r, &now);
        // Read-pinned while the units are taken: the blocks stay even if the
        // filter is dropped or replaced meanwhile.
        let pin = r.pin(slot);
        drop(paused);
        let pause = paused_at.elapsed();
        let stats = r.durable_stats(now.index);
        Some((now, changed, base, logged, end, marked, tables, pin, stats, pause))
    });
    let Some((now, changed, base, log_base, end, marked, tables, pin, stats, pause)) = prepared else { return Ok(()) };
    let prev = stats.stamp;
    let started = Instant::now();
    // SAFETY: flushes the WAL up to the cut before any file names it.
    unsafe { pg_sys::XLogFlush(end) };
    let res = write_cut(r, &now, pin, end, base, &marked, &tables, prev, log_base, true);
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
pub(super) fn abandon_marks(r: &Region) {
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
pub(super) fn pass(r: &Region) -> Result<(), String> {
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
    let tables = tables_now(r, info);
    let prev = r.durable_stats(info.index).stamp;
    let res = write_cut(r, info, Some(pin), stamp, base, &marked, &tables, prev, false, false);
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
