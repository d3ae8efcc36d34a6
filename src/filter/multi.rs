//! Format 3: a `cuckoofilter` value of several tables, the structure a named
//! filter that grew has (`chain.rs`), and what a union of filters of different
//! shapes gives. Each table is a complete format-2 body (`dense.rs`); a key may
//! be in the filter if any table says so, so the value's false-positive bound
//! is the sum of its tables' bounds.
//!
//! # Serialized form
//!
//! Integers little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `b"CKOF"` |
//! | 4  | 1 | format version (3) |
//! | 5  | 1 | hash algorithm (1 = xxh3-64) |
//! | 6  | 1 | table count `k`, 1 to 255 |
//! | 7  | 1 | reserved, zero |
//! | 8  | 4 | expansion: 0 for a value that does not grow, else the factor its next table takes |
//! | 12 | 4 | reserved, zero |
//! | 16 | 8 | the rate a growing value keeps (an `f64`; 0 when it does not grow) |
//! | 24 | 8·k | the byte length of each table |
//! | then | | each table, a format-2 body, starting at the next multiple of 8 bytes (zero padding) |
//!
//! Every table has the same seed and key type (a probe hashes a key once);
//! they may differ in everything else. A value holds one table only when it
//! grows (a snapshot of a named filter that grows and has not grown yet): any
//! other single table is written as format 2.

use super::chain::Growth;
use super::dense::{self, Dense, DenseHeader};
use super::key_type::KeyType;
use super::layout::Params;
use super::layout::{check_header_start, FormatError, HASH_XXH3_64, MAGIC};
use super::sizing;
use super::table::{Full, OwnedFilter};

pub const FORMAT_V3: u8 = 3;
pub const V3_HEADER_BYTES: usize = 24;
/// Tables in one value (the count is one byte).
pub const MAX_VALUE_TABLES: usize = 255;
/// The largest expansion factor a filter that grows may have.
pub const MAX_EXPANSION: u32 = 64;

fn align8(x: usize) -> usize {
    x.div_ceil(8) * 8
}

/// Where table 0 starts in a value of `k` tables.
fn tables_start(k: usize) -> usize {
    align8(V3_HEADER_BYTES + 8 * k)
}

/// One table of a format-3 value: its header and where its body lies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Part {
    pub header: DenseHeader,
    pub start: usize,
    pub len: usize,
}

/// A parsed format-3 header.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiHeader {
    pub growth: Option<Growth>,
    pub parts: Vec<Part>,
}

impl MultiHeader {
    pub fn items(&self) -> u64 {
        self.parts.iter().map(|p| p.header.items).sum()
    }

    pub fn capacity(&self) -> u64 {
        self.parts.iter().map(|p| p.header.capacity).sum()
    }

    pub fn key(&self) -> KeyType {
        self.parts[0].header.key
    }

    pub fn seed(&self) -> u64 {
        self.parts[0].header.params.seed
    }

    pub fn slot_count(&self) -> u64 {
        self.parts.iter().map(|p| p.header.params.slot_count()).sum()
    }

    pub fn headers(&self) -> Vec<DenseHeader> {
        self.parts.iter().map(|p| p.header).collect()
    }

    /// The false-positive bound at the tables' loads now: the sum of theirs.
    pub fn fpp_bound(&self) -> f64 {
        bound(&self.headers(), false)
    }

    /// The bound once every table holds its capacity.
    pub fn fpp_at_capacity(&self) -> f64 {
        bound(&self.headers(), true)
    }
}

/// The false-positive bound of a filter of these tables: the sum of theirs,
/// at their loads now or (`at_capacity`) once each holds its capacity.
pub fn bound(headers: &[DenseHeader], at_capacity: bool) -> f64 {
    headers
        .iter()
        .map(|h| sizing::expected_fpp(&h.params, if at_capacity { h.capacity } else { h.items }))
        .sum::<f64>()
        .min(1.0)
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Checks a growth plan read from a value or a named filter's metadata.
pub fn check_growth(fpp: f64, expansion: u32) -> Result<Option<Growth>, FormatError> {
    if expansion == 0 {
        return if fpp.to_bits() == 0 {
            Ok(None)
        } else {
            Err(FormatError::BadParams("a rate is recorded for a filter that does not grow".into()))
        };
    }
    if expansion > MAX_EXPANSION {
        return Err(FormatError::BadParams(format!("expansion {expansion} is larger than {MAX_EXPANSION}")));
    }
    if !(fpp > 0.0 && fpp < 1.0) {
        return Err(FormatError::BadParams(format!("rate {fpp} of a filter that grows is not between 0 and 1")));
    }
    Ok(Some(Growth { fpp, expansion }))
}

/// Reads and validates a format-3 header and every table's header, and checks
/// that `bytes` is exactly as long as they describe. The buckets are checked by
/// [`validate_v3`].
pub fn parse_v3(bytes: &[u8]) -> Result<MultiHeader, FormatError> {
    check_header_start(bytes, V3_HEADER_BYTES, FORMAT_V3)?;
    if bytes[7] != 0 || bytes[12..16].iter().any(|&b| b != 0) {
        return Err(FormatError::ReservedNotZero);
    }
    let k = bytes[6] as usize;
    if k == 0 {
        return Err(FormatError::BadParams("a value of format 3 has at least one table".into()));
    }
    let growth = check_growth(f64::from_bits(le64(bytes, 16)), u32::from_le_bytes(bytes[8..12].try_into().unwrap()))?;
    if k == 1 && growth.is_none() {
        return Err(FormatError::BadParams("a value of one table that does not grow is written in format 2".into()));
    }
    let start = tables_start(k);
    if bytes.len() < start {
        return Err(FormatError::TooShort(bytes.len()));
    }
    if bytes[V3_HEADER_BYTES + 8 * k..start].iter().any(|&b| b != 0) {
        return Err(FormatError::PaddingNotZero);
    }
    let mut parts = Vec::with_capacity(k);
    let mut at = start;
    for i in 0..k {
        let len = le64(bytes, V3_HEADER_BYTES + 8 * i);
        if i > 0 {
            let padded = align8(at);
            if padded > bytes.len() || bytes[at..padded].iter().any(|&b| b != 0) {
                return Err(FormatError::PaddingNotZero);
            }
            at = padded;
        }
        if len > (bytes.len() - at) as u64 {
            return Err(FormatError::LengthMismatch { expected: at as u64 + len, actual: bytes.len() });
        }
        let len = len as usize;
        let header = dense::parse_v2(&bytes[at..at + len])?;
        if let Some(first) = parts.first() {
            let first: &Part = first;
            if header.params.seed != first.header.params.seed {
                return Err(FormatError::BadParams(format!("table {i} has another hash seed than table 0")));
            }
            if header.key != first.header.key {
                return Err(FormatError::BadParams(format!("table {i} records another key type than table 0")));
            }
        }
        parts.push(Part { header, start: at, len });
        at += len;
    }
    if at != bytes.len() {
        return Err(FormatError::LengthMismatch { expected: at as u64, actual: bytes.len() });
    }
    Ok(MultiHeader { growth, parts })
}

/// Checks every table's buckets (after [`parse_v3`]).
pub fn validate_v3(bytes: &[u8], h: &MultiHeader) -> Result<(), FormatError> {
    for p in &h.parts {
        Dense::new(&p.header.params, &bytes[p.start + dense::V2_HEADER_BYTES..p.start + p.len])
            .validate(p.header.items)?;
    }
    Ok(())
}

/// The tables of a parsed value, to probe.
pub fn tables<'a>(bytes: &'a [u8], h: &MultiHeader) -> Vec<Dense<'a>> {
    h.parts
        .iter()
        .map(|p| Dense::new(&p.header.params, &bytes[p.start + dense::V2_HEADER_BYTES..p.start + p.len]))
        .collect()
}

/// [`contains`] straight from the bytes of a value [`parse_v3`] accepted
/// before (a probe per row): no allocation, each table's header read as it
/// is reached.
pub fn contains_checked(bytes: &[u8], hash: u64) -> bool {
    let k = bytes[6] as usize;
    let mut spans = [(0usize, 0usize); MAX_VALUE_TABLES];
    let mut at = tables_start(k);
    for (i, span) in spans.iter_mut().enumerate().take(k) {
        at = align8(at);
        let len = le64(bytes, V3_HEADER_BYTES + 8 * i) as usize;
        *span = (at, len);
        at += len;
    }
    spans[..k].iter().rev().any(|&(start, len)| {
        let h = dense::parse_v2(&bytes[start..start + len]).expect("a value checked before");
        Dense::new(&h.params, &bytes[start + dense::V2_HEADER_BYTES..start + len]).contains(hash)
    })
}

/// [`contains`] for many hashes: each table answers them all, prefetching ahead.
pub fn contains_many(tables: &[Dense<'_>], hashes: &[u64], out: &mut [bool]) {
    out.iter_mut().for_each(|o| *o = false);
    let mut one = super::host::vec_filled(hashes.len(), false);
    for t in tables {
        t.contains_many(hashes, &mut one);
        out.iter_mut().zip(&one).for_each(|(o, &a)| *o |= a);
    }
}

/// Bytes of a format-3 value of tables with these parameters.
pub fn serialized_len(params: &[Params]) -> u64 {
    let mut at = tables_start(params.len()) as u64;
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            at = at.div_ceil(8) * 8;
        }
        at += dense::serialized_len(p);
    }
    at
}

/// Writes a format-3 value into `out` (zeroed, [`serialized_len`] bytes): the
/// header, then each table, whose bucket words `words(i)` gives.
pub fn encode_into<'w, I: Iterator<Item = u64> + 'w>(
    growth: Option<Growth>,
    headers: &[DenseHeader],
    mut words: impl FnMut(usize) -> I,
    out: &mut [u8],
) {
    let k = headers.len();
    assert!((1..=MAX_VALUE_TABLES).contains(&k));
    let params: Vec<Params> = headers.iter().map(|h| h.params).collect();
    assert_eq!(out.len() as u64, serialized_len(&params));
    out[0..4].copy_from_slice(&MAGIC);
    out[4] = FORMAT_V3;
    out[5] = HASH_XXH3_64;
    out[6] = k as u8;
    if let Some(g) = growth {
        out[8..12].copy_from_slice(&g.expansion.to_le_bytes());
        out[16..24].copy_from_slice(&g.fpp.to_bits().to_le_bytes());
    }
    let mut at = tables_start(k);
    for (i, h) in headers.iter().enumerate() {
        at = align8(at);
        let len = dense::serialized_len(&h.params) as usize;
        out[V3_HEADER_BYTES + 8 * i..V3_HEADER_BYTES + 8 * i + 8].copy_from_slice(&(len as u64).to_le_bytes());
        dense::encode_into(h, words(i), &mut out[at..at + len]);
        at += len;
    }
}

/// The header a table of bucket words gets in a value.
pub fn header_of(f: &OwnedFilter, key: KeyType) -> DenseHeader {
    let t = f.table();
    DenseHeader { params: t.params(), items: t.item_count(), capacity: f.capacity(), key }
}

/// Why two filters cannot be unioned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnionError {
    /// Different hash seeds: a key hashes differently in each.
    Seeds(String),
    /// The union would hold more tables than a value can.
    TooManyTables(usize),
}

/// The union of two filters given as their tables (bucket words): every key of
/// both. Each table of `b` is merged into a table of the result that has its
/// shape (the same hashing, fingerprints and bucket count; format 1's tables
/// fold a larger one onto a smaller one) and room for it; a table that fits no
/// table of the result is added to it as it is.
pub fn union(a: Vec<OwnedFilter>, b: Vec<OwnedFilter>) -> Result<Vec<OwnedFilter>, UnionError> {
    let seed = |f: &OwnedFilter| f.table().params().seed;
    if let (Some(x), Some(y)) = (a.first(), b.first()) {
        if seed(x) != seed(y) {
            return Err(UnionError::Seeds(format!("hash seeds differ ({:#x} and {:#x})", seed(x), seed(y))));
        }
    }
    let mut out = a;
    'tables: for tb in b {
        let pb = tb.table().params();
        for slot in out.iter_mut() {
            let pa = slot.table().params();
            if pa.mergeable_with(&pb).is_err() {
                continue;
            }
            // Into the one with fewer buckets (equal, under fastrange).
            let (into, from) = if pa.bucket_count <= pb.bucket_count { (&*slot, &tb) } else { (&tb, &*slot) };
            let merged = OwnedFilter::from_words(into.table().params(), into.capacity(), into.words());
            if merged.table().merge_from(&from.table()).is_ok() {
                *slot = merged;
                continue 'tables;
            }
        }
        out.push(tb);
    }
    if out.len() > MAX_VALUE_TABLES {
        return Err(UnionError::TooManyTables(out.len()));
    }
    Ok(out)
}

/// Inserts a key into a value's tables (newest first, then older ones that
/// have room); when all are full and the value grows, adds a table as a named
/// filter that grows would, if the value then still takes at most
/// `max_len` bytes ([`serialized_len`]). `Err(Full)` leaves the tables as they
/// were, with perhaps an empty table added.
pub fn insert(tables: &mut Vec<OwnedFilter>, growth: Option<Growth>, hash: u64, max_len: u64) -> Result<(), Full> {
    if tables.iter().rev().any(|t| t.table().insert(hash).is_ok()) {
        return Ok(());
    }
    let Some(g) = growth else { return Err(Full) };
    if tables.len() >= super::chain::MAX_TABLES {
        return Err(Full);
    }
    let before: Vec<(Params, u64)> = tables.iter().map(|t| (t.table().params(), t.capacity())).collect();
    let s = g.next(&before, super::layout::MAX_BUCKET_COUNT).map_err(|_| Full)?;
    let mut p = s.params;
    p.seed = before[0].0.seed;
    // Sized before anything is allocated: the next table of a large value can
    // be many times its size.
    let after: Vec<Params> = before.iter().map(|(q, _)| *q).chain([p]).collect();
    if serialized_len(&after) > max_len {
        return Err(Full);
    }
    let t = OwnedFilter::with_capacity(p, s.capacity);
    t.table().insert(hash)?;
    tables.push(t);
    Ok(())
}

/// Removes one copy of a key from the one table that holds its fingerprint;
/// removes nothing when several do (see [`super::chain::Deleted::Ambiguous`]).
pub fn delete(tables: &[OwnedFilter], hash: u64) -> super::chain::Deleted {
    use super::chain::Deleted;
    let mut holders = tables.iter().filter(|t| t.table().contains(hash));
    match (holders.next(), holders.next()) {
        (None, _) => Deleted::Absent,
        (Some(t), None) => {
            if t.table().delete(hash) {
                Deleted::Removed
            } else {
                Deleted::Absent
            }
        }
        _ => Deleted::Ambiguous,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::filter::layout::DEFAULT_SEED;
    use crate::filter::sizing::{size_for_items, DEFAULT_FPP};
    use crate::filter::test_rng::Rng;

    fn h(k: i64) -> u64 {
        crate::filter::hash::hash_i64(DEFAULT_SEED, k)
    }

    fn built(keys: std::ops::Range<i64>) -> OwnedFilter {
        let s = size_for_items(keys.end as u64 - keys.start as u64, DEFAULT_FPP, u64::MAX).unwrap();
        let f = OwnedFilter::with_capacity(s.params, s.capacity);
        let mut hs: Vec<u64> = keys.map(h).collect();
        let n = crate::filter::build::sort_dedup(&mut hs);
        f.table().bulk_insert_exclusive(&hs[..n]).unwrap();
        f
    }

    fn encode(growth: Option<Growth>, tables: &[OwnedFilter], key: KeyType) -> Vec<u8> {
        let headers: Vec<DenseHeader> = tables.iter().map(|t| header_of(t, key)).collect();
        let params: Vec<Params> = headers.iter().map(|h| h.params).collect();
        let mut out = vec![0u8; serialized_len(&params) as usize];
        encode_into(growth, &headers, |i| tables[i].words().collect::<Vec<_>>().into_iter(), &mut out);
        out
    }

    /// Seven filters built tightly for seven days of different sizes: their
    /// union answers every key of every day, and over a million absent keys its
    /// measured rate is within the bound it reports.
    #[test]
    fn a_union_of_seven_days_of_different_sizes_keeps_every_key() {
        let days: Vec<std::ops::Range<i64>> =
            (0..7).map(|d| d * 1_000_000..d * 1_000_000 + 20_000 + d * 7_919).collect();
        let mut acc: Vec<OwnedFilter> = vec![built(days[0].clone())];
        for d in &days[1..] {
            acc = union(acc, vec![built(d.clone())]).unwrap();
        }
        assert_eq!(acc.len(), 7, "tables of different sizes stay apart");
        let bytes = encode(None, &acc, KeyType::NONE);
        let mh = parse_v3(&bytes).unwrap();
        validate_v3(&bytes, &mh).unwrap();
        let ts = tables(&bytes, &mh);
        for d in &days {
            assert!(d.clone().all(|k| contains_checked(&bytes, h(k))), "false negative");
        }
        // Any table answering for a key is what the probe answers.
        assert!((0..100_000).all(|k| ts.iter().any(|t| t.contains(h(k))) == contains_checked(&bytes, h(k))));
        let n = 1_000_000i64;
        let fp = (0..n).filter(|&k| contains_checked(&bytes, h(10_000_000 + k))).count();
        let rate = fp as f64 / n as f64;
        let bound = mh.fpp_bound();
        // The bound is an expectation's upper bound; the measured rate scatters
        // around the true rate by about sqrt(rate / n) (here 1e-4, 1%).
        assert!(rate <= bound + 3.0 * (bound / n as f64).sqrt(), "rate {rate} over bound {bound}");
        assert!(bound > 6.0 * 0.0015 && bound < 7.0 * 0.002, "{bound}");
        let mut many = vec![false; 1000];
        let hs: Vec<u64> = (0..1000).map(|k| h(k * 3)).collect();
        contains_many(&ts, &hs, &mut many);
        assert!(hs.iter().zip(&many).all(|(&x, &m)| m == contains_checked(&bytes, x)));
    }

    #[test]
    fn tables_of_one_shape_that_fit_merge_into_one() {
        let s = sizing::size_for_capacity(10_000, DEFAULT_FPP, u64::MAX).unwrap();
        let a = OwnedFilter::with_capacity(s.params, s.capacity);
        let b = OwnedFilter::with_capacity(s.params, s.capacity);
        for k in 0..3000 {
            a.table().insert(h(k)).unwrap();
            b.table().insert(h(k + 5000)).unwrap();
        }
        let u = union(vec![a], vec![b]).unwrap();
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].table().item_count(), 6000);
        // Too full to merge: kept apart.
        let c = OwnedFilter::with_capacity(s.params, s.capacity);
        for k in 0..9000 {
            c.table().insert(h(k + 100_000)).unwrap();
        }
        let u = union(u, vec![c]).unwrap();
        assert_eq!(u.len(), 2);
        assert!((0..3000).all(|k| u.iter().any(|t| t.table().contains(h(k)))));
        let other = Params { seed: 1, ..s.params };
        assert!(matches!(union(u, vec![OwnedFilter::new(other)]), Err(UnionError::Seeds(_))));
    }

    #[test]
    fn a_growing_value_adds_tables_and_round_trips() {
        let g = Growth { fpp: DEFAULT_FPP, expansion: 2 };
        let first = g.first(100, u64::MAX).unwrap();
        let mut ts = vec![OwnedFilter::with_capacity(first.params, first.capacity)];
        for k in 0..5000 {
            insert(&mut ts, Some(g), h(k), u64::MAX).unwrap();
        }
        assert!(ts.len() >= 5);
        assert!((0..5000).all(|k| ts.iter().any(|t| t.table().contains(h(k)))));
        let bytes = encode(Some(g), &ts, KeyType { kind: crate::filter::key_type::KeyKind::Builtin, oid: 20 });
        let mh = parse_v3(&bytes).unwrap();
        assert_eq!(mh.growth, Some(g));
        assert_eq!(mh.items(), 5000);
        assert!(mh.fpp_at_capacity() <= DEFAULT_FPP);
        validate_v3(&bytes, &mh).unwrap();
        assert_eq!(delete(&ts, h(3)), super::super::chain::Deleted::Removed);
        // Without growth a full single table refuses.
        let mut fixed = vec![OwnedFilter::with_capacity(first.params, first.capacity)];
        let refused = (0..1000).filter(|&k| insert(&mut fixed, None, h(k), u64::MAX).is_err()).count();
        assert!(refused > 0 && fixed.len() == 1);
    }

    #[test]
    fn malformed_values_are_refused() {
        let mut r = Rng(3);
        let a = built(0..500);
        let b = built(1000..1700);
        let good = encode(None, &[a, b], KeyType::NONE);
        assert!(parse_v3(&good).is_ok());
        // Every truncation, and every single-byte change of the headers.
        for cut in 0..good.len() {
            assert!(parse_v3(&good[..cut]).is_err(), "truncated to {cut}");
        }
        let mh = parse_v3(&good).unwrap();
        let header_bytes: Vec<usize> =
            (0..mh.parts[0].start).chain(mh.parts[1].start..mh.parts[1].start + dense::V2_HEADER_BYTES).collect();
        for &at in &header_bytes {
            let mut bad = good.clone();
            bad[at] ^= 1 << (r.next() % 8);
            if let Ok(m) = parse_v3(&bad) {
                // Changes that keep the headers valid (item counts, capacities,
                // fingerprint bits) must fail bucket validation or stay
                // consistent.
                let _ = validate_v3(&bad, &m);
            }
        }
        let mut one = good.clone();
        one[6] = 1;
        assert!(parse_v3(&one).is_err());
        let mut zero = good.clone();
        zero[6] = 0;
        assert!(parse_v3(&zero).is_err());
        let mut grow = good.clone();
        grow[8] = 200;
        assert!(parse_v3(&grow).is_err(), "expansion without a rate");
    }
}
