//! Named filters bound to a table column (`cf_bind`): kept in step with the
//! table by triggers, so that every row version any live snapshot can see
//! has its key in the filter (issue 33).
//!
//! - `shared`: the settings and the shared state beside the region (slots,
//!   the queue of pending deletes) with its lock;
//! - `catalog`: what `cuckoo_bindings` says a binding is;
//! - `rebuild`: a binding that needs a rebuild rebuilt in the background
//!   when first used (`cuckoo.auto_rebuild`);
//! - `binding`: a binding as a backend uses it, and how keys go into its
//!   filter;
//! - `apply`: queued deletes applied once no snapshot can see their rows;
//! - `trigger`: the row and statement triggers and the transaction callbacks;
//! - `fill`: a filter filled from its table;
//! - `prescreen`: the pre-screen the planner adds to `EXISTS` and `IN`
//!   subqueries over a bound column.
//!
//! The SQL side (`cf_bind`, `cf_unbind`, `cf_rebuild`, the triggers they
//! make) is `sql/src/bound.sql`; the rules the filter's contents keep (a
//! copy per version up to a cap, the remover gate) are `region::binding`.
//! Each module uses only those listed above it.

pub mod apply;
pub mod binding;
pub mod catalog;
pub mod fill;
pub mod prescreen;
pub mod rebuild;
pub mod shared;
pub mod trigger;

use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::sql::named::errors::fail;

/// From `_PG_init`: when preloaded, the settings and the shared state.
pub fn init() {
    // SAFETY: a flag of the process loading the library.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        shared::init();
    }
    prescreen::init();
    rebuild::init();
    trigger::init();
    // SAFETY: set once, while the library loads, before any SQL runs.
    unsafe { crate::sql::named::errors::BOUND_RESERVED = Some(reserved) };
}

/// Whether filter `name` is bound to a table here (so that changes by name
/// are refused), unless `cf_bound_reset` is dropping or making it again.
fn reserved(name: &str) -> bool {
    // SAFETY: backend-local.
    if unsafe { (*std::ptr::addr_of!(binding::REMAKING)).as_deref() } == Some(name) {
        return false;
    }
    catalog::row(name).is_some()
}

/// The same, for a pre-screen's call at run time (also in a parallel
/// worker, which may not read the catalog): the table and column the
/// binding's shared slot records (written from the catalog by its triggers
/// and fills); false while it records none.
/// Outside parallel mode, a slot that records nothing yet (after a restart,
/// before the table's first write) is filled from the catalog.
fn may_read_slot(name: &str) -> bool {
    let Some(a) = shared::area_if_loaded() else { return false };
    let db = crate::sql::named::call::current_db();
    let known = a.find(db, name).and_then(|i| a.slot(i).table());
    let (tab, attnum) = match known {
        Some((tab, attnum)) => (pg_sys::Oid::from(tab), attnum),
        // SAFETY: a read of this process's state.
        None if unsafe { !pg_sys::IsInParallelMode() } => {
            let Some((tab, col)) = catalog::binding(name) else { return false };
            let attnum = catalog::column_number(tab, &col);
            // A slot only for a filter there is, within its owner's cap.
            if let Some(t) = crate::sql::named::call::BoundTarget::find(name) {
                let cap = shared::role_cap();
                if let Ok((i, _)) = shared::with_lock(|a, lk| a.slot_for_owner(lk, db, name, t.owner(), cap)) {
                    a.slot(i).set_table(tab.to_u32(), attnum);
                }
            }
            (tab, attnum)
        }
        None => return false,
    };
    catalog::may_read(tab, attnum)
}

/// A call site of `cf_bound_contains`: whether the role may read the bound
/// column (checked once per role), and the filter it probes.
#[repr(C)]
struct BoundCall {
    checked_for: pg_sys::Oid,
    allowed: bool,
    /// Whether this call site looked once whether the filter needs a
    /// rebuild (and asked for one if so).
    looked: bool,
    call: crate::sql::named::call::NamedCall,
}

/// Text argument `n` of a strict function.
///
/// # Safety
/// Argument `n` of `fcinfo` is a non-null text datum.
unsafe fn text(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> String {
    // SAFETY: as documented.
    unsafe {
        let d = (*fcinfo).args.as_slice(n + 1)[n].value;
        let t = pg_sys::text_to_cstring(d.cast_mut_ptr());
        let s = std::ffi::CStr::from_ptr(t).to_string_lossy().into_owned();
        pg_sys::pfree(t as *mut std::ffi::c_void);
        s
    }
}

/// Refuses the call unless the current role owns table `relid` (42501).
fn require_owner(relid: pg_sys::Oid) {
    // SAFETY: catalog lookups of an existing relation.
    unsafe {
        if !pg_sys::pg_class_ownercheck(relid, pg_sys::GetUserId()) {
            let name = std::ffi::CStr::from_ptr(pg_sys::get_rel_name(relid)).to_string_lossy().into_owned();
            fail(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("must be owner of table {name}"), None);
        }
    }
}

v1_functions! {
    /// `cf_bound_register(name text, tab regclass, col text, fpp float8,
    /// durable boolean) -> void`: records a binding (cf_bind calls it), for a
    /// caller that owns the table and the named filter `name`.
    fn cf_bound_register(fcinfo) {
        // SAFETY: strict; text, regclass, text, float8, boolean.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let args = (*fcinfo).args.as_slice(5);
            let relid = pg_sys::Oid::from(args[1].value.value() as u32);
            let col = text(fcinfo, 2);
            let fpp = f64::from_bits(args[3].value.value() as u64);
            let durable = args[4].value.value() != 0;
            require_owner(relid);
            let t = binding::target_of(&name);
            if t.owner() != pg_sys::GetUserId().to_u32() {
                fail(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("must be owner of cuckoo filter \"{name}\" to bind it"),
                    None,
                );
            }
            let q = format!(
                "INSERT INTO {} (name, tab, col, attnum, fpp, durable, bound_by) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                catalog::bindings_table()
            );
            let me = pg_sys::GetUserId();
            let attnum = catalog::column_number(relid, &col);
            catalog::as_catalog_owner(|| {
                pgrx::spi::Spi::run_with_args(
                    &q,
                    &[
                        name.as_str().into(),
                        relid.into(),
                        col.as_str().into(),
                        attnum.into(),
                        fpp.into(),
                        durable.into(),
                        me.into(),
                    ],
                )
            })
            .unwrap_or_else(|e| {
                fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not record the binding: {e}"), None)
            });
            pg_sys::Datum::from(0usize)
        }
    }

    /// `cf_bound_unregister(name text) -> void`: removes a binding's row
    /// (cf_unbind calls it), for the owner of its table.
    fn cf_bound_unregister(fcinfo) {
        // SAFETY: strict; text.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let Some((tab, _)) = catalog::binding(&name) else {
                fail(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                    format!("cuckoo filter \"{name}\" is not bound to a table"),
                    None,
                )
            };
            require_owner(tab);
            let q = format!("DELETE FROM {} WHERE name = $1", catalog::bindings_table());
            catalog::as_catalog_owner(|| pgrx::spi::Spi::run_with_args(&q, &[name.as_str().into()])).unwrap_or_else(|e| {
                fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not remove the binding: {e}"), None)
            });
            pg_sys::Datum::from(0usize)
        }
    }

    /// `cf_bound_fill(name text, tab regclass, col text) -> bigint`: fills
    /// binding `name`'s filter from its table (cf_bind and cf_rebuild call
    /// it, holding a lock that keeps DDL and other fills out); the row
    /// versions whose keys it holds.
    fn cf_bound_fill(fcinfo) {
        // SAFETY: strict; text, regclass, text.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let relid = pg_sys::Oid::from((*fcinfo).args.as_slice(3)[1].value.value() as u32);
            let col = text(fcinfo, 2);
            require_owner(relid);
            // The bound table itself: a fill from one of its partitions
            // would leave the others' keys out.
            if catalog::require_bound(&name, relid, &col) != relid {
                fail(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("cuckoo filter \"{name}\" is not bound to this table but to a table it is a partition of"),
                    None,
                );
            }
            let rows = fill::fill(&name, relid, &col);
            // The column's number on this server (a restored row's may be
            // another server's), for following renames; what identifies the
            // contents just made (probes trust them once this commits); an
            // enum column's labels (a label renamed later changes its keys).
            let q = format!(
                "UPDATE {} SET attnum = $2, enum_labels = (SELECT pg_catalog.array_agg(e.oid::text || ':' || e.enumlabel ORDER BY e.oid) FROM pg_catalog.pg_enum e WHERE e.enumtypid = $3) WHERE name = $1",
                catalog::bindings_table()
            );
            let attnum = catalog::column_number(relid, &col);
            let base = pg_sys::getBaseType(pg_sys::get_atttype(relid, attnum));
            catalog::as_catalog_owner(|| {
                pgrx::spi::Spi::run_with_args(&q, &[name.as_str().into(), attnum.into(), base.into()])
            })
            .unwrap_or_else(|e| {
                fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not update the binding: {e}"), None)
            });
            pg_sys::Datum::from(rows)
        }
    }

    /// `cf_bound_reset(name text, capacity bigint, fpp float8, durable
    /// boolean, typ regtype) -> void`: drops binding `name`'s filter, and with
    /// a capacity (not NULL) makes it again, empty, with those parameters,
    /// for a fill to follow (cf_rebuild); without, the binding waits for
    /// cf_rebuild (the DDL event trigger, when a change made its keys wrong).
    /// Its slot is freed first: deletes queued for the old contents go, and
    /// probes treat every key as present until a fill commits. For the owner
    /// of the binding's table (a superuser if it was dropped).
    fn cf_bound_reset(fcinfo) {
        // SAFETY: name is checked not NULL; the other arguments are read
        // only when capacity is not NULL, and then checked too.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let args = (*fcinfo).args.as_slice(5);
            if args[0].isnull {
                fail(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "cf_bound_reset(): name must not be NULL".into(), None);
            }
            let name = text(fcinfo, 0);
            let Some(row) = catalog::row(&name) else {
                fail(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                    format!("cuckoo filter \"{name}\" is not bound to a table"),
                    None,
                )
            };
            if pg_sys::get_rel_name(row.tab).is_null() {
                if !pg_sys::superuser() {
                    fail(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, "must be superuser".into(), None);
                }
            } else {
                require_owner(row.tab);
            }
            let remake = (!args[1].isnull).then(|| {
                if args[2].isnull || args[3].isnull || args[4].isnull {
                    fail(
                        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                        "cf_bound_reset(): fpp, durable and typ must not be NULL with a capacity".into(),
                        None,
                    );
                }
                (
                    args[1].value.value() as i64,
                    f64::from_bits(args[2].value.value() as u64),
                    args[3].value.value() != 0,
                    pg_sys::Oid::from(args[4].value.value() as u32),
                )
            });
            trigger::register_callbacks();
            fill::remake(&name, remake);
            pg_sys::Datum::from(0usize)
        }
    }

    /// `cf_bound_altered(tab oid, attnum int2) -> boolean`: whether column
    /// `attnum` of `tab` was changed by this transaction (its `pg_attribute`
    /// row is this transaction's, as after `ALTER COLUMN ... TYPE`): the
    /// rewrite event trigger asks, since a rewrite for another column keeps
    /// the bound column's values.
    fn cf_bound_altered(fcinfo) {
        // SAFETY: strict; oid and int2; a syscache lookup whose tuple is
        // released here.
        unsafe {
            let args = (*fcinfo).args.as_slice(2);
            let tab = pg_sys::Oid::from(args[0].value.value() as u32);
            let attnum = args[1].value.value() as i16;
            let tup = pg_sys::SearchSysCache2(
                pg_sys::SysCacheIdentifier::ATTNUM as i32,
                pg_sys::Datum::from(tab),
                pg_sys::Datum::from(attnum),
            );
            let mine = !tup.is_null() && {
                let h = (*tup).t_data;
                let xmin = if (*h).t_infomask as u32 & pg_sys::HEAP_XMIN_FROZEN == pg_sys::HEAP_XMIN_FROZEN {
                    pg_sys::FrozenTransactionId
                } else {
                    (*h).t_choice.t_heap.t_xmin
                };
                pg_sys::TransactionIdIsCurrentTransactionId(xmin)
            };
            if !tup.is_null() {
                pg_sys::ReleaseSysCache(tup);
            }
            pg_sys::Datum::from(mine)
        }
    }

    /// `cf_bound_ready(name text) -> boolean`: whether binding `name`'s
    /// filter is present and holds what a committed fill made (else a probe
    /// answers "maybe" for every key and `cuckoo_filters` says it needs a
    /// rebuild).
    fn cf_bound_ready(fcinfo) {
        // SAFETY: strict; text.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let ready = shared::area_if_loaded().is_some() && catalog::row(&name).is_some() && binding::trusted(&name);
            pg_sys::Datum::from(ready)
        }
    }

    /// `cf_bound_release(name text) -> void`: frees binding `name`'s shared
    /// slot and its queued deletes (cf_unbind, as the binding's table owner).
    fn cf_bound_release(fcinfo) {
        // SAFETY: strict; text.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            if let Some((tab, _)) = catalog::binding(&name) {
                // A binding whose table was dropped: superusers (the DDL
                // event trigger) only.
                if pg_sys::get_rel_name(tab).is_null() {
                    if !pg_sys::superuser() {
                        fail(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, "must be superuser".into(), None);
                    }
                } else {
                    require_owner(tab);
                }
            } else if let Some(owner) = shared::with_lock(|a, _| {
                a.find(crate::sql::named::call::current_db(), &name).map(|i| a.slot(i).owner())
            }) {
                // A slot with no binding this transaction can see: one that
                // another transaction's cf_bind is making (its catalog row
                // not committed yet). Only its filter's owner (a member of
                // that role) or a superuser frees it.
                let me = pg_sys::GetUserId();
                if !pg_sys::superuser() && (owner == 0 || !pg_sys::has_privs_of_role(me, pg_sys::Oid::from(owner))) {
                    fail(
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                        format!("must be a member of the role that owns cuckoo filter \"{name}\""),
                        None,
                    );
                }
            }
            binding::forget(&name);
            let db = crate::sql::named::call::current_db();
            shared::with_lock(|a, lk| {
                if let Some(i) = a.find(db, &name) {
                    a.release(lk, i);
                }
            });
            pg_sys::Datum::from(0usize)
        }
    }

    /// `cf_bound_attached(command pg_ddl_command) -> oid[]`: the tables an
    /// `ALTER TABLE` command (from `pg_event_trigger_ddl_commands()`)
    /// attached as partitions. The command records no address for them: each
    /// is the partition of the altered table with the name (and schema, if
    /// given) the command named, attached by this transaction. For the DDL
    /// event trigger (the extension's owner's).
    fn cf_bound_attached(fcinfo) {
        // SAFETY: strict; a pg_ddl_command is a pointer to the collected
        // command, which only pg_event_trigger_ddl_commands() makes (the
        // type has no input function); its subcommands are read in place.
        unsafe {
            let cmd = (*fcinfo).args.as_slice(1)[0].value.cast_mut_ptr::<pg_sys::CollectedCommand>();
            let mut named: Vec<(String, Option<String>)> = Vec::new();
            let mut parent = pg_sys::InvalidOid;
            if !cmd.is_null() && (*cmd).type_ == pg_sys::CollectedCommandType::SCT_AlterTable {
                parent = (*cmd).d.alterTable.objectId;
                let subs = (*cmd).d.alterTable.subcmds;
                let n = if subs.is_null() { 0 } else { (*subs).length as usize };
                for i in 0..n {
                    let sub = (*(*subs).elements.add(i)).ptr_value as *mut pg_sys::CollectedATSubcmd;
                    let node = (*sub).parsetree;
                    if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_AlterTableCmd {
                        continue;
                    }
                    let at = node as *mut pg_sys::AlterTableCmd;
                    if (*at).subtype != pg_sys::AlterTableType::AT_AttachPartition || (*at).def.is_null() {
                        continue;
                    }
                    let pc = (*at).def as *mut pg_sys::PartitionCmd;
                    if (*pc).type_ != pg_sys::NodeTag::T_PartitionCmd || (*pc).name.is_null() {
                        continue;
                    }
                    let rv = (*pc).name;
                    let text = |p: *mut std::ffi::c_char| {
                        (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
                    };
                    if let Some(rel) = text((*rv).relname) {
                        named.push((rel, text((*rv).schemaname)));
                    }
                }
            }
            let mut out: Vec<pg_sys::Oid> = Vec::new();
            for (rel, nsp) in named {
                let rows = catalog::with_safe_path(|| {
                    pgrx::spi::Spi::connect(|c| {
                        let rows = c.select(
                            "SELECT i.inhrelid, i.xmin::text::bigint FROM pg_catalog.pg_inherits i \
                             JOIN pg_catalog.pg_class r ON r.oid = i.inhrelid \
                             JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace \
                             WHERE i.inhparent = $1 AND r.relname = $2 AND ($3::text IS NULL OR n.nspname = $3)",
                            None,
                            &[parent.into(), rel.as_str().into(), nsp.clone().into()],
                        )?;
                        let mut v = Vec::new();
                        for r in rows {
                            if let (Some(o), Some(x)) = (r.get::<pg_sys::Oid>(1)?, r.get::<i64>(2)?) {
                                v.push((o, x));
                            }
                        }
                        Ok::<_, pgrx::spi::Error>(v)
                    })
                })
                .unwrap_or_else(|e| {
                    fail(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("cuckoo: could not find an attached partition: {e}"), None)
                });
                for (o, x) in rows {
                    if pg_sys::TransactionIdIsCurrentTransactionId(pg_sys::TransactionId::from(x as u32)) {
                        out.push(o);
                    }
                }
            }
            match out.into_datum() {
                Some(d) => d,
                None => pg_sys::Datum::from(0usize),
            }
        }
    }

    /// `cf_bound_fill_attached(name text, part regclass) -> bigint`: adds
    /// the keys of the rows of `part`, just attached as a partition of the
    /// partitioned table binding `name` follows (`fill::fill_attached`).
    /// For the DDL event trigger (the extension's owner's).
    fn cf_bound_fill_attached(fcinfo) {
        // SAFETY: strict; text, regclass.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let part = pg_sys::Oid::from((*fcinfo).args.as_slice(2)[1].value.value() as u32);
            let Some((tab, col)) = catalog::binding(&name) else {
                fail(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                    format!("cuckoo filter \"{name}\" is not bound to a table"),
                    None,
                )
            };
            if !catalog::is_partition_of(part, tab) {
                fail(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("relation {} is not a partition of the table cuckoo filter \"{name}\" is bound to", part.to_u32()),
                    None,
                );
            }
            // (Its keys are flushed before the commit like a statement's.)
            trigger::register_callbacks();
            pg_sys::Datum::from(fill::fill_attached(&name, part, &col))
        }
    }

    /// `cf_bound_present(name text) -> boolean`: whether bound filter `name`
    /// is in shared memory and usable (for the `cuckoo_filters` view; the
    /// names of bindings are public, as their rows are).
    fn cf_bound_present(fcinfo) {
        // SAFETY: strict; text.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let bound = catalog::binding(&name).is_some();
            let present = bound
                && shared::area_if_loaded().is_some()
                && crate::sql::named::call::BoundTarget::find(&name).is_some();
            pg_sys::Datum::from(present)
        }
    }

    /// `cf_bound_key_ok(name text, typ oid) -> boolean`: whether keys of type
    /// `typ` hash as binding `name`'s filter records its keys (true when the
    /// filter is missing: it is made again from the column when rebuilt).
    fn cf_bound_key_ok(fcinfo) {
        // SAFETY: strict; text, oid.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let typ = pg_sys::Oid::from((*fcinfo).args.as_slice(2)[1].value.value() as u32);
            // Only a filter this session trusts is judged by its key type:
            // one a rebuild still running made, or one a rebuild that did
            // not commit left, is not yet, or not, the binding's (a rebuild
            // makes it again for the column's type).
            let ok = match shared::area_if_loaded().and_then(|_| crate::sql::named::call::BoundTarget::find(&name)) {
                Some(t) => crate::sql::keys::key_type_of(typ) == t.key || !binding::trusted(&name),
                None => true,
            };
            pg_sys::Datum::from(ok)
        }
    }

    /// `cf_bound_contains(name text, key anynonarray) -> boolean`: the
    /// pre-screen the planner adds (`prescreen`): false only if no row of
    /// the bound table that any snapshot can see has the key. True for a
    /// role that may not read the bound column, and while the filter is
    /// missing or needs a rebuild.
    fn cf_bound_contains(fcinfo) {
        // SAFETY: strict; text and a key; fn_extra is this call site's
        // BoundCall (all-zero is its unset state), in fn_mcxt.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let flinfo = (*fcinfo).flinfo;
            if (*flinfo).fn_extra.is_null() {
                (*flinfo).fn_extra =
                    pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, std::mem::size_of::<BoundCall>());
            }
            let bc = &mut *((*flinfo).fn_extra as *mut BoundCall);
            let me = pg_sys::GetUserId();
            if bc.checked_for != me {
                bc.allowed = may_read_slot(&text(fcinfo, 0));
                bc.checked_for = me;
            }
            // Keys this backend buffered (rows its statement wrote that a
            // PL/pgSQL expression evaluated without a query now probes).
            trigger::flush_buffered(true);
            if !bc.looked && !pg_sys::IsInParallelMode() {
                bc.looked = true;
                let name = text(fcinfo, 0);
                if catalog::row(&name).is_some() && !binding::trusted(&name) {
                    rebuild::ask(&name);
                }
            }
            let yes = !bc.allowed || bc.call.contains_bound(fcinfo, &binding::filter_ready);
            pg_sys::Datum::from(yes)
        }
    }

    /// `cf_bound_changed()`: the statement trigger of `cuckoo_bindings`: every
    /// backend reads the bindings again for its plans.
    fn cf_bound_changed(fcinfo) {
        // SAFETY: called as a trigger; the relation is the catalog.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let ctx = (*fcinfo).context;
            if !ctx.is_null() && (*ctx).type_ == pg_sys::NodeTag::T_TriggerData {
                let td = ctx as *mut pg_sys::TriggerData;
                pg_sys::CacheInvalidateRelcacheByRelid((*(*td).tg_relation).rd_id);
            }
            pg_sys::Datum::from(0usize)
        }
    }

    /// `cf_bound_ddl_quiet(quiet boolean) -> boolean`: whether the DDL event
    /// trigger is changing a binding's triggers itself (set by it around the
    /// change, so that it does not judge the binding in the middle of it);
    /// NULL asks. Not for PUBLIC (sql/src/bound.sql).
    fn cf_bound_ddl_quiet(fcinfo) {
        // SAFETY: a boolean argument or NULL; a backend-local flag, cleared
        // when the transaction ends (also by an error).
        unsafe {
            let arg = (*fcinfo).args.as_slice(1)[0];
            if !arg.isnull {
                trigger::register_callbacks();
                trigger::DDL_QUIET = arg.value.value() != 0;
            }
            pg_sys::Datum::from(trigger::DDL_QUIET)
        }
    }

    /// `cf_apply_deletes(name text) -> bigint`: applies binding `name`'s
    /// queued deletes that are safe now (their transactions committed and
    /// no snapshot can see their rows); the keys removed.
    fn cf_apply_deletes(fcinfo) {
        // SAFETY: strict; text.
        unsafe {
            crate::sql::bound::catalog::note_function((*(*fcinfo).flinfo).fn_oid);
            let name = text(fcinfo, 0);
            let Some((tab, col)) = catalog::binding(&name) else {
                fail(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                    format!("cuckoo filter \"{name}\" is not bound to a table"),
                    None,
                )
            };
            // Only a role that may read the bound column (or owns the table)
            // locks it for this.
            if !pg_sys::pg_class_ownercheck(tab, pg_sys::GetUserId())
                && !catalog::may_read(tab, catalog::column_number(tab, &col))
            {
                fail(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("permission denied to apply the deletes of cuckoo filter \"{name}\""),
                    Some("Only a role that may read the bound column, or the table's owner, may apply them."),
                );
            }
            let rel = pg_sys::table_open(tab, pg_sys::AccessShareLock as i32);
            let n = binding::with_loaded(&name, &col, |b| apply::maybe_apply(b, Some(rel), true)).unwrap_or(0);
            pg_sys::table_close(rel, pg_sys::AccessShareLock as i32);
            pg_sys::Datum::from(n as i64)
        }
    }
}

/// `cuckoo_bound_rows()`: the counters of this database's bindings in use
/// (since the server started).
#[pg_extern(volatile, parallel_safe, sql = false)]
#[allow(clippy::type_complexity)]
fn cuckoo_bound_rows() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(pending_deletes, i64),
        name!(dropped_deletes, i64),
        name!(applied_deletes, i64),
        name!(refused_deletes, i64),
        name!(saturated_versions, i64),
    ),
> {
    if shared::area_if_loaded().is_none() {
        return TableIterator::new(Vec::new());
    }
    let db = crate::sql::named::call::current_db();
    // SAFETY: a plain read of this process's state.
    let recovery = unsafe { pg_sys::RecoveryInProgress() };
    // Durable filters' accounts of their queued deletes (read under the
    // queue's lock, with the slots' counts of what is queued here).
    let filters = crate::sql::named::call::durable_filters();
    let (accounts, claimed) = shared::with_lock(|a, _| {
        let accounts: Vec<_> =
            filters.iter().map(|(n, i, g)| (n, *i, *g, crate::sql::named::call::queue_counts_at(*i))).collect();
        let claimed: Vec<_> = a
            .claimed()
            .into_iter()
            .filter(|(_, d, _)| *d == db)
            .map(|(i, _, n)| {
                let s = a.slot(i);
                let g = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
                (n, [g(&s.pending), g(&s.dropped), g(&s.applied), g(&s.refused), g(&s.saturated)])
            })
            .collect();
        (accounts, claimed)
    });
    let mut accounts: std::collections::HashMap<String, crate::region::wal::QueueCounts> = accounts
        .into_iter()
        .filter(|(_, i, g, q)| !q.is_zero() && crate::sql::named::call::still_gen(*i, *g))
        .map(|(n, _, _, q)| (n.clone(), q))
        .collect();
    let mut rows: Vec<_> = claimed
        .into_iter()
        .map(|(n, [pending, dropped, applied, refused, saturated])| {
            let (pending, dropped, refused) = match accounts.remove(&n) {
                Some(q) => account_row(&q, pending, recovery),
                None => (pending, dropped, refused),
            };
            (n, pending as i64, dropped as i64, applied as i64, refused as i64, saturated as i64)
        })
        .collect();
    // A durable binding no process has used since the server started.
    for (n, q) in accounts {
        let (pending, dropped, refused) = account_row(&q, 0, recovery);
        rows.push((n, pending as i64, dropped as i64, 0, refused as i64, 0));
    }
    TableIterator::new(rows)
}

/// A durable bound filter's pending, dropped and refused deletes, from its
/// account `q` and the deletes the queue holds for it on this server
/// (`here`). The queue is in shared memory: what the account says is queued
/// beyond what is here was lost by a restart or crash (or a promotion), and
/// those keys stay in the filter, counted as dropped. A standby holds no
/// queue; it shows what its primary's account says is pending.
fn account_row(q: &crate::region::wal::QueueCounts, here: u64, recovery: bool) -> (u64, u64, u64) {
    if recovery {
        (q.outstanding(), q.dropped, q.refused)
    } else {
        (here, q.dropped.saturating_add(q.outstanding().saturating_sub(here)), q.refused)
    }
}
