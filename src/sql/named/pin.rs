//! One publish per query: a distributed query's pieces run on several nodes,
//! at different times, and a `cf_publish_cluster` may commit between two of
//! them. Each piece checks that its node's copy is the one the cluster's
//! record names (`citus`), but the record changes at the commit: a piece run
//! before it answered from the old publish, one run after from the new.
//!
//! So the node that plans the query pins its by-name lookups to the record as
//! the plan sees it: the planner hook (`crate::sql::citus::hook`), before Citus
//! plans, rewrites the name argument of each `cf_contains(name, …)`,
//! `cf_count(name, key)` and `cf_snapshot(name)` call into
//! `cf_cluster_pin(name, latest)`, where `latest` is the latest publish the
//! cluster records (versions only grow, in commit order). Citus sends the
//! pieces the rewritten call; `cf_cluster_pin` returns the name unchanged,
//! and the by-name function reads `latest` from its own call expression. A
//! piece whose node records a later publish of the name fails with 40001
//! (retry): the query is planned again, and pinned again.
//!
//! A plan kept for reuse (a prepared statement, a PL/pgSQL statement) lists
//! the record's table among the relations it depends on, and a publish's
//! record invalidates that table on every node in the publishing transaction
//! (`cluster::cf_cluster_record`), so a kept plan is made again, with a new
//! pin, once a publish commits.
//!
//! Calls the planner does not see in the query are held to its pin another
//! way: a call inside a function the query calls on the workers (a task
//! plans the function's queries itself), one in a row-level security policy
//! (Citus sends the workers the query without it; each applies its own). A
//! query that may make such calls carries its pin as a qual without columns,
//! `cf_cluster_carry(latest)`, which a task evaluates once before it reads a
//! row; a lookup without a pin of its own is held to the pin of the
//! statement it runs in (`citus::check_task`). A pin written in the query is
//! taken as written.
//! They keep the checks of `citus`. A query planned by the transaction that
//! publishes carries that publish's version instead (`citus::pin_for_query`).

use std::ffi::CStr;

use pgrx::pg_sys;

use super::citus;
use crate::sql::citus::{citus_table, qualified};

/// From the planner hook: pins every by-name lookup of a query that reads or
/// writes a Citus table (in subqueries and CTEs too) not yet pinned, and
/// returns the OID of the record's table if it pinned any (the plan then
/// depends on it), else InvalidOid. Nothing is pinned in a piece of a
/// distributed query (its calls came pinned) or in a database without
/// Citus.
///
/// # Safety
/// `parse` is a query tree handed to the planner, which may change it.
#[pgrx::pg_guard]
pub(crate) unsafe extern "C-unwind" fn pin_query(parse: *mut pg_sys::Query) -> pg_sys::Oid {
    // SAFETY: as documented; node tags are checked before each cast.
    unsafe {
        if citus::in_task() {
            return pg_sys::InvalidOid;
        }
        let mut found: Vec<*mut pg_sys::FuncExpr> = Vec::new();
        pg_sys::query_tree_walker(parse, Some(collect), &mut found as *mut _ as *mut std::ffi::c_void, 0);
        // (Queries of local tables only run here, under one snapshot.)
        if !reads_citus_table(parse) {
            return pg_sys::InvalidOid;
        }
        let mut ours = None;
        let mut calls = Vec::new();
        for f in found {
            if let Some(pin_fn) = lookup_to_pin(f, &mut ours) {
                calls.push((f, pin_fn));
            }
        }
        let carry = (*parse).commandType == pg_sys::CmdType::CMD_SELECT && may_look_up_unseen(parse);
        // (A query with no lookup in sight carries a pin only once something
        // was published to the cluster: the record is then Citus's table.)
        if calls.is_empty() && !(carry && record_distributed()) {
            return pg_sys::InvalidOid;
        }
        let Some((latest, record)) = citus::pin_for_query() else {
            return pg_sys::InvalidOid;
        };
        if carry && latest != 0 {
            if let Some(carry_fn) = carrier(record) {
                let c = pg_sys::makeConst(
                    pg_sys::INT8OID,
                    -1,
                    pg_sys::InvalidOid,
                    8,
                    pg_sys::Datum::from(latest),
                    false,
                    true,
                );
                let call = pg_sys::makeFuncExpr(
                    carry_fn,
                    pg_sys::BOOLOID,
                    pg_sys::lappend(std::ptr::null_mut(), c as *mut std::ffi::c_void),
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                );
                // First among the quals: a one-time filter keeps their
                // written order, and a user's function there may look up.
                let tree = (*parse).jointree;
                (*tree).quals = pg_sys::make_and_qual(call as *mut pg_sys::Node, (*tree).quals);
            }
        } else if calls.is_empty() {
            // Nothing published to the cluster yet: nothing to carry.
            return pg_sys::InvalidOid;
        }
        for (f, pin_fn) in calls {
            let slot = name_slot(f).expect("collected with a name");
            let name = *slot;
            let collation = pg_sys::exprCollation(name);
            let latest =
                pg_sys::makeConst(pg_sys::INT8OID, -1, pg_sys::InvalidOid, 8, pg_sys::Datum::from(latest), false, true);
            let args = pg_sys::lappend(
                pg_sys::lappend(std::ptr::null_mut(), name as *mut std::ffi::c_void),
                latest as *mut std::ffi::c_void,
            );
            let call = pg_sys::makeFuncExpr(
                pin_fn,
                pg_sys::TEXTOID,
                args,
                collation,
                collation,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            );
            (*call).location = (*f).location;
            *slot = call as *mut pg_sys::Node;
        }
        record
    }
}

/// Whether the query's pieces may look a filter up by name out of the
/// planner's sight: it calls a function that no extension made (whose body
/// may), or reads a table under row-level security (whose policies each
/// worker applies itself). Such a query carries its pin
/// (`cf_cluster_carry(latest)`, a qual without columns, which each piece
/// evaluates once before it reads a row) unless it already does.
///
/// # Safety
/// `parse` is a query tree handed to the planner.
unsafe fn may_look_up_unseen(parse: *mut pg_sys::Query) -> bool {
    // SAFETY: as documented; the walker reads nodes and the catalog.
    unsafe {
        let mut found = Unseen::default();
        pg_sys::query_tree_walker(
            parse,
            Some(unseen),
            &mut found as *mut Unseen as *mut std::ffi::c_void,
            pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
        );
        found.risky && !found.carried
    }
}

#[derive(Default)]
struct Unseen {
    /// A user's function, or a table under row-level security.
    risky: bool,
    /// `cf_cluster_carry` is already in the query (a query Citus planned
    /// again, or sent to this node).
    carried: bool,
}

/// Walker of `may_look_up_unseen`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn unseen(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> bool {
    // SAFETY: the walkers pass valid nodes (or null) and our context; node
    // tags are checked before each cast; catalog lookups may raise errors,
    // which the guard reports.
    unsafe {
        if node.is_null() {
            return false;
        }
        let found = &mut *(cx as *mut Unseen);
        let function = match (*node).type_ {
            pg_sys::NodeTag::T_FuncExpr => (*(node as *mut pg_sys::FuncExpr)).funcid,
            pg_sys::NodeTag::T_OpExpr => {
                let op = node as *mut pg_sys::OpExpr;
                if (*op).opfuncid == pg_sys::InvalidOid {
                    pg_sys::get_opcode((*op).opno)
                } else {
                    (*op).opfuncid
                }
            }
            pg_sys::NodeTag::T_Aggref => (*(node as *mut pg_sys::Aggref)).aggfnoid,
            pg_sys::NodeTag::T_WindowFunc => (*(node as *mut pg_sys::WindowFunc)).winfnoid,
            pg_sys::NodeTag::T_RangeTblEntry => {
                if !(*(node as *mut pg_sys::RangeTblEntry)).securityQuals.is_null() {
                    found.risky = true;
                }
                return false;
            }
            pg_sys::NodeTag::T_Query => {
                return pg_sys::query_tree_walker(
                    node as *mut pg_sys::Query,
                    Some(unseen),
                    cx,
                    pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
                )
            }
            _ => pg_sys::InvalidOid,
        };
        if function.to_u32() >= pg_sys::FirstNormalObjectId {
            let name = pg_sys::get_func_name(function);
            if !name.is_null() && CStr::from_ptr(name) == c"cf_cluster_carry" {
                found.carried = true;
            } else if !found.risky
                && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, function) == pg_sys::InvalidOid
            {
                found.risky = true;
            }
        }
        pg_sys::expression_tree_walker(node, Some(unseen), cx)
    }
}

/// Whether the cluster's record is a table of Citus's (the first
/// `cf_publish_cluster` makes it one), asked of Citus's metadata cache.
fn record_distributed() -> bool {
    citus::ext_table(c"cuckoo_cluster_copies").is_some_and(|(_, record)| citus_table(record))
}

/// `cf_cluster_carry(bigint)` of the extension whose record's table is
/// `record` (None: an extension not yet updated to have it).
unsafe fn carrier(record: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: catalog lookups of an existing table's schema.
    unsafe {
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(record));
        if nsp.is_null() {
            return None;
        }
        let mut types = [pg_sys::INT8OID];
        let f = pg_sys::LookupFuncName(qualified(nsp, c"cf_cluster_carry"), 1, types.as_mut_ptr(), true);
        (f != pg_sys::InvalidOid).then_some(f)
    }
}

/// Whether the query reads or writes a table of Citus's (in subqueries and
/// CTEs too): only then may its lookups run in pieces on several nodes; a
/// query of local tables alone runs here, under one snapshot. Asked of
/// Citus's own `IsCitusTable` (its metadata cache); a Citus without it
/// counts every table.
///
/// # Safety
/// `parse` is a query tree handed to the planner.
unsafe fn reads_citus_table(parse: *mut pg_sys::Query) -> bool {
    // SAFETY: as documented; the walker reads range table entries only.
    unsafe {
        pg_sys::query_tree_walker(
            parse,
            Some(citus_relation),
            std::ptr::null_mut(),
            pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
        )
    }
}

/// Walker of `reads_citus_table`: true at a relation Citus knows.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn citus_relation(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> bool {
    // SAFETY: the walkers pass valid nodes (or null); node tags are checked
    // before each cast. Citus's function may raise an error, which the FFI
    // boundary turns into a PostgreSQL error at the guard.
    unsafe {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_RangeTblEntry => {
                let rte = node as *mut pg_sys::RangeTblEntry;
                if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                    return citus_table((*rte).relid);
                }
                false
            }
            pg_sys::NodeTag::T_Query => pg_sys::query_tree_walker(
                node as *mut pg_sys::Query,
                Some(citus_relation),
                cx,
                pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
            ),
            _ => pg_sys::expression_tree_walker(node, Some(citus_relation), cx),
        }
    }
}

/// Where a call's argument for its first parameter (the filter's name) is,
/// as the parser leaves the call (the planner puts arguments in order later):
/// the first argument if it is given by position, else the one given by name
/// for the first parameter (inside its named-argument node).
///
/// # Safety
/// `f` is a live FuncExpr of a query not yet planned.
unsafe fn name_slot(f: *mut pg_sys::FuncExpr) -> Option<*mut *mut pg_sys::Node> {
    // SAFETY: as documented; node tags are checked before each cast.
    unsafe {
        let args = (*f).args;
        if args.is_null() {
            return None;
        }
        for i in 0..(*args).length as usize {
            let cell = (*args).elements.add(i);
            let a = (*cell).ptr_value as *mut pg_sys::Node;
            if a.is_null() {
                return None;
            }
            if (*a).type_ == pg_sys::NodeTag::T_NamedArgExpr {
                let named = a as *mut pg_sys::NamedArgExpr;
                if (*named).argnumber == 0 {
                    return Some(&raw mut (*named).arg as *mut *mut pg_sys::Node);
                }
            } else if i == 0 {
                return Some(&raw mut (*cell).ptr_value as *mut *mut pg_sys::Node);
            }
        }
        None
    }
}

/// Tree walker: gathers the calls of functions outside the system catalog
/// whose first parameter is given a text argument, in subqueries and CTEs
/// too. It reads node tags and types only; the catalog is read afterwards.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> bool {
    // SAFETY: the walkers pass valid nodes (or null) and our context.
    unsafe {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                if (*f).funcid.to_u32() >= pg_sys::FirstNormalObjectId
                    && name_slot(f).is_some_and(|slot| pg_sys::exprType(*slot) == pg_sys::TEXTOID)
                {
                    (*(cx as *mut Vec<*mut pg_sys::FuncExpr>)).push(f);
                }
            }
            pg_sys::NodeTag::T_Query => {
                return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(collect), cx, 0)
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(collect), cx)
    }
}

/// The by-name lookups a query may make of a cluster copy.
const LOOKUPS: [&CStr; 3] = [c"cf_contains", c"cf_count", c"cf_snapshot"];

/// For a call `f` of one of cuckoo's by-name lookups whose name is not yet
/// pinned: the OID of `cf_cluster_pin` (None: another call, a database
/// without citus, or an extension not yet updated to have it). `ours` caches
/// the extension's OID.
unsafe fn lookup_to_pin(f: *mut pg_sys::FuncExpr, ours: &mut Option<pg_sys::Oid>) -> Option<pg_sys::Oid> {
    // SAFETY: `f` is a live FuncExpr with a name argument (see `collect`);
    // catalog lookups may raise errors, which the guard reports.
    unsafe {
        let name = pg_sys::get_func_name((*f).funcid);
        if name.is_null() || !LOOKUPS.contains(&CStr::from_ptr(name)) {
            return None;
        }
        if is_pin_call(*name_slot(f)?, (*f).funcid).is_some() {
            return None;
        }
        // (InvalidOid in a database without citus: nothing to pin there.)
        let ext = *ours.get_or_insert_with(|| {
            if citus::citus_here() {
                pg_sys::get_extension_oid(c"cuckoo".as_ptr(), true)
            } else {
                pg_sys::InvalidOid
            }
        });
        if ext == pg_sys::InvalidOid || pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, (*f).funcid) != ext {
            return None;
        }
        let nsp = pg_sys::get_namespace_name(pg_sys::get_func_namespace((*f).funcid));
        if nsp.is_null() {
            return None;
        }
        let mut types = [pg_sys::TEXTOID, pg_sys::INT8OID];
        let pin_fn = pg_sys::LookupFuncName(qualified(nsp, c"cf_cluster_pin"), 2, types.as_mut_ptr(), true);
        (pin_fn != pg_sys::InvalidOid).then_some(pin_fn)
    }
}

/// If `arg` is a call `cf_cluster_pin(name, latest)` of the schema of
/// function `of`, with `latest` a constant: `latest`.
unsafe fn is_pin_call(arg: *mut pg_sys::Node, of: pg_sys::Oid) -> Option<i64> {
    // SAFETY: `arg` is a live node; node tags are checked before each cast.
    unsafe {
        if arg.is_null() || (*arg).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let p = arg as *mut pg_sys::FuncExpr;
        if (*p).args.is_null() || (*(*p).args).length != 2 {
            return None;
        }
        let name = pg_sys::get_func_name((*p).funcid);
        if name.is_null()
            || CStr::from_ptr(name) != c"cf_cluster_pin"
            || pg_sys::get_func_namespace((*p).funcid) != pg_sys::get_func_namespace(of)
        {
            return None;
        }
        let latest = (*(*(*p).args).elements.add(1)).ptr_value as *mut pg_sys::Node;
        if (*latest).type_ != pg_sys::NodeTag::T_Const {
            return None;
        }
        let c = latest as *mut pg_sys::Const;
        ((*c).consttype == pg_sys::INT8OID && !(*c).constisnull).then(|| (*c).constvalue.value() as i64)
    }
}

/// The pin of a by-name call (see the module's text), read from its call
/// expression: None if it was not pinned.
///
/// # Safety
/// `fcinfo` is a valid frame.
pub(super) unsafe fn pin_of(fcinfo: pg_sys::FunctionCallInfo) -> Option<i64> {
    // SAFETY: as documented; fn_expr is null or the call's expression tree.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null() || (*flinfo).fn_expr.is_null() || (*(*flinfo).fn_expr).type_ != pg_sys::NodeTag::T_FuncExpr
        {
            return None;
        }
        let f = (*flinfo).fn_expr as *mut pg_sys::FuncExpr;
        if (*f).args.is_null() || (*(*f).args).length < 1 {
            return None;
        }
        is_pin_call((*(*(*f).args).elements).ptr_value as *mut pg_sys::Node, (*flinfo).fn_oid)
    }
}

v1_functions! {
    /// `cf_cluster_pin(name text, latest bigint) -> text`: `name` (see the
    /// module's text; the by-name function reads `latest` from its call).
    fn cf_cluster_pin(fcinfo) {
        // SAFETY: strict; argument 0 is a text datum, returned as it is.
        unsafe { pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0) }
    }

    /// `cf_cluster_carry(latest bigint) -> boolean`: true; the statement
    /// that evaluates it carries pin `latest` (see `may_look_up_unseen`), to
    /// which the by-name lookups it makes without a pin of their own are
    /// held.
    fn cf_cluster_carry(fcinfo) {
        // SAFETY: strict; argument 0 is a bigint.
        let latest = unsafe { pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).value() as i64 };
        // Only a piece of a distributed query (one statement Citus sent)
        // takes it: in the backend that planned the query, the statement
        // may be a function or DO block whose later queries are not this
        // one's.
        if citus::in_task() {
            citus::note_statement_pin(latest);
        }
        pg_sys::Datum::from(true)
    }
}
