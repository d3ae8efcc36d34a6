//! Every interleaving, up to a preemption bound, of two inserts and a remover
//! on one key at the copy cap's edge (the copies are one atomic counter, as a
//! pair's count read at one instant is).
//!
//! The key has `COPY_CAP - 1` copies, one per version; the remover applies the
//! delete of one of them (dead, its transaction older than every snapshot)
//! while one thread inserts version A and then version B. After the join,
//! every other version dies and its delete is applied in turn: B, still
//! live, must keep a copy. Without the gate (an insert that counts the cap
//! adds nothing, whoever is removing) the model fails: the remover counts
//! `COPY_CAP - 1`, A adds, B counts the cap, the remover takes a copy, and
//! the later deletes take the rest. It fails too with the insert's second
//! read of the gate a plain load (see `InsertCheck::held`).
use super::*;
use crate::filter::model_with_bound;
use loom::sync::Arc;
use loom::thread;

#[test]
fn loom_bound_gate_keeps_a_live_versions_copy() {
    model_with_bound(3, || {
        let gate = Arc::new(AtomicU64::new(0));
        let copies = Arc::new(AtomicU64::new(COPY_CAP - 1));
        let (g, c) = (gate.clone(), copies.clone());
        let remover = thread::spawn(move || {
            let _r = Removing::start(&g);
            if may_remove(c.load(Ordering::SeqCst)) {
                c.fetch_sub(1, Ordering::SeqCst);
            }
        });
        let mut sat = 0;
        for _version in 0..2 {
            let add = versions_to_copy(&gate, &[0], |_| copies.load(Ordering::SeqCst), &mut sat);
            if add[0] {
                copies.fetch_add(1, Ordering::SeqCst);
            }
        }
        remover.join().unwrap();
        // The other old versions (COPY_CAP - 2) and A die; B lives.
        for _ in 0..COPY_CAP - 1 {
            let _r = Removing::start(&gate);
            if may_remove(copies.load(Ordering::SeqCst)) {
                copies.fetch_sub(1, Ordering::SeqCst);
            }
        }
        assert!(copies.load(Ordering::SeqCst) >= 1, "B is live without a copy (saturated {sat})");
    });
}
