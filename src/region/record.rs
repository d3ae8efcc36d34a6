//! The WAL records of durable named filters: their kinds and byte layouts, with
//! encoding and strict decoding (a record whose length or fields do not match its
//! kind is refused with a message, never applied). No pgrx here: the glue in
//! `sql::named::log` writes them and `sql::named::replay` replays them.
//!
//! Every record is little-endian and fixed-layout, so the same bytes decode on
//! any server that runs this release. A filter is named in records by its
//! generation (the end of the record that created or published its contents), so
//! a record logged for contents that a later publish replaced can never touch the
//! new contents during replay.

use std::ffi::CStr;

use super::registry::NewFilter;
use super::registry::TableSpec;
use crate::filter::KeyType;
use crate::filter::{Growth, MAX_TABLES};
use crate::filter::{Mapping, Params};

/// Set in a metadata name-length byte when the key type follows the name.
pub(crate) const KEY_FOLLOWS: u8 = 0x80;
/// Set in a metadata name-length byte when a chain follows (after the key
/// type, if any): the growth plan and the tables after table 0 (0.7.0).
pub(crate) const CHAIN_FOLLOWS: u8 = 0x40;
/// Bytes of the chain part's fixed start and of each table in it.
pub(crate) const CHAIN_FIXED_BYTES: usize = 4 + 8 + 1;
/// In the chain's count of tables: a bound filter's [`QueueCounts`] follow
/// the tables (0.13.0).
pub(crate) const QUEUE_FOLLOWS: u8 = 0x80;
/// Bytes of [`QueueCounts`] as written.
pub(crate) const QUEUE_BYTES: usize = 4 * 8;
pub(crate) const CHAIN_TABLE_BYTES: usize = 8 + 3 + 8;

/// A record's kind: the high four bits of `xl_info` (the low four are
/// PostgreSQL's). All sixteen values are taken; a new record is a sub-kind of
/// [`Kind::Ext`] ([`ExtKind`]: the first byte of its body, 254 values left),
/// so the kind space needs no further decision.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An empty filter: its metadata.
    Create = 0x00,
    /// The start of a filter's full contents: metadata and the word count.
    ContentBegin = 0x10,
    /// A run of bucket words of the contents begun at `begin`.
    ContentChunk = 0x20,
    /// The end of the contents begun at `begin`.
    ContentEnd = 0x30,
    /// An insert about to take effect (its hash).
    Insert = 0x40,
    /// The insert logged at `insert_end` found the filter full and changed nothing.
    Refused = 0x50,
    /// A delete that removed a copy.
    Delete = 0x60,
    Drop = 0x70,
    /// The role allowed to look the filter up.
    Grant = 0x80,
    /// A checkpoint image pass begins: every durable filter's contents follow.
    PassBegin = 0x90,
    /// The image pass that began at `begin` is complete.
    PassDone = 0xA0,
    /// A filter that must be published again (its contents were lost): logged
    /// by image passes so that it survives as such.
    Placeholder = 0xB0,
    /// A checkpoint cut of one filter: every change of it logged before this
    /// record is in the files its cut writes, none after (see `sql::named::cut`).
    Cut = 0xC0,
    /// The files of a dropped or replaced generation are about to be removed.
    Discard = 0xD0,
    /// The first insert into a filter whose key type was pending fixed it.
    KeyType = 0xE0,
    /// The last kind: its body starts with a sub-kind byte ([`ExtKind`]), so that
    /// later records need no kind of their own (0.10.0).
    Ext = 0xF0,
}

impl Kind {
    /// Every kind, in the order of its value.
    pub const ALL: [Kind; 16] = [
        Kind::Create,
        Kind::ContentBegin,
        Kind::ContentChunk,
        Kind::ContentEnd,
        Kind::Insert,
        Kind::Refused,
        Kind::Delete,
        Kind::Drop,
        Kind::Grant,
        Kind::PassBegin,
        Kind::PassDone,
        Kind::Placeholder,
        Kind::Cut,
        Kind::Discard,
        Kind::KeyType,
        Kind::Ext,
    ];

    /// The kind in `xl_info`'s high four bits (every value is one).
    pub fn of_info(info: u8) -> Kind {
        Kind::ALL[(info >> 4) as usize]
    }

    /// The kind's name, as `pg_waldump` shows it.
    pub fn name(self) -> &'static CStr {
        match self {
            Kind::Create => c"CREATE",
            Kind::ContentBegin => c"CONTENT_BEGIN",
            Kind::ContentChunk => c"CONTENT_CHUNK",
            Kind::ContentEnd => c"CONTENT_END",
            Kind::Insert => c"INSERT",
            Kind::Refused => c"REFUSED",
            Kind::Delete => c"DELETE",
            Kind::Drop => c"DROP",
            Kind::Grant => c"GRANT",
            Kind::PassBegin => c"PASS_BEGIN",
            Kind::PassDone => c"PASS_DONE",
            Kind::Placeholder => c"PLACEHOLDER",
            Kind::Cut => c"CUT",
            Kind::Discard => c"DISCARD",
            Kind::KeyType => c"KEY_TYPE",
            Kind::Ext => c"EXT",
        }
    }
}

/// Sub-kinds of [`Kind::Ext`] records (the body's first byte).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtKind {
    /// A checkpoint pass is complete: every durable filter's files cover every
    /// change logged before its `CUT` of this pass (or all its changes); the
    /// live durable generations and the stamp of each one's last file follow.
    Pass = 1,
    /// Deletes of a bound filter's keys follow whose row versions were deleted
    /// by transactions up to `xid`: a standby first resolves the conflict with
    /// its queries that may still see such versions, as it does for a heap
    /// page's pruning (0.13.0).
    Horizon = 2,
    /// A bound durable filter's account of its queued deletes changed by
    /// the counts that follow (0.13.0; see [`QueueCounts`]).
    Queue = 3,
}

impl ExtKind {
    /// The sub-kind a body's first byte names, if any.
    pub fn of_byte(b: u8) -> Option<ExtKind> {
        [ExtKind::Pass, ExtKind::Horizon, ExtKind::Queue].into_iter().find(|k| *k as u8 == b)
    }

    pub fn name(self) -> &'static str {
        match self {
            ExtKind::Pass => "PASS",
            ExtKind::Horizon => "HORIZON",
            ExtKind::Queue => "QUEUE",
        }
    }
}

/// Why contents are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// `cf_publish`: new contents, a new generation.
    Publish = 1,
    /// A checkpoint image of the contents of generation `gen` (0.4.0's passes).
    Image = 2,
    /// The contents of generation `gen` as of its cut ending at `cut`, logged
    /// after that `CUT` (writers go on meanwhile); chunks skip all-zero runs.
    Cut = 3,
}

/// What a filter is, as logged with its creation or contents.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    pub db: u32,
    pub owner: u32,
    pub readers: u64,
    pub capacity: u64,
    pub fpp: f64,
    pub params: Params,
    pub name: String,
    /// The type of its keys (0.5.0's records and files record none).
    pub key: KeyType,
    /// How it grows (records before 0.7.0: never).
    pub growth: Option<Growth>,
    /// Its tables after table 0 (whose shape is `params` and `capacity`).
    pub more: Vec<TableSpec>,
    /// A bound filter's account of its queued deletes (0.13.0; zero for
    /// other filters, and written only when not zero).
    pub queue: QueueCounts,
}

/// A bound durable filter's account of the deletes of its keys that waited
/// in the shared queue (`cf_bind`), carried by its records and files so that
/// the deletes a restart or crash loses with the queue are counted: each is
/// a key left in the filter (a false positive). Totals since the generation
/// was made, each changed only by a `QUEUE` record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Deletes that went into the queue.
    pub queued: u64,
    /// Queued deletes taken out of it: applied, refused or dropped because
    /// their transaction aborted.
    pub settled: u64,
    /// Deletes that found the queue full: their keys stay.
    pub dropped: u64,
    /// Queued deletes refused when applied (a saturated pair, or a copy the
    /// filter could not place): their keys stay.
    pub refused: u64,
}

impl QueueCounts {
    pub fn is_zero(&self) -> bool {
        *self == QueueCounts::default()
    }

    /// The four totals in their order on disk and in shared memory.
    pub fn words(&self) -> [u64; 4] {
        [self.queued, self.settled, self.dropped, self.refused]
    }

    /// The counts from [`Self::words`].
    pub fn from_words([queued, settled, dropped, refused]: [u64; 4]) -> QueueCounts {
        QueueCounts { queued, settled, dropped, refused }
    }

    /// Deletes queued and not yet taken out, as these counts say.
    pub fn outstanding(&self) -> u64 {
        self.queued.saturating_sub(self.settled)
    }
}

impl Meta {
    /// The metadata logged for new filter `spec` with tables `tables`.
    pub fn of(spec: &NewFilter<'_>, readers: u64, tables: &[TableSpec]) -> Meta {
        Meta {
            db: spec.db,
            owner: spec.owner,
            readers,
            capacity: tables[0].capacity,
            fpp: spec.fpp,
            params: tables[0].params,
            name: spec.name.to_string(),
            key: spec.key,
            growth: spec.growth,
            more: tables[1..].to_vec(),
            queue: QueueCounts::default(),
        }
    }

    /// Every table, table 0 first.
    pub fn tables(&self) -> Vec<TableSpec> {
        std::iter::once(TableSpec { params: self.params, capacity: self.capacity })
            .chain(self.more.iter().copied())
            .collect()
    }

    /// Bucket words of all tables.
    pub fn word_count(&self) -> u64 {
        self.params.bucket_count + self.more.iter().map(|t| t.params.bucket_count).sum::<u64>()
    }

    /// Checkpoint units of all tables (numbered table after table).
    pub fn unit_count(&self) -> u64 {
        self.tables().iter().map(|t| super::durable::unit_count(t.params.bucket_count)).sum()
    }

    /// The table unit `u` is in, where the unit lies among all tables' words
    /// (table after table), and how many words it has.
    pub fn unit_span(&self, u: u64) -> Option<(usize, u64, usize)> {
        let (mut first, mut word_at) = (0u64, 0u64);
        for (i, t) in self.tables().into_iter().enumerate() {
            let m = t.params.bucket_count;
            let n = super::durable::unit_count(m);
            if u < first + n {
                let at = (u - first) * super::durable::UNIT_WORDS;
                return Some((i, word_at + at, (m - at).min(super::durable::UNIT_WORDS) as usize));
            }
            first += n;
            word_at += m;
        }
        None
    }

    /// The durable filter this metadata describes, to create.
    pub fn new_filter(&self) -> NewFilter<'_> {
        NewFilter {
            db: self.db,
            owner: self.owner,
            name: &self.name,
            capacity: self.capacity,
            fpp: self.fpp,
            durable: true,
            key: self.key,
            growth: self.growth,
        }
    }

    /// The lengths of the variable parts after the fixed metadata, given its
    /// name-length byte: the name and key type, then (if a chain follows) the
    /// chain's fixed start, whose last byte is the count of its tables.
    pub(crate) fn tail_len(len_byte: u8) -> (usize, usize) {
        let name =
            (len_byte & !(KEY_FOLLOWS | CHAIN_FOLLOWS)) as usize + if len_byte & KEY_FOLLOWS != 0 { 5 } else { 0 };
        (name, if len_byte & CHAIN_FOLLOWS != 0 { CHAIN_FIXED_BYTES } else { 0 })
    }
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Create(Meta),
    ContentBegin {
        kind: ContentKind,
        gen: u64,
        cut: u64,
        meta: Meta,
    },
    ContentChunk {
        begin: u64,
        offset: u64,
        words: Vec<u64>,
    },
    ContentEnd {
        begin: u64,
        items: u64,
    },
    Insert {
        gen: u64,
        hash: u64,
    },
    Refused {
        gen: u64,
        hash: u64,
        insert_end: u64,
    },
    Delete {
        gen: u64,
        hash: u64,
    },
    /// Inserts of a batch, about to take effect (kind `INSERT` with more than
    /// one hash; 0.8.0).
    InsertMany {
        gen: u64,
        hashes: Vec<u64>,
    },
    /// Inserts of the batch logged at `insert_end` that changed nothing, by
    /// their position in it (kind `REFUSED`, longer than one refusal).
    RefusedMany {
        gen: u64,
        insert_end: u64,
        refused: Vec<(u32, u64)>,
    },
    /// Deletes of a batch that removed a copy each (kind `DELETE` with more
    /// than one hash).
    DeleteMany {
        gen: u64,
        hashes: Vec<u64>,
    },
    Drop {
        gen: u64,
    },
    Grant {
        gen: u64,
        readers: u64,
    },
    PassBegin,
    PassDone {
        begin: u64,
        filters: u64,
    },
    Placeholder {
        gen: u64,
        reason: u64,
        meta: Meta,
    },
    /// `base`: the cut writes a whole base file; `logged`: its contents follow
    /// in the WAL (a compaction: the filter's older files are about to go).
    Cut {
        gen: u64,
        base: bool,
        logged: bool,
    },
    Discard {
        gen: u64,
    },
    KeyType {
        gen: u64,
        key: KeyType,
    },
    /// A checkpoint pass is complete (0.10.0; see `sql::named::cut`): every
    /// change logged before `began` (the WAL position when the pass began) is
    /// in the durable filters' files; `frozen` when durable changes are
    /// frozen until the next start (the pass before a shutdown checkpoint);
    /// `live`: each live durable generation and the stamp of its last file
    /// (0: none yet).
    Pass {
        frozen: bool,
        began: u64,
        live: Vec<(u64, u64)>,
    },
    /// A bound filter's next deletes (of generation `gen`, in database `db`)
    /// remove keys of row versions deleted by transactions up to `xid`.
    Horizon {
        gen: u64,
        db: u32,
        xid: u32,
    },
    /// Bound durable filter `gen`'s account of its queued deletes grows by
    /// `add` (0.13.0).
    Queue {
        gen: u64,
        add: QueueCounts,
    },
}

/// Hashes per batch record at most (64 kB): a batched call logs a record per
/// this many keys.
pub const MANY_MAX: usize = 8192;

/// Bucket words per content chunk record (256 kB).
pub const CHUNK_WORDS: usize = 32 * 1024;

pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn queue(&mut self, q: &QueueCounts) -> &mut Self {
        q.words().iter().fold(self, |w, &v| w.u64(v))
    }
    pub(crate) fn meta(&mut self, m: &Meta) -> &mut Self {
        self.u32(m.db).u32(m.owner).u64(m.readers).u64(m.capacity).u64(m.fpp.to_bits());
        let p = &m.params;
        self.u64(p.bucket_count).u64(p.seed).u8(p.fingerprint_bits).u8(p.slots_per_bucket).u8(p.mapping as u8);
        // A name is at most 63 bytes: the length byte's top bit says that the
        // key type follows the name (kind u8, OID u32). Metadata that records
        // none is written as 0.5.0 wrote it.
        let recorded = m.key.is_recorded();
        // Likewise bit 6 says that a chain follows: metadata of a filter of
        // one table that does not grow is written as 0.6.0 wrote it.
        // A bound filter's queue counts follow the tables (flagged in their
        // count) when not zero.
        let queue = !m.queue.is_zero();
        let chain = m.growth.is_some() || !m.more.is_empty() || queue;
        self.u8(m.name.len() as u8 | if recorded { KEY_FOLLOWS } else { 0 } | if chain { CHAIN_FOLLOWS } else { 0 });
        self.0.extend_from_slice(m.name.as_bytes());
        if recorded {
            self.u8(m.key.kind as u8).u32(m.key.oid);
        }
        if chain {
            let (x, f) = m.growth.map_or((0, 0), |g| (g.expansion, g.fpp.to_bits()));
            self.u32(x).u64(f).u8(m.more.len() as u8 | if queue { QUEUE_FOLLOWS } else { 0 });
            for t in &m.more {
                let p = &t.params;
                self.u64(p.bucket_count)
                    .u8(p.fingerprint_bits)
                    .u8(p.slots_per_bucket)
                    .u8(p.mapping as u8)
                    .u64(t.capacity);
            }
            if queue {
                self.queue(&m.queue);
            }
        }
        self
    }
}

pub(crate) struct Reader<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err(format!("{} record is truncated", self.what));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub(crate) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn queue(&mut self) -> Result<QueueCounts, String> {
        Ok(QueueCounts::from_words([self.u64()?, self.u64()?, self.u64()?, self.u64()?]))
    }
    pub(crate) fn meta(&mut self) -> Result<Meta, String> {
        let (db, owner, readers, capacity, fpp) =
            (self.u32()?, self.u32()?, self.u64()?, self.u64()?, f64::from_bits(self.u64()?));
        let (bucket_count, seed, f, b, mapping) = (self.u64()?, self.u64()?, self.u8()?, self.u8()?, self.u8()?);
        let mapping = Mapping::from_code(mapping)
            .ok_or_else(|| format!("{} record has an unknown bucket mapping {mapping}", self.what))?;
        let params = Params { fingerprint_bits: f, slots_per_bucket: b, bucket_count, seed, mapping };
        params.check().map_err(|e| format!("{} record has bad filter parameters: {e}", self.what))?;
        // A union's rate is the sum of its tables' bounds, capped at 1.
        if !(fpp > 0.0 && fpp <= 1.0) || capacity == 0 {
            return Err(format!("{} record has a bad capacity or fpp", self.what));
        }
        let n = self.u8()?;
        let (n, key_follows, chain_follows) =
            ((n & !(KEY_FOLLOWS | CHAIN_FOLLOWS)) as usize, n & KEY_FOLLOWS != 0, n & CHAIN_FOLLOWS != 0);
        let name = std::str::from_utf8(self.take(n)?)
            .map_err(|_| format!("{} record has a name that is not UTF-8", self.what))?;
        if name.is_empty() || n > super::registry::MAX_NAME_BYTES || name.contains('\0') {
            return Err(format!("{} record has a bad filter name", self.what));
        }
        let key = if key_follows {
            let (kind, oid) = (self.u8()?, self.u32()?);
            match KeyType::from_named_parts(kind, oid) {
                Ok(key) if key.is_recorded() => key,
                _ => return Err(format!("{} record has a bad key type", self.what)),
            }
        } else {
            KeyType::NONE
        };
        let (mut growth, mut more, mut queue) = (None, Vec::new(), QueueCounts::default());
        if chain_follows {
            let (x, f, count) = (self.u32()?, self.u64()?, self.u8()?);
            let (count, queue_follows) = ((count & !QUEUE_FOLLOWS) as usize, count & QUEUE_FOLLOWS != 0);
            growth = crate::filter::v3::check_growth(f64::from_bits(f), x)
                .map_err(|e| format!("{} record has a bad growth plan: {e}", self.what))?;
            if count + 1 > MAX_TABLES {
                return Err(format!("{} record has {} tables, more than {MAX_TABLES}", self.what, count + 1));
            }
            for _ in 0..count {
                let (bucket_count, f, b, mapping, capacity) =
                    (self.u64()?, self.u8()?, self.u8()?, self.u8()?, self.u64()?);
                let mapping = Mapping::from_code(mapping)
                    .ok_or_else(|| format!("{} record has an unknown bucket mapping {mapping}", self.what))?;
                let p = Params { fingerprint_bits: f, slots_per_bucket: b, bucket_count, seed, mapping };
                p.check().map_err(|e| format!("{} record has bad table parameters: {e}", self.what))?;
                if capacity == 0 || capacity > p.slot_count() {
                    return Err(format!("{} record has a table capacity {capacity} out of range", self.what));
                }
                more.push(TableSpec { params: p, capacity });
            }
            if queue_follows {
                queue = self.queue()?;
            }
            if growth.is_none() && more.is_empty() && queue.is_zero() {
                return Err(format!("{} record has an empty chain part", self.what));
            }
        }
        Ok(Meta { db, owner, readers, capacity, fpp, params, name: name.to_string(), key, growth, more, queue })
    }
    pub(crate) fn end(self) -> Result<(), String> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(format!("{} record has {} bytes too many", self.what, self.b.len()))
        }
    }
}

impl Record {
    /// The record's kind (for `xl_info`) and body.
    pub fn encode(&self) -> (Kind, Vec<u8>) {
        let mut w = Writer(Vec::with_capacity(64));
        let k = match self {
            Record::Create(m) => {
                w.meta(m);
                Kind::Create
            }
            Record::ContentBegin { kind: ck, gen, cut, meta } => {
                w.u8(*ck as u8).u64(*gen);
                if *ck == ContentKind::Cut {
                    w.u64(*cut);
                }
                w.meta(meta);
                Kind::ContentBegin
            }
            Record::ContentChunk { begin, offset, words } => {
                w.u64(*begin).u64(*offset);
                for &x in words {
                    w.u64(x);
                }
                Kind::ContentChunk
            }
            Record::ContentEnd { begin, items } => {
                w.u64(*begin).u64(*items);
                Kind::ContentEnd
            }
            Record::Insert { gen, hash } => {
                w.u64(*gen).u64(*hash);
                Kind::Insert
            }
            Record::Refused { gen, hash, insert_end } => {
                w.u64(*gen).u64(*hash).u64(*insert_end);
                Kind::Refused
            }
            Record::Delete { gen, hash } => {
                w.u64(*gen).u64(*hash);
                Kind::Delete
            }
            Record::InsertMany { gen, hashes } | Record::DeleteMany { gen, hashes } => {
                w.u64(*gen);
                for &h in hashes {
                    w.u64(h);
                }
                if matches!(self, Record::InsertMany { .. }) {
                    Kind::Insert
                } else {
                    Kind::Delete
                }
            }
            Record::RefusedMany { gen, insert_end, refused } => {
                w.u64(*gen).u64(*insert_end);
                for &(at, h) in refused {
                    w.u32(at).u64(h);
                }
                Kind::Refused
            }
            Record::Drop { gen } => {
                w.u64(*gen);
                Kind::Drop
            }
            Record::Grant { gen, readers } => {
                w.u64(*gen).u64(*readers);
                Kind::Grant
            }
            Record::KeyType { gen, key } => {
                w.u64(*gen).u8(key.kind as u8).u32(key.oid);
                Kind::KeyType
            }
            Record::PassBegin => Kind::PassBegin,
            Record::PassDone { begin, filters } => {
                w.u64(*begin).u64(*filters);
                Kind::PassDone
            }
            Record::Placeholder { gen, reason, meta } => {
                w.u64(*gen).u64(*reason).meta(meta);
                Kind::Placeholder
            }
            Record::Cut { gen, base, logged } => {
                w.u64(*gen).u8(*base as u8 | (*logged as u8) << 1);
                Kind::Cut
            }
            Record::Discard { gen } => {
                w.u64(*gen);
                Kind::Discard
            }
            Record::Pass { frozen, began, live } => {
                w.u8(ExtKind::Pass as u8).u8(*frozen as u8).u64(*began).u32(live.len() as u32);
                for &(gen, tip) in live {
                    w.u64(gen).u64(tip);
                }
                Kind::Ext
            }
            Record::Horizon { gen, db, xid } => {
                w.u8(ExtKind::Horizon as u8).u64(*gen).u32(*db).u32(*xid);
                Kind::Ext
            }
            Record::Queue { gen, add } => {
                w.u8(ExtKind::Queue as u8).u64(*gen).queue(add);
                Kind::Ext
            }
        };
        (k, w.0)
    }

    /// Decodes a record of kind `k` (the high bits of `xl_info`).
    pub fn decode(k: Kind, body: &[u8]) -> Result<Record, String> {
        let what = k.name().to_str().unwrap_or("unknown");
        let mut r = Reader { b: body, what };
        let rec = match k {
            Kind::Create => Record::Create(r.meta()?),
            Kind::ContentBegin => {
                let ck = match r.u8()? {
                    1 => ContentKind::Publish,
                    2 => ContentKind::Image,
                    3 => ContentKind::Cut,
                    other => return Err(format!("CONTENT_BEGIN record has an unknown content kind {other}")),
                };
                let gen = r.u64()?;
                let cut = if ck == ContentKind::Cut { r.u64()? } else { 0 };
                Record::ContentBegin { kind: ck, gen, cut, meta: r.meta()? }
            }
            Kind::ContentChunk => {
                let (begin, offset) = (r.u64()?, r.u64()?);
                if !r.b.len().is_multiple_of(8) || r.b.is_empty() || r.b.len() / 8 > CHUNK_WORDS {
                    return Err(format!(
                        "CONTENT_CHUNK record carries {} bytes, not 1 to {CHUNK_WORDS} words",
                        r.b.len()
                    ));
                }
                let words = r.b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
                r.b = &[];
                Record::ContentChunk { begin, offset, words }
            }
            Kind::ContentEnd => Record::ContentEnd { begin: r.u64()?, items: r.u64()? },
            // One hash (as every release wrote) or a batch of them (0.8.0).
            Kind::Insert | Kind::Delete => {
                let gen = r.u64()?;
                if !r.b.len().is_multiple_of(8) || r.b.is_empty() || r.b.len() / 8 > MANY_MAX {
                    return Err(format!(
                        "{what} record carries {} bytes of hashes, not 1 to {MANY_MAX} hashes",
                        r.b.len()
                    ));
                }
                let mut hashes: Vec<u64> =
                    r.b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
                r.b = &[];
                match (k, hashes.len()) {
                    (Kind::Insert, 1) => Record::Insert { gen, hash: hashes.pop().unwrap() },
                    (Kind::Insert, _) => Record::InsertMany { gen, hashes },
                    (_, 1) => Record::Delete { gen, hash: hashes.pop().unwrap() },
                    _ => Record::DeleteMany { gen, hashes },
                }
            }
            // One refusal (24 bytes) or a batch's: 16 bytes, then 12 per refusal.
            Kind::Refused if body.len() == 24 => {
                Record::Refused { gen: r.u64()?, hash: r.u64()?, insert_end: r.u64()? }
            }
            Kind::Refused => {
                let (gen, insert_end) = (r.u64()?, r.u64()?);
                if !r.b.len().is_multiple_of(12) || r.b.is_empty() || r.b.len() / 12 > MANY_MAX {
                    return Err(format!(
                        "REFUSED record carries {} bytes of refusals, not 1 to {MANY_MAX} of 12 bytes",
                        r.b.len()
                    ));
                }
                let mut refused = Vec::with_capacity(r.b.len() / 12);
                while !r.b.is_empty() {
                    let at = r.u32()?;
                    if at as usize >= MANY_MAX {
                        return Err(format!("REFUSED record names position {at} of a batch"));
                    }
                    refused.push((at, r.u64()?));
                }
                Record::RefusedMany { gen, insert_end, refused }
            }
            Kind::Drop => Record::Drop { gen: r.u64()? },
            Kind::Grant => Record::Grant { gen: r.u64()?, readers: r.u64()? },
            Kind::KeyType => {
                let (gen, kind, oid) = (r.u64()?, r.u8()?, r.u32()?);
                match KeyType::from_parts(kind, oid) {
                    Ok(key) if key.is_recorded() => Record::KeyType { gen, key },
                    _ => return Err("KEY_TYPE record has a bad key type".into()),
                }
            }
            Kind::PassBegin => Record::PassBegin,
            Kind::PassDone => Record::PassDone { begin: r.u64()?, filters: r.u64()? },
            Kind::Placeholder => {
                let (gen, reason) = (r.u64()?, r.u64()?);
                if reason == 0 {
                    return Err("PLACEHOLDER record without a reason".into());
                }
                Record::Placeholder { gen, reason, meta: r.meta()? }
            }
            Kind::Cut => {
                let gen = r.u64()?;
                let (base, logged) = match r.u8()? {
                    0 => (false, false),
                    1 => (true, false),
                    3 => (true, true),
                    b => return Err(format!("CUT record has bad flags {b}")),
                };
                Record::Cut { gen, base, logged }
            }
            Kind::Discard => Record::Discard { gen: r.u64()? },
            Kind::Ext => {
                let sub = r.u8()?;
                match ExtKind::of_byte(sub) {
                    Some(ExtKind::Pass) => {
                        let frozen = match r.u8()? {
                            0 => false,
                            1 => true,
                            b => return Err(format!("PASS record has bad flags {b}")),
                        };
                        let began = r.u64()?;
                        let n = r.u32()? as usize;
                        if r.b.len() != n.saturating_mul(16) {
                            return Err(format!("PASS record lists {n} filters in {} bytes", r.b.len()));
                        }
                        let mut live = Vec::with_capacity(n);
                        for _ in 0..n {
                            live.push((r.u64()?, r.u64()?));
                        }
                        Record::Pass { frozen, began, live }
                    }
                    Some(ExtKind::Horizon) => Record::Horizon { gen: r.u64()?, db: r.u32()?, xid: r.u32()? },
                    Some(ExtKind::Queue) => Record::Queue { gen: r.u64()?, add: r.queue()? },
                    None => return Err(format!("unknown cuckoo WAL record sub-kind 0x{sub:02X}")),
                }
            }
        };
        r.end()?;
        Ok(rec)
    }

    /// A one-line description for `pg_waldump`-style output (after the kind).
    pub fn describe(&self) -> String {
        let meta = |m: &Meta| {
            let mut d = format!(
                "db {} name \"{}\" owner {} capacity {} fpp {} buckets {} x {} fingerprint bits {}",
                m.db,
                m.name,
                m.owner,
                m.capacity,
                m.fpp,
                m.params.bucket_count,
                m.params.slots_per_bucket,
                m.params.fingerprint_bits
            );
            if let Some(g) = m.growth {
                d.push_str(&format!(" expansion {}", g.expansion));
            }
            if !m.more.is_empty() {
                d.push_str(&format!(" tables {}", 1 + m.more.len()));
            }
            d
        };
        match self {
            Record::Create(m) => meta(m),
            Record::ContentBegin { kind, gen, cut, meta: m } => {
                if *kind == ContentKind::Cut {
                    format!("{kind:?} gen {gen:X} cut {cut:X} {}", meta(m))
                } else {
                    format!("{kind:?} gen {gen:X} {}", meta(m))
                }
            }
            Record::ContentChunk { begin, offset, words } => {
                format!("begin {begin:X} words {offset}..{}", offset + words.len() as u64)
            }
            Record::ContentEnd { begin, items } => format!("begin {begin:X} items {items}"),
            Record::Insert { gen, hash } | Record::Delete { gen, hash } => format!("gen {gen:X} hash {hash:016X}"),
            Record::Refused { gen, hash, insert_end } => format!("gen {gen:X} hash {hash:016X} insert {insert_end:X}"),
            Record::InsertMany { gen, hashes } | Record::DeleteMany { gen, hashes } => {
                format!("gen {gen:X} hashes {}", hashes.len())
            }
            Record::RefusedMany { gen, insert_end, refused } => {
                format!("gen {gen:X} insert {insert_end:X} refused {}", refused.len())
            }
            Record::Drop { gen } => format!("gen {gen:X}"),
            Record::Grant { gen, readers } => format!("gen {gen:X} readers {readers}"),
            Record::KeyType { gen, key } => format!("gen {gen:X} key type kind {} OID {}", key.kind as u8, key.oid),
            Record::PassBegin => String::new(),
            Record::PassDone { begin, filters } => format!("begin {begin:X} filters {filters}"),
            Record::Placeholder { gen, reason, meta: m } => format!("gen {gen:X} reason {reason} {}", meta(m)),
            Record::Cut { gen, base, logged } => format!(
                "gen {gen:X}{}",
                if *logged {
                    " base, contents follow"
                } else if *base {
                    " base"
                } else {
                    ""
                }
            ),
            Record::Discard { gen } => format!("gen {gen:X}"),
            Record::Pass { frozen, began, live } => format!(
                "PASS began {began:X} filters {}{}",
                live.len(),
                if *frozen { ", frozen until the next start" } else { "" }
            ),
            Record::Horizon { gen, db, xid } => format!("gen {gen:X} db {db} deleted up to xid {xid}"),
            Record::Queue { gen, add } => format!(
                "gen {gen:X} queued {} settled {} dropped {} refused {}",
                add.queued, add.settled, add.dropped, add.refused
            ),
        }
    }

    /// The name of this record's kind (a sub-kind's for [`Kind::Ext`]).
    pub fn kind_name(&self) -> &'static str {
        match self.ext_kind() {
            Some(e) => e.name(),
            None => self.encode().0.name().to_str().unwrap_or("unknown"),
        }
    }

    /// The sub-kind of a record logged as [`Kind::Ext`]; None for the records
    /// of a kind of their own.
    pub fn ext_kind(&self) -> Option<ExtKind> {
        match self {
            Record::Pass { .. } => Some(ExtKind::Pass),
            Record::Horizon { .. } => Some(ExtKind::Horizon),
            Record::Queue { .. } => Some(ExtKind::Queue),
            Record::Create(_)
            | Record::ContentBegin { .. }
            | Record::ContentChunk { .. }
            | Record::ContentEnd { .. }
            | Record::Insert { .. }
            | Record::Refused { .. }
            | Record::Delete { .. }
            | Record::InsertMany { .. }
            | Record::RefusedMany { .. }
            | Record::DeleteMany { .. }
            | Record::Drop { .. }
            | Record::Grant { .. }
            | Record::PassBegin
            | Record::PassDone { .. }
            | Record::Placeholder { .. }
            | Record::Cut { .. }
            | Record::Discard { .. }
            | Record::KeyType { .. } => None,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
