//! Threads inside the hosting process for the pure-memory parts of a bulk
//! build (`build::sort_dedup_threads`), as some extensions build indexes.
//!
//! The rules, since the host (a PostgreSQL backend) is single-threaded:
//!
//! - A thread other than the caller's never calls the host: no interrupt
//!   check, no report of memory (every buffer is allocated by the caller
//!   before the threads start, and the threads allocate nothing), nothing
//!   that could raise an error.
//! - The threads start with every signal blocked, so that the host's signal
//!   handlers (cancel, `statement_timeout`, termination) run only in the
//!   caller's thread, where they were written to run.
//! - The caller's thread does its share of the work in steps, and between
//!   steps asks the host whether an interrupt is pending (a read of a flag:
//!   it neither handles nor raises it). If one is, every thread stops at its
//!   next step ([`Share::stopped`]), the threads are joined, and only then
//!   does the caller handle the interrupt (`host::check_interrupts`), which
//!   may end the query: a cancel stops a build within a step of each thread
//!   (about 64k keys), and no thread outlives the call.
//! - A thread that cannot be started leaves its share to the caller's thread.

use std::sync::atomic::{AtomicBool, Ordering};

/// Work between two looks at the stop flag, in items.
pub const STEP: usize = 1 << 16;

/// What one share of a [`run`] knows: its index and whether to stop.
pub struct Share<'a> {
    pub index: usize,
    caller: bool,
    stop: &'a AtomicBool,
    pending: &'a (dyn Fn() -> bool + Sync),
}

impl Share<'_> {
    /// Whether the work should stop now: on the caller's thread, whether the
    /// host has an interrupt pending (it then stops the other threads too);
    /// on another thread, whether the caller said so.
    pub fn stopped(&self) -> bool {
        if self.caller && !self.stop.load(Ordering::Relaxed) && (self.pending)() {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs `work(share)` for shares `0..n`: share 0 on the caller's thread, the
/// others on threads of their own (or on the caller's, after share 0, if a
/// thread cannot be started). The caller's share asks `pending` (the host's
/// `interrupt_pending`, or a test's) whether to stop. Returns false if the
/// work was stopped for a pending interrupt, after every thread has ended;
/// the caller then handles the interrupt and, if it returns, does the work
/// again without threads.
pub fn run<F: Fn(&Share) + Sync>(n: usize, pending: &(dyn Fn() -> bool + Sync), work: F) -> bool {
    let stop = AtomicBool::new(false);
    if n <= 1 {
        work(&Share { index: 0, caller: true, stop: &stop, pending });
        return !stop.load(Ordering::Relaxed);
    }
    std::thread::scope(|scope| {
        let mut not_started = Vec::new();
        {
            let _blocked = BlockedSignals::new();
            for index in 1..n {
                let (work, stop) = (&work, &stop);
                let started = std::thread::Builder::new()
                    .name("cuckoo build".into())
                    .spawn_scoped(scope, move || work(&Share { index, caller: false, stop, pending }));
                if started.is_err() {
                    not_started.push(index);
                }
            }
        }
        // A panic on this thread stops the others before the scope joins them.
        let _stop_on_unwind = StopOnUnwind(&stop);
        work(&Share { index: 0, caller: true, stop: &stop, pending });
        for index in not_started {
            work(&Share { index, caller: true, stop: &stop, pending });
        }
        // The scope joins the threads here.
    });
    !stop.load(Ordering::Relaxed)
}

struct StopOnUnwind<'a>(&'a AtomicBool);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Every signal blocked in the calling thread until dropped, so that threads
/// started meanwhile inherit the blocked mask.
struct BlockedSignals {
    #[cfg(unix)]
    old: libc::sigset_t,
}

impl BlockedSignals {
    fn new() -> BlockedSignals {
        #[cfg(unix)]
        // SAFETY: sigset_t is plain data that sigfillset and pthread_sigmask
        // initialise; the old mask is restored on drop.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            BlockedSignals { old }
        }
        #[cfg(not(unix))]
        BlockedSignals {}
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: restores the mask saved by `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// A pointer that threads of one [`run`] share to write disjoint parts of one
/// buffer.
#[derive(Clone, Copy)]
pub struct SharedMut<T>(pub *mut T);

impl<T> SharedMut<T> {
    /// The pointer (a method, so that closures capture the whole wrapper).
    pub fn ptr(&self) -> *mut T {
        self.0
    }
}

// SAFETY: only used to write disjoint elements from different threads, each
// element by one thread, all joined before the buffer is read.
unsafe impl<T: Send> Send for SharedMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedMut<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_share_runs_once() {
        for n in [1, 2, 3, 8] {
            let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            assert!(run(n, &|| false, |s| {
                seen[s.index].fetch_add(1, Ordering::Relaxed);
                assert!(!s.stopped());
            }));
            assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
    }

    /// An interrupt pending on the caller's thread stops every share at its
    /// next look, and `run` returns only after every thread has ended.
    #[test]
    fn a_pending_interrupt_stops_every_share() {
        let asked = AtomicUsize::new(0);
        let pending = || asked.fetch_add(1, Ordering::Relaxed) >= 3;
        let ended = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
        let done = run(4, &pending, |s| {
            // Far more steps than the test could wait for: only a stop ends it.
            for _ in 0..u64::MAX {
                if s.stopped() {
                    ended.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                std::thread::yield_now();
            }
            finished.fetch_add(1, Ordering::Relaxed);
        });
        assert!(!done);
        assert_eq!(ended.load(Ordering::Relaxed), 4);
        assert_eq!(finished.load(Ordering::Relaxed), 0);
    }
}
