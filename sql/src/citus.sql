-- The current version's SQL: named filters on a Citus cluster: each node's
-- listing (cuckoo_cluster_filters), the cluster's record of each publish
-- (cuckoo_cluster_copies), the functions the planner and the cluster functions
-- call on each node (version-1 C functions, src/sql/named/cluster.rs and
-- pin.rs) and the cluster functions themselves (PL/pgSQL, run on the
-- coordinator). Also registers cuckoo_saved_filters (saved.sql) for pg_dump.
-- Joined into cuckoo--<version>.sql last, after views.sql (src/lib.rs).

-- Named filters on a Citus cluster (src/sql/named/citus.rs). In a backend that
-- runs part of a distributed query for another node, a by-name call may use
-- this node's filter only if this table lists it: 'cluster', this node's copy
-- of the value cf_publish_cluster() last published to every node (lookups
-- only; version: the publish, copy: which filter in this node's shared memory
-- it is), or 'node', declared by cf_node_local() to hold the keys of this
-- node's own shards. Every node has its own rows, written only through the
-- functions below, which check the caller's right on the name (owner: the
-- role that listed it).
CREATE TABLE cuckoo_cluster_filters (
    name text PRIMARY KEY,
    scope text NOT NULL CHECK (scope IN ('cluster', 'node')),
    digest text,
    set_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((scope = 'cluster') = (digest IS NOT NULL)),
    version bigint,
    copy text,
    owner regrole,
    CONSTRAINT cuckoo_cluster_filters_copy_check CHECK ((scope = 'cluster') = (version IS NOT NULL AND copy IS NOT NULL))
);
SELECT pg_catalog.pg_extension_config_dump('cuckoo_cluster_filters', '');
-- (cuckoo_saved_filters, of saved.sql, is dumped too; registered here, after
-- this one, as the update from 0.9.0 registers it.)
SELECT pg_catalog.pg_extension_config_dump('cuckoo_saved_filters', '');
-- (cuckoo_bindings, of bound.sql, too: its rows are the bindings that a
-- restore makes again; their filters are rebuilt from the restored tables.)
SELECT pg_catalog.pg_extension_config_dump('cuckoo_bindings', '');
-- Everyone may read it but the digests (an md5 of a small filter tells its
-- keys to whoever tries them all). (The revoke, which takes nothing here,
-- gives the table the privileges the update from 0.11.0 leaves it.)
REVOKE SELECT ON cuckoo_cluster_filters FROM PUBLIC;
GRANT SELECT (name, scope, set_at, version, copy, owner) ON cuckoo_cluster_filters TO PUBLIC;
COMMENT ON TABLE cuckoo_cluster_filters IS 'named filters that distributed queries may use on this node: cluster copies (cf_publish_cluster) and node-local filters (cf_node_local)';

-- The cluster's record of each cluster copy: the publish (version) every
-- node's copy must be. cf_publish_cluster() makes it a Citus reference table
-- on first use, so that every node reads the same rows, and writes it in the
-- publishing transaction. A node whose listed copy is another publish's
-- answers no query by that name (src/sql/named/citus.rs).
CREATE TABLE cuckoo_cluster_copies (
    name text PRIMARY KEY,
    version bigint NOT NULL,
    owner regrole NOT NULL,
    digest text NOT NULL,
    durable boolean NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT (name, version, owner, durable, published_at) ON cuckoo_cluster_copies TO PUBLIC;
COMMENT ON TABLE cuckoo_cluster_copies IS 'the publish of each cluster copy that every Citus node must hold (a reference table once cf_publish_cluster has run)';
-- Where Citus is preloaded, the planner rewrites a by-name lookup's name into
-- cf_cluster_pin(name, latest): the latest publish the cluster recorded when
-- the query was planned. Every piece of a distributed query is then held to
-- that publish (a piece that finds a later one fails with 40001: retry).
CREATE FUNCTION cf_cluster_pin(name text, latest bigint) RETURNS text
    AS 'MODULE_PATHNAME', 'cf_cluster_pin' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_cluster_pin(text, bigint) IS 'used by the planner on a Citus cluster: the name, with the latest publish the query was planned with (read by the by-name lookup that takes it)';
CREATE FUNCTION cf_cluster_carry(latest bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_carry' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_cluster_carry(bigint) IS 'used by the planner on a Citus cluster: true; the statement that evaluates it holds the by-name lookups made out of the planner''s sight (in functions, in row-level security policies) to the latest publish it was planned with';

CREATE FUNCTION cf_cluster_list(name text, scope text, version bigint) RETURNS text
    AS 'MODULE_PATHNAME', 'cf_cluster_list' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_list(text, text, bigint) IS 'used by the cluster functions on each node: lists this node''s filter as a cluster copy of a publish (returning its digest) or as node-local (the filter''s owner only)';
CREATE FUNCTION cf_cluster_unlist(name text, scope text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_unlist' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_unlist(text, text) IS 'used by the cluster functions on each node: removes this node''s listing of a name (of one scope, or NULL: either)';
CREATE FUNCTION cf_cluster_current(name text, version bigint, digest text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_current' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_cluster_current(text, bigint, text) IS 'whether this node''s filter is listed as the cluster copy of that publish with that digest and is still the filter listed';
CREATE FUNCTION cf_cluster_begin(name text, new_version boolean) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cf_cluster_begin' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_begin(text, boolean) IS 'used by the cluster functions on the coordinator: checks the caller''s right, holds off other cluster changes of the name, returns a new publish version or the recorded one';
CREATE FUNCTION cf_cluster_record(name text, version bigint, digest text, durable boolean) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_cluster_record' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_record(text, bigint, text, boolean) IS 'used by cf_publish_cluster on the coordinator: records the publish every node must hold';
CREATE FUNCTION cf_cluster_forget(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_forget' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_forget(text) IS 'used by cf_drop_cluster on the coordinator: removes what the cluster records for a name';

-- Runs on each node for cf_publish_cluster and cf_sync_cluster: publishes the
-- value as this node's cluster copy of publish `version` (a caller that is
-- not the owner, or a member of the owning role, takes the filter over; one
-- that may not change it is refused) and returns the md5 of the copy's
-- snapshot, which the caller compares.
CREATE FUNCTION cf_cluster_copy(name text, version bigint, f cuckoofilter, durable boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    PERFORM @extschema@.cf_cluster_unlist(name, NULL);
    PERFORM @extschema@.cf_publish(name, f, durable);
    PERFORM @extschema@.cf_cluster_debug_stop('node', name);
    RETURN @extschema@.cf_cluster_list(name, 'cluster', version);
END
$fn$;
COMMENT ON FUNCTION cf_cluster_copy(text, bigint, cuckoofilter, boolean) IS 'used by cf_publish_cluster on each node: publishes a cluster copy of a publish and returns its digest';

-- Run on each node before cf_publish_cluster copies anything, and at stop
-- points of a publish for tests (cuckoo.debug_stop_publish).
CREATE FUNCTION cf_cluster_may_copy(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_may_copy' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_may_copy(text) IS 'used by cf_publish_cluster on each node: refuses a caller that may not replace the node''s filter or listing of the name';
CREATE FUNCTION cf_cluster_debug_stop(point text, name text) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_cluster_debug_stop' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_debug_stop(text, text) IS 'for tests: waits until cancelled at a point of a cluster publish named by cuckoo.debug_stop_publish';

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
    FOR r IN EXECUTE 'SELECT a.nodeid, a.success, a.result, n.nodename || '':'' || n.nodeport AS node FROM pg_catalog.run_command_on_all_nodes($1) a '
                  || 'LEFT JOIN pg_catalog.pg_dist_node n ON n.nodeid = a.nodeid ORDER BY a.nodeid' USING command LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION '% failed on Citus node % (%): %', what, r.nodeid, r.node, r.result
                USING ERRCODE = 'external_routine_exception';
        END IF;
        nodeid := r.nodeid;
        result := r.result;
        RETURN NEXT;
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION cf_on_all_nodes(text, text) IS 'runs a command on every active Citus node, failing on the first node that fails';

-- Primary nodes Citus lists as inactive (run_command_on_all_nodes does not
-- reach them), as 'host:port, ...', or NULL.
CREATE FUNCTION cf_cluster_inactive() RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    nodes text;
BEGIN
    EXECUTE 'SELECT string_agg(nodename || '':'' || nodeport, '', '' ORDER BY nodeid) FROM pg_catalog.pg_dist_node WHERE NOT isactive AND noderole = ''primary''' INTO nodes;
    RETURN nodes;
END
$fn$;
COMMENT ON FUNCTION cf_cluster_inactive() IS 'the primary Citus nodes that are inactive (the cluster functions cannot reach them)';

CREATE FUNCTION cf_publish_cluster(name text, f cuckoofilter, durable boolean DEFAULT true) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    version bigint;
    nodes integer;
    digests integer;
    digest text;
    inactive text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'cf_publish_cluster() needs the citus extension'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Without Citus, use cf_publish(), cf_drop() and the filter directly.';
    END IF;
    -- The caller's right, one cluster change of the name at a time, a new
    -- publish version; then every node's right, before anything is copied.
    version := @extschema@.cf_cluster_begin(name, true);
    PERFORM @extschema@.cf_on_all_nodes(format('SELECT %s.cf_cluster_may_copy(%L)', '@extschema@', name), 'cf_publish_cluster()');
    -- Each node takes the copy and lists it as this publish's: until the
    -- record below commits, those nodes answer no query by the name (the
    -- cluster records the previous publish), the others answer from the
    -- previous one. A failure or a stop here leaves errors, never a mix.
    BEGIN
        SELECT count(*), count(DISTINCT result), min(result) INTO nodes, digests, digest
          FROM @extschema@.cf_on_all_nodes(format('SELECT %s.cf_cluster_copy(%L, %s, %L::%s.cuckoofilter, %L)',
                 '@extschema@', name, version, f::text, '@extschema@', durable), 'cf_publish_cluster()');
        IF digests <> 1 THEN
            RAISE EXCEPTION 'cf_publish_cluster(): the nodes'' copies of cuckoo filter "%" differ', name
                USING ERRCODE = 'internal_error';
        END IF;
        -- Waits here when cuckoo.debug_stop_publish says so (tests only).
        PERFORM @extschema@.cf_cluster_debug_stop('record', name);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        RAISE WARNING 'cuckoo filter "%" was not published to every node: nodes that took the new copy answer no query by that name until a publish succeeds', name
            USING HINT = 'Publish it again with cf_publish_cluster() once every node is reachable.';
        RAISE;
    END;
    -- The publish every node must hold, with this transaction (Citus writes
    -- every replica of the reference table or none).
    PERFORM @extschema@.cf_cluster_record(name, version, digest, durable);
    inactive := @extschema@.cf_cluster_inactive();
    IF inactive IS NOT NULL THEN
        RAISE WARNING 'cuckoo filter "%" was not copied to inactive Citus node(s) %', name, inactive
            USING HINT = format('Once they are active again, run SELECT cf_sync_cluster(%L) on the coordinator; until then their queries by that name fail.', name);
    END IF;
    RETURN nodes;
END
$fn$;
COMMENT ON FUNCTION cf_publish_cluster(text, cuckoofilter, boolean) IS 'publishes a value as the named filter on every Citus node (identical copies that distributed queries may look up, the publisher their owner); a node that missed it answers no query by the name until cf_sync_cluster; returns the number of nodes';

CREATE FUNCTION cf_sync_cluster(name text) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    version bigint;
    rec record;
    f @extschema@.cuckoofilter;
    copied integer;
    bad text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'cf_sync_cluster() needs the citus extension' USING ERRCODE = 'feature_not_supported';
    END IF;
    version := @extschema@.cf_cluster_begin(name, false);
    SELECT * INTO rec FROM @extschema@.cuckoo_cluster_copies c WHERE c.name = cf_sync_cluster.name;
    IF version IS NULL OR NOT FOUND THEN
        RAISE EXCEPTION 'cuckoo filter "%" is not published to the cluster', name
            USING ERRCODE = 'undefined_object', HINT = 'Publish it with cf_publish_cluster().';
    END IF;
    IF NOT @extschema@.cf_cluster_current(name, version, rec.digest) THEN
        RAISE EXCEPTION 'the coordinator''s copy of cuckoo filter "%" is not the publish the cluster records', name
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Publish the value again with cf_publish_cluster().';
    END IF;
    f := @extschema@.cf_snapshot(name);
    -- Nodes whose copy is that publish's keep it; the others take the
    -- coordinator's (checked against the recorded digest).
    SELECT count(*) FILTER (WHERE result = 'copied'), string_agg(nodeid || ': ' || result, ', ') FILTER (WHERE result NOT IN ('copied', 'current'))
      INTO copied, bad
      FROM @extschema@.cf_on_all_nodes(format(
          'SELECT CASE WHEN %1$s.cf_cluster_current(%2$L, %3$s, %6$L) THEN ''current'' WHEN %1$s.cf_cluster_may_copy(%2$L) AND %1$s.cf_cluster_copy(%2$L, %3$s, %4$L::%1$s.cuckoofilter, %5$L) = %6$L THEN ''copied'' ELSE ''differs'' END',
          '@extschema@', name, version, f::text, rec.durable, rec.digest), 'cf_sync_cluster()');
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'cf_sync_cluster(): copies of cuckoo filter "%" differ from the publish recorded on node(s) %', name, bad
            USING ERRCODE = 'internal_error', HINT = 'Publish the value again with cf_publish_cluster().';
    END IF;
    RETURN copied;
END
$fn$;
COMMENT ON FUNCTION cf_sync_cluster(text) IS 'gives every active Citus node that lacks it the copy of a cluster filter the cluster last published (from the coordinator''s copy); returns the number of nodes copied to';

CREATE FUNCTION cf_node_local(name text, node_local boolean DEFAULT true) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT count(*) FROM @extschema@.cf_on_all_nodes(
        CASE WHEN node_local THEN
            format('SELECT %s.cf_cluster_list(%L, ''node'', NULL) IS NULL', '@extschema@', name)
        ELSE
            format('SELECT %s.cf_cluster_unlist(%L, ''node'')', '@extschema@', name)
        END, 'cf_node_local()'));
END
$fn$;
COMMENT ON FUNCTION cf_node_local(text, boolean) IS 'declares on every Citus node that distributed queries may use that node''s own filter of this name (its keys are co-located with the distribution column; the filter''s owner only); false withdraws it';

CREATE FUNCTION cf_drop_cluster(name text) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'cf_drop_cluster() needs the citus extension' USING ERRCODE = 'feature_not_supported';
    END IF;
    PERFORM @extschema@.cf_cluster_forget(name);
    RETURN (SELECT count(*) FILTER (WHERE result = 't') FROM @extschema@.cf_on_all_nodes(
        format('SELECT %1$s.cf_cluster_unlist(%2$L, ''cluster'') IS NOT NULL AND %1$s.cf_drop(%2$L)', '@extschema@', name),
        'cf_drop_cluster()'));
END
$fn$;
COMMENT ON FUNCTION cf_drop_cluster(text) IS 'drops the named filter on every Citus node, unlists it and removes the cluster''s record of it; returns the number of nodes that had it';
