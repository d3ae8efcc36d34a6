//! Filters that grow: a chain of lock-free tables behind a directory of
//! handles, to which tables are added while every backend goes on looking up,
//! inserting and deleting without a lock.
//!
//! # The structure
//!
//! A [`Directory`] holds a count of published tables and up to [`MAX_TABLES`]
//! handles. Table 0 is published when the filter is made; table `n` is added
//! when table `n − 1` fills, with `expansion` times its capacity and a shape
//! that keeps the sum of the tables' bounds under the rate asked for
//! (`sizing::size_growth_table`). Keys never move between tables: an insert
//! stores a key in one table, for good, with the table's own lock-free insert;
//! a lookup asks every published table (newest first: most keys are in the
//! largest tables); a delete removes one copy from the first table that holds
//! one. The filter is a multiset of keys as a table is: a key inserted twice may
//! have its copies in two tables.
//!
//! # Adding a table without a lock
//!
//! Handle slots hold 0 (nothing), [`CLAIMED`] (a process is building the table)
//! or a handle (at least 2). Table `n` becomes visible in two steps:
//!
//! 1. its handle is compare-and-swapped into slot `n` (`AcqRel`), from 0 or
//!    `CLAIMED`: the table was made (memory zeroed, header written) before, so
//!    whoever reads the handle with `Acquire` sees it whole;
//! 2. the count goes from `n` to `n + 1`, by compare-and-swap, by the process
//!    that published the handle or by any process that finds slot `n` holding a
//!    handle while the count is still `n` (it helps, and retries its own
//!    operation).
//!
//! A process that reads the count `c` (with `Acquire`) then finds handles in
//! slots `0..c`: the count passed `n` only after some process read slot `n`'s
//! handle, so the count's release carries the handle's. Slot `n` is written once
//! with a handle and never again, so two processes can never both publish a
//! table `n`: the loser of the compare-and-swap gives its table back.
//!
//! Who builds the next table: the insert that finds its table at its capacity
//! (the planned load, a few percent under the load at which inserts begin to
//! fail) claims slot `n` (0 → `CLAIMED`) and builds it, while other inserts keep
//! filling the current table's last few percent. An insert that finds the
//! newest table full (whether or not someone claimed the next) builds a table of
//! its own and tries to publish it. Nobody ever waits for the builder: a slow or
//! dead builder costs at most a second table's making, never a stall. If there
//! is no room for a table (or all [`MAX_TABLES`] are used), the insert reports
//! [`Full`] and every key stored stays stored.
//!
//! # Why no key is missed during a switch
//!
//! Tables are only added, and keys never leave the table they were stored in
//! (each table keeps its own copies by its own protocol, `table.rs`). A lookup
//! or delete reads the count once and asks each table below it; a key stored
//! before the lookup began is in a table published before its insert ended, so
//! within that count. A key stored into a table published after the lookup read
//! the count was stored concurrently with the lookup, which may then answer
//! either way. The `loom` models in `loom_tests` check an insert racing a
//! switch (two inserts into a full table, one key each), a lookup and a delete
//! during a switch, and each fails when the step it guards is removed (see
//! there).

//!
//! # Insert if new across tables
//!
//! [`Chain::insert_new_counted`] adds a key to the newest table only if no
//! table holds it, exactly once among concurrent callers, also while tables
//! are added. Within one table the callers serialise on the key's home word
//! (`table.rs`); callers that saw different newest tables would add in
//! different words. So a call that adds into table `n` first passes every
//! older table with [`Table::absent_here`], which reads the pair and, if the
//! key is absent, advances the home word's counter; and its add into table
//! `n` checks, between its read of home and its CAS, that slot `n + 1` holds
//! no handle (else it starts again with the newer table). A caller `A` adding
//! into table `i` and a caller `B` adding into a newer table cannot both
//! succeed: `B` read the count after table `i + 1` was published and then
//! touched `i`'s home word. If that touch comes before `A`'s CAS in the
//! word's order, `A`'s read of home came after the touch (its CAS expects
//! what it read), so `A`'s later check sees slot `i + 1` filled and `A`
//! starts again; if after, the touch's read sees `A`'s copy and `B` answers
//! "present". The cost: one read-modify-write per older table, on the
//! calls that find the key absent.
use super::atomic::{AtomicU64, Ordering};
use super::layout::Params;
use super::sizing::{self, SizingError};
use super::table::newkey::NewKey;
use super::table::{Full, OpStats, Table};

/// Tables in one chain. With the default expansion of 2 that is 2^32 times the
/// first table's capacity (more than any region holds); with expansion 1, 32
/// equal tables.
pub const MAX_TABLES: usize = 32;

/// A handle slot whose table is being built (by a process that may never finish:
/// nobody waits for it).
pub const CLAIMED: u64 = 1;

/// The published tables of a chain: a count and one handle per table.
/// `repr(C)`, atomics only, 264 bytes: it lives in shared memory too, where all
/// zeros is a chain not yet made.
#[repr(C)]
pub struct Directory {
    count: AtomicU64,
    handles: [AtomicU64; MAX_TABLES],
}

pub const DIRECTORY_BYTES: usize = 8 * (1 + MAX_TABLES);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Directory>() == DIRECTORY_BYTES);

impl Default for Directory {
    fn default() -> Directory {
        Directory { count: AtomicU64::new(0), handles: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl Directory {
    /// Publishes `handles` as the chain's first tables, before anyone else can
    /// see the directory (making a filter, restoring one).
    pub fn init(&self, handles: &[u64]) {
        assert!(!handles.is_empty() && handles.len() <= MAX_TABLES);
        for (slot, &h) in self.handles.iter().zip(handles) {
            assert!(h > CLAIMED);
            slot.store(h, Ordering::Relaxed);
        }
        for slot in &self.handles[handles.len()..] {
            slot.store(0, Ordering::Relaxed);
        }
        self.count.store(handles.len() as u64, Ordering::Release);
    }

    /// The number of published tables.
    #[inline]
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire) as usize
    }

    /// The handle of published table `i` (below a count read before).
    #[inline]
    pub fn handle(&self, i: usize) -> u64 {
        let h = self.handles[i].load(Ordering::Acquire);
        assert!(h > CLAIMED, "table {i} of a chain is counted but not published");
        h
    }

    /// The handles of the published tables.
    pub fn handles(&self) -> Vec<u64> {
        (0..self.count()).map(|i| self.handle(i)).collect()
    }

    /// Every handle in a slot, published or not yet counted (to free a chain
    /// that nobody can reach any more).
    pub fn all_handles(&self) -> Vec<u64> {
        self.handles.iter().map(|h| h.load(Ordering::Acquire)).filter(|&h| h > CLAIMED).collect()
    }
}

/// Where a chain's tables live: a handle names one; new ones are made on demand.
pub trait Tables {
    /// Runs `f` on table `index` of the chain, behind a published handle (a
    /// callback, so that the table may borrow what the implementation builds
    /// for the call, such as a durable filter's write hook; the table itself
    /// may be the view the implementation keeps, see [`Tables::table`]).
    fn with_table<R>(&self, index: usize, handle: u64, f: impl FnOnce(&Table<'_>) -> R) -> R;
    /// Table `index` of the chain, behind a published `handle`, to read (no
    /// write hook). An implementation may keep it: a table's place and shape
    /// never change once published.
    fn table(&self, index: usize, handle: u64) -> Table<'_>;
    /// The number of keys the table was sized for (when it holds that many, the
    /// next table is built).
    fn capacity(&self, handle: u64) -> u64;
    /// Makes table `index` of the chain, empty, nobody else seeing it yet,
    /// given the handles of the tables before it; its handle (at least 2), or
    /// `None` if there is no room or no plan for it.
    fn make(&self, index: usize, before: &[u64]) -> Option<u64>;
    /// Gives back a table made by `make` that was never published.
    fn release(&self, handle: u64);
    /// Whether `make` may give a table at all (false: a filter of fixed size,
    /// whose inserts then never try).
    fn grows(&self) -> bool {
        true
    }
}

/// A chain: its directory and where its tables live.
pub struct Chain<'a, T: Tables + ?Sized> {
    pub dir: &'a Directory,
    pub tables: &'a T,
}

impl<'a, T: Tables + ?Sized> Chain<'a, T> {
    pub fn new(dir: &'a Directory, tables: &'a T) -> Chain<'a, T> {
        Chain { dir, tables }
    }

    fn with_table<R>(&self, i: usize, f: impl FnOnce(&Table<'_>) -> R) -> R {
        self.tables.with_table(i, self.dir.handle(i), f)
    }

    /// Table `i`, to read.
    #[inline]
    fn view(&self, i: usize) -> Table<'a> {
        self.tables.table(i, self.dir.handle(i))
    }

    /// Whether a key with this hash may be in any table.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        self.contains_counted(hash, &mut OpStats::default())
    }

    /// [`Chain::contains`], counting the scans' retries into `stats`.
    #[inline]
    pub fn contains_counted(&self, hash: u64, stats: &mut OpStats) -> bool {
        let n = self.dir.count();
        // Newest (largest, holding most keys) first; see `Views::contains_counted`.
        (0..n).rev().any(|i| self.view(i).contains_counted(hash, stats))
    }

    /// The published tables' reader views, to look up many keys without
    /// asking for them again (tables added afterwards are not among them).
    pub fn views(&self) -> Views<'a> {
        let n = self.dir.count();
        let mut tables: [Option<Table<'a>>; MAX_TABLES] = [None; MAX_TABLES];
        for (i, t) in tables.iter_mut().enumerate().take(n) {
            *t = Some(self.view(i));
        }
        Views { tables, n }
    }

    /// [`Chain::contains`] for many hashes: each table answers them all,
    /// prefetching ahead.
    pub fn contains_many(&self, hashes: &[u64], out: &mut [bool]) {
        let n = self.dir.count();
        self.view(n - 1).contains_many(hashes, out);
        if n == 1 {
            return;
        }
        let mut more = vec![false; hashes.len()];
        for i in (0..n - 1).rev() {
            self.view(i).contains_many(hashes, &mut more);
            out.iter_mut().zip(&more).for_each(|(o, &m)| *o |= m);
        }
    }

    /// Removes one copy of a key, from the one table that holds its
    /// fingerprint; refuses when several do (see [`Deleted::Ambiguous`]).
    pub fn delete(&self, hash: u64) -> Deleted {
        loop {
            let n = self.dir.count();
            if n == 1 {
                return if self.with_table(0, |t| t.delete(hash)) { Deleted::Removed } else { Deleted::Absent };
            }
            let mut holders = (0..n).filter(|&i| self.view(i).contains(hash));
            let i = match (holders.next(), holders.next()) {
                (None, _) => return Deleted::Absent,
                (Some(i), None) => i,
                _ => return Deleted::Ambiguous,
            };
            if self.with_table(i, |t| t.delete(hash)) {
                return Deleted::Removed;
            }
            // Its copy went meanwhile (another delete of the key): look again.
        }
    }

    /// Adds a key to the newest table, adding a table when it is full (see the
    /// module documentation). The index of the table that took it; `Err(Full)`
    /// when no table could be added, with everything stored still stored.
    pub fn insert_counted(&self, hash: u64, stats: &mut OpStats) -> Result<usize, Full> {
        loop {
            let n = self.dir.count();
            if n < MAX_TABLES && self.dir.handles[n].load(Ordering::Acquire) > CLAIMED {
                // Table n is published but not counted yet: count it, then use it.
                self.advance(n);
                continue;
            }
            let handle = self.dir.handle(n - 1);
            match self.tables.with_table(n - 1, handle, |t| t.insert_counted(hash, stats).map(|()| t.item_count())) {
                Ok(items) => {
                    self.stored(n, handle, items);
                    return Ok(n - 1);
                }
                Err(Full) => self.full(n)?,
            }
        }
    }

    /// Adds a key unless some table may hold it: `Ok(true)` if it was added,
    /// `Ok(false)` if a copy of its fingerprint is in a table (nothing
    /// stored), `Err(Full)` as [`Chain::insert_counted`]. Of concurrent calls
    /// for an absent key exactly one adds it (module documentation).
    pub fn insert_new_counted(&self, hash: u64, stats: &mut OpStats) -> Result<bool, Full> {
        loop {
            let n = self.dir.count();
            if n < MAX_TABLES && self.dir.handles[n].load(Ordering::SeqCst) > CLAIMED {
                self.advance(n);
                continue;
            }
            for i in 0..n - 1 {
                if !self.with_table(i, |t| t.absent_here(hash)) {
                    return Ok(false);
                }
            }
            let handle = self.dir.handle(n - 1);
            let newest = || n == MAX_TABLES || self.dir.handles[n].load(Ordering::SeqCst) <= CLAIMED;
            let (added, items) =
                self.tables.with_table(n - 1, handle, |t| (t.insert_new_counted(hash, stats, &newest), t.item_count()));
            match added {
                NewKey::Added => {
                    self.stored(n, handle, items);
                    return Ok(true);
                }
                NewKey::Present => return Ok(false),
                NewKey::Stale => {}
                NewKey::Full => self.full(n)?,
            }
        }
    }

    /// Copies of a key's fingerprint over all tables (each table's read at one
    /// instant): at least the times it was inserted and not deleted.
    pub fn copies(&self, hash: u64) -> u64 {
        (0..self.dir.count()).map(|i| self.view(i).copies(hash)).sum()
    }

    /// [`Chain::copies`] for many hashes: each table counts them all, asking
    /// for the buckets of a key a few keys ahead.
    pub fn copies_many(&self, hashes: &[u64]) -> Vec<u64> {
        const AHEAD: usize = 8;
        let mut out = vec![0; hashes.len()];
        for i in 0..self.dir.count() {
            let t = self.view(i);
            for (j, &h) in hashes.iter().enumerate() {
                if let Some(&ahead) = hashes.get(j + AHEAD) {
                    t.prefetch_key(ahead);
                }
                out[j] += t.copies(h);
            }
        }
        out
    }

    /// Inserts many keys, in order, one answer each (`new`: inserts if new,
    /// [`Chain::insert_new_counted`]; else [`Chain::insert_counted`]). Runs of
    /// keys go straight into the newest table (one write hook for the run)
    /// while it is below its capacity and still the newest (for inserts if
    /// new, while it is the only table), asking for their buckets a few keys
    /// ahead; any other key takes the one-key path, which adds tables.
    /// `Err(Full)` answers as there.
    pub fn insert_many(&self, hashes: &[u64], new: bool, out: &mut [Result<bool, Full>], stats: &mut OpStats) {
        const AHEAD: usize = 8;
        let mut i = 0;
        while i < hashes.len() {
            let n = self.dir.count();
            let newest = || n == MAX_TABLES || self.dir.handles[n].load(Ordering::SeqCst) <= CLAIMED;
            if !new || n == 1 {
                let handle = self.dir.handle(n - 1);
                let cap = self.tables.capacity(handle);
                i = self.tables.with_table(n - 1, handle, |t| {
                    let mut j = i;
                    while j < hashes.len() && t.item_count() < cap && newest() {
                        if let Some(&ahead) = hashes.get(j + AHEAD) {
                            t.prefetch_key(ahead);
                        }
                        out[j] = if new {
                            match t.insert_new_counted(hashes[j], stats, &newest) {
                                NewKey::Added => Ok(true),
                                NewKey::Present => Ok(false),
                                NewKey::Full | NewKey::Stale => break,
                            }
                        } else {
                            match t.insert_counted(hashes[j], stats) {
                                Ok(()) => Ok(true),
                                Err(Full) => break,
                            }
                        };
                        j += 1;
                    }
                    j
                });
            }
            if let Some(&h) = hashes.get(i) {
                out[i] =
                    if new { self.insert_new_counted(h, stats) } else { self.insert_counted(h, stats).map(|_| true) };
                i += 1;
            }
        }
    }

    /// [`Chain::insert_counted`] without statistics.
    pub fn insert(&self, hash: u64) -> Result<usize, Full> {
        self.insert_counted(hash, &mut OpStats::default())
    }

    /// After a store into table `n − 1` (behind `handle`), which now holds
    /// `items`: at its capacity, the next table is built.
    fn stored(&self, n: usize, handle: u64, items: u64) {
        if n < MAX_TABLES && items >= self.tables.capacity(handle) && self.tables.grows() {
            self.build_early(n);
        }
    }

    /// Table `n − 1`, the newest, is full: `Ok` once a table `n` is there
    /// (made here or by somebody else meanwhile), to try again; `Err(Full)`
    /// if the chain cannot grow, or there is no room for a table of our own
    /// and nobody published one meanwhile.
    fn full(&self, n: usize) -> Result<(), Full> {
        if n == MAX_TABLES || !self.tables.grows() {
            return Err(Full);
        }
        if !self.add_table(n) && self.dir.handles[n].load(Ordering::Acquire) <= CLAIMED {
            return Err(Full);
        }
        Ok(())
    }

    /// Table `n − 1` holds its capacity: claims slot `n` and builds the next
    /// table, unless somebody already did or does.
    fn build_early(&self, n: usize) {
        if self.dir.handles[n].compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        if !self.add_table(n) {
            // No room now: give the claim back, so that a later insert may try again.
            let _ = self.dir.handles[n].compare_exchange(CLAIMED, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Makes table `n` and publishes it, or gives it back if another table won
    /// the slot. False if no table could be made; true also when the chain
    /// has more than `n` tables by now (there is nothing to make).
    fn add_table(&self, n: usize) -> bool {
        let before = self.dir.handles();
        if before.len() != n {
            return true;
        }
        match self.tables.make(n, &before) {
            Some(h) => {
                if !self.publish(n, h) {
                    self.tables.release(h);
                }
                true
            }
            None => false,
        }
    }

    /// Puts handle `h` into slot `n` unless a table is already there, then
    /// counts it. False if another table won the slot.
    fn publish(&self, n: usize, h: u64) -> bool {
        let slot = &self.dir.handles[n];
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            if cur > CLAIMED {
                self.advance(n);
                return false;
            }
            match slot.compare_exchange(cur, h, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.advance(n);
                    return true;
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Counts table `n` (whose handle is in its slot) if the count is still `n`.
    fn advance(&self, n: usize) {
        let _ = self.dir.count.compare_exchange(n as u64, n as u64 + 1, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Keys stored, over all tables.
    pub fn item_count(&self) -> u64 {
        (0..self.dir.count()).map(|i| self.view(i).item_count()).sum()
    }
}

/// Reader views of a chain's first `n` tables ([`Chain::views`]).
#[derive(Clone, Copy)]
pub struct Views<'a> {
    tables: [Option<Table<'a>>; MAX_TABLES],
    n: usize,
}

impl Views<'_> {
    /// [`Chain::contains`] over these tables, newest (largest, holding most
    /// keys) first. The tables' loads do not depend on one another, so the
    /// processor overlaps their cache misses; a pass that asked for the buckets
    /// of the newest tables first measured no faster, and slower when it asked
    /// for all of them (`make bench-core`, part "a filter that grows").
    #[inline]
    pub fn contains_counted(&self, hash: u64, stats: &mut OpStats) -> bool {
        self.tables[..self.n].iter().rev().flatten().any(|t| t.contains_counted(hash, stats))
    }

    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        self.contains_counted(hash, &mut OpStats::default())
    }
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// One copy of the key's fingerprint was removed.
    Removed,
    /// No table holds it.
    Absent,
    /// Several tables hold the key's fingerprint in its buckets, and nothing
    /// was removed. A copy in one table may belong to another key whose
    /// fingerprint and buckets agree with this key's in that table only, and
    /// removing it would lose that key (a false negative); keys never move
    /// between tables, so a key that is present holds a copy in one table at
    /// least, and when exactly one table holds a match, that copy (or one
    /// interchangeable with it, in the same table and buckets) is the key's.
    /// About one delete in `1/fpp` of a filter that grew is refused so; the
    /// key then stays, as a false positive.
    Ambiguous,
}

/// How the tables of a chain are planned: the first table's capacity and the
/// rate, and each next table `expansion` times its predecessor's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Growth {
    pub fpp: f64,
    pub expansion: u32,
}

impl Growth {
    /// The first table for `capacity` keys.
    pub fn first(&self, capacity: u64, max_buckets: u64) -> Result<sizing::Sized, SizingError> {
        sizing::size_growth_table(capacity, self.fpp, 0.0, max_buckets)
    }

    /// The table after tables of these parameters and capacities.
    pub fn next(&self, before: &[(Params, u64)], max_buckets: u64) -> Result<sizing::Sized, SizingError> {
        let spent: f64 = before.iter().map(|(p, c)| sizing::table_bound(p, *c)).sum();
        let last = before.last().map_or(1, |(_, c)| *c);
        sizing::size_growth_table(last.saturating_mul(self.expansion.max(1) as u64), self.fpp, spent, max_buckets)
    }
}

pub mod owned;
