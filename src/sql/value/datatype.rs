//! The `cuckoofilter` SQL type: a hand-laid varlena read in place, and its text
//! and binary I/O. The per-call-site caches of probes are in `cache`.
//!
//! In memory a value is: the 4-byte varlena length, 4 reserved zero bytes, then the
//! serialized filter, in one of three formats:
//! - format 2 (`filter::dense`), what this version writes for one table: dense
//!   buckets without migration counters, any bucket count;
//! - format 3 (`filter::multi`), since 0.7.0: several format-2 tables (a union of
//!   filters of different shapes, a snapshot of a named filter that grew);
//! - format 1 (`filter::layout`), what 0.1.0 wrote: a 32-byte header and 64-bit
//!   bucket words (8-aligned, native order in memory), read in place as they were.
//!   Probes answer exactly as 0.1.0 did; functions that change a format-1 value
//!   return a format-2 value with format 1's bucket mapping, which answers the same.
//!
//! The text form is `cf2:` (`cf3:`, or `cf1:` for format 1) followed by standard base64 of
//! the serialized filter; the binary form is the serialized filter. Both are
//! validated completely on input.

use std::sync::atomic::AtomicU64;

use base64::Engine;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::filter::v2::{self, Dense, DenseHeader, V2_HEADER_BYTES};
use crate::filter::v3::{self, MultiHeader, FORMAT_V3};
use crate::filter::Growth;
use crate::filter::KeyType;
use crate::filter::{self, parse_v1, Mapping as BucketMapping, V1Header, FORMAT_V1, FORMAT_V2, V1_HEADER_BYTES};
use crate::filter::{FormatError, OwnedFilter, Params, Table};

/// Varlena length word plus 4 reserved bytes in front of the filter.
pub const VALUE_PREFIX: usize = 8;
/// Format-1 values were limited to 2^26 buckets (512 MB).
pub const MAX_V1_BUCKET_LOG2: u8 = 26;
/// The largest value input reads: PostgreSQL's allocation limit (1 GB − 1).
pub const MAX_VALUE_BYTES: u64 = 0x3fff_ffff;
/// The largest value this release makes: one whose text form (base64, 4/3 of
/// its size) still fits PostgreSQL's 1 GB limit with room to spare, so that
/// every value made can be written out, by `COPY` and so by `pg_dump`. Releases
/// before 0.11.0 made values up to [`MAX_VALUE_BYTES`]; such a value still
/// loads and answers, and its binary form (`COPY ... (FORMAT binary)`) carries
/// it, but its text form is refused (54000).
pub const MAX_MADE_VALUE_BYTES: u64 = 767 << 20;
/// The largest body (the serialized filter after the prefix) of a value made.
pub const MAX_MADE_BODY_BYTES: u64 = MAX_MADE_VALUE_BYTES - VALUE_PREFIX as u64;

/// A filter value in memory: a 4-byte-header, uncompressed varlena whose header
/// has been checked against its length (8-aligned if format 1).
#[derive(Clone, Copy)]
pub struct FilterValue {
    ptr: *mut pg_sys::varlena,
    version: u8,
}

fn text_prefix(version: u8) -> &'static str {
    match version {
        FORMAT_V1 => "cf1:",
        FORMAT_V3 => "cf3:",
        _ => "cf2:",
    }
}

impl FilterValue {
    /// Wraps an in-memory varlena after checking its header against its length
    /// (the buckets were checked when the value was made or read from input).
    ///
    /// # Safety
    /// `ptr` must point to a readable 4-byte-header uncompressed varlena that stays
    /// valid for as long as the returned value is used.
    pub unsafe fn from_ptr(ptr: *mut pg_sys::varlena) -> FilterValue {
        // SAFETY: the caller guarantees a 4-byte-header varlena of `len` bytes.
        let len = unsafe { pgrx::varlena::varsize_4b(ptr) };
        let bytes = (len >= VALUE_PREFIX + 8).then(|| {
            // SAFETY: as above; the slice covers the varlena after its prefix.
            unsafe { std::slice::from_raw_parts((ptr as *const u8).add(VALUE_PREFIX), len - VALUE_PREFIX) }
        });
        let version = match bytes.map(filter::format_version) {
            Some(Ok(FORMAT_V2)) if v2::parse_v2(bytes.unwrap()).is_ok() => FORMAT_V2,
            Some(Ok(FORMAT_V3)) if v3::parse_v3(bytes.unwrap()).is_ok() => FORMAT_V3,
            Some(Ok(FORMAT_V1)) if (ptr as usize).is_multiple_of(8) && check_v1_in_place(bytes.unwrap()) => FORMAT_V1,
            _ => corrupted(len),
        };
        FilterValue { ptr, version }
    }

    /// Wraps a value that `from_ptr` checked before (a cached one).
    ///
    /// # Safety
    /// `ptr` was accepted by `from_ptr` and is still valid and unchanged.
    pub(crate) unsafe fn trusted(ptr: *mut pg_sys::varlena) -> FilterValue {
        // SAFETY: a checked value has its version byte after the prefix and magic.
        let version = unsafe { *(ptr as *const u8).add(VALUE_PREFIX + 4) };
        FilterValue { ptr, version }
    }

    pub fn as_datum(&self) -> pg_sys::Datum {
        pg_sys::Datum::from(self.ptr)
    }

    pub fn format_version(&self) -> u8 {
        self.version
    }

    /// The serialized filter after the prefix (format 1: words in native order).
    fn body(&self) -> &[u8] {
        // SAFETY: checked in `from_ptr`/`alloc_v2`: at least the prefix is present
        // and the varlena is `len` bytes long.
        unsafe {
            let len = pgrx::varlena::varsize_4b(self.ptr);
            std::slice::from_raw_parts((self.ptr as *const u8).add(VALUE_PREFIX), len - VALUE_PREFIX)
        }
    }

    fn v1_header(&self) -> &V1Header {
        debug_assert_eq!(self.version, FORMAT_V1);
        // SAFETY: a checked format-1 value is 8-aligned and holds the 32-byte
        // header after its prefix; `V1Header` is plain bytes plus an `AtomicU64`,
        // valid for any bit pattern.
        unsafe { &*((self.ptr as *const u8).add(VALUE_PREFIX) as *const V1Header) }
    }

    /// A format-1 value's bucket words, read in place through the lock-free table
    /// (nothing changes them: values are immutable).
    fn v1_table(&self) -> Table<'_> {
        let h = self.v1_header();
        let p = h.params();
        // SAFETY: the length check guarantees `bucket_count` 8-aligned words after
        // the header; `AtomicU64` has the layout of `u64`.
        let words = unsafe {
            std::slice::from_raw_parts(
                (self.ptr as *const u8).add(VALUE_PREFIX + V1_HEADER_BYTES) as *const AtomicU64,
                p.bucket_count as usize,
            )
        };
        Table::new(p, &h.item_count, words)
    }

    pub(crate) fn v2_header(&self) -> DenseHeader {
        v2::parse_v2(self.body()).expect("checked in from_ptr")
    }

    /// A format-2 value's dense buckets.
    fn dense(&self) -> Dense<'_> {
        let h = self.v2_header();
        Dense::new(&h.params, &self.body()[V2_HEADER_BYTES..])
    }

    pub(crate) fn v3_header(&self) -> MultiHeader {
        v3::parse_v3(self.body()).expect("checked in from_ptr")
    }

    /// The type of its keys, as recorded (format 1 records none).
    pub fn key_type(&self) -> KeyType {
        match self.version {
            FORMAT_V1 => KeyType::NONE,
            FORMAT_V3 => self.v3_header().key(),
            _ => self.v2_header().key,
        }
    }

    /// The tables, each with its header (format 1 and 2: one).
    pub fn tables(&self) -> Vec<DenseHeader> {
        match self.version {
            FORMAT_V1 => {
                let p = self.v1_header().params();
                vec![DenseHeader { params: p, items: self.item_count(), capacity: self.capacity(), key: KeyType::NONE }]
            }
            FORMAT_V3 => self.v3_header().headers(),
            _ => vec![self.v2_header()],
        }
    }

    /// How the value grows when an insert finds every table full (format 3
    /// only: a snapshot of a named filter that grows).
    pub fn growth(&self) -> Option<Growth> {
        match self.version {
            FORMAT_V3 => self.v3_header().growth,
            _ => None,
        }
    }

    pub fn seed(&self) -> u64 {
        match self.version {
            FORMAT_V1 => self.v1_header().params().seed,
            FORMAT_V3 => self.v3_header().seed(),
            _ => self.v2_header().params.seed,
        }
    }

    pub fn item_count(&self) -> u64 {
        match self.version {
            FORMAT_V1 => self.v1_table().item_count(),
            FORMAT_V3 => self.v3_header().items(),
            _ => self.v2_header().items,
        }
    }

    /// The capacity the filter was sized for (format 1: its slots at the shape's
    /// planned load, as 0.1.0 reported it; format 3: its tables' sum).
    pub fn capacity(&self) -> u64 {
        match self.version {
            FORMAT_V1 => crate::filter::planned_capacity(&self.v1_header().params()),
            FORMAT_V3 => self.v3_header().capacity(),
            _ => self.v2_header().capacity,
        }
    }

    /// The false-positive bound at the filter's load now (format 3: the sum of
    /// its tables' bounds).
    pub fn fpp_bound(&self) -> f64 {
        v3::bound(&self.tables(), false)
    }

    /// Whether a key with this hash may be in the filter.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        match self.version {
            FORMAT_V1 => self.v1_table().contains(hash),
            FORMAT_V3 => v3::contains_checked(self.body(), hash),
            _ => self.dense().contains(hash),
        }
    }

    /// Copies of a key's fingerprint in its bucket pairs, over all tables.
    pub fn copies(&self, hash: u64) -> u64 {
        match self.version {
            FORMAT_V1 => self.v1_table().copies(hash),
            FORMAT_V3 => {
                let h = self.v3_header();
                v3::tables(self.body(), &h).iter().map(|t| t.copies(hash)).sum()
            }
            _ => self.dense().copies(hash),
        }
    }

    /// `contains` for many hashes at once, prefetching ahead.
    pub fn contains_many(&self, hashes: &[u64], out: &mut [bool]) {
        match self.version {
            FORMAT_V1 => self.v1_table().contains_many(hashes, out),
            FORMAT_V3 => {
                let h = self.v3_header();
                v3::contains_many(&v3::tables(self.body(), &h), hashes, out)
            }
            _ => self.dense().contains_many(hashes, out),
        }
    }

    /// The bucket words of table `i`, one per bucket (format 1's as stored,
    /// format 2's and 3's decoded).
    pub fn table_words(&self, i: usize) -> Box<dyn Iterator<Item = u64> + '_> {
        match self.version {
            FORMAT_V1 => {
                let t = self.v1_table();
                Box::new(t.bucket_words().iter().map(|w| w.load(std::sync::atomic::Ordering::Relaxed)))
            }
            FORMAT_V3 => {
                let p = self.v3_header().parts[i];
                let d = Dense::new(&p.header.params, &self.body()[p.start + V2_HEADER_BYTES..p.start + p.len]);
                Box::new((0..p.header.params.bucket_count).map(move |j| d.word(j)))
            }
            _ => {
                let d = self.dense();
                Box::new((0..self.v2_header().params.bucket_count).map(move |j| d.word(j)))
            }
        }
    }

    /// Private copies of the tables as bucket words, to change (insert,
    /// delete, union).
    pub fn copy_tables(&self) -> Vec<OwnedFilter> {
        self.tables()
            .iter()
            .enumerate()
            .map(|(i, t)| OwnedFilter::from_words(t.params, t.capacity, self.table_words(i)))
            .collect()
    }

    pub fn total_len(&self) -> usize {
        VALUE_PREFIX + self.body().len()
    }

    /// A 64-bit digest of the filter's bytes (xxh3): equal values have equal
    /// digests, and different ones almost never do.
    pub fn digest(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.body())
    }

    /// The serialized filter (little-endian): the value's own bytes, or for
    /// format 1 a copy in the current memory context.
    pub fn serialize_palloc(&self) -> &[u8] {
        let body = self.body();
        if self.version != FORMAT_V1 {
            return body;
        }
        // Format 1 keeps its words in native order in memory.
        let out = palloc_slice::<u8>(body.len());
        out.copy_from_slice(body);
        out[16..24].copy_from_slice(&self.seed().to_le_bytes());
        out[24..32].copy_from_slice(&self.item_count().to_le_bytes());
        for (chunk, w) in out[V1_HEADER_BYTES..].chunks_exact_mut(8).zip(self.table_words(0)) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

fn corrupted(len: usize) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        "corrupted cuckoofilter value",
        format!("a {len}-byte value does not match its header")
    );
}

/// Whether the body of an in-memory format-1 value has a valid header that
/// matches its length (and 0.1.0's size limit). In memory its integers are in
/// native order; the header check reads them as serialized (little-endian).
fn check_v1_in_place(body: &[u8]) -> bool {
    if body.len() < V1_HEADER_BYTES {
        return false;
    }
    let mut h = [0u8; V1_HEADER_BYTES];
    h.copy_from_slice(&body[..V1_HEADER_BYTES]);
    for at in [16, 24] {
        let native = u64::from_ne_bytes(h[at..at + 8].try_into().unwrap());
        h[at..at + 8].copy_from_slice(&native.to_le_bytes());
    }
    matches!(filter::parse_v1_header(&h), Ok((_, _, len)) if len == body.len() as u64 && h[8] <= MAX_V1_BUCKET_LOG2)
}

/// The largest bucket count a value of this shape can have
/// ([`MAX_MADE_VALUE_BYTES`]).
pub fn max_value_buckets(shape: &crate::filter::Shape) -> u64 {
    let p = Params {
        fingerprint_bits: shape.bits,
        slots_per_bucket: shape.slots,
        bucket_count: 1,
        seed: 0,
        mapping: BucketMapping::Fastrange,
    };
    let bits = v2::bucket_bits(&p) as u64;
    ((MAX_MADE_VALUE_BYTES - VALUE_PREFIX as u64 - 64) * 8 / bits).min(filter::MAX_BUCKET_COUNT)
}

/// Raises 54000 when a value with these parameters would be too large.
pub fn check_value_size(params: &Params) {
    let len = VALUE_PREFIX as u64 + v2::serialized_len(params);
    if len > MAX_MADE_VALUE_BYTES {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            "cuckoofilter value would be too large",
            format!("{} buckets take {len} bytes; a value holds at most {MAX_MADE_VALUE_BYTES}", params.bucket_count)
        );
    }
}

/// Raises 54000 when a value of tables with these parameters would be too
/// large (one table: format 2; more: format 3).
pub fn check_tables_value_size(params: &[Params]) {
    if params.len() == 1 {
        return check_value_size(&params[0]);
    }
    let len = VALUE_PREFIX as u64 + v3::serialized_len(params);
    if len > MAX_MADE_VALUE_BYTES || params.len() > v3::MAX_VALUE_TABLES {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            "cuckoofilter value would be too large",
            format!(
                "{} tables take {len} bytes; a value holds at most {} tables and {MAX_MADE_VALUE_BYTES} bytes",
                params.len(),
                v3::MAX_VALUE_TABLES
            )
        );
    }
}

/// Raises 22023 when a value would record a key type that input refuses:
/// what a value made here records, input must read back.
fn check_recorded_key(key: KeyType) {
    if let Err(why) = crate::sql::keys::recorded_key_ok(key, false) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "cannot make a cuckoofilter value of this key type",
            why
        );
    }
}

/// A format-2 value holding the filter `f` (bucket words) with keys of type
/// `key`, in the current memory context.
pub fn value_from_filter(f: &OwnedFilter, key: KeyType) -> FilterValue {
    value_from_words(&v3::header_of(f, key), f.words())
}

/// A value of these tables: format 2 for one table that does not grow, else
/// format 3.
pub fn value_from_tables(tables: &[OwnedFilter], key: KeyType, growth: Option<Growth>) -> FilterValue {
    if tables.len() == 1 && growth.is_none() {
        return value_from_filter(&tables[0], key);
    }
    let headers: Vec<DenseHeader> = tables.iter().map(|t| v3::header_of(t, key)).collect();
    value_from_headers(&headers, growth, |i| tables[i].words())
}

/// A format-3 value of tables with these headers, whose bucket words `words(i)`
/// gives, in the current memory context; 54000 if it would be too large.
pub fn value_from_headers<'w, I: Iterator<Item = u64> + 'w>(
    headers: &[DenseHeader],
    growth: Option<Growth>,
    words: impl FnMut(usize) -> I,
) -> FilterValue {
    if let Some(h) = headers.first() {
        check_recorded_key(h.key);
    }
    let params: Vec<Params> = headers.iter().map(|h| h.params).collect();
    check_tables_value_size(&params);
    let len = VALUE_PREFIX + v3::serialized_len(&params) as usize;
    // SAFETY: palloc0 returns zeroed memory of `len` bytes (at most MaxAllocSize,
    // checked above); the length word is set and the filter encoded within.
    unsafe {
        let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        let body = std::slice::from_raw_parts_mut((p as *mut u8).add(VALUE_PREFIX), len - VALUE_PREFIX);
        v3::encode_into(growth, headers, words, body);
        FilterValue { ptr: p, version: FORMAT_V3 }
    }
}

/// A format-2 value with header `h` and these bucket words, in the current memory
/// context.
pub fn value_from_words(h: &DenseHeader, words: impl Iterator<Item = u64>) -> FilterValue {
    check_recorded_key(h.key);
    check_value_size(&h.params);
    let len = VALUE_PREFIX + v2::serialized_len(&h.params) as usize;
    // SAFETY: palloc0 returns zeroed memory of `len` bytes (at most MaxAllocSize,
    // checked above); the length word is set and the filter encoded within.
    unsafe {
        let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        let body = std::slice::from_raw_parts_mut((p as *mut u8).add(VALUE_PREFIX), len - VALUE_PREFIX);
        v2::encode_into(h, words, body);
        FilterValue { ptr: p, version: FORMAT_V2 }
    }
}

/// Builds a value from serialized bytes after validating every field and bucket.
/// Format 1 stays format 1 (its bytes, and so its text and binary output, are
/// kept as they were).
pub fn deserialize(bytes: &[u8]) -> Result<FilterValue, FormatError> {
    match filter::format_version(bytes)? {
        FORMAT_V1 => {
            let (params, items) = parse_v1(bytes)?;
            if params.bucket_count > 1 << MAX_V1_BUCKET_LOG2 {
                return Err(FormatError::BadParams(format!(
                    "bucket count {} is larger than a format-1 value can hold (2^{MAX_V1_BUCKET_LOG2})",
                    params.bucket_count
                )));
            }
            let words = || bytes[V1_HEADER_BYTES..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
            let counted = crate::filter::Geometry::new(&params).occupied_total(words());
            if counted != items {
                return Err(FormatError::ItemCountMismatch { header: items, counted });
            }
            let len = VALUE_PREFIX + bytes.len();
            // SAFETY: palloc returns 8-aligned memory of `len` bytes (at most 512 MB
            // + 40); the prefix, header and words are written within.
            unsafe {
                let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
                pgrx::varlena::set_varsize_4b(p, len as i32);
                let body = (p as *mut u8).add(VALUE_PREFIX);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), body, V1_HEADER_BYTES);
                let words_out = body.add(V1_HEADER_BYTES) as *mut u64;
                for (i, w) in words().enumerate() {
                    words_out.add(i).write(w);
                }
                // Native order in memory, as 0.1.0 kept them.
                (body.add(16) as *mut u64).write(params.seed);
                (body.add(24) as *mut u64).write(items);
                Ok(FilterValue { ptr: p, version: FORMAT_V1 })
            }
        }
        FORMAT_V2 => {
            let h = v2::parse_v2(bytes)?;
            if h.key.kind == crate::filter::KeyKind::Builtin && !crate::sql::keys::builtin_key_type_ok(h.key.oid) {
                return Err(FormatError::BadParams(format!(
                    "key type OID {} is not a built-in type with a hash function",
                    h.key.oid
                )));
            }
            if (VALUE_PREFIX + bytes.len()) as u64 > MAX_VALUE_BYTES {
                return Err(FormatError::BadParams(format!("{} bytes is larger than a value can hold", bytes.len())));
            }
            Dense::new(&h.params, &bytes[V2_HEADER_BYTES..]).validate(h.items)?;
            let len = VALUE_PREFIX + bytes.len();
            // SAFETY: palloc0 of `len` bytes; the length word and body are written within.
            unsafe {
                let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
                pgrx::varlena::set_varsize_4b(p, len as i32);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(VALUE_PREFIX), bytes.len());
                Ok(FilterValue { ptr: p, version: FORMAT_V2 })
            }
        }
        FORMAT_V3 => {
            let h = v3::parse_v3(bytes)?;
            let key = h.key();
            if key.kind == crate::filter::KeyKind::Builtin && !crate::sql::keys::builtin_key_type_ok(key.oid) {
                return Err(FormatError::BadParams(format!(
                    "key type OID {} is not a built-in type with a hash function",
                    key.oid
                )));
            }
            if (VALUE_PREFIX + bytes.len()) as u64 > MAX_VALUE_BYTES {
                return Err(FormatError::BadParams(format!("{} bytes is larger than a value can hold", bytes.len())));
            }
            v3::validate_v3(bytes, &h)?;
            let len = VALUE_PREFIX + bytes.len();
            // SAFETY: palloc0 of `len` bytes; the length word and body are written within.
            unsafe {
                let p = pg_sys::palloc0(len) as *mut pg_sys::varlena;
                pgrx::varlena::set_varsize_4b(p, len as i32);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(VALUE_PREFIX), bytes.len());
                Ok(FilterValue { ptr: p, version: FORMAT_V3 })
            }
        }
        v => Err(FormatError::UnsupportedVersion(v)),
    }
}

/// Malformed input, text or binary: 22P02 with the precise reason as detail.
fn invalid_input(e: impl std::fmt::Display) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        "invalid input syntax for type cuckoofilter",
        e.to_string()
    );
}

/// `n` zeroed elements allocated in the current memory context (an ERROR, not
/// an abort, when memory runs out; freed with the context).
pub fn palloc_slice<'a, T: Copy>(n: usize) -> &'a mut [T] {
    // SAFETY: a zeroed allocation of n elements of a Copy type whose all-zero
    // bit pattern is valid (integers, booleans, datums), aligned to 8 by palloc.
    unsafe {
        let p = pg_sys::MemoryContextAllocExtended(
            pg_sys::CurrentMemoryContext,
            (n.max(1)).checked_mul(std::mem::size_of::<T>()).expect("allocation size"),
            (pg_sys::MCXT_ALLOC_HUGE | pg_sys::MCXT_ALLOC_ZERO) as i32,
        ) as *mut T;
        std::slice::from_raw_parts_mut(p, n)
    }
}

/// A filter datum that is not stored out of line, as a 4-byte-header varlena: in
/// place when it is one (plain and 8-aligned), else a detoasted copy in the
/// current memory context (short, compressed and in-memory-external forms are
/// small or rare).
///
/// # Safety
/// `raw` must be a non-null `cuckoofilter` datum.
pub(crate) unsafe fn in_memory(raw: *mut pg_sys::varlena) -> *mut pg_sys::varlena {
    // SAFETY: the caller guarantees a varlena in one of its storage forms;
    // pg_detoast_datum_copy returns a new palloc'd 4-byte-header varlena.
    unsafe {
        if pgrx::varlena::varatt_is_4b_u(raw) && (raw as usize).is_multiple_of(8) {
            return raw;
        }
        pg_sys::pg_detoast_datum_copy(raw)
    }
}

/// Filter argument `n` for a one-shot read (output, count, info, a union input):
/// in place when possible, otherwise detoasted into the current memory context,
/// without touching the call site's cache (`probe_arg` reads through it).
///
/// # Safety
/// `fcinfo` must be a valid call frame with a non-null `cuckoofilter` at `n`.
pub unsafe fn filter_arg_once(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> FilterValue {
    // SAFETY: the caller guarantees a cuckoofilter at `n`; `in_memory` gives a
    // 4-byte-header varlena that lives at least as long as this call.
    unsafe { FilterValue::from_ptr(in_memory(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr())) }
}

v1_functions! {
    /// `cuckoofilter_in(cstring)`: `cf2:` (or `cf1:`) + base64 of the serialized filter.
    fn cuckoofilter_in(fcinfo) {
        // SAFETY: the input function's argument 0 is a non-null C string.
        let text = unsafe {
            std::ffi::CStr::from_ptr(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<std::ffi::c_char>())
        };
        let text = text.to_str().unwrap_or_else(|_| invalid_input("input is not valid UTF-8"));
        let (prefix_version, body) = match (text.strip_prefix("cf2:"), text.strip_prefix("cf3:"), text.strip_prefix("cf1:")) {
            (Some(b), _, _) => (FORMAT_V2, b),
            (None, Some(b), _) => (FORMAT_V3, b),
            (None, None, Some(b)) => (FORMAT_V1, b),
            _ => invalid_input("input must start with \"cf2:\" or \"cf3:\" (or \"cf1:\", written by cuckoo 0.1.0)"),
        };
        // Refuse what cannot be a value before decoding it.
        let max_body = 4 * (MAX_VALUE_BYTES as usize).div_ceil(3);
        if body.len() > max_body {
            invalid_input(format!("{} characters is longer than any cuckoofilter value", body.len()));
        }
        let bytes = base64_palloc(body.as_bytes()).unwrap_or_else(|e| invalid_input(format!("bad base64: {e}")));
        let v = deserialize(bytes).unwrap_or_else(|e| invalid_input(e));
        if v.format_version() != prefix_version {
            invalid_input(format!(
                "prefix \"{}\" does not match format version {}",
                text_prefix(prefix_version),
                v.format_version()
            ));
        }
        v.as_datum()
    }

    fn cuckoofilter_out(fcinfo) {
        // SAFETY: argument 0 is a non-null cuckoofilter (the function is strict).
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        if v.total_len() as u64 > MAX_MADE_VALUE_BYTES {
            pgrx::pg_sys::panic::ErrorReport::new(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, "cuckoofilter value is too large for its text form", "cuckoo")
                .set_detail(format!("The value takes {} bytes; its text form would pass PostgreSQL's 1 GB limit.", v.total_len()))
                .set_hint("Values this large were made by releases before 0.11.0; COPY ... (FORMAT binary) carries them.")
                .report(PgLogLevel::ERROR);
        }
        prefixed_base64(text_prefix(v.format_version()), v.serialize_palloc())
    }

    /// `cuckoofilter_recv(internal)`: the serialized filter, exactly.
    fn cuckoofilter_recv(fcinfo) {
        // SAFETY: argument 0 of a receive function is a StringInfo.
        let bytes = unsafe { recv_bytes(fcinfo) };
        match deserialize(bytes) {
            Ok(v) => v.as_datum(),
            Err(e) => invalid_input(e),
        }
    }

    fn cuckoofilter_send(fcinfo) {
        // SAFETY: argument 0 is a non-null cuckoofilter (the function is strict).
        let v = unsafe { filter_arg_once(fcinfo, 0) };
        bytea_datum(v.serialize_palloc())
    }
}

/// Bytes base64 coded between interrupt checks (whole 3-byte groups).
const BASE64_CHUNK: usize = 3 << 20;

/// A type's text output: `prefix` and `bytes` in base64, as a C string in the
/// current memory context.
pub fn prefixed_base64(prefix: &str, bytes: &[u8]) -> pg_sys::Datum {
    let len = prefix.len() + bytes.len().div_ceil(3) * 4;
    // SAFETY: a fresh allocation of len + 1 bytes in the current context
    // (an ERROR when it cannot be had), filled with the prefix, the base64
    // (exactly the padded length) and the terminating NUL.
    unsafe {
        let p = pg_sys::MemoryContextAllocHuge(pg_sys::CurrentMemoryContext, len + 1) as *mut u8;
        let out = std::slice::from_raw_parts_mut(p, len + 1);
        out[..prefix.len()].copy_from_slice(prefix.as_bytes());
        // In chunks of whole 3-byte groups (no padding inside), checking for
        // interrupts between them: the text of a large value takes seconds.
        let mut at = prefix.len();
        for chunk in bytes.chunks(BASE64_CHUNK) {
            pgrx::check_for_interrupts!();
            at += base64::engine::general_purpose::STANDARD
                .encode_slice(chunk, &mut out[at..len])
                .expect("room for the padded base64");
        }
        debug_assert_eq!(at, len);
        out[len] = 0;
        pg_sys::Datum::from(p)
    }
}

/// Standard base64 decoded into the current memory context (where running
/// out of memory is an ERROR, not an abort): a value's text body can be a
/// gigabyte.
pub fn base64_palloc<'a>(body: &[u8]) -> Result<&'a [u8], String> {
    let room = base64::decoded_len_estimate(body.len());
    // SAFETY: a fresh allocation of `room` bytes (MemoryContextAllocHuge
    // raises an ERROR when it cannot), written by decode_slice only.
    unsafe {
        let p = pg_sys::MemoryContextAllocHuge(pg_sys::CurrentMemoryContext, room.max(1)) as *mut u8;
        let out = std::slice::from_raw_parts_mut(p, room);
        // In chunks of whole 4-character groups, checking for interrupts
        // between them; padding can only end the last one.
        let mut n = 0;
        for chunk in body.chunks(BASE64_CHUNK / 3 * 4) {
            pgrx::check_for_interrupts!();
            n += base64::engine::general_purpose::STANDARD
                .decode_slice(chunk, &mut out[n..])
                .map_err(|e| e.to_string())?;
        }
        Ok(&out[..n])
    }
}

/// The rest of a receive function's message (argument 0), consumed.
///
/// # Safety
/// Argument 0 of `fcinfo` is a StringInfo; the bytes live as long as it.
pub unsafe fn recv_bytes<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a [u8] {
    // SAFETY: as documented; pq_getmsgbytes checks the length against the buffer.
    unsafe {
        let buf = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<pg_sys::StringInfoData>();
        let remaining = ((*buf).len - (*buf).cursor) as usize;
        let p = pg_sys::pq_getmsgbytes(buf, remaining as i32);
        std::slice::from_raw_parts(p as *const u8, remaining)
    }
}

/// A new bytea holding `bytes`, in the current memory context.
pub fn bytea_datum(bytes: &[u8]) -> pg_sys::Datum {
    let len = pg_sys::VARHDRSZ + bytes.len();
    // SAFETY: palloc of `len` bytes; the length word and payload are written within.
    unsafe {
        let p = pg_sys::palloc(len) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(p, len as i32);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(pg_sys::VARHDRSZ), bytes.len());
        pg_sys::Datum::from(p)
    }
}

#[cfg(feature = "pg_test")]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn value_round_trips_through_text() {
        let out = Spi::get_one::<String>("SELECT cf_agg(g)::text FROM generate_series(1, 1000) g").unwrap().unwrap();
        assert!(out.starts_with("cf2:"));
        let back = Spi::get_one::<bool>(&format!("SELECT '{out}'::cuckoofilter::text = '{out}'")).unwrap();
        assert_eq!(back, Some(true));
    }
}
