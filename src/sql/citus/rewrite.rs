//! `cf_sharded_agg` of keys of any type on Citus: a planner hook that rewrites
//! `cf_sharded_agg(key [, fpp [, capacity]])` resolved to the polymorphic
//! declaration into `cf_sharded_agg(cf_sharded_key(key [, fpp [, capacity]]))`.
//!
//! Citus runs an aggregate's transition function on its workers only when the
//! aggregate's declared argument types equal the arguments' types, which a
//! polymorphic (`anyelement`) declaration never does: such a call fails there
//! with "worker_partial_agg_sfunc could not confirm type correctness". The
//! aggregate over `cf_sharded_state` is declared exactly, and `cf_sharded_key`
//! is an ordinary function call, which the workers evaluate with its call
//! expression, so the key keeps its type (an enum its labels, a collation its
//! check). The result is the same filter, byte for byte.
//!
//! A call of the `text` declaration whose key the parser cast to `text`
//! implicitly (a `char(n)`, `name` or `citext` key) is rewritten the same
//! way, with the key as it was written: `cf_agg` hashes and records such a
//! key as its own type, and so does `cf_sharded_key`.
//!
//! Then every `cf_sharded_agg(...)` call whose key type is in sight becomes
//! `cf_sharded_typed(cf_sharded_agg(...), NULL::key_type)`: with no rows,
//! Citus's coordinator calls the final function inside an aggregate of its
//! own (coord_combine_agg), where the key's type is not in sight, and
//! `cf_sharded_typed` gives the empty filter the key type `cf_agg` records.
//!
//! The planner hook (`crate::sql::citus::hook`) runs this before Citus plans, only
//! when cuckoo is preloaded into a server that also preloads Citus, and it
//! only touches those aggregate calls; the first rewrite only calls without
//! ORDER BY or DISTINCT (which Citus does not push down anyway).

use std::ffi::CStr;

use pgrx::pg_sys;

use super::qualified;

/// Rewrites every call of the polymorphic `cf_sharded_agg` (and of its `text`
/// declaration with a key cast to `text`) in the query, then wraps every
/// `cf_sharded_agg` call in `cf_sharded_typed`.
#[pgrx::pg_guard]
pub(crate) unsafe extern "C-unwind" fn rewrite_query(parse: *mut pg_sys::Query) {
    // SAFETY: a query tree handed to the planner, which may change it.
    unsafe {
        let mut found: Vec<*mut pg_sys::Node> = Vec::new();
        pg_sys::query_tree_walker(parse, Some(collect), &mut found as *mut _ as *mut std::ffi::c_void, 0);
        let mut any = false;
        for n in found {
            if (*n).type_ == pg_sys::NodeTag::T_WindowFunc {
                window_as_written(n as *mut pg_sys::WindowFunc);
            } else if is_sharded_agg(n as *mut pg_sys::Aggref) {
                any = true;
                rewrite(n as *mut pg_sys::Aggref);
            }
        }
        if any {
            query_tree_mutator(parse, wrap, std::ptr::null_mut(), pg_sys::QTW_DONT_COPY_QUERY as i32);
        }
    }
}

/// Whether `a` is a call of an aggregate named `cf_sharded_agg`.
unsafe fn is_sharded_agg(a: *mut pg_sys::Aggref) -> bool {
    // SAFETY: `a` is a live Aggref; get_func_name returns a palloc'd name or null.
    unsafe {
        let name = pg_sys::get_func_name((*a).aggfnoid);
        !name.is_null() && CStr::from_ptr(name) == c"cf_sharded_agg"
    }
}

/// PostgreSQL 15's query_tree_mutator and expression_tree_mutator, whose
/// mutator is declared without its parameters (16 renames both `*_impl` and
/// declares them).
type Mutator = unsafe extern "C-unwind" fn(*mut pg_sys::Node, *mut std::ffi::c_void) -> *mut pg_sys::Node;

unsafe fn query_tree_mutator(
    q: *mut pg_sys::Query,
    m: Mutator,
    cx: *mut std::ffi::c_void,
    flags: i32,
) -> *mut pg_sys::Query {
    // SAFETY: the mutator is called with (node, context), as PostgreSQL
    // calls it; the declaration without parameters is C's old style.
    unsafe {
        pg_sys::query_tree_mutator(
            q,
            Some(std::mem::transmute::<Mutator, unsafe extern "C-unwind" fn() -> *mut pg_sys::Node>(m)),
            cx,
            flags,
        )
    }
}

unsafe fn expression_tree_mutator(n: *mut pg_sys::Node, m: Mutator, cx: *mut std::ffi::c_void) -> *mut pg_sys::Node {
    // SAFETY: as query_tree_mutator's.
    unsafe {
        pg_sys::expression_tree_mutator(
            n,
            Some(std::mem::transmute::<Mutator, unsafe extern "C-unwind" fn() -> *mut pg_sys::Node>(m)),
            cx,
        )
    }
}

/// Mutator: every `cf_sharded_agg` call whose key type is in sight, in
/// subqueries and CTEs too, becomes `cf_sharded_typed(call, NULL::key
/// type)`; a call already wrapped (a query Citus sent to a worker) is left
/// as it is.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn wrap(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> *mut pg_sys::Node {
    // SAFETY: the mutators pass valid nodes (or null); node tags are checked
    // before each cast; catalog lookups may raise errors, which the guard
    // reports.
    unsafe {
        if node.is_null() {
            return node;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_Query => {
                query_tree_mutator(node as *mut pg_sys::Query, wrap, cx, 0) as *mut pg_sys::Node
            }
            pg_sys::NodeTag::T_FuncExpr if is_typed_call(node as *mut pg_sys::FuncExpr) => node,
            pg_sys::NodeTag::T_Aggref if is_sharded_agg(node as *mut pg_sys::Aggref) => {
                let a = expression_tree_mutator(node, wrap, cx) as *mut pg_sys::Aggref;
                typed(a).unwrap_or(a as *mut pg_sys::Node)
            }
            _ => expression_tree_mutator(node, wrap, cx),
        }
    }
}

/// Whether `f` calls a function named `cf_sharded_typed`.
unsafe fn is_typed_call(f: *mut pg_sys::FuncExpr) -> bool {
    // SAFETY: `f` is a live FuncExpr; get_func_name returns a palloc'd name or null.
    unsafe {
        let name = pg_sys::get_func_name((*f).funcid);
        !name.is_null() && CStr::from_ptr(name) == c"cf_sharded_typed"
    }
}

/// `cf_sharded_typed(a, NULL::key type)` for a `cf_sharded_agg` call whose
/// key type is in sight (its key, or `cf_sharded_key`'s), if the extension
/// has that function (0.12.0).
unsafe fn typed(a: *mut pg_sys::Aggref) -> Option<*mut pg_sys::Node> {
    // SAFETY: `a` is a live Aggref; catalog lookups may raise errors.
    unsafe {
        if (*a).aggkind != b'n' as std::ffi::c_char || (*a).args.is_null() {
            return None;
        }
        let te = (*(*(*a).args).elements).ptr_value as *mut pg_sys::TargetEntry;
        // A domain's base type (a domain's NULL may be refused where Citus
        // sends the call to a worker; the key type is the base type's).
        let key = pg_sys::getBaseType(crate::sql::keys::written_key_type((*te).expr as *mut pg_sys::Node)?);
        let nsp = pg_sys::get_namespace_name(pg_sys::get_func_namespace((*a).aggfnoid));
        if nsp.is_null() {
            return None;
        }
        let mut types = [(*a).aggtype, pg_sys::ANYELEMENTOID];
        let f = pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_typed"), 2, types.as_mut_ptr(), true);
        if f == pg_sys::InvalidOid {
            return None;
        }
        let collation = pg_sys::get_typcollation(key);
        let null = pg_sys::makeNullConst(key, -1, collation);
        let args = pg_sys::lappend(
            pg_sys::lappend(std::ptr::null_mut(), a as *mut std::ffi::c_void),
            null as *mut std::ffi::c_void,
        );
        let call = pg_sys::makeFuncExpr(
            f,
            (*a).aggtype,
            args,
            pg_sys::InvalidOid,
            collation,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        );
        (*call).location = (*a).location;
        Some(call as *mut pg_sys::Node)
    }
}

/// Tree walker: gathers every Aggref and WindowFunc, in subqueries and CTEs
/// too. It reads node tags only; the catalog is read afterwards.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> bool {
    // SAFETY: the walkers pass valid nodes (or null) and our context.
    unsafe {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_Aggref | pg_sys::NodeTag::T_WindowFunc => {
                (*(cx as *mut Vec<*mut pg_sys::Node>)).push(node)
            }
            pg_sys::NodeTag::T_Query => {
                return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(collect), cx, 0)
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(collect), cx)
    }
}

/// Rewrites one call of `cf_sharded_agg` (see [`is_sharded_agg`]) of the
/// polymorphic declaration, or of the `text` one with a key cast to `text`
/// implicitly, if it is one.
unsafe fn rewrite(a: *mut pg_sys::Aggref) {
    // SAFETY: `a` is a live Aggref of the query being planned; catalog
    // lookups may raise errors, which the hook's guard reports.
    unsafe {
        let agg = &mut *a;
        if agg.aggkind != b'n' as std::ffi::c_char || agg.args.is_null() {
            return;
        }
        let sorted = !agg.aggorder.is_null() || !agg.aggdistinct.is_null();
        // The arguments (ORDER BY adds its expressions to `args`, marked
        // junk, after them).
        if agg.aggargtypes.is_null() {
            return;
        }
        let nargs = (*agg.aggargtypes).length as usize;
        if !(1..=3).contains(&nargs)
            || (*agg.args).length as usize != nargs && !sorted
            || ((*agg.args).length as usize) < nargs
        {
            return;
        }
        // The polymorphic declarations (the key declared `anyelement`), and
        // the `text` ones given a key the parser cast to text.
        let mut decl_types: *mut pg_sys::Oid = std::ptr::null_mut();
        let mut decl_n: std::ffi::c_int = 0;
        pg_sys::get_func_signature(agg.aggfnoid, &mut decl_types, &mut decl_n);
        if decl_n as usize != nargs {
            return;
        }
        let first = (*(*agg.args).elements).ptr_value as *mut pg_sys::TargetEntry;
        let nsp_oid = pg_sys::get_func_namespace(agg.aggfnoid);
        let nsp = pg_sys::get_namespace_name(nsp_oid);
        if nsp.is_null() {
            return;
        }
        let key = match *decl_types {
            pg_sys::ANYELEMENTOID if !sorted => (*first).expr,
            pg_sys::TEXTOID => match crate::sql::keys::implicit_text_cast_inner((*first).expr as *mut pg_sys::Node) {
                // With DISTINCT or ORDER BY the call stays one that Citus
                // runs on the coordinator, over the key as written.
                Some(inner) if sorted => return as_written(agg, first, inner, nsp, nargs),
                Some(inner) => inner as *mut pg_sys::Expr,
                None => return,
            },
            _ => return,
        };
        let mut key_args = [pg_sys::ANYELEMENTOID, pg_sys::FLOAT8OID, pg_sys::INT8OID];
        let key_fn =
            pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_key"), nargs as i32, key_args.as_mut_ptr(), true);
        if key_fn == pg_sys::InvalidOid {
            // An extension not yet updated to 0.9.0.
            return;
        }
        let state_type = pg_sys::get_func_rettype(key_fn);
        let state_agg = pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_agg"), 1, &state_type, true);
        if state_agg == pg_sys::InvalidOid {
            return;
        }
        // cf_sharded_key(the aggregate's arguments, the key as written), with
        // the key's collation.
        let mut args: *mut pg_sys::List = pg_sys::lappend(std::ptr::null_mut(), key as *mut std::ffi::c_void);
        for i in 1..nargs {
            let te = (*(*agg.args).elements.add(i)).ptr_value as *mut pg_sys::TargetEntry;
            args = pg_sys::lappend(args, (*te).expr as *mut std::ffi::c_void);
        }
        let call = pg_sys::makeFuncExpr(
            key_fn,
            state_type,
            args,
            pg_sys::InvalidOid,
            agg.inputcollid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        );
        let te = pg_sys::makeTargetEntry(call as *mut pg_sys::Expr, 1, std::ptr::null_mut(), false);
        agg.aggfnoid = state_agg;
        agg.args = pg_sys::lappend(std::ptr::null_mut(), te as *mut std::ffi::c_void);
        agg.aggargtypes = pg_sys::lappend_oid(std::ptr::null_mut(), state_type);
        agg.inputcollid = pg_sys::InvalidOid;
    }
}

/// Makes a call of the `text` declaration with DISTINCT or ORDER BY whose
/// key `inner` the parser cast to `text` a call of the polymorphic one over
/// the key as written (its DISTINCT and ORDER BY compare the key as its own
/// type, as `cf_agg`'s do).
///
/// # Safety
/// `agg` is a live Aggref of the query being planned whose first argument
/// is `first`, an implicit cast of `inner`; `nsp` names its schema.
unsafe fn as_written(
    agg: &mut pg_sys::Aggref,
    first: *mut pg_sys::TargetEntry,
    inner: *mut pg_sys::Node,
    nsp: *mut std::ffi::c_char,
    nargs: usize,
) {
    // SAFETY: as documented; catalog lookups may raise errors (a key type
    // without ordering operators raises PostgreSQL's own, as cf_agg(DISTINCT
    // key) would), which the hook's guard reports.
    unsafe {
        let mut types = [pg_sys::ANYELEMENTOID, pg_sys::FLOAT8OID, pg_sys::INT8OID];
        let poly = pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_agg"), nargs as i32, types.as_mut_ptr(), true);
        if poly == pg_sys::InvalidOid {
            return;
        }
        let t = pg_sys::exprType(inner);
        let ops = |t: pg_sys::Oid| {
            let (mut lt, mut eq, mut gt, mut hashable) =
                (pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::InvalidOid, false);
            pg_sys::get_sort_group_operators(t, true, true, true, &mut lt, &mut eq, &mut gt, &mut hashable);
            (lt, eq, gt, hashable)
        };
        let key_ref = (*first).ressortgroupref;
        if key_ref != 0 {
            let (_, _, text_gt, _) = ops(pg_sys::TEXTOID);
            let (lt, eq, gt, hashable) = ops(t);
            for list in [agg.aggdistinct, agg.aggorder] {
                for c in pgrx::PgList::<pg_sys::SortGroupClause>::from_pg(list).iter_ptr() {
                    if (*c).tleSortGroupRef == key_ref {
                        (*c).sortop = if (*c).sortop == text_gt { gt } else { lt };
                        (*c).eqop = eq;
                        (*c).hashable = hashable;
                    }
                }
            }
        }
        (*first).expr = inner as *mut pg_sys::Expr;
        agg.aggfnoid = poly;
        (*(*agg.aggargtypes).elements).oid_value = t;
    }
}

/// Makes a window call of `cf_sharded_agg`'s `text` declaration whose key
/// the parser cast to `text` implicitly a call of the polymorphic one over
/// the key as written. (In a window, PostgreSQL names no call to the
/// aggregate's support functions, which see the key as `text`: when one
/// window node computes several calls of that declaration, they cannot tell
/// which was cast.)
///
/// # Safety
/// `w` is a live WindowFunc of the query being planned.
unsafe fn window_as_written(w: *mut pg_sys::WindowFunc) {
    // SAFETY: as documented; catalog lookups may raise errors, which the
    // hook's guard reports.
    unsafe {
        let name = pg_sys::get_func_name((*w).winfnoid);
        if !(*w).winagg || name.is_null() || CStr::from_ptr(name) != c"cf_sharded_agg" || (*w).args.is_null() {
            return;
        }
        let nargs = (*(*w).args).length as usize;
        let mut decl_types: *mut pg_sys::Oid = std::ptr::null_mut();
        let mut decl_n: std::ffi::c_int = 0;
        pg_sys::get_func_signature((*w).winfnoid, &mut decl_types, &mut decl_n);
        if !(1..=3).contains(&nargs) || decl_n as usize != nargs || *decl_types != pg_sys::TEXTOID {
            return;
        }
        let first = (*(*w).args).elements;
        let Some(inner) = crate::sql::keys::implicit_text_cast_inner((*first).ptr_value as *mut pg_sys::Node) else {
            return;
        };
        let nsp = pg_sys::get_namespace_name(pg_sys::get_func_namespace((*w).winfnoid));
        if nsp.is_null() {
            return;
        }
        let mut types = [pg_sys::ANYELEMENTOID, pg_sys::FLOAT8OID, pg_sys::INT8OID];
        let poly = pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_agg"), nargs as i32, types.as_mut_ptr(), true);
        if poly == pg_sys::InvalidOid {
            return;
        }
        (*first).ptr_value = inner as *mut std::ffi::c_void;
        (*w).winfnoid = poly;
    }
}
