//! Tests of bound filters' shared state: the queue of pending deletes, slots,
//! and the copy cap with its remover gate under racing threads.

use super::*;

fn area(slots: usize, queue: usize) -> Area {
    let layout = std::alloc::Layout::from_size_align(Area::bytes(slots, queue), 64).unwrap();
    // SAFETY: a fresh allocation of the right size and alignment, leaked for
    // the test's life.
    unsafe { Area::init(std::alloc::alloc_zeroed(layout), slots, queue, false) }
}

#[test]
fn slots_are_found_claimed_and_released() {
    let a = area(2, 8);
    // SAFETY: single-threaded test.
    let lk = unsafe { QueueLocked::assume() };
    let (x, ex) = a.slot_for(&lk, 5, "x").unwrap();
    assert_eq!(a.slot_for(&lk, 5, "x").unwrap(), (x, ex));
    let (y, ey) = a.slot_for(&lk, 6, "x").unwrap();
    assert_ne!(x, y);
    assert!(a.slot_for(&lk, 5, "z").is_none(), "two slots only");
    assert_eq!(a.find(6, "x"), Some(y));
    a.release(&lk, y);
    assert!(!a.current(y, ey));
    let (z, ez) = a.slot_for(&lk, 5, "z").unwrap();
    assert_eq!(z, y);
    assert_ne!(ez, ey, "a reclaimed slot has a new epoch");
    let names: Vec<_> = a.claimed().into_iter().map(|(_, d, n)| (d, n)).collect();
    assert_eq!(names, vec![(5, "x".to_string()), (5, "z".to_string())]);
    let long = "n".repeat(BOUND_NAME_BYTES);
    let (l, _) = {
        a.release(&lk, z);
        a.slot_for(&lk, 1, &long).unwrap()
    };
    assert_eq!(a.find(1, &long), Some(l));
}

#[test]
fn a_rebuild_is_asked_for_once_per_interval_and_the_oldest_ask_is_forgotten_first() {
    let a = area(1, 1);
    // SAFETY: single-threaded test.
    let lk = unsafe { QueueLocked::assume() };
    assert!(a.ask_rebuild(&lk, 7, 1_000, 100));
    assert!(!a.ask_rebuild(&lk, 7, 1_050, 100), "asked 50 ago");
    assert!(a.ask_rebuild(&lk, 8, 1_050, 100), "another binding");
    assert!(a.ask_rebuild(&lk, 7, 1_100, 100), "100 later: again");
    assert!(!a.ask_rebuild(&lk, 7, 1_150, 100));
    // More bindings than entries: the oldest asks go first.
    for k in 100..100 + ASKS as u64 - 1 {
        assert!(a.ask_rebuild(&lk, k, 1_200, 100));
    }
    assert!(!a.ask_rebuild(&lk, 7, 1_150, 100), "key 8 (asked at 1,050) went, not 7");
    assert!(a.ask_rebuild(&lk, 8, 1_150, 100), "forgotten: asked again");
    // One background rebuild at a time; one that vanished is forgotten
    // after its lease.
    assert!(a.claim_rebuilder(&lk, 2_000, 500));
    assert!(!a.claim_rebuilder(&lk, 2_100, 500));
    a.release_rebuilder(2_000);
    assert!(a.claim_rebuilder(&lk, 2_200, 500));
    assert!(!a.claim_rebuilder(&lk, 2_600, 500));
    assert!(a.claim_rebuilder(&lk, 2_700, 500), "lease over");
    a.release_rebuilder(2_200);
    assert!(!a.claim_rebuilder(&lk, 2_800, 500), "the one past its lease does not free the new claim");
    a.release_rebuilder(2_700);
    assert!(a.claim_rebuilder(&lk, 2_900, 500));
}

#[test]
fn a_role_holds_at_most_its_cap_of_slots_and_fill_identities_reset_on_claim() {
    let a = area(4, 8);
    // SAFETY: single-threaded test.
    let lk = unsafe { QueueLocked::assume() };
    let (x, _) = a.slot_for_owner(&lk, 1, "x", 10, Some(2)).unwrap();
    a.slot_for_owner(&lk, 2, "y", 10, Some(2)).unwrap();
    assert_eq!(a.slot_for_owner(&lk, 1, "z", 10, Some(2)), Err(SlotRefused::RoleCap { held: 2 }));
    // A slot it holds is found whatever the cap; other roles are not capped by it.
    assert!(a.slot_for_owner(&lk, 1, "x", 10, Some(0)).is_ok());
    let (w, _) = a.slot_for_owner(&lk, 1, "w", 11, Some(2)).unwrap();
    assert_eq!(a.slot_for_owner(&lk, 1, "v", 12, None).map(|_| ()), Ok(()));
    assert_eq!(a.slot_for_owner(&lk, 1, "u", 13, None), Err(SlotRefused::Full));
    // Released, the role may claim again; a claim forgets the identities.
    a.slot(x).set_built(7);
    a.slot(x).set_ready(7);
    a.release(&lk, x);
    let (z, _) = a.slot_for_owner(&lk, 1, "z", 10, Some(2)).unwrap();
    assert_eq!(z, x);
    assert_eq!((a.slot(z).built(), a.slot(z).ready()), (0, 0));
    assert_ne!(w, z);
    let (i, e) = a.find_epoch(1, "z").unwrap();
    assert!(i == z && a.current(i, e));
    assert_eq!(a.find_epoch(1, "x"), None);
}

#[test]
fn queue_keeps_order_counts_drops_and_discards_old_epochs() {
    let a = area(2, 5);
    // SAFETY: single-threaded test.
    let lk = unsafe { QueueLocked::assume() };
    let (s, e) = a.slot_for(&lk, 1, "a").unwrap();
    let (t, f) = a.slot_for(&lk, 1, "b").unwrap();
    assert_eq!(a.push(&lk, s, e, &[(10, 100), (11, 101), (12, 102)]), 3);
    assert_eq!(a.push(&lk, t, f, &[(20, 200), (21, 201), (22, 202)]), 2);
    assert_eq!(a.slot(t).dropped.load(Ordering::Relaxed), 1);
    assert_eq!(a.queued(), 5);
    let mut out = Vec::new();
    // Something to take out of s (not of t, whose entries all wait).
    assert!(a.any_to_take(&lk, s, |d| if d.fxid == 101 { Verdict::Discard } else { Verdict::Wait }));
    assert!(!a.any_to_take(&lk, t, |_| Verdict::Wait));
    assert!(!a.any_to_take(&lk, s, |_| Verdict::Wait));
    // Two of the slot's current epoch taken out: one applied, one discarded.
    let settled = a.take(
        &lk,
        s,
        |d| match d.fxid {
            100 => Verdict::Apply,
            101 => Verdict::Discard,
            _ => Verdict::Wait,
        },
        &mut out,
    );
    assert_eq!(settled, 2);
    assert_eq!(out.iter().map(|d| d.hash).collect::<Vec<_>>(), vec![10]);
    assert_eq!(a.queued(), 3);
    assert_eq!(a.slot(s).pending.load(Ordering::Relaxed), 1);
    assert_eq!(a.slot(s).discarded.load(Ordering::Relaxed), 1);
    // An entry of an old epoch of the slot is discarded, never applied.
    a.release(&lk, t);
    assert_eq!(a.queued(), 1);
    let (t2, f2) = a.slot_for(&lk, 1, "c").unwrap();
    assert_eq!(t2, t);
    assert_eq!(a.push(&lk, t2, f, &[(30, 300)]), 1);
    // An old epoch's entry is not the current binding's to apply, and a
    // take that keeps every current entry drops it.
    assert!(!a.any_to_take(&lk, t2, |_| Verdict::Apply));
    assert_eq!(a.take(&lk, t2, |_| Verdict::Wait, &mut Vec::new()), 0);
    assert_eq!(a.queued(), 1);
    assert_eq!(a.push(&lk, t2, f, &[(30, 300)]), 1);
    assert_eq!(a.push(&lk, t2, f2, &[(31, 301)]), 1);
    let mut out = Vec::new();
    // The old epoch's entry is not counted as the current one's.
    assert_eq!(a.take(&lk, t2, |_| Verdict::Apply, &mut out), 1);
    assert_eq!(out.iter().map(|d| d.hash).collect::<Vec<_>>(), vec![31]);
    // The other binding's entry is still there, in order.
    let mut out = Vec::new();
    a.take(&lk, s, |_| Verdict::Apply, &mut out);
    assert_eq!(out.iter().map(|d| d.hash).collect::<Vec<_>>(), vec![12]);
    assert_eq!(a.queued(), 0);
}

#[test]
fn versions_copy_below_the_cap_and_not_at_it() {
    let gate = AtomicU64::new(0);
    let mut sat = 0;
    let copies = |h: u64| h;
    assert_eq!(versions_to_copy(&gate, &[0, 2, 3, 7], copies, &mut sat), vec![true, true, false, false]);
    assert_eq!(sat, 2);
    // A remover active: everything gets a copy.
    let r = Removing::start(&gate);
    assert_eq!(versions_to_copy(&gate, &[5], copies, &mut sat), vec![true]);
    drop(r);
    assert!(may_remove(COPY_CAP - 1));
    assert!(!may_remove(COPY_CAP));
}

/// The two races the gate closes, step by step: a remover active when the
/// insert first reads the gate, and one that starts while the insert counts.
#[test]
fn a_remover_overlapping_the_count_gives_every_version_a_copy() {
    let gate = AtomicU64::new(0);
    let mut sat = 0;
    // Started before the insert's first read (it read fewer copies and will
    // remove one after).
    let r = Removing::start(&gate);
    assert_eq!(versions_to_copy(&gate, &[9], |_| COPY_CAP, &mut sat), vec![true]);
    drop(r);
    // Started while the insert counts: the second read sees the gate moved.
    let started = std::cell::RefCell::new(None);
    let out = versions_to_copy(
        &gate,
        &[9, 1],
        |h| {
            if started.borrow().is_none() {
                *started.borrow_mut() = Some(Removing::start(&gate));
            }
            if h == 9 {
                COPY_CAP
            } else {
                0
            }
        },
        &mut sat,
    );
    assert_eq!(out, vec![true, true]);
    // Ended before the second read: the epoch still moved.
    drop(started.into_inner());
    let out = versions_to_copy(
        &gate,
        &[9],
        |_| {
            drop(Removing::start(&gate));
            COPY_CAP
        },
        &mut sat,
    );
    assert_eq!(out, vec![true]);
    assert_eq!(sat, 0);
    // Nobody removing: the saturated version goes without.
    assert_eq!(versions_to_copy(&gate, &[9], |_| COPY_CAP, &mut sat), vec![false]);
    assert_eq!(sat, 1);
}
