-- cuckoo 0.8.0 -> 0.9.0.
--
-- 0.9.0 makes named filters safe on a Citus cluster: in a backend that runs
-- part of a distributed query for another node, a by-name call uses this
-- node's filter only if the new table cuckoo_cluster_filters lists it (a copy
-- published to every node by cf_publish_cluster, or a filter declared
-- node-local by cf_node_local); anything else fails with an error and a hint
-- instead of answering from a filter that holds only part of the keys.
-- cf_sharded_agg gets a state type of its own, cf_sharded_state, whose text
-- form (what Citus ships between nodes) holds each distinct key hash once,
-- Rice-coded, instead of a bytea's hex of a buffer rounded up to a power of
-- two; and cf_sharded_key, through which a key of any type is aggregated on
-- Citus. The aggregates keep their identity (OID): their state type and
-- support functions are changed in place in pg_aggregate, as no ALTER
-- AGGREGATE can, so that views that call them stay as they are. The bytea
-- state functions stay, for states of earlier releases.
-- Stored values, named filters and the WAL are unchanged.
-- The catalog after this script equals a fresh 0.9.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.9.0'" to load this file. \quit

-- First, functions that only 0.9.0's library has: while the server still runs
-- an older library (it is preloaded: restart after installing), the update
-- stops here with "could not find function", before anything changed.
-- cf_sharded_state: cf_sharded_agg's state, the keys' hashes (and the rows'
-- fpp and capacity). In memory it grows in place; its text and binary forms,
-- which engines such as Citus ship between nodes, hold each distinct hash once,
-- sorted and Rice-coded ("cs1:" and base64; src/sql/value/sharded.rs).
CREATE TYPE cf_sharded_state;
CREATE FUNCTION cf_sharded_state_in(cstring) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_state_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_out(cf_sharded_state) RETURNS cstring
    AS 'MODULE_PATHNAME', 'cf_sharded_state_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_recv(internal) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_state_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_send(cf_sharded_state) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_state_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE cf_sharded_state (
    INPUT = cf_sharded_state_in,
    OUTPUT = cf_sharded_state_out,
    RECEIVE = cf_sharded_state_recv,
    SEND = cf_sharded_state_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = double,
    STORAGE = extended
);
COMMENT ON TYPE cf_sharded_state IS 'the partial state of cf_sharded_agg: the distinct key hashes, shipped between nodes in a dense form';

-- cf_sharded_agg's support functions over the new state type.
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, anyelement) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, anyelement, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, anyelement, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_combine(cf_sharded_state, cf_sharded_state) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, smallint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, smallint, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, smallint, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, integer) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, integer, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, integer, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, bigint, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, bigint, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, text) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, text, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, text, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, uuid) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, uuid, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, uuid, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Every cf_sharded_agg switches to them in place: its dependencies first, then
-- its pg_aggregate row, then its comment. Only the extension's own (a role
-- with CREATE on this schema may have made an aggregate of that name: it is
-- left as it is).
WITH switch AS (
    SELECT a.aggfnoid AS agg, a.aggtransfn AS old_trans, a.aggcombinefn AS old_combine, a.aggfinalfn AS old_final,
           pg_catalog.format('@extschema@.cf_sharded_state_trans(@extschema@.cf_sharded_state, %s)',
                             pg_catalog.oidvectortypes(p.proargtypes))::pg_catalog.regprocedure AS new_trans,
           '@extschema@.cf_sharded_state_combine(@extschema@.cf_sharded_state, @extschema@.cf_sharded_state)'::pg_catalog.regprocedure AS new_combine,
           '@extschema@.cf_sharded_state_final(@extschema@.cf_sharded_state)'::pg_catalog.regprocedure AS new_final
      FROM pg_catalog.pg_aggregate a JOIN pg_catalog.pg_proc p ON p.oid = a.aggfnoid
     WHERE p.proname = 'cf_sharded_agg' AND p.pronamespace = '@extschema@'::pg_catalog.regnamespace
       AND a.aggtranstype = 'pg_catalog.bytea'::pg_catalog.regtype
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend m
                    WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = a.aggfnoid
                      AND m.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND m.deptype = 'e'
                      AND m.refobjid = (SELECT x.oid FROM pg_catalog.pg_extension x WHERE x.extname = 'cuckoo')))
UPDATE pg_catalog.pg_depend d
   SET refobjid = CASE d.refobjid WHEN s.old_trans THEN s.new_trans WHEN s.old_combine THEN s.new_combine ELSE s.new_final END
  FROM switch s
 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = s.agg
   AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.refobjid IN (s.old_trans, s.old_combine, s.old_final);
UPDATE pg_catalog.pg_aggregate a
   SET aggtransfn = pg_catalog.format('@extschema@.cf_sharded_state_trans(@extschema@.cf_sharded_state, %s)',
                                      pg_catalog.oidvectortypes(p.proargtypes))::pg_catalog.regprocedure,
       aggcombinefn = '@extschema@.cf_sharded_state_combine(@extschema@.cf_sharded_state, @extschema@.cf_sharded_state)'::pg_catalog.regprocedure,
       aggfinalfn = '@extschema@.cf_sharded_state_final(@extschema@.cf_sharded_state)'::pg_catalog.regprocedure,
       aggtranstype = '@extschema@.cf_sharded_state'::pg_catalog.regtype,
       aggtransspace = 200
  FROM pg_catalog.pg_proc p
 WHERE p.oid = a.aggfnoid AND p.proname = 'cf_sharded_agg' AND p.pronamespace = '@extschema@'::pg_catalog.regnamespace
   AND a.aggtranstype = 'pg_catalog.bytea'::pg_catalog.regtype
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend m
                    WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = a.aggfnoid
                      AND m.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND m.deptype = 'e'
                      AND m.refobjid = (SELECT x.oid FROM pg_catalog.pg_extension x WHERE x.extname = 'cuckoo'));
UPDATE pg_catalog.pg_description d
   SET description = pg_catalog.replace(d.description, 'with a bytea state', 'with a compact state (cf_sharded_state)')
  FROM pg_catalog.pg_proc p
 WHERE d.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objoid = p.oid AND d.objsubid = 0
   AND p.proname = 'cf_sharded_agg' AND p.pronamespace = '@extschema@'::pg_catalog.regnamespace
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend m
                    WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = p.oid
                      AND m.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND m.deptype = 'e'
                      AND m.refobjid = (SELECT x.oid FROM pg_catalog.pg_extension x WHERE x.extname = 'cuckoo'));

-- cf_sharded_agg of keys of any type through one declaration that Citus can run
-- on its workers: cf_sharded_agg(cf_sharded_key(key)). On a cluster with Citus,
-- cuckoo's planner hook rewrites cf_sharded_agg(key) so for key types that have
-- no cf_sharded_agg of their own (src/sql/value/rewrite.rs).
CREATE FUNCTION cf_sharded_key(anyelement) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_key(anyelement, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_key(anyelement, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cf_sharded_key(anyelement) IS 'the cf_sharded_agg state of one key';
COMMENT ON FUNCTION cf_sharded_key(anyelement, float8) IS 'the cf_sharded_agg state of one key and an fpp';
COMMENT ON FUNCTION cf_sharded_key(anyelement, float8, bigint) IS 'the cf_sharded_agg state of one key, an fpp and a capacity';
CREATE AGGREGATE cf_sharded_agg(cf_sharded_state) (
    SFUNC = cf_sharded_state_combine,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(cf_sharded_state) IS 'the filter of the keys of cf_sharded_agg states (cf_sharded_key of each key, or partial states)';

-- Named filters on a Citus cluster (src/sql/named/citus.rs). In a backend that
-- runs part of a distributed query for another node, a by-name call may use
-- this node's filter only if this table lists it: 'cluster', a copy that
-- cf_publish_cluster() made on every node from one value (lookups only), or
-- 'node', declared by cf_node_local() to hold the keys of this node's own
-- shards. Every node has its own rows; the functions below keep them in step.
CREATE TABLE cuckoo_cluster_filters (
    name text PRIMARY KEY,
    scope text NOT NULL CHECK (scope IN ('cluster', 'node')),
    digest text,
    set_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((scope = 'cluster') = (digest IS NOT NULL))
);
SELECT pg_catalog.pg_extension_config_dump('cuckoo_cluster_filters', '');
GRANT SELECT ON cuckoo_cluster_filters TO PUBLIC;
COMMENT ON TABLE cuckoo_cluster_filters IS 'named filters that distributed queries may use on this node: cluster copies (cf_publish_cluster) and node-local filters (cf_node_local)';

-- Runs on each node for cf_publish_cluster: publishes the value as a cluster
-- copy and returns the md5 of the copy's snapshot, which the caller compares.
CREATE FUNCTION cf_cluster_copy(name text, f cuckoofilter, durable boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    digest text;
BEGIN
    DELETE FROM @extschema@.cuckoo_cluster_filters c WHERE c.name = cf_cluster_copy.name;
    PERFORM @extschema@.cf_publish(name, f, durable);
    digest := md5(@extschema@.cf_snapshot(name)::text);
    INSERT INTO @extschema@.cuckoo_cluster_filters (name, scope, digest) VALUES (name, 'cluster', digest);
    RETURN digest;
END
$fn$;
COMMENT ON FUNCTION cf_cluster_copy(text, cuckoofilter, boolean) IS 'used by cf_publish_cluster on each node: publishes a cluster copy and returns its digest';

-- The Citus nodes' answers to one command, or an error naming the first
-- node that failed.
CREATE FUNCTION cf_on_all_nodes(command text, what text) RETURNS TABLE (nodeid integer, result text)
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION '% needs the citus extension', what
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Without Citus, use cf_publish(), cf_drop() and the filter directly.';
    END IF;
    FOR r IN EXECUTE 'SELECT nodeid, success, result FROM pg_catalog.run_command_on_all_nodes($1) ORDER BY nodeid' USING command LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION '% failed on Citus node %: %', what, r.nodeid, r.result
                USING ERRCODE = 'external_routine_exception';
        END IF;
        nodeid := r.nodeid;
        result := r.result;
        RETURN NEXT;
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION cf_on_all_nodes(text, text) IS 'runs a command on every Citus node, failing on the first node that fails';

CREATE FUNCTION cf_publish_cluster(name text, f cuckoofilter, durable boolean DEFAULT true) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    nodes integer;
    digests integer;
BEGIN
    BEGIN
        SELECT count(*), count(DISTINCT result) INTO nodes, digests
          FROM @extschema@.cf_on_all_nodes(format('SELECT %s.cf_cluster_copy(%L, %L::%s.cuckoofilter, %L)',
                 '@extschema@', name, f::text, '@extschema@', durable), 'cf_publish_cluster()');
        IF digests <> 1 THEN
            RAISE EXCEPTION 'cf_publish_cluster(): the nodes'' copies of cuckoo filter "%" differ', name
                USING ERRCODE = 'internal_error';
        END IF;
    EXCEPTION WHEN feature_not_supported THEN
        RAISE;
    WHEN OTHERS THEN
        -- No node may answer from a copy that others lack: unlist it everywhere
        -- (a node that cannot be reached is named in a warning; the error
        -- raised is the publish's).
        BEGIN
            PERFORM @extschema@.cf_on_all_nodes(format('DELETE FROM %s.cuckoo_cluster_filters WHERE name = %L', '@extschema@', name),
                    'cf_publish_cluster()');
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'cuckoo filter "%" may still be listed as a cluster copy on some nodes: %', name, SQLERRM
                USING HINT = 'Run cf_drop_cluster() once every node is reachable.';
        END;
        RAISE;
    END;
    RETURN nodes;
END
$fn$;
COMMENT ON FUNCTION cf_publish_cluster(text, cuckoofilter, boolean) IS 'publishes a value as the named filter on every Citus node (identical copies that distributed queries may look up); returns the number of nodes';

CREATE FUNCTION cf_node_local(name text, node_local boolean DEFAULT true) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT count(*) FROM @extschema@.cf_on_all_nodes(
        CASE WHEN node_local THEN
            format('INSERT INTO %s.cuckoo_cluster_filters (name, scope) VALUES (%L, ''node'') ON CONFLICT (name) DO UPDATE SET scope = ''node'', digest = NULL, set_at = now()',
                   '@extschema@', name)
        ELSE
            format('DELETE FROM %s.cuckoo_cluster_filters WHERE name = %L AND scope = ''node''', '@extschema@', name)
        END, 'cf_node_local()'));
END
$fn$;
COMMENT ON FUNCTION cf_node_local(text, boolean) IS 'declares on every Citus node that distributed queries may use that node''s own filter of this name (its keys are co-located with the distribution column); false withdraws it';

CREATE FUNCTION cf_drop_cluster(name text) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT count(*) FILTER (WHERE result = 't') FROM @extschema@.cf_on_all_nodes(
        format('WITH unlisted AS (DELETE FROM %s.cuckoo_cluster_filters WHERE name = %L) SELECT %s.cf_drop(%L)', '@extschema@', name, '@extschema@', name),
        'cf_drop_cluster()'));
END
$fn$;
COMMENT ON FUNCTION cf_drop_cluster(text) IS 'drops the named filter on every Citus node and unlists it; returns the number of nodes that had it';
