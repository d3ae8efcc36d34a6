//! Creating, publishing (replacing), dropping and granting filters under the
//! registry lock; generations, placeholders and reload marks; and reclamation
//! of retired blocks once no pinned reader can see them.
//!
//! # Fail-safety of the allocator
//!
//! Before claiming blocks, the lock holder records the allocation's tag in the
//! header (`pending_tag`), and clears it once the entry that records the tag is
//! linked. If it stopped in between (an error unwound it), the next lock holder
//! finds the tag pending and runs the allocator's recovery: every allocated run
//! whose tag no entry or retired record holds is freed.

use super::durable_state::reset_durable;
use super::limits::pack_grown;
use super::tables::HEAD_BYTES;
use super::types::TableSpec;
use super::*;

impl Region {
    /// Keeps live filter `info`'s name, owner and grant, as generation `gen`
    /// with parameters `params`, without contents (they were lost: it needs a
    /// reload for `reason`); its blocks are retired.
    #[allow(clippy::too_many_arguments)]
    pub fn clear_contents(
        &self,
        lk: &Locked,
        info: &EntryInfo,
        params: &Params,
        capacity: u64,
        fpp: f64,
        key: KeyType,
        growth: Option<Growth>,
        gen: u64,
        reason: u64,
    ) -> Result<EntryInfo, RegionError> {
        debug_assert!(reason != 0);
        let e = self.unchanged(info)?;
        self.retired_room(lk)?;
        self.rewrite(lk, e, |e| {
            e.start_block.store(0, Ordering::Relaxed);
            e.blocks.store(0, Ordering::Relaxed);
            e.tag.store(0, Ordering::Relaxed);
            e.grown.store(0, Ordering::Relaxed);
            e.capacity.store(capacity, Ordering::Relaxed);
            e.fpp_bits.store(fpp.to_bits(), Ordering::Relaxed);
            e.gen.store(gen, Ordering::Relaxed);
            e.durable.store(1, Ordering::Relaxed);
            e.reload_reason.store(reason, Ordering::Relaxed);
            e.key.store(pack_key(key), Ordering::Relaxed);
            store_growth(e, growth);
            for (w, v) in e.params.iter().zip(pack_params(params)) {
                w.store(v, Ordering::Relaxed);
            }
            reset_durable(&e.checkpoint, true, gen);
        });
        if info.blocks > 0 {
            self.retire(lk, info.start_block, info.blocks, info.tag, None);
        }
        Ok(self.entry_info(info.index).expect("still linked"))
    }

    /// Rewrites entry `e` between the seqlock's two increments.
    pub(super) fn rewrite(&self, _lk: &Locked, e: &Entry, f: impl FnOnce(&Entry)) {
        let seq = e.seq.load(Ordering::Relaxed);
        debug_assert_eq!(seq & 1, 0);
        self.header().changes.fetch_add(1, Ordering::Relaxed);
        e.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        f(e);
        e.seq.store(seq + 2, Ordering::Release);
    }

    /// Frees allocations left behind by a lock holder that stopped between
    /// claiming blocks and linking them (see the module documentation).
    pub(super) fn recover_pending(&self, lk: &Locked) {
        let h = self.header();
        if h.pending_tag.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.recover(lk);
        h.pending_tag.store(0, Ordering::Relaxed);
    }

    /// Frees every allocated run whose tag no entry or retired record holds.
    /// Returns the blocks freed.
    pub fn recover(&self, _lk: &Locked) -> u64 {
        let mut in_use: Vec<u64> = self
            .entries()
            .iter()
            .filter(|e| e.state.load(Ordering::Relaxed) != STATE_FREE)
            .map(|e| e.tag.load(Ordering::Relaxed))
            .collect();
        let retired = self.header().retired_count.load(Ordering::Relaxed) as usize;
        in_use.extend(self.retired()[..retired].iter().map(|r| r.tag.load(Ordering::Relaxed)));
        in_use.sort_unstable();
        self.allocator().recover(|tag| in_use.binary_search(&tag).is_ok())
    }

    /// Claims blocks for `bytes`, reclaiming retired space first if short. The tag
    /// stays pending until [`Self::linked`]. Never waits: if the space is held by
    /// copies still being read, the error says how much (the caller may retry
    /// after releasing the lock).
    pub(super) fn claim(&self, lk: &Locked, bytes: u64) -> Result<(u64, u64, u64), RegionError> {
        self.recover_pending(lk);
        let n = bytes.div_ceil(BLOCK_BYTES);
        let h = self.header();
        let tag = h.next_tag.fetch_add(1, Ordering::Relaxed);
        h.pending_tag.store(tag, Ordering::Relaxed);
        loop {
            if let Some(start) = self.allocator().alloc(n, tag) {
                return Ok((start, n, tag));
            }
            if self.reclaim(lk) == 0 {
                break;
            }
        }
        h.pending_tag.store(0, Ordering::Relaxed);
        let count = h.retired_count.load(Ordering::Relaxed) as usize;
        let pending = self.retired()[..count].iter().map(|r| r.blocks.load(Ordering::Relaxed)).sum::<u64>();
        Err(self.no_space(n * BLOCK_BYTES, pending * BLOCK_BYTES))
    }

    /// The error for `requested` bytes that do not fit, with the free space
    /// now and `pending` bytes still being released.
    fn no_space(&self, requested: u64, pending: u64) -> RegionError {
        let a = self.allocator();
        RegionError::NoSpace {
            requested,
            free: a.free_blocks() * BLOCK_BYTES,
            largest: a.largest_free_run() * BLOCK_BYTES,
            pending,
        }
    }

    pub(super) fn linked(&self, _lk: &Locked) {
        self.header().pending_tag.store(0, Ordering::Relaxed);
    }

    /// Bytes at the start of an allocation, for the lock holder to fill before the
    /// allocation is linked.
    #[allow(clippy::mut_from_ref)]
    pub(super) fn block_bytes(&self, _lk: &Locked, start: u64, len: u64) -> &mut [u8] {
        let at = self.lay.data_at + start * BLOCK_BYTES;
        assert!(at + len <= self.lay.size);
        // SAFETY: the caller just claimed these blocks and has not linked them, so
        // no other process can reach them; the range lies inside the region.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(at as usize), len as usize) }
    }

    pub(super) fn free_entry(&self, lk: &Locked) -> Result<usize, RegionError> {
        let find = || self.entries().iter().position(|e| e.state.load(Ordering::Relaxed) == STATE_FREE);
        if let Some(i) = find() {
            return Ok(i);
        }
        self.reclaim(lk);
        find().ok_or(RegionError::NoEntries { max: self.lay.entries })
    }

    /// Creates filter `spec` with tables `tables` and nothing in them, or, with
    /// `contents`, the bucket words it writes (a published value's). Returns the
    /// entry.
    pub fn create(
        &self,
        lk: &Locked,
        spec: &NewFilter<'_>,
        tables: &[TableSpec],
        contents: Option<Contents<'_>>,
        stamp: Stamp<'_>,
    ) -> Result<EntryInfo, RegionError> {
        let name = encode_name(spec.name)?;
        if self.find(spec.db, spec.name).is_some() {
            return Err(RegionError::Exists);
        }
        let index = self.free_entry(lk)?;
        let (start, blocks, tag) = self.fill(lk, tables, spec.durable, contents)?;
        let gen = self.stamp(lk, start, stamp);
        let others = Self::bytes_for_tables(tables, spec.durable) / BLOCK_BYTES - blocks;
        self.link_entry(lk, index, spec, &tables[0].params, name, (start, blocks, tag), others, gen, 0);
        self.linked(lk);
        Ok(self.entry_info(index).expect("just linked"))
    }

    /// Records a filter that exists but whose contents were lost (recovery could
    /// not restore them, or they did not fit): it keeps its name, owner and
    /// parameters, holds no blocks, and must be published again before use.
    pub fn create_placeholder(
        &self,
        lk: &Locked,
        spec: &NewFilter<'_>,
        params: &Params,
        gen: u64,
        reason: u64,
    ) -> Result<EntryInfo, RegionError> {
        debug_assert!(reason != 0);
        let name = encode_name(spec.name)?;
        if self.find(spec.db, spec.name).is_some() {
            return Err(RegionError::Exists);
        }
        let index = self.free_entry(lk)?;
        self.recover_pending(lk);
        self.link_entry(lk, index, spec, params, name, (0, 0, 0), 0, gen, reason);
        Ok(self.entry_info(index).expect("just linked"))
    }

    /// Runs `stamp` over the words of each table of the filled head at `start`.
    pub(super) fn stamp(&self, _lk: &Locked, start: u64, stamp: Stamp<'_>) -> u64 {
        let dir = self.directory_at(start);
        let mut items = 0;
        let words: Vec<&[u64]> = dir
            .handles()
            .into_iter()
            .map(|h| {
                let t = self.table_of(h);
                items += t.item_count();
                // SAFETY: the table's words, reachable by nobody else until the
                // filter is linked (the caller holds the lock that links it);
                // AtomicU64 has the layout of u64.
                unsafe { std::slice::from_raw_parts(t.bucket_words().as_ptr() as *const u64, t.bucket_words().len()) }
            })
            .collect();
        stamp(&words, items)
    }

    /// Links entry `index` to the head at `start` (`blocks` long, tagged
    /// `tag`) and `others` blocks of tables outside the head.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn link_entry(
        &self,
        lk: &Locked,
        index: usize,
        spec: &NewFilter<'_>,
        params: &Params,
        name: [u64; NAME_WORDS],
        (start, blocks, tag): (u64, u64, u64),
        others: u64,
        gen: u64,
        reason: u64,
    ) {
        let e = &self.entries()[index];
        self.rewrite(lk, e, |e| {
            e.db.store(spec.db as u64, Ordering::Relaxed);
            e.owner.store(spec.owner as u64, Ordering::Relaxed);
            e.readers.store(READERS_NONE, Ordering::Relaxed);
            for (w, n) in e.name.iter().zip(name) {
                w.store(n, Ordering::Relaxed);
            }
            e.start_block.store(start, Ordering::Relaxed);
            e.blocks.store(blocks, Ordering::Relaxed);
            e.tag.store(tag, Ordering::Relaxed);
            e.grown.store(pack_grown(tag, others), Ordering::Relaxed);
            e.capacity.store(spec.capacity, Ordering::Relaxed);
            e.fpp_bits.store(spec.fpp.to_bits(), Ordering::Relaxed);
            e.durable.store(spec.durable as u64, Ordering::Relaxed);
            e.gen.store(gen, Ordering::Relaxed);
            e.reload_reason.store(reason, Ordering::Relaxed);
            e.key.store(pack_key(spec.key), Ordering::Relaxed);
            store_growth(e, spec.growth);
            for (w, v) in e.params.iter().zip(pack_params(params)) {
                w.store(v, Ordering::Relaxed);
            }
            for s in &e.stats {
                for c in [&s.inserts, &s.lookups, &s.deletes, &s.failed_inserts, &s.lookup_retries, &s.kicks] {
                    c.store(0, Ordering::Relaxed);
                }
            }
            reset_durable(&e.checkpoint, spec.durable, gen);
            e.state.store(STATE_LIVE, Ordering::Relaxed);
        });
    }

    /// Claims and fills the blocks of a new filter: its head (the directory,
    /// then table 0), and one allocation per further table with the head's tag;
    /// each table's words empty or written by `contents`, its item count
    /// counted from them. On `NoSpace` nothing stays claimed.
    pub(super) fn fill(
        &self,
        lk: &Locked,
        tables: &[TableSpec],
        durable: bool,
        contents: Option<Contents<'_>>,
    ) -> Result<(u64, u64, u64), RegionError> {
        if tables.is_empty() || tables.len() > crate::filter::MAX_TABLES {
            return Err(RegionError::BadParams(format!(
                "a filter has 1 to {} tables, not {}",
                crate::filter::MAX_TABLES,
                tables.len()
            )));
        }
        for t in tables {
            t.params.check().map_err(|e| RegionError::BadParams(e.to_string()))?;
        }
        let (start, blocks, tag) = self.claim(lk, HEAD_BYTES + Self::table_bytes(&tables[0].params, durable))?;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for t in &tables[1..] {
            match self.claim_more(lk, Self::table_bytes(&t.params, durable), tag) {
                Some(run) => runs.push(run),
                None => {
                    for &(s, n) in &runs {
                        self.allocator().free(s, n, tag);
                    }
                    self.allocator().free(start, blocks, tag);
                    self.header().pending_tag.store(0, Ordering::Relaxed);
                    return Err(self.no_space(Self::bytes_for_tables(tables, durable), 0));
                }
            }
        }
        // The directory: all zeros, then the handles.
        self.block_bytes(lk, start, HEAD_BYTES).fill(0);
        let head_at = self.lay.data_at + start * BLOCK_BYTES + HEAD_BYTES;
        let ats: Vec<u64> =
            std::iter::once(head_at).chain(runs.iter().map(|&(s, _)| self.lay.data_at + s * BLOCK_BYTES)).collect();
        for (i, (t, &at)) in tables.iter().zip(&ats).enumerate() {
            // SAFETY: claimed above by this lock holder, not yet linked.
            let words = unsafe { self.fresh_table(at, t, durable) };
            match contents {
                Some(write) => write(i, words),
                None => words.fill(0),
            }
            let items = crate::filter::Geometry::new(&t.params).occupied_total(words.iter().copied());
            self.at::<WordsHeader>(at, 1)[0].item_count.store(items, Ordering::Relaxed);
        }
        let handles: Vec<u64> = ats.iter().map(|&at| at - self.lay.data_at + tables::HANDLE_BIAS).collect();
        self.directory_at(start).init(&handles);
        Ok((start, blocks, tag))
    }

    /// Replaces live filter `info`'s contents with the bucket words `contents`
    /// writes, and its owner and lookup grant with `owner` and `readers`:
    /// readers see the old filter or the new one, never the new contents under
    /// the old owner.
    #[allow(clippy::too_many_arguments)]
    pub fn replace(
        &self,
        lk: &Locked,
        info: &EntryInfo,
        tables: &[TableSpec],
        contents: Contents<'_>,
        capacity: u64,
        fpp: f64,
        durable: bool,
        key: KeyType,
        growth: Option<Growth>,
        (owner, readers): (u32, u64),
        stamp: Stamp<'_>,
    ) -> Result<EntryInfo, RegionError> {
        let e = self.unchanged(info)?;
        self.retired_room(lk)?;
        let (start, blocks, tag) = self.fill(lk, tables, durable, Some(contents))?;
        let gen = self.stamp(lk, start, stamp);
        let params = &tables[0].params;
        let others = Self::bytes_for_tables(tables, durable) / BLOCK_BYTES - blocks;
        self.rewrite(lk, e, |e| {
            e.start_block.store(start, Ordering::Relaxed);
            e.blocks.store(blocks, Ordering::Relaxed);
            e.tag.store(tag, Ordering::Relaxed);
            e.grown.store(pack_grown(tag, others), Ordering::Relaxed);
            e.capacity.store(capacity, Ordering::Relaxed);
            e.fpp_bits.store(fpp.to_bits(), Ordering::Relaxed);
            e.gen.store(gen, Ordering::Relaxed);
            e.owner.store(owner as u64, Ordering::Relaxed);
            e.readers.store(readers, Ordering::Relaxed);
            e.durable.store(durable as u64, Ordering::Relaxed);
            e.reload_reason.store(0, Ordering::Relaxed);
            e.key.store(pack_key(key), Ordering::Relaxed);
            store_growth(e, growth);
            for (w, v) in e.params.iter().zip(pack_params(params)) {
                w.store(v, Ordering::Relaxed);
            }
            reset_durable(&e.checkpoint, durable, gen);
        });
        // The old blocks stay recorded (as retired) before the new tag stops being
        // pending, so recovery can never free either.
        self.retire(lk, info.start_block, info.blocks, info.tag, None);
        self.linked(lk);
        Ok(self.entry_info(info.index).expect("still linked"))
    }

    /// Drops live filter `info`.
    pub fn drop_filter(&self, lk: &Locked, info: &EntryInfo) -> Result<(), RegionError> {
        let e = self.unchanged(info)?;
        self.retired_room(lk)?;
        self.rewrite(lk, e, |e| e.state.store(STATE_RETIRED, Ordering::Relaxed));
        // A placeholder holds no blocks; its entry is still retired, since
        // lookups may be reading it.
        self.retire(lk, info.start_block, info.blocks, info.tag, Some(info.index));
        Ok(())
    }

    /// Sets why filter `info` must be published again before use (0: it need
    /// not), and its generation: replay gives an entry the generation it could
    /// not install, so that the name is kept; otherwise `gen` is `info.gen`.
    /// The contents stay allocated.
    pub fn set_reload(&self, lk: &Locked, info: &EntryInfo, gen: u64, reason: u64) -> Result<(), RegionError> {
        let e = self.unchanged(info)?;
        self.rewrite(lk, e, |e| {
            e.gen.store(gen, Ordering::Relaxed);
            e.reload_reason.store(reason, Ordering::Relaxed);
        });
        if info.durable {
            self.mark_changed(info.index, if gen == info.gen { CHANGED_META } else { CHANGED_META | NEEDS_BASE });
        }
        Ok(())
    }

    /// The live filter whose generation is `gen` (durable filters only).
    pub fn find_gen(&self, gen: u64) -> Option<EntryInfo> {
        if gen == 0 {
            return None;
        }
        (0..self.entries().len()).find_map(|i| {
            let e = &self.entries()[i];
            if e.state.load(Ordering::Relaxed) != STATE_LIVE || e.gen.load(Ordering::Relaxed) != gen {
                return None;
            }
            self.entry_info(i).filter(|info| info.gen == gen)
        })
    }

    /// Sets who besides the owner may look up filter `info`.
    pub fn set_readers(&self, lk: &Locked, info: &EntryInfo, readers: u64) -> Result<(), RegionError> {
        let e = self.unchanged(info)?;
        self.rewrite(lk, e, |e| e.readers.store(readers, Ordering::Relaxed));
        if info.durable {
            self.mark_changed(info.index, CHANGED_META);
        }
        Ok(())
    }

    /// Fixes live filter `info`'s key type (its first insert, when it was
    /// pending).
    pub fn set_key(&self, lk: &Locked, info: &EntryInfo, key: KeyType) -> Result<(), RegionError> {
        let e = self.unchanged(info)?;
        self.rewrite(lk, e, |e| e.key.store(pack_key(key), Ordering::Relaxed));
        if info.durable {
            self.mark_changed(info.index, CHANGED_META);
        }
        Ok(())
    }

    /// Entry `info.index` if it is still as `info` describes it (the lock holder
    /// changes only entries it has just looked at).
    pub(super) fn unchanged(&self, info: &EntryInfo) -> Result<&Entry, RegionError> {
        let e = &self.entries()[info.index];
        if e.seq.load(Ordering::Relaxed) != info.seq {
            return Err(RegionError::NotFound);
        }
        Ok(e)
    }

    /// Makes sure a retired record is free, reclaiming if need be; `Busy` while
    /// running statements still pin every retired copy (the caller may retry after
    /// releasing the lock).
    pub(super) fn retired_room(&self, lk: &Locked) -> Result<(), RegionError> {
        if self.header().retired_count.load(Ordering::Relaxed) < self.lay.entries || self.reclaim(lk) > 0 {
            Ok(())
        } else {
            Err(RegionError::Busy)
        }
    }

    pub(super) fn retire(&self, lk: &Locked, start: u64, blocks: u64, tag: u64, entry: Option<usize>) {
        // The unlink (a seqlock write) came first; see the `epoch` module.
        let epoch = epoch::advance(&self.header().epoch);
        let h = self.header();
        let n = h.retired_count.load(Ordering::Relaxed) as usize;
        // `retired_room` made room before the change began.
        let r = &self.retired()[n];
        r.start_block.store(start, Ordering::Relaxed);
        r.blocks.store(blocks, Ordering::Relaxed);
        r.tag.store(tag, Ordering::Relaxed);
        r.epoch.store(epoch, Ordering::Relaxed);
        r.entry.store(entry.map_or(0, |i| i as u64 + 1), Ordering::Relaxed);
        h.retired_count.store(n as u64 + 1, Ordering::Relaxed);
        self.reclaim(lk);
    }

    /// Frees retired allocations no process can still be reading. Returns how
    /// many were freed.
    pub fn reclaim(&self, lk: &Locked) -> usize {
        let h = self.header();
        let n = h.retired_count.load(Ordering::Relaxed) as usize;
        if n == 0 {
            return 0;
        }
        let oldest_pin = epoch::oldest_pin(self.slot_words());
        let recs = self.retired();
        let (mut kept, mut freed) = (0usize, 0usize);
        for i in 0..n {
            let r = &recs[i];
            let fields = [&r.start_block, &r.blocks, &r.tag, &r.epoch, &r.entry].map(|f| f.load(Ordering::Relaxed));
            let [start, blocks, tag, epoch, entry] = fields;
            if oldest_pin >= epoch {
                if blocks > 0 {
                    // The filter's other tables first: the head holds their list.
                    self.free_tables_of(start, tag);
                    self.allocator().free(start, blocks, tag);
                }
                if entry != 0 {
                    let e = &self.entries()[entry as usize - 1];
                    self.rewrite(lk, e, |e| {
                        e.tag.store(0, Ordering::Relaxed);
                        e.grown.store(0, Ordering::Relaxed);
                        e.state.store(STATE_FREE, Ordering::Relaxed);
                    });
                }
                freed += 1;
            } else {
                let k = &recs[kept];
                for (dst, v) in [&k.start_block, &k.blocks, &k.tag, &k.epoch, &k.entry].into_iter().zip(fields) {
                    dst.store(v, Ordering::Relaxed);
                }
                kept += 1;
            }
        }
        h.retired_count.store(kept as u64, Ordering::Relaxed);
        freed
    }
}

fn store_growth(e: &Entry, growth: Option<Growth>) {
    let (x, f) = growth.map_or((0, 0), |g| (g.expansion as u64, g.fpp.to_bits()));
    e.expansion.store(x, Ordering::Relaxed);
    e.growth_fpp.store(f, Ordering::Relaxed);
}
