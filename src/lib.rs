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
    sql::hook::init();
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
pgrx::extension_sql_file!("../sql/src/views.sql", name = "cuckoo_views", requires = ["cuckoo_saved"]);
#[cfg(feature = "pgrx")]
pgrx::extension_sql_file!("../sql/src/citus.sql", name = "cuckoo_citus", requires = ["cuckoo_views"], finalize);

#[cfg(feature = "pg_test")]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// A checkpoint, and the cut of a durable filter it makes, must not wait for
    /// a reader: this backend stays pinned as a reader throughout (as a long
    /// batched lookup or snapshot copy is), so a checkpoint that waited for it
    /// would never finish.
    #[pg_test]
    fn checkpoints_do_not_wait_for_readers() {
        Spi::run("SELECT cf_create('ck_reader', 100000)").unwrap();
        Spi::run("SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_insert('ck_reader', g)").unwrap();
        crate::sql::named::attach::with_reader_pin(|| {
            // A checkpoint that waited for this reader would never end: fail
            // instead of hanging.
            Spi::run("SET LOCAL statement_timeout = '60s'").unwrap();
            Spi::run("CHECKPOINT").unwrap();
            // A cut of the filter happened while this process was pinned.
            let written =
                Spi::get_one::<i64>("SELECT checkpoint_write_bytes FROM cuckoo_filters WHERE name = 'ck_reader'")
                    .unwrap()
                    .unwrap();
            assert!(written > 0, "no cut was written");
            // A snapshot's writer pause does not wait for readers either.
            let snap = Spi::get_one::<bool>("SELECT cf_contains(cf_snapshot('ck_reader'), 500)").unwrap();
            assert_eq!(snap, Some(true));
        });
    }

    #[pg_test]
    fn value_round_trips_through_text() {
        let out = Spi::get_one::<String>("SELECT cf_agg(g)::text FROM generate_series(1, 1000) g").unwrap().unwrap();
        assert!(out.starts_with("cf2:"));
        let back = Spi::get_one::<bool>(&format!("SELECT '{out}'::cuckoofilter::text = '{out}'")).unwrap();
        assert_eq!(back, Some(true));
    }

    #[pg_test]
    fn sharded_transition_works_without_a_call_expression() {
        // As Citus calls an aggregate's transition function on its workers: looked
        // up by OID, with no call expression to tell the key's type, which then
        // comes from the declaration.
        let oid = Spi::get_one::<pg_sys::Oid>("SELECT 'cf_sharded_trans(bytea, bigint)'::regprocedure::oid")
            .unwrap()
            .unwrap();
        let first = Spi::get_one::<Vec<u8>>("SELECT cf_sharded_trans(NULL, 1::bigint)").unwrap().unwrap();
        // SAFETY: a function of (bytea, bigint) -> bytea called with a bytea and an
        // int8 datum; the result is a non-null bytea.
        let second = unsafe {
            let mut flinfo: pg_sys::FmgrInfo = std::mem::zeroed();
            pg_sys::fmgr_info(oid, &mut flinfo);
            let state = first.into_datum().unwrap();
            let out = pg_sys::FunctionCall2Coll(&mut flinfo, pg_sys::InvalidOid, state, pg_sys::Datum::from(2i64));
            Vec::<u8>::from_datum(out, false).unwrap()
        };
        let same = Spi::get_one_with_args::<bool>(
            "SELECT cf_sharded_final($1)::text = (SELECT cf_agg(g::bigint)::text FROM generate_series(1, 2) g)",
            &[second.into()],
        )
        .unwrap();
        assert_eq!(same, Some(true));
        // A polymorphic declaration cannot say the type: a clear error.
        let poly = Spi::get_one::<pg_sys::Oid>("SELECT 'cf_sharded_trans(bytea, anyelement)'::regprocedure::oid")
            .unwrap()
            .unwrap();
        let err = PgTryBuilder::new(|| {
            // SAFETY: as above, with the polymorphic declaration.
            unsafe {
                let mut flinfo: pg_sys::FmgrInfo = std::mem::zeroed();
                pg_sys::fmgr_info(poly, &mut flinfo);
                pg_sys::FunctionCall2Coll(
                    &mut flinfo,
                    pg_sys::InvalidOid,
                    Vec::<u8>::new().into_datum().unwrap(),
                    pg_sys::Datum::from(2i64),
                );
            }
            false
        })
        .catch_others(|_| true)
        .execute();
        assert!(err);
    }

    #[pg_test]
    fn toasted_filter_is_read_through_the_cache() {
        // A filter stored in a table is toasted (storage external); probing it from
        // every row must give the same answers as the in-memory value.
        Spi::run("CREATE TABLE fs AS SELECT cf_agg(g) f FROM generate_series(1, 100000) g").unwrap();
        let hits =
            Spi::get_one::<i64>("SELECT count(*) FROM generate_series(1, 100000) k, fs WHERE cf_contains(fs.f, k)")
                .unwrap();
        assert_eq!(hits, Some(100000));
    }

    #[pg_test]
    fn cache_replaced_on_every_row_gives_right_answers() {
        // Two filters just over 4 MB (cached in huge-page mappings) and a small one,
        // probed alternately: the per-call-site cache swaps (and unmaps) on every
        // call and must never answer from the wrong filter.
        Spi::run(
            "CREATE TABLE alt AS
               SELECT 1 AS id, cf_agg(g) AS f FROM generate_series(1, 3000000) g
               UNION ALL SELECT 2, cf_agg(g) FROM generate_series(5000001, 8000000) g
               UNION ALL SELECT 3, cf_agg(g) FROM generate_series(1, 10) g",
        )
        .unwrap();
        let big =
            Spi::get_one::<bool>("SELECT bool_and((cf_info(f) ->> 'bytes')::int > 4 << 20) FROM alt WHERE id < 3")
                .unwrap();
        assert_eq!(big, Some(true));
        let per_filter = Spi::get_one::<String>(
            "SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM (
               SELECT id, count(*) FILTER (WHERE cf_contains(f, k)) AS n
               FROM (SELECT k FROM generate_series(1, 300) k UNION ALL SELECT 5000000 + k FROM generate_series(1, 300) k) ks
               CROSS JOIN LATERAL (SELECT * FROM alt WHERE ks.k > 0 ORDER BY id) a GROUP BY id) s",
        )
        .unwrap()
        .unwrap();
        // Of the 600 probes, filter 1 holds 300, filter 2 the other 300, filter 3
        // ten. At a false-positive rate under 0.2%, more than 5 extra hits would
        // mean answers from the wrong filter (a wrong filter gives 300 extra).
        let counts: Vec<i64> = per_filter.split(',').map(|p| p.split(':').nth(1).unwrap().parse().unwrap()).collect();
        assert!((300..305).contains(&counts[0]), "{per_filter}");
        assert!((300..305).contains(&counts[1]), "{per_filter}");
        assert!((10..15).contains(&counts[2]), "{per_filter}");
    }
}

#[cfg(feature = "pg_test")]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries='cuckoo'"]
    }
}
