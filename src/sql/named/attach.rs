//! Attaching to the shared region that holds named filters: the
//! `cuckoo.shared_memory` setting (and a hidden test setting of the
//! durability worker), the caps per role and per database
//! (`cuckoo.max_filters_per_role` and the like), the shared-memory hooks that
//! size and set up the region,
//! the registry lock, and this process's epoch slot. Everything else in
//! `named` reaches the region through [`region`] and [`with_registry_lock`].
//! The region itself is `crate::region` (no pgrx).

use std::ffi::CStr;

use pgrx::bgworkers::BackgroundWorker;
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::errors::fail;
use crate::region::Limits;
use crate::region::{Locked, Region};

/// `cuckoo.shared_memory`, in megabytes.
static SHARED_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(64);
/// The caps per role (over every database) and per database (over every
/// role): `cuckoo.max_filters_per_role`, `cuckoo.max_bytes_per_role` (in kB),
/// `cuckoo.max_filters_per_database`, `cuckoo.max_bytes_per_database` (in kB);
/// -1: no cap.
static MAX_FILTERS_PER_ROLE: GucSetting<i32> = GucSetting::<i32>::new(-1);
static MAX_KB_PER_ROLE: GucSetting<i32> = GucSetting::<i32>::new(-1);
static MAX_FILTERS_PER_DATABASE: GucSetting<i32> = GucSetting::<i32>::new(-1);
static MAX_KB_PER_DATABASE: GucSetting<i32> = GucSetting::<i32>::new(-1);
/// `cuckoo.debug_cut_write_delay`, in milliseconds (see `cut`).
pub(super) static CUT_WRITE_DELAY_MS: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `cuckoo.debug_crash_point`: for tests, a named point inside a cut or a
/// pass where the process stops the server (see `cut::crash_point`).
pub(super) static CRASH_POINT: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);
/// `cuckoo.debug_stop_publish`: for tests, `node:NAME` or `record:NAME`, a
/// point in a cluster publish of filter NAME where it waits until cancelled
/// (see `citus::debug_stop`).
pub(super) static STOP_PUBLISH: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);
/// `cuckoo.debug_compact`: for tests, every cut of a filter that has files
/// is a compaction.
pub(super) static ALWAYS_COMPACT: GucSetting<bool> = GucSetting::<bool>::new(false);

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;
/// Set by the startup hook in the postmaster (inherited by every backend it forks)
/// or in a backend of a server without fork.
pub(super) static mut REGION: Option<Region> = None;
static mut REGISTRY_LOCK: *mut pg_sys::LWLock = std::ptr::null_mut();
const TRANCHE: &CStr = c"cuckoo";
const SHMEM_NAME: &CStr = c"cuckoo filters";

/// Run on a new region (server start, or reinitialisation after a crash),
/// before anything forks: `restore::restore`, given by `init`'s caller.
static mut ON_NEW_REGION: Option<fn(&Region)> = None;

/// When loaded at server start, registers the settings and the hooks and
/// returns true; `on_new_region` then runs on each new region.
pub fn init(on_new_region: fn(&Region)) -> bool {
    // SAFETY: called from _PG_init in a single-threaded process.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        // Loaded on first use instead: values work, named filters explain what is
        // missing. (A server-start setting cannot be defined after start-up.)
        return false;
    }
    GucRegistry::define_int_guc(
        c"cuckoo.shared_memory",
        c"Size of the shared memory region that holds named cuckoo filters.",
        c"Reserved at server start when cuckoo is in shared_preload_libraries; named filters, their registry and bookkeeping live in it.",
        &SHARED_MEMORY_MB,
        1,
        1 << 20,
        GucContext::Postmaster,
        GucFlags::UNIT_MB,
    );
    // The caps: superusers only (also through ALTER ROLE or ALTER DATABASE
    // ... SET), so that a role cannot lift its own.
    for (name, short, long, setting, flags) in [
        (
            c"cuckoo.max_filters_per_role",
            c"Most named cuckoo filters one role may own, over every database; -1: no limit.",
            c"Checked when a filter is created (cf_create, cf_publish of a new name, cf_restore_saved), against the filters the new filter's owner owns in the whole shared region.",
            &MAX_FILTERS_PER_ROLE,
            GucFlags::default(),
        ),
        (
            c"cuckoo.max_bytes_per_role",
            c"Most shared memory the named cuckoo filters of one role may take, over every database; -1: no limit.",
            c"Counts every table of the role's filters, those growth adds included; checked when a filter is created or published and when a filter grows.",
            &MAX_KB_PER_ROLE,
            GucFlags::UNIT_KB,
        ),
        (
            c"cuckoo.max_filters_per_database",
            c"Most named cuckoo filters one database may hold, over every role; -1: no limit.",
            c"Checked when a filter is created (cf_create, cf_publish of a new name, cf_restore_saved).",
            &MAX_FILTERS_PER_DATABASE,
            GucFlags::default(),
        ),
        (
            c"cuckoo.max_bytes_per_database",
            c"Most shared memory the named cuckoo filters of one database may take, over every role; -1: no limit.",
            c"Counts every table of the database's filters, those growth adds included; checked when a filter is created or published and when a filter grows.",
            &MAX_KB_PER_DATABASE,
            GucFlags::UNIT_KB,
        ),
    ] {
        GucRegistry::define_int_guc(name, short, long, setting, -1, i32::MAX, GucContext::Suset, flags);
    }
    GucRegistry::define_int_guc(
        c"cuckoo.debug_cut_write_delay",
        c"For tests: the durability worker pauses this long in the middle of writing each checkpoint-cut file.",
        c"Lets tests crash the server or copy a base backup while a cut is half written. Leave at 0.",
        &CUT_WRITE_DELAY_MS,
        0,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS | GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_string_guc(
        c"cuckoo.debug_crash_point",
        c"For tests: a named point inside a checkpoint cut or pass where the durability worker stops the server.",
        c"Lets tests crash at a chosen moment (cut-logged, compaction-contents, pass-logged, coverage-written). Leave empty.",
        &CRASH_POINT,
        GucContext::Sighup,
        GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_string_guc(
        c"cuckoo.debug_stop_publish",
        c"For tests: a point in a cluster publish where it waits until it is cancelled.",
        c"node:NAME stops a node's copy of filter NAME after it is published and before it is listed; record:NAME stops cf_publish_cluster on the coordinator after every node took its copy and before the publish is recorded. Leave empty.",
        &STOP_PUBLISH,
        GucContext::Sighup,
        GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_bool_guc(
        c"cuckoo.debug_compact",
        c"For tests: every checkpoint cut of a durable filter that has files writes a new base and logs it.",
        c"Lets tests make compactions happen at will. Leave off.",
        &ALWAYS_COMPACT,
        GucContext::Sighup,
        GucFlags::NO_SHOW_ALL,
    );
    // SAFETY: as above; the hooks are chained as PostgreSQL documents.
    unsafe {
        pg_sys::MarkGUCPrefixReserved(c"cuckoo".as_ptr());
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
        ON_NEW_REGION = Some(on_new_region);
    }
    true
}

/// The caps in effect in this session (see `region/registry/limits.rs`).
pub(super) fn session_limits() -> Limits {
    // Read on every insert into a named filter: a plain load of each
    // setting (`GucSetting::get` checks the calling thread first, which costs
    // more than the insert's other bookkeeping together).
    // SAFETY: each pointer is the GUC's variable, an i32 that only this
    // backend's GUC machinery writes, on this (the backend's only) thread.
    let cap = |s: &GucSetting<i32>, unit: u64| u64::try_from(unsafe { *s.as_ptr() }).ok().map(|v| v * unit);
    Limits {
        role_filters: cap(&MAX_FILTERS_PER_ROLE, 1),
        role_bytes: cap(&MAX_KB_PER_ROLE, 1024),
        database_filters: cap(&MAX_FILTERS_PER_DATABASE, 1),
        database_bytes: cap(&MAX_KB_PER_DATABASE, 1024),
    }
}

fn region_bytes() -> u64 {
    SHARED_MEMORY_MB.get() as u64 * (1 << 20)
}

/// One epoch slot per process that can run SQL: regular backends and background
/// workers (including parallel workers) have `pgprocno < MaxBackends`; auxiliary
/// processes follow.
fn slot_count() -> u64 {
    // SAFETY: MaxBackends is set before shared memory is sized.
    unsafe { pg_sys::MaxBackends as u64 + pg_sys::NUM_AUXILIARY_PROCS as u64 }
}

/// ShmemInitStruct's memory is cache-line aligned; blocks want page alignment.
const ALIGN_SLACK: u64 = 4096;

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    // SAFETY: called by the postmaster while it sizes shared memory.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace((region_bytes() + ALIGN_SLACK) as usize);
        pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    // SAFETY: called at shared memory creation (postmaster, or each backend under
    // EXEC_BACKEND) with AddinShmemInitLock taken as PostgreSQL's own modules do.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let raw = pg_sys::ShmemInitStruct(SHMEM_NAME.as_ptr(), (region_bytes() + ALIGN_SLACK) as usize, &mut found)
            as *mut u8;
        let base = raw.add(raw.align_offset(ALIGN_SLACK as usize));
        let region = if found {
            Region::attach(base, region_bytes(), slot_count())
        } else {
            Region::init(base, region_bytes(), slot_count())
        };
        REGISTRY_LOCK = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
        pg_sys::LWLockRelease(init_lock);
        match region {
            Ok(r) => {
                REGION = Some(r);
                if !found {
                    // A new region (server start, or reinitialisation after a
                    // crash): the saved durable filters come back first; WAL
                    // replay, if any, continues from them.
                    if let Some(f) = ON_NEW_REGION {
                        f(&r);
                    }
                }
            }
            Err(why) => fail(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("cannot set up the cuckoo shared region: {why}"),
                Some("Raise cuckoo.shared_memory."),
            ),
        }
    }
}

/// The region, or the error that explains how to get one.
pub(super) fn region() -> &'static Region {
    // SAFETY: REGION is written once, before any backend runs SQL.
    match unsafe { (*std::ptr::addr_of!(REGION)).as_ref() } {
        Some(r) => r,
        None => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "cuckoo must be loaded via shared_preload_libraries to use named filters".into(),
            Some("Add cuckoo to shared_preload_libraries in postgresql.conf and restart the server."),
        ),
    }
}

/// This process's epoch slot and statistics stripe.
pub(super) fn my_slot() -> usize {
    // SAFETY: MyProc is set for every process that runs SQL functions.
    unsafe {
        if pg_sys::MyProc.is_null() {
            error!("cuckoo: no PGPROC for this process");
        }
        (*pg_sys::MyProc).pgprocno as usize
    }
}

/// Runs `f` while this process is pinned as a reader, as a long batched lookup
/// keeps it (for tests: nothing that waits for writers may wait for it).
#[cfg(feature = "pg_test")]
pub fn with_reader_pin<T>(f: impl FnOnce() -> T) -> T {
    let r = region();
    let _pin = r.pin(my_slot()).expect("slot in range");
    f()
}

/// Runs `f` holding the registry lock. An error inside releases the lock through
/// PostgreSQL's error cleanup (which releases every LWLock).
pub(super) fn with_registry_lock<T>(f: impl FnOnce(&Region, &Locked) -> T) -> T {
    let r = region();
    // SAFETY: the lock was set up with the region; LWLockAcquire holds interrupts
    // until the release, so no cancel lands in between.
    unsafe {
        pg_sys::LWLockAcquire(REGISTRY_LOCK, pg_sys::LWLockMode::LW_EXCLUSIVE);
        // The proof of the lock ends before the lock does.
        let out = {
            let lk = Locked::assume();
            f(r, &lk)
        };
        pg_sys::LWLockRelease(REGISTRY_LOCK);
        out
    }
}

/// Sleeps, answering cancel requests (never pinned or holding the registry lock).
pub(super) fn wait_for(d: std::time::Duration) {
    pgrx::check_for_interrupts!();
    // SAFETY: a plain sleep.
    unsafe { pg_sys::pg_usleep(d.as_micros() as std::ffi::c_long) };
}

/// Rereads the configuration file if a SIGHUP asked for it (the worker only).
pub(super) fn reload_config_if_asked() {
    if BackgroundWorker::sighup_received() {
        // SAFETY: rereads the configuration file, as a SIGHUP asks.
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
    }
}
