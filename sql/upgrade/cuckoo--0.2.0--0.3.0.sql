-- cuckoo 0.2.0 -> 0.3.0.
--
-- 0.3.0 makes named filters durable: cf_create and cf_publish take
-- `durable boolean DEFAULT true` (durable filters are WAL-logged through a
-- custom resource manager, survive restarts and crashes, and are replayed on
-- standbys), the cuckoo_filters view gains durable, state and reason, and the
-- by-name cf_insert and cf_delete become PARALLEL UNSAFE (a durable change
-- writes WAL and cannot run in parallel mode, as nextval cannot). Named
-- filters made before the server runs 0.3.0's library were never durable and
-- do not survive the restart it needs; stored cuckoofilter values are
-- unchanged.
--
-- Privileges granted or revoked on the old cf_create, cf_publish, the view and
-- its rows function carry over to the new declarations. The catalog after this
-- script equals a fresh 0.3.0 install's; tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.3.0'" to load this file. \quit

-- First, a function that only 0.3.0's library has: while the server still runs
-- an older library (it is preloaded: restart after installing), the update
-- stops here with "could not find function", before anything changed.
CREATE FUNCTION cuckoo_library_version() RETURNS text
    AS 'MODULE_PATHNAME', 'cuckoo_library_version' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cuckoo_library_version() IS 'the version of the cuckoo shared library this session runs (the preloaded library changes at a server restart)';

CREATE FUNCTION cf_create(name text, capacity bigint, fpp float8 DEFAULT 0.002, durable boolean DEFAULT true) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_create' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_create(text, bigint, float8, boolean) IS 'creates an empty named filter in shared memory for capacity keys at false-positive rate fpp; durable filters are WAL-logged and survive restarts, crashes and failover';
CREATE FUNCTION cf_publish(name text, f cuckoofilter, durable boolean DEFAULT true) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_publish' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_publish(text, cuckoofilter, boolean) IS 'creates a named filter as a copy of a value, or replaces its contents atomically; durable filters are WAL-logged';

-- Carry privileges changed from the default over from the old declarations
-- (as they are: revoked from PUBLIC, granted to roles, with grant option).
DO $$
DECLARE
    pair text[];
    acl aclitem[];
    g record;
BEGIN
    FOREACH pair SLICE 1 IN ARRAY ARRAY[
        ['cf_create(text,bigint,double precision)', 'cf_create(text,bigint,double precision,boolean)'],
        ['cf_publish(text,cuckoofilter)', 'cf_publish(text,cuckoofilter,boolean)']]
    LOOP
        SELECT proacl INTO acl FROM pg_catalog.pg_proc WHERE oid = pair[1]::regprocedure;
        CONTINUE WHEN acl IS NULL;
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', pair[2]::regprocedure);
        FOR g IN SELECT grantee, pg_catalog.bool_or(is_grantable) AS grantable FROM pg_catalog.aclexplode(acl)
                  WHERE privilege_type = 'EXECUTE' GROUP BY grantee LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', pair[2]::regprocedure,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        -- Grants run by an extension script are recorded as the extension's
        -- initial privileges, which pg_dump then leaves out; these are the
        -- administrator's, and a fresh install records none for the function.
        DELETE FROM pg_catalog.pg_init_privs
         WHERE classoid = 'pg_catalog.pg_proc'::regclass AND objoid = pair[2]::regprocedure;
    END LOOP;
END
$$;

DROP FUNCTION cf_create(text, bigint, float8);
DROP FUNCTION cf_publish(text, cuckoofilter);

ALTER FUNCTION cf_insert(text, anyelement) PARALLEL UNSAFE;
ALTER FUNCTION cf_delete(text, anyelement) PARALLEL UNSAFE;

-- The view and its rows function gain columns: both are made anew, and the
-- view's privileges (GRANT SELECT TO PUBLIC unless changed) and the function's
-- are carried over.
DO $$
DECLARE
    view_acl aclitem[];
    fn_acl aclitem[];
    init_acl aclitem[];
    owner oid;
    g record;
BEGIN
    SELECT relacl, relowner INTO view_acl, owner FROM pg_catalog.pg_class WHERE oid = 'cuckoo_filters'::regclass;
    SELECT proacl INTO fn_acl FROM pg_catalog.pg_proc WHERE oid = 'cuckoo_filters_rows()'::regprocedure;
    DROP VIEW cuckoo_filters;
    DROP FUNCTION cuckoo_filters_rows();
    CREATE FUNCTION "cuckoo_filters_rows"() RETURNS TABLE (
        "name" TEXT,
        "capacity" bigint,
        "items" bigint,
        "load_factor" double precision,
        "bytes" bigint,
        "fpp" double precision,
        "inserts" bigint,
        "lookups" bigint,
        "deletes" bigint,
        "failed_inserts" bigint,
        "lookup_retries" bigint,
        "kicks" bigint,
        "owner" TEXT,
        "lookup_grantee" TEXT,
        "durable" bool,
        "state" TEXT,
        "reason" TEXT
    )
    STRICT VOLATILE PARALLEL SAFE
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper';
    CREATE VIEW cuckoo_filters AS
        SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
               failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason
        FROM cuckoo_filters_rows();
    COMMENT ON VIEW cuckoo_filters IS 'named cuckoo filters of this database visible to the current role, with usage counters';
    GRANT SELECT ON cuckoo_filters TO PUBLIC;
    -- The extension's initial privileges are those of a fresh install (the
    -- grant above); the administrator's changes applied below are not, so
    -- they are taken back out of pg_init_privs afterwards.
    SELECT initprivs INTO init_acl FROM pg_catalog.pg_init_privs
     WHERE classoid = 'pg_catalog.pg_class'::regclass AND objoid = 'cuckoo_filters'::regclass AND objsubid = 0;
    IF view_acl IS NOT NULL AND view_acl IS DISTINCT FROM (SELECT relacl FROM pg_catalog.pg_class WHERE oid = 'cuckoo_filters'::regclass) THEN
        REVOKE ALL ON cuckoo_filters FROM PUBLIC;
        FOR g IN SELECT grantee, privilege_type, is_grantable FROM pg_catalog.aclexplode(view_acl) WHERE grantee <> owner LOOP
            EXECUTE pg_catalog.format('GRANT %s ON cuckoo_filters TO %s%s', g.privilege_type,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END IF;
    IF fn_acl IS NOT NULL THEN
        REVOKE ALL ON FUNCTION cuckoo_filters_rows() FROM PUBLIC;
        FOR g IN SELECT grantee, pg_catalog.bool_or(is_grantable) AS grantable FROM pg_catalog.aclexplode(fn_acl)
                  WHERE privilege_type = 'EXECUTE' GROUP BY grantee LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION cuckoo_filters_rows() TO %s%s',
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        DELETE FROM pg_catalog.pg_init_privs
         WHERE classoid = 'pg_catalog.pg_proc'::regclass AND objoid = 'cuckoo_filters_rows()'::regprocedure;
    END IF;
    UPDATE pg_catalog.pg_init_privs SET initprivs = init_acl
     WHERE classoid = 'pg_catalog.pg_class'::regclass AND objoid = 'cuckoo_filters'::regclass AND objsubid = 0;
END
$$;
