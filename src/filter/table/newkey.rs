//! Insert if new, and a key's copies, on the lock-free table (`table.rs`).
//!
//! [`Table::insert_new_counted`] adds a fingerprint only if its pair holds no
//! copy, and of concurrent calls for the same absent key exactly one adds it.
//! Every such call adds in the same word, the pair's *home* bucket (the lower
//! index), with one CAS that expects the home word it read *before* it read
//! the other bucket. If the CAS succeeds, home did not change from that read
//! to the CAS, so at the moment the other bucket was read neither bucket held
//! the fingerprint (moves change both buckets' words, a copy only reaches the
//! pair by an add or a move into it): the check and the add are one atomic
//! step on one word. A second caller's CAS on the same word then fails, and
//! its next read sees the copy (or, if a move took it to the other bucket,
//! that move changed home again and the read of the other bucket sees it).
//! When home is full, the call makes room in home (a path from home only)
//! and reads again; if no room can be made, it answers "full" only if home
//! is still the word it read (else another caller may have added the key
//! there: it reads again). Lock-free as inserts are: a retry follows another
//! thread's successful CAS on home. Exactly-once holds among insert-if-new
//! calls; a plain insert of the same key racing them adds its own copy, as
//! two plain inserts would. The loom models `insert_new_*` check it with two
//! and three callers, a racing delete, and moves of the copy between the
//! buckets. [`Table::copies`] reads a pair at one instant the same way.

use crossbeam_utils::Backoff;

use super::super::atomic::{spin, Ordering};
use super::{OpStats, Table, MAX_DISCOVERY_ROUNDS};

/// What [`Table::insert_new_counted`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewKey {
    /// The key was absent: it is stored now.
    Added,
    /// The table may hold the key (a copy of its fingerprint is in its pair):
    /// nothing was stored.
    Present,
    /// No room in the pair's home bucket could be made.
    Full,
    /// The caller's `newest` said no: nothing was stored.
    Stale,
}

impl Table<'_> {
    /// As [`Table::cas`], sequentially consistent (the insert-if-new
    /// protocol's accesses; the same instruction on x86-64).
    #[inline(always)]
    fn cas_sc(&self, i: u64, old: u64, new: u64) -> Result<u64, u64> {
        if let Some(h) = self.hook {
            h.before_write(i);
        }
        self.buckets[i as usize].compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst)
    }

    /// The bucket of `fp`'s pair (`i1` and its alternate) in which
    /// [`Table::insert_new_counted`] and [`Table::absent_here`] serialise, and the
    /// other one: the lower index, the same for every caller whichever
    /// candidate it starts from.
    #[inline(always)]
    fn home(&self, i1: u64, fp: u64) -> (u64, u64) {
        let i2 = self.g.alternate(i1, fp);
        (i1.min(i2), i1.max(i2))
    }

    /// Adds a key unless the table may already hold it: exactly one of any
    /// number of concurrent calls for a key that is absent adds it (see
    /// "Insert if new" in the module documentation). `newest` is asked after
    /// the pair is seen without the key and before the add; false makes the
    /// call give up with [`NewKey::Stale`] (a chain's newer table appeared).
    pub fn insert_new_counted(&self, hash: u64, stats: &mut OpStats, newest: &dyn Fn() -> bool) -> NewKey {
        let (i1, fp) = (self.g.primary(hash), self.g.fingerprint(hash));
        let (home, other) = self.home(i1, fp);
        let g = &self.g;
        let backoff = Backoff::new();
        let mut rounds = 0;
        loop {
            // The validated read: `home` unchanged from this load to the CAS
            // below means that when `other` was read, neither bucket held `fp`.
            let w = self.buckets[home as usize].load(Ordering::SeqCst);
            if g.holds(w, fp) {
                return NewKey::Present;
            }
            if other != home && g.holds(self.buckets[other as usize].load(Ordering::SeqCst), fp) {
                return NewKey::Present;
            }
            if !newest() {
                return NewKey::Stale;
            }
            if let Some(s) = g.find(w, 0) {
                if self.cas_sc(home, w, self.changed(w, s, fp)).is_ok() {
                    self.item_count.fetch_add(1, Ordering::Relaxed);
                    return NewKey::Added;
                }
                // `home` changed: another writer completed a step; look again.
                stats.retries += 1;
                continue;
            }
            // `home` is full: make room in it (only there, so that every caller
            // adds in the same word), then look again.
            rounds += 1;
            if rounds > MAX_DISCOVERY_ROUNDS {
                return NewKey::Full;
            }
            let Some(path) = self.discover_path(home, home) else {
                // No room can be made in home as the search found it. If home
                // changed since it was read (another caller may have added the
                // key there), look again: the answer may be "present".
                if self.buckets[home as usize].load(Ordering::SeqCst) != w {
                    continue;
                }
                return NewKey::Full;
            };
            if !self.migrate_path(home, path, stats) {
                spin(&backoff);
            }
        }
    }

    /// Whether the table holds no copy of a key's fingerprint, decided as
    /// [`Table::insert_new_counted`] decides (a validated read of the pair),
    /// and if so, advances the counter of the pair's home bucket: an add into
    /// this table that read that word before cannot complete afterwards (see
    /// "Insert if new" in `chain`).
    pub fn absent_here(&self, hash: u64) -> bool {
        let (i1, fp) = (self.g.primary(hash), self.g.fingerprint(hash));
        let (home, other) = self.home(i1, fp);
        let g = &self.g;
        loop {
            let w = self.buckets[home as usize].load(Ordering::SeqCst);
            if g.holds(w, fp) {
                return false;
            }
            if other != home && g.holds(self.buckets[other as usize].load(Ordering::SeqCst), fp) {
                return false;
            }
            let touched = g.with_counter(w, (g.counter(w) + 1) & g.counter_mask);
            if self.cas_sc(home, w, touched).is_ok() {
                return true;
            }
        }
    }

    /// Copies of a key's fingerprint in its pair of buckets, read at one
    /// instant: `home` read again unchanged after `other` was read (the
    /// answer of `CF.COUNT`: at least the key's inserts not deleted).
    pub fn copies(&self, hash: u64) -> u64 {
        let (i1, fp) = (self.g.primary(hash), self.g.fingerprint(hash));
        let (home, other) = self.home(i1, fp);
        let g = &self.g;
        let backoff = Backoff::new();
        loop {
            let w = self.buckets[home as usize].load(Ordering::SeqCst);
            if other == home {
                return g.copies(w, fp) as u64;
            }
            let w2 = self.buckets[other as usize].load(Ordering::SeqCst);
            if self.buckets[home as usize].load(Ordering::SeqCst) == w {
                return (g.copies(w, fp) + g.copies(w2, fp)) as u64;
            }
            spin(&backoff);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::NewKey;
    use crate::filter::hash::hash_i64;
    use crate::filter::layout::DEFAULT_SEED;
    use crate::filter::sizing::size_for_capacity;
    use crate::filter::table::{OpStats, OwnedFilter};

    fn h(k: i64) -> u64 {
        hash_i64(DEFAULT_SEED, k)
    }

    /// RedisBloom's CF sequences: add twice, count 2; delete, count 1; delete,
    /// count 0; a third delete fails; add-if-new true, then false, count 1; a
    /// plain add, count 2.
    #[test]
    fn redisbloom_sequences_on_a_table() {
        let s = size_for_capacity(1000, 0.002, 1 << 20).unwrap();
        let f = OwnedFilter::with_capacity(s.params, s.capacity);
        let t = f.table();
        let new = |k| t.insert_new_counted(h(k), &mut OpStats::default(), &|| true);
        t.insert(h(1)).unwrap();
        t.insert(h(1)).unwrap();
        assert_eq!(t.copies(h(1)), 2);
        assert!(t.delete(h(1)));
        assert_eq!(t.copies(h(1)), 1);
        assert!(t.delete(h(1)));
        assert_eq!(t.copies(h(1)), 0);
        assert!(!t.delete(h(1)));
        assert_eq!(new(1), NewKey::Added);
        assert_eq!(new(1), NewKey::Present);
        assert_eq!(t.copies(h(1)), 1);
        t.insert(h(1)).unwrap();
        assert_eq!(t.copies(h(1)), 2);
        assert_eq!(t.item_count(), 2);
        // A caller whose table is no longer the newest stores nothing.
        assert_eq!(t.insert_new_counted(h(2), &mut OpStats::default(), &|| false), NewKey::Stale);
        assert_eq!(t.copies(h(2)), 0);
    }

    /// Inserting if new until the table is full: every added key is found, the
    /// item count is the adds, and a full table answers `Full` keeping them.
    #[test]
    fn insert_new_fills_a_table_and_keeps_every_key() {
        let s = size_for_capacity(10_000, 0.002, 1 << 20).unwrap();
        let f = OwnedFilter::with_capacity(s.params, s.capacity);
        let t = f.table();
        let (mut added, mut present, mut full) = (Vec::new(), 0, 0);
        for k in 0..20_000i64 {
            match t.insert_new_counted(h(k), &mut OpStats::default(), &|| true) {
                NewKey::Added => added.push(k),
                NewKey::Present => present += 1,
                NewKey::Full => full += 1,
                NewKey::Stale => unreachable!(),
            }
        }
        assert!(full > 0, "the table never filled");
        assert!(added.len() as u64 >= s.capacity, "only {} keys fit a table made for {}", added.len(), s.capacity);
        assert_eq!(t.item_count(), added.len() as u64);
        assert!(added.iter().all(|&k| t.contains(h(k)) && t.copies(h(k)) >= 1));
        assert!(present < 100, "{present} new keys looked present");
    }
}
