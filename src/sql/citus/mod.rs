//! What cuckoo does when Citus is preloaded too: the planner hook (`hook`),
//! the rewrite of `cf_sharded_agg` calls (`rewrite`), and what the named
//! filters' cluster copies (`named::citus`, `named::cluster`, `named::pin`) ask
//! of Citus. Citus is found by its exported symbols, never linked.

use std::ffi::CStr;

use pgrx::pg_sys;

pub mod hook;
pub mod rewrite;

/// Whether Citus is loaded into this server (preloaded: it must be, to run,
/// and first, before cuckoo). Recognised by what its library registers, a
/// function every Citus release exports, not by how `shared_preload_libraries`
/// spells it (`citus`, `$libdir/citus`, a full path). Libraries load only at
/// server start, so this is asked once per process: the named-filter checks
/// ask on every resolve.
pub fn citus_loaded() -> bool {
    static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: dlsym reads the process's global symbol table (PostgreSQL loads
    // libraries with RTLD_GLOBAL); the name is a NUL-terminated constant, and
    // the symbol is only compared with NULL, never called.
    *LOADED.get_or_init(|| unsafe { !libc::dlsym(libc::RTLD_DEFAULT, c"pg_finfo_citus_version".as_ptr()).is_null() })
}

/// Whether Citus knows `rel` (distributed, reference or local to its
/// metadata), asked of its own `IsCitusTable`; a Citus without it counts
/// every table.
pub fn citus_table(rel: pg_sys::Oid) -> bool {
    match is_citus_table() {
        // SAFETY: Citus's function, with its signature; an error it raises
        // comes back through the FFI boundary as a PostgreSQL error.
        Some(f) => unsafe { pg_sys::submodules::ffi::pg_guard_ffi_boundary(|| f(rel)) },
        None => true,
    }
}

/// Citus's `bool IsCitusTable(Oid)`, found by its symbol once per process.
fn is_citus_table() -> Option<unsafe extern "C-unwind" fn(pg_sys::Oid) -> bool> {
    static FOUND: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: dlsym reads the process's global symbol table (Citus is
    // preloaded with RTLD_GLOBAL); the symbol is Citus's exported
    // `bool IsCitusTable(Oid relationId)` (every release since 10), called
    // only with that signature.
    let addr = *FOUND.get_or_init(|| unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"IsCitusTable".as_ptr()) as usize });
    (addr != 0).then(|| {
        // SAFETY: addr is that symbol's address, as said above.
        unsafe { std::mem::transmute::<usize, unsafe extern "C-unwind" fn(pg_sys::Oid) -> bool>(addr) }
    })
}

/// A qualified function name: `nsp.name`.
pub unsafe fn qualified(nsp: *mut std::ffi::c_char, name: &CStr) -> *mut pg_sys::List {
    // SAFETY: makeString keeps the pointers; both live for the statement.
    unsafe {
        let l = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeString(nsp) as *mut std::ffi::c_void);
        pg_sys::lappend(l, pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())) as *mut std::ffi::c_void)
    }
}
