//! `#[pg_test]`s of checkpoint cuts.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

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
}
