//! Replay of the cuckoo resource manager's records (the startup process, on a
//! standby, in crash recovery and in archive recovery), and its registration.
//!
//! # Where replay starts
//!
//! Replay starts at a checkpoint's redo position, with the region as the
//! postmaster restored it from the checkpoint files (`restore`): each durable
//! filter remembers the stamp of its last file, and its records ending at or
//! before it are skipped. At each `CUT` replay writes the filter's changes to
//! its own files, and at a compaction's `CUT` it installs the base the WAL
//! carries (see `cut`). WAL written by 0.4.0 carries *image passes* instead
//! (`PASS_BEGIN`, each durable filter's contents of kind image, `PASS_DONE`):
//! replay installs images of filters it has not rebuilt from their creation,
//! and at `PASS_DONE` drops filters that the pass did not mention and that no
//! later record created.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, CString};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::attach::{my_slot, region, wait_for, with_registry_lock};
use super::cut::in_replay::{
    cut_after_recovery, cut_in_replay, flush_for_file, replay_cut, replay_discard, replay_pass,
};
use super::cut::{dir, unverified_now};
use super::log::{lsn, RM_CUCKOO_ID};
use super::reload::{placeholder, reason};
use super::restore::{legacy_stamp, restored_with_gap};
use crate::filter::Geometry;
use crate::filter::{Chain, Deleted};
use crate::region::disk;
use crate::region::wal::{ContentKind, Kind, Meta, Record};
use crate::region::{word_offsets, RegionTables};
use crate::region::{EntryInfo, Region, RegionError};

mod redo;

unsafe extern "C-unwind" {
    /// `postmaster/startup.h`: a shutdown request or a configuration reload
    /// for the startup process, which replay's waits answer.
    fn HandleStartupProcInterrupts();
}

/// Sleeps in replay, answering the startup process's shutdown request.
fn replay_wait(d: std::time::Duration) {
    // SAFETY: reads this process's type; answers interrupts as the startup
    // process's own waits do.
    unsafe {
        if pg_sys::MyBackendType == pg_sys::BackendType::B_STARTUP {
            HandleStartupProcInterrupts();
            pg_sys::pg_usleep(d.as_micros() as std::ffi::c_long);
        } else {
            wait_for(d);
        }
    }
}

/// Registers the resource manager (from `_PG_init`, while preloading).
pub fn register() {
    let mut rm = pg_sys::RmgrData {
        rm_name: c"cuckoo".as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(desc),
        rm_identify: Some(identify),
        rm_startup: Some(startup),
        rm_cleanup: Some(cleanup),
        rm_mask: None,
        rm_decode: None,
    };
    // SAFETY: called while preloading; PostgreSQL copies the struct, and the name
    // is a static string.
    unsafe { pg_sys::RegisterCustomRmgr(RM_CUCKOO_ID, &mut rm) };
}

/// # Safety
/// `record` is the reader state PostgreSQL passes to a resource manager.
unsafe fn parts<'a>(record: *mut pg_sys::XLogReaderState) -> (Kind, &'a [u8], u64) {
    // SAFETY: as documented; the decoded record and its main data live as long
    // as the callback.
    unsafe {
        let d = (*record).record;
        let info = Kind::of_info((*d).header.xl_info);
        let len = (*d).main_data_len as usize;
        let body = if len == 0 { &[][..] } else { std::slice::from_raw_parts((*d).main_data as *const u8, len) };
        (info, body, (*record).EndRecPtr)
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: called by PostgreSQL's replay with a decoded record.
    let (info, body, end) = unsafe { parts(record) };
    if end <= legacy_stamp() {
        // Already in 0.4.0's saved file the region was restored from.
        return;
    }
    REPLAY.with(|s| {
        let mut s = s.borrow_mut();
        let replay = s.get_or_insert_with(Replay::default);
        match Record::decode(info, body) {
            Ok(rec) => replay.apply(rec, end),
            Err(why) => {
                let gen = replay.gen_hint(info, body, end);
                replay.refuse(region(), gen, end, why);
            }
        }
    });
}

#[pg_guard]
unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    // SAFETY: as for redo; `buf` is a valid StringInfo.
    unsafe {
        let (info, body, _) = parts(record);
        let text = match Record::decode(info, body) {
            Ok(r) => r.describe(),
            // (`describe` names the sub-kind of an `EXT` record.)
            Err(why) => format!("corrupt: {why}"),
        };
        let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
        pg_sys::appendStringInfoString(buf, c.as_ptr());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const c_char {
    Kind::of_info(info).name().as_ptr()
}

#[pg_guard]
unsafe extern "C-unwind" fn startup() {
    REPLAY.with(|s| *s.borrow_mut() = Some(Replay::default()));
}

/// The end of replay: incomplete contents are dropped (their publish never
/// finished), and what changed since each filter's last cut goes to its files,
/// before the end-of-recovery checkpoint (which no worker holds back).
#[pg_guard]
unsafe extern "C-unwind" fn cleanup() {
    REPLAY.with(|s| {
        if let Some(mut replay) = s.borrow_mut().take() {
            replay.finish();
        }
    });
    // SAFETY: plain read of the replay position.
    let end = unsafe { pg_sys::GetXLogReplayRecPtr(std::ptr::null_mut()) };
    cut_after_recovery(region(), end);
}

thread_local! {
    static REPLAY: RefCell<Option<Replay>> = const { RefCell::new(None) };
}

/// Contents being received in chunks.
struct Build {
    kind: ContentKind,
    gen: u64,
    /// For contents of kind `Cut`: the end of their `CUT`.
    cut: u64,
    meta: Meta,
    /// Empty if the contents cannot fit in the region (or in memory).
    words: Vec<u64>,
    filled: u64,
}

/// A filter whose base a compaction's `CUT` announced and that replay may hold
/// incompletely (restored from a copy of the directory made while a
/// compaction removed files, or from files that do not cover where replay
/// started, or absent): replay installs the base, then again the filter's
/// records logged since, which are applied meanwhile and kept here: the cut's
/// end, and those records.
struct Waiting {
    cut: u64,
    records: Vec<(Record, u64)>,
    /// Records and hashes kept (bounded by [`WAITING_MAX`]).
    kept: usize,
}

/// What replay knows besides the region (the startup process's memory).
#[derive(Default)]
struct Replay {
    builds: HashMap<u64, Build>,
    /// Inserts replay could not store, by their record's end and position in
    /// it (0 for a single insert): the generation and the hash. Retried
    /// whenever a delete makes room.
    refusals: HashMap<(u64, u32), (u64, u64)>,
    /// Generations whose contents this replay built from their creation,
    /// publish or image, with that record's end.
    based: HashMap<u64, u64>,
    /// The image pass in progress (0.4.0's WAL): its start and the generations
    /// it logged.
    pass: Option<(u64, HashSet<u64>)>,
    /// Where each generation's entry was last found (checked on every use).
    entries: HashMap<u64, usize>,
    waiting: HashMap<u64, Waiting>,
    /// Compactions whose logged contents are being replayed for a filter
    /// replay holds whole, by their `CONTENT_BEGIN`'s end: the generation and
    /// the cut.
    compacted: HashMap<u64, (u64, u64)>,
    /// Whether a `PASS` was replayed since replay began.
    passed: bool,
}

/// Records and hashes kept for a base (about 8 bytes each, 128 MB at most);
/// past this, replay gives the base up, and the filter needs a reload.
const WAITING_MAX: usize = 1 << 24;

/// New contents for a filter being installed by replay.
enum Content<'w> {
    Empty,
    Words(&'w [u64]),
    Lost(u64),
}

/// The logged base of generation `gen`'s compaction at `cut` was replayed up
/// to `end`: this node's own base of that cut (if it wrote one) replaces the
/// older files now, after `minRecoveryPoint` passed `end`, so that a backup
/// of this node that lacks the older files recovers at least until the
/// logged base, which it installs.
fn remove_before_base(gen: u64, cut: u64, end: u64) {
    let Ok(all) = disk::list(dir()) else { return };
    let has_base =
        all.get(&gen).is_some_and(|names| names.iter().any(|n| n.stamp == cut && n.kind == disk::Kind::Base));
    if has_base {
        flush_for_file(end);
        if let Err(e) = disk::remove(dir(), gen, cut) {
            pgrx::warning!(
                "cuckoo: could not remove the files of generation {gen:016X} older than its base at {}: {e}",
                lsn(cut)
            );
        }
    }
}

/// The generation a record is about (None for records about no single one).
fn gen_of(rec: &Record, end: u64) -> Option<u64> {
    Some(match rec {
        Record::Create(_) => end,
        Record::ContentBegin { kind: ContentKind::Publish, .. } => end,
        Record::ContentBegin { gen, .. } => *gen,
        Record::Insert { gen, .. } | Record::Refused { gen, .. } | Record::Delete { gen, .. } => *gen,
        Record::InsertMany { gen, .. } | Record::RefusedMany { gen, .. } | Record::DeleteMany { gen, .. } => *gen,
        Record::Drop { gen }
        | Record::Grant { gen, .. }
        | Record::KeyType { gen, .. }
        | Record::Placeholder { gen, .. }
        | Record::Cut { gen, .. }
        | Record::Horizon { gen, .. }
        | Record::Queue { gen, .. } => *gen,
        // Contents in progress belong to their `ContentBegin`; passes name no
        // filter; a discard removes files whatever they hold.
        Record::ContentChunk { .. }
        | Record::ContentEnd { .. }
        | Record::PassBegin
        | Record::PassDone { .. }
        | Record::Pass { .. }
        | Record::Discard { .. } => return None,
    })
}

impl Replay {
    /// A record that does not decode or does not fit what replay holds: it is
    /// not applied, and the filter it is about (if it can be told) needs a
    /// reload, which a base installed later clears. Replay goes on: no record
    /// of cuckoo's stops a server from starting.
    fn refuse(&mut self, r: &Region, gen: Option<u64>, end: u64, why: String) {
        let who = match gen.and_then(|g| r.find_gen(g)) {
            Some(info) => format!("durable filter \"{}\" (database {}) needs a reload", info.name, info.db),
            None => "it is not applied".to_string(),
        };
        pgrx::warning!("cuckoo: cannot replay the WAL record ending at {}: {why}; {who}", lsn(end));
        if let Some(g) = gen {
            set_reason(r, g, reason::REPLAY_REFUSED);
            self.refusals.retain(|_, (x, _)| *x != g);
        }
    }

    /// The generation a record that does not decode is about, where its body
    /// tells (all of them start with it but a creation and contents).
    fn gen_hint(&self, info: Kind, body: &[u8], end: u64) -> Option<u64> {
        let first = |at: usize| body.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        match info {
            Kind::Insert
            | Kind::Refused
            | Kind::Delete
            | Kind::Drop
            | Kind::Grant
            | Kind::KeyType
            | Kind::Cut
            | Kind::Discard
            | Kind::Placeholder => first(0),
            Kind::ContentChunk | Kind::ContentEnd => first(0).and_then(|b| self.builds.get(&b)).map(|b| b.gen),
            Kind::ContentBegin => match body.first() {
                Some(1) => Some(end),
                Some(_) => first(1),
                None => None,
            },
            // A creation's generation is its end; a pass names no filter.
            Kind::Create | Kind::PassBegin | Kind::PassDone | Kind::Ext => None,
        }
    }

    /// The position generation `gen`'s contents cover (0 if it is not here).
    fn stamp_of(&mut self, r: &Region, gen: u64) -> u64 {
        self.find(r, gen).map_or(0, |i| r.durable_stats(i.index).stamp)
    }

    /// Whether a record ending at `end` is already in its filter's files (or
    /// in the contents the filter was made from), so replay skips it; a record
    /// for a filter whose logged base is awaited is also kept to apply again
    /// over that base.
    fn already_applied(&mut self, r: &Region, rec: &Record, end: u64) -> bool {
        if let Some(gen) = gen_of(rec, end) {
            // Already in the filter's files (or in the contents it was made
            // from).
            let stamp = self.stamp_of(r, gen);
            // A compaction's `CUT` at which replay of a copy that may lack
            // changes wrote its own file before a restart: the base it logged
            // is still awaited.
            let awaited =
                matches!(rec, Record::Cut { logged: true, .. }) && stamp == end && self.may_be_incomplete(r, gen);
            if stamp >= end && !awaited {
                return true;
            }
            if let Some(w) = self.waiting.get_mut(&gen) {
                if !matches!(rec, Record::Cut { .. } | Record::ContentBegin { .. }) {
                    w.kept += 1 + match rec {
                        Record::InsertMany { hashes, .. } | Record::DeleteMany { hashes, .. } => hashes.len(),
                        Record::RefusedMany { refused, .. } => refused.len(),
                        _ => 0,
                    };
                    if w.kept <= WAITING_MAX {
                        w.records.push((rec.clone(), end));
                    } else {
                        // Too much to keep: the base will not be installed,
                        // and a copy that may be incomplete says so.
                        self.waiting.remove(&gen);
                        if self.find(r, gen).is_some_and(|i| i.reload_reason == 0) {
                            set_reason(r, gen, reason::FILES_INCOMPLETE);
                        }
                    }
                }
            }
        }
        false
    }

    fn apply(&mut self, rec: Record, end: u64) {
        let r = region();
        if self.already_applied(r, &rec, end) {
            return;
        }
        match rec {
            Record::Create(meta) => self.redo_create(r, meta, end),
            Record::ContentBegin { kind: ck, gen, cut, meta } => self.redo_content_begin(r, ck, gen, cut, meta, end),
            Record::ContentChunk { begin, offset, words } => self.redo_content_chunk(r, begin, offset, words, end),
            Record::ContentEnd { begin, items } => self.redo_content_end(r, begin, items, end),
            Record::Placeholder { gen, reason, meta } => self.redo_placeholder(r, gen, reason, meta, end),
            Record::Insert { gen, hash } => self.insert(r, gen, hash, (end, 0)),
            Record::InsertMany { gen, hashes } => self.redo_insert_many(r, gen, hashes, end),
            Record::Refused { gen, hash, insert_end } => self.refused(r, gen, hash, (insert_end, 0)),
            Record::RefusedMany { gen, insert_end, refused } => self.redo_refused_many(r, gen, insert_end, refused),
            Record::Delete { gen, hash } => self.redo_delete(r, gen, hash),
            Record::DeleteMany { gen, hashes } => self.redo_delete_many(r, gen, hashes),
            Record::Drop { gen } => self.redo_drop(r, gen),
            Record::Grant { gen, readers } => self.redo_grant(r, gen, readers),
            Record::KeyType { gen, key } => self.redo_key_type(r, gen, key),
            Record::Cut { gen, base, logged } => self.redo_cut(r, gen, base, logged, end),
            Record::Pass { frozen, began, live } => self.redo_pass(r, frozen, began, live, end),
            Record::Discard { gen } => self.redo_discard(r, gen),
            Record::Horizon { db, xid, .. } => self.redo_horizon(db, xid),
            Record::Queue { gen, add } => self.redo_queue(r, gen, &add),
            Record::PassBegin => self.pass = Some((end, HashSet::new())),
            Record::PassDone { begin, .. } => self.redo_pass_done(r, begin),
        }
    }

    /// The contents a base cut logged (ending at `end`), for a filter replay
    /// was waiting for: installed as of the cut, then the filter's records
    /// since are applied, and it gets a base of its own at once (no later cut
    /// of it may come before a restartpoint).
    fn install_waiting(&mut self, r: &Region, b: &Build, content: Content<'_>, end: u64) {
        let Some(w) = self.waiting.remove(&b.gen).filter(|w| w.cut == b.cut) else { return };
        if let Some(info) = r.find_gen(b.gen) {
            r.set_durable_flags(info.index, 0);
        }
        // As an image: a newer generation of the name (published since the
        // cut) is not replaced.
        self.install(r, &b.meta, b.gen, content, true);
        self.refusals.retain(|_, (g, _)| *g != b.gen);
        // Its base goes to its files as of the cut, as the primary's did (the
        // same contents, under the same stamp, over this node's own file of
        // that cut); then the records since are applied again, for its next
        // cut.
        if let Some(info) = r.find_gen(b.gen) {
            r.set_stamp(info.index, b.cut.saturating_sub(1), 0, 0, 0);
            // Older files go: first past the contents' end (see
            // `remove_before_base`).
            flush_for_file(end);
            cut_in_replay(r, &info, true, b.cut, true);
        }
        self.based.insert(b.gen, b.cut);
        for (rec, at) in w.records {
            self.apply(rec, at);
        }
    }

    /// The base a compaction's `CUT` announced will not come (its primary
    /// stopped before logging it all; then no file was removed by that
    /// compaction): the filter's records since were applied to what replay
    /// holds already.
    fn give_up_waiting(&mut self, gen: u64) {
        self.builds.retain(|_, b| !(b.kind == ContentKind::Cut && b.gen == gen));
        self.waiting.remove(&gen);
    }

    /// Whether replay's copy of generation `gen` may lack changes that the
    /// base a compaction logged holds: it is absent, needs a reload, or was
    /// restored from a copy of the directory whose files cover less than the
    /// position replay started at, before recovery reached consistency (the
    /// compactions that removed files during the copy logged their bases
    /// before it).
    fn may_be_incomplete(&mut self, r: &Region, gen: u64) -> bool {
        match self.find(r, gen) {
            None => true,
            Some(info) => info.reload_reason != 0 || unverified_now(r, info.index),
        }
    }

    /// The first `PASS` replayed after a restart from a position the files did
    /// not cover (`restore`): a filter restored needing a reload for that
    /// gap, whose last file the primary's pass lists unchanged, had no change
    /// in the gap (one that had was written at the primary's end of recovery,
    /// and its base is logged before this `PASS`), and is ready again; a
    /// filter the pass does not list was dropped in the gap.
    fn reconcile(&mut self, r: &Region, live: &[(u64, u64)]) {
        let listed: HashMap<u64, u64> = live.iter().copied().collect();
        for info in r.list_all().into_iter().filter(|i| i.durable) {
            match listed.get(&info.gen) {
                None => {
                    pgrx::log!("cuckoo: durable filter \"{}\" (database {}) was dropped on the primary before this node's restart point", info.name, info.db);
                    drop_now(&info);
                }
                Some(&tip)
                    if info.reload_reason == reason::RESTART_GAP && tip == r.confirmed(info.index).1 && tip != 0 =>
                {
                    with_registry_lock(|r, lk| {
                        let _ = r.set_reload(lk, &info, info.gen, 0);
                    });
                    pgrx::log!("cuckoo: durable filter \"{}\" (database {}) is whole: the primary changed it in no way its files miss", info.name, info.db);
                }
                Some(_) => {}
            }
        }
    }

    /// An insert the primary logged (`key`: its record's end and position).
    fn insert(&mut self, r: &Region, gen: u64, hash: u64, key: (u64, u32)) {
        if let Some(stored) = self.write(r, gen, |c| c.insert(hash).is_ok()) {
            if !stored {
                // Until the primary's refusal of the same insert shows up,
                // or a delete makes room for it, a key may be missing.
                self.refusals.insert(key, (gen, hash));
                set_reason(r, gen, reason::REPLAY_FULL);
            }
        }
    }

    /// The primary's refusal of the insert `key` (it found the filter full,
    /// or, inserting if new, the key there already).
    fn refused(&mut self, r: &Region, gen: u64, hash: u64, key: (u64, u32)) {
        if self.refusals.remove(&key).is_some() {
            // The primary refused it too: nothing was lost.
            self.settle(r, gen);
        } else if key.0 > self.stamp_of(r, gen) && self.find(r, gen).is_some() {
            // Replay stored the key the primary refused (an insert and
            // its refusal are on the same side of every cut): take it
            // back.
            if self.write(r, gen, |c| c.delete(hash) == Deleted::Removed) == Some(true) {
                self.retry_refused(r, gen);
            }
        }
    }

    /// After replay applied a delete the primary logged (`d`: what it did, None
    /// if the filter has no table here).
    fn deleted(&mut self, r: &Region, gen: u64, hash: u64, d: Option<Deleted>) {
        // A copy replay cannot attribute to one table stays (a false
        // positive, never a false negative: see `Deleted::Ambiguous`).
        match d {
            Some(Deleted::Removed) => self.retry_refused(r, gen),
            Some(Deleted::Ambiguous) | None => {}
            Some(Deleted::Absent) => {
                // The primary deleted a copy replay could not store: the
                // insert and the delete cancel out.
                let pending = self.refusals.iter().find(|(_, (g, h))| *g == gen && *h == hash).map(|(at, _)| *at);
                if let Some(at) = pending {
                    self.refusals.remove(&at);
                    self.settle(r, gen);
                }
            }
        }
    }

    /// The end of replay: records held for bases that never came are applied.
    fn finish(&mut self) {
        let gens: Vec<u64> = self.waiting.keys().copied().collect();
        for gen in gens {
            self.give_up_waiting(gen);
        }
    }

    /// After a delete on generation `gen`: inserts replay could not store may
    /// fit now.
    fn retry_refused(&mut self, r: &Region, gen: u64) {
        let pending: Vec<((u64, u32), u64)> =
            self.refusals.iter().filter(|(_, (g, _))| *g == gen).map(|(at, (_, h))| (*at, *h)).collect();
        if pending.is_empty() {
            return;
        }
        for (at, hash) in pending {
            if self.write(r, gen, |c| c.insert(hash).is_ok()) == Some(true) {
                self.refusals.remove(&at);
            }
        }
        self.settle(r, gen);
    }

    /// Clears the replay-full mark of generation `gen` once no insert that
    /// replay could not store is pending.
    fn settle(&mut self, r: &Region, gen: u64) {
        if self.refusals.values().any(|(g, _)| *g == gen) {
            return;
        }
        if let Some(info) = r.find_gen(gen).filter(|i| i.reload_reason == reason::REPLAY_FULL) {
            with_registry_lock(|r, lk| {
                let _ = r.set_reload(lk, &info, info.gen, 0);
            });
        }
    }

    /// Makes filter (`meta.db`, `meta.name`) generation `gen` with `content`,
    /// replacing any filter of that name (an image never replaces a newer
    /// generation: generations are WAL positions). When that cannot be done
    /// (no room, even after the copy it replaces made way; old copies held by
    /// readers for too long), the name stays, marked as needing a reload, as
    /// generation `gen`: never a stale filter answering as ready, never a
    /// filter that silently disappears.
    fn install(&mut self, _r: &Region, meta: &Meta, gen: u64, content: Content<'_>, image: bool) {
        enum Outcome {
            Done,
            /// Wait for readers of dropped copies (a hot standby), then again.
            Again,
        }
        let spec = meta.new_filter();
        let lost = match content {
            Content::Lost(why) => Some(why),
            _ => None,
        };
        let words = match content {
            Content::Words(w) => Some(w),
            _ => None,
        };
        let tables = meta.tables();
        let offsets = word_offsets(tables.iter().map(|t| t.params.bucket_count));
        let fill = |i: usize, out: &mut [u64]| match words {
            Some(w) => out.copy_from_slice(&w[offsets[i]..offsets[i] + out.len()]),
            None => out.fill(0),
        };
        let mut said = std::time::Instant::now();
        loop {
            let outcome = with_registry_lock(|r, lk| -> Result<Outcome, RegionError> {
                let existing = r.find(meta.db, &meta.name);
                if image && existing.as_ref().is_some_and(|e| e.gen > gen) {
                    return Ok(Outcome::Done);
                }
                if let Some(why) = lost {
                    return placeholder(r, lk, existing.as_ref(), &spec, meta, gen, why).map(|()| Outcome::Done);
                }
                let made = match &existing {
                    Some(e) => r.replace(
                        lk,
                        e,
                        &tables,
                        &fill,
                        meta.capacity,
                        meta.fpp,
                        true,
                        meta.key,
                        meta.growth,
                        (meta.owner, meta.readers),
                        &mut |_, _| gen,
                    ),
                    None => r.create(
                        lk,
                        &spec,
                        &tables,
                        words.is_some().then_some(&fill as &dyn Fn(usize, &mut [u64])),
                        &mut |_, _| gen,
                    ),
                };
                let failed = match made {
                    Ok(info) => {
                        r.set_readers(lk, &info, meta.readers)?;
                        r.set_queue_counts(info.index, &meta.queue);
                        return Ok(Outcome::Done);
                    }
                    Err(e) => e,
                };
                let room_later = match &failed {
                    // A replace needs room for both copies: drop the old one
                    // (its contents are being replaced anyway) and try again.
                    RegionError::NoSpace { .. }
                        if existing.is_some() && r.drop_filter(lk, existing.as_ref().unwrap()).is_ok() =>
                    {
                        true
                    }
                    RegionError::NoSpace { pending, .. } => *pending > 0,
                    RegionError::Busy => true,
                    _ => false,
                };
                if room_later {
                    return Ok(Outcome::Again);
                }
                let why = match failed {
                    RegionError::NoSpace { .. } | RegionError::NoEntries { .. } => reason::NO_ROOM,
                    _ => reason::NOT_RESTORED,
                };
                pgrx::warning!(
                    "cuckoo: durable filter \"{}\" (database {}) could not be restored ({failed}); it is kept as needing a reload",
                    meta.name,
                    meta.db
                );
                placeholder(r, lk, r.find(meta.db, &meta.name).as_ref(), &spec, meta, gen, why).map(|()| Outcome::Done)
            });
            match outcome {
                Ok(Outcome::Done) => return,
                Ok(Outcome::Again) => {
                    // Readers of the old copy (on a hot standby) are inside
                    // one operation each: replay waits for them rather than
                    // give the filter up.
                    if said.elapsed().as_secs() >= 10 {
                        said = std::time::Instant::now();
                        pgrx::log!("cuckoo: replay is waiting for sessions still reading an old copy of durable filter \"{}\" (database {})", meta.name, meta.db);
                    }
                    replay_wait(std::time::Duration::from_millis(1));
                }
                Err(e) => {
                    pgrx::warning!(
                        "cuckoo: durable filter \"{}\" (database {}) is lost: not even its name could be kept ({e})",
                        meta.name,
                        meta.db
                    );
                    return;
                }
            }
        }
    }

    /// Runs `op` on generation `gen`'s table if it has one (also while it is
    /// marked replay-full: its contents are kept up to date), pinned as a
    /// writer (waiting while a snapshot on a hot standby pauses writers), and
    /// recording the units it changes for the next cut.
    fn write<T>(&mut self, r: &Region, gen: u64, op: impl Fn(&Chain<'_, RegionTables<'_>>) -> T) -> Option<T> {
        let slot = my_slot();
        loop {
            let info = self.find(r, gen)?;
            if info.blocks == 0 {
                if info.reload_reason == reason::NO_ROOM {
                    // Its files hold contents this change would have gone into:
                    // they are no longer complete.
                    set_reason(r, gen, reason::NOT_RESTORED);
                }
                return None;
            }
            let pin = r.pin_writer(slot)?;
            if !r.still_current(info.index, info.seq) {
                continue;
            }
            if r.writers_paused(info.index) {
                drop(pin);
                replay_wait(std::time::Duration::from_micros(100));
                continue;
            }
            r.mark_changed(info.index, crate::region::CHANGED_WORDS);
            let tables = r.tables(&info)?;
            let out = op(&tables.chain());
            drop(pin);
            return Some(out);
        }
    }
}

impl Replay {
    /// The live entry of generation `gen`: where it was last found if it is
    /// still there (a few loads), else by a scan of the registry.
    fn find(&mut self, r: &Region, gen: u64) -> Option<EntryInfo> {
        if let Some(info) = self.entries.get(&gen).and_then(|&i| r.entry_info(i)).filter(|i| i.gen == gen) {
            return Some(info);
        }
        let info = r.find_gen(gen);
        match &info {
            Some(i) => self.entries.insert(gen, i.index),
            None => self.entries.remove(&gen),
        };
        info
    }
}

fn set_reason(r: &Region, gen: u64, why: u64) {
    if let Some(info) = r.find_gen(gen).filter(|i| i.reload_reason != why) {
        with_registry_lock(|r, lk| {
            let _ = r.set_reload(lk, &info, info.gen, why);
        });
    }
}

fn drop_now(info: &EntryInfo) {
    loop {
        match with_registry_lock(|r, lk| r.drop_filter(lk, info)) {
            Err(RegionError::Busy) => replay_wait(std::time::Duration::from_millis(1)),
            _ => return,
        }
    }
}
