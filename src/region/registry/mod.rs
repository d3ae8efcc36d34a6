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
//! for WAL buffer space); a checkpoint cut and a snapshot hold one while they
//! copy the units or words they take into their own memory (files and WAL are
//! written after). So a reclaimer usually waits microseconds and at most as
//! long as one filter takes to copy; it never blocks, it retries. A backend that is
//! killed while pinned takes the server through crash recovery, which rebuilds
//! the region.
//!
//! The parts: this file holds the layout, the entries and what reads them
//! (lookups by name, statistics, the consistency check); `pins` the pins,
//! writer pauses and consistent copies; `lifecycle` the changes made under
//! the registry lock and reclamation; `durable_state` the checkpoint
//! bookkeeping of durable filters; `limits` what each role and database uses
//! and the caps on it; `tests` their tests.

use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::allocator::BlockAllocator;
use super::durable::{state_bytes, Pool, Units, UNIT_WORDS};
use super::epoch;
use crate::filter;
use crate::filter::sync::{fence, spin, AtomicU32, AtomicU64, Ordering};
use crate::filter::Growth;
use crate::filter::{KeyKind, KeyType};
use crate::filter::{OpStats, Params, Table};
use crate::filter::{WordsHeader, WORDS_HEADER_BYTES};

pub use types::*;

/// The unit of allocation inside the region.
pub const BLOCK_BYTES: u64 = 4096;
/// Longest name in bytes (PostgreSQL's identifier limit).
pub const MAX_NAME_BYTES: usize = 63;
const NAME_WORDS: usize = 8;
/// Statistics are striped over this many cache lines per filter, chosen by
/// backend, so that backends counting lookups on one filter do not share a line.
pub const STAT_STRIPES: usize = 8;
const REGION_MAGIC: u64 = 0x6375_636b_6f6f_5247; // "cuckooRG"
const REGION_VERSION: u64 = 8;
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
    /// Whether durable filters may be changed: a [`DurableGate`] (see
    /// `sql::named::cut`).
    durable_state: AtomicU64,
    /// Set when restoring the filters' files met an error that may have left
    /// a filter out: no file is removed then (until a restart restores all).
    restore_incomplete: AtomicU64,
    /// Advanced by every change of an entry (under the registry lock): a
    /// growth refused by a cap is not tried again until it moves (`limits`).
    changes: AtomicU64,
    /// When this region was laid out (nanoseconds of the wall clock, at
    /// least 1): with an allocation tag, names contents within and across
    /// re-initialisations of shared memory (a crash restart keeps the
    /// server's start time but starts tags from 1 again).
    born: AtomicU64,
    epoch: CachePadded<AtomicU64>,
}

/// Whether durable filters may be changed (kept in shared memory as its
/// `u64` value).
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurableGate {
    /// Durable filters cannot be changed yet (nobody logs checkpoint images).
    Closed = 0,
    /// Durable filters may be changed.
    Open = 1,
    /// Durable filters were saved for shutdown and must not change again.
    Frozen = 2,
}

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
    /// The blocks of the filter's tables outside its head, with the low bits
    /// of the tag they belong to (see `limits`): set by the lock holder with
    /// the contents, then changed by growth without the lock.
    grown: AtomicU64,
    capacity: AtomicU64,
    fpp_bits: AtomicU64,
    /// 1 for a durable (WAL-logged) filter.
    durable: AtomicU64,
    /// A durable filter's generation: the end of the WAL record that created or
    /// published its contents (0 for other filters).
    gen: AtomicU64,
    /// Why the filter must be published again before use (0: it need not).
    reload_reason: AtomicU64,
    /// The type of its keys (`KeyType`: kind << 32 | OID; 0: not recorded).
    key: AtomicU64,
    /// How it grows: the factor of each new table (0: it does not) and the
    /// rate its tables keep together (an `f64`).
    expansion: AtomicU64,
    growth_fpp: AtomicU64,
    /// Table 0's parameters (kept here too, for placeholders without blocks):
    /// bucket count, seed, and fingerprint bits | slots << 8 | mapping << 16.
    params: [AtomicU64; 3],
    /// Snapshots and checkpoint cuts in progress that wait for (and hold off)
    /// this filter's writers.
    writers_paused: AtomicU64,
    checkpoint: DurableState,
    stats: [CachePadded<Stats>; STAT_STRIPES],
}

/// A durable filter's checkpoint bookkeeping (see `sql::named::cut`): written
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
    /// The stamp of its last file that a `PASS` record confirmed (every
    /// node that replayed that record has a file at that stamp), or that the
    /// coverage file said was confirmed; 0: none.
    confirmed: AtomicU64,
    /// The stamp of its last file when it was restored (0: not restored).
    restored: AtomicU64,
    /// [`UNVERIFIED`].
    flags: AtomicU64,
    /// A bound filter's account of its queued deletes
    /// ([`crate::region::wal::QueueCounts`]: queued, settled, dropped,
    /// refused), changed only inside a writer's operation with its `QUEUE`
    /// record, so that a cut takes it as of its `CUT`.
    queue: [AtomicU64; 4],
}

/// Restored from files that cover less than the position replay starts at,
/// from a copy of the directory (a base backup or `pg_rewind`): a base that
/// recovery meets in the WAL replaces it (see `sql::named::replay`).
pub const UNVERIFIED: u64 = 1;

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
        let room =
            size.checked_sub(tree_at + pool_bytes + 256 + BLOCK_BYTES).ok_or("region too small for its metadata")?;
        let mut blocks = (room / (BLOCK_BYTES + 8)).min(super::allocator::MAX_BLOCKS);
        loop {
            let pool_used_at = align_up(tree_at + 8 * BlockAllocator::words_needed(blocks) as u64, 128);
            let pool_at = align_up(pool_used_at + 8 * Pool::bitmap_words(pool_slots), 128);
            let data_at = align_up(pool_at + 8 * pool_slots * UNIT_WORDS, BLOCK_BYTES);
            if data_at + blocks * BLOCK_BYTES <= size {
                if blocks == 0 {
                    return Err("region too small for any filter".into());
                }
                return Ok(Layout {
                    size,
                    entries,
                    slots,
                    blocks,
                    entries_at,
                    slots_at,
                    retired_at,
                    tree_at,
                    pool_used_at,
                    pool_at,
                    pool_slots,
                    data_at,
                });
            }
            blocks -= 1;
        }
    }

    /// Bytes the region offers to filters.
    pub fn data_bytes(&self) -> u64 {
        self.blocks * BLOCK_BYTES
    }
}

fn pack_key(k: KeyType) -> u64 {
    (k.kind as u64) << 32 | k.oid as u64
}

fn unpack_key(w: u64) -> KeyType {
    // Only pack_key writes the word (zero: nothing recorded).
    KeyType { kind: KeyKind::from_byte((w >> 32) as u8).expect("a key kind packed by pack_key"), oid: w as u32 }
}

fn pack_params(p: &Params) -> [u64; 3] {
    [p.bucket_count, p.seed, p.fingerprint_bits as u64 | (p.slots_per_bucket as u64) << 8 | (p.mapping as u64) << 16]
}

fn unpack_growth(expansion: u64, fpp_bits: u64) -> Option<Growth> {
    (expansion != 0).then(|| Growth { fpp: f64::from_bits(fpp_bits), expansion: expansion as u32 })
}

fn unpack_params(w: [u64; 3]) -> Option<Params> {
    let mapping = crate::filter::Mapping::from_code((w[2] >> 16) as u8)?;
    Some(Params {
        bucket_count: w[0],
        seed: w[1],
        fingerprint_bits: w[2] as u8,
        slots_per_bucket: (w[2] >> 8) as u8,
        mapping,
    })
}

/// Called by create and replace after the new filter's words are written and
/// before it is linked, with each table's words and their item count: returns
/// the filter's generation (a durable filter's creation or contents are logged
/// there, so that nobody can use the filter before its record exists).
pub type Stamp<'s> = &'s mut dyn FnMut(&[&[u64]], u64) -> u64;

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
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        h.born.store(now.max(1), Ordering::Relaxed);
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

    /// When this region was laid out (see `RegionHeader::born`).
    pub fn born(&self) -> u64 {
        self.header().born.load(Ordering::Relaxed)
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

    /// How the region's space is used now (for the `cuckoo_region` view).
    pub fn space(&self) -> RegionSpace {
        let a = self.allocator();
        let n = self.header().retired_count.load(Ordering::Relaxed).min(self.lay.entries) as usize;
        RegionSpace {
            size: self.lay.size,
            data_bytes: self.lay.data_bytes(),
            free_bytes: a.free_blocks() * BLOCK_BYTES,
            largest_free_bytes: a.largest_free_run() * BLOCK_BYTES,
            releasing_bytes: self.retired()[..n].iter().map(|r| r.blocks.load(Ordering::Relaxed)).sum::<u64>()
                * BLOCK_BYTES,
            entries: self.lay.entries,
            entries_used: self.entries().iter().filter(|e| e.state.load(Ordering::Relaxed) != STATE_FREE).count()
                as u64,
        }
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
                key: unpack_key(e.key.load(Ordering::Relaxed)),
                growth: unpack_growth(e.expansion.load(Ordering::Relaxed), e.growth_fpp.load(Ordering::Relaxed)),
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

    /// Adds a batch's operations: inserts stored and refused (with the
    /// fingerprints they moved), deletes that removed a copy, and lookups.
    pub fn count_many(&self, index: usize, slot: usize, t: &Tally) {
        let s = self.stripe(index, slot);
        for (counter, n) in [
            (&s.inserts, t.stored),
            (&s.failed_inserts, t.refused),
            (&s.deletes, t.deleted),
            (&s.lookups, t.looked),
            (&s.kicks, t.op.kicks),
            (&s.lookup_retries, t.op.retries),
        ] {
            if n != 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
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

    /// A filter's bytes in its blocks: the words header, the bucket words, and
    /// for a durable filter one state word per unit (`region::durable`).
    fn filter_bytes(params: &Params, durable: bool) -> u64 {
        WORDS_HEADER_BYTES as u64 + 8 * params.bucket_count + if durable { state_bytes(params.bucket_count) } else { 0 }
    }

    /// Quiescent self-check for tests: the allocator's counts, and that the
    /// allocations are exactly those of the entries and retired records.
    pub fn check(&self) -> Result<(), String> {
        self.allocator().check()?;
        let mut owned: Vec<(u64, u64, u64)> = Vec::new();
        // A dropped entry's blocks are accounted for by its retired record.
        for e in self
            .entries()
            .iter()
            .filter(|e| e.state.load(Ordering::Relaxed) == STATE_LIVE && e.blocks.load(Ordering::Relaxed) > 0)
        {
            let (start, tag) = (e.start_block.load(Ordering::Relaxed), e.tag.load(Ordering::Relaxed));
            owned.push((start, e.blocks.load(Ordering::Relaxed), tag));
            owned.extend(self.table_runs(start, tag));
        }
        let n = self.header().retired_count.load(Ordering::Relaxed) as usize;
        for r in self.retired()[..n].iter().filter(|r| r.blocks.load(Ordering::Relaxed) > 0) {
            let (start, tag) = (r.start_block.load(Ordering::Relaxed), r.tag.load(Ordering::Relaxed));
            owned.push((start, r.blocks.load(Ordering::Relaxed), tag));
            owned.extend(self.table_runs(start, tag));
        }
        owned.sort_unstable();
        // A filter's tables share its tag: adjacent runs read as one.
        let mut merged: Vec<(u64, u64, u64)> = Vec::new();
        for (s, n, t) in owned {
            match merged.last_mut() {
                Some((ms, mn, mt)) if *mt == t && *ms + *mn == s => *mn += n,
                _ => merged.push((s, n, t)),
            }
        }
        let owned = merged;
        let mut allocs = self.allocator().allocations();
        allocs.sort_unstable();
        if owned != allocs {
            return Err(format!("allocations {allocs:?} differ from the registry's {owned:?}"));
        }
        Ok(())
    }
}

/// The design false-positive rate recorded for a published value: its bound at
/// the capacity the value was sized for.
pub fn published_fpp(params: &Params, capacity: u64) -> f64 {
    filter::expected_fpp(params, capacity)
}

mod durable_state;
mod lifecycle;
mod limits;
mod pins;
pub mod tables;
#[cfg(all(test, not(loom)))]
mod tests;
mod types;
