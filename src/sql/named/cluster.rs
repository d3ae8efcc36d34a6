//! The SQL functions of cuckoo's Citus cluster copies (`cf_cluster_*`,
//! called by `cf_publish_cluster`, `cf_sync_cluster`, `cf_node_local` and
//! `cf_drop_cluster` in `sql/cuckoo.sql`): they write each node's listing
//! (`cuckoo_cluster_filters`) and the cluster's record
//! (`cuckoo_cluster_copies`) as the tables' owner, after checking the
//! caller's right on that name. What the listing and the record mean, and the
//! checks by-name calls make against them, are in `citus`.

use std::ffi::{CStr, CString};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::attach::region;
use super::call::{db, require_access, text_arg, user};
use super::citus::{as_table_owner, ext_table, identity, in_task, listing, this_node, Scope};
use super::errors::fail;

/// Whether the current role has the privileges of role `name` (a superuser
/// has every role's; None, a row listed before 0.12.0: superusers only).
fn acts_for(name: Option<&str>) -> bool {
    // SAFETY: catalog lookups by name and OID.
    unsafe {
        match name {
            Some(n) => {
                let c = CString::new(n).unwrap_or_default();
                let role = pg_sys::get_role_oid(c.as_ptr(), true);
                role != pg_sys::InvalidOid && pg_sys::has_privs_of_role(user(), role)
            }
            None => pg_sys::superuser(),
        }
    }
}

/// The current role's name.
fn my_name() -> String {
    // SAFETY: the name of the current (existing) role.
    unsafe { CStr::from_ptr(pg_sys::GetUserNameFromId(user(), false)).to_string_lossy().into_owned() }
}

fn refuse_listing(name: &str, owner: Option<&str>) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied for the cluster listing of cuckoo filter \"{name}\" on {}", this_node()),
        Some(&match owner {
            Some(o) => format!("It was listed by role \"{o}\": only roles with its privileges may change or remove it."),
            None => "It was listed before cuckoo 0.12.0: only a superuser may change or remove it.".to_string(),
        }),
    )
}

fn not_in_task(what: &str) {
    if in_task() {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{what} cannot run in a piece of a distributed query"),
            Some("Run the cluster functions on the coordinator, outside queries on distributed tables."),
        );
    }
}

/// Reads text argument `n`, or None if it is NULL.
///
/// # Safety
/// `fcinfo` is a valid frame with at least `n + 1` arguments, `n` of type text.
unsafe fn opt_text<'a>(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<&'a str> {
    // SAFETY: as documented.
    unsafe { (!pgrx::fcinfo::pg_arg_is_null(fcinfo, n)).then(|| text_arg(fcinfo, n)) }
}

/// Reads bigint argument `n`, or None if it is NULL.
///
/// # Safety
/// `fcinfo` is a valid frame with at least `n + 1` arguments, `n` of type bigint.
unsafe fn opt_i64(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<i64> {
    // SAFETY: as documented.
    unsafe { (!pgrx::fcinfo::pg_arg_is_null(fcinfo, n)).then(|| pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).value() as i64) }
}

fn spi_run(query: &str, args: &[pgrx::datum::DatumWithOid]) {
    Spi::connect_mut(|client| client.update(query, None, args).map(|_| ()))
        .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: could not write the cluster listing: {e}"));
}

fn i64_result(v: i64) -> pg_sys::Datum {
    pg_sys::Datum::from(v)
}

v1_functions! {
    /// `cf_cluster_list(name text, scope text, version bigint, digest text)`:
    /// lists this node's filter `name` as a cluster copy of publish `version`
    /// (with its digest) or, for scope 'node', as node-local. The filter must
    /// exist here and be the caller's to change; a row already there must
    /// have been listed by a role whose privileges the caller has.
    fn cf_cluster_list(fcinfo) {
        // SAFETY: (text, text, bigint, text), name and scope not NULL (checked).
        let (name, scope, version, digest) = unsafe {
            if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) || pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
                error!("cf_cluster_list(): name and scope must not be NULL");
            }
            (text_arg(fcinfo, 0), text_arg(fcinfo, 1), opt_i64(fcinfo, 2), opt_text(fcinfo, 3))
        };
        not_in_task("cf_cluster_list()");
        let Some((schema, rel)) = ext_table(c"cuckoo_cluster_filters") else {
            error!("cuckoo: cuckoo_cluster_filters is missing: update the extension (ALTER EXTENSION cuckoo UPDATE)")
        };
        let Some(info) = region().find(db(), name) else { super::errors::not_found(name) };
        require_access(&info, true);
        let before = listing(name);
        if let Some(l) = &before {
            if !acts_for(l.owner.as_deref()) {
                refuse_listing(name, l.owner.as_deref());
            }
        }
        let copy = match scope {
            "cluster" => {
                if version.is_none() || digest.is_none() {
                    error!("cf_cluster_list(): a cluster copy needs its version and digest");
                }
                Some(identity(&info))
            }
            "node" => {
                if before.as_ref().is_some_and(|l| l.scope == Scope::Cluster) {
                    fail(
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        format!("cuckoo filter \"{name}\" is a cluster copy on {}", this_node()),
                        Some("Remove it from the cluster with cf_drop_cluster() before declaring a node-local filter of that name."),
                    );
                }
                None
            }
            _ => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("unknown cluster listing scope \"{scope}\""), Some("The scopes are 'cluster' and 'node'.")),
        };
        let (version, digest) = if scope == "cluster" { (version, digest) } else { (None, None) };
        let me = my_name();
        as_table_owner(rel, || {
            spi_run(&format!("DELETE FROM {schema}.cuckoo_cluster_filters WHERE name OPERATOR(pg_catalog.=) $1"), &[name.into()]);
            spi_run(
                &format!("INSERT INTO {schema}.cuckoo_cluster_filters (name, scope, digest, version, copy, owner) VALUES ($1, $2, $3, $4, $5, $6)"),
                &[name.into(), scope.into(), digest.into(), version.into(), copy.into(), me.as_str().into()],
            );
        });
        pg_sys::Datum::from(0)
    }

    /// `cf_cluster_unlist(name text, scope text) -> boolean`: removes this
    /// node's listing of `name` (of that scope; NULL: either); false if there
    /// was none. Only roles with the privileges of the role that listed it.
    fn cf_cluster_unlist(fcinfo) {
        // SAFETY: (text, text), name not NULL (checked).
        let (name, scope) = unsafe {
            if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) {
                error!("cf_cluster_unlist(): name must not be NULL");
            }
            (text_arg(fcinfo, 0), opt_text(fcinfo, 1))
        };
        not_in_task("cf_cluster_unlist()");
        let Some((schema, rel)) = ext_table(c"cuckoo_cluster_filters") else { return pg_sys::Datum::from(false) };
        let Some(l) = listing(name) else { return pg_sys::Datum::from(false) };
        let wanted = match scope {
            None => true,
            Some("cluster") => l.scope == Scope::Cluster,
            Some("node") => l.scope == Scope::Node,
            Some(other) => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("unknown cluster listing scope \"{other}\""), Some("The scopes are 'cluster' and 'node'.")),
        };
        if !wanted {
            return pg_sys::Datum::from(false);
        }
        if !acts_for(l.owner.as_deref()) {
            refuse_listing(name, l.owner.as_deref());
        }
        as_table_owner(rel, || spi_run(&format!("DELETE FROM {schema}.cuckoo_cluster_filters WHERE name OPERATOR(pg_catalog.=) $1"), &[name.into()]));
        pg_sys::Datum::from(true)
    }

    /// `cf_cluster_may_copy(name text) -> boolean`: on each node before a
    /// publish copies anything: raises 42501 unless the caller may replace
    /// this node's filter of that name (it has the owner's privileges) and its
    /// listing (it has the privileges of the role that listed it).
    fn cf_cluster_may_copy(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        not_in_task("cf_cluster_may_copy()");
        if let Some(info) = region().find(db(), name) {
            require_access(&info, true);
        }
        if let Some(l) = listing(name) {
            if !acts_for(l.owner.as_deref()) {
                refuse_listing(name, l.owner.as_deref());
            }
        }
        pg_sys::Datum::from(true)
    }

    /// `cf_cluster_debug_stop(point text, name text)`: for tests, waits at
    /// this point of a publish of `name` until cancelled if
    /// `cuckoo.debug_stop_publish` is `point:name`.
    fn cf_cluster_debug_stop(fcinfo) {
        // SAFETY: strict; (text, text).
        let (point, name) = unsafe { (text_arg(fcinfo, 0), text_arg(fcinfo, 1)) };
        let wanted = format!("{point}:{name}");
        if super::attach::STOP_PUBLISH.get().is_some_and(|p| p.to_bytes() == wanted.as_bytes()) {
            pgrx::log!("cuckoo: a publish of cuckoo filter \"{name}\" waits at {point} (cuckoo.debug_stop_publish)");
            loop {
                pgrx::check_for_interrupts!();
                // SAFETY: a plain sleep.
                unsafe { pg_sys::pg_usleep(10_000) };
            }
        }
        pg_sys::Datum::from(0)
    }

    /// `cf_cluster_current(name text, version bigint) -> boolean`: whether
    /// this node's filter `name` is listed as the cluster copy of publish
    /// `version` and is still the filter that was listed.
    fn cf_cluster_current(fcinfo) {
        // SAFETY: strict; (text, bigint).
        let (name, version) = unsafe { (text_arg(fcinfo, 0), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as i64) };
        let current = match (listing(name), region().find(db(), name)) {
            (Some(l), Some(info)) => {
                l.scope == Scope::Cluster && l.version == Some(version) && l.copy.as_deref() == Some(identity(&info).as_str()) && info.usable()
            }
            _ => false,
        };
        pg_sys::Datum::from(current)
    }

    /// `cf_cluster_begin(name text, new_version boolean) -> bigint`: on the
    /// coordinator, before a publish (or a sync, or a removal) of `name` to
    /// the cluster: makes `cuckoo_cluster_copies` a reference table if it is
    /// not one yet, holds off every other cluster change of `name` until this
    /// transaction ends, checks that the caller may change what the cluster
    /// records for it, and returns a new publish version (`new_version`) or
    /// the recorded one (NULL: none).
    fn cf_cluster_begin(fcinfo) {
        // SAFETY: strict; (text, boolean).
        let (name, new_version) = unsafe { (text_arg(fcinfo, 0), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() != 0) };
        not_in_task("cf_cluster_begin()");
        let Some((schema, rel)) = ext_table(c"cuckoo_cluster_copies") else {
            error!("cuckoo: cuckoo_cluster_copies is missing: update the extension (ALTER EXTENSION cuckoo UPDATE)")
        };
        let coordinator = Spi::get_one::<bool>("SELECT pg_catalog.citus_is_coordinator()").ok().flatten().unwrap_or(false);
        if !coordinator {
            fail(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the cluster functions of cuckoo run on the Citus coordinator".into(),
                Some("Run cf_publish_cluster(), cf_sync_cluster() and cf_drop_cluster() on the coordinator."),
            );
        }
        let distributed = Spi::get_one_with_args::<bool>("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1)", &[rel.into()])
            .ok()
            .flatten()
            .unwrap_or(false);
        if !distributed {
            as_table_owner(rel, || {
                Spi::run_with_args("SELECT pg_catalog.create_reference_table($1)", &[rel.into()])
                    .unwrap_or_else(|e| error!("cuckoo: could not make cuckoo_cluster_copies a reference table: {e}"))
            });
        }
        // One cluster change of a name at a time (this coordinator runs them all).
        Spi::run_with_args("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('cuckoo cluster copy ' OPERATOR(pg_catalog.||) $1, 0))", &[name.into()])
            .unwrap_or_else(|e| error!("cuckoo: {e}"));
        let recorded = Spi::connect(|client| {
            let t = client.select(&format!("SELECT version, owner FROM {schema}.cuckoo_cluster_copies WHERE name OPERATOR(pg_catalog.=) $1"), Some(1), &[name.into()])?;
            if t.is_empty() {
                return Ok(None);
            }
            let row = t.first();
            Ok(Some((row.get::<i64>(1)?.unwrap_or(0), row.get::<String>(2)?)))
        })
        .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: could not read cuckoo_cluster_copies: {e}"));
        if let Some((_, owner)) = &recorded {
            if !acts_for(owner.as_deref()) {
                fail(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("permission denied for cluster copy \"{name}\""),
                    Some(&format!("It was published to the cluster by role \"{}\": only roles with its privileges may publish, sync or remove it.", owner.as_deref().unwrap_or("?"))),
                );
            }
        }
        if !new_version {
            return match recorded {
                Some((v, _)) => i64_result(v),
                None => {
                    // SAFETY: a NULL result.
                    unsafe { (*fcinfo).isnull = true };
                    pg_sys::Datum::from(0)
                }
            };
        }
        // A new version: later than every earlier one of the name, also across
        // a removal (microseconds of the coordinator's clock, or one more).
        // SAFETY: reads the clock.
        let now = unsafe { pg_sys::GetCurrentTimestamp() };
        i64_result(recorded.map_or(now, |(v, _)| now.max(v + 1)))
    }

    /// `cf_cluster_record(name text, version bigint, digest text, durable
    /// boolean)`: on the coordinator, after every node took publish `version`
    /// of `name`: records it as the one every node must have (with this
    /// transaction: Citus writes every replica of the reference table, or
    /// none). Checked as `cf_cluster_begin` checks.
    fn cf_cluster_record(fcinfo) {
        // SAFETY: strict; (text, bigint, text, boolean).
        let (name, version, digest, durable) = unsafe {
            (text_arg(fcinfo, 0), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as i64, text_arg(fcinfo, 2), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 3).value() != 0)
        };
        cluster_write(name, Some((version, digest, durable)));
        pg_sys::Datum::from(0)
    }

    /// `cf_cluster_forget(name text) -> boolean`: on the coordinator, removes
    /// what the cluster records for `name` (false: nothing). Checked as
    /// `cf_cluster_begin` checks.
    fn cf_cluster_forget(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        pg_sys::Datum::from(cluster_write(name, None))
    }
}

/// Writes (or, `record` None, deletes) the cluster's record of `name` as the
/// table's owner, after `cf_cluster_begin`'s checks (repeated: these functions
/// can be called directly). Returns whether a row was there or written.
fn cluster_write(name: &str, record: Option<(i64, &str, bool)>) -> bool {
    not_in_task("the cluster functions");
    // The checks, the lock and the reference table (repeating them costs a
    // catalog read when cf_cluster_begin ran in this transaction already).
    let checked = Spi::get_one_with_args::<i64>(
        &format!("SELECT {}.cf_cluster_begin($1, false)", ext_table(c"cuckoo_cluster_copies").map(|(s, _)| s).unwrap_or_else(|| error!("cuckoo: cuckoo_cluster_copies is missing"))),
        &[name.into()],
    )
    .unwrap_or_else(|e| error!("cuckoo: {e}"));
    let (schema, rel) = ext_table(c"cuckoo_cluster_copies").expect("checked above");
    let me = my_name();
    as_table_owner(rel, || match record {
        Some((version, digest, durable)) => {
            spi_run(
                &format!(
                    "INSERT INTO {schema}.cuckoo_cluster_copies (name, version, owner, digest, durable, published_at) VALUES ($1, $2, $3, $4, $5, pg_catalog.now()) \
                     ON CONFLICT (name) DO UPDATE SET version = excluded.version, owner = excluded.owner, digest = excluded.digest, \
                     durable = excluded.durable, published_at = excluded.published_at"
                ),
                &[name.into(), version.into(), me.as_str().into(), digest.into(), durable.into()],
            );
            true
        }
        None => {
            if checked.is_some() {
                spi_run(&format!("DELETE FROM {schema}.cuckoo_cluster_copies WHERE name OPERATOR(pg_catalog.=) $1"), &[name.into()]);
            }
            checked.is_some()
        }
    })
}
