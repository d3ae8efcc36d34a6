//! Cuts in replay and at the end of recovery: each node makes its own cuts
//! at the `CUT` records it replays, and marks its files unsure when one cannot
//! be written (see the module above).

use super::*;

/// Set when a cut in replay could not be written: the coverage file is not
/// written again until a `PASS` finds every filter's changes on file.
static mut REPLAY_CUT_FAILED: bool = false;
static mut LAST_REPLAY_WARNING: [Option<Instant>; 3] = [None, None, None];

/// The kinds of replay's warnings, each limited on its own.
#[derive(Clone, Copy)]
enum Warn {
    Cut = 0,
    Coverage = 1,
    Unsure = 2,
}

/// A warning of replay's, at most every 10 s of each kind.
fn replay_warning(what: Warn, msg: String) {
    // SAFETY: the startup process is single-threaded.
    unsafe {
        let last = &mut LAST_REPLAY_WARNING[what as usize];
        if last.is_none_or(|t| t.elapsed().as_secs() >= 10) {
            *last = Some(Instant::now());
            pgrx::warning!("{msg}");
        }
    }
}

/// Moves `minRecoveryPoint` past `stamp` before a file named by it (or a
/// coverage file of it) exists: a backup taken from this standby is then
/// consistent only once it has replayed that far, so no recovery can end
/// before a position a file of its copy claims to cover.
pub(crate) fn flush_for_file(stamp: u64) {
    // SAFETY: in recovery XLogFlush updates minRecoveryPoint (up to what was
    // replayed); out of recovery it flushes the WAL.
    unsafe { pg_sys::XLogFlush(stamp) };
}

/// Replay of a `CUT` record ending at `end`: writes filter `gen`'s changes
/// since its files, if any, to its own files, as the primary did. Older
/// files stay: a compaction's go once its logged base is replayed
/// (`replay::remove_before_base`).
pub fn replay_cut(r: &Region, gen: u64, base: bool, end: u64) {
    let Some(info) = r.find_gen(gen) else { return };
    if r.durable_stats(info.index).stamp >= end || r.changed(info.index) == 0 {
        return;
    }
    cut_in_replay(r, &info, base, end, false);
}

/// Records that this node's files may lie behind its coverage file (see
/// [`UNSURE`]), listing every durable filter in memory with its metadata (in
/// the coverage file's form): a restart keeps the ones that have no files as
/// needing a reload, rather than losing them (a filter made since the last
/// file this node could write, whose creation is before where the restart
/// replays from). Written again whenever that list changes. Stops the server
/// if even this cannot be written, as PostgreSQL does when it cannot write
/// its own state.
fn mark_unsure(r: &Region) {
    let entries = coverage_entries(r, |i| r.confirmed(i.index).0);
    let gens: Vec<u64> = entries.iter().map(|e| e.gen).collect();
    // SAFETY: only the startup process (or, at the end of recovery, the
    // process ending it) calls this; it is single-threaded.
    let listed = unsafe { &mut *std::ptr::addr_of_mut!(UNSURE_LISTED) };
    if listed.as_ref() == Some(&gens) && Path::new(UNSURE).exists() {
        return;
    }
    let c = Coverage { stamp: 0, frozen: false, entries };
    let e = match disk::write_coverage_as(Path::new("."), UNSURE, &c) {
        Ok(()) => {
            *listed = Some(gens);
            return;
        }
        Err(e) => e,
    };
    let _ = std::fs::remove_file(format!("{UNSURE}.tmp"));
    // No room for the list (a full volume): a marker without one still makes
    // a restart treat the files as not covering (a filter with no file at all
    // is then not known to it); an older marker is kept as it is.
    let kept = Path::new(UNSURE).exists()
        || std::fs::File::create(UNSURE)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::File::open(".")?.sync_all())
            .is_ok();
    if kept {
        replay_warning(Warn::Unsure, format!("cuckoo: cannot write the list of durable filters to {UNSURE}: {e}; a restart before the files are complete again treats them as incomplete, and may not know a filter that has no file yet"));
        return;
    }
    pgrx::ereport!(
        PgLogLevel::PANIC,
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!("cuckoo: cannot record in {UNSURE} that the durable filters' files are incomplete: {e}")
    );
}

/// Writes filter `info`'s changes to its files at `stamp` in replay or at the
/// end of recovery (this process is its only writer). A file that cannot be
/// written leaves the changes marked (the next cut writes them) and the
/// files marked unsure ([`UNSURE`]), with a warning: replay goes on (a standby
/// keeps replaying, and can be promoted), and a restart before the files are
/// complete again makes the filters need a reload.
pub fn cut_in_replay(r: &Region, info: &EntryInfo, force_base: bool, stamp: u64, remove_older: bool) -> bool {
    let Err(e) = cut_in_replay_once(r, info, force_base, stamp, remove_older) else { return true };
    // SAFETY: the startup process is single-threaded.
    unsafe { REPLAY_CUT_FAILED = true };
    mark_unsure(r);
    replay_warning(
        Warn::Cut,
        format!(
            "cuckoo: cannot write the checkpoint cut of durable filter \"{}\" at {}: {e}; its changes stay in memory and are written at the next cut (replay goes on), and a restart before then makes the durable filters need a reload",
            info.name,
            lsn(stamp)
        ),
    );
    false
}

fn cut_in_replay_once(
    r: &Region,
    info: &EntryInfo,
    force_base: bool,
    stamp: u64,
    remove_older: bool,
) -> Result<(), String> {
    let changed = r.take_changed(info.index);
    let base = force_base && info.blocks > 0 || changed & NEEDS_BASE != 0;
    let slot = my_slot();
    let Some(pin) = r.pin(slot) else { error!("cuckoo: process slot out of range") };
    if !r.still_current(info.index, info.seq) {
        return Ok(());
    }
    let marked = r.units(info).map(|u| u.mark(base)).unwrap_or_default();
    let tables = tables_now(r, info);
    let prev = r.durable_stats(info.index).stamp;
    let taken = take(r, info, Some(pin), stamp, base, &marked, &tables, prev, r.queue_counts(info.index));
    flush_for_file(stamp);
    match write_taken(&taken, false, remove_older) {
        Ok(file_bytes) => {
            r.record_cut(info.index, stamp, base, file_bytes, 0);
            Ok(())
        }
        Err(e) => {
            named_panic(&info.name, &e);
            if let Some(pin) = r.pin(slot) {
                if r.still_current(info.index, info.seq) {
                    if let Some(units) = r.units(info) {
                        units.mark_changed(&marked);
                    }
                    r.mark_changed(info.index, changed);
                }
                drop(pin);
            }
            Err(e.message)
        }
    }
}

/// Whether filter `info` has changes that are not on file (a new
/// generation is made with `CHANGED_META` as well as `NEEDS_BASE`).
fn unfiled(r: &Region, info: &EntryInfo) -> bool {
    r.changed(info.index) & (CHANGED_WORDS | CHANGED_META) != 0
}

/// Cuts every durable filter with changes not on file yet, at `stamp`;
/// whether all of them are on file now.
fn cut_all_changed(r: &Region, stamp: u64) -> bool {
    let mut ok = true;
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        if unfiled(r, &info) {
            ok &= cut_in_replay(r, &info, false, stamp, false);
        }
    }
    ok
}

/// Writes this node's coverage file in replay, if every filter's changes are
/// on file; `confirmed` gives each generation's confirmed stamp.
fn write_replay_coverage(
    r: &Region,
    stamp: u64,
    file_stamp: u64,
    frozen: bool,
    confirmed: impl Fn(&EntryInfo) -> u64,
) -> bool {
    // SAFETY: the startup process is single-threaded.
    if unsafe { REPLAY_CUT_FAILED } {
        mark_unsure(r);
        return false;
    }
    let c = Coverage { stamp, frozen, entries: coverage_entries(r, confirmed) };
    flush_for_file(file_stamp);
    match write_coverage(&c) {
        Ok(()) => {
            clear_unsure();
            true
        }
        Err(e) => {
            mark_unsure(r);
            replay_warning(Warn::Coverage, format!("cuckoo: {e}; replay goes on, and a restart before it is written makes the durable filters need a reload"));
            false
        }
    }
}

/// Replay of `PASS` (ending at `end`; the primary's pass began at `began`):
/// this node's files hold every change logged before `began` (its own cuts
/// were made at the same `CUT` records; one that failed is made again now),
/// so its coverage file says so, and the files of generations that are gone
/// go. `live` lists the primary's live generations and their last files'
/// stamps, which become each filter's confirmed stamp.
pub fn replay_pass(r: &Region, frozen: bool, began: u64, live: &[(u64, u64)], end: u64) {
    // SAFETY: the startup process is single-threaded.
    if unsafe { REPLAY_CUT_FAILED } {
        if cut_all_changed(r, end) {
            // SAFETY: as above.
            unsafe { REPLAY_CUT_FAILED = false };
        } else {
            return;
        }
    }
    let listed: std::collections::HashMap<u64, u64> = live.iter().copied().collect();
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        if let Some(&tip) = listed.get(&info.gen) {
            r.set_confirmed(info.index, tip);
        }
    }
    if write_replay_coverage(r, began, end, frozen, |i| listed.get(&i.gen).copied().unwrap_or(0)) {
        let ours: HashSet<u64> = r.list_all().into_iter().filter(|i| i.durable).map(|i| i.gen).collect();
        remove_dead(r, &ours);
    }
}

/// The end of recovery, at `end` (the end of the last record replayed): every
/// filter's changes since its last cut go to its files, as of `end`, before the
/// end-of-recovery checkpoint (no record can be logged before it), with a
/// frozen coverage file; a filter whose last file no `PASS` confirmed is
/// marked so that the worker's first pass logs its base. If the files cannot
/// be written, the server still starts: the filters are whole in memory and
/// the worker writes them before durable changes open; a crash before then
/// finds the older coverage file and marks them as needing a reload.
pub fn cut_after_recovery(r: &Region, end: u64) {
    // Recovery ends only once consistent: no copy lacks changes any more.
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        r.set_durable_flags(info.index, 0);
    }
    let all_on_file = cut_all_changed(r, end);
    for info in r.list_all().into_iter().filter(|i| i.durable) {
        let (confirmed, _) = r.confirmed(info.index);
        if info.blocks > 0 && info.reload_reason == 0 && (unfiled(r, &info) || file_tip(r, &info) != confirmed) {
            r.mark_changed(info.index, LOG_BASE | NEEDS_BASE);
        }
    }
    if all_on_file {
        write_replay_coverage(r, end, end, true, |i| r.confirmed(i.index).0);
    } else {
        pgrx::warning!("cuckoo: the durable filters' changes could not all be written to {} at the end of recovery; the durability worker writes them before durable changes open", disk::DIR);
    }
}

/// Replay of a `DISCARD` record (written before 0.10.0): the generation's
/// files go.
pub fn replay_discard(gen: u64) {
    if let Err(e) = disk::remove(dir(), gen, u64::MAX) {
        pgrx::warning!("cuckoo: could not remove the files of generation {gen:016X}: {e}");
    }
}
