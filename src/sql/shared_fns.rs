//! Named filters in shared memory: the `cuckoo.shared_memory` setting, the
//! shared-memory hooks, the registry lock, and the SQL functions over filter names
//! (`cf_create`, `cf_drop`, `cf_insert`/`cf_contains`/`cf_delete` by name,
//! `cf_publish`, `cf_snapshot`, the lookup grant) and the rows of the
//! `cuckoo_filters` view. The region itself is `crate::region` (no pgrx).

use std::ffi::CStr;
use std::mem::MaybeUninit;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::datatype::{filter_arg_once, value_from_words};
use super::keys::KeyHasher;
use super::value_fns::sizing_error;
use super::wal::{log, log_content};
use crate::filter::dense::DenseHeader;
use crate::filter::sizing::{size_for_capacity, SizingError};
use crate::filter::{OpStats, Table};
use crate::region::durable::Units;
use crate::region::registry::{published_fpp, CHANGED_WORDS, DURABLE_OPEN, READERS_NONE, READERS_PUBLIC};
use crate::region::registry::Pin;
use crate::region::wal::{ContentKind, Meta, Record};
use crate::region::{EntryInfo, Locked, NewFilter, Region, RegionError};

/// `cuckoo.shared_memory`, in megabytes.
static SHARED_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(64);
/// `cuckoo.debug_cut_write_delay`, in milliseconds (see `durability`).
pub(super) static CUT_WRITE_DELAY_MS: GucSetting<i32> = GucSetting::<i32>::new(0);

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;
/// Set by the startup hook in the postmaster (inherited by every backend it forks)
/// or in a backend of a server without fork.
static mut REGION: Option<Region> = None;
static mut REGISTRY_LOCK: *mut pg_sys::LWLock = std::ptr::null_mut();
const TRANCHE: &CStr = c"cuckoo";
const SHMEM_NAME: &CStr = c"cuckoo filters";

/// Raises an ERROR with a SQLSTATE, a message and an optional hint.
fn fail(code: PgSqlErrorCode, message: String, hint: Option<&str>) -> ! {
    let mut report = pgrx::pg_sys::panic::ErrorReport::new(code, message, "cuckoo");
    if let Some(h) = hint {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Registers the setting and, when loaded at server start, the hooks.
pub fn init() {
    // SAFETY: called from _PG_init in a single-threaded process.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        // Loaded on first use instead: values work, named filters explain what is
        // missing. (A server-start setting cannot be defined after start-up.)
        return;
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
    // SAFETY: as above; the hooks are chained as PostgreSQL documents.
    unsafe {
        pg_sys::MarkGUCPrefixReserved(c"cuckoo".as_ptr());
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
    super::wal::register();
    super::wal::register_commit_flush();
    super::durability::register_worker();
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
        let raw = pg_sys::ShmemInitStruct(SHMEM_NAME.as_ptr(), (region_bytes() + ALIGN_SLACK) as usize, &mut found) as *mut u8;
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
                    super::durability::restore(&r);
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
    match unsafe { (*(&raw const REGION)).as_ref() } {
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

/// Pins this process (see `region::epoch`) and checks that entry `index` is still
/// at `seq`: the pin to hold while using the filter the entry described, or None
/// (unpinned again) if the entry changed.
fn pin_current(r: &Region, index: usize, seq: u64) -> Option<Pin<'_>> {
    let Some(pin) = r.pin(my_slot()) else { error!("cuckoo: process slot out of range") };
    r.still_current(index, seq).then_some(pin)
}

/// As [`pin_current`], pinned as a writer (one that may change bucket words).
fn pin_current_writer(r: &Region, index: usize, seq: u64) -> Option<Pin<'_>> {
    let Some(pin) = r.pin_writer(my_slot()) else { error!("cuckoo: process slot out of range") };
    r.still_current(index, seq).then_some(pin)
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
        let lk = Locked::assume();
        let out = f(r, &lk);
        drop(lk);
        pg_sys::LWLockRelease(REGISTRY_LOCK);
        out
    }
}

fn db() -> u32 {
    // SAFETY: plain read of a backend global.
    unsafe { pg_sys::MyDatabaseId.to_u32() }
}

// Called once per row by the by-name functions: declared directly so that the call
// skips pgrx's error-catching boundary, which GetUserId (a read of a backend
// global that never raises an error) does not need.
unsafe extern "C" {
    #[link_name = "GetUserId"]
    fn get_user_id() -> pg_sys::Oid;
}

fn user() -> pg_sys::Oid {
    // SAFETY: no preconditions, no error paths.
    unsafe { get_user_id() }
}

fn not_found(name: &str) -> ! {
    fail(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("cuckoo filter \"{name}\" does not exist"), None)
}

fn region_error(name: &str, e: RegionError) -> ! {
    match e {
        RegionError::NotFound => not_found(name),
        RegionError::Exists => {
            fail(PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT, format!("cuckoo filter \"{name}\" already exists"), None)
        }
        RegionError::NoSpace { .. } => fail(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!("not enough cuckoo shared memory for filter \"{name}\": {e}"),
            Some("Drop unused filters, create a smaller one, or raise cuckoo.shared_memory (takes effect at restart)."),
        ),
        RegionError::NoEntries { .. } => fail(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!("no room for cuckoo filter \"{name}\": {e}"),
            Some("Drop unused filters or raise cuckoo.shared_memory (one entry per 64 kB)."),
        ),
        RegionError::BadName(why) => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, why, None),
        RegionError::BadParams(_) => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string(), None),
        RegionError::Busy => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
            format!("cuckoo filter \"{name}\" cannot be changed now: {e}"),
            None,
        ),
        RegionError::Closed => closed_error(),
    }
}

fn closed_error() -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "durable cuckoo filters cannot be changed now: the cuckoo durability worker is not running".into(),
        Some("It starts with the server and restarts within a second after an error; see the server log. It needs a free max_worker_processes slot."),
    )
}

/// The error for a filter whose contents were lost.
fn needs_reload(info: &EntryInfo) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("cuckoo filter \"{}\" needs a reload: {}", info.name, super::wal::reason::text(info.reload_reason)),
        Some("Publish its contents again with cf_publish (for example from cf_agg over the source table), or drop it."),
    )
}

/// Sleeps, answering cancel requests (never pinned or holding the registry lock).
pub(super) fn wait_for(d: std::time::Duration) {
    pgrx::check_for_interrupts!();
    // SAFETY: a plain sleep.
    unsafe { pg_sys::pg_usleep(d.as_micros() as std::ffi::c_long) };
}

/// Checks that this session may change filters now: like `nextval` on a
/// logged sequence, a change to a durable filter is refused in a read-only
/// transaction, on a standby and in parallel mode (its commit is made durable
/// by `wal::at_commit`).
fn prepare_write(durable: bool, what: &CStr) {
    // SAFETY: these raise 25006 (or 0A000 for parallel mode) with PostgreSQL's
    // own messages.
    unsafe {
        if pg_sys::RecoveryInProgress() {
            pg_sys::PreventCommandDuringRecovery(what.as_ptr());
        }
        if durable {
            pg_sys::PreventCommandIfReadOnly(what.as_ptr());
            pg_sys::PreventCommandIfParallelMode(what.as_ptr());
        }
    }
}

/// Waits (up to ten seconds, cancellable) for durable changes to be accepted;
/// raises the error that explains why not. Never pinned or holding the lock.
fn wait_durable_open(r: &Region) {
    for _ in 0..10_000 {
        if r.durable_state() == DURABLE_OPEN {
            return;
        }
        wait_for(std::time::Duration::from_millis(1));
    }
    closed_error()
}

/// Text argument `n` as a string (names are short; detoasted if need be).
///
/// # Safety
/// Argument `n` of `fcinfo` is a non-null text datum.
unsafe fn text_arg<'a>(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> &'a str {
    // SAFETY: as documented; a packed or plain varlena is read in place, any other
    // form detoasted into the current context.
    unsafe {
        let mut raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<pg_sys::varlena>();
        if pgrx::varlena::varatt_is_1b_e(raw) || pgrx::varlena::varatt_is_4b_c(raw) {
            raw = pg_sys::pg_detoast_datum_packed(raw);
        }
        let bytes = pgrx::varlena::varlena_to_byte_slice(raw);
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(_) => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "cuckoo filter names must be valid UTF-8".into(), None),
        }
    }
}

/// Who may do what with a filter: its owner's members (and superusers, who have
/// every role's privileges) may do anything; lookups are also open to the role
/// the owner granted them to (or everyone, for `public`).
fn may_access(info: &EntryInfo, write: bool, who: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups on valid role ids; may raise an ERROR (no lock or pin
    // is held here that the error cleanup would not release).
    unsafe {
        if pg_sys::has_privs_of_role(who, pg_sys::Oid::from(info.owner)) {
            return true;
        }
        !write
            && match info.readers {
                READERS_NONE => false,
                READERS_PUBLIC => true,
                role => pg_sys::has_privs_of_role(who, pg_sys::Oid::from(role as u32)),
            }
    }
}

fn require_access(info: &EntryInfo, write: bool) {
    if !may_access(info, write, user()) {
        fail(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied for cuckoo filter \"{}\"", info.name),
            Some(if write {
                "Only members of the filter's owning role may change or drop it."
            } else {
                "Only members of the filter's owning role, or of the role it granted lookups to with cf_grant_lookup, may read it."
            }),
        );
    }
}

/// Waits, answering cancel requests, while `busy` holds. Never called pinned or
/// with the registry lock held.
fn wait_while(busy: impl Fn() -> bool) {
    let backoff = crossbeam_utils::Backoff::new();
    while busy() {
        if backoff.is_completed() {
            pgrx::check_for_interrupts!();
            // SAFETY: a plain sleep.
            unsafe { pg_sys::pg_usleep(100) };
        } else {
            backoff.snooze();
        }
    }
}

/// Bucket words allocated in the current memory context (freed with it, also on
/// error).
struct PgWords {
    ptr: *mut u64,
    len: usize,
}

impl PgWords {
    fn new(len: usize) -> PgWords {
        // SAFETY: a huge allocation of `len` words in the current context.
        let ptr = unsafe { pg_sys::MemoryContextAllocHuge(pg_sys::CurrentMemoryContext, len.max(1) * 8) as *mut u64 };
        PgWords { ptr, len }
    }

    /// # Safety
    /// No other reference to the words may exist while the slice is used.
    unsafe fn as_mut_slice<'a>(&self) -> &'a mut [u64] {
        // SAFETY: `len` words allocated in `new`, 8-aligned (MAXALIGN).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// Per-call-site state of the by-name functions, in `fn_extra`; all-zero is the
/// valid unresolved state.
#[repr(C)]
pub(super) struct NamedCall {
    key: KeyHasher,
    resolved: bool,
    write: bool,
    /// For inserts and deletes, the resolved filter's generation if it is
    /// durable, else 0.
    gen: u64,
    name_len: usize,
    name: [u8; 64],
    user: pg_sys::Oid,
    index: usize,
    seq: u64,
    seed: u64,
    /// Valid when `resolved`; used only while pinned and after `still_current`.
    table: MaybeUninit<Table<'static>>,
    /// A durable filter's units (for writers: see `region::durable`), as `table`.
    units: MaybeUninit<Option<Units<'static>>>,
}

/// # Safety
/// `fcinfo` is a valid frame whose `fn_extra` only this function uses.
pub(super) unsafe fn named_call<'a>(fcinfo: pg_sys::FunctionCallInfo, write: bool) -> &'a mut NamedCall {
    // SAFETY: fn_extra is null or the NamedCall allocated here in fn_mcxt.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            (*flinfo).fn_extra = pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, std::mem::size_of::<NamedCall>());
            (*((*flinfo).fn_extra as *mut NamedCall)).write = write;
        }
        &mut *((*flinfo).fn_extra as *mut NamedCall)
    }
}

impl NamedCall {
    /// Looks the name up, checks the caller's right, and caches the filter.
    fn resolve(&mut self, r: &'static Region, name: &str, who: pg_sys::Oid) {
        loop {
            let Some(info) = r.find(db(), name) else { not_found(name) };
            require_access(&info, self.write);
            if !info.usable() {
                needs_reload(&info);
            }
            if self.write {
                prepare_write(info.durable, if info.durable { c"cf_insert() or cf_delete() on a durable filter" } else { c"cf_insert() or cf_delete()" });
            }
            let Some(pin) = pin_current(r, info.index, info.seq) else { continue };
            let table = r.table(&info);
            self.seed = table.params().seed;
            self.table = MaybeUninit::new(table);
            self.units = MaybeUninit::new(if self.write { r.units(&info) } else { None });
            drop(pin);
            self.index = info.index;
            self.seq = info.seq;
            self.gen = if info.durable && self.write { info.gen } else { 0 };
            self.user = who;
            self.name[..name.len()].copy_from_slice(name.as_bytes());
            self.name_len = name.len();
            self.resolved = true;
            return;
        }
    }

    /// The region, the filter name (argument 0) and the current role, with the
    /// call site resolved for them; `true` if that took a fresh resolve (the
    /// name or role changed since the last call, or this is the first).
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with a non-null text argument 0.
    unsafe fn current<'a>(&mut self, fcinfo: pg_sys::FunctionCallInfo) -> (&'static Region, &'a str, pg_sys::Oid, bool) {
        let r = region();
        // SAFETY: as documented.
        let name = unsafe { text_arg(fcinfo, 0) };
        let who = user();
        let fresh = !self.resolved || self.user != who || &self.name[..self.name_len] != name.as_bytes();
        if fresh {
            self.resolve(r, name, who);
        }
        (r, name, who, fresh)
    }

    /// Runs `op` on the named filter (argument 0) for the key (argument 1): hashes
    /// first (hashing may raise errors), then pins, checks the cached entry is
    /// still the same filter, and runs `op` without anything that can fail.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with non-null text and key arguments.
    unsafe fn run<T>(&mut self, fcinfo: pg_sys::FunctionCallInfo, op: impl Fn(&Table<'_>, u64, &Region, usize, usize, u64) -> T) -> T {
        // SAFETY: as documented.
        let (r, name, who, fresh) = unsafe { self.current(fcinfo) };
        if !fresh && self.gen != 0 {
            // The transaction may have become read-only since the call site
            // was resolved.
            prepare_write(true, c"cf_insert() or cf_delete() on a durable filter");
        }
        let slot = my_slot();
        loop {
            // SAFETY: as documented; the hasher was resolved for this call site.
            let h = unsafe { self.key.hash_arg(fcinfo, 1, self.seed) };
            let pinned = if self.write { pin_current_writer(r, self.index, self.seq) } else { pin_current(r, self.index, self.seq) };
            if let Some(pin) = pinned {
                if self.write && r.writers_paused(self.index) {
                    // A snapshot is copying this filter: wait unpinned (so that it
                    // can proceed), and cancellable.
                    drop(pin);
                    wait_while(|| r.writers_paused(self.index));
                    continue;
                }
                if self.gen != 0 && r.durable_state() != DURABLE_OPEN {
                    // Durable changes are frozen or not yet open.
                    drop(pin);
                    wait_durable_open(r);
                    continue;
                }
                if self.gen != 0 {
                    // Before anything is logged: the next checkpoint's cut then
                    // includes this filter (see `durability`).
                    r.mark_changed(self.index, CHANGED_WORDS);
                }
                // SAFETY: `resolved` implies `table` and `units` were written; the
                // entry is unchanged and we are pinned, so its memory cannot be
                // reused.
                let (table, units) = unsafe { (self.table.assume_init_ref(), self.units.assume_init_ref()) };
                let out = match units {
                    Some(u) => op(&table.with_hook(u), h, r, self.index, slot, self.gen),
                    None => op(table, h, r, self.index, slot, self.gen),
                };
                drop(pin);
                return out;
            }
            self.resolve(r, name, who);
        }
    }

    /// Looks up many keys in the named filter (argument 0), counted as that
    /// many lookups. `hashes` gives the keys' hashes under a seed; it runs
    /// unpinned, since hashing may raise errors.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with a non-null text argument 0.
    pub(super) unsafe fn lookup_many<'a>(&mut self, fcinfo: pg_sys::FunctionCallInfo, hashes: impl Fn(&mut KeyHasher, u64) -> &'a [u64]) -> &'a [bool] {
        // SAFETY: as documented.
        let (r, name, who, _) = unsafe { self.current(fcinfo) };
        let slot = my_slot();
        loop {
            let hs = hashes(&mut self.key, self.seed);
            let out = super::datatype::palloc_slice::<bool>(hs.len());
            if let Some(pin) = pin_current(r, self.index, self.seq) {
                // SAFETY: resolved, unchanged and pinned (see `run`).
                unsafe { self.table.assume_init_ref() }.contains_many(hs, out);
                r.count_lookups(self.index, slot, hs.len() as u64);
                drop(pin);
                return out;
            }
            self.resolve(r, name, who);
        }
    }
}

/// What the planner may learn from a named filter: the answers for some keys,
/// its items, and its false-positive rate at that fill.
pub(super) struct PlanProbe {
    pub answers: Vec<bool>,
    pub items: u64,
    pub fpp: f64,
}

/// For the planner: looks up the hashes `hashes(seed)` in the named filter
/// `name` of this database, without counting them. None when cuckoo is not
/// preloaded, the filter does not exist, needs a reload, or the current role may
/// not look it up (the query itself reports why), or when it was replaced while
/// being read.
pub(super) fn probe_named_for_plan(name: &str, hashes: impl FnOnce(u64) -> Vec<u64>) -> Option<PlanProbe> {
    // SAFETY: REGION is written once, before any backend runs SQL.
    let r = unsafe { (*(&raw const REGION)).as_ref() }?;
    let info = r.find(db(), name)?;
    if !info.usable() || !may_access(&info, false, user()) {
        return None;
    }
    let pin = pin_current(r, info.index, info.seq)?;
    let table = r.table(&info);
    let params = table.params();
    drop(pin);
    let hs = hashes(params.seed);
    let mut answers = vec![false; hs.len()];
    let pin = pin_current(r, info.index, info.seq)?;
    table.contains_many(&hs, &mut answers);
    // A delete overtaking its insert can leave the shared count briefly below
    // zero (wrapped); the view clamps it the same way.
    let items = table.item_count().min(params.slot_count());
    drop(pin);
    Some(PlanProbe {
        answers,
        items,
        fpp: crate::filter::sizing::expected_fpp(&params, items),
    })
}

v1_functions! {
    /// `cf_contains(name text, key anyelement) -> boolean`.
    fn cf_contains_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 anyelement.
        unsafe {
            let found = named_call(fcinfo, false).run(fcinfo, |t, h, r, index, slot, _| {
                let mut st = OpStats::default();
                let found = t.contains_counted(h, &mut st);
                r.count_lookup(index, slot, &st);
                found
            });
            pg_sys::Datum::from(found)
        }
    }

    /// `cf_insert(name text, key anyelement) -> boolean`: false when full.
    fn cf_insert_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 anyelement.
        unsafe {
            let ok = named_call(fcinfo, true).run(fcinfo, |t, h, r, index, slot, gen| {
                // Durable: logged before it takes effect, and if the filter is
                // full, the refusal too (see `wal`).
                let logged = (gen != 0).then(|| log(&Record::Insert { gen, hash: h }));
                let mut st = OpStats::default();
                let ok = t.insert_counted(h, &mut st).is_ok();
                if let (false, Some(insert_end)) = (ok, logged) {
                    log(&Record::Refused { gen, hash: h, insert_end });
                }
                r.count_insert(index, slot, ok, &st);
                ok
            });
            pg_sys::Datum::from(ok)
        }
    }

    /// `cf_delete(name text, key anyelement) -> boolean`: false when no copy of
    /// the key's fingerprint is stored.
    fn cf_delete_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 anyelement.
        unsafe {
            let ok = named_call(fcinfo, true).run(fcinfo, |t, h, r, index, slot, gen| {
                let ok = t.delete(h);
                if ok {
                    // Durable: logged after the copy is gone (see `wal`).
                    if gen != 0 {
                        log(&Record::Delete { gen, hash: h });
                    }
                    r.count_delete(index, slot);
                }
                ok
            });
            pg_sys::Datum::from(ok)
        }
    }

    /// `cf_create(name text, capacity bigint, fpp float8, durable boolean) -> void`.
    fn cf_create(fcinfo) {
        // SAFETY: strict; text, int8, float8, and bool unless called through the
        // 0.2.0 declaration (three arguments: not durable, as then).
        let (name, capacity, fpp, durable) = unsafe {
            (
                text_arg(fcinfo, 0),
                pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as i64,
                f64::from_bits(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 2).value() as u64),
                bool_arg(fcinfo, 3),
            )
        };
        if capacity < 1 {
            sizing_error(SizingError::Capacity(format!("capacity must be at least 1, got {capacity}")));
        }
        let sized = size_for_capacity(capacity as u64, fpp, crate::filter::layout::MAX_BUCKET_COUNT).unwrap_or_else(|e| sizing_error(e));
        prepare_write(durable, c"cf_create()");
        let spec = NewFilter { db: db(), owner: user().to_u32(), name, capacity: sized.capacity, fpp, durable };
        purge_dropped_databases();
        registry_change(name, |_| {}, |r, lk, _| {
            durable_open(r, durable)?;
            r.create(lk, &spec, &sized.params, None, &mut |_, _| {
                if !durable {
                    return 0;
                }
                log(&Record::Create(Meta::of(&spec, READERS_NONE, sized.params)))
            })
        });
        pg_sys::Datum::from(0)
    }

    /// `cf_drop(name text) -> boolean`: false if there is no such filter.
    fn cf_drop(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        let dropped = registry_change(
            name,
            |found| {
                if let Some(info) = found {
                    require_access(info, true);
                    prepare_write(info.durable, c"cf_drop()");
                }
            },
            |r, lk, found| match found {
                Some(info) => {
                    durable_open(r, info.durable)?;
                    r.drop_filter(lk, info)?;
                    if info.durable {
                        log(&Record::Drop { gen: info.gen });
                    }
                    Ok(true)
                }
                None => Ok(false),
            },
        );
        pg_sys::Datum::from(dropped)
    }

    /// `cf_publish(name text, f cuckoofilter, durable boolean) -> void`: creates
    /// the filter as a copy of `f`, or replaces its contents in one step.
    fn cf_publish(fcinfo) {
        // SAFETY: strict; text, cuckoofilter (validated when read), and bool
        // unless called through the 0.2.0 declaration.
        let (name, v, durable) = unsafe { (text_arg(fcinfo, 0), filter_arg_once(fcinfo, 1), bool_arg(fcinfo, 2)) };
        prepare_write(durable, c"cf_publish()");
        let params = v.params();
        let capacity = v.capacity();
        let fpp = published_fpp(&params, capacity);
        // The value's buckets expanded into bucket words before the registry lock
        // is taken (decoding a large value takes a while), then copied under it.
        let words: Vec<u64> = v.words().collect();
        let contents = |out: &mut [u64]| out.copy_from_slice(&words);
        let spec = NewFilter { db: db(), owner: user().to_u32(), name, capacity, fpp, durable };
        purge_dropped_databases();
        registry_change(
            name,
            |found| {
                if let Some(info) = found {
                    require_access(info, true);
                    prepare_write(info.durable, c"cf_publish()");
                }
            },
            |r, lk, found| {
                durable_open(r, durable || found.is_some_and(|i| i.durable))?;
                // A durable publish logs the contents before they are linked;
                // the generation is the end of their first record.
                let mut stamp = |words: &[u64], items: u64| {
                    if !durable {
                        return 0;
                    }
                    // A replaced filter keeps its owner and grant.
                    let meta = Meta {
                        owner: found.map_or(spec.owner, |i| i.owner),
                        ..Meta::of(&spec, found.map_or(READERS_NONE, |i| i.readers), params)
                    };
                    log_content(ContentKind::Publish, 0, &meta, words, items)
                };
                match found {
                    Some(info) => {
                        let made = r.replace(lk, info, &params, &contents, capacity, fpp, durable, &mut stamp)?;
                        if info.durable && !durable {
                            // No longer durable: replay forgets it.
                            log(&Record::Drop { gen: info.gen });
                        }
                        Ok(made)
                    }
                    None => r.create(lk, &spec, &params, Some(&contents), &mut stamp),
                }
            },
        );
        pg_sys::Datum::from(0)
    }

    /// `cf_snapshot(name text) -> cuckoofilter`: a copy that holds every key
    /// stored throughout the call, compacted into a dense value.
    fn cf_snapshot(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        let r = region();
        loop {
            let Some(info) = r.find(db(), name) else { not_found(name) };
            require_access(&info, false);
            if !info.usable() {
                needs_reload(&info);
            }
            let params = {
                let Some(_pin) = pin_current(r, info.index, info.seq) else { continue };
                r.table(&info).params()
            };
            super::datatype::check_value_size(&params);
            // The copy of the words, in this call's memory context.
            let words = PgWords::new(params.bucket_count as usize);
            // SAFETY: the fresh buffer is ours alone.
            let out = unsafe { words.as_mut_slice() };
            let slot = my_slot();
            let copied = {
                let Some(_pin) = pin_current(r, info.index, info.seq) else { continue };
                // Other processes stay pinned for one call's computation; this
                // allows seconds.
                r.snapshot(&info, slot, out, 1 << 22)
            };
            match copied {
                Ok(items) => {
                    let h = DenseHeader { params, items, capacity: info.capacity.clamp(1, params.slot_count()) };
                    return value_from_words(&h, out.iter().copied()).as_datum();
                }
                Err(_) => fail(
                    PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                    format!("could not snapshot cuckoo filter \"{name}\": other sessions stayed inside filter operations"),
                    None,
                ),
            }
        }
    }

    /// `cf_grant_lookup(name text, role text) -> void`: lets `role` (and its
    /// members), or everyone for `public`, look the filter up and snapshot it.
    fn cf_grant_lookup(fcinfo) {
        // SAFETY: strict; text, text.
        let (name, role) = unsafe { (text_arg(fcinfo, 0), text_arg(fcinfo, 1)) };
        // Exactly "public", as PostgreSQL's own functions take it: a role may be
        // called "Public".
        let readers = if role == "public" {
            READERS_PUBLIC
        } else {
            let c = std::ffi::CString::new(role).unwrap_or_else(|_| error!("role name contains a NUL byte"));
            // SAFETY: valid C string; raises 42704 for an unknown role.
            unsafe { pg_sys::get_role_oid(c.as_ptr(), false).to_u32() as u64 }
        };
        set_readers(name, readers);
        pg_sys::Datum::from(0)
    }

    /// `cf_revoke_lookup(name text) -> void`: back to owner members only.
    fn cf_revoke_lookup(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        set_readers(name, READERS_NONE);
        pg_sys::Datum::from(0)
    }
}

fn set_readers(name: &str, readers: u64) {
    registry_change(
        name,
        |found| match found {
            Some(info) => {
                require_access(info, true);
                prepare_write(info.durable, c"cf_grant_lookup() or cf_revoke_lookup()");
            }
            None => not_found(name),
        },
        |r, lk, found| {
            let info = found.expect("checked before the lock");
            durable_open(r, info.durable)?;
            r.set_readers(lk, info, readers)?;
            if info.durable {
                log(&Record::Grant { gen: info.gen, readers });
            }
            Ok(())
        },
    );
}

/// Under the registry lock: a change to a durable filter needs durable changes
/// to be open (the caller waits outside the lock and tries again).
fn durable_open(r: &Region, durable: bool) -> Result<(), RegionError> {
    if durable && r.durable_state() != DURABLE_OPEN {
        Err(RegionError::Closed)
    } else {
        Ok(())
    }
}

/// Boolean argument `n`, or false if the function was declared with fewer
/// arguments (an older extension version's declaration).
///
/// # Safety
/// `fcinfo` is a valid frame; argument `n`, if passed, is a non-null bool.
unsafe fn bool_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> bool {
    // SAFETY: as documented.
    unsafe { ((*fcinfo).nargs as usize) > n && pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).value() != 0 }
}

/// Changes the registry for filter `name`: looks it up and runs `check` (which
/// may read catalogs and raise errors) *before* taking the registry lock, since a
/// catalog lock wait under an LWLock could deadlock where PostgreSQL cannot see
/// it; then, under the lock, applies `change` if the entry is still the one
/// checked, and starts over if not. Space or records still held by copies that
/// running statements read are waited for outside the lock (up to about a second,
/// cancellable) before the error is reported.
fn registry_change<T>(
    name: &str,
    check: impl Fn(Option<&EntryInfo>),
    change: impl Fn(&Region, &Locked, Option<&EntryInfo>) -> Result<T, RegionError>,
) -> T {
    let r = region();
    let mut waits = 0;
    loop {
        let before = r.find(db(), name);
        check(before.as_ref());
        let key = before.as_ref().map(|i| (i.index, i.seq));
        let attempt = with_registry_lock(|r, lk| {
            let now = r.find(db(), name);
            (now.as_ref().map(|i| (i.index, i.seq)) == key).then(|| change(r, lk, now.as_ref()))
        });
        match attempt {
            None => continue,
            Some(Ok(v)) => return v,
            Some(Err(RegionError::Closed)) => {
                wait_durable_open(r);
                continue;
            }
            Some(Err(e)) => {
                let releasing = match e {
                    RegionError::Busy => true,
                    RegionError::NoSpace { requested, free, pending, .. } => pending > 0 && free + pending >= requested,
                    _ => false,
                };
                if releasing && waits < 1000 {
                    waits += 1;
                    pgrx::check_for_interrupts!();
                    // SAFETY: a plain sleep, with no lock held.
                    unsafe { pg_sys::pg_usleep(1000) };
                    continue;
                }
                region_error(name, e)
            }
        }
    }
}

/// Drops the filters of databases that no longer exist (a filter cannot be
/// reached from another database, so nothing else would ever free them). Runs
/// before creating or publishing; the catalog is read outside the lock.
fn purge_dropped_databases() {
    let r = region();
    let mut dbs: Vec<u32> = r.list_all().iter().map(|i| i.db).collect();
    dbs.sort_unstable();
    dbs.dedup();
    for db in dbs {
        // SAFETY: a syscache probe by OID.
        let exists = unsafe {
            pg_sys::SearchSysCacheExists(
                pg_sys::SysCacheIdentifier::DATABASEOID as i32,
                pg_sys::Datum::from(db),
                pg_sys::Datum::from(0),
                pg_sys::Datum::from(0),
                pg_sys::Datum::from(0),
            )
        };
        if !exists {
            with_registry_lock(|r, lk| {
                for info in r.list(db) {
                    // A durable one is dropped only while its drop can be logged
                    // (else a later purge does it).
                    if info.durable && r.durable_state() != DURABLE_OPEN {
                        continue;
                    }
                    if r.drop_filter(lk, &info).is_ok() && info.durable {
                        log(&Record::Drop { gen: info.gen });
                    }
                }
            });
        }
    }
}

fn role_name(oid: u64) -> Option<String> {
    // SAFETY: noerr lookup; returns null for a dropped role.
    unsafe {
        let p = pg_sys::GetUserNameFromId(pg_sys::Oid::from(oid as u32), true);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

/// Rows of the `cuckoo_filters` view: the current database's filters that the
/// caller may look up.
#[pg_extern(volatile, parallel_safe)]
#[allow(clippy::type_complexity)]
fn cuckoo_filters_rows() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(capacity, i64),
        name!(items, i64),
        name!(load_factor, f64),
        name!(bytes, i64),
        name!(fpp, f64),
        name!(inserts, i64),
        name!(lookups, i64),
        name!(deletes, i64),
        name!(failed_inserts, i64),
        name!(lookup_retries, i64),
        name!(kicks, i64),
        name!(owner, Option<String>),
        name!(lookup_grantee, Option<String>),
        name!(durable, bool),
        name!(state, String),
        name!(reason, Option<String>),
        name!(checkpoint_write_bytes, Option<i64>),
        name!(checkpoint_wal_bytes, Option<i64>),
        name!(disk_bytes, Option<i64>),
    ),
> {
    let r = region();
    let who = user();
    let mut rows = Vec::new();
    for info in r.list(db()) {
        if !may_access(&info, false, who) {
            continue;
        }
        let (items, slots) = if !info.usable() {
            (0, info.params.map_or(1, |p| p.slot_count()))
        } else {
            let Some(_pin) = pin_current(r, info.index, info.seq) else { continue };
            let t = r.table(&info);
            // The count is changed after each bucket word, so it can lag (even
            // dip below zero for a moment when a delete overtakes an insert).
            let slots = t.params().slot_count();
            ((t.item_count() as i64).clamp(0, slots as i64) as u64, slots)
        };
        let s = r.stat_totals(info.index);
        let d = info.durable.then(|| r.durable_stats(info.index));
        let grantee = match info.readers {
            READERS_NONE => None,
            READERS_PUBLIC => Some("public".to_string()),
            role => role_name(role),
        };
        rows.push((
            info.name.clone(),
            info.capacity as i64,
            items as i64,
            items as f64 / slots as f64,
            (info.blocks * crate::region::registry::BLOCK_BYTES) as i64,
            info.fpp,
            s.inserts as i64,
            s.lookups as i64,
            s.deletes as i64,
            s.failed_inserts as i64,
            s.lookup_retries as i64,
            s.kicks as i64,
            role_name(info.owner as u64),
            grantee,
            info.durable,
            if info.usable() { "ready" } else { "needs reload" }.to_string(),
            (!info.usable()).then(|| super::wal::reason::text(info.reload_reason).to_string()),
            d.as_ref().map(|d| d.cut_file_bytes as i64),
            d.as_ref().map(|d| d.cut_wal_bytes as i64),
            d.as_ref().map(|d| (d.base_bytes + d.delta_bytes) as i64),
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    TableIterator::new(rows)
}
