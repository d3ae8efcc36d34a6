//! The pre-screen the planner adds for bound filters (`cuckoo.auto_prescreen`):
//! in `WHERE EXISTS (SELECT … FROM t WHERE t.col = <outer> …)` and
//! `WHERE <outer> IN (SELECT t.col FROM t …)`, when `t.col` is bound, the
//! outer query also gets `cf_bound_contains('<filter>', <outer>)`, so that
//! rows whose key the filter says is absent skip the probe of `t`. In
//! `WHERE NOT EXISTS (…)` and `WHERE <outer> NOT IN (…)` of the same shape,
//! the term becomes `cf_bound_contains(…) IS NOT TRUE OR NOT EXISTS (…)`
//! (`NOT cf_bound_contains(…) OR … NOT IN (…)`: a guard): a key the filter
//! rules out makes the term true without the subquery. The
//! query is planned with and without them, and the cheaper plan (PostgreSQL's
//! own cost model, with the filter's estimated pass rate; for a guard, its
//! subquery costed at that rate, `scale_guarded`) is kept; `EXPLAIN` shows
//! the call.
//!
//! Exactness first: a pre-screen is added only where "absent from the
//! filter" proves the sublink false for that row, so the answer cannot
//! change:
//! - the sublink, or `NOT` of it, is a top-level `AND` term of the outer
//!   `WHERE` (not under `OR`);
//! - `NOT IN` only over a column declared `NOT NULL` (a NULL among the
//!   subquery's rows makes `NOT IN` NULL for a key it lacks);
//! - the subquery is a plain `SELECT` (no aggregates, grouping, `HAVING`,
//!   set operations, `WITH`, window functions or set-returning functions in
//!   its target list: an aggregate returns a row even when no row matches);
//! - the comparison is a top-level `AND` term of the subquery's `WHERE` (for
//!   `EXISTS`) or the `IN` itself, with a hashable equality (PostgreSQL marks
//!   only equalities hashable, and its hashing agrees with it), between the
//!   bound column of a table listed directly in the subquery's `FROM` (not
//!   inside a join, not a parent of inheritance children) and an expression
//!   of the same type (or integers of other widths, which hash alike in a
//!   filter) that uses no column of the subquery and nothing volatile, under
//!   a deterministic collation. NULL keys: `NULL = x` is never true, and the pre-screen is
//!   strict (NULL for a NULL key, which `WHERE` treats as false).
//!
//! The filter answers for every row version any snapshot can see (see the
//! module above), so the rows it rules out are rows the subquery could not
//! find under the query's snapshot.

use std::cell::RefCell;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgList;

/// `cuckoo.auto_prescreen`.
static AUTO_PRESCREEN: GucSetting<bool> = GucSetting::<bool>::new(true);

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

/// A binding as the planner needs it.
#[derive(Clone)]
struct Bound {
    name: String,
    tab: pg_sys::Oid,
    attnum: i16,
    /// The column's type (its keys' kind is the filter's).
    typid: pg_sys::Oid,
}

/// This backend's copy of the bindings catalog, and the pre-screen
/// function's OID; None until read, or after an invalidation.
struct Cache {
    bindings: Vec<Bound>,
    func: pg_sys::Oid,
    /// The catalog's OID (invalidations of it clear the cache); 0 when the
    /// extension is not installed here (then any invalidation clears it).
    catalog: pg_sys::Oid,
}

thread_local! {
    static CACHE: RefCell<Option<Cache>> = const { RefCell::new(None) };
}

/// From `_PG_init`: the setting and, when preloaded, the hook.
pub fn init() {
    GucRegistry::define_bool_guc(
        c"cuckoo.auto_prescreen",
        c"Adds a bound cuckoo filter's pre-screen to EXISTS and IN subqueries over the bound column where it makes the plan cheaper.",
        c"The query is planned with and without the pre-screen and the cheaper plan is kept; results never change.",
        &AUTO_PRESCREEN,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: _PG_init runs once per process before any planning; the
    // previous hook is kept and called; the callback stays registered.
    unsafe {
        // Not beside Citus: its planner must not plan a distributed query
        // twice.
        if pg_sys::process_shared_preload_libraries_in_progress && !crate::sql::citus::citus_loaded() {
            PREV_PLANNER = pg_sys::planner_hook;
            pg_sys::planner_hook = Some(planner);
        }
        crate::sql::named::call::BOUND_READABLE = Some(super::catalog::may_read_bound);
    }
}

/// Registers the invalidation callback once per backend.
fn register_callback() {
    static mut DONE: bool = false;
    // SAFETY: backend-local flag; the callback lives as long as the backend.
    unsafe {
        if !DONE {
            pg_sys::CacheRegisterRelcacheCallback(Some(invalidate), pg_sys::Datum::from(0usize));
            DONE = true;
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn invalidate(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    CACHE.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            let clear = match c.as_ref() {
                Some(k) => k.catalog == pg_sys::InvalidOid || relid == pg_sys::InvalidOid || relid == k.catalog,
                None => false,
            };
            if clear {
                *c = None;
            }
        }
    });
}

/// The bindings of this database and the pre-screen function (read once,
/// then kept until the catalog changes).
fn cache() -> Option<(Vec<Bound>, pg_sys::Oid)> {
    register_callback();
    if let Some(out) = CACHE.with(|c| c.borrow().as_ref().map(|k| (k.bindings.clone(), k.func))) {
        return Some(out).filter(|(b, _)| !b.is_empty());
    }
    // A role that may not read the catalog (a DBA revoked it, or the
    // extension's schema is not usable) plans without pre-screens; nothing
    // is kept, so that a role that may read it later does.
    if !readable() {
        return None;
    }
    let loaded = load();
    let out = loaded.as_ref().map(|k| (k.bindings.clone(), k.func));
    CACHE.with(|c| {
        *c.borrow_mut() = Some(loaded.unwrap_or(Cache {
            bindings: Vec::new(),
            func: pg_sys::InvalidOid,
            catalog: pg_sys::InvalidOid,
        }))
    });
    out.filter(|(b, _)| !b.is_empty())
}

/// Whether the current role may read the bindings catalog (or the extension
/// is not installed here, or has no catalog: nothing to read).
fn readable() -> bool {
    let one = super::catalog::one_text;
    let Some(nsp) = one("SELECT e.extnamespace::oid::text FROM pg_catalog.pg_extension e WHERE e.extname = 'cuckoo'")
        .and_then(|s| s.parse::<u32>().ok())
    else {
        return true;
    };
    let nsp = pg_sys::Oid::from(nsp);
    // SAFETY: privilege checks of the current role on an existing schema and,
    // found by name within it, an existing relation.
    unsafe {
        if pg_sys::pg_namespace_aclcheck(nsp, pg_sys::GetUserId(), pg_sys::ACL_USAGE as pg_sys::AclMode)
            != pg_sys::AclResult::ACLCHECK_OK
        {
            return false;
        }
        let rel = pg_sys::get_relname_relid(c"cuckoo_bindings".as_ptr(), nsp);
        rel == pg_sys::InvalidOid
            || pg_sys::pg_class_aclcheck(rel, pg_sys::GetUserId(), pg_sys::ACL_SELECT as pg_sys::AclMode)
                == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// Reads the catalog (None: the extension is not installed in this database).
fn load() -> Option<Cache> {
    let one = super::catalog::one_text;
    let ext = one(
        "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'cuckoo'",
    )?;
    // An installation of a release before bindings has no catalog.
    let catalog =
        one(&format!("SELECT pg_catalog.to_regclass('{ext}.cuckoo_bindings')::oid::text"))?.parse::<u32>().ok()?;
    let catalog = pg_sys::Oid::from(catalog);
    let func =
        one(&format!("SELECT pg_catalog.to_regprocedure('{ext}.cf_bound_contains(text, anynonarray)')::oid::text"))
            .and_then(|f| f.parse::<u32>().ok())
            .map(pg_sys::Oid::from)
            .unwrap_or(pg_sys::InvalidOid);
    let q = format!(
        "SELECT b.name, b.tab::oid, b.attnum, a.atttypid FROM {ext}.cuckoo_bindings b \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = b.tab AND a.attnum = b.attnum AND a.attname = b.col AND NOT a.attisdropped"
    );
    let bindings = super::catalog::with_safe_path(|| {
        Spi::connect(|c| {
            let mut out = Vec::new();
            for r in c.select(&q, None, &[])? {
                let (Some(name), Some(tab), Some(attnum), Some(typid)) =
                    (r.get::<String>(1)?, r.get::<pg_sys::Oid>(2)?, r.get::<i16>(3)?, r.get::<pg_sys::Oid>(4)?)
                else {
                    continue;
                };
                out.push(Bound { name, tab, attnum, typid });
            }
            Ok::<_, pgrx::spi::Error>(out)
        })
    })
    .ok()?;
    Some(Cache { bindings: if func == pg_sys::InvalidOid { Vec::new() } else { bindings }, func, catalog })
}

unsafe fn next_planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's own arguments, passed on.
    unsafe { crate::sql::call_planner(PREV_PLANNER, parse, query_string, cursor_options, bound_params) }
}

/// The hook: plans the query with pre-screens added (if any apply) and
/// without, and keeps the cheaper plan.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the rewrite works on a copy of the query; both plans are the
    // next planner's, for the same query's meaning. No Rust value with a
    // destructor lives in this frame across the calls.
    unsafe {
        if !AUTO_PRESCREEN.get() || (*parse).commandType != pg_sys::CmdType::CMD_SELECT || !(*parse).hasSubLinks {
            return next_planner(parse, query_string, cursor_options, bound_params);
        }
        let with = rewritten(parse);
        if with.is_null() {
            return next_planner(parse, query_string, cursor_options, bound_params);
        }
        let a = next_planner(with, query_string, cursor_options, bound_params);
        let b = next_planner(parse, query_string, cursor_options, bound_params);
        let cost = |p: *mut pg_sys::PlannedStmt| (*(*p).planTree).total_cost;
        if cost(a) < cost(b) {
            a
        } else {
            b
        }
    }
}

/// The parse location given to the pre-screen call of a guard the hook made
/// (`cf_bound_contains(…) IS NOT TRUE OR NOT EXISTS (…)`), which PostgreSQL keeps
/// through its rewriting of expressions and reads as "unknown" (negative);
/// and the one it gets once its guarded arm is costed (`scale_guarded`). A
/// call written by hand has a location of its own, or -1.
const GUARD: i32 = -0x6366;
const GUARD_COSTED: i32 = -0x6367;

/// From the pre-screen's selectivity estimate (`pass`, a fraction of rows
/// estimated from the filter, for the call whose arguments are `args`):
/// when that call is the guard the hook made of a `NOT EXISTS` or `NOT IN`
/// of the query being planned, each subplan of the guarded arm costs `pass`
/// of a run per row, once.
///
/// PostgreSQL costs every arm of an `OR` as if it always ran; the guarded
/// arm runs only for keys the filter passes. The planner asks the guard's
/// selectivity before it computes the clause's cost, so the plan with the
/// guard is costed with it, and kept only if then cheaper than the plan
/// without it. It reads nodes and lists, writes two fields, and for a
/// `NOT IN` asks PostgreSQL the key's NULL fraction; it keeps no state, so an
/// error raised there (none is expected) leaves nothing behind.
///
/// # Safety
/// `root` and `args` come from the planner's selectivity request.
pub unsafe fn scale_guarded(root: *mut pg_sys::PlannerInfo, args: *mut pg_sys::List, pass: f64) {
    // SAFETY: as documented; the query's quals are its preprocessed
    // expressions, which the planner's clauses point into.
    unsafe {
        if root.is_null() || (*root).parse.is_null() || (*(*root).parse).jointree.is_null() {
            return;
        }
        for c in conjuncts((*(*(*root).parse).jointree).quals) {
            let Some((call, arm, nulls_run)) = guarded_arm(c, args) else { continue };
            (*call).location = GUARD_COSTED;
            // The arm runs for keys the filter passes, and under `NOT IN`'s
            // guard for NULL keys too.
            let key = PgList::<pg_sys::Node>::from_pg(args).get_ptr(1);
            let runs = match key {
                Some(key) if nulls_run => {
                    let nulls = pg_sys::nulltestsel(
                        root,
                        pg_sys::NullTestType::IS_NULL,
                        key,
                        0,
                        pg_sys::JoinType::JOIN_INNER,
                        std::ptr::null_mut(),
                    );
                    pass + nulls
                }
                _ => pass,
            };
            // The arm as planned: `NOT <subplan>`, the subplan plain or one
            // of alternatives (a hashed one and not).
            let Some(not) = bool_expr(arm, pg_sys::BoolExprType::NOT_EXPR) else { continue };
            let Some(sub) = PgList::<pg_sys::Node>::from_pg((*not).args).get_ptr(0) else { continue };
            let plans: Vec<*mut pg_sys::Node> = match (*sub).type_ {
                pg_sys::NodeTag::T_SubPlan => vec![sub],
                pg_sys::NodeTag::T_AlternativeSubPlan => {
                    PgList::<pg_sys::Node>::from_pg((*(sub as *mut pg_sys::AlternativeSubPlan)).subplans)
                        .iter_ptr()
                        .collect()
                }
                _ => Vec::new(),
            };
            for p in plans {
                if (*p).type_ == pg_sys::NodeTag::T_SubPlan {
                    (*(p as *mut pg_sys::SubPlan)).per_call_cost *= runs.clamp(0.0, 1.0);
                }
            }
        }
    }
}

/// If `c` is `f(args) IS NOT TRUE OR <arm>` or `NOT f(args) OR <arm>` with
/// `f(args)` a guard the hook made (`GUARD`, not costed yet) whose argument
/// list is `args`: the call, `<arm>`, and whether `<arm>` runs for a NULL
/// key (the `NOT` form).
///
/// # Safety
/// `c` is a valid expression.
unsafe fn guarded_arm(
    c: *mut pg_sys::Node,
    args: *mut pg_sys::List,
) -> Option<(*mut pg_sys::FuncExpr, *mut pg_sys::Node, bool)> {
    // SAFETY: as documented.
    unsafe {
        let or = bool_expr(c, pg_sys::BoolExprType::OR_EXPR)?;
        let arms = PgList::<pg_sys::Node>::from_pg((*or).args);
        let (first, arm) = (arms.get_ptr(0)?, arms.get_ptr(1)?);
        let (call, nulls_run) = if let Some(not) = bool_expr(first, pg_sys::BoolExprType::NOT_EXPR) {
            (PgList::<pg_sys::Node>::from_pg((*not).args).get_ptr(0)?, true)
        } else if (*first).type_ == pg_sys::NodeTag::T_BooleanTest
            && (*(first as *mut pg_sys::BooleanTest)).booltesttype == pg_sys::BoolTestType::IS_NOT_TRUE
        {
            ((*(first as *mut pg_sys::BooleanTest)).arg as *mut pg_sys::Node, false)
        } else {
            return None;
        };
        if arms.len() != 2 || call.is_null() || (*call).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let call = call as *mut pg_sys::FuncExpr;
        ((*call).location == GUARD && (*call).args == args).then_some((call, arm, nulls_run))
    }
}

/// `n` as a boolean expression of kind `op`.
///
/// # Safety
/// `n` is a valid node.
unsafe fn bool_expr(n: *mut pg_sys::Node, op: pg_sys::BoolExprType::Type) -> Option<*mut pg_sys::BoolExpr> {
    // SAFETY: as documented.
    unsafe {
        ((*n).type_ == pg_sys::NodeTag::T_BoolExpr && (*(n as *mut pg_sys::BoolExpr)).boolop == op)
            .then_some(n as *mut pg_sys::BoolExpr)
    }
}

/// A copy of `parse` with pre-screens added, or null when none applies.
#[pg_guard]
unsafe extern "C-unwind" fn rewritten(parse: *mut pg_sys::Query) -> *mut pg_sys::Query {
    let Some((bindings, func)) = cache() else { return std::ptr::null_mut() };
    // SAFETY: a fresh copy of the query tree is changed, never the original.
    unsafe {
        let q = pg_sys::copyObjectImpl(parse.cast()) as *mut pg_sys::Query;
        let jt = (*q).jointree;
        if jt.is_null() || (*jt).quals.is_null() {
            return std::ptr::null_mut();
        }
        let mut screens = Vec::new();
        let mut terms = Vec::new();
        let mut changed = false;
        for c in conjuncts((*jt).quals) {
            // `NOT <sublink>`: the sublink, negated.
            let (node, negated) = match bool_expr(c, pg_sys::BoolExprType::NOT_EXPR) {
                Some(not) => (PgList::<pg_sys::Node>::from_pg((*not).args).get_ptr(0), true),
                None => (Some(c), false),
            };
            let Some(sl) = node.filter(|&n| (*n).type_ == pg_sys::NodeTag::T_SubLink) else {
                terms.push(c);
                continue;
            };
            let sl = sl as *mut pg_sys::SubLink;
            let found = match (*sl).subLinkType {
                pg_sys::SubLinkType::EXISTS_SUBLINK => exists_key(sl, &bindings),
                // `NOT IN` is true for a key absent from the subquery only
                // when the subquery returns no NULL: a NOT NULL column.
                pg_sys::SubLinkType::ANY_SUBLINK => {
                    in_key(sl, &bindings).filter(|(name, _)| !negated || not_null(&bindings, name))
                }
                _ => None,
            };
            // (An array key: the pre-screen's argument is `anynonarray`.)
            let Some((name, key)) =
                found.filter(|(_, key)| pg_sys::get_base_element_type(pg_sys::exprType(*key)) == pg_sys::InvalidOid)
            else {
                terms.push(c);
                continue;
            };
            // A filter that needs a rebuild answers "maybe" for every key:
            // no pre-screen, and a rebuild is asked for.
            if !super::binding::trusted(&name) {
                super::rebuild::ask(&name);
                terms.push(c);
                continue;
            }
            changed = true;
            let screen = prescreen(func, &name, key);
            if negated {
                // `cf_bound_contains(…) IS NOT TRUE OR NOT EXISTS (…)`: a
                // key the filter rules out makes the sublink false, so its
                // negation true, without running it; so does a NULL key
                // (`NULL = x` matches no row). `NOT IN` of a NULL key is
                // true or NULL as the subquery has rows or not: its guard is
                // `NOT cf_bound_contains(…)`, NULL for a NULL key, which
                // runs the subquery.
                (*(screen as *mut pg_sys::FuncExpr)).location = GUARD;
                let first = if (*sl).subLinkType == pg_sys::SubLinkType::EXISTS_SUBLINK {
                    let t = pg_sys::palloc0(std::mem::size_of::<pg_sys::BooleanTest>()) as *mut pg_sys::BooleanTest;
                    (*t).xpr.type_ = pg_sys::NodeTag::T_BooleanTest;
                    (*t).arg = screen as *mut pg_sys::Expr;
                    (*t).booltesttype = pg_sys::BoolTestType::IS_NOT_TRUE;
                    (*t).location = -1;
                    t as *mut pg_sys::Node
                } else {
                    let mut not = PgList::<pg_sys::Node>::new();
                    not.push(screen);
                    pg_sys::makeBoolExpr(pg_sys::BoolExprType::NOT_EXPR, not.into_pg(), -1) as *mut pg_sys::Node
                };
                let mut arms = PgList::<pg_sys::Node>::new();
                arms.push(first);
                arms.push(c);
                terms
                    .push(pg_sys::makeBoolExpr(pg_sys::BoolExprType::OR_EXPR, arms.into_pg(), -1) as *mut pg_sys::Node);
            } else {
                screens.push(screen);
                terms.push(c);
            }
        }
        if !changed {
            return std::ptr::null_mut();
        }
        let mut args = PgList::<pg_sys::Node>::new();
        for s in screens.into_iter().chain(terms) {
            args.push(s);
        }
        (*jt).quals = pg_sys::makeBoolExpr(pg_sys::BoolExprType::AND_EXPR, args.into_pg(), -1) as *mut pg_sys::Node;
        q
    }
}

/// Whether the column of binding `name` is declared NOT NULL.
fn not_null(bindings: &[Bound], name: &str) -> bool {
    let Some(b) = bindings.iter().find(|b| b.name == name) else { return false };
    // SAFETY: a syscache lookup, released after.
    unsafe {
        let tup = pg_sys::SearchSysCache2(
            pg_sys::SysCacheIdentifier::ATTNUM as i32,
            pg_sys::Datum::from(b.tab),
            pg_sys::Datum::from(b.attnum),
        );
        if tup.is_null() {
            return false;
        }
        let form = pg_sys::GETSTRUCT(tup) as *mut pg_sys::FormData_pg_attribute;
        let nn = (*form).attnotnull && !(*form).attisdropped;
        pg_sys::ReleaseSysCache(tup);
        nn
    }
}

/// The top-level `AND` terms of `quals`.
///
/// # Safety
/// `quals` is a valid expression or null.
unsafe fn conjuncts(quals: *mut pg_sys::Node) -> Vec<*mut pg_sys::Node> {
    // SAFETY: as documented.
    unsafe {
        if quals.is_null() {
            return Vec::new();
        }
        // A planned query's quals are an implicit-AND list.
        if (*quals).type_ == pg_sys::NodeTag::T_List {
            return PgList::<pg_sys::Node>::from_pg(quals.cast()).iter_ptr().collect();
        }
        if (*quals).type_ == pg_sys::NodeTag::T_BoolExpr {
            let b = quals as *mut pg_sys::BoolExpr;
            if (*b).boolop == pg_sys::BoolExprType::AND_EXPR {
                return PgList::<pg_sys::Node>::from_pg((*b).args).iter_ptr().collect();
            }
        }
        vec![quals]
    }
}

/// The call `cf_bound_contains('<name>', key)`.
///
/// # Safety
/// `key` is a valid expression of the outer query.
unsafe fn prescreen(func: pg_sys::Oid, name: &str, key: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: node constructors of the current memory context.
    unsafe {
        let c = std::ffi::CString::new(name).unwrap_or_default();
        let text = pg_sys::cstring_to_text(c.as_ptr());
        let name_arg = pg_sys::makeConst(
            pg_sys::TEXTOID,
            -1,
            pg_sys::DEFAULT_COLLATION_OID,
            -1,
            pg_sys::Datum::from(text),
            false,
            false,
        );
        let mut args = PgList::<pg_sys::Node>::new();
        args.push(name_arg as *mut pg_sys::Node);
        args.push(key);
        pg_sys::makeFuncExpr(
            func,
            pg_sys::BOOLOID,
            args.into_pg(),
            pg_sys::InvalidOid,
            pg_sys::exprCollation(key),
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        ) as *mut pg_sys::Node
    }
}

/// Whether `sq` is a subquery whose rows all come from its `FROM` and
/// `WHERE` (see the module documentation).
///
/// # Safety
/// `sq` is a valid query.
unsafe fn plain_select(sq: *mut pg_sys::Query) -> bool {
    // SAFETY: as documented.
    unsafe {
        (*sq).commandType == pg_sys::CmdType::CMD_SELECT
            && !(*sq).hasAggs
            && !(*sq).hasWindowFuncs
            && !(*sq).hasTargetSRFs
            && !(*sq).hasRecursive
            && !(*sq).hasModifyingCTE
            && (*sq).groupClause.is_null()
            && (*sq).groupingSets.is_null()
            && (*sq).havingQual.is_null()
            && (*sq).setOperations.is_null()
            && (*sq).cteList.is_null()
            && !(*sq).jointree.is_null()
    }
}

/// If `node` (a bare column, or one relabeled to a binary-compatible type)
/// is the bound column of a table listed directly in `sq`'s `FROM`: that
/// binding's name.
///
/// # Safety
/// `sq` is a valid query and `node` one of its expressions.
unsafe fn bound_column(sq: *mut pg_sys::Query, node: *mut pg_sys::Node, bindings: &[Bound]) -> Option<String> {
    // SAFETY: as documented; range table entries are read by index.
    unsafe {
        let mut n = node;
        while (*n).type_ == pg_sys::NodeTag::T_RelabelType {
            n = (*(n as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node;
        }
        if (*n).type_ != pg_sys::NodeTag::T_Var {
            return None;
        }
        let v = n as *mut pg_sys::Var;
        if (*v).varlevelsup != 0 || (*v).varno < 1 {
            return None;
        }
        let direct = PgList::<pg_sys::Node>::from_pg((*(*sq).jointree).fromlist).iter_ptr().any(|f| {
            (*f).type_ == pg_sys::NodeTag::T_RangeTblRef && (*(f as *mut pg_sys::RangeTblRef)).rtindex == (*v).varno
        });
        if !direct {
            return None;
        }
        let rte = PgList::<pg_sys::RangeTblEntry>::from_pg((*sq).rtable).get_ptr((*v).varno as usize - 1)?;
        // A table, or a partitioned table whose binding follows every
        // partition; not an inheritance parent (its children's rows are not
        // in its filter).
        let partitioned = (*rte).relkind == pg_sys::RELKIND_PARTITIONED_TABLE as std::ffi::c_char;
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
            || !(partitioned || (*rte).relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char)
        {
            return None;
        }
        if !partitioned && (*rte).inh && has_children((*rte).relid) {
            return None;
        }
        // Compared as the column's own keys: the probe hashes a value of the
        // comparison's type as the filter hashes the column's.
        let typ = pg_sys::exprType(node);
        bindings
            .iter()
            .find(|b| b.tab == (*rte).relid && b.attnum == (*v).varattno)
            .filter(|b| crate::sql::keys::key_type_of(typ) == crate::sql::keys::key_type_of(b.typid))
            .map(|b| b.name.clone())
    }
}

/// Whether relation `relid` has inheritance children (whose rows its
/// filter does not hold).
fn has_children(relid: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup of an existing relation, released after.
    unsafe {
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(relid));
        if tup.is_null() {
            return true;
        }
        let form = pg_sys::GETSTRUCT(tup) as *mut pg_sys::FormData_pg_class;
        let has = (*form).relhassubclass;
        pg_sys::ReleaseSysCache(tup);
        has
    }
}

/// Whether `opno` compares a column of type `col` with a key of type `key`
/// by an equality that the filter's hashing agrees with, under collation
/// `coll`: a hashable equality (PostgreSQL marks only equalities hashable)
/// between values of one type, or between integers of any widths (whose
/// equal values hash alike in a filter), under a deterministic collation.
fn filter_equality(opno: pg_sys::Oid, col: pg_sys::Oid, key: pg_sys::Oid, coll: pg_sys::Oid) -> bool {
    let integer = |t: pg_sys::Oid| t == pg_sys::INT2OID || t == pg_sys::INT4OID || t == pg_sys::INT8OID;
    // SAFETY: catalog lookups of existing operators and types.
    unsafe {
        // The equality of the column type's default hash operator family:
        // the one the filter's hashing agrees with (another hashable
        // equality, case-insensitive say, does not).
        let tce = pg_sys::lookup_type_cache(col, pg_sys::TYPECACHE_HASH_OPFAMILY as i32);
        (col == key || (integer(col) && integer(key)))
            && pg_sys::op_hashjoinable(opno, col)
            && !tce.is_null()
            && (*tce).hash_opf != pg_sys::InvalidOid
            && pg_sys::op_in_opfamily(opno, (*tce).hash_opf)
            && (coll == pg_sys::InvalidOid || pg_sys::get_collation_isdeterministic(coll))
    }
}

/// Whether `e` may be evaluated in the query `levels` levels out instead:
/// nothing volatile, no subquery or aggregate, no column of the levels in
/// between.
///
/// # Safety
/// `e` is a valid expression.
unsafe fn movable(e: *mut pg_sys::Node, inner_levels: i32) -> bool {
    // SAFETY: as documented.
    unsafe {
        // First the walk that stops short of a deep expression (PostgreSQL's
        // walkers below raise an error there).
        let mut bad = false;
        let whole = walk(e, &mut |n| {
            matches!(
                (*n).type_,
                pg_sys::NodeTag::T_SubLink
                    | pg_sys::NodeTag::T_Aggref
                    | pg_sys::NodeTag::T_GroupingFunc
                    | pg_sys::NodeTag::T_WindowFunc
                    | pg_sys::NodeTag::T_PlaceHolderVar
            )
            .then(|| bad = true);
        });
        if !whole || bad {
            return false;
        }
        if pg_sys::contain_volatile_functions(e) || pg_sys::contain_agg_clause(e) || pg_sys::contain_subplans(e) {
            return false;
        }
        !(0..inner_levels).any(|l| pg_sys::contain_vars_of_level(e, l))
    }
}

/// Nodes deeper than this in an expression end a walk (`walk`): each level
/// takes a frame of Rust and one of PostgreSQL's walker.
const WALK_DEPTH: u32 = 200;

/// Calls `f` on every node of expression `e`, and returns true; or stops
/// and returns false when the expression is deeper than `WALK_DEPTH` or the
/// stack nears its limit (`max_stack_depth`), so that a deep expression is
/// left alone rather than raising an error.
///
/// # Safety
/// `e` is a valid expression.
unsafe fn walk(e: *mut pg_sys::Node, f: &mut dyn FnMut(*mut pg_sys::Node)) -> bool {
    struct Walk<'a> {
        f: &'a mut dyn FnMut(*mut pg_sys::Node),
        depth: u32,
        stopped: bool,
    }
    #[pg_guard]
    unsafe extern "C-unwind" fn step(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> bool {
        if node.is_null() {
            return false;
        }
        // SAFETY: cx is the walk's state below, alive for the walk;
        // stack_is_too_deep only compares addresses.
        unsafe {
            let w = &mut *(cx as *mut Walk);
            if w.depth >= WALK_DEPTH || pg_sys::stack_is_too_deep() {
                w.stopped = true;
                return true;
            }
            (w.f)(node);
            w.depth += 1;
            let stop = pg_sys::expression_tree_walker(node, Some(step), cx);
            w.depth -= 1;
            stop
        }
    }
    let mut w = Walk { f, depth: 0, stopped: false };
    // SAFETY: as documented.
    unsafe {
        step(e, (&mut w) as *mut Walk as *mut std::ffi::c_void);
    }
    !w.stopped
}

/// `EXISTS (SELECT … FROM t … WHERE t.col = <outer> AND …)` with `t.col`
/// bound: the binding and `<outer>` as an expression of the outer query.
///
/// # Safety
/// `sl` is a valid sublink of the query being planned.
unsafe fn exists_key(sl: *mut pg_sys::SubLink, bindings: &[Bound]) -> Option<(String, *mut pg_sys::Node)> {
    // SAFETY: as documented.
    unsafe {
        let sq = (*sl).subselect as *mut pg_sys::Query;
        if sq.is_null() || (*sq).type_ != pg_sys::NodeTag::T_Query || !plain_select(sq) {
            return None;
        }
        for c in conjuncts((*(*sq).jointree).quals) {
            if (*c).type_ != pg_sys::NodeTag::T_OpExpr {
                continue;
            }
            let op = c as *mut pg_sys::OpExpr;
            let args = PgList::<pg_sys::Node>::from_pg((*op).args);
            if args.len() != 2 {
                continue;
            }
            for (col, other) in [(0, 1), (1, 0)] {
                let (col, other) = (args.get_ptr(col)?, args.get_ptr(other)?);
                let Some(name) = bound_column(sq, col, bindings) else { continue };
                if !filter_equality((*op).opno, pg_sys::exprType(col), pg_sys::exprType(other), (*op).inputcollid) {
                    continue;
                }
                if !movable(other, 1) {
                    continue;
                }
                // One level out: the subquery's outer columns are the outer
                // query's own.
                let key = pg_sys::copyObjectImpl(other.cast()) as *mut pg_sys::Node;
                let whole = walk(key, &mut |n| {
                    if (*n).type_ == pg_sys::NodeTag::T_Var {
                        let v = n as *mut pg_sys::Var;
                        (*v).varlevelsup -= 1;
                    }
                });
                // (A walk cut short left the copy half moved.)
                return whole.then_some((name, key));
            }
        }
        None
    }
}

/// `<outer> IN (SELECT t.col FROM t …)` with `t.col` bound: the binding and
/// `<outer>`.
///
/// # Safety
/// `sl` is a valid sublink of the query being planned.
unsafe fn in_key(sl: *mut pg_sys::SubLink, bindings: &[Bound]) -> Option<(String, *mut pg_sys::Node)> {
    // SAFETY: as documented.
    unsafe {
        let sq = (*sl).subselect as *mut pg_sys::Query;
        let test = (*sl).testexpr;
        if sq.is_null() || test.is_null() || (*test).type_ != pg_sys::NodeTag::T_OpExpr || !plain_select(sq) {
            return None;
        }
        let op = test as *mut pg_sys::OpExpr;
        let args = PgList::<pg_sys::Node>::from_pg((*op).args);
        if args.len() != 2 {
            return None;
        }
        let tle = PgList::<pg_sys::TargetEntry>::from_pg((*sq).targetList).iter_ptr().find(|t| !(**t).resjunk)?;
        let col = (*tle).expr as *mut pg_sys::Node;
        let name = bound_column(sq, col, bindings)?;
        let (a, b) = (args.get_ptr(0)?, args.get_ptr(1)?);
        let is_param = |n: *mut pg_sys::Node| {
            (*n).type_ == pg_sys::NodeTag::T_Param
                && (*(n as *mut pg_sys::Param)).paramkind == pg_sys::ParamKind::PARAM_SUBLINK
                && (*(n as *mut pg_sys::Param)).paramid == 1
        };
        let other = if is_param(b) {
            a
        } else if is_param(a) {
            b
        } else {
            return None;
        };
        if !filter_equality((*op).opno, pg_sys::exprType(col), pg_sys::exprType(other), (*op).inputcollid)
            || !movable(other, 0)
        {
            return None;
        }
        Some((name, pg_sys::copyObjectImpl(other.cast()) as *mut pg_sys::Node))
    }
}
