//! cuckoo: cuckoo filters for PostgreSQL.
//!
//! `filter` is the core (no pgrx); `sql` is the PostgreSQL glue, built with the
//! default `pg15` feature. `cargo test --no-default-features --lib` tests the core
//! alone, which also proves it does not depend on pgrx.

pub mod filter;
pub mod region;

#[cfg(feature = "pgrx")]
mod sql;

#[cfg(feature = "pgrx")]
pgrx::pg_module_magic!();

/// Registers `cuckoo.shared_memory` and, when preloaded, the shared-memory hooks.
#[cfg(feature = "pgrx")]
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    sql::install_core_hooks();
    sql::named::init();
    sql::citus::hook::init();
}

#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/cuckoo.sql", name = "cuckoo_schema", finalize);

#[cfg(feature = "pg_test")]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries='cuckoo'"]
    }
}
