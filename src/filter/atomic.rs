//! The atomics and the spin-wait the table uses: the standard library's, or loom's
//! under `--cfg loom` so that the model checker sees every access.

use crossbeam_utils::Backoff;
#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Waits a little before a retry: exponential spinning then yielding, or a
/// scheduling point for loom (which must see spin loops yield).
#[inline]
pub fn spin(backoff: &Backoff) {
    #[cfg(loom)]
    {
        let _ = backoff;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    backoff.snooze();
}
