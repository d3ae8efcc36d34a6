//! Threaded stress test of the lock-free table: several threads insert, delete and
//! look up on one filter held near 90% load, each checking on every operation what
//! it can know for certain, and the main thread checking the totals at the end.
//!
//! Each thread owns a disjoint key space, so it knows exactly which of its keys are
//! inserted and not deleted ("live"). Invariants checked:
//! - every lookup of a live key answers true (no false negatives), whatever the
//!   other threads are doing;
//! - every delete of a live key succeeds (removes a copy);
//! - a failed insert (Full) loses nothing: all live keys stay present;
//! - at the end the item count equals the number of live keys, equals the number
//!   of occupied slots, and every live key is found.
//!
//! It runs on a table of 12,289 buckets under the fastrange mapping (any bucket
//! count) and on one of 2^14 buckets under format 1's power-of-two XOR mapping.
//! `CUCKOO_STRESS_OPS` (default 2,000,000 per table) sets the operation count and
//! `CUCKOO_STRESS_THREADS` (default 4) the thread count.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};

use super::hash::hash_i64;
use super::layout::{Mapping, Params, DEFAULT_SEED};
use super::table::tests::Rng;
use super::table::{Full, OwnedFilter};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn stress_mixed_operations_at_90_percent_load() {
    stress(Params { fingerprint_bits: 12, slots_per_bucket: 4, bucket_count: 12_289, seed: DEFAULT_SEED, mapping: Mapping::Fastrange });
}

#[test]
fn stress_mixed_operations_at_90_percent_load_power_of_two_xor() {
    stress(Params { fingerprint_bits: 12, slots_per_bucket: 4, bucket_count: 1 << 14, seed: DEFAULT_SEED, mapping: Mapping::PowerOfTwoXor });
}

fn stress(params: Params) {
    let total_ops = env("CUCKOO_STRESS_OPS", 2_000_000);
    let threads = env("CUCKOO_STRESS_THREADS", 4).clamp(1, 64);
    let target = (params.slot_count() as f64 * 0.90) as u64 / threads;
    let filter = Arc::new(OwnedFilter::new(params));
    let start = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let (filter, start) = (filter.clone(), start.clone());
            std::thread::spawn(move || {
                let t = filter.table();
                let mut rng = Rng(0x5eed ^ id);
                let key = |n: u64| ((id << 48) | n) as i64;
                let mut live: Vec<u64> = Vec::new();
                let mut next = 0u64;
                let mut full = 0u64;
                // Fill this thread's share to the target load.
                while (live.len() as u64) < target {
                    match t.insert(hash_i64(DEFAULT_SEED, key(next))) {
                        Ok(()) => live.push(next),
                        Err(Full) => full += 1,
                    }
                    next += 1;
                }
                start.wait();
                for _ in 0..total_ops / threads {
                    let r = rng.next();
                    match r % 4 {
                        // Insert a new key, or delete a live one, keeping the load near
                        // the target (mixes at 90% exercise path discovery constantly).
                        0 | 1 if live.len() as u64 <= target => match t.insert(hash_i64(DEFAULT_SEED, key(next))) {
                            Ok(()) => {
                                live.push(next);
                                next += 1;
                            }
                            Err(Full) => {
                                full += 1;
                                next += 1;
                            }
                        },
                        0 | 1 => {
                            let i = (r >> 8) as usize % live.len();
                            let k = live.swap_remove(i);
                            assert!(t.delete(hash_i64(DEFAULT_SEED, key(k))), "delete of live key {k} failed");
                        }
                        _ => {
                            let i = (r >> 8) as usize % live.len();
                            let k = live[i];
                            assert!(t.contains(hash_i64(DEFAULT_SEED, key(k))), "false negative for live key {k}");
                        }
                    }
                }
                (live.into_iter().map(key).collect::<Vec<i64>>(), full)
            })
        })
        .collect();
    let mut live = Vec::new();
    let mut failed_inserts = 0;
    for h in handles {
        let (keys, full) = h.join().expect("a stress thread failed");
        live.extend(keys);
        failed_inserts += full;
    }
    let t = filter.table();
    assert_eq!(t.item_count(), live.len() as u64, "item count drifted");
    let occupied: u64 =
        t.bucket_words().iter().map(|w| t.geometry().occupied(w.load(Ordering::Relaxed)) as u64).sum();
    assert_eq!(occupied, live.len() as u64, "stored copies differ from live keys");
    for &k in &live {
        assert!(t.contains(hash_i64(DEFAULT_SEED, k)), "live key {k} lost");
    }
    eprintln!(
        "stress ({:?}, {} buckets): {threads} threads, {total_ops} operations, final load {:.3}, {failed_inserts} inserts reported full",
        params.mapping,
        params.bucket_count,
        live.len() as f64 / params.slot_count() as f64
    );
}
