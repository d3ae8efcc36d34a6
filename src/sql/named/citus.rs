//! Named filters on a Citus cluster: no by-name call answers a distributed
//! query from a filter that is not the one the query means.
//!
//! (About 800 lines: what a node reads of the cluster's record and what a
//! task checks against it are one protocol, kept together.)
//!
//! A by-name call in a query on a distributed table runs on the workers, each
//! with its own shared memory. So, in a backend that runs a piece of a
//! distributed query for another node (a Citus internal backend: its
//! `application_name` starts with `citus_internal gpid=`), a by-name call may
//! use this node's filter only if the node's table `cuckoo_cluster_filters`
//! says which filter it is:
//!
//! - `cluster`: this node's copy of a value `cf_publish_cluster()` published
//!   to every node. It only answers lookups, and only while it is the copy the
//!   cluster last published: the listing row carries the publish's version and
//!   which filter in this node's shared memory the copy is, and the cluster's
//!   record, `cuckoo_cluster_copies` (a Citus reference table, written in the
//!   publishing transaction), the version every node must have. A node that
//!   missed a publish (inactive, unreachable, added later, or a coordinator
//!   that stopped half way) fails such lookups with an error that names it and
//!   says how to catch it up; it never answers from another publish's copy.
//!   Lookups outside distributed queries are held to the same rule.
//!   Outside such backends too a cluster copy is not changed, replaced or made
//!   again under its name by anything but the cluster functions;
//! - `node`: `cf_node_local()` declared that this node's own filter is the
//!   right one (its keys are co-located with the distribution column), for
//!   lookups and changes.
//!
//! Anything else fails with an error that says how to publish the filter.
//! Listing rows and the cluster's record are written only through the SQL
//! functions in `cluster`, each of which checks the caller's right on that
//! name (the tables grant nothing but SELECT). Outside Citus nothing here runs: the
//! checks need Citus loaded.

use std::ffi::{CStr, CString};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::errors::fail;
use crate::region::EntryInfo;
use crate::sql::citus::citus_loaded;

/// How `cuckoo_cluster_filters` lists a filter name on this node.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Scope {
    /// Not listed (or the table does not exist: an extension not yet updated).
    Unlisted,
    Cluster,
    Node,
}

/// A row of this node's `cuckoo_cluster_filters`.
pub(super) struct Listing {
    pub(super) scope: Scope,
    /// For a cluster copy: the publish it is (`cuckoo_cluster_copies.version`).
    pub(super) version: Option<i64>,
    /// For a cluster copy: which filter in shared memory it is ([`identity`]).
    pub(super) copy: Option<String>,
    /// For a cluster copy: the md5 of its snapshot's text, computed by this
    /// node when it was listed.
    pub(super) digest: Option<String>,
    /// The role that listed it (None: listed before 0.12.0; superusers only).
    pub(super) owner: Option<pg_sys::Oid>,
}

impl Listing {
    /// Whether this listing is the cluster copy of publish `version` with
    /// digest `digest`, and `info` (this node's filter of the name) is still
    /// the filter it lists.
    pub(super) fn is_copy_of(&self, info: &EntryInfo, version: i64, digest: &str) -> bool {
        self.scope == Scope::Cluster
            && self.version == Some(version)
            && self.digest.as_deref() == Some(digest)
            && self.copy.as_deref() == Some(identity(info).as_str())
    }
}

/// What the cluster's record says of a name: the publish every node's copy
/// must be, the md5 of its snapshot, and the role that published it.
pub(super) struct Record {
    pub(super) version: i64,
    pub(super) digest: String,
    pub(super) owner: pg_sys::Oid,
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

/// Which filter in this node's shared memory `info` is, as a listing row
/// records it: a durable filter's generation (the WAL position of the publish
/// that made its contents, the same after a restart and on a standby), or a
/// filter's allocation tag within this layout of shared memory (which a crash
/// restart lays out anew, with another birth time). A copy replaced or
/// made again under the name (a publish whose transaction then aborted) has
/// another.
pub(super) fn identity(info: &EntryInfo) -> String {
    if info.durable && info.gen != 0 {
        format!("g{}", info.gen)
    } else {
        format!("t{}@{}", info.tag, super::attach::region().born())
    }
}

/// The extension's schema (quoted) and the OID of its table `table`, found
/// through the catalog, never the search path; None if the table does not
/// exist (an extension not yet updated). Kept per backend while that OID
/// still names such a table.
pub(super) fn ext_table(table: &CStr) -> Option<(String, pg_sys::Oid)> {
    // SAFETY: backends are single-threaded; TABLES is only touched here.
    // get_rel_name and get_relname_relid are syscache lookups.
    unsafe {
        let cached = &mut *std::ptr::addr_of_mut!(TABLES);
        if let Some((_, rel, schema)) = cached.iter().find(|(t, _, _)| t.as_c_str() == table) {
            let now = pg_sys::get_rel_name(*rel);
            if !now.is_null() && CStr::from_ptr(now) == table {
                return Some((schema.clone(), *rel));
            }
        }
        cached.retain(|(t, _, _)| t.as_c_str() != table);
        let nsp = first_row::<pg_sys::Oid>(
            "SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'cuckoo'",
            &[],
        )?;
        let rel = pg_sys::get_relname_relid(table.as_ptr(), nsp);
        if rel == pg_sys::InvalidOid {
            return None;
        }
        let schema =
            CStr::from_ptr(pg_sys::quote_identifier(pg_sys::get_namespace_name(nsp))).to_string_lossy().into_owned();
        cached.push((table.to_owned(), rel, schema.clone()));
        Some((schema, rel))
    }
}

static mut TABLES: Vec<(CString, pg_sys::Oid, String)> = Vec::new();

/// The first column of the query's first row (None: no row, or NULL), read
/// by a read-only SPI query (`Spi::get_one` would assign a transaction id,
/// which a parallel worker may not).
pub(super) fn first_row<T: pgrx::datum::FromDatum + pgrx::datum::IntoDatum>(
    query: &str,
    args: &[pgrx::datum::DatumWithOid],
) -> Option<T> {
    Spi::connect(|client| {
        let t = client.select(query, Some(1), args)?;
        if t.is_empty() {
            Ok(None)
        } else {
            t.first().get_one::<T>()
        }
    })
    .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: {e}"))
}

/// How this node's `cuckoo_cluster_filters` lists `name`.
pub(super) fn listing(name: &str) -> Option<Listing> {
    read_listing(name)
}

/// How `cuckoo_cluster_filters` lists `name` now, in the latest snapshot
/// (whatever the isolation level): the listing a statement's own snapshot
/// shows may be older than the copy in shared memory.
fn listing_now(name: &str) -> Option<Listing> {
    // SAFETY: the latest snapshot is pushed for the read (a read-only SPI
    // query uses the active snapshot) and popped after; an error's abort
    // pops it too.
    unsafe {
        pg_sys::PushActiveSnapshot(pg_sys::GetLatestSnapshot());
        let l = read_listing(name);
        pg_sys::PopActiveSnapshot();
        l
    }
}

fn read_listing(name: &str) -> Option<Listing> {
    let (schema, rel) = ext_table(c"cuckoo_cluster_filters")?;
    // SAFETY: a syscache lookup of a column of an existing table.
    let versioned = unsafe { pg_sys::get_attnum(rel, c"version".as_ptr()) } != pg_sys::InvalidAttrNumber as i16;
    // A table not yet updated to 0.12.0 (its library already is): its rows
    // carry no publish, no digest and no owner.
    let query = if versioned {
        format!("SELECT scope, version, copy, digest, owner::pg_catalog.oid FROM {schema}.cuckoo_cluster_filters WHERE name OPERATOR(pg_catalog.=) $1")
    } else {
        format!("SELECT scope, NULL::pg_catalog.int8, NULL::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.oid FROM {schema}.cuckoo_cluster_filters WHERE name OPERATOR(pg_catalog.=) $1")
    };
    let row = |t: pgrx::spi::SpiTupleTable<'_>| -> Result<Option<Listing>, pgrx::spi::Error> {
        if t.is_empty() {
            return Ok(None);
        }
        let row = t.first();
        let scope = match row.get::<String>(1)?.as_deref() {
            Some("cluster") => Scope::Cluster,
            Some("node") => Scope::Node,
            _ => Scope::Unlisted,
        };
        Ok(Some(Listing {
            scope,
            version: row.get::<i64>(2)?,
            copy: row.get::<String>(3)?,
            digest: row.get::<String>(4)?,
            owner: row.get::<pg_sys::Oid>(5)?,
        }))
    };
    // (Read as the table's owner: the digest is not everyone's to read.)
    as_table_owner(rel, || {
        Spi::connect(|client| {
            let plan = kept_plan(&raw mut LISTING_PLAN, rel, versioned, client, &query)?;
            row(client.select(plan, Some(1), &[name.into()])?)
        })
        .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: could not read cuckoo_cluster_filters: {e}"))
    })
}

/// The plans of the reads the checks make, kept for the backend (by
/// SPI_keepplan; PostgreSQL's plan cache revalidates them), with the OID of
/// the table each reads and the form of the query.
type PlanSlot = Option<(pg_sys::Oid, bool, pgrx::spi::OwnedPreparedStatement)>;
static mut LISTING_PLAN: PlanSlot = None;
static mut RECORD_PLAN: PlanSlot = None;
static mut REPLICA_PLAN: PlanSlot = None;
static mut ROUTED_PLAN: PlanSlot = None;
static mut EPOCH_PLAN: PlanSlot = None;
static mut EPOCH_ROUTED_PLAN: PlanSlot = None;

/// The plan of `query` (one text parameter, or none if `param` is false)
/// over table `rel` (in its form `form`), kept in `slot`.
fn kept_plan<'a>(
    slot: *mut PlanSlot,
    rel: pg_sys::Oid,
    form: bool,
    client: &pgrx::spi::SpiClient<'_>,
    query: &str,
) -> Result<&'a pgrx::spi::OwnedPreparedStatement, pgrx::spi::Error> {
    kept_plan_of(slot, rel, form, client, query, true)
}

fn kept_plan_of<'a>(
    slot: *mut PlanSlot,
    rel: pg_sys::Oid,
    form: bool,
    client: &pgrx::spi::SpiClient<'_>,
    query: &str,
    param: bool,
) -> Result<&'a pgrx::spi::OwnedPreparedStatement, pgrx::spi::Error> {
    // SAFETY: backends are single-threaded; the slots are only touched here.
    unsafe {
        let slot = &mut *slot;
        if slot.as_ref().is_none_or(|(r, f, _)| (*r, *f) != (rel, form)) {
            *slot = None;
            let types: &[pgrx::PgOid] = if param { &[pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TEXTOID)] } else { &[] };
            let plan = client.prepare(query, types)?.keep();
            *slot = Some((rel, form, plan));
        }
        Ok(&slot.as_ref().expect("just set").2)
    }
}

fn scope(name: &str) -> Scope {
    listing(name).map_or(Scope::Unlisted, |l| l.scope)
}

/// Whether this database has the citus extension (a catalog lookup).
pub(super) fn citus_here() -> bool {
    // SAFETY: get_extension_oid with missing_ok reads pg_extension.
    unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) != pg_sys::InvalidOid }
}

/// Runs `f` with `citus.allow_nested_distributed_execution` on (a read of a
/// reference table from a backend that runs a piece of a distributed query
/// is otherwise refused by Citus), restored after.
fn nested_allowed<T>(f: impl FnOnce() -> T) -> T {
    with_citus_setting(c"citus.allow_nested_distributed_execution", f)
}

/// Runs `f` with Citus's boolean setting `setting` on, restored after.
pub(super) fn with_citus_setting<T>(setting: &CStr, f: impl FnOnce() -> T) -> T {
    crate::sql::with_setting(setting, c"on", f)
}

/// Runs `f` as the owner of the extension's tables (who alone may write the
/// listing and the cluster's record), restored after. Callers check the
/// caller's right on the name first.
pub(super) fn as_table_owner<T>(rel: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    // SAFETY: the user switch PostgreSQL's own code makes for work done on a
    // caller's behalf (SECURITY_LOCAL_USERID_CHANGE); an error's abort
    // restores the saved user and context.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(rel));
        if tuple.is_null() {
            error!("cuckoo: cache lookup failed for relation {}", rel.to_u32());
        }
        let owner = (*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_class)).relowner;
        pg_sys::ReleaseSysCache(tuple);
        let (mut saved_user, mut saved_ctx) = (pg_sys::InvalidOid, 0i32);
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_ctx);
        pg_sys::SetUserIdAndSecContext(owner, saved_ctx | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
        let out = f();
        pg_sys::SetUserIdAndSecContext(saved_user, saved_ctx);
        out
    }
}

/// What the cluster's record (`cuckoo_cluster_copies`) says of `name`; None
/// if it records nothing (read as `read_record` reads).
pub(super) fn record(name: &str) -> Option<Record> {
    read_record(
        "SELECT version, digest, owner::pg_catalog.oid FROM {table} WHERE name OPERATOR(pg_catalog.=) $1",
        Some(name),
        [&raw mut RECORD_PLAN, &raw mut ROUTED_PLAN],
        |t| {
            if t.is_empty() {
                return Ok(None);
            }
            let row = t.first();
            Ok(Some(Record {
                version: row.get::<i64>(1)?.unwrap_or(0),
                digest: row.get::<String>(2)?.unwrap_or_default(),
                owner: row.get::<pg_sys::Oid>(3)?.unwrap_or(pg_sys::InvalidOid),
            }))
        },
    )?
    .0
}

/// Runs `query` on the cluster's record, as the table's owner (the digest is
/// not everyone's to read), and hands its rows to `rows`; with the record's
/// OID, or None if there is no such table. `{table}` in the query names this
/// node's replica of the reference table when Citus lists one here (Citus
/// writes every listed replica in the publishing transaction), read
/// directly, without a distributed query (none may run in a parallel
/// worker, and it is cheaper); else the table, which Citus reads on another
/// node. `name`: the query's one text parameter, if any. `plans`: where the
/// plans of the two forms are kept.
fn read_record<T>(
    query: &str,
    name: Option<&str>,
    plans: [*mut PlanSlot; 2],
    rows: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> Result<T, pgrx::spi::Error>,
) -> Option<(T, pg_sys::Oid)> {
    let (schema, rel) = ext_table(c"cuckoo_cluster_copies")?;
    let args: Vec<pgrx::datum::DatumWithOid> = name.map(|n| vec![n.into()]).unwrap_or_default();
    let out = as_table_owner(rel, || {
        Spi::connect(|client| {
            let t = match replica(client, rel)? {
                Some((id, r)) => {
                    let plan = kept_plan_of(plans[0], r, true, client, &query.replace("{table}", &format!("{schema}.cuckoo_cluster_copies_{id}")), name.is_some())?;
                    client.select(plan, Some(1), &args)?
                }
                None => {
                    // SAFETY: reads a backend global.
                    if unsafe { pg_sys::ParallelWorkerNumber } >= 0 {
                        fail(
                            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                            match name {
                                Some(name) => format!("cuckoo filter \"{name}\" cannot be checked in a parallel worker: {} holds no replica of cuckoo_cluster_copies", this_node()),
                                None => format!("the cluster's record cannot be read in a parallel worker: {} holds no replica of cuckoo_cluster_copies", this_node()),
                            },
                            Some("Run SELECT replicate_reference_tables() on the coordinator, or SET max_parallel_workers_per_gather = 0."),
                        );
                    }
                    let plan = kept_plan_of(plans[1], rel, true, client, &query.replace("{table}", &format!("{schema}.cuckoo_cluster_copies")), name.is_some())?;
                    nested_allowed(|| client.select(plan, Some(1), &args))?
                }
            };
            rows(t)
        })
        .unwrap_or_else(|e: pgrx::spi::Error| error!("cuckoo: could not read cuckoo_cluster_copies: {e}"))
    });
    Some((out, rel))
}

/// This node's replica of the cluster's record (the reference table
/// `cuckoo_cluster_copies`, OID `rel`): its shard id and the OID of its
/// table, if Citus lists one here.
fn replica(
    client: &pgrx::spi::SpiClient<'_>,
    rel: pg_sys::Oid,
) -> Result<Option<(i64, pg_sys::Oid)>, pgrx::spi::Error> {
    // Kept for the transaction (a statement's planning and its execution
    // both ask): Citus's placements change in other transactions.
    // SAFETY: MyProc is this backend's own PGPROC; backends are single-threaded
    // and REPLICA_SEEN is only touched here.
    let xact = unsafe { (*pg_sys::MyProc).lxid };
    let seen = &raw mut REPLICA_SEEN;
    // SAFETY: as above, REPLICA_SEEN is this backend's alone.
    if let Some((x, r, found)) = unsafe { *seen } {
        if (x, r) == (xact, rel) {
            return Ok(found);
        }
    }
    let found = find_replica(client, rel)?;
    // SAFETY: as above.
    unsafe { *seen = Some((xact, rel, found)) };
    Ok(found)
}

/// This node's replica as `replica` last found it: the local transaction,
/// the table's OID, and what was found (the shard id and its table).
type ReplicaSeen = (pg_sys::LocalTransactionId, pg_sys::Oid, Option<(i64, pg_sys::Oid)>);
static mut REPLICA_SEEN: Option<ReplicaSeen> = None;

fn find_replica(
    client: &pgrx::spi::SpiClient<'_>,
    rel: pg_sys::Oid,
) -> Result<Option<(i64, pg_sys::Oid)>, pgrx::spi::Error> {
    let replica = kept_plan(
        &raw mut REPLICA_PLAN,
        rel,
        true,
        client,
        "SELECT s.shardid FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid \
         WHERE s.logicalrelid OPERATOR(pg_catalog.=) ($1::pg_catalog.oid)::pg_catalog.regclass AND p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)",
    )?;
    let table = rel.to_u32().to_string();
    let t = client.select(replica, Some(1), &[table.as_str().into()])?;
    let shard = if t.is_empty() { None } else { t.first().get_one::<i64>()? };
    Ok(shard.and_then(|id| {
        let c = CString::new(format!("cuckoo_cluster_copies_{id}")).ok()?;
        // SAFETY: a syscache lookup of a name in the extension's schema.
        let r = unsafe { pg_sys::get_relname_relid(c.as_ptr(), pg_sys::get_rel_namespace(rel)) };
        (r != pg_sys::InvalidOid).then_some((id, r))
    }))
}

/// The latest publish the cluster records, of any name (0: none), and the
/// OID of the record's table; None without such a table or outside a
/// database with Citus. Versions only grow, in the order publishes commit
/// (one cluster change at a time, each later than every recorded one), so a
/// record later than this was made after it was read.
pub(super) fn epoch() -> Option<(i64, pg_sys::Oid)> {
    if !citus_loaded() || !citus_here() {
        return None;
    }
    let (latest, rel) = read_record(
        "SELECT pg_catalog.max(version) FROM {table}",
        None,
        [&raw mut EPOCH_PLAN, &raw mut EPOCH_ROUTED_PLAN],
        |t| t.first().get_one::<i64>(),
    )?;
    Some((latest.unwrap_or(0), rel))
}

/// The version of this transaction's first publish (`cluster::begin`), for
/// the transaction that publishes.
static mut PUBLISHING: Option<(pg_sys::LocalTransactionId, i64)> = None;

fn publishing_slot() -> *mut Option<(pg_sys::LocalTransactionId, i64)> {
    &raw mut PUBLISHING
}

/// This transaction publishes, as `version` (its first publish counts).
pub(super) fn note_publishing(version: i64) {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    // SAFETY: registering callbacks PostgreSQL keeps for the process; MyProc
    // is this backend's own PGPROC; backends are single-threaded and
    // PUBLISHING is only touched here, in `publishing` and in the callbacks.
    unsafe {
        REGISTERED.call_once(|| {
            pg_sys::RegisterXactCallback(Some(publish_aborted), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(publish_sub_aborted), std::ptr::null_mut());
        });
        let xact = (*pg_sys::MyProc).lxid;
        if (*publishing_slot()).is_none_or(|(x, _)| x != xact) {
            *publishing_slot() = Some((xact, version));
        }
    }
}

/// If this transaction publishes, and still holds the lock that lets one
/// cluster change run at a time (a publish rolled back to a savepoint
/// released it): the version of its first publish.
fn publishing() -> Option<i64> {
    // SAFETY: as in `note_publishing`; LockHeldByMe reads this backend's
    // local lock table.
    unsafe {
        let xact = (*pg_sys::MyProc).lxid;
        let (x, version) = (*publishing_slot())?;
        if x != xact {
            return None;
        }
        let (_, listing) = ext_table(c"cuckoo_cluster_filters")?;
        let tag = pg_sys::LOCKTAG {
            locktag_field1: pg_sys::MyDatabaseId.to_u32(),
            locktag_field2: listing.to_u32(),
            locktag_field3: 0,
            locktag_field4: 0,
            locktag_type: pg_sys::LockTagType::LOCKTAG_RELATION as u8,
            locktag_lockmethodid: pg_sys::DEFAULT_LOCKMETHOD as u8,
        };
        pg_sys::LockHeldByMe(&tag, pg_sys::ShareUpdateExclusiveLock as i32).then_some(version)
    }
}

/// A transaction (or subtransaction) that published ends. Plans it made
/// were pinned as its own (`pin_for_query`). Committed, its publish
/// invalidates the record's table, and them with it; aborted or prepared
/// for two-phase commit, no invalidation reaches them now, so every plan this
/// backend keeps is made again.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn publish_aborted(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_PREPARE => forget_publishing(true),
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => forget_publishing(false),
        _ => {}
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn publish_sub_aborted(
    event: pg_sys::SubXactEvent::Type,
    _sub: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        // SAFETY: as in `note_publishing`.
        let publishing = unsafe { (*publishing_slot()).is_some_and(|(x, _)| x == (*pg_sys::MyProc).lxid) };
        if publishing {
            // SAFETY: invalidates this backend's cached plans (PostgreSQL's
            // own reaction to a change of search_path or of a namespace).
            unsafe { pg_sys::ResetPlanCache() };
        }
    }
}

fn forget_publishing(replan: bool) {
    // SAFETY: as in `note_publishing`; ResetPlanCache as in
    // `publish_sub_aborted`.
    unsafe {
        if (*publishing_slot()).is_some() {
            *publishing_slot() = None;
            if replan {
                pg_sys::ResetPlanCache();
            }
        }
    }
}

/// The pin the statement running in this backend carries
/// (`pin::cf_cluster_carry`): its local transaction, its start, the pin.
static mut STATEMENT_PIN: Option<(pg_sys::LocalTransactionId, pg_sys::TimestampTz, i64)> = None;

fn statement_slot() -> *mut Option<(pg_sys::LocalTransactionId, pg_sys::TimestampTz, i64)> {
    &raw mut STATEMENT_PIN
}

/// The statement running in this backend carries pin `pin`.
pub(super) fn note_statement_pin(pin: i64) {
    // SAFETY: MyProc is this backend's own PGPROC; backends are single-threaded
    // and STATEMENT_PIN is only touched here and in `statement_pin`.
    unsafe { *statement_slot() = Some(((*pg_sys::MyProc).lxid, pg_sys::GetCurrentStatementStartTimestamp(), pin)) };
}

/// The pin the statement running in this backend carries, if any.
fn statement_pin() -> Option<i64> {
    // SAFETY: as in `note_statement_pin`.
    unsafe {
        let (x, at, pin) = (*statement_slot())?;
        ((x, at) == ((*pg_sys::MyProc).lxid, pg_sys::GetCurrentStatementStartTimestamp())).then_some(pin)
    }
}

/// The pin a query planned now carries (`pin`), and the OID of the record's
/// table: the latest publish the cluster records (see `epoch`); or, planned
/// by a transaction that publishes, `-(its first publish's version + 1)`.
/// Such a transaction holds the lock that lets one cluster change run at a
/// time, so no publish commits while its queries run; it sees its own
/// record where its own connections read, and the other nodes do not yet.
pub(super) fn pin_for_query() -> Option<(i64, pg_sys::Oid)> {
    let (latest, rel) = epoch()?;
    Some(match publishing() {
        Some(own) => (-(own + 1), rel),
        None => (latest, rel),
    })
}

/// A publish version as the time it was made (versions are the
/// coordinator's clock in microseconds, or one more than the last).
fn publish_time(v: i64) -> String {
    // SAFETY: formats a timestamp into a palloc'd string.
    unsafe { CStr::from_ptr(pg_sys::timestamptz_to_str(v)).to_string_lossy().into_owned() }
}

/// This node as Citus names it (host:port), for errors.
pub(super) fn this_node() -> String {
    let q = "SELECT n.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) n.nodeport FROM pg_catalog.pg_dist_node n, pg_catalog.pg_dist_local_group g \
             WHERE n.groupid OPERATOR(pg_catalog.=) g.groupid AND n.noderole OPERATOR(pg_catalog.=) 'primary' LIMIT 1";
    first_row::<String>(q, &[]).map_or_else(|| "this node".to_string(), |n| format!("node {n}"))
}

const PUBLISH_HINT: &str =
    "By-name calls in a query on a distributed table run on the workers, each with its own filters. \
    Publish one value to every node with cf_publish_cluster(name, value) on the coordinator, or, \
    if each node's filter holds exactly the keys of its own shards (keys co-located with the distribution column), \
    declare it with cf_node_local(name).";

/// Before a lookup answers from cluster copy `info` listed as `l`: raises the
/// error that says why this node's copy is not the one the cluster last
/// published. `pin`: the latest publish the cluster recorded when the query
/// was planned (see `pin`); a record later than that was made while the
/// query ran, and some of its pieces may have answered from the publish
/// before, so this one fails (40001: retried, the query is planned again).
fn check_current(name: &str, info: &EntryInfo, l: &Listing, pin: Option<i64>) {
    let quoted = name.replace('\'', "''");
    // The latest publish the query may answer from, or, for a query planned
    // by a transaction that publishes, the version of its first publish
    // (`pin_for_query`).
    let (pin, own) = match pin {
        Some(p) if p < 0 => (None, Some(-(p + 1))),
        p => (p, None),
    };
    let Some(listed) = l.version else {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" on {} was listed as a cluster copy by a release before 0.12.0, which does not say which publish it is", this_node()),
            Some("Run ALTER EXTENSION cuckoo UPDATE, then publish it again with cf_publish_cluster() on the coordinator."),
        );
    };
    if l.copy.as_deref() != Some(identity(info).as_str()) {
        if listing_now(name)
            .is_some_and(|now| now.scope == Scope::Cluster && now.copy.as_deref() == Some(identity(info).as_str()))
        {
            // The copy was listed after this statement's snapshot: a publish
            // committed on this node while the query ran.
            fail(
                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                format!("cuckoo filter \"{name}\" was published again while this query ran"),
                Some(&format!("{} took a publish after this query's snapshot of it; other parts of the query may have answered from the one before. Retry the query (in a transaction block, the transaction).", this_node())),
            );
        }
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the copy of cuckoo filter \"{name}\" on {} is not the cluster copy listed there: a publish did not finish on this node, or this transaction's snapshot is older than the latest publish",
                this_node()
            ),
            Some("Retry the transaction; if it fails again, publish the value again with cf_publish_cluster() on the coordinator."),
        );
    }
    match record(name) {
        Some(r) if pin.is_some_and(|p| r.version > p) => fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!("cuckoo filter \"{name}\" was published again while this query ran"),
            Some(&format!(
                "The query was planned when the cluster's latest publish was that of {}; {} holds the publish of {}, and other parts of the query may have answered from the one before. Retry the query (in a transaction block, the transaction).",
                publish_time(pin.unwrap_or(0)),
                this_node(),
                publish_time(r.version)
            )),
        ),
        Some(r) if listed > r.version && own.is_some_and(|v| listed >= v) => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "cuckoo filter \"{name}\" on {} is the copy of a publish that has not committed: the query runs in the transaction that publishes it",
                this_node()
            ),
            Some("The other nodes answer from a publish once its transaction commits. Look it up after COMMIT."),
        ),
        Some(r) if listed > r.version && pin.is_some_and(|p| p >= listed) => fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!("the publish of cuckoo filter \"{name}\" of {} is still being committed on {}", publish_time(listed), this_node()),
            Some("The node that planned the query already sees it. Retry the query (in a transaction block, the transaction)."),
        ),
        Some(r) if r.version == listed && l.digest.as_deref() == Some(r.digest.as_str()) => {}
        Some(r) if r.version == listed => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("the copy of cuckoo filter \"{name}\" on {} is not the value the cluster published (its digest differs)", this_node()),
            Some(&format!("Run SELECT cf_sync_cluster('{quoted}') on the coordinator, or publish the value again with cf_publish_cluster().")),
        ),
        Some(r) => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "cuckoo filter \"{name}\" on {} is not the cluster's copy: this node holds the publish of {}, the cluster records the publish of {}",
                this_node(),
                publish_time(listed),
                publish_time(r.version)
            ),
            Some(&if listed > r.version {
                "A publish took this node's copy but did not finish (it failed, was cancelled or rolled back, or its coordinator stopped). Publish the value again with cf_publish_cluster() on the coordinator.".to_string()
            } else {
                format!(
                    "This node missed a publish (it was inactive, unreachable or not yet added). Run SELECT cf_sync_cluster('{quoted}') on the coordinator (or publish the value again with cf_publish_cluster())."
                )
            }),
        ),
        None => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" is listed on {} as a cluster copy that the cluster does not record", this_node()),
            Some("Its publish did not finish, or it was removed with cf_drop_cluster() while this node was away. Publish it again with cf_publish_cluster(), or remove it with cf_drop_cluster()."),
        ),
    }
}

/// Before a by-name call uses filter `name` (`found`: this node's filter of
/// that name): raises the error that explains why it may not. In a backend
/// that runs a piece of a distributed query, the filter must be listed; in
/// any backend of a database with Citus, a lookup of a cluster copy must find
/// the copy the cluster last published. `write`: the call changes the filter.
/// `pin`: the call's pin (see `check_current`).
pub(super) fn check_task(name: &str, found: Option<&EntryInfo>, write: bool, pin: Option<i64>) {
    if !citus_loaded() {
        return;
    }
    // A call the planner did not pin (inside a function, or a row-level
    // security policy) is held to its statement's carried pin.
    let pin = pin.or_else(statement_pin);
    if !in_task() {
        if write || !citus_here() {
            return;
        }
        if let (Some(info), Some(l)) = (found, listing(name)) {
            if l.scope == Scope::Cluster {
                check_current(name, info, &l, pin);
            }
        }
        return;
    }
    let l = listing(name);
    match (l.as_ref().map_or(Scope::Unlisted, |l| l.scope), found) {
        (Scope::Node, _) if record(name).is_some() => fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cuckoo filter \"{name}\" is published to the cluster, but {} lists a node-local filter of that name", this_node()),
            Some(&format!("Remove the node-local listing there (SELECT cf_cluster_unlist('{}', 'node')), then run SELECT cf_sync_cluster('{}') on the coordinator.", name.replace('\'', "''"), name.replace('\'', "''"))),
        ),
        (Scope::Node, _) => {}
        (Scope::Cluster, Some(info)) if !write => check_current(name, info, l.as_ref().expect("listed"), pin),
        (Scope::Cluster, None) => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("cuckoo filter \"{name}\" was published to the cluster but is missing on {}", this_node()),
            Some(&format!(
                "A filter that is not durable is lost when its node restarts. Run SELECT cf_sync_cluster('{}') on the coordinator, or publish it again with cf_publish_cluster().",
                name.replace('\'', "''")
            )),
        ),
        (Scope::Cluster, Some(_)) => refuse_task_write(name),
        (Scope::Unlisted, None) if record(name).is_some() => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("cuckoo filter \"{name}\" was published to the cluster but {} has no copy of it", this_node()),
            Some(&format!(
                "A node added or made active after the publish has no copy until it is given one: run SELECT cf_sync_cluster('{}') on the coordinator.",
                name.replace('\'', "''")
            )),
        ),
        (Scope::Unlisted, None) => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("cuckoo filter \"{name}\" does not exist on this node, which runs part of a distributed query"),
            Some(PUBLISH_HINT),
        ),
        (Scope::Unlisted, Some(_)) => refuse_local(name),
    }
}

/// A change to a cluster copy from a piece of a distributed query.
fn refuse_task_write(name: &str) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("cuckoo filter \"{name}\" is a cluster copy: a distributed query may look it up but not change it"),
        Some("Change the value and publish it again with cf_publish_cluster() on the coordinator, or use node-local filters (cf_node_local())."),
    )
}

/// A filter of this node's own, unlisted, used by a piece of a distributed
/// query.
fn refuse_local(name: &str) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("cuckoo filter \"{name}\" is local to this node and cannot answer for a distributed query"),
        Some(PUBLISH_HINT),
    )
}

/// Before a call that changes, makes or drops filter `name` (whether or not
/// it exists) in a Citus internal backend: only a node-local filter may be.
pub(super) fn check_task_write(name: &str) {
    if !in_task() || !citus_loaded() {
        return;
    }
    match scope(name) {
        Scope::Node => {}
        Scope::Cluster => refuse_task_write(name),
        Scope::Unlisted => refuse_local(name),
    }
}

/// Before a change to filter `name` outside a Citus internal backend (an
/// insert or delete, a publish, a create under its name): a cluster copy is
/// changed only by the cluster functions, so that every node's copy stays the
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
