//! A chain in a process's own memory, for tests and benchmarks: tables are boxed filters
//! and handles their addresses.

use super::*;
use crate::filter::table::OwnedFilter;

/// A chain in a process's own memory (tests): tables are boxed
/// filters and handles their addresses; made tables follow a [`Growth`] plan, or
/// a fixed list of shapes.
pub struct OwnedChain {
    dir: Directory,
    plan: Plan,
}

enum Plan {
    Growth(Growth),
    /// Parameters and capacities of tables 1, 2, ... (models with tiny tables).
    Fixed(Vec<(Params, u64)>),
}

impl OwnedChain {
    /// A chain whose first table holds `capacity` keys, growing by `growth`.
    pub fn new(capacity: u64, growth: Growth) -> Result<OwnedChain, SizingError> {
        let first = growth.first(capacity, crate::filter::layout::MAX_BUCKET_COUNT)?;
        Ok(OwnedChain::from_first(first.params, first.capacity, Plan::Growth(growth)))
    }

    /// A chain of a first table of `first` (params, capacity) and then these.
    pub fn with_tables(first: (Params, u64), next: Vec<(Params, u64)>) -> OwnedChain {
        OwnedChain::from_first(first.0, first.1, Plan::Fixed(next))
    }

    fn from_first(params: Params, capacity: u64, plan: Plan) -> OwnedChain {
        let c = OwnedChain { dir: Directory::default(), plan };
        let h = Box::into_raw(Box::new(OwnedFilter::with_capacity(params, capacity))) as u64;
        c.dir.init(&[h]);
        c
    }

    pub fn chain(&self) -> Chain<'_, OwnedChain> {
        Chain::new(&self.dir, self)
    }

    pub fn directory(&self) -> &Directory {
        &self.dir
    }

    fn filter(&self, handle: u64) -> &OwnedFilter {
        // SAFETY: handles are addresses of boxed filters that this chain made and
        // frees only when dropped (published ones) or when released (never
        // published, so nobody else holds them).
        unsafe { &*(handle as *const OwnedFilter) }
    }

    /// Parameters and capacity of each published table.
    pub fn shapes(&self) -> Vec<(Params, u64)> {
        self.dir.handles().into_iter().map(|h| (self.filter(h).table().params(), self.filter(h).capacity())).collect()
    }

    /// Bytes of bucket words over all tables (what a named filter's tables take
    /// in shared memory, without headers).
    pub fn word_bytes(&self) -> u64 {
        self.shapes().iter().map(|(p, _)| 8 * p.bucket_count).sum()
    }

    /// The chain's false-positive bound: the sum of its tables' bounds at their
    /// loads now (at least their planned capacity's, once they are full).
    pub fn fpp_bound(&self) -> f64 {
        self.dir
            .handles()
            .into_iter()
            .map(|h| sizing::expected_fpp(&self.filter(h).table().params(), self.filter(h).table().item_count()))
            .sum()
    }
}

impl Tables for OwnedChain {
    fn with_table<R>(&self, _index: usize, handle: u64, f: impl FnOnce(&Table<'_>) -> R) -> R {
        f(&self.filter(handle).table())
    }

    fn table(&self, _index: usize, handle: u64) -> Table<'_> {
        self.filter(handle).table()
    }

    fn capacity(&self, handle: u64) -> u64 {
        self.filter(handle).capacity()
    }

    fn make(&self, index: usize, before: &[u64]) -> Option<u64> {
        let (params, capacity) = match &self.plan {
            Plan::Growth(g) => {
                let shapes: Vec<(Params, u64)> =
                    before.iter().map(|&h| (self.filter(h).table().params(), self.filter(h).capacity())).collect();
                let s = g.next(&shapes, crate::filter::layout::MAX_BUCKET_COUNT).ok()?;
                (s.params, s.capacity)
            }
            Plan::Fixed(list) => *list.get(index.checked_sub(1)?)?,
        };
        Some(Box::into_raw(Box::new(OwnedFilter::with_capacity(params, capacity))) as u64)
    }

    fn release(&self, handle: u64) {
        // SAFETY: `handle` came from `make` and was never published: this is its
        // only owner.
        drop(unsafe { Box::from_raw(handle as *mut OwnedFilter) });
    }
}

impl Drop for OwnedChain {
    fn drop(&mut self) {
        for h in self.dir.all_handles() {
            self.release(h);
        }
    }
}

// SAFETY: the boxed filters are made of atomics; handles are shared read-only
// after publication.
unsafe impl Send for OwnedChain {}
// SAFETY: as for Send.
unsafe impl Sync for OwnedChain {}

#[cfg(all(test, not(loom)))]
mod tests;
