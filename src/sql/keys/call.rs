//! The key type a call was written with, read from its expression: through
//! an implicit cast to `text`, or in an aggregate's call.

use pgrx::pg_sys;

use super::types::*;

/// The type argument `argno` of call expression `expr` had before an implicit
/// cast to `text` (see [`implicit_text_cast_inner`]), or none.
///
/// # Safety
/// `expr` is a call's expression node or null.
pub(super) unsafe fn implicit_cast_source(expr: *mut pg_sys::Node, argno: usize) -> pg_sys::Oid {
    // SAFETY: node tags are checked before each cast; lists hold nodes.
    unsafe {
        if expr.is_null() || (*expr).type_ != pg_sys::NodeTag::T_FuncExpr {
            return pg_sys::InvalidOid;
        }
        let args = pgrx::PgList::<pg_sys::Node>::from_pg((*(expr as *mut pg_sys::FuncExpr)).args);
        let Some(arg) = args.get_ptr(argno) else { return pg_sys::InvalidOid };
        implicit_text_cast_inner(arg).map_or(pg_sys::InvalidOid, |inner| pg_sys::exprType(inner))
    }
}

/// Whether keys of type `t` hash and read as `text` keys do (`text`,
/// `varchar`, domains over them).
pub(super) fn hashes_as_text(t: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup of a type id.
    matches!(unsafe { pg_sys::getBaseType(t) }, pg_sys::TEXTOID | pg_sys::VARCHAROID)
}

/// The expression under `node` when `node` is an implicit cast to `text` (a
/// relabeling, a cast function or an I/O conversion, as the parser adds to
/// give a `char(n)`, `name` or `citext` key to a `text` overload) from a
/// type that does not hash as text.
///
/// # Safety
/// `node` is an expression node or null.
pub(crate) unsafe fn implicit_text_cast_inner(node: *mut pg_sys::Node) -> Option<*mut pg_sys::Node> {
    // SAFETY: node tags are checked before each cast; lists hold nodes.
    unsafe {
        if node.is_null() || pg_sys::exprType(node) != pg_sys::TEXTOID {
            return None;
        }
        let implicit = pg_sys::CoercionForm::COERCE_IMPLICIT_CAST;
        let inner = match (*node).type_ {
            pg_sys::NodeTag::T_RelabelType => {
                let r = node as *mut pg_sys::RelabelType;
                ((*r).relabelformat == implicit).then(|| (*r).arg as *mut pg_sys::Node)
            }
            pg_sys::NodeTag::T_CoerceViaIO => {
                let c = node as *mut pg_sys::CoerceViaIO;
                ((*c).coerceformat == implicit).then(|| (*c).arg as *mut pg_sys::Node)
            }
            pg_sys::NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                let fargs = pgrx::PgList::<pg_sys::Node>::from_pg((*f).args);
                ((*f).funcformat == implicit).then(|| fargs.get_ptr(0)).flatten()
            }
            _ => None,
        }?;
        (!inner.is_null() && !hashes_as_text(pg_sys::exprType(inner))).then_some(inner)
    }
}

/// Whether type `t` is `cf_sharded_agg`'s state type (its name is qualified
/// when it is not on the search path).
pub(crate) fn is_sharded_state(t: pg_sys::Oid) -> bool {
    type_name(t).rsplit('.').next() == Some("cf_sharded_state")
}

/// The type of the key of key expression `expr` (an aggregate's first
/// argument) as it was written, that is, the type `cf_agg` sees for it:
/// below an implicit cast to `text` from another type
/// ([`implicit_text_cast_inner`]), and for `cf_sharded_key(key, ...)`, its
/// key's. None for any other expression of `cf_sharded_agg`'s state type (a
/// partial state, a column of states), whose keys' type is not in sight.
///
/// # Safety
/// `expr` is an expression node or null.
pub unsafe fn written_key_type(expr: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    // SAFETY: node tags are checked before each cast; lists hold nodes;
    // get_func_name returns a palloc'd name or null.
    unsafe {
        if expr.is_null() {
            return None;
        }
        let mut node = expr;
        if (*node).type_ == pg_sys::NodeTag::T_FuncExpr {
            let f = node as *mut pg_sys::FuncExpr;
            let name = pg_sys::get_func_name((*f).funcid);
            if !name.is_null()
                && std::ffi::CStr::from_ptr(name) == c"cf_sharded_key"
                && is_sharded_state((*f).funcresulttype)
            {
                match pgrx::PgList::<pg_sys::Node>::from_pg((*f).args).get_ptr(0) {
                    Some(key) => node = key,
                    None => return None,
                }
            }
        }
        if let Some(inner) = implicit_text_cast_inner(node) {
            node = inner;
        }
        let t = pg_sys::exprType(node);
        (t != pg_sys::InvalidOid && !is_sharded_state(t)).then_some(t)
    }
}

/// `pg_aggregate`'s columns `aggtransfn` and `aggfinalfn` (pg_aggregate_d.h).
pub(super) const ANUM_AGGTRANSFN: i16 = 4;
pub(super) const ANUM_AGGFINALFN: i16 = 5;

/// Whether function `fn_oid` is the transition or final function of
/// aggregate `agg` (not the support function of another aggregate that
/// calls it, as Citus's worker_partial_agg and coord_combine_agg do).
///
/// # Safety
/// A catalog lookup; call inside a transaction.
pub(super) unsafe fn supports(agg: pg_sys::Oid, fn_oid: pg_sys::Oid) -> bool {
    // SAFETY: the tuple is released before returning; SysCacheGetAttr reads
    // a column of the tuple it was given.
    unsafe {
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::AGGFNOID as i32, pg_sys::Datum::from(agg));
        if tup.is_null() {
            return false;
        }
        let mut found = false;
        for attnum in [ANUM_AGGTRANSFN, ANUM_AGGFINALFN] {
            let mut isnull = false;
            let d = pg_sys::SysCacheGetAttr(pg_sys::SysCacheIdentifier::AGGFNOID as i32, tup, attnum, &mut isnull);
            found |= !isnull && pg_sys::Oid::from(d.value() as u32) == fn_oid;
        }
        pg_sys::ReleaseSysCache(tup);
        found
    }
}

/// For an `Aggref` of a step that combines partial states (a parallel
/// plan's Finalize Aggregate), the key type as written of the partial
/// aggregate below whose output it combines: its argument is a Var of the
/// plan below, followed through the nodes that pass it on (Gather, Sort) to
/// the partial `Aggref`, which has the call's arguments.
///
/// # Safety
/// `agg` is the executing AggState and `aggref` one of its Aggrefs.
pub(super) unsafe fn partial_key_type(agg: *mut pg_sys::AggState, aggref: *mut pg_sys::Aggref) -> Option<pg_sys::Oid> {
    // SAFETY: node tags are checked before each cast; a Var of an upper plan
    // node's expression (OUTER_VAR) names a column of its outer plan's target
    // list, which exists; plan states are initialised with their plans.
    unsafe {
        let te = pgrx::PgList::<pg_sys::TargetEntry>::from_pg((*aggref).args).get_ptr(0)?;
        let mut expr = (*te).expr as *mut pg_sys::Node;
        let mut below = (*agg).ss.ps.lefttree;
        // A few nodes at most lie between the two steps.
        for _ in 0..8 {
            if expr.is_null() || below.is_null() {
                return None;
            }
            match (*expr).type_ {
                pg_sys::NodeTag::T_Aggref => {
                    let partial = expr as *mut pg_sys::Aggref;
                    if (*partial).aggfnoid != (*aggref).aggfnoid
                        || (*partial).aggsplit & pg_sys::AGGSPLITOP_COMBINE != 0
                    {
                        return None;
                    }
                    let te = pgrx::PgList::<pg_sys::TargetEntry>::from_pg((*partial).args).get_ptr(0)?;
                    return written_key_type((*te).expr as *mut pg_sys::Node);
                }
                pg_sys::NodeTag::T_Var => {
                    let v = expr as *mut pg_sys::Var;
                    if (*v).varno != pg_sys::OUTER_VAR {
                        return None;
                    }
                    let plan = (*below).plan;
                    let tle = pgrx::PgList::<pg_sys::TargetEntry>::from_pg((*plan).targetlist)
                        .get_ptr(((*v).varattno as usize).checked_sub(1)?)?;
                    expr = (*tle).expr as *mut pg_sys::Node;
                    if !expr.is_null() && (*expr).type_ == pg_sys::NodeTag::T_Var {
                        below = (*below).lefttree;
                    }
                }
                _ => return None,
            }
        }
        None
    }
}

/// The type of the key (the first argument) of the aggregate call whose
/// transition or final function `fcinfo` calls, as written
/// ([`written_key_type`]): `cf_agg`'s and `cf_sharded_agg`'s key type for
/// the rows they aggregate, whatever rows there are. From the executing
/// `Aggref` (in a step that combines partial states, its declared argument
/// type), or in a window, from the node's window aggregates that this
/// function serves when they agree. None when called otherwise (an engine
/// driving the function inside an aggregate of its own, Citus) or when the
/// window aggregates disagree.
///
/// # Safety
/// `fcinfo` is a valid frame; call inside a transaction.
pub unsafe fn agg_call_key_type(fcinfo: pg_sys::FunctionCallInfo) -> Option<pg_sys::Oid> {
    // SAFETY: the context is a node (checked by tag before the casts);
    // AggGetAggref returns the executing Aggref or null; lists hold nodes.
    unsafe {
        let cx = (*fcinfo).context;
        if cx.is_null() {
            return None;
        }
        let fn_oid = (*(*fcinfo).flinfo).fn_oid;
        match (*cx).type_ {
            pg_sys::NodeTag::T_AggState => {
                let aggref = pg_sys::AggGetAggref(fcinfo);
                if aggref.is_null() || !supports((*aggref).aggfnoid, fn_oid) {
                    return None;
                }
                if (*aggref).aggsplit & pg_sys::AGGSPLITOP_COMBINE != 0 {
                    // Its argument is the partial aggregate's output: that
                    // aggregate's key, else the declared type.
                    if let Some(t) = partial_key_type(cx as *mut pg_sys::AggState, aggref) {
                        return Some(t);
                    }
                    let declared = pgrx::PgList::<std::ffi::c_void>::from_pg((*aggref).aggargtypes).get_oid(0)?;
                    return (!is_sharded_state(declared)).then_some(declared);
                }
                let te = pgrx::PgList::<pg_sys::TargetEntry>::from_pg((*aggref).args).get_ptr(0)?;
                written_key_type((*te).expr as *mut pg_sys::Node)
            }
            pg_sys::NodeTag::T_WindowAggState => {
                // PostgreSQL names no window function to its aggregates'
                // support functions; those of this node that this function
                // serves must agree.
                let funcs =
                    pgrx::PgList::<pg_sys::WindowFuncExprState>::from_pg((*(cx as *mut pg_sys::WindowAggState)).funcs);
                let mut agreed: Option<pg_sys::Oid> = None;
                for ws in funcs.iter_ptr() {
                    let wf = (*ws).wfunc;
                    if wf.is_null() || !(*wf).winagg || !supports((*wf).winfnoid, fn_oid) {
                        continue;
                    }
                    let t = written_key_type(pgrx::PgList::<pg_sys::Node>::from_pg((*wf).args).get_ptr(0)?)?;
                    match agreed {
                        Some(a) if a != t => return None,
                        _ => agreed = Some(t),
                    }
                }
                agreed
            }
            _ => None,
        }
    }
}
