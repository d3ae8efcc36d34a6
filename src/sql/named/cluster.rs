//! The SQL functions of cuckoo's Citus cluster copies (`cf_cluster_*`,
//! called by `cf_publish_cluster`, `cf_sync_cluster`, `cf_node_local` and
//! `cf_drop_cluster` in `sql/src/citus.sql`): they write each node's listing
//! (`cuckoo_cluster_filters`) and the cluster's record
//! (`cuckoo_cluster_copies`) as the tables' owner, after checking the
//! caller's right on that name. What the listing and the record mean, and the
//! checks by-name calls make against them, are in `citus`.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::attach::region;
use super::call::{db, require_access, text_arg, user};
use super::citus::{self, as_table_owner, ext_table, first_row, identity, in_task, listing, record, this_node, Scope};
use super::errors::fail;

/// Whether the current role has the privileges of role `owner` (a superuser
/// has every role's; None, a row listed before 0.12.0: superusers only).
fn acts_for(owner: Option<pg_sys::Oid>) -> bool {
    // SAFETY: catalog lookups by OID.
    unsafe {
        match owner {
            Some(o) => pg_sys::has_privs_of_role(user(), o),
            None => pg_sys::superuser(),
        }
    }
}

/// A role's name, for messages ("?" for one that no longer exists).
fn role_name(role: pg_sys::Oid) -> String {
    // SAFETY: a syscache lookup; NULL for a role that does not exist.
    unsafe {
        let n = pg_sys::GetUserNameFromId(role, true);
        if n.is_null() {
            "?".into()
        } else {
            CStr::from_ptr(n).to_string_lossy().into_owned()
        }
    }
}

fn refuse_listing(name: &str, owner: Option<pg_sys::Oid>) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied for the cluster listing of cuckoo filter \"{name}\" on {}", this_node()),
        Some(&match owner {
            Some(o) => format!(
                "It was listed by role \"{}\": only roles with its privileges may change or remove it.",
                role_name(o)
            ),
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

/// Names that cannot be a filter's are refused before anything is done.
fn check_name(name: &str) {
    if name.is_empty() || name.len() > 63 {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("cuckoo filter names are 1 to 63 bytes long; \"{name}\" is {}", name.len()),
            None,
        );
    }
}

/// Reads bigint argument `n`, or None if it is NULL.
///
/// # Safety
/// `fcinfo` is a valid frame with at least `n + 1` arguments, `n` of type bigint.
unsafe fn opt_i64(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<i64> {
    // SAFETY: as documented.
    unsafe {
        (!pgrx::fcinfo::pg_arg_is_null(fcinfo, n)).then(|| pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).value() as i64)
    }
}

fn spi_run(query: &str, args: &[pgrx::datum::DatumWithOid]) {
    Spi::connect_mut(|client| client.update(query, None, args).map(|_| ()))
        .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: could not write the cluster listing: {e}"));
}

/// A text result, or NULL.
///
/// # Safety
/// `fcinfo` is the valid frame of the function returning it.
unsafe fn text_result(fcinfo: pg_sys::FunctionCallInfo, v: Option<&str>) -> pg_sys::Datum {
    match v {
        // SAFETY: a text datum in the current memory context.
        Some(s) => unsafe {
            pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(s.as_ptr() as *const std::ffi::c_char, s.len() as i32))
        },
        None => {
            // SAFETY: as documented.
            unsafe { (*fcinfo).isnull = true };
            pg_sys::Datum::from(0)
        }
    }
}

/// The md5 of the text of this node's filter `name`'s snapshot.
fn digest_of(name: &str) -> String {
    let (schema, _) =
        ext_table(c"cuckoo_cluster_filters").unwrap_or_else(|| error!("cuckoo: cuckoo_cluster_filters is missing"));
    first_row::<String>(&format!("SELECT pg_catalog.md5({schema}.cf_snapshot($1)::pg_catalog.text)"), &[name.into()])
        .unwrap_or_else(|| error!("cuckoo: no digest of cuckoo filter \"{name}\""))
}

v1_functions! {
    /// `cf_cluster_list(name text, scope text, version bigint) -> text`:
    /// lists this node's filter `name` as its cluster copy of publish
    /// `version` or, for scope 'node', as node-local, and returns the copy's
    /// digest (the md5 of its snapshot's text, computed here; NULL for
    /// 'node'). The filter must exist here and be the caller's to change; a
    /// row already there must have been listed by a role whose privileges the
    /// caller has; a name the cluster records is not declared node-local.
    fn cf_cluster_list(fcinfo) {
        // SAFETY: (text, text, bigint), name and scope not NULL (checked).
        let (name, scope, version) = unsafe {
            if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) || pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
                error!("cf_cluster_list(): name and scope must not be NULL");
            }
            (text_arg(fcinfo, 0), text_arg(fcinfo, 1), opt_i64(fcinfo, 2))
        };
        not_in_task("cf_cluster_list()");
        let Some((schema, rel)) = ext_table(c"cuckoo_cluster_filters") else {
            error!("cuckoo: cuckoo_cluster_filters is missing: update the extension (ALTER EXTENSION cuckoo UPDATE)")
        };
        let Some(info) = region().find(db(), name) else { super::errors::not_found(name) };
        require_access(&info, true);
        let before = listing(name);
        if let Some(l) = &before {
            if !acts_for(l.owner) {
                refuse_listing(name, l.owner);
            }
        }
        let (version, digest, copy) = match scope {
            "cluster" => {
                let Some(v) = version else { error!("cf_cluster_list(): a cluster copy needs its version") };
                (Some(v), Some(digest_of(name)), Some(identity(&info)))
            }
            "node" => {
                if before.as_ref().is_some_and(|l| l.scope == Scope::Cluster) || record(name).is_some() {
                    fail(
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        format!("cuckoo filter \"{name}\" is published to the cluster"),
                        Some("Remove it from the cluster with cf_drop_cluster() before declaring a node-local filter of that name."),
                    );
                }
                (None, None, None)
            }
            _ => fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("unknown cluster listing scope \"{scope}\""), Some("The scopes are 'cluster' and 'node'.")),
        };
        let me = user();
        as_table_owner(rel, || {
            spi_run(&format!("DELETE FROM {schema}.cuckoo_cluster_filters WHERE name OPERATOR(pg_catalog.=) $1"), &[name.into()]);
            spi_run(
                &format!("INSERT INTO {schema}.cuckoo_cluster_filters (name, scope, digest, version, copy, owner) VALUES ($1, $2, $3, $4, $5, $6::pg_catalog.oid::pg_catalog.regrole)"),
                &[name.into(), scope.into(), digest.clone().into(), version.into(), copy.into(), me.into()],
            );
        });
        // SAFETY: this function's frame.
        unsafe { text_result(fcinfo, digest.as_deref()) }
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
            (text_arg(fcinfo, 0), (!pgrx::fcinfo::pg_arg_is_null(fcinfo, 1)).then(|| text_arg(fcinfo, 1)))
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
        if !acts_for(l.owner) {
            refuse_listing(name, l.owner);
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
        check_name(name);
        if let Some(info) = region().find(db(), name) {
            require_access(&info, true);
        }
        if let Some(l) = listing(name) {
            if !acts_for(l.owner) {
                refuse_listing(name, l.owner);
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

    /// `cf_cluster_current(name text, version bigint, digest text) -> boolean`:
    /// whether this node's filter `name` is listed as its cluster copy of
    /// publish `version` with that digest, and is still the filter listed
    /// (42501 for a role that may not look it up).
    fn cf_cluster_current(fcinfo) {
        // SAFETY: strict; (text, bigint, text).
        let (name, version, digest) = unsafe { (text_arg(fcinfo, 0), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as i64, text_arg(fcinfo, 2)) };
        let current = match (listing(name), region().find(db(), name)) {
            (Some(l), Some(info)) => {
                // Only to those who may look the filter up: the answer tells
                // whether a set of keys is the filter's.
                require_access(&info, false);
                l.is_copy_of(&info, version, digest) && info.usable()
            }
            _ => false,
        };
        pg_sys::Datum::from(current)
    }

    /// `cf_cluster_begin(name text, new_version boolean) -> bigint`: on the
    /// coordinator, before a publish (or a sync, or a removal) of `name` to
    /// the cluster: makes `cuckoo_cluster_copies` a reference table if it is
    /// not one yet, holds off every other cluster change until this
    /// transaction ends, checks that the caller may change what the cluster
    /// records for the name, and returns a new publish version
    /// (`new_version`) or the recorded one (NULL: none).
    fn cf_cluster_begin(fcinfo) {
        // SAFETY: strict; (text, boolean).
        let (name, new_version) = unsafe { (text_arg(fcinfo, 0), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() != 0) };
        match begin(name, new_version) {
            Some(v) => pg_sys::Datum::from(v),
            None => {
                // SAFETY: a NULL result.
                unsafe { (*fcinfo).isnull = true };
                pg_sys::Datum::from(0)
            }
        }
    }

    /// `cf_cluster_record(name text, version bigint, digest text, durable
    /// boolean)`: on the coordinator, after every node took publish `version`
    /// of `name`: records it as the one every node must have (with this
    /// transaction: Citus writes every replica of the reference table, or
    /// none). Checked as `cf_cluster_begin` checks; the coordinator must hold
    /// its own copy of that publish, listed by the caller, with that digest.
    fn cf_cluster_record(fcinfo) {
        // SAFETY: strict; (text, bigint, text, boolean).
        let (name, version, digest, durable) = unsafe {
            (text_arg(fcinfo, 0), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as i64, text_arg(fcinfo, 2), pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 3).value() != 0)
        };
        begin(name, false);
        let held = match (listing(name), region().find(db(), name)) {
            (Some(l), Some(info)) => l.owner == Some(user()) && l.is_copy_of(&info, version, digest),
            _ => false,
        };
        if !held {
            fail(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("the coordinator holds no copy of that publish of cuckoo filter \"{name}\" listed by the current role"),
                Some("cf_publish_cluster() records a publish once every node, the coordinator included, took its copy."),
            );
        }
        let (schema, rel) = ext_table(c"cuckoo_cluster_copies").expect("checked by begin");
        let me = user();
        as_table_owner(rel, || {
            spi_run(
                &format!(
                    "INSERT INTO {schema}.cuckoo_cluster_copies (name, version, owner, digest, durable, published_at) \
                     VALUES ($1, $2, $3::pg_catalog.oid::pg_catalog.regrole, $4, $5, pg_catalog.now()) \
                     ON CONFLICT (name) DO UPDATE SET version = excluded.version, owner = excluded.owner, digest = excluded.digest, \
                     durable = excluded.durable, published_at = excluded.published_at"
                ),
                &[name.into(), version.into(), me.into(), digest.into(), durable.into()],
            )
        });
        pg_sys::Datum::from(0)
    }

    /// `cf_cluster_forget(name text) -> boolean`: on the coordinator, removes
    /// what the cluster records for `name` (false: nothing). Checked as
    /// `cf_cluster_begin` checks.
    fn cf_cluster_forget(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        let recorded = begin(name, false).is_some();
        if recorded {
            let (schema, rel) = ext_table(c"cuckoo_cluster_copies").expect("checked by begin");
            as_table_owner(rel, || spi_run(&format!("DELETE FROM {schema}.cuckoo_cluster_copies WHERE name OPERATOR(pg_catalog.=) $1"), &[name.into()]));
        }
        pg_sys::Datum::from(recorded)
    }
}

/// See `cf_cluster_begin`.
fn begin(name: &str, new_version: bool) -> Option<i64> {
    not_in_task("the cluster functions");
    check_name(name);
    let Some((schema, rel)) = ext_table(c"cuckoo_cluster_copies") else {
        error!("cuckoo: cuckoo_cluster_copies is missing: update the extension (ALTER EXTENSION cuckoo UPDATE)")
    };
    if !first_row::<bool>("SELECT pg_catalog.citus_is_coordinator()", &[]).unwrap_or(false) {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the cluster functions of cuckoo run on the Citus coordinator".into(),
            Some("Run cf_publish_cluster(), cf_sync_cluster() and cf_drop_cluster() on the coordinator."),
        );
    }
    let distributed = first_row::<bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1)",
        &[rel.into()],
    )
    .unwrap_or(false);
    // One cluster change at a time: a lock on the coordinator's own listing
    // that only its owner may take (SHARE UPDATE EXCLUSIVE conflicts with
    // itself, not with the rows the nodes' copies write or with reads).
    let (listing_schema, listing_rel) =
        ext_table(c"cuckoo_cluster_filters").unwrap_or_else(|| error!("cuckoo: cuckoo_cluster_filters is missing"));
    as_table_owner(listing_rel, || {
        spi_run(&format!("LOCK TABLE {listing_schema}.cuckoo_cluster_filters IN SHARE UPDATE EXCLUSIVE MODE"), &[]);
        if !distributed {
            Spi::connect_mut(|client| {
                client.update("SELECT pg_catalog.create_reference_table($1)", None, &[rel.into()]).map(|_| ())
            })
            .unwrap_or_else(|e: pgrx::spi::Error| {
                error!("cuckoo: could not make cuckoo_cluster_copies a reference table: {e}")
            });
        }
    });
    let recorded = record(name);
    if let Some(r) = &recorded {
        if !acts_for(Some(r.owner)) {
            fail(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("permission denied for cluster copy \"{name}\""),
                Some(&format!("It was published to the cluster by role \"{}\": only roles with its privileges may publish, sync or remove it.", role_name(r.owner))),
            );
        }
    }
    if !new_version {
        return recorded.map(|r| r.version);
    }
    // A new version: later than every one the cluster records, of any name
    // (microseconds of the coordinator's clock, or one more). Cluster changes
    // are one at a time, so versions grow in the order publishes commit, as
    // the pins of queries (`pin`) need.
    // SAFETY: reads the clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let latest = citus::epoch().map_or(0, |(v, _)| v);
    let version = now.max(latest + 1).max(recorded.map_or(0, |r| r.version + 1));
    citus::note_publishing(version);
    // Kept plans whose lookups were pinned depend on the record's table: a
    // change to its definition, which Citus makes on every node (the table
    // and each replica) in this transaction, invalidates it there when the
    // publish commits, so they are planned again. Resetting a storage option
    // no one sets changes nothing else; its lock (SHARE UPDATE EXCLUSIVE on
    // every node) lets reads and the record's writes through, and is taken
    // here, before any node's copy changes, so that a publish that waits for
    // it (behind an ANALYZE, say) leaves every node answering meanwhile.
    // (Made on every node even where a session turned Citus's DDL
    // propagation off.)
    as_table_owner(rel, || {
        citus::with_citus_setting(c"citus.enable_ddl_propagation", || {
            spi_run(&format!("ALTER TABLE {schema}.cuckoo_cluster_copies RESET (toast_tuple_target)"), &[])
        })
    });
    Some(version)
}
