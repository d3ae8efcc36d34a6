//! A sample of a key column read at plan time, for the row estimate of
//! `cf_contains(filter, column)`: the share of sampled rows whose key the
//! filter passes.
//!
//! The statistics ANALYZE keeps hold about 100 histogram bounds at the default
//! statistics target, too few to see a pass rate of 1% (one or two bounds), let
//! alone 0.1%. PostgreSQL offers no hook to keep ANALYZE's own sample, so the
//! planner reads one: up to `cuckoo.estimate_sample_rows` rows (default
//! 30,000, what ANALYZE samples at the default target) from up to a tenth as
//! many blocks chosen at random, through the table access method's ANALYZE
//! scan (the rows it counts as live). Each block gives a reservoir of its
//! share of the rows, chosen at random, and each sampled row stands for the
//! rows of its block it was picked from, so the estimate is of the table's
//! rows, not of the blocks'. The values kept are copied out of the block
//! while its buffer is locked and hashed after it is released.
//!
//! The sample is kept, as the keys' 64-bit hashes, in this backend for the
//! table, column and key hashing, and read again only after the table's
//! statistics change (a new `pg_statistic` row, or new `relpages` or
//! `reltuples`: ANALYZE, VACUUM, autovacuum): a backend's first plan over a
//! column pays for the reads (about as many block reads as a tenth of
//! ANALYZE's), later plans only probe the kept hashes against the filter. At
//! most [`MAX_KEPT`] samples are kept per backend, the oldest dropped first.
//!
//! Which columns are sampled (only where reading rows before the query runs
//! is safe: the right to read the column, no row security, keys hashed by
//! built-in code without conversion) is decided in `planner.rs`
//! (`from_sample`); anything else is estimated from the statistics.

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::sql::keys::KeyHasher;

/// `cuckoo.estimate_sample_rows`: the most rows a plan-time sample reads; 0
/// turns sampling off.
pub static SAMPLE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(30_000);
/// The most samples one backend keeps.
pub const MAX_KEPT: usize = 16;
/// A sample reads up to one block for this many of its rows.
const ROWS_PER_BLOCK: i32 = 10;

pub fn init() {
    GucRegistry::define_int_guc(
        c"cuckoo.estimate_sample_rows",
        c"Most rows the planner samples from a key column to estimate how many rows cf_contains passes; 0: use the column's statistics only.",
        c"Read once per backend, table and column, from a tenth as many blocks at random, and kept until the table's statistics change (ANALYZE, VACUUM).",
        &SAMPLE_ROWS,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// What identifies a sample: the table and column, the hashing (key kind and
/// conversion, seed, collation), and the table's statistics as of the read.
#[derive(Clone, Copy, PartialEq)]
pub struct SampleKey {
    pub relid: pg_sys::Oid,
    pub attnum: i16,
    /// The filter's recorded key kind and type, the column's type and the
    /// call's collation.
    pub hashing: [u32; 4],
    pub seed: u64,
    pub stats_xmin: u32,
    pub relpages: i32,
    pub reltuples: f32,
    pub target_rows: i32,
}

/// A sample: the hashes of the sampled keys that have an equal among the
/// filter's keys, each with the rows it stands for, and all the rows the sample
/// stands for (NULL keys and keys without an equal included).
pub struct Sample {
    pub hashes: Vec<u64>,
    pub weights: Vec<f32>,
    pub total: f64,
    /// Pass rates found for filters (by [`Known::identity`](super::Known)),
    /// the latest last.
    rates: std::cell::RefCell<Vec<(u64, Option<f64>)>>,
}

/// The most pass rates a sample keeps.
const MAX_RATES: usize = 8;

impl Sample {
    /// The pass rate found before for the filter `id`, if any.
    pub fn kept_rate(&self, id: u64) -> Option<Option<f64>> {
        self.rates.borrow().iter().find(|(i, _)| *i == id).map(|(_, r)| *r)
    }

    /// Keeps the pass rate found for the filter `id`.
    pub fn keep_rate(&self, id: u64, rate: Option<f64>) {
        let mut r = self.rates.borrow_mut();
        if r.len() >= MAX_RATES {
            r.remove(0);
        }
        r.push((id, rate));
    }

    /// The share of the table's rows whose key passes, given one answer per
    /// hash, but at least the false-positive rate `fpp` on the rows with a
    /// key; None for a sample of no rows.
    pub fn pass_rate(&self, answers: &[bool], fpp: f64) -> Option<f64> {
        if self.total <= 0.0 {
            return None;
        }
        let keyed: f64 = self.weights.iter().map(|&w| w as f64).sum();
        let pass: f64 = self.weights.iter().zip(answers).filter(|(_, &a)| a).map(|(&w, _)| w as f64).sum();
        Some(pass.max(fpp * keyed) / self.total)
    }
}

struct Kept {
    key: SampleKey,
    sample: std::rc::Rc<Sample>,
}

thread_local! {
    static KEPT: std::cell::RefCell<Vec<Kept>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The kept sample for `key`, or a new one read by `read` and kept.
pub fn kept_or_read(key: SampleKey, read: impl FnOnce() -> Sample) -> std::rc::Rc<Sample> {
    if let Some(s) = KEPT.with(|k| k.borrow().iter().find(|e| e.key == key).map(|e| e.sample.clone())) {
        return s;
    }
    let sample = std::rc::Rc::new(read());
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        // An older sample of the same column is stale.
        k.retain(|e| !(e.key.relid == key.relid && e.key.attnum == key.attnum && e.key.hashing == key.hashing));
        if k.len() >= MAX_KEPT {
            k.remove(0);
        }
        k.push(Kept { key, sample: sample.clone() });
    });
    sample
}

/// A copy of a non-null value of a column stored as (`byval`, `len`), in the
/// current memory context (a toasted value's pointer is copied, not the value).
///
/// # Safety
/// `d` is a non-null datum of such a column, valid for the call.
unsafe fn copy_datum(d: pg_sys::Datum, byval: bool, len: i16) -> pg_sys::Datum {
    if byval {
        return d;
    }
    // SAFETY: as documented: a pointer to `len` bytes, a varlena (len -1) or a
    // C string (len -2), copied into a new palloc'd chunk.
    unsafe {
        let src = d.cast_mut_ptr::<u8>();
        let n = match len {
            -1 => pgrx::varlena::varsize_any(src as *const pg_sys::varlena),
            -2 => std::ffi::CStr::from_ptr(src as *const std::ffi::c_char).to_bytes_with_nul().len(),
            n => n as usize,
        };
        let dst = pg_sys::palloc(n) as *mut u8;
        std::ptr::copy_nonoverlapping(src, dst, n);
        pg_sys::Datum::from(dst)
    }
}

/// Reads a sample of column `attnum` of `rel` (opened and locked by the
/// planner), hashing each non-null key with `hasher` for `seed`.
///
/// # Safety
/// `rel` is an open relation of an ordinary table or materialized view; the
/// hasher is resolved for the column's type and prepared.
pub unsafe fn read(rel: pg_sys::Relation, attnum: i16, hasher: &mut KeyHasher, seed: u64, rows: i32) -> Sample {
    // SAFETY: as documented: a table-AM ANALYZE scan of blocks chosen by
    // PostgreSQL's block sampler, each row read from the slot the scan fills;
    // the slot and scan are released before returning, also when an ERROR
    // (cancel) leaves through the loop, by the memory context and resource
    // owner of the query. Each block's work runs in a context reset per block.
    unsafe {
        let nblocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
        let mut sample = Sample { hashes: Vec::new(), weights: Vec::new(), total: 0.0, rates: Default::default() };
        if nblocks == 0 || rows <= 0 {
            return sample;
        }
        let target_blocks = (rows / ROWS_PER_BLOCK).max(1);
        let mut bs: pg_sys::BlockSamplerData = std::mem::zeroed();
        let prng = std::ptr::addr_of_mut!(pg_sys::pg_global_prng_state);
        let seed32 = pg_sys::pg_prng_uint32(prng);
        let blocks = pg_sys::BlockSampler_Init(&mut bs, nblocks, target_blocks, seed32);
        // Each block gives about its share of the rows.
        let share = (rows as f64 / blocks.max(1) as f64).ceil().max(1.0) as usize;
        let oldest = pg_sys::GetOldestNonRemovableTransactionId(rel);
        let scan = pg_sys::table_beginscan_analyze(rel);
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        let strategy = pg_sys::GetAccessStrategy(pg_sys::BufferAccessStrategyType::BAS_BULKREAD);
        let cx = pg_sys::AllocSetContextCreateExtended(
            pg_sys::CurrentMemoryContext,
            c"cuckoo plan-time sample".as_ptr(),
            pg_sys::ALLOCSET_DEFAULT_MINSIZE as usize,
            pg_sys::ALLOCSET_DEFAULT_INITSIZE as usize,
            pg_sys::ALLOCSET_DEFAULT_MAXSIZE as usize,
        );
        // The column's storage, to copy its values out of the block.
        let att = &(*(*rel).rd_att).attrs.as_slice((*(*rel).rd_att).natts as usize)[attnum as usize - 1];
        let (byval, len) = (att.attbyval, att.attlen);
        let mut keys: Vec<Option<pg_sys::Datum>> = Vec::new();
        while pg_sys::BlockSampler_HasMore(&mut bs) {
            pgrx::check_for_interrupts!();
            let block = pg_sys::BlockSampler_Next(&mut bs);
            if !pg_sys::table_scan_analyze_next_block(scan, block, strategy) {
                continue;
            }
            let old = pg_sys::MemoryContextSwitchTo(cx);
            keys.clear();
            let (mut live, mut dead) = (0f64, 0f64);
            let mut seen = 0usize;
            // A reservoir of the block's share of its live rows, each row as
            // likely as any other (rows in a block often follow a pattern that
            // a fixed stride would pick up). The block's buffer is locked
            // until its last row has been read: the values kept are copied
            // out, and hashed (detoasted) only after.
            while pg_sys::table_scan_analyze_next_tuple(scan, oldest, &mut live, &mut dead, slot) {
                let at = if seen < share {
                    Some(seen)
                } else {
                    let j = pg_sys::pg_prng_uint64_range(prng, 0, seen as u64) as usize;
                    (j < share).then_some(j)
                };
                seen += 1;
                let Some(at) = at else { continue };
                let mut isnull = false;
                let d = pg_sys::slot_getattr(slot, attnum as i32, &mut isnull);
                let d = (!isnull).then(|| copy_datum(d, byval, len));
                if at == keys.len() {
                    crate::filter::push(&mut keys, d);
                } else {
                    keys[at] = d;
                }
            }
            if !keys.is_empty() {
                let w = seen as f64 / keys.len() as f64;
                sample.total += seen as f64;
                for d in keys.iter().flatten() {
                    if let Some(h) = hasher.hash_datum_for(*d, seed) {
                        crate::filter::push(&mut sample.hashes, h);
                        crate::filter::push(&mut sample.weights, w as f32);
                    }
                }
            }
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cx);
        }
        pg_sys::MemoryContextDelete(cx);
        pg_sys::FreeAccessStrategy(strategy);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::table_endscan(scan);
        sample
    }
}
