-- cuckoo 0.11.0 -> 0.12.0.
--
-- 0.12.0 makes a cluster copy on Citus the published filter on every node or
-- an error (issue 30). Stored values are unchanged.
-- The catalog after this script equals a fresh 0.12.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.12.0'" to load this file. \quit

-- The server must run 0.12.0's library or a later one (it is preloaded:
-- restart after installing), or nothing changes. (A later library runs this
-- step on the way to its own version.)
DO $check$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,12,0}'::int[] THEN
        RAISE EXCEPTION 'cuckoo: this session runs the library of cuckoo %, older than 0.12.0', @extschema@.cuckoo_library_version()
            USING HINT = 'Install 0.12.0''s files, restart the server (the library is preloaded), then update.';
    END IF;
END
$check$;

-- ==== Cluster copies: versioned, two-phase publish (issue 30, items 1, 2, 4, 6) ====

-- ==== Key types recorded as cf_agg records them (issue 30, item 5) ====
-- Every aggregate's final function is given the aggregate's arguments
-- (always NULL, FINALFUNC_EXTRA), whose types name the key type where no row
-- and no Aggref says it (a window frame with no rows). The aggregates keep
-- their identity (OID): their final function is changed in place in
-- pg_aggregate, as no ALTER AGGREGATE can, so that views that call them stay
-- as they are. The final functions over the state alone stay, for aggregates
-- made with them. Only the extension's own aggregates are changed.
CREATE FUNCTION cf_agg_final(internal, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal, anyelement, float8) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal, anyelement, float8, bigint) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state, anyelement, float8) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state, anyelement, float8, bigint) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- (Operators are named with their schema: a role with CREATE on this
-- schema must not be able to slip one of its own into the update.)
WITH own AS (
    SELECT a.aggfnoid::pg_catalog.oid AS agg, a.aggfinalfn::pg_catalog.oid AS old_final,
           pg_catalog.format(CASE WHEN p.proname OPERATOR(pg_catalog.=) 'cf_agg'::pg_catalog.name
                                  THEN '@extschema@.cf_agg_final(pg_catalog.internal, %s)'
                                  ELSE '@extschema@.cf_sharded_state_final(@extschema@.cf_sharded_state, %s)' END,
                             CASE WHEN p.pronargs OPERATOR(pg_catalog.=) 1::pg_catalog.int2 THEN 'pg_catalog.anyelement'
                                  WHEN p.pronargs OPERATOR(pg_catalog.=) 2::pg_catalog.int2 THEN 'pg_catalog.anyelement, pg_catalog.float8'
                                  ELSE 'pg_catalog.anyelement, pg_catalog.float8, pg_catalog.int8' END
                            )::pg_catalog.regprocedure::pg_catalog.oid AS new_final
      FROM pg_catalog.pg_aggregate a JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) a.aggfnoid::pg_catalog.oid
     WHERE p.proname OPERATOR(pg_catalog.=) ANY ('{cf_agg,cf_sharded_agg}'::pg_catalog.name[])
       AND p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace::pg_catalog.oid
       AND NOT a.aggfinalextra
       AND a.aggfinalfn::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
             '@extschema@.cf_agg_final(pg_catalog.internal)'::pg_catalog.regprocedure::pg_catalog.oid,
             '@extschema@.cf_sharded_state_final(@extschema@.cf_sharded_state)'::pg_catalog.regprocedure::pg_catalog.oid])
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend m
                    WHERE m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
                      AND m.objid OPERATOR(pg_catalog.=) a.aggfnoid::pg_catalog.oid
                      AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
                      AND m.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog."char"
                      AND m.refobjid OPERATOR(pg_catalog.=) (SELECT x.oid FROM pg_catalog.pg_extension x
                                                              WHERE x.extname OPERATOR(pg_catalog.=) 'cuckoo'::pg_catalog.name))),
deps AS (
    UPDATE pg_catalog.pg_depend d SET refobjid = o.new_final
      FROM own o
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
       AND d.objid OPERATOR(pg_catalog.=) o.agg
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
       AND d.refobjid OPERATOR(pg_catalog.=) o.old_final
    RETURNING d.objid)
UPDATE pg_catalog.pg_aggregate a SET aggfinalfn = o.new_final::pg_catalog.regproc, aggfinalextra = true
  FROM own o
 WHERE a.aggfnoid::pg_catalog.oid OPERATOR(pg_catalog.=) o.agg;

-- char(n) and name keys have their own declarations too: given to the text
-- one, they are cast to text (cf_agg hashes and records them as their own
-- types, and so does cf_sharded_agg).
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, character) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, character, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, character, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, name) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, name, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, name, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE cf_sharded_agg(character) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(character) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(character, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(character, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(character, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(character, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(name) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(name) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(name, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(name, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(name, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(name, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';

-- On Citus, cuckoo's planner hook wraps every cf_sharded_agg call in
-- cf_sharded_typed(call, NULL::key type): with no rows the coordinator calls
-- the final function where the key's type is not in sight, and the empty
-- filter takes the key type cf_agg records (src/sql/value/rewrite.rs).
CREATE FUNCTION cf_sharded_typed(cuckoofilter, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_typed' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cf_sharded_typed(cuckoofilter, anyelement) IS 'the filter; one of no keys that records no key type records the type of the second argument (cf_sharded_agg on Citus over no rows)';
