//! `#[pg_test]`s of the sharded aggregate's transition function.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

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
}
