//! How a function call reaches a named filter: the name resolved once per call
//! site (`fn_extra`) and checked again under a pin on every call, the role's
//! right to read or change it, the checks before a change (read-only
//! transactions, standbys, durable changes open), the caps a growing filter
//! keeps to, and the read-only probe the planner uses.

use std::ffi::CStr;
use std::mem::MaybeUninit;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::attach::{my_slot, region, session_limits, wait_for, REGION};
use super::citus;
use super::errors::{closed_error, fail, not_found, over_limit};
use super::reload::needs_reload;
use crate::filter::Chain;
use crate::filter::{KeyKind, KeyType};
use crate::region::wal::MANY_MAX;
use crate::region::Pin;
use crate::region::RegionTables;
use crate::region::{DurableGate, CHANGED_WORDS, READERS_NONE, READERS_PUBLIC};
use crate::region::{EntryInfo, Region};
use crate::sql::keys::KeyHasher;

/// Pins this process (see `region::epoch`) and checks that entry `index` is still
/// at `seq`: the pin to hold while using the filter the entry described, or None
/// (unpinned again) if the entry changed.
pub(super) fn pin_current(r: &Region, index: usize, seq: u64) -> Option<Pin<'_>> {
    let Some(pin) = r.pin(my_slot()) else { error!("cuckoo: process slot out of range") };
    r.still_current(index, seq).then_some(pin)
}

/// As [`pin_current`], pinned as a writer (one that may change bucket words).
fn pin_current_writer(r: &Region, index: usize, seq: u64) -> Option<Pin<'_>> {
    let Some(pin) = r.pin_writer(my_slot()) else { error!("cuckoo: process slot out of range") };
    r.still_current(index, seq).then_some(pin)
}

/// Whether database `db` exists (a filter of a dropped one can never be
/// reached again; the next create or publish drops it).
pub(crate) fn database_exists(db: u32) -> bool {
    // SAFETY: a syscache probe by OID.
    unsafe {
        pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::DATABASEOID as i32,
            pg_sys::Datum::from(db),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    }
}

/// This database's OID, for the bindings of `sql::bound`.
pub(crate) fn current_db() -> u32 {
    db()
}

pub(super) fn db() -> u32 {
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

pub(super) fn user() -> pg_sys::Oid {
    // SAFETY: no preconditions, no error paths.
    unsafe { get_user_id() }
}

/// The current role, as the owner of a filter being made: refused (42704) if
/// it was dropped while this session ran (a filter it made would be owned by
/// an OID no role has, until a later role is given it). The check and the
/// filter's creation are not atomic with a `DROP ROLE` running at the same
/// moment in another session.
pub(super) fn new_owner() -> u32 {
    let me = user();
    // SAFETY: a syscache probe by OID.
    let exists = unsafe {
        pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::AUTHOID as i32,
            pg_sys::Datum::from(me),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    };
    if !exists {
        fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("role with OID {} does not exist", me.to_u32()),
            Some("The role this session runs as was dropped; a cuckoo filter needs an owner that exists."),
        );
    }
    me.to_u32()
}

/// Checks that this session may change filters now: like `nextval` on a
/// logged sequence, a change to a durable filter is refused in a read-only
/// transaction, on a standby and in parallel mode (its commit is made durable
/// by `log::at_commit`).
pub(super) fn prepare_write(durable: bool, what: &CStr) {
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
pub(super) fn wait_durable_open(r: &Region) {
    for _ in 0..10_000 {
        if r.durable_state() == DurableGate::Open {
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
pub(super) unsafe fn text_arg<'a>(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> &'a str {
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
            Err(_) => fail(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "cuckoo filter names must be valid UTF-8".into(),
                None,
            ),
        }
    }
}

/// Who may do what with a filter: its owner's members (and superusers, who have
/// every role's privileges) may do anything; lookups are also open to the role
/// the owner granted them to (or everyone, for `public`).
pub(super) fn may_access(info: &EntryInfo, write: bool, who: pg_sys::Oid) -> bool {
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

pub(super) fn require_access(info: &EntryInfo, write: bool) {
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
    if write {
        super::errors::refuse_if_bound(&info.name);
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

/// The caps a filter's growth keeps to in this session: the byte caps per
/// role and per database (a filter's count does not change when it grows).
fn growth_limits() -> crate::region::Limits {
    let l = session_limits();
    crate::region::Limits { role_filters: None, database_filters: None, ..l }
}

/// After an insert (unpinned): an insert that found the filter full because a
/// cap kept it from adding a table fails (53200), rather than answering false
/// as a filter that cannot grow does.
#[inline]
fn refuse_if_capped(name: &str, tables: &RegionTables<'_>) {
    if !tables.found_full() {
        return;
    }
    if let Some(hit) = tables.refused_by_cap() {
        over_limit(name, &hit, true);
    }
}

/// Per-call-site state of the by-name functions, in `fn_extra`; all-zero is the
/// valid unresolved state.
#[repr(C)]
pub(crate) struct NamedCall {
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
    /// The resolved filter's key type (keys are hashed as it hashes them).
    filter_key: KeyType,
    /// The call's pin (`pin::pin_of`), read when the call site is set up.
    pin: Option<i64>,
    /// For a bound filter's probe (`contains_bound`): whether the resolved
    /// filter's contents are a committed fill's (else every key is a maybe),
    /// and whether that answer must be asked again at each call (it rests on
    /// this transaction's own uncommitted change, which a rollback to a
    /// savepoint may undo), with the filter's durability and generation.
    bound_ready: bool,
    bound_recheck: bool,
    bound_durable: bool,
    bound_gen: u64,
    /// The filter's tables (with a durable filter's units, for writers: see
    /// `region::durable`). Valid when `resolved`; used only while pinned and
    /// after `still_current`.
    tables: MaybeUninit<RegionTables<'static>>,
}

/// # Safety
/// `fcinfo` is a valid frame whose `fn_extra` only this function uses.
pub(crate) unsafe fn named_call<'a>(fcinfo: pg_sys::FunctionCallInfo, write: bool) -> &'a mut NamedCall {
    // SAFETY: fn_extra is null or the NamedCall allocated here in fn_mcxt.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            (*flinfo).fn_extra = pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, std::mem::size_of::<NamedCall>());
            let call = &mut *((*flinfo).fn_extra as *mut NamedCall);
            call.write = write;
            call.pin = super::pin::pin_of(fcinfo);
        }
        &mut *((*flinfo).fn_extra as *mut NamedCall)
    }
}

impl NamedCall {
    /// A probe of a bound filter for the planner's pre-screen
    /// (`cf_bound_contains`): whether the key of argument 1 may be in the
    /// filter of argument 0, reached without a lookup grant (the caller
    /// checked the role's right to read the bound column). A filter that is
    /// missing or needs a reload answers true: "maybe", as a pre-screen that
    /// cannot tell must; so does one whose contents `ready` (asked with the
    /// name, whether the filter is durable and its generation, once per
    /// filter resolved, or at every call while it says its answer does not
    /// last) does not confirm as a committed fill's.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with non-null text and key arguments.
    pub(crate) unsafe fn contains_bound(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
        ready: &dyn Fn(&str, bool, u64) -> (bool, bool),
    ) -> bool {
        // SAFETY: REGION is written once, before any backend runs SQL.
        let Some(r) = (unsafe { (*std::ptr::addr_of!(REGION)).as_ref() }) else { return true };
        // SAFETY: as documented.
        let name = unsafe { text_arg(fcinfo, 0) };
        let who = user();
        let slot = my_slot();
        for _ in 0..16 {
            if !self.resolved || self.user != who || &self.name[..self.name_len] != name.as_bytes() {
                let Some(info) = r.find(db(), name).filter(|i| i.usable()) else { return true };
                let Some(pin) = pin_current(r, info.index, info.seq) else { continue };
                let Some(tables) = r.tables(&info) else { return true };
                self.seed = tables.seed();
                self.filter_key = info.key;
                self.tables = MaybeUninit::new(tables.for_lookups());
                drop(pin);
                self.index = info.index;
                self.seq = info.seq;
                self.gen = 0;
                self.user = who;
                self.name[..name.len()].copy_from_slice(name.as_bytes());
                self.name_len = name.len();
                let (ok, lasting) = ready(name, info.durable, info.gen);
                (self.bound_ready, self.bound_recheck) = (ok, !lasting);
                (self.bound_durable, self.bound_gen) = (info.durable, info.gen);
                self.resolved = true;
            } else if self.bound_recheck {
                let (ok, lasting) = ready(name, self.bound_durable, self.bound_gen);
                (self.bound_ready, self.bound_recheck) = (ok, !lasting);
            }
            if !self.bound_ready {
                return true;
            }
            // SAFETY: as documented; the hasher was resolved for this call site.
            let Some(h) = (unsafe { self.key.hash_arg_for(fcinfo, 1, self.seed, self.filter_key) }) else {
                return false;
            };
            if let Some(pin) = pin_current(r, self.index, self.seq) {
                // SAFETY: resolved, unchanged and pinned (see `run`).
                let tables = unsafe { self.tables.assume_init_ref() };
                let mut op = crate::filter::OpStats::default();
                let out = tables.chain().contains_counted(h, &mut op);
                r.count_lookup(self.index, slot, &op);
                drop(pin);
                return out;
            }
            self.resolved = false;
        }
        true
    }

    /// Looks the name up, checks the caller's right, and caches the filter.
    fn resolve(&mut self, r: &'static Region, name: &str, who: pg_sys::Oid) {
        // The filter last checked: one that replaces it under the name
        // before it is pinned is checked in turn.
        let mut checked = None;
        loop {
            let Some(info) = r.find(db(), name) else {
                citus::check_task(name, None, self.write, self.pin);
                not_found(name)
            };
            require_access(&info, self.write);
            if checked != Some((info.index, info.seq)) {
                // On a Citus cluster: whether this node's filter is the one meant.
                citus::check_task(name, Some(&info), self.write, self.pin);
                if self.write {
                    citus::check_change(name);
                }
                checked = Some((info.index, info.seq));
            }
            if !info.usable() {
                needs_reload(&info);
            }
            if self.write {
                prepare_write(
                    info.durable,
                    if info.durable {
                        c"cf_insert(), cf_insert_new() or cf_delete() on a durable filter"
                    } else {
                        c"cf_insert(), cf_insert_new() or cf_delete()"
                    },
                );
            }
            let Some(pin) = pin_current(r, info.index, info.seq) else { continue };
            let Some(tables) = r.tables(&info) else { needs_reload(&info) };
            self.seed = tables.seed();
            self.filter_key = info.key;
            self.tables = MaybeUninit::new(if self.write { tables } else { tables.for_lookups() });
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
    unsafe fn current<'a>(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> (&'static Region, &'a str, pg_sys::Oid, bool) {
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
    /// A key with no equal among the filter's keys (42.5 for an integer filter)
    /// gives `absent()` instead.
    pub(super) unsafe fn run<T>(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
        absent: impl FnOnce() -> T,
        op: impl Fn(&Chain<'_, RegionTables<'_>>, u64, &Region, usize, usize, u64) -> T,
    ) -> T {
        // SAFETY: as documented.
        let (r, name, who, fresh) = unsafe { self.current(fcinfo) };
        if !fresh && self.gen != 0 {
            // The transaction may have become read-only since the call site
            // was resolved.
            prepare_write(true, c"cf_insert(), cf_insert_new() or cf_delete() on a durable filter");
        }
        let slot = my_slot();
        loop {
            // SAFETY: as documented; the hasher was resolved for this call site.
            let Some(h) = (unsafe { self.key.hash_arg_for(fcinfo, 1, self.seed, self.filter_key) }) else {
                return absent();
            };
            let pinned = if self.write {
                pin_current_writer(r, self.index, self.seq)
            } else {
                pin_current(r, self.index, self.seq)
            };
            if let Some(pin) = pinned {
                let Some(pin) = self.go_ahead(r, pin) else { continue };
                // SAFETY: `resolved` implies `tables` was written; the entry is
                // unchanged and we are pinned, so its memory cannot be reused.
                let tables = unsafe { self.tables.assume_init_ref() };
                if self.write {
                    tables.set_limits(growth_limits());
                }
                let out = op(&tables.chain(), h, r, self.index, slot, self.gen);
                drop(pin);
                if self.write {
                    refuse_if_capped(name, tables);
                }
                return out;
            }
            self.resolve(r, name, who);
        }
    }

    /// Pinned (as a writer, for a change): whether the operation may run now.
    /// If not, it has waited unpinned (cancellable) and the caller pins again:
    /// while a snapshot copies the filter (its writers are paused), and while
    /// durable changes are frozen or not yet open. A durable filter about to
    /// change is marked changed first, before anything is logged: the next
    /// checkpoint's cut then includes it (see `cut`).
    fn go_ahead<'r>(&self, r: &'r Region, pin: Pin<'r>) -> Option<Pin<'r>> {
        if self.write && r.writers_paused(self.index) {
            drop(pin);
            wait_while(|| r.writers_paused(self.index));
            return None;
        }
        if self.gen != 0 && r.durable_state() != DurableGate::Open {
            drop(pin);
            wait_durable_open(r);
            return None;
        }
        if self.gen != 0 {
            r.mark_changed(self.index, CHANGED_WORDS);
        }
        Some(pin)
    }

    /// For an insert into a filter (argument 0) whose key type is pending: its
    /// name and the key type the key (argument 1) gives it.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with non-null text and key arguments.
    pub(super) unsafe fn pending_key(&mut self, fcinfo: pg_sys::FunctionCallInfo) -> Option<(String, KeyType)> {
        // SAFETY: as documented.
        let (_, name, _, _) = unsafe { self.current(fcinfo) };
        if self.filter_key.kind != KeyKind::Pending {
            return None;
        }
        // SAFETY: as documented.
        Some((name.to_string(), unsafe { self.key.arg_key_type(fcinfo, 1) }))
    }

    /// For an insert of many keys into a filter (argument 0) whose key type is
    /// pending: its name.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with a non-null text argument 0.
    pub(crate) unsafe fn pending_name(&mut self, fcinfo: pg_sys::FunctionCallInfo) -> Option<String> {
        // SAFETY: as documented.
        let (_, name, _, _) = unsafe { self.current(fcinfo) };
        (self.filter_key.kind == KeyKind::Pending).then(|| name.to_string())
    }

    /// Makes the next call resolve the filter again.
    pub(crate) fn forget(&mut self) {
        self.resolved = false;
    }

    /// Looks up many keys in the named filter (argument 0), counted as that
    /// many lookups. `hashes` gives the keys' hashes under a seed; it runs
    /// unpinned, since hashing may raise errors.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with a non-null text argument 0.
    pub(crate) unsafe fn lookup_many<'a>(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
        hashes: impl Fn(&mut KeyHasher, u64, KeyType) -> &'a [u64],
    ) -> &'a [bool] {
        // SAFETY: as documented.
        let (r, name, who, _) = unsafe { self.current(fcinfo) };
        let slot = my_slot();
        loop {
            let hs = hashes(&mut self.key, self.seed, self.filter_key);
            let out = crate::sql::value::datatype::palloc_slice::<bool>(hs.len());
            // In chunks, each under its own pin, with cancel requests answered
            // between them: a pin held for a whole large array would keep
            // retired space from being reclaimed, and the call from being
            // cancelled, for as long as the array takes.
            let mut done = 0;
            let mut current = true;
            while done < hs.len() {
                if done > 0 {
                    pg_sys::check_for_interrupts!();
                }
                let end = (done + LOOKUP_CHUNK).min(hs.len());
                let Some(pin) = pin_current(r, self.index, self.seq) else {
                    current = false;
                    break;
                };
                // SAFETY: resolved, unchanged and pinned (see `run`).
                unsafe { self.tables.assume_init_ref() }.chain().contains_many(&hs[done..end], &mut out[done..end]);
                r.count_lookups(self.index, slot, (end - done) as u64);
                drop(pin);
                done = end;
            }
            if current {
                return out;
            }
            // Replaced or dropped meanwhile: the keys are hashed again for the
            // filter now under the name (or the call fails if there is none),
            // and every key is looked up in it.
            self.resolve(r, name, who);
        }
    }
}

/// Keys a batched lookup looks up under one pin.
const LOOKUP_CHUNK: usize = 1 << 16;

impl NamedCall {
    /// Changes the named filter (argument 0) for many keys: `hashes` gives
    /// their hashes under a seed (run unpinned: hashing may raise errors);
    /// then `op` runs on one chunk of at most [`MANY_MAX`] hashes at a time,
    /// pinned as a writer, writing one answer per hash, with the checks of
    /// [`NamedCall::run`] (read-only transactions, paused writers, durable
    /// changes open) before each chunk, and cancel requests answered between
    /// chunks. If the filter was replaced meanwhile, the remaining chunks go
    /// to the filter now under the name if it hashes keys as the old one did
    /// (same seed and key type); else the call fails (55000).
    ///
    /// # Safety
    /// `fcinfo` is a valid frame with a non-null text argument 0.
    pub(crate) unsafe fn write_many<'a>(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
        hashes: impl FnOnce(&mut KeyHasher, u64, KeyType) -> &'a [u64],
        op: impl Fn(&Chain<'_, RegionTables<'_>>, &[u64], &mut [bool], &Region, usize, usize, u64),
    ) -> &'a [bool] {
        // SAFETY: as documented.
        let (r, name, who, fresh) = unsafe { self.current(fcinfo) };
        if !fresh && self.gen != 0 {
            prepare_write(true, c"cf_insert(), cf_insert_new() or cf_delete() on a durable filter");
        }
        let slot = my_slot();
        let hashed_for = (self.seed, self.filter_key);
        let hs = hashes(&mut self.key, self.seed, self.filter_key);
        let out = crate::sql::value::datatype::palloc_slice::<bool>(hs.len());
        let mut done = 0;
        while done < hs.len() {
            pgrx::check_for_interrupts!();
            let end = (done + MANY_MAX).min(hs.len());
            let pinned = pin_current_writer(r, self.index, self.seq);
            let Some(pin) = pinned else {
                self.resolve(r, name, who);
                if (self.seed, self.filter_key) != hashed_for {
                    // Replaced (published over) by a filter that hashes keys
                    // otherwise: the keys already applied went to the old one.
                    fail(
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        format!("cuckoo filter \"{name}\" was replaced during the call, by one that hashes keys differently"),
                        Some("The keys before the replacement were applied to the filter it replaced; call again."),
                    );
                }
                continue;
            };
            let Some(pin) = self.go_ahead(r, pin) else { continue };
            // SAFETY: resolved, unchanged and pinned (see `run`).
            let tables = unsafe { self.tables.assume_init_ref() };
            tables.set_limits(growth_limits());
            op(&tables.chain(), &hs[done..end], &mut out[done..end], r, self.index, slot, self.gen);
            drop(pin);
            // The keys of this chunk and those before stay stored.
            refuse_if_capped(name, tables);
            done = end;
        }
        out
    }
}

/// What the planner may learn from a named filter: the answers for some keys,
/// its items, and its false-positive rate at that fill.
pub(crate) struct PlanProbe {
    pub answers: Vec<bool>,
    pub items: u64,
    pub fpp: f64,
}

/// For the planner: the named filter `name` of this database, if cuckoo is
/// preloaded, the filter exists and is usable, and the current role may look
/// it up (else the query itself reports why).
fn readable_for_plan(name: &str) -> Option<(&'static Region, EntryInfo)> {
    // SAFETY: REGION is written once, before any backend runs SQL.
    let r = unsafe { (*std::ptr::addr_of!(REGION)).as_ref() }?;
    let info = r.find(db(), name)?;
    let granted = || {
        may_access(&info, false, user())
            // SAFETY: BOUND_READABLE is set once, in _PG_init.
            || unsafe { *std::ptr::addr_of!(BOUND_READABLE) }.is_some_and(|f| f(name))
    };
    (info.usable() && granted()).then_some((r, info))
}

/// Set by `sql::bound`: whether the current role may read the column that
/// filter `name` is bound to (then the planner may probe the filter for the
/// pre-screen's estimate without a lookup grant).
pub(crate) static mut BOUND_READABLE: Option<fn(&str) -> bool> = None;

/// What identifies a named filter's contents for a plan's estimate, with the
/// seed its keys hash with: the filter (its registry slot and sequence number),
/// its generation, and its key count to within 1/32, so that an estimate kept
/// for it is used again until the filter is replaced or its count moves; None
/// where [`probe_named_for_plan`] would be.
pub(crate) fn named_identity_for_plan(name: &str) -> Option<(u64, u64)> {
    let (r, info) = readable_for_plan(name)?;
    let pin = pin_current(r, info.index, info.seq)?;
    let tables = r.tables(&info)?;
    let seed = tables.seed();
    let items: u64 = tables.shapes().iter().map(|t| t.items.min(t.params.slot_count())).sum();
    drop(pin);
    let rough = items >> (63u32 - (items | 1).leading_zeros()).saturating_sub(5);
    let id = xxhash_rust::xxh3::xxh3_64(
        &[info.index as u64, info.seq, info.gen, rough, 64 - (items | 1).leading_zeros() as u64]
            .map(u64::to_le_bytes)
            .concat(),
    );
    Some((seed, id))
}

/// For the planner: looks up the hashes `hashes(seed)` in the named filter
/// `name` of this database, without counting them. None when cuckoo is not
/// preloaded, the filter does not exist, needs a reload, or the current role may
/// not look it up (the query itself reports why), or when it was replaced while
/// being read.
pub(crate) fn probe_named_for_plan(name: &str, hashes: impl FnOnce(u64) -> Vec<u64>) -> Option<PlanProbe> {
    let (r, info) = readable_for_plan(name)?;
    let pin = pin_current(r, info.index, info.seq)?;
    let tables = r.tables(&info)?;
    let seed = tables.seed();
    drop(pin);
    let hs = hashes(seed);
    let mut answers = crate::filter::vec_filled(hs.len(), false);
    let pin = pin_current(r, info.index, info.seq)?;
    tables.chain().contains_many(&hs, &mut answers);
    // A delete overtaking its insert can leave the shared count briefly below
    // zero (wrapped); the view clamps it the same way.
    let (mut items, mut fpp) = (0u64, 0f64);
    for t in tables.shapes() {
        let n = t.items.min(t.params.slot_count());
        items += n;
        fpp += crate::filter::expected_fpp(&t.params, n);
    }
    drop(pin);
    Some(PlanProbe { answers, items, fpp: fpp.min(1.0) })
}

/// A named filter that a table binding (`sql::bound`) keeps: reached by name
/// without the current role's rights (the binding, made by the table's owner,
/// authorises every change its triggers make), as [`NamedCall`] reaches it
/// otherwise.
#[derive(Clone, Debug)]
pub(crate) struct BoundTarget {
    info: EntryInfo,
    pub seed: u64,
    pub key: KeyType,
}

impl BoundTarget {
    /// The filter `name` of this database if it exists and may be used (None:
    /// the binding's filter is missing or needs a reload, and the caller
    /// treats the binding as needing a rebuild).
    pub(crate) fn find(name: &str) -> Option<BoundTarget> {
        let r = region();
        let info = r.find(db(), name)?;
        if !info.usable() {
            return None;
        }
        let seed = {
            let _pin = pin_current(r, info.index, info.seq)?;
            r.tables(&info)?.seed()
        };
        Some(BoundTarget { key: info.key, seed, info })
    }

    /// The filter's owner.
    pub(crate) fn owner(&self) -> u32 {
        self.info.owner
    }

    /// The filter's false-positive rate and whether it is durable.
    pub(crate) fn params(&self) -> (f64, bool) {
        (self.info.fpp, self.info.durable)
    }

    /// Whether the filter is durable, and its generation (0 if not durable).
    pub(crate) fn identity(&self) -> (bool, u64) {
        (self.info.durable, self.info.gen)
    }

    /// Runs `op` on the filter as a writer, with its generation if durable
    /// (else 0), as [`NamedCall::run`] does: the checks before a change, the
    /// waits while writers are paused or durable changes are not open, growth
    /// within the session's caps. `None` if the filter was dropped or replaced
    /// since it was found (the caller finds it again).
    pub(crate) fn write<T>(&self, what: &CStr, op: impl FnOnce(&Chain<'_, RegionTables<'_>>, u64) -> T) -> Option<T> {
        prepare_write(self.info.durable, what);
        self.write_unchecked(op)
    }

    /// [`Self::write`] for bookkeeping that changes no key (the account of
    /// queued deletes): also in a transaction that became read-only after
    /// its writes (its commit queues the deletes of keys added for rows
    /// never written). Waits as `write` does.
    pub(crate) fn write_account<T>(&self, op: impl FnOnce(&Chain<'_, RegionTables<'_>>, u64) -> T) -> Option<T> {
        self.write_unchecked(op)
    }

    fn write_unchecked<T>(&self, op: impl FnOnce(&Chain<'_, RegionTables<'_>>, u64) -> T) -> Option<T> {
        let r = region();
        let gen = if self.info.durable { self.info.gen } else { 0 };
        loop {
            let pin = pin_current_writer(r, self.info.index, self.info.seq)?;
            if r.writers_paused(self.info.index) {
                drop(pin);
                wait_while(|| r.writers_paused(self.info.index));
                continue;
            }
            if gen != 0 && r.durable_state() != DurableGate::Open {
                drop(pin);
                wait_durable_open(r);
                continue;
            }
            if gen != 0 {
                r.mark_changed(self.info.index, CHANGED_WORDS);
            }
            let tables = r.tables(&self.info)?;
            tables.set_limits(growth_limits());
            let out = op(&tables.chain(), gen);
            drop(pin);
            refuse_if_capped(&self.info.name, &tables);
            return Some(out);
        }
    }

    /// Counts a batch's inserts, lookups and deletes in the filter's statistics.
    pub(crate) fn count(&self, tally: &crate::region::Tally) {
        region().count_many(self.info.index, my_slot(), tally);
    }

    /// Inside [`Self::write`] of a durable filter: adds `add` to its account
    /// of queued deletes. The caller logs the `QUEUE` record in the same
    /// operation.
    pub(crate) fn add_queue_counts(&self, add: &crate::region::wal::QueueCounts) {
        region().add_queue_counts(self.info.index, add);
    }
}

/// This database's durable filters: name, registry index and generation,
/// for [`queue_counts_at`]. Only when the library is preloaded.
pub(crate) fn durable_filters() -> Vec<(String, usize, u64)> {
    region().list(db()).into_iter().filter(|i| i.durable).map(|i| (i.name, i.index, i.gen)).collect()
}

/// The account of queued deletes of the filter at registry `index` (a
/// bound durable filter's; zero for others): atomic reads, no lock.
pub(crate) fn queue_counts_at(index: usize) -> crate::region::wal::QueueCounts {
    region().queue_counts(index)
}

/// Whether the filter at registry `index` is still generation `gen`.
pub(crate) fn still_gen(index: usize, gen: u64) -> bool {
    region().entry_info(index).is_some_and(|i| i.gen == gen)
}
