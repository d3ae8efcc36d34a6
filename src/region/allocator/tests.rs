//! Tests of the block allocator against a model, with interrupted allocations and threads.

use super::*;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::Arc;

fn words(blocks: u64) -> Vec<AtomicU64> {
    (0..BlockAllocator::words_needed(blocks)).map(|_| AtomicU64::new(0)).collect()
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// First fit over the model's leaves.
fn model_first_fit(model: &[u64], n: u64) -> Option<u64> {
    let mut run = 0;
    for (b, &t) in model.iter().enumerate() {
        run = if t == FREE { run + 1 } else { 0 };
        if run == n {
            return Some(b as u64 + 1 - n);
        }
    }
    None
}

fn model_runs(model: &[u64]) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for (b, &t) in model.iter().enumerate() {
        if t == FREE {
            continue;
        }
        match out.last_mut() {
            Some((s, l, tag)) if *tag == t && *s + *l == b as u64 => *l += 1,
            _ => out.push((b as u64, 1, t)),
        }
    }
    out
}

fn model_largest(model: &[u64]) -> u64 {
    model.split(|&t| t != FREE).map(|r| r.len() as u64).max().unwrap_or(0)
}

#[test]
fn words_needed_is_a_heap_over_the_next_power_of_two() {
    assert_eq!(BlockAllocator::words_needed(0), 2);
    assert_eq!(BlockAllocator::words_needed(1), 2);
    assert_eq!(BlockAllocator::words_needed(5), 16);
    assert_eq!(BlockAllocator::words_needed(8), 16);
    assert_eq!(BlockAllocator::words_needed(9), 32);
}

#[test]
fn random_sequences_match_a_first_fit_model() {
    for (blocks, seed) in [(1u64, 1u64), (2, 2), (7, 3), (8, 4), (37, 5), (64, 6), (100, 7), (255, 8)] {
        let w = words(blocks);
        let a = BlockAllocator::init(&w, blocks);
        a.check().unwrap();
        let mut model = vec![FREE; blocks as usize];
        let mut live: Vec<(u64, u64, u64)> = Vec::new();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut next_tag = 1u64;
        for step in 0..4000 {
            match rng.below(10) {
                0..=4 => {
                    let n = 1 + rng.below(blocks.min(9));
                    let tag = next_tag;
                    next_tag += 1;
                    let got = a.alloc(n, tag);
                    assert_eq!(got, model_first_fit(&model, n), "blocks {blocks} step {step} alloc {n}");
                    if let Some(s) = got {
                        model[s as usize..(s + n) as usize].fill(tag);
                        live.push((s, n, tag));
                    }
                }
                5..=7 if !live.is_empty() => {
                    let (s, n, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                    a.free(s, n, tag);
                    model[s as usize..(s + n) as usize].fill(FREE);
                    if rng.below(3) == 0 {
                        a.free(s, n, tag); // a retried free
                    }
                }
                8 if !live.is_empty() => {
                    // A free with the wrong tag or a stale run releases nothing.
                    let (s, n, tag) = live[rng.below(live.len() as u64) as usize];
                    a.free(s, n, tag + 1_000_000);
                }
                _ => {
                    // Out-of-range and degenerate frees are no-ops.
                    a.free(blocks, 1, 1);
                    a.free(blocks.saturating_sub(1), 2, 1);
                    a.free(u64::MAX, 2, 1);
                    a.free(0, 0, 1);
                    a.free(0, 1, FREE);
                    a.free(0, 1, RESERVED);
                }
            }
            a.check().unwrap_or_else(|e| panic!("blocks {blocks} step {step}: {e}"));
            assert_eq!(a.allocations(), model_runs(&model));
            assert_eq!(a.free_blocks(), model.iter().filter(|&&t| t == FREE).count() as u64);
            assert_eq!(a.largest_free_run(), model_largest(&model));
        }
    }
}

#[test]
fn bad_alloc_arguments_return_none() {
    let w = words(8);
    let a = BlockAllocator::init(&w, 8);
    assert_eq!(a.alloc(0, 1), None);
    assert_eq!(a.alloc(9, 1), None);
    assert_eq!(a.alloc(u64::MAX, 1), None);
    assert_eq!(a.alloc(1, FREE), None);
    assert_eq!(a.alloc(1, RESERVED), None);
    assert_eq!(a.free_blocks(), 8);
    let w0 = words(0);
    let z = BlockAllocator::init(&w0, 0);
    assert_eq!(z.alloc(1, 1), None);
    assert_eq!(z.free_blocks(), 0);
    assert_eq!(z.largest_free_run(), 0);
    z.check().unwrap();
}

#[test]
fn exhaustion_then_free_makes_space_reusable() {
    let w = words(10);
    let a = BlockAllocator::init(&w, 10);
    let runs: Vec<u64> = (1..=5).map(|t| a.alloc(2, t).unwrap()).collect();
    assert_eq!(runs, vec![0, 2, 4, 6, 8]);
    assert_eq!(a.alloc(1, 6), None);
    assert_eq!(a.free_blocks(), 0);
    assert_eq!(a.largest_free_run(), 0);
    a.free(4, 2, 3);
    assert_eq!(a.alloc(3, 7), None);
    assert_eq!(a.alloc(2, 8), Some(4));
    a.free(0, 2, 1);
    a.free(2, 2, 2);
    assert_eq!(a.alloc(4, 9), Some(0));
    a.check().unwrap();
}

#[test]
fn free_is_idempotent_and_a_stale_free_spares_a_new_owner() {
    let w = words(8);
    let a = BlockAllocator::init(&w, 8);
    assert_eq!(a.alloc(3, 11), Some(0));
    a.free(0, 3, 11);
    a.free(0, 3, 11);
    assert_eq!(a.free_blocks(), 8);
    assert_eq!(a.alloc(4, 12), Some(0));
    a.free(0, 3, 11); // retry of the old free, after the blocks changed hands
    a.check().unwrap();
    assert_eq!(a.allocations(), vec![(0, 4, 12)]);
    assert_eq!(a.free_blocks(), 4);
}

#[test]
fn fragmentation_refuses_a_large_run_but_serves_a_small_one() {
    let w = words(64);
    let a = BlockAllocator::init(&w, 64);
    for t in 1..=32 {
        assert_eq!(a.alloc(2, t), Some(2 * (t - 1)));
    }
    for t in (1..=32).step_by(2) {
        a.free(2 * (t - 1), 2, t);
    }
    assert_eq!(a.free_blocks(), 32);
    assert_eq!(a.largest_free_run(), 2);
    assert_eq!(a.alloc(3, 100), None);
    assert_eq!(a.alloc(2, 101), Some(0));
    assert_eq!(a.alloc(1, 102), Some(4));
    assert_eq!(a.alloc(1, 103), Some(5));
    a.check().unwrap();
}

#[test]
fn padding_leaves_are_never_handed_out() {
    for blocks in [1u64, 3, 5, 6, 7, 9, 13, 33] {
        let w = words(blocks);
        let a = BlockAllocator::init(&w, blocks);
        assert_eq!(a.free_blocks(), blocks);
        assert_eq!(a.largest_free_run(), blocks);
        assert_eq!(a.alloc(blocks + 1, 1), None);
        assert_eq!(a.alloc(blocks, 2), Some(0));
        assert_eq!(a.alloc(1, 3), None);
        a.free(0, blocks, 2);
        let mut t = 10;
        while let Some(s) = a.alloc(1, t) {
            assert!(s < blocks);
            t += 1;
        }
        assert_eq!(t - 10, blocks);
        a.check().unwrap();
        let leaves = BlockAllocator::words_needed(blocks) as u64 / 2;
        for b in blocks..leaves {
            assert_eq!(a.leaf(b), RESERVED);
        }
    }
}

#[test]
fn attach_sees_what_init_wrote() {
    let w = words(12);
    let a = BlockAllocator::init(&w, 12);
    assert_eq!(a.alloc(5, 1), Some(0));
    let b = BlockAllocator::attach(&w, 12);
    assert_eq!(b.free_blocks(), 7);
    assert_eq!(b.alloc(7, 2), Some(5));
    assert_eq!(a.free_blocks(), 0);
}

#[test]
fn recover_frees_phantoms_left_by_interrupted_allocs() {
    for claim in 0..=5u64 {
        for levels in [0u32, 1, 2, 5] {
            let w = words(12);
            let a = BlockAllocator::init(&w, 12);
            assert_eq!(a.alloc(2, 1), Some(0));
            // A phantom: the caller died part-way through claiming 4 blocks.
            assert_eq!(a.interrupted_alloc(4, 99, claim, levels), Some(2));
            // The next alloc tolerates the phantom (it may leave counts above
            // it stale when lower counts already steer the search around it).
            assert_eq!(a.alloc(3, 2), Some(2 + claim.min(4)));
            let freed = a.recover(|t| t != 99);
            assert_eq!(freed, claim.min(4));
            a.check().unwrap_or_else(|e| panic!("claim {claim} levels {levels}: {e}"));
            assert!(a.allocations().iter().all(|&(_, _, t)| t != 99));
            assert_eq!(a.free_blocks(), 12 - 5);
        }
    }
}

#[test]
fn stale_counts_from_an_interrupted_alloc_are_repaired_by_the_next_alloc() {
    // The phantom's leaves are claimed but no count says so: a search trusts
    // the counts, fails on the taken leaf, repairs and finds the next run.
    let w = words(8);
    let a = BlockAllocator::init(&w, 8);
    assert_eq!(a.interrupted_alloc(4, 99, 4, 0), Some(0));
    assert_eq!(a.free_blocks(), 8); // the hint is stale
    assert_eq!(a.alloc(4, 1), Some(4));
    a.check().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.free_blocks(), 0);
    // A free of the phantom (as recovery would do) repairs it too.
    a.free(0, 4, 99);
    a.check().unwrap();
    assert_eq!(a.alloc(4, 2), Some(0));
}

#[test]
fn a_retried_free_repairs_counts_of_an_interrupted_free() {
    let w = words(8);
    let a = BlockAllocator::init(&w, 8);
    assert_eq!(a.alloc(8, 1), Some(0));
    a.interrupted_free(0, 8, 1, 1);
    assert_eq!(a.alloc(4, 2), None); // the counts still say taken
    assert!(a.check().is_err());
    a.free(0, 8, 1); // the retry: the leaves are already free
    a.check().unwrap();
    assert_eq!(a.alloc(4, 2), Some(0));
    // recover() also repairs counts.
    a.interrupted_free(0, 4, 2, 0);
    assert!(a.check().is_err());
    assert_eq!(a.recover(|_| true), 0);
    a.check().unwrap();
    assert_eq!(a.free_blocks(), 8);
}

/// Without interrupted callers every count must be exact once the threads
/// finish; with them (phantoms whose counts may stay stale where no later
/// operation passes), after `recover()`.
#[test]
fn threads_allocating_and_freeing_keep_their_blocks() {
    threads_allocating_and_freeing(false);
    threads_allocating_and_freeing(true);
}

fn threads_allocating_and_freeing(with_phantoms: bool) {
    const BLOCKS: u64 = 61;
    const THREADS: u64 = 4;
    let ops: u64 = std::env::var("CUCKOO_ALLOC_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let w: Arc<Vec<AtomicU64>> = Arc::new(words(BLOCKS));
    BlockAllocator::init(&w, BLOCKS);
    let phantoms = Arc::new(StdAtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (w, phantoms) = (w.clone(), phantoms.clone());
            std::thread::spawn(move || {
                let a = BlockAllocator::attach(&w, BLOCKS);
                let mut rng = Rng(0x1234_5678_9ABC_DEF1 ^ (t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut held: Vec<(u64, u64, u64)> = Vec::new();
                let mut seq = 0u64;
                let (mut ok, mut none, mut dead) = (0u64, 0u64, 0u64);
                for _ in 0..ops {
                    seq += 1;
                    // Tags are unique per thread and call; bit 62 marks phantoms.
                    let tag = (t + 1) << 48 | seq;
                    if held.len() < 4 && rng.below(3) != 0 {
                        let n = 1 + rng.below(6);
                        if with_phantoms && dead < 2 && rng.below(ops / 4 + 1) == 0 {
                            // A caller that dies mid-alloc, at most twice per thread.
                            dead += 1;
                            let claim = rng.below(n + 1);
                            if a.interrupted_alloc(n, tag | 1 << 62, claim, rng.below(4) as u32).is_some() {
                                phantoms.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            continue;
                        }
                        match a.alloc(n, tag) {
                            Some(s) => {
                                assert!(s + n <= BLOCKS);
                                held.push((s, n, tag));
                                ok += 1;
                            }
                            None => none += 1,
                        }
                    } else if !held.is_empty() {
                        let (s, n, tag) = held.swap_remove(rng.below(held.len() as u64) as usize);
                        a.free(s, n, tag);
                        if rng.below(4) == 0 {
                            a.free(s, n, tag);
                        }
                    }
                    for &(s, n, tag) in &held {
                        for b in s..s + n {
                            assert_eq!(a.leaf(b), tag, "thread {t} lost block {b}");
                        }
                    }
                }
                for (s, n, tag) in held {
                    a.free(s, n, tag);
                }
                (ok, none)
            })
        })
        .collect();
    let mut total = (0, 0);
    for h in handles {
        let (ok, none) = h.join().unwrap();
        total = (total.0 + ok, total.1 + none);
    }
    let a = BlockAllocator::attach(&w, BLOCKS);
    let live: HashSet<u64> = a.allocations().iter().map(|&(_, _, t)| t).collect();
    assert!(live.iter().all(|t| t & 1 << 62 != 0), "only phantoms remain");
    let phantom_blocks: u64 = a.allocations().iter().map(|&(_, l, _)| l).sum();
    if !with_phantoms {
        a.check().unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(a.recover(|t| t & 1 << 62 == 0), phantom_blocks);
    a.check().unwrap();
    assert_eq!(a.free_blocks(), BLOCKS);
    assert_eq!(a.largest_free_run(), BLOCKS);
    assert!(total.0 > 0 && total.1 > 0, "allocs {total:?}: both outcomes should occur");
    let phantoms = phantoms.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("allocs ok {}, none {}, phantoms {phantoms}", total.0, total.1);
}
