//! The shared region: its layout (header, name registry, per-backend epoch slots,
//! list of retired allocations, the block allocator's tree, the filter blocks), the
//! registry of named filters keyed by (database, name), and safe reclamation of
//! dropped or replaced filters. Offsets only, never pointers: each process attaches
//! at its own address. No pgrx here; the glue supplies the lock and the identities.
//!
//! # Who may do what
//!
//! Lookups, inserts and deletes never lock: they find an entry by a consistent
//! (seqlock) read, pin their epoch slot, check that the entry has not changed since
//! (its sequence number), and work on the filter's bucket words lock-free. (The
//! one wait: writers of a filter hold off while a snapshot that could not get a
//! verified copy takes one with writers paused; see [`Region::snapshot`].) Create,
//! drop, publish and grant change the registry while holding one lock that the
//! caller provides ([`Locked`]); they copy or zero only the new filter's memory,
//! which nobody else can see yet, so the lock is held for a copy at most, and it
//! never delays an operation on a filter.
//!
//! # When space is reused: epochs
//!
//! A backend that resolved a filter may still be reading its words after another
//! backend dropped or replaced it, so the old blocks (and a dropped entry) cannot be
//! reused at once. The region keeps a global epoch. An operation pins: it stores
//! the current epoch in its own slot, then (after a full fence) re-reads the entry's
//! sequence number and proceeds only if unchanged; it clears the slot when done.
//! A drop or replace first unlinks (bumps the entry's sequence number), then
//! advances the epoch to `r` and records the old blocks as retired at `r`. The
//! blocks are freed once every slot is empty or holds an epoch `>= r`:
//! - a slot holding `e >= r` was pinned after the epoch reached `r`, hence after the
//!   unlink, so its sequence check fails and it never touches the old blocks;
//! - a slot that is empty when scanned belongs to an operation that either ended,
//!   or has not yet pinned: pin writes its slot and then reads the entry (a
//!   `SeqCst` swap, then a `SeqCst` load), the reclaimer wrote the entry and then
//!   reads the slot (with a `SeqCst` fence in between), so if the reclaimer saw no
//!   pin the operation sees the unlink.
//!
//! Pins are held across one filter operation: for a non-durable filter, pure
//! computation (no PostgreSQL call, nothing that can be cancelled); for a
//! durable one also the writing of its WAL record (`XLogInsert`, which may wait
//! for WAL buffer space), and for a checkpoint image the logging of the whole
//! filter. So a reclaimer usually waits microseconds and at most as long as
//! one image takes to log; it never blocks, it retries. A backend that is
//! killed while pinned takes the server through crash recovery, which rebuilds
//! the region.
//!
//! # Fail-safety of the allocator
//!
//! Before claiming blocks, the lock holder records the allocation's tag in the
//! header (`pending_tag`), and clears it once the entry that records the tag is
//! linked. If it stopped in between (an error unwound it), the next lock holder
//! finds the tag pending and runs the allocator's recovery: every allocated run
//! whose tag no entry or retired record holds is freed.

use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::allocator::BlockAllocator;
use super::durable::{state_bytes, Pool, Units, UNIT_WORDS};
use crate::filter::layout::{WordsHeader, WORDS_HEADER_BYTES};
use crate::filter::sizing;
use super::epoch;
use crate::filter::sync::{fence, spin, AtomicU32, AtomicU64, Ordering};
use crate::filter::{OpStats, Params, Table};

/// The unit of allocation inside the region.
pub const BLOCK_BYTES: u64 = 4096;
/// Longest name in bytes (PostgreSQL's identifier limit).
pub const MAX_NAME_BYTES: usize = 63;
const NAME_WORDS: usize = 8;
/// Statistics are striped over this many cache lines per filter, chosen by
/// backend, so that backends counting lookups on one filter do not share a line.
pub const STAT_STRIPES: usize = 8;
const REGION_MAGIC: u64 = 0x6375_636b_6f6f_5247; // "cuckooRG"
const REGION_VERSION: u64 = 3;
/// Smallest region the layout accepts.
pub const MIN_REGION_BYTES: u64 = 1 << 20;

const STATE_FREE: u64 = 0;
const STATE_LIVE: u64 = 1;
/// Dropped: invisible to lookups, reused once its blocks are reclaimed.
const STATE_RETIRED: u64 = 2;

/// Reader grant of an entry: nobody besides the owner, everyone, or a role.
pub const READERS_NONE: u64 = 0;
pub const READERS_PUBLIC: u64 = u64::MAX;

#[repr(C)]
struct RegionHeader {
    magic: AtomicU64,
    version: AtomicU64,
    size: AtomicU64,
    slots: AtomicU64,
    next_tag: AtomicU64,
    pending_tag: AtomicU64,
    retired_count: AtomicU64,
    /// Whether durable filters may be changed: [`DURABLE_CLOSED`],
    /// [`DURABLE_OPEN`] or [`DURABLE_FROZEN`] (see `sql::durability`).
    durable_state: AtomicU64,
    /// Set when a durable filter is dropped or replaced: files of generations
    /// that no longer exist are waiting to be removed.
    files_to_remove: AtomicU64,
    /// Set when restoring the filters' files met an error that may have left
    /// a filter out: no file is removed then (until a restart restores all).
    restore_incomplete: AtomicU64,
    epoch: CachePadded<AtomicU64>,
}

/// Durable filters cannot be changed yet (nobody logs checkpoint images).
pub const DURABLE_CLOSED: u64 = 0;
/// Durable filters may be changed.
pub const DURABLE_OPEN: u64 = 1;
/// Durable filters were saved for shutdown and must not change again.
pub const DURABLE_FROZEN: u64 = 2;

/// Per-filter counters of one stripe.
#[repr(C)]
#[derive(Default)]
struct Stats {
    pub inserts: AtomicU64,
    pub lookups: AtomicU64,
    pub deletes: AtomicU64,
    pub failed_inserts: AtomicU64,
    pub lookup_retries: AtomicU64,
    pub kicks: AtomicU64,
}

/// One registry entry. Fields other than the statistics, the gate and `seq` are
/// written only by the lock holder, between the two increments of `seq`.
#[repr(C)]
struct Entry {
    /// Seqlock: odd while the lock holder rewrites the entry; every rewrite
    /// (create, publish, grant, drop, reuse) advances it, so a cached value that
    /// still matches means nothing changed.
    seq: AtomicU64,
    state: AtomicU64,
    db: AtomicU64,
    owner: AtomicU64,
    readers: AtomicU64,
    name: [AtomicU64; NAME_WORDS],
    start_block: AtomicU64,
    blocks: AtomicU64,
    tag: AtomicU64,
    capacity: AtomicU64,
    fpp_bits: AtomicU64,
    /// 1 for a durable (WAL-logged) filter.
    durable: AtomicU64,
    /// A durable filter's generation: the end of the WAL record that created or
    /// published its contents (0 for other filters).
    gen: AtomicU64,
    /// Why the filter must be published again before use (0: it need not).
    reload_reason: AtomicU64,
    /// The filter's parameters (kept here too, for placeholders without blocks):
    /// bucket count, seed, and fingerprint bits | slots << 8 | mapping << 16.
    params: [AtomicU64; 3],
    /// Snapshots and checkpoint cuts in progress that wait for (and hold off)
    /// this filter's writers.
    writers_paused: AtomicU64,
    checkpoint: DurableState,
    stats: [CachePadded<Stats>; STAT_STRIPES],
}

/// A durable filter's checkpoint bookkeeping (see `sql::durability`): written
/// outside the seqlock, by writers (`changed`) and by the process that cuts.
#[repr(C)]
#[derive(Default)]
struct DurableState {
    /// What changed since the last cut: [`CHANGED_WORDS`], [`CHANGED_META`],
    /// [`NEEDS_BASE`].
    changed: AtomicU64,
    /// Records of this generation that end at or before this WAL position are
    /// in its contents (its files cover them, or it was made from them).
    stamp: AtomicU64,
    /// What the last cut wrote: file bytes and WAL bytes.
    cut_file_bytes: AtomicU64,
    cut_wal_bytes: AtomicU64,
    /// Bytes of the filter's last base file and of the delta files since.
    base_bytes: AtomicU64,
    delta_bytes: AtomicU64,
    deltas: AtomicU64,
    /// Writers that waited for a cut because the copy pool was full.
    pool_waits: AtomicU64,
}

/// The filter's words changed since its last cut.
pub const CHANGED_WORDS: u64 = 1;
/// Its name, owner, grant or reload mark changed since its last cut.
pub const CHANGED_META: u64 = 2;
/// Its next cut must write a whole base (it has no files for this generation).
pub const NEEDS_BASE: u64 = 4;

/// A durable filter's checkpoint figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableStats {
    pub changed: u64,
    pub stamp: u64,
    pub cut_file_bytes: u64,
    pub cut_wal_bytes: u64,
    pub base_bytes: u64,
    pub delta_bytes: u64,
    pub deltas: u64,
    pub pool_waits: u64,
}

#[repr(C)]
struct EpochSlot {
    pinned: CachePadded<AtomicU64>,
}

/// A dropped or replaced allocation waiting for readers to move on.
#[repr(C)]
struct Retired {
    start_block: AtomicU64,
    blocks: AtomicU64,
    tag: AtomicU64,
    epoch: AtomicU64,
    /// 1 + the entry to free with the blocks (a drop), or 0 (a replace).
    entry: AtomicU64,
}

/// Byte offsets of the region's parts, computed from its size and slot count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub size: u64,
    pub entries: u64,
    pub slots: u64,
    pub blocks: u64,
    entries_at: u64,
    slots_at: u64,
    retired_at: u64,
    tree_at: u64,
    pool_used_at: u64,
    pool_at: u64,
    pub pool_slots: u64,
    data_at: u64,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl Layout {
    /// The layout of a region of `size` bytes serving `slots` backends (one epoch
    /// slot per process that may run SQL functions). Registry entries scale with
    /// the size: one per 64 kB, between 16 and 8192.
    pub fn new(size: u64, slots: u64) -> Result<Layout, String> {
        if size < MIN_REGION_BYTES {
            return Err(format!("region of {size} bytes is below the minimum of {MIN_REGION_BYTES}"));
        }
        let entries = (size >> 16).clamp(16, 8192);
        let entries_at = align_up(std::mem::size_of::<RegionHeader>() as u64, 128);
        let slots_at = align_up(entries_at + entries * std::mem::size_of::<Entry>() as u64, 128);
        let retired_at = align_up(slots_at + slots * std::mem::size_of::<EpochSlot>() as u64, 128);
        let tree_at = align_up(retired_at + entries * std::mem::size_of::<Retired>() as u64, 128);
        // The copy pool of checkpoint cuts (`region::durable`): 1/64 of the region,
        // at least 32 units.
        let pool_slots = (size / 64 / (8 * UNIT_WORDS)).max(32);
        let pool_bytes = 8 * (Pool::bitmap_words(pool_slots) + pool_slots * UNIT_WORDS);
        // Each block costs its bytes plus at most 16 bytes of tree (two words per
        // leaf, rounded up to a power of two).
        let room = size.checked_sub(tree_at + pool_bytes + 256 + BLOCK_BYTES).ok_or("region too small for its metadata")?;
        let mut blocks = (room / (BLOCK_BYTES + 8)).min(super::allocator::MAX_BLOCKS);
        loop {
            let pool_used_at = align_up(tree_at + 8 * BlockAllocator::words_needed(blocks) as u64, 128);
            let pool_at = align_up(pool_used_at + 8 * Pool::bitmap_words(pool_slots), 128);
            let data_at = align_up(pool_at + 8 * pool_slots * UNIT_WORDS, BLOCK_BYTES);
            if data_at + blocks * BLOCK_BYTES <= size {
                if blocks == 0 {
                    return Err("region too small for any filter".into());
                }
                return Ok(Layout { size, entries, slots, blocks, entries_at, slots_at, retired_at, tree_at, pool_used_at, pool_at, pool_slots, data_at });
            }
            blocks -= 1;
        }
    }

    /// Bytes the region offers to filters.
    pub fn data_bytes(&self) -> u64 {
        self.blocks * BLOCK_BYTES
    }
}

/// Why a registry change was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum RegionError {
    NotFound,
    Exists,
    /// `pending`: bytes of dropped or replaced filters that running statements
    /// may still be reading; they become free once those finish.
    NoSpace { requested: u64, free: u64, largest: u64, pending: u64 },
    NoEntries { max: u64 },
    BadName(String),
    BadParams(String),
    /// Readers kept old copies pinned for longer than a change may wait.
    Busy,
    /// Durable filters cannot be changed now (nobody is logging their
    /// checkpoint images).
    Closed,
}

impl std::fmt::Display for RegionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegionError::NotFound => write!(f, "no such filter"),
            RegionError::Exists => write!(f, "filter already exists"),
            RegionError::NoSpace { requested, free, largest, pending } => {
                write!(f, "requested {requested} bytes, {free} bytes free (largest contiguous run {largest} bytes)")?;
                if *pending > 0 {
                    write!(f, ", {pending} bytes still being released")?;
                }
                Ok(())
            }
            RegionError::NoEntries { max } => write!(f, "all {max} filter entries are in use"),
            RegionError::BadName(why) => write!(f, "{why}"),
            RegionError::BadParams(why) => write!(f, "bad filter parameters: {why}"),
            RegionError::Busy => write!(f, "old copies of filters are still being read; try again"),
            RegionError::Closed => write!(f, "durable filters cannot be changed while the cuckoo durability worker is not running"),
        }
    }
}

/// Proof that the caller holds the registry lock (an exclusive lock shared by all
/// processes attached to the region).
pub struct Locked(());

impl Locked {
    /// # Safety
    /// The caller holds the region's registry lock until the value is dropped.
    pub unsafe fn assume() -> Locked {
        Locked(())
    }
}

/// A consistent copy of one entry.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryInfo {
    pub index: usize,
    pub seq: u64,
    pub db: u32,
    pub owner: u32,
    pub readers: u64,
    pub name: String,
    pub start_block: u64,
    pub blocks: u64,
    pub tag: u64,
    pub capacity: u64,
    pub fpp: f64,
    pub durable: bool,
    pub gen: u64,
    pub reload_reason: u64,
    pub params: Option<Params>,
}

impl EntryInfo {
    /// Whether the filter has contents that may be used.
    pub fn usable(&self) -> bool {
        self.reload_reason == 0 && self.blocks > 0
    }
}

/// Totals of a filter's counters over all stripes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatTotals {
    pub inserts: u64,
    pub lookups: u64,
    pub deletes: u64,
    pub failed_inserts: u64,
    pub lookup_retries: u64,
    pub kicks: u64,
}

/// Writes a new filter's bucket words (one per bucket) while the registry lock is
/// held: from a published value.
pub type Contents<'c> = &'c dyn Fn(&mut [u64]);

/// What a new filter is.
pub struct NewFilter<'n> {
    pub db: u32,
    pub owner: u32,
    pub name: &'n str,
    pub capacity: u64,
    pub fpp: f64,
    pub durable: bool,
}

fn pack_params(p: &Params) -> [u64; 3] {
    [p.bucket_count, p.seed, p.fingerprint_bits as u64 | (p.slots_per_bucket as u64) << 8 | (p.mapping as u64) << 16]
}

fn unpack_params(w: [u64; 3]) -> Option<Params> {
    let mapping = crate::filter::layout::Mapping::from_code((w[2] >> 16) as u8)?;
    Some(Params { bucket_count: w[0], seed: w[1], fingerprint_bits: w[2] as u8, slots_per_bucket: (w[2] >> 8) as u8, mapping })
}

/// Called by create and replace after the new filter's words are written and
/// before it is linked, with the words and their item count: returns the
/// filter's generation (a durable filter's creation or contents are logged
/// there, so that nobody can use the filter before its record exists).
pub type Stamp<'s> = &'s mut dyn FnMut(&[u64], u64) -> u64;

/// A process's attachment to the region.
#[derive(Clone, Copy)]
pub struct Region {
    base: NonNull<u8>,
    lay: Layout,
}

// SAFETY: everything other processes or threads may change concurrently is read
// and written through atomics; the rest is written only before publication (under
// the registry lock, ordered by the entry's seqlock).
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

/// Clears the epoch slot when the operation ends, however it ends.
pub struct Pin<'r> {
    slot: &'r AtomicU64,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        epoch::unpin(self.slot);
    }
}

/// Lifts a writer pause ([`Region::pause_writers`]) when dropped.
pub struct PausedWriters<'r>(&'r AtomicU64);

impl Drop for PausedWriters<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A snapshot could not wait out the filter's writers (see [`Region::snapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotBusy;

fn encode_name(name: &str) -> Result<[u64; NAME_WORDS], RegionError> {
    let b = name.as_bytes();
    if b.is_empty() {
        return Err(RegionError::BadName("filter name must not be empty".into()));
    }
    if b.len() > MAX_NAME_BYTES {
        return Err(RegionError::BadName(format!(
            "filter name is {} bytes long, the limit is {MAX_NAME_BYTES}",
            b.len()
        )));
    }
    if b.contains(&0) {
        return Err(RegionError::BadName("filter name must not contain NUL bytes".into()));
    }
    let mut padded = [0u8; NAME_WORDS * 8];
    padded[..b.len()].copy_from_slice(b);
    let mut words = [0u64; NAME_WORDS];
    for (w, chunk) in words.iter_mut().zip(padded.chunks_exact(8)) {
        *w = u64::from_le_bytes(chunk.try_into().unwrap());
    }
    Ok(words)
}

fn decode_name(words: &[u64; NAME_WORDS]) -> String {
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Region {
    /// Lays out and initialises a region in `size` bytes at `base`.
    ///
    /// # Safety
    /// `base` points to `size` writable bytes, aligned to 8, that nobody else uses
    /// until this returns, and that stay mapped for as long as any `Region` for them
    /// is used.
    pub unsafe fn init(base: *mut u8, size: u64, slots: u64) -> Result<Region, String> {
        let lay = Layout::new(size, slots)?;
        // SAFETY: the caller guarantees exclusive access to `size` bytes; only the
        // metadata (below `data_at`) is zeroed, filter blocks are initialised when
        // allocated.
        unsafe { std::ptr::write_bytes(base, 0, lay.data_at as usize) };
        let r = Region { base: NonNull::new(base).ok_or("null region")?, lay };
        BlockAllocator::init(r.tree_words(), lay.blocks);
        let h = r.header();
        h.version.store(REGION_VERSION, Ordering::Relaxed);
        h.size.store(size, Ordering::Relaxed);
        h.slots.store(slots, Ordering::Relaxed);
        h.next_tag.store(1, Ordering::Relaxed);
        h.epoch.store(1, Ordering::Relaxed);
        h.magic.store(REGION_MAGIC, Ordering::Release);
        Ok(r)
    }

    /// Attaches to a region that [`Region::init`] laid out.
    ///
    /// # Safety
    /// As for `init`, except that the region is already initialised and shared.
    pub unsafe fn attach(base: *mut u8, size: u64, slots: u64) -> Result<Region, String> {
        let lay = Layout::new(size, slots)?;
        let r = Region { base: NonNull::new(base).ok_or("null region")?, lay };
        let h = r.header();
        if h.magic.load(Ordering::Acquire) != REGION_MAGIC
            || h.version.load(Ordering::Relaxed) != REGION_VERSION
            || h.size.load(Ordering::Relaxed) != size
            || h.slots.load(Ordering::Relaxed) != slots
        {
            return Err("shared region has another layout".into());
        }
        Ok(r)
    }

    pub fn layout(&self) -> &Layout {
        &self.lay
    }

    /// # Safety (internal)
    /// `at + size_of::<T>() * count` lies within the region and `at` is aligned for
    /// `T`; `T` is made of atomics only (or written before publication).
    fn at<T>(&self, at: u64, count: u64) -> &[T] {
        debug_assert!(at + std::mem::size_of::<T>() as u64 * count <= self.lay.size);
        debug_assert_eq!((self.base.as_ptr() as u64 + at) % std::mem::align_of::<T>() as u64, 0);
        // SAFETY: the layout places each part inside the region, aligned; all
        // shared mutation goes through atomics.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(at as usize) as *const T, count as usize) }
    }

    fn header(&self) -> &RegionHeader {
        &self.at::<RegionHeader>(0, 1)[0]
    }

    fn entries(&self) -> &[Entry] {
        self.at(self.lay.entries_at, self.lay.entries)
    }

    fn retired(&self) -> &[Retired] {
        self.at(self.lay.retired_at, self.lay.entries)
    }

    fn tree_words(&self) -> &[AtomicU64] {
        self.at(self.lay.tree_at, BlockAllocator::words_needed(self.lay.blocks) as u64)
    }

    fn allocator(&self) -> BlockAllocator<'_> {
        BlockAllocator::attach(self.tree_words(), self.lay.blocks)
    }

    /// Free bytes in the block area (exact when nothing is being allocated).
    pub fn free_bytes(&self) -> u64 {
        self.allocator().free_blocks() * BLOCK_BYTES
    }

    /// Marks the calling process (epoch slot `slot`) as reading filters until the
    /// returned guard is dropped. `None` if `slot` is out of range.
    pub fn pin(&self, slot: usize) -> Option<Pin<'_>> {
        let s = &*self.slots().get(slot)?.pinned;
        epoch::pin(&self.header().epoch, s, false);
        Some(Pin { slot: s })
    }

    /// As [`Self::pin`], for a process that may change bucket words: pauses
    /// (snapshots, checkpoint cuts) wait for writers only.
    pub fn pin_writer(&self, slot: usize) -> Option<Pin<'_>> {
        let s = &*self.slots().get(slot)?.pinned;
        epoch::pin(&self.header().epoch, s, true);
        Some(Pin { slot: s })
    }

    fn slots(&self) -> &[EpochSlot] {
        self.at(self.lay.slots_at, self.lay.slots)
    }

    fn slot_words(&self) -> impl Iterator<Item = &AtomicU64> {
        self.slots().iter().map(|s| &*s.pinned)
    }

    /// Holds entry `index`'s writers off until the guard is dropped (writers
    /// that see the pause unpin and wait): the caller then waits for the
    /// writers already pinned to drain ([`epoch::writers_drained`]).
    pub fn pause_writers(&self, index: usize) -> PausedWriters<'_> {
        let e = &self.entries()[index];
        e.writers_paused.fetch_add(1, Ordering::SeqCst);
        PausedWriters(&e.writers_paused)
    }

    /// Waits until every process pinned as a writer before this call has
    /// unpinned: after each check that finds one still pinned, asks
    /// `keep_waiting` (with the number of such checks so far, from 0) and
    /// spins. Returns false if it said to give up.
    pub fn drain_writers(&self, mut keep_waiting: impl FnMut(u64) -> bool) -> bool {
        let target = epoch::advance(&self.header().epoch);
        let backoff = crossbeam_utils::Backoff::new();
        let mut waits = 0u64;
        while !epoch::writers_drained(self.slot_words(), target) {
            if !keep_waiting(waits) {
                return false;
            }
            waits += 1;
            spin(&backoff);
        }
        true
    }

    /// Whether a snapshot holds entry `index`'s writers off. A writer checks this
    /// while pinned, after `still_current`; if true it must unpin and wait until
    /// it turns false.
    #[inline]
    pub fn writers_paused(&self, index: usize) -> bool {
        self.entries()[index].writers_paused.load(Ordering::SeqCst) != 0
    }

    /// Copies filter `info`'s bucket words into `out` so that the copy is the whole
    /// filter at one moment, and returns its item count (the occupied slots of the
    /// copy). Call pinned (slot `slot`) after `still_current`.
    ///
    /// Inserts and deletes change one word at a time, but together they can shift
    /// a fingerprint from a word not yet copied to one already copied (an insert of
    /// a second copy before a delete of the first; a move). So a copy counts only
    /// if a second pass finds every word unchanged; after a few failed attempts,
    /// the snapshot pauses the filter's writers: it raises the pause, waits until
    /// every process that might not have seen it has unpinned (the epoch protocol),
    /// copies, and lifts the pause. Writers that see the pause wait unpinned, so
    /// lookups, other filters and other snapshots are never held up, and writers of
    /// this filter only for one copy. `SnapshotBusy` if processes stayed pinned
    /// for `patience` waits.
    pub fn snapshot(&self, info: &EntryInfo, slot: usize, out: &mut [u64], patience: u64) -> Result<u64, SnapshotBusy> {
        let t = self.table(info);
        for _ in 0..3 {
            t.copy_words(out);
            if t.words_equal(out) {
                return Ok(t.occupied_in(out));
            }
        }
        self.image(info, slot, out, patience, |_, items| items)
    }

    /// Copies filter `info`'s bucket words into `out` with its writers paused (as
    /// [`Self::snapshot`] does after failed attempts) and runs `then` on the copy
    /// and its item count *before* lifting the pause: a durable filter's
    /// checkpoint image is logged there, so that every change logged before the
    /// image is in it and every change after it is logged after it. Call pinned
    /// (slot `slot`) after `still_current`.
    pub fn image<R>(&self, info: &EntryInfo, _slot: usize, out: &mut [u64], patience: u64, then: impl FnOnce(&[u64], u64) -> R) -> Result<R, SnapshotBusy> {
        let t = self.table(info);
        #[cfg(all(test, not(loom)))]
        tests::PAUSED_SNAPSHOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _paused = self.pause_writers(info.index);
        if !self.drain_writers(|waits| waits < patience) {
            return Err(SnapshotBusy);
        }
        t.copy_words(out);
        let items = t.occupied_in(out);
        Ok(then(out, items))
    }

    /// Whether entry `index` is still at sequence number `seq` (call while pinned:
    /// then a match means the filter it described cannot be reclaimed before the
    /// pin ends).
    #[inline]
    pub fn still_current(&self, index: usize, seq: u64) -> bool {
        self.entries()[index].seq.load(Ordering::SeqCst) == seq
    }

    /// A consistent copy of entry `index` if it is live.
    pub fn entry_info(&self, index: usize) -> Option<EntryInfo> {
        let e = self.entries().get(index)?;
        let backoff = crossbeam_utils::Backoff::new();
        loop {
            let seq = e.seq.load(Ordering::Acquire);
            if seq & 1 == 1 {
                spin(&backoff);
                continue;
            }
            let state = e.state.load(Ordering::Relaxed);
            let mut name = [0u64; NAME_WORDS];
            for (n, w) in name.iter_mut().zip(&e.name) {
                *n = w.load(Ordering::Relaxed);
            }
            let info = EntryInfo {
                index,
                seq,
                db: e.db.load(Ordering::Relaxed) as u32,
                owner: e.owner.load(Ordering::Relaxed) as u32,
                readers: e.readers.load(Ordering::Relaxed),
                name: String::new(),
                start_block: e.start_block.load(Ordering::Relaxed),
                blocks: e.blocks.load(Ordering::Relaxed),
                tag: e.tag.load(Ordering::Relaxed),
                capacity: e.capacity.load(Ordering::Relaxed),
                fpp: f64::from_bits(e.fpp_bits.load(Ordering::Relaxed)),
                durable: e.durable.load(Ordering::Relaxed) != 0,
                gen: e.gen.load(Ordering::Relaxed),
                reload_reason: e.reload_reason.load(Ordering::Relaxed),
                params: unpack_params([&e.params[0], &e.params[1], &e.params[2]].map(|w| w.load(Ordering::Relaxed))),
            };
            fence(Ordering::Acquire);
            if e.seq.load(Ordering::Relaxed) != seq {
                spin(&backoff);
                continue;
            }
            if state != STATE_LIVE {
                return None;
            }
            return Some(EntryInfo { name: decode_name(&name), ..info });
        }
    }

    /// The live filter called `name` in database `db`.
    pub fn find(&self, db: u32, name: &str) -> Option<EntryInfo> {
        let key = encode_name(name).ok()?;
        (0..self.entries().len()).find_map(|i| {
            let e = &self.entries()[i];
            // Cheap unsynchronised prefilter; the seqlock read decides.
            if e.state.load(Ordering::Relaxed) != STATE_LIVE || e.name[0].load(Ordering::Relaxed) != key[0] {
                return None;
            }
            self.entry_info(i).filter(|info| info.db == db && info.name == name)
        })
    }

    /// Every live filter, of every database.
    pub fn list_all(&self) -> Vec<EntryInfo> {
        (0..self.entries().len()).filter_map(|i| self.entry_info(i)).collect()
    }

    /// Every live filter of database `db`.
    pub fn list(&self, db: u32) -> Vec<EntryInfo> {
        (0..self.entries().len()).filter_map(|i| self.entry_info(i)).filter(|info| info.db == db).collect()
    }

    /// The filter an entry describes. Call while pinned, after `still_current`
    /// confirmed `info.seq`; the table must not be used after the pin ends without
    /// another such check.
    pub fn table(&self, info: &EntryInfo) -> Table<'_> {
        let at = self.lay.data_at + info.start_block * BLOCK_BYTES;
        let header = &self.at::<WordsHeader>(at, 1)[0];
        let buckets = self.at::<AtomicU64>(at + WORDS_HEADER_BYTES as u64, header.bucket_count);
        Table::with_header(header, buckets)
    }

    /// Entry `index`'s statistics stripe for process slot `slot`.
    #[inline]
    fn stripe(&self, index: usize, slot: usize) -> &Stats {
        &self.entries()[index].stats[slot % STAT_STRIPES]
    }

    /// Adds `n` lookups (a batch) to the statistics.
    #[inline]
    pub fn count_lookups(&self, index: usize, slot: usize, n: u64) {
        self.stripe(index, slot).lookups.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds a lookup (with its retries) to the statistics.
    #[inline]
    pub fn count_lookup(&self, index: usize, slot: usize, op: &OpStats) {
        let s = self.stripe(index, slot);
        s.lookups.fetch_add(1, Ordering::Relaxed);
        if op.retries != 0 {
            s.lookup_retries.fetch_add(op.retries, Ordering::Relaxed);
        }
    }

    /// Adds an insert (stored or refused, with the fingerprints it moved).
    #[inline]
    pub fn count_insert(&self, index: usize, slot: usize, stored: bool, op: &OpStats) {
        let s = self.stripe(index, slot);
        if stored {
            s.inserts.fetch_add(1, Ordering::Relaxed);
        } else {
            s.failed_inserts.fetch_add(1, Ordering::Relaxed);
        }
        if op.kicks != 0 {
            s.kicks.fetch_add(op.kicks, Ordering::Relaxed);
        }
    }

    /// Adds a delete that removed a copy.
    #[inline]
    pub fn count_delete(&self, index: usize, slot: usize) {
        self.stripe(index, slot).deletes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stat_totals(&self, index: usize) -> StatTotals {
        let mut t = StatTotals::default();
        for s in &self.entries()[index].stats {
            t.inserts += s.inserts.load(Ordering::Relaxed);
            t.lookups += s.lookups.load(Ordering::Relaxed);
            t.deletes += s.deletes.load(Ordering::Relaxed);
            t.failed_inserts += s.failed_inserts.load(Ordering::Relaxed);
            t.lookup_retries += s.lookup_retries.load(Ordering::Relaxed);
            t.kicks += s.kicks.load(Ordering::Relaxed);
        }
        t
    }

    /// Bytes a filter with these parameters takes in the region.
    pub fn bytes_for(params: &Params, durable: bool) -> u64 {
        Self::filter_bytes(params, durable).div_ceil(BLOCK_BYTES) * BLOCK_BYTES
    }

    /// A filter's bytes in its blocks: the words header, the bucket words, and
    /// for a durable filter one state word per unit (`region::durable`).
    fn filter_bytes(params: &Params, durable: bool) -> u64 {
        WORDS_HEADER_BYTES as u64 + 8 * params.bucket_count + if durable { state_bytes(params.bucket_count) } else { 0 }
    }

    /// The copy pool of checkpoint cuts.
    pub fn pool(&self) -> Pool<'_> {
        let used = self.at::<AtomicU64>(self.lay.pool_used_at, Pool::bitmap_words(self.lay.pool_slots));
        let data = self.at::<AtomicU64>(self.lay.pool_at, self.lay.pool_slots * UNIT_WORDS);
        Pool::new(used, data, self.lay.pool_slots)
    }

    /// A durable filter's units (`region::durable`): None for other filters and
    /// placeholders. Use as for [`Self::table`].
    pub fn units(&self, info: &EntryInfo) -> Option<Units<'_>> {
        if !info.durable || info.blocks == 0 {
            return None;
        }
        let params = info.params?;
        let at = self.lay.data_at + info.start_block * BLOCK_BYTES;
        let words = self.at::<AtomicU64>(at + WORDS_HEADER_BYTES as u64, params.bucket_count);
        let states = self.at::<AtomicU32>(at + WORDS_HEADER_BYTES as u64 + 8 * params.bucket_count, super::durable::unit_count(params.bucket_count));
        Some(Units::new(states, words, self.pool(), &self.entries()[info.index].checkpoint.pool_waits))
    }

    fn durable_state_of(&self, index: usize) -> &DurableState {
        &self.entries()[index].checkpoint
    }

    /// Records what changed in durable filter `index` since its last cut.
    #[inline]
    pub fn mark_changed(&self, index: usize, bits: u64) {
        let c = &self.durable_state_of(index).changed;
        if c.load(Ordering::Relaxed) & bits != bits {
            c.fetch_or(bits, Ordering::SeqCst);
        }
    }

    /// What changed in durable filter `index` since its last cut.
    pub fn changed(&self, index: usize) -> u64 {
        self.durable_state_of(index).changed.load(Ordering::SeqCst)
    }

    /// Clears and returns what changed (a cut, with the filter's writers paused
    /// and drained, records it).
    pub fn take_changed(&self, index: usize) -> u64 {
        self.durable_state_of(index).changed.swap(0, Ordering::SeqCst)
    }

    pub fn durable_stats(&self, index: usize) -> DurableStats {
        let d = self.durable_state_of(index);
        DurableStats {
            changed: d.changed.load(Ordering::Relaxed),
            stamp: d.stamp.load(Ordering::Relaxed),
            cut_file_bytes: d.cut_file_bytes.load(Ordering::Relaxed),
            cut_wal_bytes: d.cut_wal_bytes.load(Ordering::Relaxed),
            base_bytes: d.base_bytes.load(Ordering::Relaxed),
            delta_bytes: d.delta_bytes.load(Ordering::Relaxed),
            deltas: d.deltas.load(Ordering::Relaxed),
            pool_waits: d.pool_waits.load(Ordering::Relaxed),
        }
    }

    /// Records a cut of filter `index` (only by the process that cuts): the
    /// WAL position its files now cover, and what it wrote (`base`: a whole
    /// base file, else a delta).
    pub fn record_cut(&self, index: usize, stamp: u64, base: bool, file_bytes: u64, wal_bytes: u64) {
        let d = self.durable_state_of(index);
        d.stamp.store(stamp, Ordering::Release);
        d.cut_file_bytes.store(file_bytes, Ordering::Relaxed);
        d.cut_wal_bytes.store(wal_bytes, Ordering::Relaxed);
        if base {
            d.base_bytes.store(file_bytes, Ordering::Relaxed);
            d.delta_bytes.store(0, Ordering::Relaxed);
            d.deltas.store(0, Ordering::Relaxed);
        } else {
            d.delta_bytes.fetch_add(file_bytes, Ordering::Relaxed);
            d.deltas.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sets the position filter `index`'s contents cover (restored from files:
    /// `base_bytes` and `delta_bytes`/`deltas` describe them).
    pub fn set_stamp(&self, index: usize, stamp: u64, base_bytes: u64, delta_bytes: u64, deltas: u64) {
        let d = self.durable_state_of(index);
        d.stamp.store(stamp, Ordering::Release);
        d.base_bytes.store(base_bytes, Ordering::Relaxed);
        d.delta_bytes.store(delta_bytes, Ordering::Relaxed);
        d.deltas.store(deltas, Ordering::Relaxed);
    }

    /// Whether files of dropped or replaced durable generations may be left, and
    /// clears the mark (the caller removes them).
    pub fn take_files_to_remove(&self) -> bool {
        self.header().files_to_remove.swap(0, Ordering::SeqCst) != 0
    }

    pub fn note_files_to_remove(&self) {
        self.header().files_to_remove.store(1, Ordering::SeqCst);
    }

    /// Records that restoring the filters' files was not complete (see
    /// [`Self::restore_incomplete`]).
    pub fn note_restore_incomplete(&self) {
        self.header().restore_incomplete.store(1, Ordering::SeqCst);
    }

    /// Whether restoring the files met an error that may have left a filter
    /// out of the registry: files of generations it does not have must stay.
    pub fn restore_incomplete(&self) -> bool {
        self.header().restore_incomplete.load(Ordering::SeqCst) != 0
    }

    /// Keeps live filter `info`'s name, owner and grant, as generation `gen`
    /// with parameters `params`, without contents (they were lost: it needs a
    /// reload for `reason`); its blocks are retired.
    #[allow(clippy::too_many_arguments)]
    pub fn clear_contents(&self, lk: &Locked, info: &EntryInfo, params: &Params, capacity: u64, fpp: f64, gen: u64, reason: u64) -> Result<EntryInfo, RegionError> {
        debug_assert!(reason != 0);
        let e = self.unchanged(info)?;
        self.retired_room(lk)?;
        self.rewrite(lk, e, |e| {
            e.start_block.store(0, Ordering::Relaxed);
            e.blocks.store(0, Ordering::Relaxed);
            e.tag.store(0, Ordering::Relaxed);
            e.capacity.store(capacity, Ordering::Relaxed);
            e.fpp_bits.store(fpp.to_bits(), Ordering::Relaxed);
            e.gen.store(gen, Ordering::Relaxed);
            e.durable.store(1, Ordering::Relaxed);
            e.reload_reason.store(reason, Ordering::Relaxed);
            for (w, v) in e.params.iter().zip(pack_params(params)) {
                w.store(v, Ordering::Relaxed);
            }
            reset_durable(&e.checkpoint, true, gen);
        });
        if info.durable {
            self.note_files_to_remove();
        }
        if info.blocks > 0 {
            self.retire(lk, info.start_block, info.blocks, info.tag, None);
        }
        Ok(self.entry_info(info.index).expect("still linked"))
    }

    /// Frees every slot of the copy pool. Only while no cut is in progress and
    /// no unit is marked (a writer that claimed a slot meanwhile then fails to
    /// mark its unit and gives the slot back).
    pub fn reset_pool(&self) {
        for w in self.at::<AtomicU64>(self.lay.pool_used_at, Pool::bitmap_words(self.lay.pool_slots)) {
            w.store(0, Ordering::SeqCst);
        }
    }

    // ----- changes: the caller holds the registry lock -----

    /// Rewrites entry `e` between the seqlock's two increments.
    fn rewrite(&self, _lk: &Locked, e: &Entry, f: impl FnOnce(&Entry)) {
        let seq = e.seq.load(Ordering::Relaxed);
        debug_assert_eq!(seq & 1, 0);
        e.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        f(e);
        e.seq.store(seq + 2, Ordering::Release);
    }

    /// Frees allocations left behind by a lock holder that stopped between
    /// claiming blocks and linking them (see the module documentation).
    fn recover_pending(&self, lk: &Locked) {
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
    fn claim(&self, lk: &Locked, bytes: u64) -> Result<(u64, u64, u64), RegionError> {
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
        let a = self.allocator();
        let count = h.retired_count.load(Ordering::Relaxed) as usize;
        let pending = self.retired()[..count].iter().map(|r| r.blocks.load(Ordering::Relaxed)).sum::<u64>();
        Err(RegionError::NoSpace {
            requested: n * BLOCK_BYTES,
            free: a.free_blocks() * BLOCK_BYTES,
            largest: a.largest_free_run() * BLOCK_BYTES,
            pending: pending * BLOCK_BYTES,
        })
    }

    fn linked(&self, _lk: &Locked) {
        self.header().pending_tag.store(0, Ordering::Relaxed);
    }

    /// Bytes at the start of an allocation, for the lock holder to fill before the
    /// allocation is linked.
    #[allow(clippy::mut_from_ref)]
    fn block_bytes(&self, _lk: &Locked, start: u64, len: u64) -> &mut [u8] {
        let at = self.lay.data_at + start * BLOCK_BYTES;
        assert!(at + len <= self.lay.size);
        // SAFETY: the caller just claimed these blocks and has not linked them, so
        // no other process can reach them; the range lies inside the region.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(at as usize), len as usize) }
    }

    fn free_entry(&self, lk: &Locked) -> Result<usize, RegionError> {
        let find = || self.entries().iter().position(|e| e.state.load(Ordering::Relaxed) == STATE_FREE);
        if let Some(i) = find() {
            return Ok(i);
        }
        self.reclaim(lk);
        find().ok_or(RegionError::NoEntries { max: self.lay.entries })
    }

    /// Creates filter `spec` with parameters `params` and nothing in it, or, with
    /// `contents`, the bucket words it writes (a published value's). Returns the
    /// entry.
    pub fn create(&self, lk: &Locked, spec: &NewFilter<'_>, params: &Params, contents: Option<Contents<'_>>, stamp: Stamp<'_>) -> Result<EntryInfo, RegionError> {
        let name = encode_name(spec.name)?;
        if self.find(spec.db, spec.name).is_some() {
            return Err(RegionError::Exists);
        }
        let index = self.free_entry(lk)?;
        let (start, blocks, tag) = self.fill(lk, params, spec.capacity, spec.durable, contents)?;
        let gen = self.stamp(lk, start, params, stamp);
        self.link_entry(lk, index, spec, params, name, (start, blocks, tag), gen, 0);
        self.linked(lk);
        Ok(self.entry_info(index).expect("just linked"))
    }

    /// Records a filter that exists but whose contents were lost (recovery could
    /// not restore them, or they did not fit): it keeps its name, owner and
    /// parameters, holds no blocks, and must be published again before use.
    pub fn create_placeholder(&self, lk: &Locked, spec: &NewFilter<'_>, params: &Params, gen: u64, reason: u64) -> Result<EntryInfo, RegionError> {
        debug_assert!(reason != 0);
        let name = encode_name(spec.name)?;
        if self.find(spec.db, spec.name).is_some() {
            return Err(RegionError::Exists);
        }
        let index = self.free_entry(lk)?;
        self.recover_pending(lk);
        self.link_entry(lk, index, spec, params, name, (0, 0, 0), gen, reason);
        Ok(self.entry_info(index).expect("just linked"))
    }

    /// Runs `stamp` over the words of the filled allocation at `start`.
    fn stamp(&self, lk: &Locked, start: u64, params: &Params, stamp: Stamp<'_>) -> u64 {
        let bytes = self.block_bytes(lk, start, WORDS_HEADER_BYTES as u64 + 8 * params.bucket_count);
        // SAFETY: as in `fill`: 8-aligned, `bucket_count` words after the header,
        // reachable by nobody else until linked.
        let words = unsafe { std::slice::from_raw_parts(bytes[WORDS_HEADER_BYTES..].as_ptr() as *const u64, params.bucket_count as usize) };
        let items = crate::filter::Geometry::new(params).occupied_total(words.iter().copied());
        stamp(words, items)
    }

    #[allow(clippy::too_many_arguments)]
    fn link_entry(&self, lk: &Locked, index: usize, spec: &NewFilter<'_>, params: &Params, name: [u64; NAME_WORDS], (start, blocks, tag): (u64, u64, u64), gen: u64, reason: u64) {
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
            e.capacity.store(spec.capacity, Ordering::Relaxed);
            e.fpp_bits.store(spec.fpp.to_bits(), Ordering::Relaxed);
            e.durable.store(spec.durable as u64, Ordering::Relaxed);
            e.gen.store(gen, Ordering::Relaxed);
            e.reload_reason.store(reason, Ordering::Relaxed);
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

    /// Claims and fills the blocks of a new filter: its words header, then its
    /// bucket words, empty or written by `contents`; the item count is counted
    /// from the words.
    fn fill(&self, lk: &Locked, params: &Params, capacity: u64, durable: bool, contents: Option<Contents<'_>>) -> Result<(u64, u64, u64), RegionError> {
        params.check().map_err(|e| RegionError::BadParams(e.to_string()))?;
        let len = Self::filter_bytes(params, durable);
        let (start, blocks, tag) = self.claim(lk, len)?;
        let bytes = self.block_bytes(lk, start, len);
        let (head, body) = bytes.split_at_mut(WORDS_HEADER_BYTES);
        let (body, states) = body.split_at_mut(8 * params.bucket_count as usize);
        // A durable filter's unit states start with nothing changed and nothing
        // marked (its first cut writes a base anyway).
        states.fill(0);
        // SAFETY: the blocks are page-aligned and the header is 40 bytes, so the
        // words are 8-aligned; `body` is exactly `bucket_count` words long.
        let words = unsafe { std::slice::from_raw_parts_mut(body.as_mut_ptr() as *mut u64, params.bucket_count as usize) };
        match contents {
            Some(write) => write(words),
            None => words.fill(0),
        }
        let items = crate::filter::Geometry::new(params).occupied_total(words.iter().copied());
        // SAFETY: `head` is 40 bytes at a page-aligned address, the size and
        // alignment of a WordsHeader; nobody else can reach these blocks yet.
        unsafe { (head.as_mut_ptr() as *mut WordsHeader).write(WordsHeader::new(params, capacity, items)) };
        Ok((start, blocks, tag))
    }

    /// Replaces live filter `info`'s contents with the bucket words `contents`
    /// writes: readers see the old filter or the new one.
    #[allow(clippy::too_many_arguments)]
    pub fn replace(&self, lk: &Locked, info: &EntryInfo, params: &Params, contents: Contents<'_>, capacity: u64, fpp: f64, durable: bool, stamp: Stamp<'_>) -> Result<EntryInfo, RegionError> {
        let e = self.unchanged(info)?;
        self.retired_room(lk)?;
        let (start, blocks, tag) = self.fill(lk, params, capacity, durable, Some(contents))?;
        let gen = self.stamp(lk, start, params, stamp);
        self.rewrite(lk, e, |e| {
            e.start_block.store(start, Ordering::Relaxed);
            e.blocks.store(blocks, Ordering::Relaxed);
            e.tag.store(tag, Ordering::Relaxed);
            e.capacity.store(capacity, Ordering::Relaxed);
            e.fpp_bits.store(fpp.to_bits(), Ordering::Relaxed);
            e.gen.store(gen, Ordering::Relaxed);
            e.durable.store(durable as u64, Ordering::Relaxed);
            e.reload_reason.store(0, Ordering::Relaxed);
            for (w, v) in e.params.iter().zip(pack_params(params)) {
                w.store(v, Ordering::Relaxed);
            }
            reset_durable(&e.checkpoint, durable, gen);
        });
        if info.durable {
            self.note_files_to_remove();
        }
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
        if info.durable {
            self.note_files_to_remove();
        }
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

    /// Whether durable filters may be changed now (see [`DURABLE_OPEN`]).
    #[inline]
    pub fn durable_state(&self) -> u64 {
        self.header().durable_state.load(Ordering::SeqCst)
    }

    /// Sets the durable state; closing or freezing then waits (up to `patience`
    /// spins) until no process that may have seen the old state is still inside
    /// a filter operation, so that no durable change is in flight afterwards.
    /// Call unpinned. False if processes stayed pinned.
    pub fn set_durable_state(&self, state: u64, patience: u64) -> bool {
        self.header().durable_state.store(state, Ordering::SeqCst);
        if state == DURABLE_OPEN {
            return true;
        }
        self.drain_writers(|waits| waits + 1 < patience)
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

    /// Entry `info.index` if it is still as `info` describes it (the lock holder
    /// changes only entries it has just looked at).
    fn unchanged(&self, info: &EntryInfo) -> Result<&Entry, RegionError> {
        let e = &self.entries()[info.index];
        if e.seq.load(Ordering::Relaxed) != info.seq {
            return Err(RegionError::NotFound);
        }
        Ok(e)
    }

    /// Makes sure a retired record is free, reclaiming if need be; `Busy` while
    /// running statements still pin every retired copy (the caller may retry after
    /// releasing the lock).
    fn retired_room(&self, lk: &Locked) -> Result<(), RegionError> {
        if (self.header().retired_count.load(Ordering::Relaxed) as u64) < self.lay.entries || self.reclaim(lk) > 0 {
            Ok(())
        } else {
            Err(RegionError::Busy)
        }
    }

    fn retire(&self, lk: &Locked, start: u64, blocks: u64, tag: u64, entry: Option<usize>) {
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
                    self.allocator().free(start, blocks, tag);
                }
                if entry != 0 {
                    let e = &self.entries()[entry as usize - 1];
                    self.rewrite(lk, e, |e| {
                        e.tag.store(0, Ordering::Relaxed);
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

    /// Quiescent self-check for tests: the allocator's counts, and that the
    /// allocations are exactly those of the entries and retired records.
    pub fn check(&self) -> Result<(), String> {
        self.allocator().check()?;
        let mut owned: Vec<(u64, u64, u64)> = Vec::new();
        // A dropped entry's blocks are accounted for by its retired record.
        for e in self.entries().iter().filter(|e| e.state.load(Ordering::Relaxed) == STATE_LIVE && e.blocks.load(Ordering::Relaxed) > 0) {
            owned.push((e.start_block.load(Ordering::Relaxed), e.blocks.load(Ordering::Relaxed), e.tag.load(Ordering::Relaxed)));
        }
        let n = self.header().retired_count.load(Ordering::Relaxed) as usize;
        for r in self.retired()[..n].iter().filter(|r| r.blocks.load(Ordering::Relaxed) > 0) {
            owned.push((r.start_block.load(Ordering::Relaxed), r.blocks.load(Ordering::Relaxed), r.tag.load(Ordering::Relaxed)));
        }
        owned.sort_unstable();
        let mut allocs = self.allocator().allocations();
        allocs.sort_unstable();
        if owned != allocs {
            return Err(format!("allocations {allocs:?} differ from the registry's {owned:?}"));
        }
        Ok(())
    }
}

/// A new generation's checkpoint bookkeeping: nothing on file yet.
fn reset_durable(d: &DurableState, durable: bool, gen: u64) {
    d.changed.store(if durable { NEEDS_BASE | CHANGED_META } else { 0 }, Ordering::SeqCst);
    d.stamp.store(gen, Ordering::Relaxed);
    for c in [&d.cut_file_bytes, &d.cut_wal_bytes, &d.base_bytes, &d.delta_bytes, &d.deltas, &d.pool_waits] {
        c.store(0, Ordering::Relaxed);
    }
}

/// The design false-positive rate recorded for a published value: its bound at
/// the capacity the value was sized for.
pub fn published_fpp(params: &Params, capacity: u64) -> f64 {
    sizing::expected_fpp(params, capacity)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::filter::hash::hash_i64;
    use crate::filter::layout::DEFAULT_SEED;
    use crate::filter::dense::{self, DenseHeader};
    use crate::filter::sizing::{size_for_capacity, DEFAULT_FPP};
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    /// Snapshots that had to pause writers (to show the test takes that path).
    pub(super) static PAUSED_SNAPSHOTS: AtomicU64 = AtomicU64::new(0);

    /// A region in private memory, aligned like the one the glue maps.
    struct Mem {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    }
    // SAFETY: the memory is only reached through `Region`, which uses atomics.
    unsafe impl Send for Mem {}
    // SAFETY: as for Send.
    unsafe impl Sync for Mem {}
    impl Drop for Mem {
        fn drop(&mut self) {
            // SAFETY: allocated in `region` with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) };
        }
    }

    fn region(size: u64) -> (Arc<Mem>, Region) {
        let layout = std::alloc::Layout::from_size_align(size as usize, 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null());
        // Garbage in the block area must not matter: fill it.
        // SAFETY: freshly allocated, `size` bytes.
        unsafe { std::ptr::write_bytes(ptr, 0xA5, size as usize) };
        // SAFETY: exclusive, aligned, outlives the Region via the Arc.
        let r = unsafe { Region::init(ptr, size, 8) }.unwrap();
        (Arc::new(Mem { ptr, layout }), r)
    }

    fn spec(db: u32, name: &str) -> NewFilter<'_> {
        NewFilter { db, owner: 10, name, capacity: 1000, fpp: DEFAULT_FPP, durable: false }
    }

    fn params(capacity: u64) -> Params {
        size_for_capacity(capacity, DEFAULT_FPP, u64::MAX).unwrap().params
    }

    /// `Contents` that copy a filter's words.
    fn words_of(f: &crate::filter::OwnedFilter) -> Vec<u64> {
        f.words().collect()
    }

    fn copy_from(words: &[u64]) -> impl Fn(&mut [u64]) + '_ {
        move |out: &mut [u64]| out.copy_from_slice(words)
    }

    fn lock() -> Locked {
        // SAFETY: each test is single-threaded in its changes, or serialises them
        // with a Mutex.
        unsafe { Locked::assume() }
    }

    #[test]
    fn create_find_drop_and_names_per_database() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        let a = r.create(&lk, &spec(1, "a"), &params(1000), None, &mut |_, _| 0).unwrap();
        assert_eq!(r.create(&lk, &spec(1, "a"), &params(1000), None, &mut |_, _| 0), Err(RegionError::Exists));
        // Same name in another database: a different filter.
        let b = r.create(&lk, &spec(2, "a"), &params(1000), None, &mut |_, _| 0).unwrap();
        assert_ne!(a.index, b.index);
        assert_eq!(r.find(1, "a").unwrap().index, a.index);
        assert_eq!(r.find(2, "a").unwrap().index, b.index);
        assert!(r.find(3, "a").is_none());
        assert_eq!(r.list(1).len(), 1);
        let t = r.table(&a);
        t.insert(hash_i64(DEFAULT_SEED, 7)).unwrap();
        assert!(r.table(&r.find(1, "a").unwrap()).contains(hash_i64(DEFAULT_SEED, 7)));
        assert!(!r.table(&b).contains(hash_i64(DEFAULT_SEED, 7)));
        r.drop_filter(&lk, &a).unwrap();
        assert!(r.find(1, "a").is_none());
        assert!(!r.still_current(a.index, a.seq));
        r.check().unwrap();
        // Bad names are refused before anything happens.
        assert!(matches!(r.create(&lk, &spec(1, ""), &params(10), None, &mut |_, _| 0), Err(RegionError::BadName(_))));
        let long = "x".repeat(64);
        assert!(matches!(r.create(&lk, &spec(1, &long), &params(10), None, &mut |_, _| 0), Err(RegionError::BadName(_))));
        let max = "y".repeat(63);
        r.create(&lk, &spec(1, &max), &params(10), None, &mut |_, _| 0).unwrap();
        assert_eq!(r.find(1, &max).unwrap().name, max);
        r.check().unwrap();
    }

    #[test]
    fn exhaustion_is_clean_and_drops_make_room() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        let p = params(200_000); // 1 MiB of buckets
        let mut made = Vec::new();
        for i in 0.. {
            match r.create(&lk, &spec(1, &format!("f{i}")), &p, None, &mut |_, _| 0) {
                Ok(info) => made.push(info),
                Err(RegionError::NoSpace { requested, free, .. }) => {
                    assert_eq!(requested, Region::bytes_for(&p, false));
                    assert!(free < requested);
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(made.len() >= 2);
        r.check().unwrap();
        // The filters that exist are untouched by the failed create.
        for info in &made {
            assert!(r.still_current(info.index, info.seq));
        }
        r.drop_filter(&lk, &made[0]).unwrap();
        r.create(&lk, &spec(1, "again"), &p, None, &mut |_, _| 0).unwrap();
        r.check().unwrap();
    }

    #[test]
    fn pinned_reader_delays_reuse() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        let a = r.create(&lk, &spec(1, "a"), &params(1000), None, &mut |_, _| 0).unwrap();
        let pin = r.pin(3).unwrap();
        assert!(r.still_current(a.index, a.seq));
        r.drop_filter(&lk, &a).unwrap();
        // The reader pinned before the drop: blocks and entry stay reserved.
        assert_eq!(r.reclaim(&lk), 0);
        r.check().unwrap();
        let held = r.allocator().allocations();
        assert_eq!(held.len(), 1);
        drop(pin);
        assert_eq!(r.reclaim(&lk), 1);
        assert!(r.allocator().allocations().is_empty());
        // A pin taken after a drop does not hold that drop's space back.
        let b = r.create(&lk, &spec(1, "b"), &params(1000), None, &mut |_, _| 0).unwrap();
        let early = r.pin(2).unwrap();
        r.drop_filter(&lk, &b).unwrap();
        let _late = r.pin(4).unwrap();
        assert_eq!(r.reclaim(&lk), 0);
        drop(early);
        assert_eq!(r.reclaim(&lk), 1);
        assert!(r.allocator().allocations().is_empty());
        r.check().unwrap();
    }

    #[test]
    fn replace_keeps_the_name_and_retires_the_old_copy() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        let p = params(1000);
        let a = r.create(&lk, &spec(1, "a"), &p, None, &mut |_, _| 0).unwrap();
        let src = crate::filter::OwnedFilter::new(p);
        src.table().insert(hash_i64(DEFAULT_SEED, 42)).unwrap();
        let words = words_of(&src);
        let pin = r.pin(0).unwrap();
        let b = r.replace(&lk, &a, &p, &copy_from(&words), 1000, 0.001, false, &mut |_, _| 0).unwrap();
        assert_eq!(a.index, b.index);
        assert!(!r.still_current(a.index, a.seq));
        assert!(r.table(&b).contains(hash_i64(DEFAULT_SEED, 42)));
        assert_eq!(r.table(&b).item_count(), 1);
        // The old copy is still readable by the pinned reader.
        assert!(!r.table(&a).contains(hash_i64(DEFAULT_SEED, 42)));
        assert_eq!(r.allocator().allocations().len(), 2);
        drop(pin);
        r.reclaim(&lk);
        assert_eq!(r.allocator().allocations().len(), 1);
        r.check().unwrap();
    }

    #[test]
    fn generations_placeholders_and_reload_marks() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        let p = params(1000);
        let durable = NewFilter { durable: true, ..spec(1, "d") };
        // The stamp runs after the words are written and before linking: the
        // generation it returns is the entry's, and it sees the words.
        let src = crate::filter::OwnedFilter::new(p);
        src.table().insert(hash_i64(DEFAULT_SEED, 7)).unwrap();
        let words = words_of(&src);
        let mut seen = None;
        let d = r
            .create(&lk, &durable, &p, Some(&copy_from(&words)), &mut |w, items| {
                seen = Some((w.to_vec(), items));
                assert!(r.find(1, "d").is_none(), "linked before its stamp");
                77
            })
            .unwrap();
        assert_eq!(seen, Some((words.clone(), 1)));
        assert_eq!((d.gen, d.durable, d.params, d.usable()), (77, true, Some(p), true));
        assert_eq!(r.find_gen(77).map(|i| i.index), Some(d.index));
        assert!(r.find_gen(0).is_none() && r.find_gen(78).is_none());
        // A reload mark keeps the contents but makes the filter unusable (and
        // changes its sequence number, so cached resolutions are redone).
        r.set_reload(&lk, &d, d.gen, 1).unwrap();
        let marked = r.find(1, "d").unwrap();
        assert!(!marked.usable() && marked.blocks > 0 && marked.seq != d.seq);
        // A replace gives a new generation and clears the mark.
        let e = r.replace(&lk, &marked, &p, &copy_from(&words), 1000, 0.002, true, &mut |_, _| 90).unwrap();
        assert_eq!((e.gen, e.reload_reason, e.usable()), (90, 0, true));
        assert!(r.find_gen(77).is_none());
        // A placeholder: a name, parameters, no blocks; it can be replaced
        // (publish) or dropped, and neither touches the allocator wrongly.
        let ph = r.create_placeholder(&lk, &NewFilter { durable: true, ..spec(1, "lost") }, &p, 55, 2).unwrap();
        assert_eq!((ph.blocks, ph.reload_reason, ph.params, ph.usable()), (0, 2, Some(p), false));
        assert_eq!(r.create_placeholder(&lk, &spec(1, "lost"), &p, 56, 2), Err(RegionError::Exists));
        r.check().unwrap();
        let back = r.replace(&lk, &ph, &p, &copy_from(&words), 1000, 0.002, true, &mut |_, _| 60).unwrap();
        assert!(back.usable() && r.table(&back).contains(hash_i64(DEFAULT_SEED, 7)));
        let ph2 = r.create_placeholder(&lk, &spec(1, "gone"), &p, 57, 3).unwrap();
        r.drop_filter(&lk, &ph2).unwrap();
        r.reclaim(&lk);
        assert!(r.find(1, "gone").is_none());
        r.check().unwrap();
        // Closing or freezing durable changes waits for pinned processes.
        assert_eq!(r.durable_state(), DURABLE_CLOSED);
        assert!(r.set_durable_state(DURABLE_OPEN, 0));
        let pin = r.pin_writer(3).unwrap();
        assert!(!r.set_durable_state(DURABLE_FROZEN, 1000));
        drop(pin);
        // Readers are not waited for.
        let reader = r.pin(4).unwrap();
        assert!(r.set_durable_state(DURABLE_FROZEN, 1000));
        drop(reader);
        assert!(r.set_durable_state(DURABLE_FROZEN, 1000));
        assert_eq!(r.durable_state(), DURABLE_FROZEN);
    }

    #[test]
    fn an_image_is_taken_and_handed_over_with_writers_held_off() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        let p = params(1000);
        let d = r.create(&lk, &spec(1, "d"), &p, None, &mut |_, _| 0).unwrap();
        r.table(&d).insert(hash_i64(DEFAULT_SEED, 1)).unwrap();
        let mut out = vec![0u64; p.bucket_count as usize];
        let pin = r.pin(0).unwrap();
        let got = r
            .image(&d, 0, &mut out, 1000, |words, items| {
                // Inside the callback writers are held off.
                assert!(r.writers_paused(d.index));
                (words.to_vec(), items)
            })
            .unwrap();
        drop(pin);
        assert!(!r.writers_paused(d.index));
        assert_eq!(got.1, 1);
        let mut now = vec![0u64; p.bucket_count as usize];
        r.table(&d).copy_words(&mut now);
        assert_eq!(got.0, now);
        // Another process pinned as a writer: the image gives up after its
        // patience, and lifts the pause. A reader pinned throughout (a long
        // batched lookup) does not hold it up.
        let reader = r.pin(2).unwrap();
        let other = r.pin_writer(1).unwrap();
        let pin = r.pin(0).unwrap();
        assert!(r.image(&d, 0, &mut out, 100, |_, _| ()).is_err());
        assert!(!r.writers_paused(d.index));
        drop(other);
        assert!(r.image(&d, 0, &mut out, 100, |_, _| ()).is_ok());
        drop((pin, reader));
    }

    #[test]
    fn interrupted_claim_is_recovered_by_the_next_lock_holder() {
        let (_m, r) = region(4 << 20);
        let lk = lock();
        r.create(&lk, &spec(1, "keep"), &params(1000), None, &mut |_, _| 0).unwrap();
        // A lock holder claims blocks and stops before linking them.
        let (start, n, _tag) = r.claim(&lk, 100_000).unwrap();
        assert!(n > 0 && start < r.lay.blocks);
        assert!(r.check().is_err(), "phantom allocation is visible to the check");
        // The next change recovers it first.
        r.create(&lk, &spec(1, "next"), &params(1000), None, &mut |_, _| 0).unwrap();
        r.check().unwrap();
        assert_eq!(r.allocator().allocations().len(), 2);
    }

    #[test]
    fn entries_run_out_cleanly() {
        let (_m, r) = region(1 << 20);
        let lk = lock();
        let max = r.lay.entries;
        let mut last = None;
        for i in 0..max {
            last = Some(r.create(&lk, &spec(1, &format!("e{i}")), &params(10), None, &mut |_, _| 0).unwrap());
        }
        assert_eq!(r.create(&lk, &spec(1, "one more"), &params(10), None, &mut |_, _| 0), Err(RegionError::NoEntries { max }));
        r.drop_filter(&lk, &last.unwrap()).unwrap();
        r.create(&lk, &spec(1, "one more"), &params(10), None, &mut |_, _| 0).unwrap();
        r.check().unwrap();
    }

    /// Readers resolve a name, pin, validate and probe, while a writer keeps
    /// replacing and dropping/recreating that name with filters that all hold the
    /// same keys, and creating other filters that take the freed space. A reader
    /// that read blocks after they were reused would see another filter's words
    /// (or zeros) and miss a key.
    #[test]
    fn reclamation_waits_for_readers_under_churn() {
        let (m, r) = region(8 << 20);
        let p = params(5000);
        let keys: Vec<u64> = (0..2000).map(|k| hash_i64(DEFAULT_SEED, k)).collect();
        let words = {
            let f = crate::filter::OwnedFilter::new(p);
            for &h in &keys {
                f.table().insert(h).unwrap();
            }
            words_of(&f)
        };
        let contents = copy_from(&words);
        let lock_mutex = Arc::new(Mutex::new(()));
        {
            let _g = lock_mutex.lock().unwrap();
            r.create(&lock(), &spec(1, "hot"), &p, Some(&contents), &mut |_, _| 0).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        for slot in 0..3usize {
            let (stop, keys, _m, total) = (stop.clone(), keys.clone(), m.clone(), total.clone());
            readers.push(std::thread::spawn(move || {
                let _region_memory = &_m;
                let mut probes = 0u64;
                let mut i = slot;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let Some(info) = r.find(1, "hot") else { continue };
                    let pin = r.pin(slot).unwrap();
                    if !r.still_current(info.index, info.seq) {
                        continue;
                    }
                    let t = r.table(&info);
                    for _ in 0..200 {
                        i = (i + 7) % keys.len();
                        assert!(t.contains(keys[i]), "false negative: blocks reused under a pinned reader");
                        probes += 1;
                    }
                    drop(pin);
                    total.fetch_add(200, Ordering::Relaxed);
                }
                probes
            }));
        }
        // One change under the lock; retried, with the lock released in between
        // (as the glue does), while the space it needs is still being read.
        let change = |f: &dyn Fn(&Locked) -> Result<EntryInfo, RegionError>| loop {
            let guard = lock_mutex.lock().unwrap();
            match f(&lock()) {
                Ok(info) => return info,
                Err(RegionError::Busy) | Err(RegionError::NoSpace { pending: 1.., .. }) => {
                    drop(guard);
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        };
        // At least 300 changes, and on until the readers made 1,000,000 probes.
        let mut round = 0;
        while round < 300 || (total.load(Ordering::Relaxed) < 1_000_000 && round < 1_000_000) {
            round += 1;
            if round % 2 == 0 {
                change(&|lk| r.replace(lk, &r.find(1, "hot").unwrap(), &p, &contents, 5000, DEFAULT_FPP, false, &mut |_, _| 0));
            } else {
                change(&|lk| {
                    let hot = r.find(1, "hot").unwrap();
                    r.drop_filter(lk, &hot).map(|()| hot)
                });
                // Reuse freed space for something else with different words.
                let other = change(&|lk| r.create(lk, &spec(1, "other"), &p, None, &mut |_, _| 0));
                r.table(&other).insert(12345).unwrap();
                change(&|lk| r.create(lk, &spec(1, "hot"), &p, Some(&contents), &mut |_, _| 0));
                change(&|lk| r.drop_filter(lk, &other).map(|()| other.clone()));
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let probes: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(probes >= 1_000_000, "{probes} probes in {round} rounds");
        let lk = lock();
        r.reclaim(&lk);
        r.check().unwrap();
        assert_eq!(r.allocator().allocations().len(), 1);
    }

    /// Keys that are always stored (at least one copy) while writers insert a
    /// second copy of them and then delete one, shifting copies between the two
    /// buckets of a pair, and insert and delete other keys (moves, at high load);
    /// writers honour the pause as the glue does. Every snapshot must hold every
    /// always-stored key, and its count must match its words.
    #[test]
    fn snapshots_hold_every_key_under_shifting_writers() {
        let (m, r) = region(8 << 20);
        let p = params(200_000);
        let info = r.create(&lock(), &spec(1, "s"), &p, None, &mut |_, _| 0).unwrap();
        // 75% of the slots always stored: inserts of other keys move fingerprints.
        let always: Vec<u64> = (0..p.slot_count() * 3 / 4).map(|k| hash_i64(DEFAULT_SEED, k as i64)).collect();
        for &h in &always {
            r.table(&info).insert(h).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..2usize {
            let (stop, always, info, _m) = (stop.clone(), always.clone(), info.clone(), m.clone());
            writers.push(std::thread::spawn(move || {
                let _region_memory = &_m;
                let slot = 1 + w;
                let mut i = w * 7919;
                let mut ops = 0u64;
                // Run the op pinned, unless a snapshot pauses writers.
                let write = |op: &dyn Fn(&Table<'_>)| loop {
                    let pin = r.pin_writer(slot).unwrap();
                    if r.writers_paused(info.index) {
                        drop(pin);
                        while r.writers_paused(info.index) {
                            std::thread::yield_now();
                        }
                        continue;
                    }
                    op(&r.table(&info));
                    return;
                };
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 13) % always.len();
                    let h = always[i];
                    write(&|t| t.insert(h).unwrap());
                    write(&|t| assert!(t.delete(h)));
                    let other = hash_i64(DEFAULT_SEED, 1_000_000 + (w * 1_000_000 + i) as i64);
                    write(&|t| {
                        let _ = t.insert(other);
                    });
                    write(&|t| {
                        t.delete(other);
                    });
                    ops += 4;
                }
                ops
            }));
        }
        let mut out = vec![0u64; p.bucket_count as usize];
        let mut snaps = 0;
        let paused_before = PAUSED_SNAPSHOTS.load(Ordering::Relaxed);
        while snaps < 100 {
            let _pin = r.pin(0).unwrap();
            let items = r.snapshot(&info, 0, &mut out, u64::MAX).unwrap();
            snaps += 1;
            // As cf_snapshot does: the copied words compacted into a dense value,
            // which must validate and hold every key stored throughout.
            let h = DenseHeader { params: p, items, capacity: info.capacity };
            let bytes = dense::encode(&h, out.iter().copied());
            let parsed = dense::parse_v2(&bytes).unwrap();
            let d = dense::Dense::new(&parsed.params, &bytes[dense::V2_HEADER_BYTES..]);
            d.validate(items).unwrap();
            for &h in &always {
                assert!(d.contains(h), "snapshot {snaps} missed a key stored throughout");
            }
        }
        stop.store(true, Ordering::Relaxed);
        let ops: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(ops > 1000, "writers made {ops} changes");
        let paused = PAUSED_SNAPSHOTS.load(Ordering::Relaxed) - paused_before;
        eprintln!("snapshot test: {ops} writer changes, {snaps} snapshots, {paused} of them by pausing writers");
        assert!(paused > 0, "the pause path was never taken");
    }
}
