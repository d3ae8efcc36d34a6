//! Model checking of the lock-free table with loom: every interleaving, up to a
//! preemption bound, of the threads in each model, under loom's model of the C11
//! memory model for the `Acquire`/`AcqRel` accesses the table makes. Run with
//! `make loom` (also part of `make test`), which prints how many executions each
//! model explored.
//! (About 800 lines of models, each short, sharing one harness.)
//!
//! What is explored (tables of 2 or 3 buckets, 4 slots of 12 bits; all racing
//! threads are spawned, the main thread only prepares, joins and checks). Every
//! model runs twice: under the fastrange mapping that filters use now (any bucket
//! count; the migration model uses 3 buckets) and under format 1's power-of-two
//! XOR mapping (4 buckets there), since format-1 values can be published and
//! changed too. The execution counts below are per mapping.
//!
//! | model | threads and operations | bound | executions |
//! |---|---|---|---|
//! | lookup vs back-and-forth migration | lookup; 3 moves 1→0→1→0 | 4 | 2,415 |
//! | lookup vs colliding insert+delete | lookup; 3 × (insert into one bucket, delete from the other) | 4 | 1,702 |
//! | delete vs back-and-forth migration | delete; 3 moves | 4 | 6,460 |
//! | delete vs migration, one copy | delete; 1 move | 3 | 128 |
//! | delete vs migration, two copies | delete; 1 move; lookup | 3 | 10,123 |
//! | two movers of one copy | move; move | 3 | 316 |
//! | two inserters, last free slot | insert; insert (7 of 8 slots full) | 3 | 62 |
//! | insert with migration vs lookup | insert needing a BFS path and a move; lookup of the moved fingerprint | 3 | 126 |
//!
//!
//! Filters that grow (`chain.rs`), tables of one 16-bit slot so that every
//! insert into a full table adds one (bound 3, fastrange):
//!
//! | model | threads and operations | executions |
//! |---|---|---|
//! | inserts race a table switch | insert; insert (first table full) | 17,168 |
//! | lookup during a switch | insert then flag; lookup of a stored key, and of the new key once flagged | 836 |
//! | delete during a switch | insert of a new key; delete of a stored one | 900 |
//!
//! Each chain model fails with a broken variant of `chain.rs` (checked by
//! editing it and running `make loom`): a table published by a plain store
//! instead of a compare-and-swap (the first model loses a key); the count
//! advanced before the handle is in its slot, or read with `Relaxed` (all
//! three: a table counted but not published); lookups that ask only the newest
//! table (all three); deletes that ask only the newest table (the third).
//!
//! Insert if new (`Table::insert_new_counted`, `Chain::insert_new_counted`):
//! the table models run under both mappings (executions per mapping; two
//! numbers where the stored copy starts in home, then in the other bucket),
//! the chain models with the one-slot tables above:
//!
//! | model | threads and operations | bound | executions |
//! |---|---|---|---|
//! | two callers | insert-new; insert-new (absent key, home not its primary) | 3 | 62 |
//! | three callers | 3 × insert-new | 3 | 4,334 |
//! | callers vs delete | insert-new; insert-new; delete of the one stored copy | 3 | 24,344 / 24,329 |
//! | caller vs back-and-forth migration | insert-new; 3 moves of the stored copy | 4 | 633 / 1,220 |
//! | two callers vs a mover | insert-new; insert-new; moves 0→1, 1→0 of any copy | 3 | 6,787 |
//! | two callers, home full | insert-new; insert-new (each must move `g` out of home first) | 3 | 2,406 |
//! | chain: both callers switch | insert-new; insert-new (first table full) | 3 | 74,862 |
//! | chain: one caller sees the new table | insert-new of `a`; insert-new of `b` (publishes table 1), then of `a` | 3 | 20,343 |
//!
//! Broken variants, each checked by editing `table.rs` or `chain.rs` and
//! running the models: the other bucket read before home fails the
//! back-and-forth and mover models (a copy moved out of home between the two
//! reads is missed); a lookup then a plain insert fails every table model
//! with two adders and the second chain model; older tables passed with a
//! plain lookup instead of `absent_here`, `absent_here` without its CAS, or
//! no check that the table is still the newest, fail the second chain model
//! (the key stored in tables 0 and 1); a `Relaxed` load of home fails the
//! back-and-forth, mover and second chain models; retrying a failed add's CAS
//! without reading the pair again fails all but the first chain model;
//! answering "present" when the add's CAS fails fails the second chain model
//! (another key's add changed home). The home-full model fails when a
//! discovery that finds no path is final without reading home again (the
//! other caller's add filled home: `Full` for a present key). Nothing fails
//! with `SeqCst` weakened to `Acquire`/`AcqRel` (the argument uses only the
//! order of each home word's changes and acquire/release; nor does loom model
//! the single total order of `SeqCst` loads and stores), and no variant tried
//! fails the delete model alone: it checks the answers' linearizability
//! (copies = adds ≤ 1; a caller that starts after the delete returned finds
//! the key absent unless the other caller added it).
//!
//! The models were checked against deliberately broken variants of the table;
//! each of these makes at least one model fail: no retry rule; deletes that scan
//! once; moves without the undo step; inserts that do not advance the counter;
//! `Relaxed` instead of `Acquire` loads. (The epoch protocol of the shared region,
//! which snapshots and reclamation rely on, has its models in `region::epoch`.)

use loom::sync::Arc;
use loom::thread;

use super::atomic::Ordering;
use super::layout::{Geometry, Mapping, Params, DEFAULT_SEED};
use super::table::{Full, OwnedFilter, Table};

const PREEMPTION_BOUND: usize = 3;
const BOUND_FOR_LOOKUP: usize = 4;

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_with_bound(PREEMPTION_BOUND, f);
}

/// Explores every interleaving of `f` up to `bound` preemptions and prints how many
/// executions that took (shared with the region's models).
pub(crate) fn model_with_bound(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    RUNS.store(0, std::sync::atomic::Ordering::Relaxed);
    b.check(move || {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    eprintln!("loom runs: {}", RUNS.load(std::sync::atomic::Ordering::Relaxed));
}

const MAPPINGS: [Mapping; 2] = [Mapping::Fastrange, Mapping::PowerOfTwoXor];

fn params(buckets: u64, mapping: Mapping) -> Params {
    Params { fingerprint_bits: 12, slots_per_bucket: 4, bucket_count: buckets, seed: DEFAULT_SEED, mapping }
}

fn filter(buckets: u64, mapping: Mapping) -> Arc<OwnedFilter> {
    Arc::new(OwnedFilter::new(params(buckets, mapping)))
}

/// The `n`-th fingerprint whose alternate of bucket `from` is `to` (in a table with
/// `buckets` buckets under `mapping`).
fn fp_with_alternate(from: u64, to: u64, buckets: u64, mapping: Mapping, n: usize) -> u64 {
    let g = Geometry::new(&params(buckets, mapping));
    (1..4096u64).filter(|&fp| g.alternate(from, fp) == to).nth(n).expect("such a fingerprint exists")
}

/// Runs `op` on the table in a new loom thread.
fn spawn<R: Send + 'static>(
    f: &Arc<OwnedFilter>,
    op: impl FnOnce(Table<'_>) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let f = f.clone();
    thread::spawn(move || op(f.table()))
}

/// Physical copies of `fp` in bucket `i`.
fn copies(t: &Table<'_>, i: u64, fp: u64) -> usize {
    let g = t.geometry();
    let w = t.bucket_words()[i as usize].load(Ordering::Relaxed);
    (0..g.slots).filter(|&s| g.slot(w, s) == fp).count()
}

fn move_between(t: &Table<'_>, from: u64, to: u64, fp: u64) -> bool {
    let w = t.bucket_words()[from as usize].load(Ordering::Acquire);
    match t.geometry().find(w, fp) {
        Some(s) => t.move_fingerprint(from, s, fp, to),
        None => false,
    }
}

/// Thread A looks up `f` (buckets 0 and 1) once; thread B moves `f` 1→0→1→0, the
/// three moves it takes to slip past all four reads of a lookup that starts while
/// `f` is in bucket 1. The lookup must find it under every interleaving: this is
/// the back-and-forth case the two-phase rule exists for. The miss needs about six
/// context switches, so this model runs with a preemption bound of 7; without the
/// retry rule it fails (checked by hand: `make loom` with the rule disabled).
#[test]
fn loom_lookup_races_back_and_forth_migration() {
    for mapping in MAPPINGS {
        model_with_bound(BOUND_FOR_LOOKUP, move || {
            let f = filter(2, mapping);
            let fp = fp_with_alternate(0, 1, 2, mapping, 0);
            f.table().insert_fingerprint(1, fp).unwrap();
            let reader = spawn(&f, move |t| assert!(t.contains_fingerprint(0, fp), "false negative during migration"));
            let mover = spawn(&f, move |t| {
                for (from, to) in [(1, 0), (0, 1), (1, 0)] {
                    assert!(move_between(&t, from, to, fp));
                }
            });
            reader.join().unwrap();
            mover.join().unwrap();
            let t = f.table();
            assert_eq!(copies(&t, 0, fp), 1);
            assert_eq!(copies(&t, 1, fp), 0);
        });
    }
}

/// Thread A deletes `f` (buckets 0 and 1); thread B moves it 1→0→1→0. The delete
/// must find it (it uses the lookup's two-phase scan) and leave no copy behind.
#[test]
fn loom_delete_races_back_and_forth_migration() {
    for mapping in MAPPINGS {
        model_with_bound(BOUND_FOR_LOOKUP, move || {
            let f = filter(2, mapping);
            let fp = fp_with_alternate(0, 1, 2, mapping, 0);
            f.table().insert_fingerprint(1, fp).unwrap();
            let deleter = spawn(&f, move |t| assert!(t.delete_fingerprint(0, fp), "delete missed a moving copy"));
            let mover = spawn(&f, move |t| {
                for (from, to) in [(1, 0), (0, 1), (1, 0)] {
                    move_between(&t, from, to, fp);
                }
            });
            deleter.join().unwrap();
            mover.join().unwrap();
            let t = f.table();
            assert_eq!(copies(&t, 0, fp) + copies(&t, 1, fp), 0);
            assert_eq!(t.item_count(), 0);
        });
    }
}

/// A copy of `f` can also shift between its buckets without any move: insert a
/// colliding copy into one bucket, delete a copy from the other. Thread B does that
/// three times (1→0→1→0) while one copy stays logically present throughout;
/// thread A's lookup must still find `f`. This is why inserts and deletes advance
/// the bucket counters too.
#[test]
fn loom_lookup_races_colliding_insert_and_delete() {
    for mapping in MAPPINGS {
        model_with_bound(BOUND_FOR_LOOKUP, move || {
            let f = filter(2, mapping);
            let fp = fp_with_alternate(0, 1, 2, mapping, 0);
            f.table().insert_fingerprint(1, fp).unwrap();
            let reader = spawn(&f, move |t| assert!(t.contains_fingerprint(0, fp), "false negative"));
            let churn = spawn(&f, move |t| {
                for (into, from) in [(0, 1), (1, 0), (0, 1)] {
                    t.insert_fingerprint(into, fp).unwrap();
                    assert!(t.delete_fingerprint(from, fp));
                }
            });
            reader.join().unwrap();
            churn.join().unwrap();
            assert_eq!(f.table().item_count(), 1);
        });
    }
}

/// Thread A deletes the only copy of `f`; thread B moves it 0→1. Afterwards no copy
/// is left, the delete reported success, and the count is 0.
#[test]
fn loom_delete_races_migration_single_copy() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let fp = fp_with_alternate(0, 1, 2, mapping, 0);
            f.table().insert_fingerprint(0, fp).unwrap();
            let mover = spawn(&f, move |t| {
                move_between(&t, 0, 1, fp);
            });
            let deleter = spawn(&f, move |t| assert!(t.delete_fingerprint(0, fp), "delete missed a copy being moved"));
            mover.join().unwrap();
            deleter.join().unwrap();
            let t = f.table();
            assert_eq!(copies(&t, 0, fp) + copies(&t, 1, fp), 0, "delete plus move left a copy");
            assert_eq!(t.item_count(), 0);
            assert!(!t.contains_fingerprint(0, fp));
        });
    }
}

/// Two logical copies of `f` in bucket 0. Thread A deletes one; thread B moves one
/// 0→1; thread C looks `f` up. Exactly one copy remains, the lookup always finds
/// one, and the count is 1.
#[test]
fn loom_delete_races_migration_two_copies() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let fp = fp_with_alternate(0, 1, 2, mapping, 0);
            f.table().insert_fingerprint(0, fp).unwrap();
            f.table().insert_fingerprint(0, fp).unwrap();
            let mover = spawn(&f, move |t| {
                move_between(&t, 0, 1, fp);
            });
            let reader = spawn(&f, move |t| assert!(t.contains_fingerprint(0, fp), "false negative"));
            let deleter = spawn(&f, move |t| assert!(t.delete_fingerprint(0, fp)));
            for h in [mover, reader, deleter] {
                h.join().unwrap();
            }
            let t = f.table();
            assert_eq!(copies(&t, 0, fp) + copies(&t, 1, fp), 1, "a delete must remove exactly one copy");
            assert_eq!(t.item_count(), 1);
        });
    }
}

/// Two threads move the same copy of `f` 0→1 at once: one copy results.
#[test]
fn loom_two_movers_of_one_copy() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let fp = fp_with_alternate(0, 1, 2, mapping, 0);
            f.table().insert_fingerprint(0, fp).unwrap();
            let a = spawn(&f, move |t| {
                move_between(&t, 0, 1, fp);
            });
            let b = spawn(&f, move |t| {
                move_between(&t, 0, 1, fp);
            });
            a.join().unwrap();
            b.join().unwrap();
            let t = f.table();
            assert_eq!(copies(&t, 0, fp) + copies(&t, 1, fp), 1);
            assert!(t.contains_fingerprint(0, fp));
        });
    }
}

/// Seven of eight slots taken; threads A and B insert different fingerprints. One
/// succeeds, the other reports Full, nothing is lost, and the count is 8.
#[test]
fn loom_two_inserters_compete_for_the_last_slot() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let fps: Vec<u64> = (0..9).map(|n| fp_with_alternate(0, 1, 2, mapping, n)).collect();
            for &fp in &fps[..7] {
                f.table().insert_fingerprint(0, fp).unwrap();
            }
            let (x, y) = (fps[7], fps[8]);
            let a = spawn(&f, move |t| t.insert_fingerprint(0, x));
            let b = spawn(&f, move |t| t.insert_fingerprint(0, y));
            let (rx, ry) = (a.join().unwrap(), b.join().unwrap());
            assert!(rx.is_ok() != ry.is_ok(), "exactly one insert wins: {rx:?} {ry:?}");
            assert!(rx == Err(Full) || ry == Err(Full));
            let t = f.table();
            assert_eq!(t.item_count(), 8);
            for &fp in &fps[..7] {
                assert!(t.contains_fingerprint(0, fp), "an earlier item was lost");
            }
            let winner = if rx.is_ok() { x } else { y };
            assert!(t.contains_fingerprint(0, winner));
        });
    }
}

/// Buckets 0 and 1 are full; the new fingerprint `x` (pair 0/1) needs `g` moved
/// from bucket 0 to bucket 2 by path discovery and migration (thread A), while
/// thread B looks `g` up. The insert succeeds and `g` is never missed.
#[test]
fn loom_insert_with_migration_races_lookup() {
    for mapping in MAPPINGS {
        model(move || {
            // 3 buckets under fastrange (any count), 4 under power-of-two XOR.
            let m = if mapping == Mapping::Fastrange { 3 } else { 4 };
            let f = filter(m, mapping);
            let g = fp_with_alternate(0, 2, m, mapping, 0);
            let pair: Vec<u64> = (0..8).map(|n| fp_with_alternate(0, 1, m, mapping, n)).collect();
            let t = f.table();
            t.insert_fingerprint(0, g).unwrap();
            for &fp in &pair[..3] {
                t.insert_fingerprint(0, fp).unwrap();
            }
            for &fp in &pair[3..7] {
                t.insert_fingerprint(1, fp).unwrap();
            }
            let x = pair[7];
            let reader = spawn(&f, move |t| assert!(t.contains_fingerprint(0, g), "missed g during its migration"));
            let inserter = spawn(&f, move |t| t.insert_fingerprint(0, x).unwrap());
            reader.join().unwrap();
            inserter.join().unwrap();
            assert_eq!(t.item_count(), 9);
            assert!(t.contains_fingerprint(0, x) && t.contains_fingerprint(0, g));
            assert_eq!(copies(&t, 2, g), 1);
        });
    }
}

// --- Filters that grow (`chain.rs`) -----------------------------------------

use super::atomic::AtomicU64;
use super::chain::owned::OwnedChain;
use super::chain::{Deleted, Tables, MAX_TABLES};

/// Tables of one bucket of one 16-bit slot: each holds one key, so every second
/// insert adds a table, and a full table's path search is short.
fn one_slot() -> (Params, u64) {
    (
        Params {
            fingerprint_bits: 16,
            slots_per_bucket: 1,
            bucket_count: 1,
            seed: DEFAULT_SEED,
            mapping: Mapping::Fastrange,
        },
        1,
    )
}

/// Hashes of distinct keys whose 16-bit fingerprints differ.
fn keys(n: usize) -> Vec<u64> {
    let g = Geometry::new(&one_slot().0);
    let mut out: Vec<u64> = Vec::new();
    let mut k = 1u64;
    while out.len() < n {
        let h = super::hash::hash_i64(DEFAULT_SEED, k as i64);
        if out.iter().all(|&o| g.fingerprint(o) != g.fingerprint(h)) {
            out.push(h);
        }
        k += 1;
    }
    out
}

/// A chain whose first table already holds `k0` (stored into the table
/// directly, so that no insert of the chain has started building table 1), with
/// room for `more` tables after it.
fn full_chain(k0: u64, more: usize) -> Arc<OwnedChain> {
    let c = OwnedChain::with_tables(one_slot(), vec![one_slot(); more]);
    let d = c.directory();
    c.chain().tables.with_table(0, d.handle(0), |t| t.insert(k0)).unwrap();
    Arc::new(c)
}

/// Every handle published below the count is distinct: no table was published
/// twice or over another.
fn check_directory(c: &OwnedChain) {
    let hs = c.directory().handles();
    let mut sorted = hs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), hs.len(), "a table was published twice");
    assert!(hs.len() <= MAX_TABLES);
}

/// The first table is full; threads A and B each insert a key, so both find it
/// full and both build a table 1 of their own (the one that loses the slot
/// gives its table back), or one builds table 1 and the other uses it, or
/// builds table 2 early. Both inserts succeed, every key is found, and the
/// count is exact. Fails if a table is published by a plain store instead of a
/// compare-and-swap (the second table overwrites the first, losing its key), or
/// if the count is advanced before the handle is in its slot.
#[test]
fn loom_chain_inserts_race_a_table_switch() {
    model(|| {
        let ks = keys(3);
        let c = full_chain(ks[0], 3);
        let (a, b) = (ks[1], ks[2]);
        let ta = {
            let c = c.clone();
            thread::spawn(move || c.chain().insert(a))
        };
        let tb = {
            let c = c.clone();
            thread::spawn(move || c.chain().insert(b))
        };
        assert!(ta.join().unwrap().is_ok(), "insert of a refused");
        assert!(tb.join().unwrap().is_ok(), "insert of b refused");
        let ch = c.chain();
        for k in ks {
            assert!(ch.contains(k), "a key was lost in the switch");
        }
        assert_eq!(ch.item_count(), 3);
        check_directory(&c);
    });
}

/// The first table is full and holds `k0`; thread A inserts `a` (adding a
/// table) and then raises a flag; thread B looks up `k0`, and `a` once it sees
/// the flag. Neither lookup may miss. Fails if lookups ask only the newest
/// table, or if the count is read with `Relaxed` (B may see the count of two
/// tables before the second handle: "counted but not published").
#[test]
fn loom_chain_lookup_during_a_table_switch() {
    model(|| {
        let ks = keys(2);
        let (k0, a) = (ks[0], ks[1]);
        let c = full_chain(k0, 2);
        let flag = Arc::new(AtomicU64::new(0));
        let ta = {
            let (c, flag) = (c.clone(), flag.clone());
            thread::spawn(move || {
                c.chain().insert(a).unwrap();
                flag.store(1, Ordering::Release);
            })
        };
        let tb = {
            let (c, flag) = (c.clone(), flag.clone());
            thread::spawn(move || {
                assert!(c.chain().contains(k0), "missed a key of the first table during a switch");
                if flag.load(Ordering::Acquire) == 1 {
                    assert!(c.chain().contains(a), "missed a key stored before the lookup began");
                }
            })
        };
        ta.join().unwrap();
        tb.join().unwrap();
        check_directory(&c);
    });
}

/// The first table holds `k0`; thread A inserts `a` (which goes to a new
/// table) while thread B deletes `k0`. The delete removes `k0` (the only table
/// holding its fingerprint is the first), `a` stays, and the count is 1.
/// Fails if deletes ask only the newest table (B finds table 1 published but
/// without `k0`, and reports no copy).
#[test]
fn loom_chain_delete_during_a_table_switch() {
    model(|| {
        let ks = keys(2);
        let (k0, a) = (ks[0], ks[1]);
        let c = full_chain(k0, 2);
        let ta = {
            let c = c.clone();
            thread::spawn(move || c.chain().insert(a).unwrap())
        };
        let tb = {
            let c = c.clone();
            thread::spawn(move || assert_eq!(c.chain().delete(k0), Deleted::Removed, "delete missed a copy"))
        };
        ta.join().unwrap();
        tb.join().unwrap();
        let ch = c.chain();
        assert!(!ch.contains(k0), "the deleted key is still there");
        assert!(ch.contains(a), "the inserted key went");
        assert_eq!(ch.item_count(), 1);
        check_directory(&c);
    });
}

// --- Insert if new (`Table::insert_new_counted`, `Chain::insert_new_counted`) ---

use super::hash::hash_i64;
use super::table::{newkey::NewKey, OpStats};

/// The `n`-th key (hash of an integer) whose primary bucket is `primary` and
/// whose fingerprint's alternate there is `alternate`, leaving out the
/// fingerprints `not`.
fn key_in_pair(primary: u64, alternate: u64, buckets: u64, mapping: Mapping, not: &[u64], n: usize) -> u64 {
    let g = Geometry::new(&params(buckets, mapping));
    (0..i64::MAX)
        .map(|k| hash_i64(DEFAULT_SEED, k))
        .filter(|&h| {
            let fp = g.fingerprint(h);
            g.primary(h) == primary && g.alternate(primary, fp) == alternate && !not.contains(&fp)
        })
        .nth(n)
        .expect("such a key exists")
}

/// [`Table::insert_new_counted`] of a single table (always the newest).
fn insert_new(t: &Table<'_>, h: u64) -> NewKey {
    t.insert_new_counted(h, &mut OpStats::default(), &|| true)
}

/// Physical copies of a key's fingerprint in its pair, counted slot by slot
/// (the threads have been joined), checked against [`Table::copies`].
fn pair_copies(t: &Table<'_>, h: u64) -> usize {
    let g = t.geometry();
    let (i1, fp) = (g.primary(h), g.fingerprint(h));
    let n = copies(t, i1, fp) + copies(t, g.alternate(i1, fp), fp);
    assert_eq!(t.copies(h), n as u64, "Table::copies disagrees with the words");
    n
}

fn added(results: &[NewKey]) -> usize {
    assert!(
        results.iter().all(|&r| r == NewKey::Added || r == NewKey::Present),
        "a caller neither added nor saw the key: {results:?}"
    );
    results.iter().filter(|&&r| r == NewKey::Added).count()
}

/// Threads A and B insert the same absent key if new. Exactly one adds it, the
/// other answers present; one copy is stored and counted. The key's primary
/// bucket is 1, so both callers serialise on the alternate (bucket 0, home).
/// Fails if the add is a plain insert after an unvalidated lookup.
#[test]
fn loom_insert_new_two_callers() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let k = key_in_pair(1, 0, 2, mapping, &[], 0);
            let a = spawn(&f, move |t| insert_new(&t, k));
            let b = spawn(&f, move |t| insert_new(&t, k));
            let r = [a.join().unwrap(), b.join().unwrap()];
            assert_eq!(added(&r), 1, "exactly one caller adds: {r:?}");
            let t = f.table();
            assert_eq!(pair_copies(&t, k), 1, "insert-if-new stored a copy twice");
            assert_eq!(t.item_count(), 1);
        });
    }
}

/// Threads A, B and C insert the same absent key if new: exactly one adds it.
#[test]
fn loom_insert_new_three_callers() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let k = key_in_pair(0, 1, 2, mapping, &[], 0);
            let hs: Vec<_> = (0..3).map(|_| spawn(&f, move |t| insert_new(&t, k))).collect();
            let r: Vec<NewKey> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            assert_eq!(added(&r), 1, "exactly one caller adds: {r:?}");
            let t = f.table();
            assert_eq!(pair_copies(&t, k), 1, "insert-if-new stored a copy twice");
            assert_eq!(t.item_count(), 1);
        });
    }
}

/// The key is stored once (in its home bucket, then in the other one); threads
/// A and B insert it if new while thread C deletes it. Linearizable answers:
/// the delete removes the copy; each caller that adds does so after the delete,
/// and only one can (the other then sees its copy), so the pair ends with as
/// many copies as adds, at most one, and the count agrees. A caller that begins
/// after the delete has returned (C raises a flag) finds the key absent unless
/// the other caller added it: then some caller added.
#[test]
fn loom_insert_new_races_delete() {
    for mapping in MAPPINGS {
        for at in [0, 1] {
            model(move || {
                let f = filter(2, mapping);
                let k = key_in_pair(0, 1, 2, mapping, &[], 0);
                let fp = f.table().geometry().fingerprint(k);
                f.table().insert_fingerprint(at, fp).unwrap();
                let gone = Arc::new(AtomicU64::new(0));
                let inserter = |gone: Arc<AtomicU64>| {
                    spawn(&f, move |t| {
                        let after = gone.load(Ordering::Acquire) == 1;
                        (insert_new(&t, k), after)
                    })
                };
                let (a, b) = (inserter(gone.clone()), inserter(gone.clone()));
                let d = {
                    let gone = gone.clone();
                    spawn(&f, move |t| {
                        assert!(t.delete(k), "delete missed the stored copy");
                        gone.store(1, Ordering::Release);
                    })
                };
                let ((ra, after_a), (rb, after_b)) = (a.join().unwrap(), b.join().unwrap());
                d.join().unwrap();
                let n = added(&[ra, rb]);
                assert!(n <= 1, "both callers added: {ra:?} {rb:?}");
                if after_a || after_b {
                    assert_eq!(n, 1, "a caller that began after the delete saw a copy: {ra:?} {rb:?}");
                }
                let t = f.table();
                assert_eq!(pair_copies(&t, k), n, "copies do not match the adds after the delete");
                assert_eq!(t.item_count(), n as u64);
            });
        }
    }
}

/// The key's one copy moves between its buckets three times (thread B:
/// 0→1→0→1 after an insert-if-new put it into home, or 1→0→1→0 when it was
/// stored into the other bucket directly) while thread A inserts it if new: A
/// must see it however the moves fall between its reads, and answer present.
/// Fails if the other bucket is read before home (one move from home to the
/// other bucket between the two reads hides the copy, and home is unchanged
/// from then to the add).
#[test]
fn loom_insert_new_races_back_and_forth_migration() {
    for mapping in MAPPINGS {
        for start in [0, 1] {
            model_with_bound(BOUND_FOR_LOOKUP, move || {
                let f = filter(2, mapping);
                let k = key_in_pair(0, 1, 2, mapping, &[], 0);
                let fp = f.table().geometry().fingerprint(k);
                if start == 0 {
                    assert_eq!(insert_new(&f.table(), k), NewKey::Added);
                    assert_eq!(copies(&f.table(), 0, fp), 1);
                } else {
                    f.table().insert_fingerprint(1, fp).unwrap();
                }
                let inserter = spawn(&f, move |t| insert_new(&t, k));
                let mover = spawn(&f, move |t| {
                    for (from, to) in [(start, 1 - start), (1 - start, start), (start, 1 - start)] {
                        assert!(move_between(&t, from, to, fp));
                    }
                });
                assert_eq!(inserter.join().unwrap(), NewKey::Present, "insert-if-new missed a moving copy");
                mover.join().unwrap();
                let t = f.table();
                assert_eq!(pair_copies(&t, k), 1);
                assert_eq!(copies(&t, 1 - start, fp), 1);
                assert_eq!(t.item_count(), 1);
            });
        }
    }
}

/// Threads A and B insert the same absent key if new while thread C moves
/// whatever copy it finds 0→1 and then back 1→0: the copy the winner adds may
/// move before the loser looks. Exactly one adds, one copy stays.
#[test]
fn loom_insert_new_two_callers_race_a_mover() {
    for mapping in MAPPINGS {
        model(move || {
            let f = filter(2, mapping);
            let k = key_in_pair(0, 1, 2, mapping, &[], 0);
            let fp = f.table().geometry().fingerprint(k);
            let a = spawn(&f, move |t| insert_new(&t, k));
            let b = spawn(&f, move |t| insert_new(&t, k));
            let mover = spawn(&f, move |t| {
                move_between(&t, 0, 1, fp);
                move_between(&t, 1, 0, fp);
            });
            let r = [a.join().unwrap(), b.join().unwrap()];
            mover.join().unwrap();
            assert_eq!(added(&r), 1, "exactly one caller adds: {r:?}");
            let t = f.table();
            assert_eq!(pair_copies(&t, k), 1, "insert-if-new stored a copy twice");
            assert_eq!(t.item_count(), 1);
        });
    }
}

/// Home (bucket 0) is full and so is the other bucket; threads A and B insert
/// the same key if new, so each must first make room in home, by moving `g`
/// to bucket 2 (path discovery from home and migration). Exactly one adds,
/// `g` is moved once, and nothing is lost. The loser may find home full
/// again, with the winner's copy: its discovery then finds no path, and it
/// must read home again (answer present), not report the table full.
#[test]
fn loom_insert_new_with_migration_two_callers() {
    for mapping in MAPPINGS {
        model(move || {
            let m = if mapping == Mapping::Fastrange { 3 } else { 4 };
            let f = filter(m, mapping);
            let k = key_in_pair(0, 1, m, mapping, &[], 0);
            let fk = f.table().geometry().fingerprint(k);
            let g = fp_with_alternate(0, 2, m, mapping, 0);
            let pair: Vec<u64> =
                (0..8).map(|n| fp_with_alternate(0, 1, m, mapping, n + 1)).filter(|&p| p != fk).take(7).collect();
            let t = f.table();
            t.insert_fingerprint(0, g).unwrap();
            for &p in &pair[..3] {
                t.insert_fingerprint(0, p).unwrap();
            }
            for &p in &pair[3..7] {
                t.insert_fingerprint(1, p).unwrap();
            }
            let a = spawn(&f, move |t| insert_new(&t, k));
            let b = spawn(&f, move |t| insert_new(&t, k));
            let r = [a.join().unwrap(), b.join().unwrap()];
            assert_eq!(added(&r), 1, "exactly one caller adds: {r:?}");
            assert_eq!(pair_copies(&t, k), 1, "insert-if-new stored a copy twice");
            assert_eq!(copies(&t, 0, fk), 1, "the copy is not in home");
            assert_eq!((copies(&t, 0, g), copies(&t, 2, g)), (0, 1), "g was not moved exactly once");
            for &p in &pair[..7] {
                assert!(t.contains_fingerprint(0, p), "a stored fingerprint was lost");
            }
            assert_eq!(t.item_count(), 9);
        });
    }
}

/// [`Chain::insert_new_counted`] without statistics.
fn chain_insert_new(c: &OwnedChain, h: u64) -> Result<bool, Full> {
    c.chain().insert_new_counted(h, &mut OpStats::default())
}

/// The first table is full (it holds `k0`); threads A and B insert the same
/// key if new, so both find the table full and add a table 1 (one of them
/// gives its own back) or find it added. Exactly one adds the key, into table
/// 1; one copy over the chain, the count exact, the directory sound.
#[test]
fn loom_insert_new_chain_both_switch() {
    model(|| {
        let ks = keys(2);
        let (k0, a) = (ks[0], ks[1]);
        let c = full_chain(k0, 2);
        let ta = {
            let c = c.clone();
            thread::spawn(move || chain_insert_new(&c, a))
        };
        let tb = {
            let c = c.clone();
            thread::spawn(move || chain_insert_new(&c, a))
        };
        let r = [ta.join().unwrap(), tb.join().unwrap()];
        assert_eq!(r.iter().filter(|&&x| x == Ok(true)).count(), 1, "exactly one caller adds: {r:?}");
        assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
        let ch = c.chain();
        assert_eq!(ch.copies(a), 1, "the key was stored twice");
        assert_eq!(ch.copies(k0), 1);
        assert_eq!(ch.item_count(), 2);
        check_directory(&c);
    });
}

/// Table 0 has two slots but a capacity of one; table 1 one slot. Thread A
/// inserts `a` if new, while thread B inserts `b` if new (which fills table 0
/// to its capacity, so B builds and publishes table 1) and then `a` if new.
/// A may add into table 0 while B, having seen table 1, adds into table 1:
/// they meet only in table 0's home word, which B's `absent_here` touches and
/// A's add expects unchanged, after which A sees table 1 and starts again.
/// Exactly one adds `a`; one copy over the chain. Fails if older tables are
/// passed with a plain lookup, or if the add does not check that its table is
/// still the newest.
#[test]
fn loom_insert_new_chain_one_caller_sees_the_new_table() {
    model(|| {
        let ks = keys(2);
        let (a, b) = (ks[0], ks[1]);
        let (one, _) = one_slot();
        let c = Arc::new(OwnedChain::with_tables((Params { slots_per_bucket: 2, ..one }, 1), vec![one_slot()]));
        let ta = {
            let c = c.clone();
            thread::spawn(move || chain_insert_new(&c, a))
        };
        let tb = {
            let c = c.clone();
            thread::spawn(move || {
                assert_eq!(chain_insert_new(&c, b), Ok(true), "b was absent");
                chain_insert_new(&c, a)
            })
        };
        let r = [ta.join().unwrap(), tb.join().unwrap()];
        assert_eq!(r.iter().filter(|&&x| x == Ok(true)).count(), 1, "exactly one caller adds: {r:?}");
        assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
        let ch = c.chain();
        assert_eq!(ch.copies(a), 1, "the key was stored in two tables");
        assert_eq!(ch.copies(b), 1);
        assert_eq!(ch.item_count(), 2);
        check_directory(&c);
    });
}
