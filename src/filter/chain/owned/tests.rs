//! Tests of filters that grow (chains of tables), on chains in a process's
//! own memory.

use super::OwnedChain;
use crate::filter::chain::*;
use crate::filter::layout::DEFAULT_SEED;

fn hash_i64(k: i64) -> u64 {
    crate::filter::hash::hash_i64(DEFAULT_SEED, k)
}
use crate::filter::sizing::{size_for_capacity, DEFAULT_FPP};
use crate::filter::test_rng::Rng;

fn bytes_of(p: &Params) -> u64 {
    8 * p.bucket_count
}

/// A filter made for 1,000 keys takes 2M, from two threads: every insert is
/// stored, no key is missed, the measured rate over 2M absent keys stays
/// under the rate asked for, and the words take at most 1.5 times those of a
/// filter made for 2M keys at that rate.
#[test]
fn grows_from_a_thousand_to_two_million_keeping_the_rate() {
    let growth = Growth { fpp: DEFAULT_FPP, expansion: 2 };
    let c = OwnedChain::new(1000, growth).unwrap();
    let n: i64 = 2_000_000;
    std::thread::scope(|s| {
        for part in 0..2i64 {
            let c = &c;
            s.spawn(move || {
                for k in (part..n).step_by(2) {
                    c.chain().insert(hash_i64(k)).expect("a filter that grows is never full");
                }
            });
        }
    });
    let ch = c.chain();
    assert_eq!(ch.item_count(), n as u64);
    assert!((0..n).all(|k| ch.contains(hash_i64(k))), "false negative");
    let fp = (n..2 * n).filter(|&k| ch.contains(hash_i64(k))).count();
    let rate = fp as f64 / n as f64;
    let bound = c.fpp_bound();
    let fixed = size_for_capacity(n as u64, DEFAULT_FPP, u64::MAX).unwrap();
    let ratio = c.word_bytes() as f64 / bytes_of(&fixed.params) as f64;
    eprintln!("{} tables, rate {rate:.6}, bound {bound:.6}, bytes {:.3}x a filter made for 2M", ch.dir.count(), ratio);
    assert!(rate <= DEFAULT_FPP, "measured rate {rate}");
    assert!(bound <= DEFAULT_FPP, "bound {bound}");
    assert!(ratio <= 1.5, "{ratio}x the bytes");
}

#[test]
fn deletes_find_keys_in_every_table_and_duplicates_are_kept() {
    let c = OwnedChain::new(100, Growth { fpp: DEFAULT_FPP, expansion: 2 }).unwrap();
    let ch = c.chain();
    for k in 0..5000 {
        ch.insert(hash_i64(k)).unwrap();
    }
    assert!(ch.dir.count() > 4);
    // A second copy of every key, in the newest tables.
    for k in 0..5000 {
        ch.insert(hash_i64(k)).unwrap();
    }
    // A key whose copies are in two tables cannot be deleted: either copy
    // might be another key's.
    for k in 0..5000 {
        assert_eq!(ch.delete(hash_i64(k)), Deleted::Ambiguous);
        assert!(ch.contains(hash_i64(k)));
    }
    assert_eq!(ch.item_count(), 10_000);
    let d = OwnedChain::new(100, Growth { fpp: DEFAULT_FPP, expansion: 2 }).unwrap();
    let dh = d.chain();
    for k in 0..20_000 {
        dh.insert(hash_i64(k)).unwrap();
    }
    let mut removed = 0;
    for k in 0..20_000 {
        match dh.delete(hash_i64(k)) {
            Deleted::Removed => removed += 1,
            Deleted::Ambiguous => assert!(dh.contains(hash_i64(k))),
            Deleted::Absent => panic!("a present key reported absent"),
        }
    }
    // Refusals are about as rare as false positives.
    assert!(removed >= 19_900, "{removed} of 20,000 deletes removed");
    assert_eq!(dh.item_count(), 20_000 - removed);
    let mut r = Rng(7);
    assert!((0..1000).filter(|_| dh.contains(r.next())).count() < 50);
}

#[test]
fn a_chain_without_room_for_its_next_table_is_full_and_keeps_its_keys() {
    let small = size_for_capacity(50, DEFAULT_FPP, u64::MAX).unwrap();
    let next = size_for_capacity(100, DEFAULT_FPP, u64::MAX).unwrap();
    let c = OwnedChain::with_tables((small.params, small.capacity), vec![(next.params, next.capacity)]);
    let ch = c.chain();
    let mut stored = Vec::new();
    let mut k = 0;
    while ch.insert(hash_i64(k)).is_ok() {
        stored.push(k);
        k += 1;
    }
    assert_eq!(ch.dir.count(), 2);
    assert!(stored.len() as u64 >= small.capacity + next.capacity);
    assert!(stored.iter().all(|&k| ch.contains(hash_i64(k))));
    assert_eq!(ch.item_count(), stored.len() as u64);
}

/// Inserts if new on a chain that grows: a key is added once whatever
/// table holds it, and counted over all tables.
#[test]
fn insert_new_on_a_growing_chain() {
    let c = OwnedChain::new(100, Growth { fpp: 0.002, expansion: 2 }).unwrap();
    let ch = c.chain();
    let mut added = 0u64;
    for k in 0..20_000i64 {
        added += ch.insert_new_counted(hash_i64(k), &mut OpStats::default()).unwrap() as u64;
    }
    assert!(c.directory().count() > 5);
    assert_eq!(ch.item_count(), added);
    for k in 0..20_000i64 {
        assert!(!ch.insert_new_counted(hash_i64(k), &mut OpStats::default()).unwrap(), "key {k} added twice");
        assert!(ch.copies(hash_i64(k)) >= 1);
    }
    assert!(added >= 19_900, "{added} of 20,000 keys added");
    ch.insert(hash_i64(5)).unwrap();
    assert!(ch.copies(hash_i64(5)) >= 2);
    assert_ne!(ch.delete(hash_i64(5)), Deleted::Absent);
}

/// `Chain::copies_many` counts as `Chain::copies` does, over every table of
/// a grown chain: keys with several copies in several tables, and absent ones.
#[test]
fn copies_many_counts_as_copies() {
    let c = OwnedChain::new(100, Growth { fpp: 0.002, expansion: 2 }).unwrap();
    let ch = c.chain();
    for round in 0..3i64 {
        for k in 0..3_000i64 {
            if k % 3 >= round {
                ch.insert(hash_i64(k)).unwrap();
            }
        }
    }
    assert!(c.directory().count() > 3);
    let hs: Vec<u64> = (0..4_000i64).map(hash_i64).collect();
    let many = ch.copies_many(&hs);
    let one: Vec<u64> = hs.iter().map(|&h| ch.copies(h)).collect();
    assert_eq!(many, one);
    assert!(many[..3_000].iter().enumerate().all(|(k, &n)| n > k as u64 % 3));
    assert!(many[3_000..].iter().filter(|&&n| n > 0).count() < 40, "absent keys mostly counted 0");
}

/// A batch (`Chain::insert_many`) answers as one-key calls in the same
/// order do, on a fixed table that fills up and on a chain that grows,
/// for plain inserts and inserts if new (duplicates in the batch too).
#[test]
fn insert_many_answers_as_one_key_calls() {
    use crate::filter::table::Full;
    let keys: Vec<u64> = (0..30_000i64).map(|k| hash_i64(k % 25_000)).collect();
    for grows in [false, true] {
        for new in [false, true] {
            let make = || {
                if grows {
                    OwnedChain::new(500, Growth { fpp: 0.002, expansion: 2 }).unwrap()
                } else {
                    let s = size_for_capacity(20_000, 0.002, 1 << 20).unwrap();
                    OwnedChain::with_tables((s.params, s.capacity), vec![])
                }
            };
            let (a, b) = (make(), make());
            let mut batch = vec![Err(Full); keys.len()];
            a.chain().insert_many(&keys, new, &mut batch, &mut OpStats::default());
            let one: Vec<Result<bool, Full>> = keys
                .iter()
                .map(|&k| {
                    if new {
                        b.chain().insert_new_counted(k, &mut OpStats::default())
                    } else {
                        b.chain().insert(k).map(|_| true)
                    }
                })
                .collect();
            assert_eq!(batch, one, "grows {grows}, new {new}");
            assert_eq!(a.chain().item_count(), b.chain().item_count());
            assert_eq!(a.directory().count(), b.directory().count());
            assert!(grows || batch.iter().any(|r| r.is_err()), "the fixed table did not fill");
        }
    }
}
