//! Checkpoint *cuts* of durable filters and the *coverage* of their files:
//! the files under `cuckoo/` in the data directory (`region::files`) that keep
//! each filter as of a WAL position, so that replay after a checkpoint needs
//! only the changes logged since. The worker (`worker`) makes cuts at
//! checkpoints; replay (`replay`) makes the same cuts of its own copy at every
//! `CUT` record it replays, and at the end of recovery; `restore` reads them
//! back.
//!
//! # The constraint
//!
//! PostgreSQL recycles WAL older than the last checkpoint's (or restartpoint's)
//! redo position, and replay starts there with the region as the postmaster
//! restored it. So before a checkpoint completes, every durable filter must be
//! on disk as of some WAL position after its redo position (or unchanged since
//! its files), and replay must find there, for each filter, exactly the changes
//! its files do not hold. This holds on every node, and what a node keeps on
//! disk follows from the WAL it replayed.
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
//! (a *compaction*), logs its contents after its `CUT`, and removes the older
//! files: a base backup that copied the directory while they went finds the
//! base in its WAL. Log, then write: a file that cannot be written is kept in
//! the worker's memory and written again, as it was, at the next try; nothing
//! is logged again.
//!
//! # Passes and the coverage file
//!
//! The worker makes a *pass* whenever a checkpoint's redo position moved:
//! it notes the WAL position `B` where the pass begins, cuts every filter that
//! changed, then logs a `PASS` record (0.10.0) that lists every live durable
//! generation with the stamp of its last file, and writes the *coverage
//! file*: every change logged before `B` is in the files (a writer marks its
//! filter changed before it logs, so a filter with a change before `B` was
//! cut by this pass), with the list of live generations. Replay writes the
//! same coverage file of its own copy when it replays `PASS` (its own cuts
//! were made at the same `CUT` records), and removes the files of
//! generations that are no longer live, as the worker does after writing it.
//! The checkpoint waits until the coverage file is on disk (`worker`).
//!
//! At start-up (`restore`), only the generations the coverage file lists are
//! restored, so a dropped filter never comes back from files left behind.
//! The files cover the position where replay starts, `R`, when the coverage
//! file's `B >= R`, or when it is *frozen*: written by the last pass before a
//! shutdown checkpoint (durable changes are frozen first) or at the end of
//! recovery (durable changes stay closed until the worker's first pass), no
//! change follows it until a new one is written. Every checkpoint that a
//! running worker holds is preceded by a pass after its redo position, so
//! `B >= R` on the primary and on every standby that replayed that pass
//! before restarting from the checkpoint.
//!
//! The one checkpoint no pass precedes is the end-of-recovery checkpoint of a
//! crash recovery (or of an archive recovery that ends at its target), which
//! PostgreSQL writes before any process may log: a standby that restarts from
//! it holds files that cover only the last `PASS` it replayed, while the
//! changes between are no longer in its WAL. So:
//!
//! - the end of recovery writes every changed filter's files as of the end of
//!   replay (no record can be logged there), and a frozen coverage file;
//! - a filter whose last file no `PASS` confirmed (its stamp differs from the
//!   one the last `PASS` listed: files written at the end of recovery, or by a
//!   pass whose `PASS` never came) gets its next base logged to the WAL by the
//!   worker's first pass, before durable changes open;
//! - a standby that restarts from a position its coverage file does not cover
//!   marks every filter it restored as needing a reload (`restart gap`); a
//!   filter installed from a base logged in the WAL is ready again, and so is
//!   one whose restored stamp the first `PASS` after the restart lists
//!   unchanged. A standby that catches up first never has such a gap.
//!
//! A file named during recovery first moves `minRecoveryPoint` past its stamp
//! (as PostgreSQL does before it writes a page), so that a backup taken from a
//! standby is consistent only once it has replayed past every file it holds.
//!
//! At a clean shutdown the worker freezes durable changes, waits for those in
//! flight, and makes a last pass (frozen): its records precede the shutdown
//! checkpoint, so a standby that restarts from that checkpoint has the files.
//! If that pass cannot be written, the shutdown waits (a warning every 10 s)
//! until it can, or until the server is stopped with `-m immediate` (the next
//! start recovers from the WAL).

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use pgrx::prelude::*;

use super::attach::{
    my_slot, reload_config_if_asked, with_registry_lock, ALWAYS_COMPACT, CRASH_POINT, CUT_WRITE_DELAY_MS,
};
use super::log::{log, logged_bytes, lsn, meta_of};
use super::reload::reason;
use crate::filter::Geometry;
use crate::region::disk::{self, CoverEntry, Coverage, FileWriter, Header, Kind, Name};
use crate::region::wal::{ContentKind, Meta, QueueCounts, Record, CHUNK_WORDS};
use crate::region::Pin;
use crate::region::TableSpec;
use crate::region::UNIT_WORDS;
use crate::region::{EntryInfo, Region};
use crate::region::{CHANGED_META, CHANGED_WORDS, NEEDS_BASE, UNVERIFIED};

/// Set in a filter's changed bits when its next base must also go to the WAL
/// (its files are not the ones every node has: written at the end of
/// recovery, or restored from 0.4.0's file, which a backup may not hold).
pub const LOG_BASE: u64 = 8;

pub(super) fn dir() -> &'static Path {
    Path::new(disk::DIR)
}

// ----- cuts -------------------------------------------------------------------------

/// Whether filter `info`'s next cut should write a new base instead of a delta.
fn compaction_due(r: &Region, info: &EntryInfo) -> bool {
    let s = r.durable_stats(info.index);
    // A filter that needs a reload keeps its older files: its contents are
    // not logged (see `cut`), so a backup copied while they went could not
    // get them back.
    info.reload_reason == 0 && (s.deltas >= 64 || s.delta_bytes >= s.base_bytes.max(1 << 20) || ALWAYS_COMPACT.get())
}

/// `cuckoo.debug_crash_point`: stops the server here (a `PANIC`, as a crash
/// of this process would) if the setting names this point, once: the file
/// `cuckoo_debug_crashed` in the data directory says it did (the restarted
/// server would otherwise stop there again).
fn crash_point(name: &str) {
    reload_config_if_asked();
    if crash_point_set(name) && std::fs::File::create_new(CRASHED).is_ok() {
        pgrx::ereport!(
            PgLogLevel::PANIC,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("cuckoo: stopping the server at debug crash point \"{name}\"")
        );
    }
}

const CRASHED: &str = "cuckoo_debug_crashed";

fn crash_point_set(name: &str) -> bool {
    CRASH_POINT.get().is_some_and(|p| p.to_bytes() == name.as_bytes()) && !Path::new(CRASHED).exists()
}

/// Why a file could not be written; `named`: it may exist under its name
/// (only the directory's sync failed), so that the chain may hold it or not.
pub(super) struct CutError {
    pub(super) message: String,
    named: bool,
}

impl From<String> for CutError {
    fn from(message: String) -> CutError {
        CutError { message, named: false }
    }
}

/// What a cut took: its file, ready to be written (again, if a write failed).
pub(super) struct Taken {
    header: Header,
    units: Vec<(u32, Vec<u64>)>,
}

impl Taken {
    fn base(&self) -> bool {
        self.header.name.kind == Kind::Base
    }
}

/// Takes filter `info`'s `marked` units (already marked in its unit states, all
/// of them for a base) as they were at `stamp`, into this process's memory.
/// `pin` was taken while `info` was current; it is released once the units
/// are taken, before any I/O.
#[allow(clippy::too_many_arguments)]
fn take(
    r: &Region,
    info: &EntryInfo,
    pin: Option<Pin<'_>>,
    stamp: u64,
    base: bool,
    marked: &[u32],
    tables: &[TableSpec],
    prev: u64,
    queue: QueueCounts,
) -> Taken {
    // Units are taken as fast as possible, so that writers stop copying them
    // aside. A base stores only units with something in them (the rest are
    // zero).
    let mut units: Vec<(u32, Vec<u64>)> = Vec::new();
    if let Some(chain_units) = r.units(info) {
        let mut buf = vec![0u64; UNIT_WORDS as usize];
        for &u in marked {
            chain_units.take(u, &mut buf);
            if !base || buf.iter().any(|&w| w != 0) {
                units.push((u, buf.clone()));
            }
        }
    }
    drop(pin);
    // Files keep reasons that describe the contents, not the server's memory
    // (a filter restored without room keeps its contents in its files).
    // A copy that may lack changes (a base backup's, before recovery proved
    // it whole) says so in every file replay writes of it, so that a restart
    // still waits for the base a compaction logged.
    let kept_reason = if info.reload_reason == reason::NO_ROOM && info.blocks == 0 { 0 } else { info.reload_reason }
        | if unverified_now(r, info.index) { reason::UNVERIFIED_COPY } else { 0 };
    let header = Header {
        name: Name { gen: info.gen, stamp, kind: if base { Kind::Base } else { Kind::Delta } },
        prev: if base { 0 } else { prev },
        reason: kept_reason,
        has_contents: !(base && info.blocks == 0),
        meta: Meta { queue, ..meta_of(info, tables) },
        units: units.len() as u64,
    };
    Taken { header, units }
}

/// Writes a cut's file; returns its size. A new base then makes the older
/// files of its generation unneeded, and they go if `remove_older`: only when
/// the base is one a backup finds in its WAL (a compaction's, logged, or one
/// installed from the WAL) or the generation's first, so that a copy of the
/// directory made while they went is never left without a way back.
fn write_taken(t: &Taken, in_worker: bool, remove_older: bool) -> Result<u64, CutError> {
    let name = t.header.name;
    let mut w =
        FileWriter::create(dir(), &t.header).map_err(|e| format!("cannot create a file in {}: {e}", disk::DIR))?;
    for (i, (u, words)) in t.units.iter().enumerate() {
        w.unit(*u, words).map_err(|e| format!("cannot write {}: {e}", name.file_name()))?;
        if in_worker && i == t.units.len() / 2 {
            test_pause(&mut w);
        }
    }
    if in_worker && t.units.is_empty() {
        test_pause(&mut w);
    }
    let file_bytes = w.finish().map_err(|e| CutError {
        named: matches!(e, disk::Finish::Named(_)),
        message: format!("cannot write {}: {e}", name.file_name()),
    })?;
    if t.base() && remove_older {
        // One that cannot be removed now goes at the filter's next base or
        // when its generation is no longer live.
        if let Err(e) = disk::remove(dir(), name.gen, name.stamp) {
            pgrx::warning!("cuckoo: could not remove files older than {}: {e}", name.file_name());
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
        None => table_zero(info),
    }
}

fn table_zero(info: &EntryInfo) -> Vec<TableSpec> {
    vec![TableSpec { params: info.params.expect("an entry records its parameters"), capacity: info.capacity }]
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
            let end = log(&Record::ContentChunk { begin, offset: at, words: std::mem::take(run) });
            // (The chunks so far reach the WAL's disk, as a crash would find them.)
            if crash_point_set("compaction-contents") {
                // SAFETY: flushes what was logged.
                unsafe { pg_sys::XLogFlush(end) };
                crash_point("compaction-contents");
            }
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

/// A cut whose file could not be written yet: written again, as it is, at
/// the worker's next try (nothing is logged again).
struct Pending {
    index: usize,
    gen: u64,
    taken: Taken,
    wal_bytes: u64,
}

/// The worker's passes: cuts whose files wait to be written, and a pass whose
/// `PASS` is logged but whose coverage file is not written yet.
#[derive(Default)]
pub(super) struct Passes {
    pending: Vec<Pending>,
    /// Where the pass in progress began (kept across its tries).
    began: Option<u64>,
    /// The coverage a logged `PASS` stands for, until it is on disk.
    coverage: Option<Coverage>,
}

/// Cuts filter `info` on the primary (see the module documentation), if it
/// changed and is still there. A file that cannot be written is kept in
/// `passes` for the next try.
fn cut(r: &Region, info: &EntryInfo, passes: &mut Passes) -> Result<(), String> {
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
        // A bound filter's queue account, as of the `CUT` (it changes only
        // inside writers' operations).
        let queue = r.queue_counts(now.index);
        // (A placeholder's files keep the contents it had: never rebase them.)
        let base = changed & NEEDS_BASE != 0 || now.blocks > 0 && compaction_due(r, &now);
        // A base goes to the WAL too unless the filter never had files (a new
        // generation, whose creation or publish is in the WAL since the last
        // checkpoint), or when its files are not every node's (`LOG_BASE`).
        // (Never the contents of a filter that needs a reload: installed on a
        // standby, they would answer there as whole.)
        let logged =
            base && now.blocks > 0 && now.reload_reason == 0 && (changed & NEEDS_BASE == 0 || changed & LOG_BASE != 0);
        let end = log(&Record::Cut { gen: now.gen, base, logged });
        let marked = r.units(&now).map(|u| u.mark(base)).unwrap_or_default();
        let tables = tables_now(r, &now);
        // Read-pinned while the units are taken: the blocks stay even if the
        // filter is dropped or replaced meanwhile.
        let pin = r.pin(slot);
        drop(paused);
        let pause = paused_at.elapsed();
        let stats = r.durable_stats(now.index);
        Some((now, base, logged, end, marked, tables, pin, stats, pause, queue))
    });
    let Some((now, base, log_base, end, marked, tables, pin, stats, pause, queue)) = prepared else { return Ok(()) };
    let started = Instant::now();
    let taken = take(r, &now, pin, end, base, &marked, &tables, stats.stamp, queue);
    if log_base {
        log_cut_contents(now.gen, end, &taken.header.meta, &taken.units);
    }
    // SAFETY: flushes the WAL up to the cut before any file names it.
    unsafe { pg_sys::XLogFlush(end) };
    crash_point("cut-logged");
    let wal_bytes = logged_bytes() - start;
    let res = write_taken(&taken, true, true);
    match res {
        Ok(file_bytes) => {
            if r.entry_info(now.index).is_some_and(|e| e.gen == now.gen) {
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
        Err(e) => {
            named_panic(&now.name, &e);
            let message = format!("durable filter \"{}\": {}", now.name, e.message);
            passes.pending.push(Pending { index: now.index, gen: now.gen, taken, wal_bytes });
            Err(message)
        }
    }
}

/// A file that may or may not be in the chain, whatever a crash leaves (the
/// directory could not be synced after it was named): stop, as PostgreSQL
/// does when it cannot sync, and recover from the last checkpoint (whose files
/// are complete).
fn named_panic(name: &str, e: &CutError) {
    if e.named {
        pgrx::ereport!(
            PgLogLevel::PANIC,
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("cuckoo: durable filter \"{name}\": {}", e.message)
        );
    }
}

/// Writes the files of earlier cuts that could not be written, as they were
/// taken; drops those of generations that are gone.
fn write_pending(r: &Region, passes: &mut Passes) -> Result<(), String> {
    let mut failed = None;
    passes.pending.retain(|p| {
        let Some(info) = r.entry_info(p.index).filter(|e| e.gen == p.gen) else { return false };
        match write_taken(&p.taken, true, true) {
            Ok(file_bytes) => {
                r.record_cut(p.index, p.taken.header.name.stamp, p.taken.base(), file_bytes, p.wal_bytes);
                false
            }
            Err(e) => {
                named_panic(&info.name, &e);
                failed.get_or_insert(format!("durable filter \"{}\": {}", info.name, e.message));
                true
            }
        }
    });
    match failed {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// The coverage entries of every durable filter (their table 0 as metadata:
/// enough to name a filter whose files are all damaged).
fn coverage_entries(r: &Region, confirmed: impl Fn(&EntryInfo) -> u64) -> Vec<CoverEntry> {
    r.list_all()
        .into_iter()
        .filter(|i| i.durable)
        .map(|i| CoverEntry {
            gen: i.gen,
            tip: file_tip(r, &i),
            confirmed: confirmed(&i),
            reason: i.reload_reason,
            meta: meta_of(&i, &table_zero(&i)),
        })
        .collect()
}

/// The stamp of filter `info`'s last file (0: it has none yet).
fn file_tip(r: &Region, info: &EntryInfo) -> u64 {
    let s = r.durable_stats(info.index);
    if s.base_bytes == 0 && s.stamp == info.gen && r.changed(info.index) & NEEDS_BASE != 0 {
        0
    } else {
        s.stamp
    }
}

/// Logs `PASS` (under the registry lock, so that its list is the registry's
/// at that point in the WAL) and returns the coverage it stands for.
fn log_pass(frozen: bool, began: u64) -> (Coverage, u64) {
    with_registry_lock(|r, _| {
        let entries = coverage_entries(r, |_| 0);
        // A filter that needs a reload is listed with no file (0): its files
        // vouch for nothing a standby could compare its own with.
        let live: Vec<(u64, u64)> = entries.iter().map(|e| (e.gen, if e.reason == 0 { e.tip } else { 0 })).collect();
        let end = log(&Record::Pass { frozen, began, live });
        let mut entries = entries;
        for e in &mut entries {
            e.confirmed = e.tip;
            if let Some(i) = r.find_gen(e.gen) {
                r.set_confirmed(i.index, e.tip);
            }
        }
        (Coverage { stamp: began, frozen, entries }, end)
    })
}

/// One pass of the worker (see the module documentation): cuts every durable
/// filter that changed, logs `PASS`, writes the coverage file and removes the
/// files of generations that are gone. `frozen`: the last pass before a
/// shutdown checkpoint (durable changes are frozen). An error leaves what was
/// done in `passes`; the next call goes on from there.
pub(super) fn pass(r: &Region, passes: &mut Passes, frozen: bool) -> Result<(), String> {
    if frozen && passes.coverage.as_ref().is_some_and(|c| !c.frozen) {
        // A frozen pass supersedes one whose coverage was not written yet.
        passes.coverage = None;
        passes.began = None;
    }
    write_pending(r, passes)?;
    if passes.coverage.is_none() {
        // SAFETY: reads the WAL insert position.
        let began = *passes.began.get_or_insert_with(|| unsafe { pg_sys::GetXLogInsertRecPtr() });
        let mut failed = None;
        for info in r.list_all().into_iter().filter(|i| i.durable) {
            if r.changed(info.index) == 0 || passes.pending.iter().any(|p| p.index == info.index) {
                continue;
            }
            if let Err(e) = cut(r, &info, passes) {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let (c, end) = log_pass(frozen, began);
        // SAFETY: the coverage file speaks of what the WAL up to `PASS` holds.
        unsafe { pg_sys::XLogFlush(end) };
        crash_point("pass-logged");
        passes.coverage = Some(c);
    }
    let c = passes.coverage.as_ref().expect("set above");
    write_coverage(c)?;
    let live: HashSet<u64> = c.entries.iter().map(|e| e.gen).collect();
    passes.coverage = None;
    passes.began = None;
    // Every change before the pass is on file (nothing is pending).
    clear_unsure();
    crash_point("coverage-written");
    remove_dead(r, &live);
    Ok(())
}

/// Writes this node's coverage file; an error says what could not be done.
/// A directory that cannot be synced after the rename leaves the file there
/// or not, whatever a crash leaves: the server stops, as PostgreSQL does when
/// it cannot sync.
fn write_coverage(c: &Coverage) -> Result<(), String> {
    disk::write_coverage(dir(), c).map_err(|e| {
        if let disk::Finish::Named(_) = e {
            pgrx::ereport!(
                PgLogLevel::PANIC,
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!("cuckoo: cannot sync {} after writing its coverage file: {e}", disk::DIR)
            );
        }
        format!("cannot write {}/{}: {e}", disk::DIR, disk::COVERAGE)
    })
}

/// Removes the files of generations that `live` (what the coverage file just
/// written lists, so that a restart never restores them) does not name.
/// Nothing when restoring could not read the directory (until a restart).
fn remove_dead(r: &Region, live: &HashSet<u64>) {
    if r.restore_incomplete() {
        return;
    }
    let Ok(on_disk) = disk::list(dir()) else { return };
    for gen in on_disk.keys().filter(|g| !live.contains(g)) {
        if let Err(e) = disk::remove(dir(), *gen, u64::MAX) {
            pgrx::warning!("cuckoo: could not remove the files of generation {gen:016X}, which is no longer live: {e}");
        }
    }
}

/// Gives up what a cut of this worker's that an error interrupted left marked
/// (its units were never taken): the units count as changed again, their pool
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

// ----- replay (the startup process) ----------------------------------------------------

/// Whether filter `index` is a copy that may lack changes (see `UNVERIFIED`)
/// while that still matters: in recovery, before it reached consistency.
pub fn unverified_now(r: &Region, index: usize) -> bool {
    // SAFETY: plain reads of this process's recovery state.
    r.durable_flags(index) & UNVERIFIED != 0 && unsafe { pg_sys::RecoveryInProgress() && !pg_sys::reachedConsistency }
}

/// A file in the data directory (outside `cuckoo/`, which may be the part
/// that cannot be written) that says this node's files may miss changes its
/// coverage file claims: written when replay or the end of recovery could not
/// write a cut or the coverage file, removed once a coverage file is written
/// with every change on file. While it exists, a restart treats the files as
/// not covering where replay starts (`restore`), so the filters say they need
/// a reload rather than answer from files that lack changes.
pub const UNSURE: &str = "cuckoo_unsure";

/// The generations [`UNSURE`] lists as this process last wrote it.
static mut UNSURE_LISTED: Option<Vec<u64>> = None;

/// The coverage file is written with every change on file: the files are
/// what it says again.
fn clear_unsure() {
    // SAFETY: as in `mark_unsure`.
    unsafe { UNSURE_LISTED = None };
    if Path::new(UNSURE).exists() {
        match std::fs::remove_file(UNSURE).and_then(|()| std::fs::File::open(".")?.sync_all()) {
            Ok(()) => pgrx::log!("cuckoo: the durable filters' files are complete again"),
            Err(e) => pgrx::warning!(
                "cuckoo: could not remove {UNSURE}: {e}; restarts treat the files as incomplete until it is removed"
            ),
        }
    }
}
pub(super) mod in_replay;

#[cfg(feature = "pg_test")]
mod pg_tests;
