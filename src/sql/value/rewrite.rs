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
//! The hook is installed only when cuckoo is preloaded into a server that also
//! preloads Citus (Citus must come first, so this hook runs before Citus
//! plans), and it only touches those aggregate calls: without ORDER BY or
//! DISTINCT in the call (which Citus does not push down anyway).

use std::ffi::CStr;

use pgrx::pg_sys;

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

/// Whether Citus is loaded into this server (preloaded: it must be, to run,
/// and first, before cuckoo). Recognised by what its library registers, a
/// function every Citus release exports, not by how `shared_preload_libraries`
/// spells it (`citus`, `$libdir/citus`, a full path). Libraries load only at
/// server start, so this is asked once per process: the named-filter checks
/// ask on every resolve.
pub(crate) fn citus_loaded() -> bool {
    static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: dlsym reads the process's global symbol table (PostgreSQL loads
    // libraries with RTLD_GLOBAL); the name is a NUL-terminated constant, and
    // the symbol is only compared with NULL, never called.
    *LOADED.get_or_init(|| unsafe { !libc::dlsym(libc::RTLD_DEFAULT, c"pg_finfo_citus_version".as_ptr()).is_null() })
}

/// From `_PG_init` while preloading: installs the hook if Citus is preloaded too.
pub fn init() {
    // SAFETY: _PG_init runs once in the postmaster before any planning; the
    // previous hook is kept and called.
    unsafe {
        if !pg_sys::process_shared_preload_libraries_in_progress || !citus_loaded() {
            return;
        }
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
    }
}

// The planner that runs after this hook, called by its symbol: an ERROR it
// raises must reach PostgreSQL's handler as the longjmp it is (through this
// hook's frame, which holds nothing to drop), not as a Rust panic.
unsafe extern "C-unwind" {
    #[link_name = "standard_planner"]
    fn raw_standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

/// The hook: rewrites (guarded, so that its errors are PostgreSQL errors),
/// then calls the next planner (Citus's) directly.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's own arguments, passed on unchanged but for the
    // rewritten aggregate calls, which are planned as any call would be. No
    // Rust value with a destructor lives in this frame across the calls.
    unsafe {
        rewrite_query(parse);
        match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => raw_standard_planner(parse, query_string, cursor_options, bound_params),
        }
    }
}

/// Rewrites every call of the polymorphic `cf_sharded_agg` in the query.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn rewrite_query(parse: *mut pg_sys::Query) {
    // SAFETY: a query tree handed to the planner, which may change it.
    unsafe {
        let mut found: Vec<*mut pg_sys::Aggref> = Vec::new();
        pg_sys::query_tree_walker(parse, Some(collect), &mut found as *mut _ as *mut std::ffi::c_void, 0);
        for a in found {
            rewrite(a);
        }
    }
}

/// Tree walker: gathers every Aggref, in subqueries and CTEs too. It reads
/// node tags only; the catalog is read afterwards.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect(node: *mut pg_sys::Node, cx: *mut std::ffi::c_void) -> bool {
    // SAFETY: the walkers pass valid nodes (or null) and our context.
    unsafe {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_Aggref => (*(cx as *mut Vec<*mut pg_sys::Aggref>)).push(node as *mut pg_sys::Aggref),
            pg_sys::NodeTag::T_Query => return pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(collect), cx, 0),
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(collect), cx)
    }
}

/// A qualified function name: `nsp.name`.
unsafe fn qualified(nsp: *mut std::ffi::c_char, name: &CStr) -> *mut pg_sys::List {
    // SAFETY: makeString keeps the pointers; both live for the statement.
    unsafe {
        let l = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeString(nsp) as *mut std::ffi::c_void);
        pg_sys::lappend(l, pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())) as *mut std::ffi::c_void)
    }
}

/// Rewrites one call of the polymorphic `cf_sharded_agg`, if it is one.
unsafe fn rewrite(a: *mut pg_sys::Aggref) {
    // SAFETY: `a` is a live Aggref of the query being planned; catalog
    // lookups may raise errors, which the hook's guard reports.
    unsafe {
        let agg = &mut *a;
        if agg.aggkind != b'n' as std::ffi::c_char || !agg.aggorder.is_null() || !agg.aggdistinct.is_null() || agg.args.is_null() {
            return;
        }
        let name = pg_sys::get_func_name(agg.aggfnoid);
        if name.is_null() || CStr::from_ptr(name) != c"cf_sharded_agg" {
            return;
        }
        let nargs = (*agg.args).length as usize;
        if !(1..=3).contains(&nargs) || agg.aggargtypes.is_null() || (*agg.aggargtypes).length as usize != nargs {
            return;
        }
        // Only the polymorphic declarations: the key declared `anyelement`.
        let mut decl_types: *mut pg_sys::Oid = std::ptr::null_mut();
        let mut decl_n: std::ffi::c_int = 0;
        pg_sys::get_func_signature(agg.aggfnoid, &mut decl_types, &mut decl_n);
        if decl_n as usize != nargs || *decl_types != pg_sys::ANYELEMENTOID {
            return;
        }
        let nsp_oid = pg_sys::get_func_namespace(agg.aggfnoid);
        let nsp = pg_sys::get_namespace_name(nsp_oid);
        if nsp.is_null() {
            return;
        }
        let mut key_args = [pg_sys::ANYELEMENTOID, pg_sys::FLOAT8OID, pg_sys::INT8OID];
        let key_fn = pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_key"), nargs as i32, key_args.as_mut_ptr(), true);
        if key_fn == pg_sys::InvalidOid {
            // An extension not yet updated to 0.9.0.
            return;
        }
        let state_type = pg_sys::get_func_rettype(key_fn);
        let state_agg = pg_sys::LookupFuncName(qualified(nsp, c"cf_sharded_agg"), 1, &state_type, true);
        if state_agg == pg_sys::InvalidOid {
            return;
        }
        // cf_sharded_key(the aggregate's arguments), with the key's collation.
        let mut args: *mut pg_sys::List = std::ptr::null_mut();
        for i in 0..nargs {
            let te = (*(*agg.args).elements.add(i)).ptr_value as *mut pg_sys::TargetEntry;
            args = pg_sys::lappend(args, (*te).expr as *mut std::ffi::c_void);
        }
        let call = pg_sys::makeFuncExpr(key_fn, state_type, args, pg_sys::InvalidOid, agg.inputcollid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL);
        let te = pg_sys::makeTargetEntry(call as *mut pg_sys::Expr, 1, std::ptr::null_mut(), false);
        agg.aggfnoid = state_agg;
        agg.args = pg_sys::lappend(std::ptr::null_mut(), te as *mut std::ffi::c_void);
        agg.aggargtypes = pg_sys::lappend_oid(std::ptr::null_mut(), state_type);
        agg.inputcollid = pg_sys::InvalidOid;
    }
}
