//! Rebuilding a binding's filter on first use (`cuckoo.auto_rebuild`): a
//! binding whose filter is missing or is not what a committed fill made
//! (after `pg_upgrade`, which carries the binding but not the filter; a
//! filter that is not durable, after a restart; one that DDL dropped; a
//! rebuild cancelled or cut by a crash) answers "maybe" for every key, and
//! its table's writes are not followed. The first statement that uses it (a
//! probe, the planner weighing its pre-screen, a write of its table) asks for
//! a rebuild, and a background worker runs `cf_rebuild` as the table's
//! owner, which does not block writers. Meanwhile, and
//! if the rebuild fails, answers stay "maybe": never a false negative.
//!
//! Only a binding the catalog has is asked for (a row trigger naming
//! another does nothing, or is refused), at most once per `ASK_EVERY` in the
//! cluster (the shared area remembers the last asks) and per backend, so a
//! failing rebuild is not tried again at once; and one worker runs at a time
//! in the cluster, so asks cannot take the server's background worker slots.
//! The worker connects as the database's owner when that role may log in
//! (else as the bootstrap superuser), runs every query with the search path
//! pinned, and the rebuild as the table's owner; it waits at most a minute
//! for the table's `SHARE UPDATE EXCLUSIVE` lock (a rebuild already running
//! is waited for, and the worker then finds the filter ready and stops), and
//! then does the same for every other binding of the database that needs a
//! rebuild.
//! Nothing is asked on a hot standby (its filters follow the primary's) or
//! under `pg_upgrade`.
//!
//! The same worker applies queued deletes when the shared queue is full
//! (`ask_apply`): deletes wait there until their table's next write or
//! `cf_apply_deletes`, so a table deleted from and then left alone would
//! hold it, and every other binding's deletes would be dropped.

use std::cell::RefCell;
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// `cuckoo.auto_rebuild`.
static AUTO_REBUILD: GucSetting<bool> = GucSetting::<bool>::new(true);

/// A binding is asked for again only this long after the last ask.
const ASK_EVERY: Duration = Duration::from_secs(600);

/// A background rebuild that has not ended this long after it started is
/// taken for gone (its process never ran): another may start.
const LEASE: Duration = Duration::from_secs(3600);

thread_local! {
    /// This backend's last asks: (database, name, when it may ask again, in
    /// microseconds).
    static ASKED: RefCell<Vec<(u32, String, i64)>> = const { RefCell::new(Vec::new()) };
}

/// From `_PG_init`: the setting.
pub(super) fn init() {
    GucRegistry::define_bool_guc(
        c"cuckoo.auto_rebuild",
        c"Rebuilds a bound cuckoo filter in the background when it is first used and needs a rebuild.",
        c"After pg_upgrade, a restart (a filter that is not durable), DDL that dropped it, or a rebuild that did not commit: cf_rebuild as the table's owner, by a background worker; at most once per binding every 10 minutes.",
        &AUTO_REBUILD,
        GucContext::Suset,
        GucFlags::default(),
    );
}

/// Binding `name` of this database needs a rebuild and was used: a
/// background worker is started to rebuild it, unless the setting is off,
/// this is a standby or `pg_upgrade`, the binding was asked for lately, or
/// no worker can be started (asked again later).
pub(super) fn ask(name: &str) {
    // Not from parallel mode: its leader plans and probes too, outside it.
    // SAFETY: plain reads of process state.
    let skip = unsafe { pg_sys::RecoveryInProgress() || pg_sys::IsBinaryUpgrade || pg_sys::IsInParallelMode() };
    if !AUTO_REBUILD.get() || skip {
        return;
    }
    if super::shared::area_if_loaded().is_none() {
        return;
    }
    let db = crate::sql::named::call::current_db();
    // SAFETY: reads the clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let every = ASK_EVERY.as_micros() as i64;
    let lately = ASKED.with(|m| {
        let mut m = m.borrow_mut();
        m.retain(|(_, _, until)| *until > now && *until - now <= every);
        if m.iter().any(|(d, n, _)| *d == db && n == name) {
            return true;
        }
        // Asked again in a second if a rebuild runs already (below).
        m.push((db, name.to_string(), now + 1_000_000));
        false
    });
    if lately {
        return;
    }
    if start(db, ask_key(db, name), name, every, |role, stamp| format!("{db} {role} {stamp} {name}")) {
        ASKED.with(|m| {
            if let Some(e) = m.borrow_mut().iter_mut().find(|(d, n, _)| *d == db && n == name) {
                e.2 = now + every;
            }
        });
    }
}

/// Starts the one background worker of the cluster in database `db` (unless
/// it runs, or the ask `key` was made less than `every` microseconds ago),
/// its extra argument made by `extra(role, stamp)`; `what` names it in the
/// log. Returns whether the ask was taken (the worker started, or there was
/// no slot for it: logged).
fn start(db: u32, key: u64, what: &str, every: i64, extra: impl FnOnce(u32, u64) -> String) -> bool {
    // Before the claim: nothing after it can raise an error (the claim would
    // stay for its whole lease).
    let Some(role) = login_role_cached(db) else { return false };
    // SAFETY: reads the clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    // One background worker at a time in the cluster; an ask made while one
    // runs is not remembered (asked again by the next use).
    let stamp = (now as u64).max(1);
    let claimed = super::shared::with_lock(|a, lk| {
        if !a.claim_rebuilder(lk, stamp, LEASE.as_micros() as u64) {
            return false;
        }
        if !a.ask_rebuild(lk, key, now as u64, every as u64) {
            a.release_rebuilder(stamp);
            return false;
        }
        true
    });
    if !claimed {
        return false;
    }
    launch(stamp, &extra(role, stamp), what);
    true
}

/// Starts the worker claimed at `stamp` with argument `extra`; if no worker
/// slot is free the claim goes (logged: asked again later).
fn launch(stamp: u64, extra: &str, what: &str) {
    let started = BackgroundWorkerBuilder::new("cuckoo rebuild")
        .set_type("cuckoo rebuild")
        .set_library("cuckoo")
        .set_function("cuckoo_rebuild_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .set_extra(extra)
        .load_dynamic();
    if started.is_err() {
        super::shared::with_lock(|a, _| a.release_rebuilder(stamp));
        pgrx::log!("cuckoo: no background worker could be started for {what}; it is asked for again later");
    }
}

/// The shared queue of deletes had no room for a statement's deletes (they
/// were dropped: their keys stay, counted): a background worker is asked to
/// take out of the queue what it can in the database whose bindings hold
/// the most of it, leaving out for `FRUITLESS_FOR` a database asked for
/// whose worker did not take anything out (a snapshot holds its deletes
/// back, a table was locked, or it could not start or connect there). Deletes
/// wait in the queue until their table's next write or `cf_apply_deletes`,
/// so a table deleted from and then left alone would otherwise hold the
/// queue full, and every other binding's deletes would be dropped, for as
/// long as nobody writes it. At most once every `APPLY_ASK_EVERY` in the
/// cluster. Nothing here runs a query or waits on a lock but the queue's;
/// the worker runs `cf_apply_deletes` for each of that database's bindings
/// with queued deletes, as the table's owner, each in a transaction of its
/// own.
pub(super) fn ask_apply() {
    // SAFETY: plain reads of process state.
    let skip = unsafe { pg_sys::RecoveryInProgress() || pg_sys::IsBinaryUpgrade || pg_sys::IsInParallelMode() };
    if skip || super::shared::area_if_loaded().is_none() {
        return;
    }
    // SAFETY: reads the clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() } as u64;
    let every = APPLY_ASK_EVERY.as_micros() as u64;
    let Some(db) = super::shared::with_lock(|a, lk| {
        // (Remembered under keys no binding's give: names hold no NUL.)
        if !a.ask_rebuild(lk, ask_key(0, "\0apply"), now, every) {
            return None;
        }
        let mut per_db = pending_by_db(a);
        per_db.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        let db = per_db
            .into_iter()
            .find(|&(db, n)| n > 0 && !a.asked_within(lk, fruitless_key(db), now, FRUITLESS_FOR.as_micros() as u64))
            .map(|(db, _)| db)?;
        // Left out until a worker there takes something out (it clears
        // this): one that cannot start or connect there, or takes nothing
        // out, does not keep every ask to itself.
        a.ask_rebuild(lk, fruitless_key(db), now, 0);
        Some(db)
    }) else {
        return;
    };
    let Some(role) = login_role_cached(db) else { return };
    let stamp = now.max(1);
    if !super::shared::with_lock(|a, lk| a.claim_rebuilder(lk, stamp, LEASE.as_micros() as u64)) {
        return;
    }
    launch(stamp, &format!("{APPLY_ASK} {db} {role} {stamp}"), "the deletes of a full queue");
}

/// The deletes queued by each database's bindings.
fn pending_by_db(a: &crate::region::binding::Area) -> Vec<(u32, u64)> {
    let mut per_db: Vec<(u32, u64)> = Vec::new();
    for (i, db, _) in a.claimed() {
        let n = a.slot(i).pending.load(std::sync::atomic::Ordering::Relaxed);
        match per_db.iter_mut().find(|(d, _)| *d == db) {
            Some(e) => e.1 += n,
            None => per_db.push((db, n)),
        }
    }
    per_db
}

/// The key under which a database whose deletes a worker could not take out
/// is remembered.
fn fruitless_key(db: u32) -> u64 {
    ask_key(db, "\0fruitless")
}

/// How long such a database is left out.
const FRUITLESS_FOR: Duration = Duration::from_secs(60);

/// The role the worker connects as: the database's owner if it may log in
/// (so that it may end the worker, as `DROP DATABASE ... WITH (FORCE)`
/// does), else 0 (the bootstrap superuser); None if the database is gone or
/// takes no connections. Either way the worker's queries run with the search
/// path pinned, and its work as the table's owner. From the system caches,
/// without a query, so that an ask runs nothing that could fail in the
/// asking statement.
fn login_role_cached(db: u32) -> Option<u32> {
    // SAFETY: syscache lookups by OID; each tuple is released before the
    // next lookup, and its struct read as the catalog's row type.
    unsafe {
        let t = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::DATABASEOID as i32, pg_sys::Datum::from(db));
        if t.is_null() {
            return None;
        }
        let d = &*(pg_sys::GETSTRUCT(t) as *const pg_sys::FormData_pg_database);
        let (dba, allow) = (d.datdba, d.datallowconn);
        pg_sys::ReleaseSysCache(t);
        if !allow {
            return None;
        }
        let r = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::AUTHOID as i32, pg_sys::Datum::from(dba));
        if r.is_null() {
            return Some(0);
        }
        let login = (*(pg_sys::GETSTRUCT(r) as *const pg_sys::FormData_pg_authid)).rolcanlogin;
        pg_sys::ReleaseSysCache(r);
        Some(if login { dba.to_u32() } else { 0 })
    }
}

/// How the worker's extra argument says it is to apply deletes (not a
/// number: a rebuild's starts with its database's OID).
const APPLY_ASK: &str = "apply";

/// Deletes are asked to be applied at most this often in the cluster.
const APPLY_ASK_EVERY: Duration = Duration::from_secs(10);

/// The key the shared area remembers an ask of binding `name` of `db` by.
fn ask_key(db: u32, name: &str) -> u64 {
    let mut b = db.to_le_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    xxhash_rust::xxh3::xxh3_64(&b) | 1
}

/// The worker: connects to the binding's database (as its owner, or the
/// bootstrap superuser: `login_role_cached`), then, for the binding asked for and
/// then every other one of the database that needs a rebuild, each in a
/// transaction of its own (`rebuild_one`). Its transactions are `READ
/// COMMITTED` and read-write whatever the database's or role's defaults say
/// (what it reads of the catalogs after a lock must be current). `SIGTERM`
/// ends it at once (PostgreSQL's default for a worker), `pg_cancel_backend`
/// cancels the rebuild running.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn cuckoo_rebuild_main(_arg: pg_sys::Datum) {
    let extra = BackgroundWorker::get_extra().to_string();
    if let Some(rest) = extra.strip_prefix(APPLY_ASK).and_then(|r| r.strip_prefix(' ')) {
        return apply_main(rest);
    }
    let mut parts = extra.splitn(4, ' ');
    let (Some(db), Some(role), Some(stamp), Some(name)) = (
        parts.next().and_then(|d| d.parse::<u32>().ok()),
        parts.next().and_then(|r| r.parse::<u32>().ok()),
        parts.next().and_then(|t| t.parse::<u64>().ok()),
        parts.next().map(str::to_string),
    ) else {
        return;
    };
    connect(db, role, stamp);
    rebuild_one(&name);
    let others = in_transaction(|| {
        super::catalog::with_safe_path(|| {
            let nsp = super::catalog::ext_schema();
            pgrx::spi::Spi::connect(|c| {
                let rows = c.select(
                    &format!("SELECT b.name FROM {nsp}.cuckoo_bindings b WHERE NOT {nsp}.cf_bound_ready(b.name) ORDER BY b.name"),
                    None,
                    &[],
                )?;
                let mut v = Vec::new();
                for r in rows {
                    if let Some(n) = r.get::<String>(1)? {
                        v.push(n);
                    }
                }
                Ok::<_, pgrx::spi::Error>(v)
            })
        })
        .map_err(|e| e.to_string())
    });
    for other in others.into_iter().flatten().filter(|n| *n != name) {
        pgrx::check_for_interrupts!();
        rebuild_one(&other);
    }
}

/// The worker asked for by `ask_apply` (`rest`: database, role and stamp):
/// `cf_apply_deletes` of each binding of the database whose slot holds
/// queued deletes, as the bound table's owner, each in a transaction of its
/// own.
fn apply_main(rest: &str) {
    let mut parts = rest.splitn(3, ' ');
    let (Some(db), Some(role), Some(stamp)) = (
        parts.next().and_then(|d| d.parse::<u32>().ok()),
        parts.next().and_then(|r| r.parse::<u32>().ok()),
        parts.next().and_then(|t| t.parse::<u64>().ok()),
    ) else {
        return;
    };
    connect(db, role, stamp);
    let a = super::shared::area();
    let queued =
        |a: &crate::region::binding::Area| pending_by_db(a).into_iter().find(|&(d, _)| d == db).map_or(0, |(_, n)| n);
    let before = queued(&a);
    let names: Vec<String> = a
        .claimed()
        .into_iter()
        .filter(|&(i, d, _)| d == db && a.slot(i).pending.load(std::sync::atomic::Ordering::Relaxed) > 0)
        .map(|(_, _, n)| n)
        .collect();
    let mut applied = 0;
    for name in names {
        pgrx::check_for_interrupts!();
        let out = in_transaction(|| {
            super::catalog::with_safe_path(|| {
                let nsp = super::catalog::ext_schema();
                let (Some(owner), _) = bound_table(&nsp, &name)? else { return Ok(0) };
                // A table locked by someone else is skipped after a while:
                // the one worker of the cluster is not held.
                pgrx::spi::Spi::run("SELECT pg_catalog.set_config('lock_timeout', '10s', true)")?;
                super::catalog::as_role(pg_sys::Oid::from(owner as u32), || {
                    pgrx::spi::Spi::get_one_with_args::<i64>(
                        &format!("SELECT {nsp}.cf_apply_deletes($1)"),
                        &[name.as_str().into()],
                    )
                    .map(|n| n.unwrap_or(0))
                })
            })
            .map_err(|e: pgrx::spi::Error| e.to_string())
        });
        match out {
            Ok(n) => applied += n,
            Err(e) => {
                // (A lock timeout, say: the one worker of the cluster does
                // not wait on every table of the database in turn.)
                pgrx::warning!("cuckoo: the deletes of filter \"{name}\" could not be applied in the background: {e}");
                break;
            }
        }
    }
    if applied > 0 {
        pgrx::log!("cuckoo: the queue of deletes was full: {applied} deletes applied in the background");
    }
    if queued(&a) < before {
        // Something taken out: this database may be asked for again at
        // once (`ask_apply` left it out for a while when it asked).
        super::shared::with_lock(|a, lk| a.ask_rebuild(lk, fruitless_key(db), 0, 0));
    } else {
        pgrx::log!(
            "cuckoo: the queue of deletes was full: none of this database's could be taken out yet (a snapshot needs them, or a table was locked)"
        );
    }
}

/// Connects this worker to database `db` (as role `role`, 0: the bootstrap
/// superuser), holding the claim made at `stamp`: its signals as PostgreSQL
/// set them up (`SIGTERM` ends it, `SIGINT` cancels the statement), the
/// claim freed however the process ends, and its transactions `READ
/// COMMITTED` and read-write whatever the database's or role's defaults say.
fn connect(db: u32, role: u32, stamp: u64) {
    // SAFETY: the worker's own signals and exit callback, before it connects.
    unsafe {
        STAMP = stamp;
        pg_sys::BackgroundWorkerUnblockSignals();
        pg_sys::before_shmem_exit(Some(release_at_exit), pg_sys::Datum::from(0usize));
    }
    let role = (role != 0).then(|| pg_sys::Oid::from(role));
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(pg_sys::Oid::from(db)), role);
    // SAFETY: settings of this process, before its first transaction.
    unsafe {
        for (k, v) in
            [(c"default_transaction_isolation", c"read committed"), (c"default_transaction_read_only", c"off")]
        {
            pg_sys::SetConfigOption(
                k.as_ptr(),
                v.as_ptr(),
                pg_sys::GucContext::PGC_SUSET,
                pg_sys::GucSource::PGC_S_OVERRIDE,
            );
        }
    }
}

/// The claim (`Area::claim_rebuilder`) this worker holds.
static mut STAMP: u64 = 0;

/// Runs `f` in a transaction of its own: committed if it returns, rolled back
/// if it raises an error (returned as `Err`, the error's message).
fn in_transaction<T>(f: impl FnOnce() -> Result<T, String> + std::panic::UnwindSafe) -> Result<T, String> {
    // SAFETY: a transaction of this worker's own, between others.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let out = PgTryBuilder::new(f)
        .catch_others(|e| {
            Err(match e {
                pgrx::pg_sys::panic::CaughtError::PostgresError(r)
                | pgrx::pg_sys::panic::CaughtError::ErrorReport(r) => r.message().to_string(),
                pgrx::pg_sys::panic::CaughtError::RustPanic { ereport, .. } => ereport.message().to_string(),
            })
        })
        .execute();
    // SAFETY: ends the transaction started above, as its outcome says.
    unsafe {
        if out.is_ok() {
            pg_sys::PopActiveSnapshot();
            pg_sys::CommitTransactionCommand();
        } else {
            pg_sys::AbortCurrentTransaction();
        }
    }
    out
}

/// Binding `name`'s table, as its owner and its name (`(None, None)` if
/// there is no such binding or table). `nsp` is the extension's schema.
fn bound_table(nsp: &str, name: &str) -> Result<(Option<i64>, Option<String>), pgrx::spi::Error> {
    pgrx::spi::Spi::get_two_with_args::<i64, String>(
        &format!(
            "SELECT c.relowner::pg_catalog.int8, b.tab::pg_catalog.regclass::pg_catalog.text FROM {nsp}.cuckoo_bindings b \
             JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) b.tab WHERE b.name OPERATOR(pg_catalog.=) $1"
        ),
        &[name.into()],
    )
}

/// Rebuilds binding `name`, if it still needs it: with the search path
/// pinned and as the bound table's owner, waits at most a minute
/// (`lock_timeout`) for the table's `SHARE UPDATE EXCLUSIVE` lock (a rebuild
/// running is waited for), then runs `cf_rebuild`. What it did, or its
/// error, is logged.
fn rebuild_one(name: &str) {
    let out = in_transaction(|| {
        let found = super::catalog::with_safe_path(|| {
            pgrx::spi::Spi::run("SELECT pg_catalog.set_config('lock_timeout', '60s', true)")?;
            let nsp = super::catalog::ext_schema();
            let row = bound_table(&nsp, name)?;
            Ok::<_, pgrx::spi::Error>((nsp, row))
        })
        .map_err(|e| e.to_string())?;
        let (nsp, (Some(owner), Some(tab))) = found else { return Ok(None) };
        super::catalog::as_role(pg_sys::Oid::from(owner as u32), || {
            pgrx::spi::Spi::run(&format!("LOCK TABLE {tab} IN SHARE UPDATE EXCLUSIVE MODE"))?;
            let ready =
                pgrx::spi::Spi::get_one_with_args::<bool>(&format!("SELECT {nsp}.cf_bound_ready($1)"), &[name.into()])?;
            if ready == Some(true) {
                return Ok(None);
            }
            let rows =
                pgrx::spi::Spi::get_one_with_args::<i64>(&format!("SELECT {nsp}.cf_rebuild($1)"), &[name.into()])?;
            Ok(Some((tab, rows.unwrap_or(0))))
        })
        .map_err(|e: pgrx::spi::Error| e.to_string())
    });
    match out {
        Ok(Some((tab, rows))) => {
            pgrx::log!("cuckoo: filter \"{name}\" bound to {tab} was rebuilt in the background ({rows} row versions)")
        }
        Ok(None) => {}
        Err(e) => pgrx::warning!("cuckoo: filter \"{name}\" could not be rebuilt in the background: {e}"),
    }
}

/// Frees this worker's claim of the one background rebuild
/// (`before_shmem_exit`).
unsafe extern "C-unwind" fn release_at_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let Some(a) = super::shared::area_if_loaded() {
        // SAFETY: set once, before this callback was registered.
        a.release_rebuilder(unsafe { STAMP });
    }
}
