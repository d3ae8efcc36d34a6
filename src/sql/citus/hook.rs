//! The planner hook, installed only when cuckoo is preloaded into a server
//! that also preloads Citus (Citus first, so that this hook runs before Citus
//! plans a query and the workers are sent the query as rewritten here):
//!
//! - `cf_sharded_agg` calls are rewritten so that the workers run them with
//!   the key's own type (`citus::rewrite`);
//! - by-name lookups are pinned to the publishes the cluster records when the
//!   query is planned (`named::pin`), and the plan then depends on that
//!   record, so a cached plan is made again after the next publish.

use pgrx::pg_sys;

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

/// From `_PG_init` while preloading: installs the hook if Citus is preloaded too.
pub fn init() {
    // SAFETY: _PG_init runs once in the postmaster before any planning; the
    // previous hook is kept and called.
    unsafe {
        if !pg_sys::process_shared_preload_libraries_in_progress || !super::citus_loaded() {
            return;
        }
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
    }
}

/// The hook: rewrites (guarded, so that its errors are PostgreSQL errors),
/// then calls the next planner (Citus's) directly; a plan whose lookups were
/// pinned lists the cluster's record among the relations it depends on.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's own arguments, passed on unchanged but for the
    // rewritten calls, which are planned as any call would be. No Rust value
    // with a destructor lives in this frame across the calls. The plan is
    // fresh, allocated in the planner's memory context, as the OID list
    // appended to it is.
    unsafe {
        super::rewrite::rewrite_query(parse);
        let record = crate::sql::named::pin::pin_query(parse);
        let plan = crate::sql::call_planner(PREV_PLANNER, parse, query_string, cursor_options, bound_params);
        if record != pg_sys::InvalidOid && !plan.is_null() && !pg_sys::list_member_oid((*plan).relationOids, record) {
            (*plan).relationOids = pg_sys::lappend_oid((*plan).relationOids, record);
        }
        plan
    }
}
