//! Tests of the registry: names per database, exhaustion, reclamation under
//! pinned readers and churn, generations and reload marks, images and
//! snapshots under concurrent writers.

use super::*;
use crate::filter::hash_i64;
use crate::filter::v2::{self, DenseHeader};
use crate::filter::KeyType;
use crate::filter::DEFAULT_SEED;
use crate::filter::{size_for_capacity, DEFAULT_FPP};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Snapshots that had to pause writers (to show the test takes that path).
pub(super) static PAUSED_SNAPSHOTS: AtomicU64 = AtomicU64::new(0);

/// A region in private memory, aligned like the one the glue maps.
struct Mem {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}
// SAFETY: the memory is only reached through `Region`, which uses atomics.
unsafe impl Send for Mem {}
// SAFETY: as for Send.
unsafe impl Sync for Mem {}
impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: allocated in `region` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn region(size: u64) -> (Arc<Mem>, Region) {
    let layout = std::alloc::Layout::from_size_align(size as usize, 4096).unwrap();
    // SAFETY: non-zero size.
    let ptr = unsafe { std::alloc::alloc(layout) };
    assert!(!ptr.is_null());
    // Garbage in the block area must not matter: fill it.
    // SAFETY: freshly allocated, `size` bytes.
    unsafe { std::ptr::write_bytes(ptr, 0xA5, size as usize) };
    // SAFETY: exclusive, aligned, outlives the Region via the Arc.
    let r = unsafe { Region::init(ptr, size, 8) }.unwrap();
    (Arc::new(Mem { ptr, layout }), r)
}

fn spec(db: u32, name: &str) -> NewFilter<'_> {
    NewFilter {
        db,
        owner: 10,
        name,
        capacity: 1000,
        fpp: DEFAULT_FPP,
        durable: false,
        key: crate::filter::KeyType::NONE,
        growth: None,
    }
}

fn params(capacity: u64) -> Params {
    size_for_capacity(capacity, DEFAULT_FPP, u64::MAX).unwrap().params
}

/// One table sized for `capacity`.
fn one(capacity: u64) -> Vec<TableSpec> {
    one_of(params(capacity))
}

fn one_of(p: Params) -> Vec<TableSpec> {
    vec![TableSpec { params: p, capacity: 1000.min(p.slot_count()) }]
}

/// Table 0 of filter `info`.
fn tbl<'a>(r: &'a Region, info: &EntryInfo) -> Table<'a> {
    r.table_of(Region::head_handle(info.start_block))
}

/// `Contents` that copy a filter's words.
fn words_of(f: &crate::filter::OwnedFilter) -> Vec<u64> {
    f.words().collect()
}

fn copy_from(words: &[u64]) -> impl Fn(usize, &mut [u64]) + '_ {
    move |_, out: &mut [u64]| out.copy_from_slice(words)
}

fn lock() -> Locked {
    // SAFETY: each test is single-threaded in its changes, or serialises them
    // with a Mutex.
    unsafe { Locked::assume() }
}

#[test]
fn entries_keep_their_key_type() {
    use crate::filter::{KeyKind, KeyType};
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let int8 = KeyType { kind: KeyKind::Builtin, oid: 20 };
    let a = r.create(&lk, &NewFilter { key: int8, ..spec(1, "a") }, &one(1000), None, &mut |_, _| 0).unwrap();
    assert_eq!(a.key, int8);
    assert_eq!(r.find(1, "a").unwrap().key, int8);
    assert_eq!(r.create(&lk, &spec(1, "b"), &one(1000), None, &mut |_, _| 0).unwrap().key, KeyType::NONE);
    // A placeholder's contents cleared for another generation take its key type.
    let labels = KeyType { kind: KeyKind::Enum, oid: 16_400 };
    let d = r
        .create(&lk, &NewFilter { durable: true, key: int8, ..spec(1, "d") }, &one(1000), None, &mut |_, _| 5)
        .unwrap();
    let cleared = r.clear_contents(&lk, &d, &params(1000), 1000, DEFAULT_FPP, labels, None, 77, 2).unwrap();
    assert_eq!(cleared.key, labels);
}

#[test]
fn create_find_drop_and_names_per_database() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let a = r.create(&lk, &spec(1, "a"), &one(1000), None, &mut |_, _| 0).unwrap();
    assert_eq!(r.create(&lk, &spec(1, "a"), &one(1000), None, &mut |_, _| 0), Err(RegionError::Exists));
    // Same name in another database: a different filter.
    let b = r.create(&lk, &spec(2, "a"), &one(1000), None, &mut |_, _| 0).unwrap();
    assert_ne!(a.index, b.index);
    assert_eq!(r.find(1, "a").unwrap().index, a.index);
    assert_eq!(r.find(2, "a").unwrap().index, b.index);
    assert!(r.find(3, "a").is_none());
    assert_eq!(r.list(1).len(), 1);
    let t = tbl(&r, &a);
    t.insert(hash_i64(DEFAULT_SEED, 7)).unwrap();
    assert!(tbl(&r, &r.find(1, "a").unwrap()).contains(hash_i64(DEFAULT_SEED, 7)));
    assert!(!tbl(&r, &b).contains(hash_i64(DEFAULT_SEED, 7)));
    r.drop_filter(&lk, &a).unwrap();
    assert!(r.find(1, "a").is_none());
    assert!(!r.still_current(a.index, a.seq));
    r.check().unwrap();
    // Bad names are refused before anything happens.
    assert!(matches!(r.create(&lk, &spec(1, ""), &one(10), None, &mut |_, _| 0), Err(RegionError::BadName(_))));
    let long = "x".repeat(64);
    assert!(matches!(r.create(&lk, &spec(1, &long), &one(10), None, &mut |_, _| 0), Err(RegionError::BadName(_))));
    let max = "y".repeat(63);
    r.create(&lk, &spec(1, &max), &one(10), None, &mut |_, _| 0).unwrap();
    assert_eq!(r.find(1, &max).unwrap().name, max);
    r.check().unwrap();
}

#[test]
fn exhaustion_is_clean_and_drops_make_room() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let p = params(200_000); // 1 MiB of buckets
    let mut made = Vec::new();
    for i in 0.. {
        match r.create(&lk, &spec(1, &format!("f{i}")), &one_of(p), None, &mut |_, _| 0) {
            Ok(info) => made.push(info),
            Err(RegionError::NoSpace { requested, free, .. }) => {
                assert_eq!(requested, Region::bytes_for(&p, false));
                assert_eq!(requested, Region::bytes_for_tables(&one_of(p), false));
                assert!(free < requested);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(made.len() >= 2);
    r.check().unwrap();
    // The filters that exist are untouched by the failed create.
    for info in &made {
        assert!(r.still_current(info.index, info.seq));
    }
    r.drop_filter(&lk, &made[0]).unwrap();
    r.create(&lk, &spec(1, "again"), &one_of(p), None, &mut |_, _| 0).unwrap();
    r.check().unwrap();
}

#[test]
fn pinned_reader_delays_reuse() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let a = r.create(&lk, &spec(1, "a"), &one(1000), None, &mut |_, _| 0).unwrap();
    let pin = r.pin(3).unwrap();
    assert!(r.still_current(a.index, a.seq));
    r.drop_filter(&lk, &a).unwrap();
    // The reader pinned before the drop: blocks and entry stay reserved.
    assert_eq!(r.reclaim(&lk), 0);
    r.check().unwrap();
    let held = r.allocator().allocations();
    assert_eq!(held.len(), 1);
    drop(pin);
    assert_eq!(r.reclaim(&lk), 1);
    assert!(r.allocator().allocations().is_empty());
    // A pin taken after a drop does not hold that drop's space back.
    let b = r.create(&lk, &spec(1, "b"), &one(1000), None, &mut |_, _| 0).unwrap();
    let early = r.pin(2).unwrap();
    r.drop_filter(&lk, &b).unwrap();
    let _late = r.pin(4).unwrap();
    assert_eq!(r.reclaim(&lk), 0);
    drop(early);
    assert_eq!(r.reclaim(&lk), 1);
    assert!(r.allocator().allocations().is_empty());
    r.check().unwrap();
}

#[test]
fn replace_keeps_the_name_and_retires_the_old_copy() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let p = params(1000);
    let a = r.create(&lk, &spec(1, "a"), &one_of(p), None, &mut |_, _| 0).unwrap();
    let src = crate::filter::OwnedFilter::new(p);
    src.table().insert(hash_i64(DEFAULT_SEED, 42)).unwrap();
    let words = words_of(&src);
    let pin = r.pin(0).unwrap();
    let b = r
        .replace(
            &lk,
            &a,
            &one_of(p),
            &copy_from(&words),
            1000,
            0.001,
            false,
            crate::filter::KeyType::NONE,
            None,
            (a.owner, a.readers),
            &mut |_, _| 0,
        )
        .unwrap();
    assert_eq!(a.index, b.index);
    assert!(!r.still_current(a.index, a.seq));
    assert!(tbl(&r, &b).contains(hash_i64(DEFAULT_SEED, 42)));
    assert_eq!(tbl(&r, &b).item_count(), 1);
    // The old copy is still readable by the pinned reader.
    assert!(!tbl(&r, &a).contains(hash_i64(DEFAULT_SEED, 42)));
    assert_eq!(r.allocator().allocations().len(), 2);
    drop(pin);
    r.reclaim(&lk);
    assert_eq!(r.allocator().allocations().len(), 1);
    r.check().unwrap();
}

#[test]
fn generations_placeholders_and_reload_marks() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let p = params(1000);
    let durable = NewFilter { durable: true, ..spec(1, "d") };
    // The stamp runs after the words are written and before linking: the
    // generation it returns is the entry's, and it sees the words.
    let src = crate::filter::OwnedFilter::new(p);
    src.table().insert(hash_i64(DEFAULT_SEED, 7)).unwrap();
    let words = words_of(&src);
    let mut seen = None;
    let d = r
        .create(&lk, &durable, &one_of(p), Some(&copy_from(&words)), &mut |w, items| {
            seen = Some((w[0].to_vec(), items));
            assert!(r.find(1, "d").is_none(), "linked before its stamp");
            77
        })
        .unwrap();
    assert_eq!(seen, Some((words.clone(), 1)));
    assert_eq!((d.gen, d.durable, d.params, d.usable()), (77, true, Some(p), true));
    assert_eq!(r.find_gen(77).map(|i| i.index), Some(d.index));
    assert!(r.find_gen(0).is_none() && r.find_gen(78).is_none());
    // A reload mark keeps the contents but makes the filter unusable (and
    // changes its sequence number, so cached resolutions are redone).
    r.set_reload(&lk, &d, d.gen, 1).unwrap();
    let marked = r.find(1, "d").unwrap();
    assert!(!marked.usable() && marked.blocks > 0 && marked.seq != d.seq);
    // A replace gives a new generation and clears the mark.
    let e = r
        .replace(
            &lk,
            &marked,
            &one_of(p),
            &copy_from(&words),
            1000,
            0.002,
            true,
            crate::filter::KeyType::NONE,
            None,
            (marked.owner, marked.readers),
            &mut |_, _| 90,
        )
        .unwrap();
    assert_eq!((e.gen, e.reload_reason, e.usable()), (90, 0, true));
    assert!(r.find_gen(77).is_none());
    // A placeholder: a name, parameters, no blocks; it can be replaced
    // (publish) or dropped, and neither touches the allocator wrongly.
    let ph = r.create_placeholder(&lk, &NewFilter { durable: true, ..spec(1, "lost") }, &p, 55, 2).unwrap();
    assert_eq!((ph.blocks, ph.reload_reason, ph.params, ph.usable()), (0, 2, Some(p), false));
    assert_eq!(r.create_placeholder(&lk, &spec(1, "lost"), &p, 56, 2), Err(RegionError::Exists));
    r.check().unwrap();
    let back = r
        .replace(
            &lk,
            &ph,
            &one_of(p),
            &copy_from(&words),
            1000,
            0.002,
            true,
            crate::filter::KeyType::NONE,
            None,
            (ph.owner, ph.readers),
            &mut |_, _| 60,
        )
        .unwrap();
    assert!(back.usable() && tbl(&r, &back).contains(hash_i64(DEFAULT_SEED, 7)));
    let ph2 = r.create_placeholder(&lk, &spec(1, "gone"), &p, 57, 3).unwrap();
    r.drop_filter(&lk, &ph2).unwrap();
    r.reclaim(&lk);
    assert!(r.find(1, "gone").is_none());
    r.check().unwrap();
    // Closing or freezing durable changes waits for pinned processes.
    assert_eq!(r.durable_state(), DurableGate::Closed);
    assert!(r.set_durable_state(DurableGate::Open, 0));
    let pin = r.pin_writer(3).unwrap();
    assert!(!r.set_durable_state(DurableGate::Frozen, 1000));
    drop(pin);
    // Readers are not waited for.
    let reader = r.pin(4).unwrap();
    assert!(r.set_durable_state(DurableGate::Frozen, 1000));
    drop(reader);
    assert!(r.set_durable_state(DurableGate::Frozen, 1000));
    assert_eq!(r.durable_state(), DurableGate::Frozen);
}

#[test]
fn a_snapshot_with_writers_pinned_gives_up_after_its_patience() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    let p = params(1000);
    let d = r.create(&lk, &spec(1, "d"), &one_of(p), None, &mut |_, _| 0).unwrap();
    tbl(&r, &d).insert(hash_i64(DEFAULT_SEED, 1)).unwrap();
    let handles = r.tables(&d).unwrap().handles();
    let mut out = vec![0u64; p.bucket_count as usize];
    let pin = r.pin(0).unwrap();
    let got = r.snapshot(&d, 0, &handles, &mut out, 1000).unwrap().unwrap();
    drop(pin);
    assert_eq!(got[0].items, 1);
    let mut now = vec![0u64; p.bucket_count as usize];
    tbl(&r, &d).copy_words(&mut now);
    assert_eq!(out, now);
    // Other handles than the filter has: the caller must size again.
    assert_eq!(r.snapshot(&d, 0, &[handles[0], handles[0]], &mut out, 1000).unwrap(), None);
    // A process pinned as a writer while the words do not change: no pause.
    let other = r.pin_writer(1).unwrap();
    assert!(r.snapshot(&d, 0, &handles, &mut out, 100).unwrap().is_some());
    assert!(!r.writers_paused(d.index));
    drop(other);
}

#[test]
fn interrupted_claim_is_recovered_by_the_next_lock_holder() {
    let (_m, r) = region(4 << 20);
    let lk = lock();
    r.create(&lk, &spec(1, "keep"), &one(1000), None, &mut |_, _| 0).unwrap();
    // A lock holder claims blocks and stops before linking them.
    let (start, n, _tag) = r.claim(&lk, 100_000).unwrap();
    assert!(n > 0 && start < r.lay.blocks);
    assert!(r.check().is_err(), "phantom allocation is visible to the check");
    // The next change recovers it first.
    r.create(&lk, &spec(1, "next"), &one(1000), None, &mut |_, _| 0).unwrap();
    r.check().unwrap();
    assert_eq!(r.allocator().allocations().len(), 2);
}

#[test]
fn entries_run_out_cleanly() {
    let (_m, r) = region(1 << 20);
    let lk = lock();
    let max = r.lay.entries;
    let mut last = None;
    for i in 0..max {
        last = Some(r.create(&lk, &spec(1, &format!("e{i}")), &one(10), None, &mut |_, _| 0).unwrap());
    }
    assert_eq!(r.create(&lk, &spec(1, "one more"), &one(10), None, &mut |_, _| 0), Err(RegionError::NoEntries { max }));
    r.drop_filter(&lk, &last.unwrap()).unwrap();
    r.create(&lk, &spec(1, "one more"), &one(10), None, &mut |_, _| 0).unwrap();
    r.check().unwrap();
}

/// Readers resolve a name, pin, validate and probe, while a writer keeps
/// replacing and dropping/recreating that name with filters that all hold the
/// same keys, and creating other filters that take the freed space. A reader
/// that read blocks after they were reused would see another filter's words
/// (or zeros) and miss a key.
#[test]
fn reclamation_waits_for_readers_under_churn() {
    let (m, r) = region(8 << 20);
    let p = params(5000);
    let keys: Vec<u64> = (0..2000).map(|k| hash_i64(DEFAULT_SEED, k)).collect();
    let words = {
        let f = crate::filter::OwnedFilter::new(p);
        for &h in &keys {
            f.table().insert(h).unwrap();
        }
        words_of(&f)
    };
    let contents = copy_from(&words);
    let lock_mutex = Arc::new(Mutex::new(()));
    {
        let _g = lock_mutex.lock().unwrap();
        r.create(&lock(), &spec(1, "hot"), &one_of(p), Some(&contents), &mut |_, _| 0).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for slot in 0..3usize {
        let (stop, keys, _m, total) = (stop.clone(), keys.clone(), m.clone(), total.clone());
        readers.push(std::thread::spawn(move || {
            let _region_memory = &_m;
            let mut probes = 0u64;
            let mut i = slot;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Some(info) = r.find(1, "hot") else { continue };
                let pin = r.pin(slot).unwrap();
                if !r.still_current(info.index, info.seq) {
                    continue;
                }
                let t = tbl(&r, &info);
                for _ in 0..200 {
                    i = (i + 7) % keys.len();
                    assert!(t.contains(keys[i]), "false negative: blocks reused under a pinned reader");
                    probes += 1;
                }
                drop(pin);
                total.fetch_add(200, Ordering::Relaxed);
            }
            probes
        }));
    }
    // One change under the lock; retried, with the lock released in between
    // (as the glue does), while the space it needs is still being read.
    let change = |f: &dyn Fn(&Locked) -> Result<EntryInfo, RegionError>| loop {
        let guard = lock_mutex.lock().unwrap();
        match f(&lock()) {
            Ok(info) => return info,
            Err(RegionError::Busy) | Err(RegionError::NoSpace { pending: 1.., .. }) => {
                drop(guard);
                std::thread::yield_now();
            }
            Err(e) => panic!("{e}"),
        }
    };
    // At least 300 changes, and on until the readers made 1,000,000 probes.
    let mut round = 0;
    while round < 300 || (total.load(Ordering::Relaxed) < 1_000_000 && round < 1_000_000) {
        round += 1;
        if round % 2 == 0 {
            change(&|lk| {
                r.replace(
                    lk,
                    &r.find(1, "hot").unwrap(),
                    &one_of(p),
                    &contents,
                    5000,
                    DEFAULT_FPP,
                    false,
                    crate::filter::KeyType::NONE,
                    None,
                    (1, 0),
                    &mut |_, _| 0,
                )
            });
        } else {
            change(&|lk| {
                let hot = r.find(1, "hot").unwrap();
                r.drop_filter(lk, &hot).map(|()| hot)
            });
            // Reuse freed space for something else with different words.
            let other = change(&|lk| r.create(lk, &spec(1, "other"), &one_of(p), None, &mut |_, _| 0));
            tbl(&r, &other).insert(12345).unwrap();
            change(&|lk| r.create(lk, &spec(1, "hot"), &one_of(p), Some(&contents), &mut |_, _| 0));
            change(&|lk| r.drop_filter(lk, &other).map(|()| other.clone()));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let probes: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(probes >= 1_000_000, "{probes} probes in {round} rounds");
    let lk = lock();
    r.reclaim(&lk);
    r.check().unwrap();
    assert_eq!(r.allocator().allocations().len(), 1);
}

/// Keys that are always stored (at least one copy) while writers insert a
/// second copy of them and then delete one, shifting copies between the two
/// buckets of a pair, and insert and delete other keys (moves, at high load);
/// writers honour the pause as the glue does. Every snapshot must hold every
/// always-stored key, and its count must match its words.
#[test]
fn snapshots_hold_every_key_under_shifting_writers() {
    let (m, r) = region(8 << 20);
    let p = params(200_000);
    let info = r.create(&lock(), &spec(1, "s"), &one_of(p), None, &mut |_, _| 0).unwrap();
    // 75% of the slots always stored: inserts of other keys move fingerprints.
    let always: Vec<u64> = (0..p.slot_count() * 3 / 4).map(|k| hash_i64(DEFAULT_SEED, k as i64)).collect();
    for &h in &always {
        tbl(&r, &info).insert(h).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2usize {
        let (stop, always, info, _m) = (stop.clone(), always.clone(), info.clone(), m.clone());
        writers.push(std::thread::spawn(move || {
            let _region_memory = &_m;
            let slot = 1 + w;
            let mut i = w * 7919;
            let mut ops = 0u64;
            // Run the op pinned, unless a snapshot pauses writers.
            let write = |op: &dyn Fn(&Table<'_>)| loop {
                let pin = r.pin_writer(slot).unwrap();
                if r.writers_paused(info.index) {
                    drop(pin);
                    while r.writers_paused(info.index) {
                        std::thread::yield_now();
                    }
                    continue;
                }
                op(&tbl(&r, &info));
                return;
            };
            while !stop.load(Ordering::Relaxed) {
                i = (i + 13) % always.len();
                let h = always[i];
                write(&|t| t.insert(h).unwrap());
                write(&|t| assert!(t.delete(h)));
                let other = hash_i64(DEFAULT_SEED, 1_000_000 + (w * 1_000_000 + i) as i64);
                write(&|t| {
                    let _ = t.insert(other);
                });
                write(&|t| {
                    t.delete(other);
                });
                ops += 4;
            }
            ops
        }));
    }
    let mut out = vec![0u64; p.bucket_count as usize];
    let mut snaps = 0;
    let paused_before = PAUSED_SNAPSHOTS.load(Ordering::Relaxed);
    // At least 100 snapshots, and on until one has taken the pause path (three
    // copies changed under it): how soon depends on the scheduler, never on a
    // time limit.
    while snaps < 100 || PAUSED_SNAPSHOTS.load(Ordering::Relaxed) == paused_before {
        let _pin = r.pin(0).unwrap();
        let handles = r.tables(&info).unwrap().handles();
        let items = r.snapshot(&info, 0, &handles, &mut out, u64::MAX).unwrap().unwrap()[0].items;
        snaps += 1;
        // As cf_snapshot does: the copied words compacted into a dense value,
        // which must validate and hold every key stored throughout.
        let h = DenseHeader { params: p, items, capacity: info.capacity, key: crate::filter::KeyType::NONE };
        let bytes = v2::encode(&h, out.iter().copied());
        let parsed = v2::parse_v2(&bytes).unwrap();
        let d = v2::Dense::new(&parsed.params, &bytes[v2::V2_HEADER_BYTES..]);
        d.validate(items).unwrap();
        for &h in &always {
            assert!(d.contains(h), "snapshot {snaps} missed a key stored throughout");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(ops > 1000, "writers made {ops} changes");
    let paused = PAUSED_SNAPSHOTS.load(Ordering::Relaxed) - paused_before;
    eprintln!("snapshot test: {ops} writer changes, {snaps} snapshots, {paused} of them by pausing writers");
    assert!(paused > 0, "the pause path was never taken");
}

/// A filter that grows: two threads insert 200,000 keys into a filter made for
/// 1,000, adding tables without the registry lock; every key is found, the
/// allocations are exactly the entry's tables, and a drop frees them all.
mod growth_and_caps;
