-- cuckoo 0.3.0 -> 0.4.0.
--
-- 0.4.0 teaches the planner what a filter passes and adds batched probes and a
-- shippable aggregate:
-- - every cf_contains has the planner support function cf_contains_support
--   (row estimates from the filter probing the key column's statistics, and the
--   probe's cost);
-- - cf_contains(cuckoofilter, keys anyarray) and cf_contains(name text, keys
--   anyarray) return one answer per element (boolean[]). So that a call with an
--   array resolves to them, the one-key forms now take anynonarray instead of
--   anyelement (as PostgreSQL's own anynonarray || text does); a key that is
--   itself an array is probed with the new cf_contains_key;
-- - cf_sharded_agg, cf_agg with a bytea state and a combine function, for
--   engines that combine partial states across nodes (Citus).
-- Stored cuckoofilter values and named filters are unchanged.
--
-- The one-key cf_contains keep their identity (their OID): their argument type
-- is changed in place in pg_proc, as no ALTER FUNCTION can, so that views,
-- functions and privileges that refer to them stay as they are. The catalog
-- after this script equals a fresh 0.4.0 install's; tests/upgrade.sh checks
-- that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.4.0'" to load this file. \quit

-- First, a function that only 0.4.0's library has: while the server still runs
-- an older library (it is preloaded: restart after installing), the update
-- stops here with "could not find function", before anything changed.
CREATE FUNCTION cf_contains_support(internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_contains_support' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Stored calls (views, rules, defaults, index expressions, policies, SQL-standard
-- function bodies) keep calling the same functions. One that passes an
-- array-valued key keeps probing it as one key, but its definition now reads as
-- the batched form: a dump and restore would turn it into the batched probe.
DO $$
DECLARE
    n bigint;
BEGIN
    SELECT pg_catalog.count(DISTINCT (d.classid, d.objid)) INTO n FROM pg_catalog.pg_depend d
     WHERE d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype = 'n'
       AND d.refobjid IN ('@extschema@.cf_contains(@extschema@.cuckoofilter, pg_catalog.anyelement)'::pg_catalog.regprocedure,
                          '@extschema@.cf_contains(pg_catalog.text, pg_catalog.anyelement)'::pg_catalog.regprocedure);
    IF n > 0 THEN
        RAISE WARNING '% stored object(s) call the one-key cf_contains', n
            USING DETAIL = 'They keep working. One that passes a key that is itself an array would become a batched probe (returning boolean[]) when dumped and restored.',
                  HINT = 'Rewrite such calls with cf_contains_key(f, key) before the next dump.';
    END IF;
END $$;

UPDATE pg_catalog.pg_proc
   SET proargtypes = pg_catalog.format('%s %s', proargtypes[0], 'pg_catalog.anynonarray'::pg_catalog.regtype::pg_catalog.oid)::pg_catalog.oidvector
 WHERE oid IN ('@extschema@.cf_contains(@extschema@.cuckoofilter, pg_catalog.anyelement)'::pg_catalog.regprocedure,
               '@extschema@.cf_contains(pg_catalog.text, pg_catalog.anyelement)'::pg_catalog.regprocedure);
ALTER FUNCTION cf_contains(cuckoofilter, anynonarray) SUPPORT cf_contains_support;
ALTER FUNCTION cf_contains(text, anynonarray) SUPPORT cf_contains_support;

CREATE FUNCTION cf_contains(cuckoofilter, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_value_many' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(cuckoofilter, anyarray) IS 'cf_contains for every element of an array at once (batched, prefetching lookups); NULL for NULL elements';
-- cf_contains_key: the one-key probe for a key of any type, arrays included
-- (cf_contains with an array probes its elements).
CREATE FUNCTION cf_contains_key(cuckoofilter, anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_key(cuckoofilter, anyelement) IS 'cf_contains for one key of any type, an array key included: false: definitely absent; true: may be present';
CREATE FUNCTION cf_contains(name text, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_named_many' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(text, anyarray) IS 'cf_contains by name for every element of an array at once; NULL for NULL elements';
CREATE FUNCTION cf_contains_key(name text, key anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_key(text, anyelement) IS 'cf_contains by name for one key of any type, an array key included';

CREATE FUNCTION cf_sharded_trans(bytea, anyelement) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, anyelement, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, anyelement, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_combine(bytea, bytea) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_final(bytea) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cf_sharded_agg(anyelement) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(anyelement) IS 'cf_agg with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(anyelement, float8) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(anyelement, float8) IS 'cf_agg(key, fpp) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(anyelement, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(anyelement, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
-- The same for keys of these types, declared exactly: Citus runs an aggregate on
-- its workers only when the declared argument types equal the arguments' (a
-- polymorphic declaration never does), and calls the transition function
-- without a call expression, so the key's type comes from the declaration.
CREATE FUNCTION cf_sharded_trans(bytea, smallint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, smallint, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, smallint, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, integer) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, integer, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, integer, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, bigint, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, bigint, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, text) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, text, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, text, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, uuid) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, uuid, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, uuid, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cf_sharded_agg(smallint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(smallint) IS 'cf_agg with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(smallint, float8) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(smallint, float8) IS 'cf_agg(key, fpp) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(smallint, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(smallint, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(integer) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(integer) IS 'cf_agg with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(integer, float8) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(integer, float8) IS 'cf_agg(key, fpp) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(integer, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(integer, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(bigint) IS 'cf_agg with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(bigint, float8) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(bigint, float8) IS 'cf_agg(key, fpp) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(bigint, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(bigint, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(text) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(text) IS 'cf_agg with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(text, float8) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(text, float8) IS 'cf_agg(key, fpp) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(text, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(text, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(uuid) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(uuid) IS 'cf_agg with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(uuid, float8) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(uuid, float8) IS 'cf_agg(key, fpp) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(uuid, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_trans,
    STYPE = bytea,
    SSPACE = 8220,
    FINALFUNC = cf_sharded_final,
    COMBINEFUNC = cf_sharded_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(uuid, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a bytea state and a combine function, for engines that combine partial states across nodes (Citus)';
