//! The shared state of bound filters beside the named filters' region
//! (`region::binding`): its settings (`cuckoo.max_bound_filters`,
//! `cuckoo.pending_deletes`), the shared-memory hooks that reserve and lay it
//! out, and its lock.

use std::ffi::CStr;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::region::binding::{Area, QueueLocked};

/// `cuckoo.max_bound_filters`: bindings that can be in use at once, over every
/// database.
static MAX_BOUND: GucSetting<i32> = GucSetting::<i32>::new(64);
/// `cuckoo.max_bound_filters_per_role`: slots the bindings of one role's
/// filters may hold at once, over every database (-1: no cap).
static MAX_BOUND_PER_ROLE: GucSetting<i32> = GucSetting::<i32>::new(-1);
/// `cuckoo.pending_deletes`: deletes the shared queue holds, over every binding.
static PENDING_DELETES: GucSetting<i32> = GucSetting::<i32>::new(262_144);

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;
static mut AREA: Option<Area> = None;
static mut LOCK: *mut pg_sys::LWLock = std::ptr::null_mut();
const TRANCHE: &CStr = c"cuckoo bound";
const SHMEM_NAME: &CStr = c"cuckoo bound filters";

/// From `_PG_init`, when preloaded: the settings and the shared-memory hooks.
pub fn init() {
    GucRegistry::define_int_guc(
        c"cuckoo.max_bound_filters",
        c"Most filters bound to table columns (cf_bind) in use at once, over every database.",
        c"Each takes a slot of shared memory for its counters; a binding that finds none refuses writes to its table.",
        &MAX_BOUND,
        1,
        65_536,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cuckoo.max_bound_filters_per_role",
        c"Most bound filters (cf_bind) of one role in use at once, over every database; -1: no limit.",
        c"Counts the slots of cuckoo.max_bound_filters that bindings of the role's filters hold; checked when a binding takes a slot (cf_bind, cf_rebuild, its table's first write or probe after a restart), so that one role cannot take every slot.",
        &MAX_BOUND_PER_ROLE,
        -1,
        65_536,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"cuckoo.pending_deletes",
        c"Deletes of bound filters' keys that can wait in shared memory until no snapshot can see their rows, over every binding.",
        c"24 bytes each. A delete that finds the queue full is dropped: its key stays in the filter (a false positive), counted in cuckoo_filters.dropped_deletes until cf_rebuild.",
        &PENDING_DELETES,
        1_024,
        i32::MAX / 32,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    // SAFETY: _PG_init runs single-threaded in the postmaster; the hooks are
    // chained as every extension chains them.
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

fn sizes() -> (usize, usize) {
    (MAX_BOUND.get().max(1) as usize, PENDING_DELETES.get().max(1_024) as usize)
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    // SAFETY: called by the postmaster while it sizes shared memory.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        let (slots, queue) = sizes();
        pg_sys::RequestAddinShmemSpace(Area::bytes(slots, queue) + 64);
        pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    // SAFETY: called at shared memory creation with AddinShmemInitLock taken
    // as PostgreSQL's own modules do.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let (slots, queue) = sizes();
        let mut found = false;
        let raw = pg_sys::ShmemInitStruct(SHMEM_NAME.as_ptr(), Area::bytes(slots, queue) + 64, &mut found) as *mut u8;
        let base = raw.add(raw.align_offset(64));
        AREA = Some(Area::init(base, slots, queue, found));
        LOCK = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
        pg_sys::LWLockRelease(init_lock);
    }
}

/// The area, if cuckoo was preloaded.
pub fn area_if_loaded() -> Option<Area> {
    // SAFETY: AREA is written once, before any backend runs SQL.
    unsafe { *std::ptr::addr_of!(AREA) }
}

/// Deletes the queue holds for binding `name` of database `db` (counted in
/// its slot; 0 if it has none).
pub fn queued_for(db: u32, name: &str) -> u64 {
    if area_if_loaded().is_none() {
        return 0;
    }
    with_lock(|a, _| {
        a.find_epoch(db, name).map_or(0, |(i, _)| a.slot(i).pending.load(std::sync::atomic::Ordering::Relaxed))
    })
}

/// The area, or the error that explains how to get one.
pub fn area() -> Area {
    // SAFETY: AREA is written once, before any backend runs SQL.
    match unsafe { *std::ptr::addr_of!(AREA) } {
        Some(a) => a,
        None => crate::sql::named::errors::fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "cuckoo must be loaded via shared_preload_libraries to bind filters to tables".into(),
            Some("Add cuckoo to shared_preload_libraries in postgresql.conf and restart the server."),
        ),
    }
}

/// Runs `f` holding the area's lock (released by PostgreSQL's error cleanup
/// if `f` raises an error; `f` does nothing that can).
pub fn with_lock<T>(f: impl FnOnce(&Area, &QueueLocked) -> T) -> T {
    let a = area();
    // SAFETY: the lock was set up with the area; LWLockAcquire holds
    // interrupts until the release.
    unsafe {
        pg_sys::LWLockAcquire(LOCK, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let out = {
            let lk = QueueLocked::assume();
            f(&a, &lk)
        };
        pg_sys::LWLockRelease(LOCK);
        out
    }
}

/// The cap on the slots one role's bindings hold, if any.
pub(super) fn role_cap() -> Option<usize> {
    let c = MAX_BOUND_PER_ROLE.get();
    (c >= 0).then_some(c as usize)
}
