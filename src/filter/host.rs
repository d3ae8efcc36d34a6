//! What the process hosting the core lets a long or large operation do: check
//! for interrupts, and report memory it cannot have. The core knows nothing
//! of PostgreSQL; the extension installs both hooks when it loads, so that a
//! caller's cancel or `statement_timeout` ends a build, a union or a decode of
//! any size, and running out of memory is an ERROR in that backend instead of
//! an abort of the process (a failed allocation of Rust's own aborts).
//!
//! Both hooks leave by unwinding (the extension raises an ERROR, which pgrx
//! carries as a panic to the function's boundary). Only code that works on
//! memory it owns calls them (values being built, decoded or changed), never
//! code that changes a table in shared memory: a table half changed there
//! would outlive the unwinding.
//!
//! Without hooks (the core's own tests and benches), interrupts are never
//! pending and running out of memory panics.

#[cfg(not(loom))]
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

static INTERRUPT_CHECK: OnceLock<fn()> = OnceLock::new();
static INTERRUPT_PENDING: OnceLock<fn() -> bool> = OnceLock::new();
static OUT_OF_MEMORY: OnceLock<fn(u64) -> !> = OnceLock::new();

/// Loops check for interrupts every this many items.
pub const CHECK_EVERY: usize = 1 << 16;

/// Installs the interrupt check (once per process; later calls are ignored).
pub fn set_interrupt_check(f: fn()) {
    let _ = INTERRUPT_CHECK.set(f);
}

/// Installs the question "is an interrupt pending?", answered without
/// handling it (once per process; later calls are ignored). Asked only from
/// the thread that called into the core (`threads`).
pub fn set_interrupt_pending(f: fn() -> bool) {
    let _ = INTERRUPT_PENDING.set(f);
}

/// Whether the host has an interrupt pending (never, without a hook).
#[inline]
#[cfg_attr(loom, allow(dead_code))]
pub fn interrupt_pending() -> bool {
    INTERRUPT_PENDING.get().is_some_and(|f| f())
}

/// Installs what running out of memory does; it must not return.
pub fn set_out_of_memory(f: fn(u64) -> !) {
    let _ = OUT_OF_MEMORY.set(f);
}

/// Leaves (by unwinding) if the host has an interrupt pending.
#[inline]
pub fn check_interrupts() {
    if let Some(f) = INTERRUPT_CHECK.get() {
        f();
    }
}

/// [`check_interrupts`] on every [`CHECK_EVERY`]th item of a loop.
#[inline(always)]
pub fn check_every(i: usize) {
    if i % CHECK_EVERY == CHECK_EVERY - 1 {
        check_interrupts();
    }
}

/// Reports that `bytes` could not be had; does not return.
#[cold]
pub fn out_of_memory(bytes: u64) -> ! {
    match OUT_OF_MEMORY.get() {
        Some(f) => f(bytes),
        None => panic!("out of memory: a request for {bytes} bytes failed"),
    }
}

/// An empty vector with room for `n` items, or [`out_of_memory`].
pub fn vec_with_capacity<T>(n: usize) -> Vec<T> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        out_of_memory((n as u64).saturating_mul(std::mem::size_of::<T>() as u64));
    }
    v
}

/// Appends `x` (growing as `push` does), or [`out_of_memory`].
#[inline]
pub fn push<T>(v: &mut Vec<T>, x: T) {
    if v.len() == v.capacity() && v.try_reserve(1).is_err() {
        out_of_memory((v.len() as u64 + 1).saturating_mul(2 * std::mem::size_of::<T>() as u64));
    }
    v.push(x);
}

/// `n` copies of `x`, or [`out_of_memory`].
pub fn vec_filled<T: Clone>(n: usize, x: T) -> Vec<T> {
    let mut v = vec_with_capacity(n);
    v.resize(n, x);
    v
}

/// `n` zeroed words (bucket words of an empty table), or [`out_of_memory`].
/// Zeroed memory from the allocator: pages of a large table are not touched
/// until they are written.
#[cfg(not(loom))]
pub fn zeroed_words(n: usize) -> Box<[AtomicU64]> {
    if n == 0 {
        return Box::new([]);
    }
    let Ok(layout) = std::alloc::Layout::array::<AtomicU64>(n) else { out_of_memory((n as u64).saturating_mul(8)) };
    // SAFETY: `layout` has a non-zero size (n > 0). A non-null result is
    // `n` zeroed, 8-aligned `AtomicU64`s (all-zero is a valid `AtomicU64`),
    // allocated by the global allocator with this layout, which is what
    // `Box<[AtomicU64]>` frees it with.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut AtomicU64;
        if p.is_null() {
            out_of_memory(layout.size() as u64);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// Under loom, the model checker's atomics, which have state of their own
/// (not all-zero memory): made one by one (the models' tables are tiny).
#[cfg(loom)]
pub fn zeroed_words(n: usize) -> Box<[super::atomic::AtomicU64]> {
    let mut v = vec_with_capacity(n);
    v.extend((0..n).map(|_| super::atomic::AtomicU64::new(0)));
    v.into_boxed_slice()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn zeroed_words_are_zero_and_sized() {
        for n in [0usize, 1, 7, 1 << 12] {
            let w = zeroed_words(n);
            assert_eq!(w.len(), n);
            assert!(w.iter().all(|x| x.load(std::sync::atomic::Ordering::Relaxed) == 0));
        }
    }

    #[test]
    #[should_panic(expected = "out of memory")]
    fn an_impossible_request_is_reported_not_aborted() {
        // More than the address space: the allocator refuses, the hook-less
        // core panics (the extension's hook raises an ERROR instead).
        let _ = vec_with_capacity::<u64>(usize::MAX / 16);
    }
}
