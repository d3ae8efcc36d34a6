//! What each role and database uses of the region, and the caps a caller
//! may set on it ([`Limits`]).
//!
//! A filter is charged to its owner (the role recorded in its entry) and to
//! its database, in every database for the role: one filter, and every block
//! it holds, its head and each table outside it (those a publish brought and
//! those growth added). Dropped filters whose blocks running statements may
//! still read are charged to nobody.
//!
//! The blocks outside the head are counted in the entry (`Entry::grown`), so
//! that nobody walks a filter's tables to know its size: the lock holder sets
//! the count with the contents; growth ([`RegionTables`](super::tables::RegionTables),
//! without the lock) adds a table's blocks when it claims them and takes them
//! off if its table lost the race to be published. The count carries the low
//! bits of the tag of the contents it counts, and growth changes it only while
//! they match: a process still growing the contents a publish replaced, or a
//! drop retired, never changes the count of what replaced them.
//!
//! Caps are checked only when usage would grow: under the registry lock for
//! a new filter or new contents ([`Region::admit`]: exact, since every such
//! change holds the lock), and by growth just before it claims a table
//! (`tables`: without the lock, so processes growing filters at the same time
//! may each see room for one more table; a cap may be passed by at most one
//! table per filter growing concurrently). Neither scans the registry
//! otherwise; inserts that do not add a table never look at the caps.

use super::*;

/// `Entry::grown`: the tag's low bits above, blocks below.
const GROWN_BITS: u32 = 40;
const GROWN_MASK: u64 = (1 << GROWN_BITS) - 1;

/// The value of `Entry::grown` for `blocks` blocks outside the head of the
/// contents tagged `tag`. (Two tags that share their low 24 bits are 16
/// million allocations apart: a grower would have to stall that long between
/// reading the entry and changing the count to be mistaken.)
pub(super) fn pack_grown(tag: u64, blocks: u64) -> u64 {
    (tag << GROWN_BITS) | (blocks & GROWN_MASK)
}

fn grown_blocks(grown: u64, tag: u64) -> Option<u64> {
    (grown >> GROWN_BITS == (tag << GROWN_BITS) >> GROWN_BITS).then_some(grown & GROWN_MASK)
}

/// The first cap that `add_filters` more filters and `add_bytes` more bytes
/// would pass, given what the role and the database use; `released` bytes
/// go at the same time (the contents replaced): a change that does not
/// need more bytes than it releases passes the byte caps, so that an owner
/// over a cap lowered since may still shrink a filter.
fn over(
    limits: &Limits,
    (owner, db): (u32, u32),
    role: Usage,
    database: Usage,
    add_filters: u64,
    add_bytes: u64,
    released: u64,
) -> Option<LimitHit> {
    let hit = |kind, used: u64, requested: u64, cap: Option<u64>| {
        cap.filter(|&cap| requested > 0 && used.saturating_add(requested) > cap).map(|cap| LimitHit {
            kind,
            owner,
            db,
            used,
            requested,
            cap,
            replacing: released > 0,
        })
    };
    let bytes = if add_bytes > released { add_bytes } else { 0 };
    hit(LimitKind::RoleFilters, role.filters, add_filters, limits.role_filters)
        .or_else(|| hit(LimitKind::RoleBytes, role.bytes, bytes, limits.role_bytes))
        .or_else(|| hit(LimitKind::DatabaseFilters, database.filters, add_filters, limits.database_filters))
        .or_else(|| hit(LimitKind::DatabaseBytes, database.bytes, bytes, limits.database_bytes))
}

impl Region {
    /// The number of changes made to entries so far.
    pub(super) fn changes(&self) -> u64 {
        self.header().changes.load(Ordering::Relaxed)
    }

    /// Entry `index`'s database, owner and bytes in the region, if it is
    /// live (a consistent read of the entry; the count of its other tables
    /// is read after, for the contents the entry held).
    fn charge(&self, index: usize) -> Option<(u32, u32, u64)> {
        // Cheap unsynchronised prefilter; the seqlock read decides.
        if self.entries()[index].state.load(Ordering::Relaxed) != STATE_LIVE {
            return None;
        }
        let info = self.entry_info(index)?;
        Some((info.db, info.owner, self.charged_bytes(&info)))
    }

    /// What role `owner` uses over every database, and what database `db`
    /// uses over every role, leaving out entry `except`.
    pub fn usage(&self, owner: u32, db: u32, except: Option<usize>) -> (Usage, Usage) {
        let (mut role, mut database) = (Usage::default(), Usage::default());
        for i in (0..self.entries().len()).filter(|&i| Some(i) != except) {
            if let Some((d, o, bytes)) = self.charge(i) {
                if o == owner {
                    role.add(bytes);
                }
                if d == db {
                    database.add(bytes);
                }
            }
        }
        (role, database)
    }

    /// What each role uses in each database where it owns a filter, by role
    /// and database.
    pub fn usage_rows(&self) -> Vec<UsageRow> {
        let mut rows: Vec<UsageRow> = Vec::new();
        let mut charges: Vec<(u32, u32, u64)> =
            (0..self.entries().len()).filter_map(|i| self.charge(i)).map(|(d, o, b)| (o, d, b)).collect();
        charges.sort_unstable();
        for (owner, db, bytes) in charges {
            match rows.last_mut() {
                Some(r) if (r.owner, r.db) == (owner, db) => r.usage.add(bytes),
                _ => rows.push(UsageRow { owner, db, usage: Usage { filters: 1, bytes } }),
            }
        }
        rows
    }

    /// The bytes filter `info` holds now, all its tables included.
    pub fn charged_bytes(&self, info: &EntryInfo) -> u64 {
        if info.blocks == 0 {
            return 0;
        }
        let others = grown_blocks(self.entries()[info.index].grown.load(Ordering::Acquire), info.tag).unwrap_or(0);
        (info.blocks + others) * BLOCK_BYTES
    }

    /// Under the registry lock, before a filter of `bytes` is created for
    /// `owner` in `db` (`replacing`: None), or before the contents of
    /// `replacing` are replaced by `bytes`: whether that keeps the owner and
    /// the database within `limits`. Exact: every change that adds a filter
    /// or contents holds the lock (growth, which does not, may add tables
    /// meanwhile; see the module documentation).
    pub fn admit(
        &self,
        _lk: &Locked,
        limits: &Limits,
        owner: u32,
        db: u32,
        bytes: u64,
        replacing: Option<&EntryInfo>,
    ) -> Result<(), RegionError> {
        if *limits == Limits::default() {
            return Ok(());
        }
        let (role, database) = self.usage(owner, db, replacing.map(|i| i.index));
        let (filters, released) = match replacing {
            Some(info) => (0, self.charged_bytes(info)),
            None => (1, 0),
        };
        // Contents that pass to another owner are a new filter of `owner`'s:
        // nothing it held is released.
        if replacing.is_some_and(|i| i.owner != owner) {
            let role_only = Limits { database_filters: None, database_bytes: None, ..*limits };
            if let Some(hit) = over(&role_only, (owner, db), role, database, 1, bytes, 0) {
                return Err(RegionError::OverLimit(hit));
            }
        }
        match over(limits, (owner, db), role, database, filters, bytes, released) {
            Some(hit) => Err(RegionError::OverLimit(hit)),
            None => Ok(()),
        }
    }

    /// Before growth claims a table of `bytes` for a filter of `owner` in
    /// `db`: whether the byte caps of `limits` leave room for it. Read without
    /// the lock (see the module documentation).
    pub(super) fn room_to_grow(&self, limits: &Limits, owner: u32, db: u32, bytes: u64) -> Result<(), LimitHit> {
        let (role, database) = self.usage(owner, db, None);
        match over(limits, (owner, db), role, database, 0, bytes, 0) {
            Some(hit) => Err(hit),
            None => Ok(()),
        }
    }

    /// Adds `delta` blocks to the count of tables outside the head of entry
    /// `index`, if it still counts the contents tagged `tag`.
    pub(super) fn add_grown(&self, index: usize, tag: u64, delta: i64) {
        let g = &self.entries()[index].grown;
        let mut cur = g.load(Ordering::Relaxed);
        loop {
            let Some(n) = grown_blocks(cur, tag) else { return };
            let next = pack_grown(tag, n.saturating_add_signed(delta));
            match g.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }
}
