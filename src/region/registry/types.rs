//! What the registry hands its callers: information about entries, space and
//! usage, the caps it enforces, what a new filter is, and why a change was
//! refused.

use crate::filter::{Growth, KeyType, OpStats, Params};

/// How the region's space is used (see [`Region::space`]); `releasing_bytes`
/// are the heads of dropped or replaced filters (not their other tables) that
/// running statements may still read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionSpace {
    pub size: u64,
    pub data_bytes: u64,
    pub free_bytes: u64,
    pub largest_free_bytes: u64,
    pub releasing_bytes: u64,
    pub entries: u64,
    pub entries_used: u64,
}

/// Why a registry change was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum RegionError {
    NotFound,
    Exists,
    /// `pending`: bytes of dropped or replaced filters that running statements
    /// may still be reading; they become free once those finish.
    NoSpace {
        requested: u64,
        free: u64,
        largest: u64,
        pending: u64,
    },
    NoEntries {
        max: u64,
    },
    BadName(String),
    BadParams(String),
    /// Readers kept old copies pinned for longer than a change may wait.
    Busy,
    /// Durable filters cannot be changed now (nobody is logging their
    /// checkpoint images).
    Closed,
    /// The change would take a role or a database over a cap the caller set
    /// ([`Limits`]).
    OverLimit(LimitHit),
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
            RegionError::Closed => {
                write!(f, "durable filters cannot be changed while the cuckoo durability worker is not running")
            }
            RegionError::OverLimit(hit) => write!(f, "{hit}"),
        }
    }
}

// What the caps per role and per database are made of (the checks are in
// `limits`).

/// Caps on what one role (over every database) and one database (over every
/// role) may hold in the region; `None`: no cap. Set by the caller of a
/// change; recovery and replay set none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub role_filters: Option<u64>,
    pub role_bytes: Option<u64>,
    pub database_filters: Option<u64>,
    pub database_bytes: Option<u64>,
}

impl Limits {
    /// Whether any byte cap is set (the only kind growth can pass).
    pub fn caps_bytes(&self) -> bool {
        self.role_bytes.is_some() || self.database_bytes.is_some()
    }
}

/// Which cap a change would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    RoleFilters,
    RoleBytes,
    DatabaseFilters,
    DatabaseBytes,
}

/// A change refused by a cap: whose (the filter's owner and database), what
/// they use now (filters or bytes; `replacing`: without the contents the
/// change replaces), what the change asked for on top, and the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitHit {
    pub kind: LimitKind,
    pub owner: u32,
    pub db: u32,
    pub used: u64,
    pub requested: u64,
    pub cap: u64,
    pub replacing: bool,
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whose, what) = match self.kind {
            LimitKind::RoleFilters => (format!("role {}", self.owner), "filters"),
            LimitKind::RoleBytes => (format!("role {}", self.owner), "bytes"),
            LimitKind::DatabaseFilters => (format!("database {}", self.db), "filters"),
            LimitKind::DatabaseBytes => (format!("database {}", self.db), "bytes"),
        };
        write!(f, "{whose} uses {} {what}, asks for {} more, and may use {}", self.used, self.requested, self.cap)
    }
}

/// Filters and region bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub filters: u64,
    pub bytes: u64,
}

impl Usage {
    pub(super) fn add(&mut self, bytes: u64) {
        self.filters += 1;
        self.bytes += bytes;
    }
}

/// What one role uses in one database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub owner: u32,
    pub db: u32,
    pub usage: Usage,
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
    pub key: KeyType,
    /// How the filter grows (None: it keeps its tables).
    pub growth: Option<Growth>,
}

impl EntryInfo {
    /// Whether the filter has contents that may be used.
    pub fn usable(&self) -> bool {
        self.reload_reason == 0 && self.blocks > 0
    }
}

/// What a batch of operations did, for [`Region::count_many`].
#[derive(Debug, Default)]
pub struct Tally {
    pub stored: u64,
    pub refused: u64,
    pub deleted: u64,
    pub looked: u64,
    pub op: OpStats,
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

/// Writes table `i`'s bucket words (one per bucket) of a new filter while the
/// registry lock is held: from a published value, or restored files.
pub type Contents<'c> = &'c dyn Fn(usize, &mut [u64]);

/// What a new filter is.
pub struct NewFilter<'n> {
    pub db: u32,
    pub owner: u32,
    pub name: &'n str,
    pub capacity: u64,
    pub fpp: f64,
    pub durable: bool,
    pub key: KeyType,
    /// How it grows (None: never).
    pub growth: Option<Growth>,
}

/// One table of a new filter: its parameters and the capacity it was sized for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableSpec {
    pub params: Params,
    pub capacity: u64,
}

/// Where each table's words start when the words of tables with these bucket
/// counts lie one after another (as snapshots, logged contents and files
/// hold them).
pub fn word_offsets(bucket_counts: impl IntoIterator<Item = u64>) -> Vec<usize> {
    bucket_counts
        .into_iter()
        .scan(0usize, |at, m| {
            let o = *at;
            *at += m as usize;
            Some(o)
        })
        .collect()
}
