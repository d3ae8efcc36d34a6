//! `make bench-core`: native benchmarks of the lock-free filter core against its
//! references, all measured in the same run, interleaved, median of several
//! trials; prints ratios (absolute times on this shared machine are noise).
//!
//! - single-thread lookup (hits, misses) and insert at 10M items: against the
//!   `cuckoofilter` crate (given the same xxh3 hasher), against this table behind a
//!   `Mutex`, and against a raw loop reading 2 random words of an array as large as
//!   the table (this machine's memory limit);
//! - lookup throughput with 2 threads against 1;
//! - 50/50 insert/lookup and insert/delete churn at 90% load with 2 threads:
//!   lock-free against `Mutex` and `RwLock` around the same table;
//! - load factor at the first failed insert, 4 slots per bucket, against the
//!   source's 95%;
//! - a filter that grows (`filter::chain`), made for 1,000 keys and filled with
//!   the same items: its lookups (hits, misses) and inserts against one table
//!   made for all of them, and its words against that table's.
//!
//! `BENCH_ITEMS` (default 10M) and `BENCH_TRIALS` (default 5) scale it.

use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex, RwLock};
use std::time::Instant;

use cuckoo::filter::hash_i64;
use cuckoo::filter::{size_for_capacity, DEFAULT_FPP};
use cuckoo::filter::{Full, OwnedFilter, Table};
use cuckoo::filter::{Mapping, Params, DEFAULT_SEED};
use xxhash_rust::xxh3::Xxh3Default;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// SplitMix64: deterministic keys and indices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Runs each named closure `trials` times, interleaved; median seconds per name.
fn interleaved(trials: usize, cases: &mut [(&str, &mut dyn FnMut() -> f64)]) -> Vec<f64> {
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..trials {
        for (i, (_, f)) in cases.iter_mut().enumerate() {
            times[i].push(f());
        }
    }
    times.into_iter().map(median).collect()
}

fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn prefetch(w: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(w as *const u64 as *const i8)
    };
}

fn lookups(t: &Table<'_>, keys: &[i64]) -> usize {
    keys.iter().filter(|&&k| t.contains(hash_i64(DEFAULT_SEED, k))).count()
}

fn main() {
    let items = env("BENCH_ITEMS", 10_000_000);
    let trials = env("BENCH_TRIALS", 5);
    let mut rng = Rng(42);
    let keys: Vec<i64> = (0..items).map(|_| rng.next() as i64).collect();
    let misses: Vec<i64> = (0..items).map(|_| rng.next() as i64).collect();
    let mut probe: Vec<i64> = keys.clone();
    for i in (1..probe.len()).rev() {
        probe.swap(i, rng.next() as usize % (i + 1));
    }

    println!("== single thread, {items} items (median of {trials})");
    let params = size_for_capacity(items as u64, DEFAULT_FPP, u64::MAX).unwrap().params;
    let ours = OwnedFilter::new(params);
    let build_ours = timed(|| {
        for &k in &keys {
            ours.table().insert(hash_i64(DEFAULT_SEED, k)).unwrap();
        }
    });
    let mut theirs = cuckoofilter::CuckooFilter::<Xxh3Default>::with_capacity(items);
    let build_theirs = timed(|| {
        for k in &keys {
            theirs.add(k).unwrap();
        }
    });
    let mutex = Mutex::new(());
    let words = params.bucket_count as usize;
    let raw: Vec<u64> = (0..words as u64).collect();
    let t = ours.table();
    let n = probe.len() as f64;
    let mut cases: Vec<(&str, &mut dyn FnMut() -> f64)> = Vec::new();
    let mut a = || timed(|| assert_eq!(black_box(lookups(&t, &probe)), items));
    let mut b = || {
        timed(|| {
            black_box(lookups(&t, &misses));
        })
    };
    let mut c = || timed(|| assert_eq!(black_box(probe.iter().filter(|&k| theirs.contains(k)).count()), items));
    let mut d = || {
        timed(|| {
            black_box(misses.iter().filter(|&k| theirs.contains(k)).count());
        })
    };
    let mut e = || {
        timed(|| {
            let hits = probe
                .iter()
                .filter(|&&k| {
                    let _g = mutex.lock().unwrap();
                    t.contains(hash_i64(DEFAULT_SEED, k))
                })
                .count();
            assert_eq!(black_box(hits), items);
        })
    };
    // The machine's limit: two independent random reads per lookup, from an array
    // of the table's size, indices from a cheap generator (no hashing).
    let mut f = || {
        timed(|| {
            let m = words as u64;
            let mut x = 7u64;
            let mut acc = 0u64;
            for _ in 0..probe.len() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // Two indices over the whole table (any size: multiply-shift).
                let i1 = (((x >> 32) * m) >> 32) as usize;
                let i2 = ((((x >> 16) & 0xffff_ffff) * m) >> 32) as usize;
                acc = acc.wrapping_add(raw[i1] ^ raw[i2]);
            }
            black_box(acc);
        })
    };
    // Batched lookups (`contains_many`, with prefetch), hashing included.
    let batched = |keys: &[i64]| -> usize {
        let (mut hashes, mut answers) = (vec![0u64; 4096], vec![false; 4096]);
        let mut hits = 0;
        for chunk in keys.chunks(4096) {
            for (h, &k) in hashes.iter_mut().zip(chunk) {
                *h = hash_i64(DEFAULT_SEED, k);
            }
            t.contains_many(&hashes[..chunk.len()], &mut answers[..chunk.len()]);
            hits += answers[..chunk.len()].iter().filter(|&&a| a).count();
        }
        hits
    };
    let mut g = || timed(|| assert_eq!(black_box(batched(&probe)), items));
    let mut h = || {
        timed(|| {
            black_box(batched(&misses));
        })
    };
    cases.push(("ours hit", &mut a));
    cases.push(("ours miss", &mut b));
    cases.push(("crate hit", &mut c));
    cases.push(("crate miss", &mut d));
    cases.push(("mutex hit", &mut e));
    cases.push(("raw 2 reads", &mut f));
    // The same limit with the same prefetch distance as `contains_many`.
    let mut r = || {
        timed(|| {
            let m = words as u64;
            let idx = |x: u64| ((((x >> 32) * m) >> 32) as usize, ((((x >> 16) & 0xffff_ffff) * m) >> 32) as usize);
            let step = |x: u64| x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (mut x, mut ahead) = (7u64, 7u64);
            for _ in 0..16 {
                ahead = step(ahead);
            }
            let mut acc = 0u64;
            for _ in 0..probe.len() {
                ahead = step(ahead);
                let (p1, p2) = idx(ahead);
                prefetch(&raw[p1]);
                prefetch(&raw[p2]);
                x = step(x);
                let (i1, i2) = idx(x);
                acc = acc.wrapping_add(raw[i1] ^ raw[i2]);
            }
            black_box(acc);
        })
    };
    cases.push(("raw+prefetch", &mut r));
    cases.push(("batch hit", &mut g));
    cases.push(("batch miss", &mut h));
    let s = interleaved(trials, &mut cases);
    let ns = |i: usize| s[i] * 1e9 / n;
    for (i, (name, _)) in cases.iter().enumerate() {
        println!("  {name:12} {:7.1} ns/lookup", ns(i));
    }
    println!(
        "  build: ours {:.1} ns/insert, crate {:.1} ns/insert (one run each)",
        build_ours * 1e9 / n,
        build_theirs * 1e9 / n
    );
    println!(
        "  lookup rate vs cuckoofilter crate: hits {:.2}x, misses {:.2}x  (goal >= 1.3x)",
        ns(2) / ns(0),
        ns(3) / ns(1)
    );
    println!("  lookup rate vs own table behind a Mutex: {:.2}x", ns(4) / ns(0));
    println!(
        "  lookup rate vs raw 2-random-read limit: hits {:.2}x, misses {:.2}x  (goal >= 0.8x)",
        ns(5) / ns(0),
        ns(5) / ns(1)
    );
    println!(
        "  batched lookups (contains_many, prefetch) vs raw limit with the same prefetch: hits {:.2}x, misses {:.2}x  (goal >= 0.8x)",
        ns(6) / ns(7),
        ns(6) / ns(8)
    );
    println!("  insert rate vs cuckoofilter crate: {:.2}x", build_theirs / build_ours);
    println!(
        "  space: ours {} MB ({}-bit fingerprints + counter), crate {} MB (8-bit fingerprints)",
        (words * 8) >> 20,
        params.fingerprint_bits,
        items.next_power_of_two() >> 20
    );
    drop(cases);

    println!("== lookup throughput, 2 threads vs 1 ({items} lookups)");
    let shared = Arc::new(ours);
    let probe = Arc::new(probe);
    let threaded = |threads: usize| {
        let start = Arc::new(Barrier::new(threads + 1));
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let (f, p, st) = (shared.clone(), probe.clone(), start.clone());
                std::thread::spawn(move || {
                    let chunk = p.len() / threads;
                    st.wait();
                    black_box(lookups(&f.table(), &p[i * chunk..(i + 1) * chunk]))
                })
            })
            .collect();
        release_and_time(&start, hs)
    };
    let mut one = || threaded(1);
    let mut two = || threaded(2);
    let s = interleaved(trials, &mut [("1 thread", &mut one), ("2 threads", &mut two)]);
    println!("  1 thread {:.1} ns/lookup, 2 threads {:.1} ns/lookup (wall)", s[0] * 1e9 / n, s[1] * 1e9 / n);
    println!("  speed-up with 2 threads: {:.2}x  (goal >= 1.8x)", s[0] / s[1]);
    drop(shared);

    churn(trials);
    load_at_first_failure();
    grown(&keys, &misses, &probe[..], trials);
}

/// How a churn benchmark reaches the table.
#[derive(Clone, Copy, PartialEq)]
enum Guard {
    LockFree,
    Mutex,
    RwLock,
}

/// 2 threads on one table at 90% load, each doing `ops` operations of a 50/50 mix:
/// insert/lookup (load drifts from 88% to 92%) or insert/delete (load stays).
fn churn_run(guard: Guard, deletes: bool, log2: u8, ops: usize) -> f64 {
    let params = Params {
        fingerprint_bits: 12,
        slots_per_bucket: 4,
        bucket_count: 1 << log2,
        seed: DEFAULT_SEED,
        mapping: Mapping::Fastrange,
    };
    let filter = Arc::new(OwnedFilter::new(params));
    let fill = params.slot_count() as f64 * if deletes { 0.90 } else { 0.88 };
    let per_thread = (fill / 2.0) as u64;
    let locks = Arc::new((Mutex::new(()), RwLock::new(())));
    let start = Arc::new(Barrier::new(3));
    let hs: Vec<_> = (0..2u64)
        .map(|id| {
            let (f, l, st) = (filter.clone(), locks.clone(), start.clone());
            std::thread::spawn(move || {
                let t = f.table();
                let key = |n: u64| hash_i64(DEFAULT_SEED, ((id << 48) | n) as i64);
                for n in 0..per_thread {
                    t.insert(key(n)).unwrap();
                }
                let (mut oldest, mut next) = (0u64, per_thread);
                let mut rng = Rng(id + 1);
                st.wait();
                for i in 0..ops {
                    let write = i % 2 == 0;
                    let mut op = || {
                        if write {
                            if t.insert(key(next)) == Err(Full) {
                                panic!("full during churn");
                            }
                        } else if deletes {
                            assert!(t.delete(key(oldest)));
                        } else {
                            assert!(t.contains(key(oldest + rng.next() % (next - oldest))));
                        }
                    };
                    match guard {
                        Guard::LockFree => op(),
                        Guard::Mutex => {
                            let _g = l.0.lock().unwrap();
                            op()
                        }
                        Guard::RwLock if write || deletes => {
                            let _g = l.1.write().unwrap();
                            op()
                        }
                        Guard::RwLock => {
                            let _g = l.1.read().unwrap();
                            op()
                        }
                    }
                    if write {
                        next += 1;
                    } else if deletes {
                        oldest += 1;
                    }
                }
            })
        })
        .collect();
    release_and_time(&start, hs)
}

/// Releases threads waiting on `start` and times them until all have finished.
fn release_and_time<T>(start: &Barrier, handles: Vec<std::thread::JoinHandle<T>>) -> f64 {
    start.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    t0.elapsed().as_secs_f64()
}

fn churn(trials: usize) {
    // 2^20 buckets (8 MB); 4% of the slots is 168k inserts per run.
    let log2 = 20;
    let ops = (1usize << log2) * 4 * 4 / 100;
    for (deletes, name) in [(false, "insert/lookup"), (true, "insert/delete")] {
        let mut lf = || churn_run(Guard::LockFree, deletes, log2, ops);
        let mut mx = || churn_run(Guard::Mutex, deletes, log2, ops);
        let mut rw = || churn_run(Guard::RwLock, deletes, log2, ops);
        let s = interleaved(trials, &mut [("lock-free", &mut lf), ("mutex", &mut mx), ("rwlock", &mut rw)]);
        let per = |x: f64| x * 1e9 / (2 * ops) as f64;
        println!(
            "== 50/50 {name} at ~90% load, 2 threads: lock-free {:.1}, Mutex {:.1}, RwLock {:.1} ns/op",
            per(s[0]),
            per(s[1]),
            per(s[2])
        );
        println!("  lock-free vs Mutex: {:.2}x, vs RwLock: {:.2}x  (goal >= 2x vs Mutex)", s[1] / s[0], s[2] / s[0]);
    }
}

fn grown(keys: &[i64], misses: &[i64], probe: &[i64], trials: usize) {
    use cuckoo::filter::{Growth, OwnedChain};
    let items = keys.len();
    println!("== a filter that grows from 1,000 to {items} items, against one made for {items} (median of {trials})");
    let growth = Growth { fpp: DEFAULT_FPP, expansion: 2 };
    let mut chain = None;
    let mut fixed = None;
    let mut build_chain = || {
        let c = OwnedChain::new(1000, growth).unwrap();
        let t = timed(|| {
            keys.iter().for_each(|&k| {
                c.chain().insert(hash_i64(DEFAULT_SEED, k)).unwrap();
            })
        });
        chain = Some(c);
        t
    };
    let params = size_for_capacity(items as u64, DEFAULT_FPP, u64::MAX).unwrap().params;
    let mut build_fixed = || {
        let f = OwnedFilter::new(params);
        let t = timed(|| keys.iter().for_each(|&k| f.table().insert(hash_i64(DEFAULT_SEED, k)).unwrap()));
        fixed = Some(f);
        t
    };
    let b = interleaved(trials.min(3), &mut [("grown", &mut build_chain), ("fixed", &mut build_fixed)]);
    let (c, f) = (chain.unwrap(), fixed.unwrap());
    // The tables' views taken once, as a call site keeps them for named filters.
    let (ch, t) = (c.chain(), f.table());
    let views = ch.views();
    let n = probe.len() as f64;
    let mut gh = || {
        timed(|| {
            assert_eq!(black_box(probe.iter().filter(|&&k| views.contains(hash_i64(DEFAULT_SEED, k))).count()), items)
        })
    };
    let mut fh = || timed(|| assert_eq!(black_box(lookups(&t, probe)), items));
    let mut gm = || {
        timed(|| {
            black_box(misses.iter().filter(|&&k| views.contains(hash_i64(DEFAULT_SEED, k))).count());
        })
    };
    let mut fm = || {
        timed(|| {
            black_box(lookups(&t, misses));
        })
    };
    let s = interleaved(
        trials,
        &mut [("grown hits", &mut gh), ("fixed hits", &mut fh), ("grown misses", &mut gm), ("fixed misses", &mut fm)],
    );
    let ns = |x: f64| x * 1e9 / n;
    println!(
        "  {} tables; words {:.2}x the fixed table's ({} against {} bytes)",
        ch.dir.count(),
        c.word_bytes() as f64 / (8 * params.bucket_count) as f64,
        c.word_bytes(),
        8 * params.bucket_count
    );
    println!("  lookup hit:  grown {:.1} ns, fixed {:.1} ns: {:.2}x the cost", ns(s[0]), ns(s[1]), s[0] / s[1]);
    println!(
        "  lookup miss: grown {:.1} ns, fixed {:.1} ns: {:.2}x the cost (a miss asks every table)",
        ns(s[2]),
        ns(s[3]),
        s[2] / s[3]
    );
    println!(
        "  insert:      grown {:.1} ns, fixed {:.1} ns: {:.2}x the cost",
        b[0] * 1e9 / n,
        b[1] * 1e9 / n,
        b[0] / b[1]
    );
}

fn load_at_first_failure() {
    println!("== load at the first failed insert, 4 slots x 12 bits (source: 95%)");
    for log2 in [12u8, 16, 20] {
        let mut loads = Vec::new();
        for seed in 0..3u64 {
            let params = Params {
                fingerprint_bits: 12,
                slots_per_bucket: 4,
                bucket_count: 1 << log2,
                seed: DEFAULT_SEED,
                mapping: Mapping::Fastrange,
            };
            let f = OwnedFilter::new(params);
            let mut rng = Rng(seed * 7919 + log2 as u64);
            let mut n = 0u64;
            while f.table().insert(hash_i64(DEFAULT_SEED, rng.next() as i64)).is_ok() {
                n += 1;
            }
            loads.push(n as f64 / params.slot_count() as f64);
        }
        let mean = loads.iter().sum::<f64>() / loads.len() as f64;
        println!(
            "  2^{log2} buckets: {:.2}% mean over 3 fills (min {:.2}%)",
            100.0 * mean,
            100.0 * loads.iter().cloned().fold(1.0, f64::min)
        );
    }
}
