-- The current version's SQL: the aggregates cf_agg (a filter of the keys) and
-- cf_union_agg (the union of filters), src/sql/value/aggregate.rs. Functions
-- are version-1 C functions; everything is immutable and parallel safe.
-- Joined into cuckoo--<version>.sql after values.sql, before sharded.sql (src/lib.rs).

-- cf_agg: the state is a list of key hashes (internal). Transition, combine and
-- final functions are not strict: they create the state on the first row and
-- skip NULL keys. They are immutable and parallel safe; they refuse to run outside
-- an aggregate.
CREATE FUNCTION cf_agg_trans(internal, anyelement) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_trans(internal, anyelement, float8) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_trans(internal, anyelement, float8, bigint) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_serial(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_agg_serial' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_agg_deserial(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_deserial' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
-- The final functions the aggregates call: their arguments after the state
-- (always NULL, FINALFUNC_EXTRA) name the key's type, which the filter
-- records also where no row and no Aggref says it (a window frame with no
-- rows). cf_agg_final(internal) stays, for aggregates made with it.
CREATE FUNCTION cf_agg_final(internal, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal, anyelement, float8) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal, anyelement, float8, bigint) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cf_agg(anyelement) (
    SFUNC = cf_agg_trans,
    STYPE = internal,
    FINALFUNC = cf_agg_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_agg_combine,
    SERIALFUNC = cf_agg_serial,
    DESERIALFUNC = cf_agg_deserial,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_agg(anyelement) IS 'a cuckoo filter of the distinct non-null keys, sized for them, false-positive rate at most 0.2%';

CREATE AGGREGATE cf_agg(anyelement, float8) (
    SFUNC = cf_agg_trans,
    STYPE = internal,
    FINALFUNC = cf_agg_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_agg_combine,
    SERIALFUNC = cf_agg_serial,
    DESERIALFUNC = cf_agg_deserial,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_agg(anyelement, float8) IS 'a cuckoo filter of the distinct non-null keys with the given false-positive rate';

-- Sized for at least `capacity` keys: filters built for the same capacity and fpp
-- have the same shape, so their union (cf_union, cf_union_agg) has room for all.
CREATE AGGREGATE cf_agg(anyelement, fpp float8, capacity bigint) (
    SFUNC = cf_agg_trans,
    STYPE = internal,
    FINALFUNC = cf_agg_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_agg_combine,
    SERIALFUNC = cf_agg_serial,
    DESERIALFUNC = cf_agg_deserial,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_agg(anyelement, float8, bigint) IS 'a cuckoo filter of the distinct non-null keys, sized for at least capacity keys';

CREATE FUNCTION cf_union_trans(cuckoofilter, cuckoofilter) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_union_trans' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE cf_union_agg(cuckoofilter) (
    SFUNC = cf_union_trans,
    STYPE = cuckoofilter,
    COMBINEFUNC = cf_union_trans,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_union_agg(cuckoofilter) IS 'the union of non-null filters of one shape (built with the same capacity and fpp)';
