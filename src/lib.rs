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
    // Before named::init, which reserves the cuckoo. prefix at its end.
    sql::bound::init();
    sql::named::init();
    sql::citus::hook::init();
}

// The install script of the current version, cuckoo--<version>.sql: the files of
// sql/src/ in this order (each requires the one before it).
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/values.sql", name = "cuckoo_values", bootstrap);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/aggregates.sql", name = "cuckoo_aggregates", requires = ["cuckoo_values"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/sharded.sql", name = "cuckoo_sharded", requires = ["cuckoo_aggregates"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/named.sql", name = "cuckoo_named", requires = ["cuckoo_sharded"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/saved.sql", name = "cuckoo_saved", requires = ["cuckoo_named"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/bound.sql", name = "cuckoo_bound", requires = ["cuckoo_saved"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/views.sql", name = "cuckoo_views", requires = ["cuckoo_bound"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/citus.sql", name = "cuckoo_citus", requires = ["cuckoo_views"], finalize);

#[cfg(feature = "pg_test")]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries='cuckoo'"]
    }
}
