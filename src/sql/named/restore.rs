//! Restoring durable filters when shared memory is set up (in the postmaster,
//! before anything forks): each generation that the coverage file lists from
//! its checkpoint files (`cut`), and once after an update from 0.4.0 its
//! single saved file. What cannot be restored is kept as a placeholder that
//! needs a reload (`reload`), and replay goes on from each filter's stamp.
//! When the coverage file does not cover the position where replay starts
//! (a standby that restarts from an end-of-recovery checkpoint of its
//! primary), every filter restored needs a reload until recovery proves it
//! whole (`cut`).

use std::collections::HashMap;
use std::path::Path;

use super::cut::{dir, LOG_BASE};
use super::log::lsn;
use super::reload::{placeholder, reason};
use crate::region::disk::{self, CoverEntry, Coverage, Name};
use crate::region::word_offsets;
use crate::region::{decode_saved, FileKind};
use crate::region::{Locked, Region};
use crate::region::{NEEDS_BASE, UNVERIFIED};

/// Where replay will start (the checkpoint's redo position; a base backup's
/// from its label), if it can be read; and whether the data directory is a
/// copy being recovered (a base backup or `pg_rewind`: its files may be from
/// several moments).
fn replay_start() -> (Option<u64>, bool) {
    // (Read in the data directory, the postmaster's working directory.)
    if let Ok(label) = std::fs::read_to_string("backup_label") {
        let start = label
            .lines()
            .find_map(|l| l.strip_prefix("START WAL LOCATION: "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(parse_lsn);
        return (start, true);
    }
    let Ok(b) = std::fs::read("global/pg_control") else { return (None, false) };
    let at = std::mem::offset_of!(pgrx::pg_sys::ControlFileData, checkPointCopy)
        + std::mem::offset_of!(pgrx::pg_sys::CheckPoint, redo);
    let redo = b.get(at..at + 8).map(|x| u64::from_ne_bytes(x.try_into().unwrap()));
    let bs = std::mem::offset_of!(pgrx::pg_sys::ControlFileData, backupStartPoint);
    let copying = b.get(bs..bs + 8).is_some_and(|x| u64::from_ne_bytes(x.try_into().unwrap()) != 0);
    (redo, copying)
}

fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.split_once('/')?;
    Some(u64::from_str_radix(hi, 16).ok()? << 32 | u64::from_str_radix(lo, 16).ok()?)
}

/// What restoring knows of each generation: the coverage file's entry, the
/// replay start, whether the files are a copy, whether they leave a gap.
struct Context<'c> {
    listed: Option<HashMap<u64, &'c CoverEntry>>,
    start: Option<u64>,
    copy: bool,
    gap: bool,
    recovering: bool,
}

/// 0.4.0's file of saved filters (read once after an update, then removed).
pub const LEGACY_FILE: &str = "cuckoo_filters.dat";

/// Records ending at or before this position are in 0.4.0's saved file the
/// region was restored from (set by the postmaster before it forks anything).
static mut LEGACY_STAMP: u64 = 0;

pub fn legacy_stamp() -> u64 {
    // SAFETY: written once by the postmaster before replay starts.
    unsafe { LEGACY_STAMP }
}

/// Set when restore found that the files do not cover where replay starts
/// (a restart gap); read by replay's first `PASS`.
static mut RESTORED_WITH_GAP: bool = false;

pub fn restored_with_gap() -> bool {
    // SAFETY: written by the postmaster before anything forks.
    unsafe { RESTORED_WITH_GAP }
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
    let _ = disk::remove_temporary(dir());
    let by_gen = match disk::list(dir()) {
        Ok(m) => m,
        Err(e) => {
            pgrx::warning!(
                "cuckoo: cannot read the directory {}: {e}; durable filters are restored only by WAL replay, if any",
                disk::DIR
            );
            r.note_restore_incomplete();
            Default::default()
        }
    };
    for name in disk::foreign(dir()).unwrap_or_default() {
        pgrx::warning!("cuckoo: {}/{name} is not a file of cuckoo's; it is ignored and left in place", disk::DIR);
    }
    let mut damaged = false;
    let coverage: Option<Coverage> = match disk::read_coverage(dir()) {
        Ok(c) => c,
        Err(why) => {
            // Every generation's files are restored, needing a reload: which
            // are live and what they cover is not known.
            pgrx::warning!("cuckoo: {why}; every durable filter with files in {} is restored from them, needing a reload until recovery confirms it", disk::DIR);
            damaged = true;
            None
        }
    };
    let (start, copy) = replay_start();
    let unsure = Path::new(super::cut::UNSURE).exists();
    let gap = damaged
        || unsure
        || match (&coverage, start) {
            (Some(c), Some(start)) => !c.frozen && c.stamp < start,
            _ => false,
        };
    // What the marker lists: the filters in memory when it was written,
    // including any that have no files yet.
    let unsure_list = if unsure {
        disk::read_coverage_as(Path::new("."), super::cut::UNSURE).unwrap_or_else(|why| {
            pgrx::warning!("cuckoo: {why}; durable filters with no files in {} are not known to this node", disk::DIR);
            None
        })
    } else {
        None
    };
    if unsure {
        pgrx::warning!(
            "cuckoo: {} says the durable filters' files may lack changes (a cut could not be written); each filter restored from them needs a reload until recovery installs its contents from the WAL or confirms them",
            super::cut::UNSURE
        );
    } else if let (Some(c), Some(start), true) = (&coverage, start, gap && !damaged) {
        pgrx::warning!(
            "cuckoo: the durable filters' files cover the WAL up to {}, but replay starts at {} (this node restarted from a checkpoint its primary wrote at the end of a recovery); each filter restored from them needs a reload until recovery installs its contents from the WAL or confirms them",
            lsn(c.stamp),
            lsn(start)
        );
    }
    // A node that will replay as a standby (or in point-in-time recovery)
    // marks nothing for its own first pass: its end of recovery, if it comes,
    // decides that, and a base written for it here would remove older files
    // that no logged base stands for.
    let recovering = Path::new("standby.signal").exists() || Path::new("recovery.signal").exists();
    // SAFETY: single-threaded postmaster, before forking.
    unsafe { RESTORED_WITH_GAP = gap };
    let ctx = Context {
        listed: coverage.as_ref().map(|c| c.entries.iter().map(|e| (e.gen, e)).collect()),
        start,
        copy,
        gap,
        recovering,
    };
    // Newest generation first: an older one of the same name (replaced, its
    // files not yet removed) is skipped.
    for (gen, names) in by_gen.iter().rev() {
        if !ctx.gap && ctx.listed.as_ref().is_some_and(|l| !l.contains_key(gen)) {
            // Dropped or replaced before the coverage file was written (its
            // files go at the next pass), or made after it (replay makes it
            // again). With a gap, one made after it may never be replayed:
            // it is restored too (needing a reload, like every filter then;
            // the first PASS replayed drops it if it was dropped meanwhile).
            continue;
        }
        match disk::chain(dir(), names) {
            Ok(c) => restore_chain(r, &lk, *gen, &c, &ctx),
            Err(why) => restore_damaged(r, &lk, *gen, names, &why, &ctx),
        }
    }
    if let Some(listed) = &ctx.listed {
        for (gen, e) in listed {
            // Listed with no file yet (made after the coverage's position:
            // replay makes it again), unless it needed a reload.
            if by_gen.contains_key(gen) || e.tip == 0 && e.reason == 0 || !newest_of_name(r, &lk, *gen, &e.meta) {
                continue;
            }
            if e.tip == 0 {
                keep_placeholder(r, &lk, *gen, &e.meta, e.reason, e.confirmed);
                continue;
            }
            // Listed with files that are gone.
            pgrx::warning!(
                "cuckoo: the files of durable filter \"{}\" (database {}) are missing from {}; it is kept as needing a reload",
                e.meta.name,
                e.meta.db,
                disk::DIR
            );
            keep_placeholder(r, &lk, *gen, &e.meta, reason::FILES_MISSING, e.confirmed);
        }
    }
    for e in unsure_list.iter().flat_map(|c| c.entries.iter()) {
        if by_gen.contains_key(&e.gen) || !newest_of_name(r, &lk, e.gen, &e.meta) {
            continue;
        }
        // In memory when this node could not write its files, and on file
        // nowhere: its creation may be before where replay starts.
        pgrx::warning!(
            "cuckoo: durable filter \"{}\" (database {}) has no files in {} ({} lists it); it is kept as needing a reload",
            e.meta.name,
            e.meta.db,
            disk::DIR,
            super::cut::UNSURE
        );
        keep_placeholder(
            r,
            &lk,
            e.gen,
            &e.meta,
            if e.reason != 0 { e.reason } else { reason::FILES_MISSING },
            e.confirmed,
        );
    }
    if Path::new(LEGACY_FILE).exists() {
        restore_legacy(r, &lk);
    }
}

/// Whether generation `gen` of `meta`'s name is to be kept: no filter of that
/// name is restored, or only an older generation (generations are WAL
/// positions), which goes.
fn newest_of_name(r: &Region, lk: &Locked, gen: u64, meta: &crate::region::wal::Meta) -> bool {
    match r.find(meta.db, &meta.name) {
        None => true,
        Some(i) if i.gen < gen => r.drop_filter(lk, &i).is_ok(),
        Some(_) => false,
    }
}

/// Keeps generation `gen` of `meta` as needing a reload, its stamp unknown.
fn keep_placeholder(r: &Region, lk: &Locked, gen: u64, meta: &crate::region::wal::Meta, why: u64, confirmed: u64) {
    let spec = meta.new_filter();
    if placeholder(r, lk, None, &spec, meta, gen, why).is_ok() {
        if let Some(info) = r.find(meta.db, &meta.name) {
            r.set_stamp(info.index, 0, 0, 0, 0);
            r.set_confirmed(info.index, confirmed);
            // Leave the files alone (nothing is written for it until it is
            // published again or dropped).
            r.take_changed(info.index);
        }
    }
}

/// After filter `index` was restored with its last file at `tip`, whose
/// header gave `header_reason`: what the coverage file confirmed, whether its
/// next base goes to the WAL, whether it needs a reload for a gap, whether a
/// base in the WAL must replace it.
fn after_restore(r: &Region, lk: &Locked, index: usize, gen: u64, tip: u64, header_reason: u64, ctx: &Context<'_>) {
    // Whether replay wrote the file of a copy that may lack changes (see
    // `reason::UNVERIFIED_COPY`).
    let unverified = header_reason & reason::UNVERIFIED_COPY != 0;
    let confirmed = match &ctx.listed {
        Some(l) => l.get(&gen).map_or(0, |e| e.confirmed),
        // Files written before 0.10.0: every node's, as far as is known.
        None => tip,
    };
    r.set_confirmed(index, confirmed);
    // A file written while this node's copy needed a reload or may have
    // lacked changes (by replay, at a cut of the primary's) is not the
    // primary's file of that stamp: a `PASS` listing the stamp proves nothing.
    r.set_restored(index, if header_reason == 0 { tip } else { 0 });
    let flagged = ctx.gap || r.entry_info(index).is_some_and(|i| i.reload_reason != 0);
    if tip != confirmed && !flagged && !ctx.recovering {
        r.mark_changed(index, LOG_BASE | NEEDS_BASE);
    }
    if unverified || ctx.copy && ctx.start.is_some_and(|s| tip < s) {
        r.set_durable_flags(index, UNVERIFIED);
    }
    if ctx.gap {
        if let Some(info) = r.entry_info(index).filter(|i| i.reload_reason == 0) {
            let _ = r.set_reload(lk, &info, gen, reason::RESTART_GAP);
        }
    }
}

fn restore_chain(r: &Region, lk: &Locked, gen: u64, c: &disk::Chain, ctx: &Context<'_>) {
    let meta = &c.last.meta;
    // The header's reload reason, without the unverified bit.
    let file_reason = c.last.reason & !reason::UNVERIFIED_COPY;
    if r.find(meta.db, &meta.name).is_some() {
        return;
    }
    let spec = meta.new_filter();
    let base_has_contents = c.has_contents;
    let failed = std::cell::RefCell::new(None);
    let tables = meta.tables();
    let made = if base_has_contents {
        // All tables' words read at once, then handed to each table.
        let mut all = Vec::new();
        if all.try_reserve_exact(meta.word_count() as usize).is_ok()
            && meta.word_count().saturating_mul(8) <= r.layout().data_bytes()
        {
            all.resize(meta.word_count() as usize, 0u64);
            if let Err(e) = disk::load(dir(), c, &mut all) {
                *failed.borrow_mut() = Some(e);
            }
        } else {
            all.clear();
        }
        let offsets = word_offsets(tables.iter().map(|t| t.params.bucket_count));
        let fill = |i: usize, out: &mut [u64]| out.copy_from_slice(&all[offsets[i]..offsets[i] + out.len()]);
        if all.is_empty() {
            Err(crate::region::RegionError::NoSpace {
                requested: meta.word_count() * 8,
                free: r.free_bytes(),
                largest: 0,
                pending: 0,
            })
        } else {
            r.create(lk, &spec, &tables, Some(&fill), &mut |_, _| gen)
        }
    } else {
        r.create_placeholder(lk, &spec, &meta.params, gen, file_reason.max(reason::NOT_RESTORED))
    };
    match made {
        Ok(info) => {
            let _ = r.set_readers(lk, &info, meta.readers);
            r.set_queue_counts(info.index, &meta.queue);
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
                None if base_has_contents => file_reason,
                None => 0,
            };
            if why != 0 {
                let _ = r.set_reload(lk, &info, gen, why);
            }
            r.set_stamp(info.index, c.last.name.stamp, c.base_bytes, c.delta_bytes, c.files.len() as u64 - 1);
            // The files are current.
            r.take_changed(info.index);
            after_restore(r, lk, info.index, gen, c.last.name.stamp, c.last.reason, ctx);
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
                        r.set_stamp(
                            info.index,
                            c.last.name.stamp,
                            c.base_bytes,
                            c.delta_bytes,
                            c.files.len() as u64 - 1,
                        );
                        r.take_changed(info.index);
                        let confirmed =
                            ctx.listed.as_ref().and_then(|l| l.get(&gen)).map_or(c.last.name.stamp, |e| e.confirmed);
                        r.set_confirmed(info.index, confirmed);
                    }
                    pgrx::log!(
                        "cuckoo: durable filter \"{}\" (database {}, {} bytes) does not fit in cuckoo.shared_memory; it is kept as needing a reload",
                        meta.name,
                        meta.db,
                        Region::bytes_for_tables(&meta.tables(), true)
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

/// A generation whose files cannot be used: kept as needing a reload, named
/// by any of its files whose header still reads, or by the coverage file.
/// Costs only its own filter: the other generations are restored, and files
/// are still removed.
fn restore_damaged(r: &Region, lk: &Locked, gen: u64, names: &[Name], why: &str, ctx: &Context<'_>) {
    let entry = ctx.listed.as_ref().and_then(|l| l.get(&gen));
    let meta = names
        .iter()
        .rev()
        .find_map(|n| disk::read_header(&dir().join(n.file_name())).ok())
        .map(|h| h.meta)
        .or_else(|| entry.map(|e| e.meta.clone()));
    match meta {
        Some(meta) if r.find(meta.db, &meta.name).is_none() => {
            pgrx::warning!("cuckoo: the files of durable filter \"{}\" (database {}) are damaged ({why}); it is kept as needing a reload", meta.name, meta.db);
            keep_placeholder(r, lk, gen, &meta, reason::FILES_DAMAGED, entry.map_or(0, |e| e.confirmed));
        }
        Some(_) => {}
        None => {
            // Not listed (the coverage file is from before 0.10.0, or gone)
            // and no header reads: the filter cannot be named.
            pgrx::warning!("cuckoo: the files of durable filter generation {gen:016X} in {} are damaged ({why}); the filter they held cannot be named and is lost unless WAL replay restores it (the files are kept)", disk::DIR);
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
    let (kind, stamp, filters) = match decode_saved(&bytes) {
        Ok(x) => x,
        Err(why) => {
            pgrx::warning!(
                "cuckoo: ignoring {LEGACY_FILE}: {why}; durable filters are restored only by WAL replay, if any"
            );
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
                let fill = |_: usize, out: &mut [u64]| out.copy_from_slice(words);
                match r.create(lk, &spec, &f.meta.tables(), Some(&fill), &mut |_, _| f.gen) {
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
            pgrx::warning!(
                "cuckoo: durable filter \"{}\" (database {}) could not be restored at all",
                f.meta.name,
                f.meta.db
            );
        }
    }
    if kind == FileKind::Saved {
        // SAFETY: single-threaded postmaster, before forking.
        unsafe { LEGACY_STAMP = stamp };
    }
}
