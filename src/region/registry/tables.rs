//! A named filter's tables in the region (`filter::chain`): where they lie,
//! how a table is added while every process goes on using the filter, and the
//! views the rest of the registry uses (the chain, its shapes and units).
//!
//! # Layout
//!
//! A filter's first allocation (its *head*, the blocks its entry records)
//! holds the chain's [`Directory`] in its first [`HEAD_BYTES`], then table 0:
//! its words header, its bucket words and, for a durable filter, one unit
//! state word per unit (`region::durable`). Every further table is an
//! allocation of its own with the same layout minus the directory, claimed
//! with the head's tag: the allocator's recovery, which frees runs whose tag
//! no entry holds, never frees a table of a live filter, not even one being
//! made. A table's *handle* is the offset of its words header in the block
//! area plus [`HANDLE_BIAS`] (so never 0 or `CLAIMED`).
//!
//! # Adding a table
//!
//! [`Tables::make`] runs in the process whose insert found the newest table
//! full (or at its capacity), pinned as a writer, without the registry lock:
//! it claims blocks from the lock-free allocator, zeroes them and writes the
//! header; `filter::chain` then publishes the handle. A table whose publish
//! lost is freed at once. When the head is reclaimed (the filter was dropped
//! or replaced and nobody can still read it), every table its directory holds
//! is freed with it. If there is no room, the insert reports the filter full
//! (`failed_inserts`), nothing stored is lost; space held by dropped filters
//! that running statements may still read is not reclaimed for it (that needs
//! the registry lock), so such an insert may fail until the next create, drop
//! or publish reclaims it.
//!
//! The caller may set caps on the bytes of the filter's owner and database
//! ([`RegionTables::set_limits`]); a table that would pass one is not made
//! (the insert is full, and [`RegionTables::refused_by_cap`] says which cap).
//! Only then is the registry read (see `limits`); a refusal is remembered
//! until the caps or the registry change, so inserts into a filter at its
//! cap do not read the registry again and again.

use super::*;
use crate::filter::{Chain, Directory, Growth, Tables, DIRECTORY_BYTES};
use crate::region::durable::ChainUnits;
use std::cell::Cell;

/// Bytes in front of table 0 in a filter's head allocation: the directory,
/// rounded up to a cache line.
pub const HEAD_BYTES: u64 = 320;
const _: () = assert!(DIRECTORY_BYTES as u64 <= HEAD_BYTES);

/// Added to a table's offset to make its handle.
pub const HANDLE_BIAS: u64 = 8;

/// A published table: its shape and its item count now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableInfo {
    pub params: Params,
    pub capacity: u64,
    pub items: u64,
}

impl Region {
    /// Bytes of one table (outside the head): words header, bucket words, and
    /// for a durable filter its unit states.
    pub(super) fn table_bytes(params: &Params, durable: bool) -> u64 {
        Self::filter_bytes(params, durable)
    }

    /// Bytes a filter of one table with these parameters takes in the region.
    pub fn bytes_for(params: &Params, durable: bool) -> u64 {
        Self::bytes_for_tables(&[TableSpec { params: *params, capacity: 1 }], durable)
    }

    /// Bytes a filter of these tables takes in the region, in whole blocks.
    pub fn bytes_for_tables(tables: &[TableSpec], durable: bool) -> u64 {
        tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                (if i == 0 { HEAD_BYTES } else { 0 } + Self::table_bytes(&t.params, durable)).div_ceil(BLOCK_BYTES)
                    * BLOCK_BYTES
            })
            .sum()
    }

    pub(super) fn directory_at(&self, start_block: u64) -> &Directory {
        &self.at::<Directory>(self.lay.data_at + start_block * BLOCK_BYTES, 1)[0]
    }

    /// Offset (from the region's start) of the words header behind `handle`.
    fn table_at(&self, handle: u64) -> u64 {
        self.lay.data_at + handle - HANDLE_BIAS
    }

    pub(super) fn header_of(&self, handle: u64) -> &WordsHeader {
        &self.at::<WordsHeader>(self.table_at(handle), 1)[0]
    }

    /// The table behind `handle`, without a write hook.
    pub(super) fn table_of(&self, handle: u64) -> Table<'_> {
        let header = self.header_of(handle);
        let words = self.at::<AtomicU64>(self.table_at(handle) + WORDS_HEADER_BYTES as u64, header.bucket_count);
        Table::with_header(header, words)
    }

    fn units_of(&self, handle: u64, index: usize) -> Units<'_> {
        let at = self.table_at(handle) + WORDS_HEADER_BYTES as u64;
        let m = self.header_of(handle).bucket_count;
        let words = self.at::<AtomicU64>(at, m);
        let states = self.at::<AtomicU32>(at + 8 * m, crate::region::durable::unit_count(m));
        Units::new(states, words, self.pool(), &self.entries()[index].checkpoint.pool_waits)
    }

    /// The first block and block count of a table that is not a head (its
    /// header says whether it has unit states: `reserved[0]`).
    fn table_blocks(&self, handle: u64) -> (u64, u64) {
        let off = handle - HANDLE_BIAS;
        debug_assert_eq!(off % BLOCK_BYTES, 0);
        let h = self.header_of(handle);
        (off / BLOCK_BYTES, Self::table_bytes(&h.params(), h.reserved[0] != 0).div_ceil(BLOCK_BYTES))
    }

    /// The handle of table 0 of the filter whose head starts at `start_block`.
    pub(super) fn head_handle(start_block: u64) -> u64 {
        start_block * BLOCK_BYTES + HEAD_BYTES + HANDLE_BIAS
    }

    /// Frees the tables other than table 0 that the directory of the head at
    /// `start_block` holds (the head is being freed: nobody reads them).
    pub(super) fn free_tables_of(&self, start_block: u64, tag: u64) {
        let head = Self::head_handle(start_block);
        for h in self.directory_at(start_block).all_handles() {
            if h != head {
                let (start, n) = self.table_blocks(h);
                self.allocator().free(start, n, tag);
            }
        }
    }

    /// The runs (start, blocks, tag) of the tables other than table 0 of the
    /// head at `start_block`, for the consistency check.
    pub(super) fn table_runs(&self, start_block: u64, tag: u64) -> Vec<(u64, u64, u64)> {
        let head = Self::head_handle(start_block);
        self.directory_at(start_block)
            .all_handles()
            .into_iter()
            .filter(|&h| h != head)
            .map(|h| {
                let (s, n) = self.table_blocks(h);
                (s, n, tag)
            })
            .collect()
    }

    /// Filter `info`'s tables (None for a placeholder, which has none). Use
    /// while pinned, after `still_current` confirmed `info.seq`.
    pub fn tables(&self, info: &EntryInfo) -> Option<RegionTables<'_>> {
        if info.blocks == 0 {
            return None;
        }
        Some(RegionTables {
            r: self,
            dir: self.directory_at(info.start_block),
            views: Default::default(),
            durable: info.durable,
            hook: info.durable,
            index: info.index,
            tag: info.tag,
            growth: info.growth,
            owner: info.owner,
            db: info.db,
            limits: Cell::new(Limits::default()),
            refused: Cell::new(None),
            hit: Cell::new(None),
            full: Cell::new(false),
        })
    }

    /// Claims `bytes` more with tag `tag` (a table of a filter being made
    /// under the registry lock), reclaiming retired space if short.
    pub(super) fn claim_more(&self, lk: &Locked, bytes: u64, tag: u64) -> Option<(u64, u64)> {
        let n = bytes.div_ceil(BLOCK_BYTES);
        loop {
            if let Some(start) = self.allocator().alloc(n, tag) {
                return Some((start, n));
            }
            if self.reclaim(lk) == 0 {
                return None;
            }
        }
    }

    /// Zeroes the unit states of a new table at `at` (words header offset) and
    /// writes its header; the words are zeroed or written by the caller.
    ///
    /// # Safety
    /// The blocks under `at .. at + table_bytes` were just claimed by this
    /// process and are not yet reachable by anyone else.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn fresh_table(&self, at: u64, spec: &TableSpec, durable: bool) -> &mut [u64] {
        let len = Self::table_bytes(&spec.params, durable);
        assert!(at + len <= self.lay.size);
        // SAFETY: as documented; the range lies inside the region, the header
        // offset is 8-aligned (a block start, or a head start plus HEAD_BYTES).
        unsafe {
            let bytes = std::slice::from_raw_parts_mut(self.base.as_ptr().add(at as usize), len as usize);
            let (head, body) = bytes.split_at_mut(WORDS_HEADER_BYTES);
            let (words, states) = body.split_at_mut(8 * spec.params.bucket_count as usize);
            states.fill(0);
            let mut header = WordsHeader::new(&spec.params, spec.capacity, 0);
            header.reserved[0] = durable as u8;
            (head.as_mut_ptr() as *mut WordsHeader).write(header);
            std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u64, spec.params.bucket_count as usize)
        }
    }
}

/// A filter's tables in the region: the chain to operate on, and what its
/// views and cuts read. Valid while its entry is (see [`Region::tables`]).
/// Keeps each table's reader view once made (a call site keeps its
/// `RegionTables` across calls, so lookups do not derive a table's geometry
/// again and again).
pub struct RegionTables<'r> {
    r: &'r Region,
    dir: &'r Directory,
    views: [std::cell::Cell<Option<Table<'r>>>; crate::filter::MAX_TABLES],
    durable: bool,
    /// Whether writes tell the durable filter's units (see `region::durable`).
    hook: bool,
    index: usize,
    tag: u64,
    growth: Option<Growth>,
    /// The filter's owner and database, charged for its tables.
    owner: u32,
    db: u32,
    /// The caps growth keeps to (none unless the caller sets them).
    limits: Cell<Limits>,
    /// The last growth refused by a cap, while the registry and the caps are
    /// as they were then: the table it was for, the caps, the registry's
    /// change count, and the cap passed.
    refused: Cell<Option<(usize, Limits, u64, LimitHit)>>,
    /// A growth refused by a cap since the caps were set, and whether an
    /// insert found the filter full since.
    hit: Cell<Option<LimitHit>>,
    full: Cell<bool>,
}

impl<'r> RegionTables<'r> {
    /// The same tables for lookups only: without the durable filter's write
    /// hook (lookups write nothing).
    pub fn for_lookups(self) -> RegionTables<'r> {
        RegionTables { hook: false, ..self }
    }

    /// The chain: lookups, inserts (which add tables) and deletes.
    pub fn chain(&self) -> Chain<'_, Self> {
        Chain::new(self.dir, self)
    }

    /// The handles of the published tables.
    pub fn handles(&self) -> Vec<u64> {
        self.dir.handles()
    }

    /// Table `handle` to read (no write hook).
    pub fn table(&self, handle: u64) -> Table<'r> {
        self.r.table_of(handle)
    }

    /// Each published table's shape and item count now.
    pub fn shapes(&self) -> Vec<TableInfo> {
        self.handles()
            .into_iter()
            .map(|h| {
                let t = self.r.table_of(h);
                TableInfo { params: t.params(), capacity: self.r.header_of(h).capacity, items: t.item_count() }
            })
            .collect()
    }

    /// The hash seed every table shares.
    pub fn seed(&self) -> u64 {
        self.r.header_of(self.dir.handle(0)).seed
    }

    /// Each published table's parameters and capacity.
    pub fn specs(&self) -> Vec<TableSpec> {
        self.shapes().iter().map(|s| TableSpec { params: s.params, capacity: s.capacity }).collect()
    }

    /// Blocks of all tables.
    pub fn blocks(&self) -> u64 {
        Region::bytes_for_tables(&self.specs(), self.durable) / BLOCK_BYTES
    }

    /// A durable filter's units over all its published tables.
    pub fn units(&self) -> Option<ChainUnits<'r>> {
        self.durable
            .then(|| ChainUnits::new(self.handles().into_iter().map(|h| self.r.units_of(h, self.index)).collect()))
    }

    /// How the filter grows (None: it does not).
    pub fn growth(&self) -> Option<Growth> {
        self.growth
    }

    /// The caps on the bytes of the filter's owner and database that the
    /// tables it adds from now on must keep to (recovery and replay set none),
    /// and a fresh start for [`Self::refused_by_cap`].
    pub fn set_limits(&self, limits: Limits) {
        // Called before every insert: writes only what changed (an insert
        // that grows nothing leaves them as they were; `make` clears `hit`).
        if self.limits.get() != limits {
            self.limits.set(limits);
        }
        if self.full.get() {
            self.full.set(false);
            self.hit.set(None);
        }
    }

    /// For an insert that found the filter full (`Err(Full)`).
    pub fn note_full(&self) {
        self.full.set(true);
    }

    /// Since [`Self::set_limits`]: the cap that kept the filter from adding a
    /// table, if an insert then found it full ([`Self::note_full`]).
    pub fn refused_by_cap(&self) -> Option<LimitHit> {
        if self.full.get() {
            self.hit.get()
        } else {
            None
        }
    }

    /// Whether an insert found the filter full since the caps were set (the
    /// cheap test before [`Self::refused_by_cap`]).
    pub fn found_full(&self) -> bool {
        self.full.get()
    }

    /// Whether the caps leave room for table `index` of `blocks` blocks.
    fn within_caps(&self, index: usize, blocks: u64) -> Result<(), LimitHit> {
        let limits = self.limits.get();
        if !limits.caps_bytes() {
            return Ok(());
        }
        let changes = self.r.changes();
        if let Some((table, caps, seen, hit)) = self.refused.get() {
            // Nothing was dropped or replaced since (other filters' growth
            // only adds): still no room.
            if (table, caps, seen) == (index, limits, changes) {
                return Err(hit);
            }
        }
        self.r
            .room_to_grow(&limits, self.owner, self.db, blocks * BLOCK_BYTES)
            .inspect_err(|&hit| self.refused.set(Some((index, limits, changes, hit))))
    }
}

impl Tables for RegionTables<'_> {
    #[inline]
    fn with_table<R>(&self, index: usize, handle: u64, f: impl FnOnce(&Table<'_>) -> R) -> R {
        let t = <Self as Tables>::table(self, index, handle);
        if self.hook {
            let u = self.r.units_of(handle, self.index);
            f(&t.with_hook(&u))
        } else {
            f(&t)
        }
    }

    #[inline]
    fn table(&self, index: usize, handle: u64) -> Table<'_> {
        if let Some(t) = self.views[index].get() {
            return t;
        }
        let t = self.r.table_of(handle);
        self.views[index].set(Some(t));
        t
    }

    fn capacity(&self, handle: u64) -> u64 {
        self.r.header_of(handle).capacity
    }

    fn make(&self, index: usize, before: &[u64]) -> Option<u64> {
        let growth = self.growth?;
        // What stopped the latest attempt (none yet): an insert that then
        // finds the filter full reports a cap only if this attempt met one.
        self.hit.set(None);
        let shapes: Vec<(Params, u64)> =
            before.iter().map(|&h| (self.r.header_of(h).params(), self.r.header_of(h).capacity)).collect();
        let sized = growth.next(&shapes, crate::filter::MAX_BUCKET_COUNT).ok()?;
        let mut params = sized.params;
        params.seed = shapes[0].0.seed;
        let spec = TableSpec { params, capacity: sized.capacity };
        let blocks = Region::table_bytes(&params, self.durable).div_ceil(BLOCK_BYTES);
        if let Err(hit) = self.within_caps(index, blocks) {
            self.hit.set(Some(hit));
            return None;
        }
        let start = self.r.allocator().alloc(blocks, self.tag)?;
        // Charged to the owner and database as soon as claimed (given back in
        // `release` if it is never published).
        self.r.add_grown(self.index, self.tag, blocks as i64);
        let at = self.r.lay.data_at + start * BLOCK_BYTES;
        // SAFETY: the allocator just gave these blocks to this process; the
        // handle is published only after this returns.
        let words = unsafe { self.r.fresh_table(at, &spec, self.durable) };
        words.fill(0);
        Some(start * BLOCK_BYTES + HANDLE_BIAS)
    }

    fn release(&self, handle: u64) {
        let (start, n) = self.r.table_blocks(handle);
        self.r.allocator().free(start, n, self.tag);
        self.r.add_grown(self.index, self.tag, -(n as i64));
    }

    fn grows(&self) -> bool {
        self.growth.is_some()
    }
}
