//! The PostgreSQL glue: key hashing for any SQL type (`keys`), the
//! `cuckoofilter` value type with its functions and aggregates (`value`), named
//! filters in shared memory with their WAL and durability (`named`), batched
//! probes (`batch`), the planner support (`planner`) serving both, errors both
//! raise (`errors`), and what cuckoo does beside Citus (`citus`). Functions are
//! plain version-1 C functions so they can read arguments in place and cache per
//! call site in `fn_extra`; their SQL declarations are in `sql/`.

/// Defines version-1 fmgr functions: each body runs under pgrx's guard (Rust
/// panics and `ereport!` become PostgreSQL errors), and each gets its `pg_finfo_`
/// record.
macro_rules! v1_functions {
    ($( $(#[$meta:meta])* fn $name:ident($fcinfo:ident) $body:block )*) => {
        $(
            $(#[$meta])*
            #[unsafe(no_mangle)]
            pub unsafe extern "C-unwind" fn $name($fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
                let body = move || $body;
                // SAFETY: PostgreSQL calls this with a valid frame; the guard turns
                // panics and error reports into a PostgreSQL ERROR at this boundary.
                unsafe { ::pgrx::pg_sys::submodules::panic::pgrx_extern_c_guard(body) }
            }

            #[allow(non_snake_case)]
            pub mod $name {
                #[unsafe(export_name = concat!("pg_finfo_", stringify!($name)))]
                pub extern "C" fn finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
                    const V1: ::pgrx::pg_sys::Pg_finfo_record = ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
                    &V1
                }
            }
        )*
    };
}

// Only downward imports: `keys` serves both forms; `value` uses `keys`; `named`
// uses `keys` and `value` (a value published into or snapshotted from a named
// filter); `batch` and `planner` serve both and use all three; `citus` holds
// the planner hook on Citus, which uses `named`, and the `cf_sharded_agg`
// rewrite, which uses `keys`.
pub mod batch;
pub mod bound;
pub mod citus;
pub mod errors;
pub mod keys;
pub mod named;
pub mod planner;
pub mod value;

// The planner that runs after our planner hooks when no other hook was
// installed before them, called by its symbol: an ERROR it raises must reach
// PostgreSQL's handler as the longjmp it is (through the hook's frame, which
// holds nothing to drop), not as a Rust panic.
unsafe extern "C-unwind" {
    #[link_name = "standard_planner"]
    fn raw_standard_planner(
        parse: *mut pgrx::pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pgrx::pg_sys::ParamListInfo,
    ) -> *mut pgrx::pg_sys::PlannedStmt;
}

/// Calls the planner hook that was installed before one of ours (`prev`), or
/// PostgreSQL's own planner if there was none (`citus::hook`,
/// `bound::prescreen`).
///
/// # Safety
/// The arguments are a planner hook's own, passed on.
pub(crate) unsafe fn call_planner(
    prev: pgrx::pg_sys::planner_hook_type,
    parse: *mut pgrx::pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pgrx::pg_sys::ParamListInfo,
) -> *mut pgrx::pg_sys::PlannedStmt {
    // SAFETY: as documented.
    unsafe {
        match prev {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => raw_standard_planner(parse, query_string, cursor_options, bound_params),
        }
    }
}

// PostgreSQL's own ProcessUtility, called by its symbol for the same reason.
unsafe extern "C-unwind" {
    #[link_name = "standard_ProcessUtility"]
    fn raw_standard_process_utility(
        pstmt: *mut pgrx::pg_sys::PlannedStmt,
        query_string: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pgrx::pg_sys::ProcessUtilityContext::Type,
        params: pgrx::pg_sys::ParamListInfo,
        query_env: *mut pgrx::pg_sys::QueryEnvironment,
        dest: *mut pgrx::pg_sys::DestReceiver,
        qc: *mut pgrx::pg_sys::QueryCompletion,
    );
}

/// Calls the utility hook that was installed before one of ours (`prev`),
/// or PostgreSQL's own if there was none (`named::roles`, `bound::trigger`).
///
/// # Safety
/// The arguments are a utility hook's own, passed on.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn call_process_utility(
    prev: pgrx::pg_sys::ProcessUtility_hook_type,
    pstmt: *mut pgrx::pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pgrx::pg_sys::ProcessUtilityContext::Type,
    params: pgrx::pg_sys::ParamListInfo,
    query_env: *mut pgrx::pg_sys::QueryEnvironment,
    dest: *mut pgrx::pg_sys::DestReceiver,
    qc: *mut pgrx::pg_sys::QueryCompletion,
) {
    // SAFETY: as documented.
    unsafe {
        match prev {
            Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            None => {
                raw_standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc)
            }
        }
    }
}

/// Runs `f` with setting `name` at `value` in a GUC nest level of its own,
/// as a function's SET clause does: restored after, and on error by the
/// transaction's abort (`citus` turns Citus settings on this way; `bound`
/// pins `search_path`).
pub(crate) fn with_setting<T>(name: &std::ffi::CStr, value: &std::ffi::CStr, f: impl FnOnce() -> T) -> T {
    // SAFETY: a GUC nest level opened here and closed after `f`.
    let level = unsafe {
        let level = pgrx::pg_sys::NewGUCNestLevel();
        pgrx::pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pgrx::pg_sys::GucContext::PGC_USERSET,
            pgrx::pg_sys::GucSource::PGC_S_SESSION,
            pgrx::pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    };
    let out = f();
    // SAFETY: closes the level opened above.
    unsafe { pgrx::pg_sys::AtEOXact_GUC(true, level) };
    out
}

/// What the filter core does on a pending interrupt or a failed allocation
/// (`filter::host`): this backend's cancel, `statement_timeout` and
/// termination end a long build, union or decode; memory that cannot be had
/// is an ERROR (53200) in this backend, as PostgreSQL's own allocations are.
pub fn install_core_hooks() {
    fn interrupts() {
        pgrx::check_for_interrupts!();
    }
    fn out_of_memory(bytes: u64) -> ! {
        use pgrx::prelude::*;
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            "out of memory",
            format!("Failed on request of size {bytes} bytes.")
        );
    }
    fn pending() -> bool {
        // SAFETY: a read of the flag PostgreSQL's signal handlers set, from
        // the backend's own thread (the core asks only from the caller's).
        unsafe { std::ptr::read_volatile(std::ptr::addr_of!(pgrx::pg_sys::InterruptPending)) != 0 }
    }
    crate::filter::set_interrupt_check(interrupts);
    crate::filter::set_interrupt_pending(pending);
    crate::filter::set_out_of_memory(out_of_memory);
    planner::sample::init();
    value::aggregate::init();
}
