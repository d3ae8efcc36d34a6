//! Named filters on a Citus cluster: no by-name call answers a distributed
//! query from a filter that is not the one the query means.
//!
//! A by-name call in a query on a distributed table runs on the workers, each
//! with its own shared memory. So, in a backend that runs a piece of a
//! distributed query for another node (a Citus internal backend: its
//! `application_name` starts with `citus_internal gpid=`), a by-name call may
//! use this node's filter only if the node's table `cuckoo_cluster_filters`
//! says which filter it is:
//!
//! - `cluster`: a copy that `cf_publish_cluster()` made on every node from one
//!   value (the nodes' copies were checked identical then). It only answers
//!   lookups there; changes go through `cf_publish_cluster()`, and outside
//!   such backends too a cluster copy is not changed, replaced or made again
//!   under its name by anything else, so that the nodes' copies stay equal;
//! - `node`: `cf_node_local()` declared that this node's own filter is the
//!   right one (its keys are co-located with the distribution column), for
//!   lookups and changes.
//!
//! Anything else fails with an error that says how to publish the filter.
//! Outside Citus nothing here runs: the checks need Citus preloaded.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::errors::fail;
use crate::sql::value::rewrite::citus_loaded;

/// How `cuckoo_cluster_filters` lists a filter name on this node.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Scope {
    /// Not listed (or the table does not exist: an extension not yet updated).
    Unlisted,
    Cluster,
    Node,
}

/// Whether this backend runs a piece of a distributed query for another node.
pub(super) fn in_task() -> bool {
    // SAFETY: application_name is a GUC string variable (never NULL once GUCs
    // are set up; checked anyway).
    unsafe {
        let v = pg_sys::application_name;
        !v.is_null() && CStr::from_ptr(v).to_bytes().starts_with(b"citus_internal gpid=")
    }
}

/// This database's `cuckoo_cluster_filters` (in cuckoo's schema), found
/// through the catalog, never the search path: its OID and quoted name, kept
/// per backend while that OID still names it.
static mut TABLE: Option<(pg_sys::Oid, String)> = None;

fn table() -> Option<String> {
    // SAFETY: backends are single-threaded; TABLE is only touched here.
    // get_rel_name and get_relname_relid are syscache lookups.
    unsafe {
        let cached = &mut *(&raw mut TABLE);
        if let Some((oid, name)) = cached.as_ref() {
            let now = pg_sys::get_rel_name(*oid);
            if !now.is_null() && CStr::from_ptr(now) == c"cuckoo_cluster_filters" {
                return Some(name.clone());
            }
        }
        *cached = None;
        let nsp = first_row::<pg_sys::Oid>(
            "SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'cuckoo'",
            &[],
        )?;
        let rel = pg_sys::get_relname_relid(c"cuckoo_cluster_filters".as_ptr(), nsp);
        if rel == pg_sys::InvalidOid {
            // An extension not yet updated to 0.9.0.
            return None;
        }
        let quoted = |s: *const std::ffi::c_char| CStr::from_ptr(pg_sys::quote_identifier(s)).to_string_lossy().into_owned();
        let name = format!("{}.{}", quoted(pg_sys::get_namespace_name(nsp)), quoted(c"cuckoo_cluster_filters".as_ptr()));
        *cached = Some((rel, name.clone()));
        Some(name)
    }
}

/// How this node's `cuckoo_cluster_filters` lists `name`.
fn scope(name: &str) -> Scope {
    let Some(table) = table() else { return Scope::Unlisted };
    let found = first_row::<String>(&format!("SELECT scope FROM {table} WHERE name OPERATOR(pg_catalog.=) $1"), &[name.into()]);
    match found.as_deref() {
        Some("cluster") => Scope::Cluster,
        Some("node") => Scope::Node,
        _ => Scope::Unlisted,
    }
}

/// The first column of the query's first row, if it has one (and it is not
/// NULL).
fn first_row<T: pgrx::datum::FromDatum + pgrx::datum::IntoDatum>(query: &str, args: &[pgrx::datum::DatumWithOid]) -> Option<T> {
    Spi::connect(|client| {
        let t = client.select(query, Some(1), args)?;
        if t.is_empty() { Ok(None) } else { t.first().get_one::<T>() }
    })
    .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: could not read cuckoo_cluster_filters: {e}"))
}

/// Whether this database has the citus extension (a catalog lookup).
fn citus_here() -> bool {
    // SAFETY: get_extension_oid with missing_ok reads pg_extension.
    unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) != pg_sys::InvalidOid }
}

const PUBLISH_HINT: &str = "By-name calls in a query on a distributed table run on the workers, each with its own filters. \
    Publish one value to every node with cf_publish_cluster(name, value) on the coordinator, or, \
    if each node's filter holds exactly the keys of its own shards (keys co-located with the distribution column), \
    declare it with cf_node_local(name).";

/// Before a by-name call uses filter `name` (found or not) in a Citus
/// internal backend: raises the error that explains why it may not. `write`:
/// the call changes the filter.
pub(super) fn check_task(name: &str, exists: bool, write: bool) {
    if !in_task() || !citus_loaded() {
        return;
    }
    match scope(name) {
        Scope::Node => {}
        Scope::Cluster if !write && exists => {}
        Scope::Cluster if !exists => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("cuckoo filter \"{name}\" was published to the cluster but is missing on this node"),
            Some("A filter that is not durable is lost when its node restarts. Publish it again with cf_publish_cluster() on the coordinator."),
        ),
        Scope::Cluster => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" is a cluster copy: a distributed query may look it up but not change it"),
            Some("Change the value and publish it again with cf_publish_cluster() on the coordinator, or use node-local filters (cf_node_local())."),
        ),
        Scope::Unlisted if !exists => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("cuckoo filter \"{name}\" does not exist on this node, which runs part of a distributed query"),
            Some(PUBLISH_HINT),
        ),
        Scope::Unlisted => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" is local to this node and cannot answer for a distributed query"),
            Some(PUBLISH_HINT),
        ),
    }
}

/// Before a change to filter `name` outside a Citus internal backend (an
/// insert or delete, a publish, a create under its name): a cluster copy is
/// changed only by `cf_publish_cluster()`, so that every node's copy stays the
/// same.
pub(super) fn check_change(name: &str) {
    if in_task() || !citus_loaded() || !citus_here() {
        return;
    }
    if scope(name) == Scope::Cluster {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" is a cluster copy and changes only through cf_publish_cluster()"),
            Some("Publish the changed value to every node with cf_publish_cluster(), or remove it everywhere with cf_drop_cluster()."),
        );
    }
}
