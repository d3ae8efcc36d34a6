//! Rebuilding a binding's filter on first use (`cuckoo.auto_rebuild`): a
//! binding whose filter is missing or is not what a committed fill made
//! (after `pg_upgrade`, which carries the binding but not the filter; a
//! filter that is not durable, after a restart; one that DDL dropped; a
//! rebuild cancelled or cut by a crash) answers "maybe" for every key, and
//! its table's writes are not followed. The first statement that uses it (a
//! probe, the planner weighing its pre-screen, a write of its table) asks for
//! a rebuild, and a background worker runs `cf_rebuild` (as the table's
//! owner: `cf_bound_restored`), which does not block writers. Meanwhile, and
//! if the rebuild fails, answers stay "maybe": never a false negative.
//!
//! A binding is asked for at most once per `ASK_EVERY` in the cluster (the
//! shared area remembers the last asks) and per backend, so a failing
//! rebuild is not tried again at once, and a workload that probes all along
//! starts one worker. The worker takes the table's `SHARE UPDATE EXCLUSIVE`
//! lock first: a rebuild already running is waited for, and the worker then
//! finds the filter ready and stops. Nothing is asked on a hot standby (its
//! filters follow the primary's) or under `pg_upgrade`.

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

thread_local! {
    /// This backend's last asks: (database, name, when, in microseconds).
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
    // SAFETY: plain reads of process state.
    if !AUTO_REBUILD.get() || unsafe { pg_sys::RecoveryInProgress() || pg_sys::IsBinaryUpgrade } {
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
        m.retain(|(_, _, at)| now - at < every && *at <= now);
        if m.iter().any(|(d, n, _)| *d == db && n == name) {
            return true;
        }
        m.push((db, name.to_string(), now));
        false
    });
    if lately {
        return;
    }
    let key = ask_key(db, name);
    if !super::shared::with_lock(|a, lk| a.ask_rebuild(lk, key, now as u64, every as u64)) {
        return;
    }
    let started = BackgroundWorkerBuilder::new("cuckoo rebuild")
        .set_type("cuckoo rebuild")
        .set_library("cuckoo")
        .set_function("cuckoo_rebuild_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .set_extra(&format!("{db} {name}"))
        .load_dynamic();
    if started.is_err() {
        // No worker slot free: the next use after ASK_EVERY asks again.
        pgrx::log!(
            "cuckoo: no background worker could be started to rebuild filter \"{name}\"; it is asked for again later"
        );
    }
}

/// The key the shared area remembers an ask of binding `name` of `db` by.
fn ask_key(db: u32, name: &str) -> u64 {
    let mut b = db.to_le_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    xxhash_rust::xxh3::xxh3_64(&b) | 1
}

/// The worker: connects to the binding's database (as the bootstrap
/// superuser, which any table's owner may be switched to from), waits for
/// the table's `SHARE UPDATE EXCLUSIVE` lock (a rebuild running is waited
/// for), and rebuilds the filter as the table's owner if it still needs it.
/// `SIGTERM` ends it at once (PostgreSQL's default for a worker), `pg_cancel_backend`
/// cancels its rebuild; an error is logged, and the binding is asked for
/// again after `ASK_EVERY`.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn cuckoo_rebuild_main(_arg: pg_sys::Datum) {
    // SAFETY: the worker's signals, as PostgreSQL set them up (SIGTERM ends
    // the process, SIGINT cancels the statement).
    unsafe { pg_sys::BackgroundWorkerUnblockSignals() };
    let extra = BackgroundWorker::get_extra().to_string();
    let Some((db, name)) = extra.split_once(' ').and_then(|(d, n)| Some((d.parse::<u32>().ok()?, n.to_string())))
    else {
        return;
    };
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(pg_sys::Oid::from(db)), None);
    BackgroundWorker::transaction(|| {
        let nsp = super::catalog::ext_schema();
        let tab = pgrx::spi::Spi::get_one_with_args::<String>(
            &format!("SELECT tab::pg_catalog.text FROM {nsp}.cuckoo_bindings WHERE name = $1"),
            &[name.as_str().into()],
        );
        let Ok(Some(tab)) = tab else { return };
        let done = pgrx::spi::Spi::run(&format!("LOCK TABLE {tab} IN SHARE UPDATE EXCLUSIVE MODE")).and_then(|()| {
            let ready = pgrx::spi::Spi::get_one_with_args::<bool>(
                &format!("SELECT {nsp}.cf_bound_ready($1)"),
                &[name.as_str().into()],
            )?;
            if ready == Some(true) {
                return Ok(None);
            }
            pgrx::spi::Spi::get_one_with_args::<i64>(
                &format!("SELECT {nsp}.cf_bound_restored($1)"),
                &[name.as_str().into()],
            )
        });
        match done {
            Ok(Some(rows)) => {
                pgrx::log!(
                    "cuckoo: filter \"{name}\" bound to {tab} was rebuilt in the background ({rows} row versions)"
                )
            }
            Ok(None) => {}
            Err(e) => {
                pgrx::warning!("cuckoo: filter \"{name}\" bound to {tab} could not be rebuilt in the background: {e}")
            }
        }
    });
}
