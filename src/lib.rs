//! cuckoo: cuckoo filters for PostgreSQL.
//!
//! `filter` is the core (no pgrx); `sql` is the PostgreSQL glue, built with the
//! default `pg15` feature. `cargo test --no-default-features --lib` tests the core
//! alone, which also proves it does not depend on pgrx.

pub mod filter;

#[cfg(feature = "pgrx")]
mod sql;

#[cfg(feature = "pgrx")]
pgrx::pg_module_magic!();

#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/cuckoo.sql", name = "cuckoo_schema", finalize);

#[cfg(feature = "pg_test")]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn value_round_trips_through_text() {
        let out = Spi::get_one::<String>("SELECT cf_agg(g)::text FROM generate_series(1, 1000) g").unwrap().unwrap();
        assert!(out.starts_with("cf1:"));
        let back = Spi::get_one::<bool>(&format!("SELECT '{out}'::cuckoofilter::text = '{out}'")).unwrap();
        assert_eq!(back, Some(true));
    }

    #[pg_test]
    fn toasted_filter_is_read_through_the_cache() {
        // A filter stored in a table is toasted (storage external); probing it from
        // every row must give the same answers as the in-memory value.
        Spi::run("CREATE TABLE fs AS SELECT cf_agg(g) f FROM generate_series(1, 100000) g").unwrap();
        let hits = Spi::get_one::<i64>(
            "SELECT count(*) FROM generate_series(1, 100000) k, fs WHERE cf_contains(fs.f, k)",
        )
        .unwrap();
        assert_eq!(hits, Some(100000));
    }
}

#[cfg(feature = "pg_test")]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries='cuckoo'"]
    }
}
