//! The file that carries durable filters across a restart (`cuckoo_filters.dat`
//! in the data directory): its layout, encoding and strict decoding. No pgrx.
//!
//! Two kinds: `Saved` holds every durable filter's contents as of `stamp` (a
//! WAL position: every durable change logged before it is in the file, none
//! after it), written when durable changes are frozen (shutdown, end of
//! recovery); `Live` holds only the filters' names and parameters and says
//! that the filters are being changed and logged, so the file's contents are
//! not current (written when durable changes open). A `Live` file restores
//! placeholders, which recovery then fills from the WAL; any left unfilled are
//! reported as needing a reload, never silently missing.
//!
//! Layout (little-endian): magic, version (u32), kind (u32), stamp (u64), count
//! (u64), then per filter: generation, reload reason, metadata (as in WAL
//! records), item count, a byte saying whether bucket words follow, the words;
//! finally an xxh3-64 checksum of everything before it.

#[cfg(test)]
use super::record::Writer;
use super::record::{Meta, Reader};

const MAGIC: u64 = 0x5653_6f6f_6b63_7563; // "cuckooSV"
const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Saved = 1,
    Live = 2,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SavedFilter {
    pub gen: u64,
    pub reason: u64,
    pub meta: Meta,
    pub items: u64,
    /// The bucket words (a `Saved` file's usable filters only).
    pub words: Option<Vec<u64>>,
}

#[cfg(test)]
pub fn encode(kind: FileKind, stamp: u64, filters: &[SavedFilter]) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.u64(MAGIC).u32(VERSION).u32(kind as u32).u64(stamp).u64(filters.len() as u64);
    for f in filters {
        w.u64(f.gen).u64(f.reason).meta(&f.meta).u64(f.items);
        match &f.words {
            Some(words) => {
                w.u8(1);
                w.0.reserve(words.len() * 8);
                for &x in words {
                    w.u64(x);
                }
            }
            None => {
                w.u8(0);
            }
        }
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&w.0);
    w.u64(sum);
    w.0
}

/// Decodes a file; any damage (checksum, lengths, parameters, item counts that
/// do not match the words) is an error naming it.
pub fn decode(bytes: &[u8]) -> Result<(FileKind, u64, Vec<SavedFilter>), String> {
    if bytes.len() < 8 {
        return Err("file is truncated".into());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    if xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(sum.try_into().unwrap()) {
        return Err("checksum mismatch (the file is damaged or truncated)".into());
    }
    let mut r = Reader { b: body, what: "saved filter" };
    if r.u64()? != MAGIC {
        return Err("not a cuckoo filter file".into());
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!("file version {version} is not supported (expected {VERSION})"));
    }
    let kind = match r.u32()? {
        1 => FileKind::Saved,
        2 => FileKind::Live,
        k => return Err(format!("unknown file kind {k}")),
    };
    let stamp = r.u64()?;
    let count = r.u64()?;
    let mut out = Vec::new();
    for _ in 0..count {
        let (gen, reason) = (r.u64()?, r.u64()?);
        let meta = r.meta()?;
        let items = r.u64()?;
        let words = match r.u8()? {
            0 => None,
            1 => {
                let n = meta.params.bucket_count as usize;
                let raw = r.take(n.checked_mul(8).ok_or("bucket count overflows")?)?;
                let words: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
                let counted = crate::filter::Geometry::new(&meta.params).occupied_total(words.iter().copied());
                if counted != items {
                    return Err(format!(
                        "filter \"{}\" holds {counted} fingerprints, its header says {items}",
                        meta.name
                    ));
                }
                Some(words)
            }
            b => return Err(format!("bad contents flag {b}")),
        };
        out.push(SavedFilter { gen, reason, meta, items, words });
    }
    r.end()?;
    Ok((kind, stamp, out))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::filter::{Mapping, Params};

    fn filters() -> Vec<SavedFilter> {
        let params = Params {
            fingerprint_bits: 12,
            slots_per_bucket: 4,
            bucket_count: 10,
            seed: 7,
            mapping: Mapping::Fastrange,
        };
        let meta = |name: &str| Meta {
            db: 5,
            owner: 10,
            readers: 0,
            capacity: 30,
            fpp: 0.002,
            params,
            name: name.into(),
            key: crate::filter::KeyType::NONE,
            growth: None,
            more: Vec::new(),
            queue: crate::region::record::QueueCounts::default(),
        };
        let t = crate::filter::OwnedFilter::new(params);
        for h in [1u64, 2, 3, 99_999_999_999] {
            t.table().insert(h.wrapping_mul(0x9E37_79B9_7F4A_7C15)).unwrap();
        }
        let words: Vec<u64> = t.words().collect();
        vec![
            SavedFilter { gen: 77, reason: 0, meta: meta("a"), items: 4, words: Some(words) },
            SavedFilter { gen: 78, reason: 2, meta: meta("b"), items: 0, words: None },
        ]
    }

    #[test]
    fn files_round_trip_and_damage_is_refused() {
        let f = filters();
        let bytes = encode(FileKind::Saved, 1234, &f);
        assert_eq!(decode(&bytes).unwrap(), (FileKind::Saved, 1234, f));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err());
        }
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode(&b).is_err(), "flip at {i}");
        }
    }
}
