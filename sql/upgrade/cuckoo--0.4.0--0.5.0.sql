-- cuckoo 0.4.0 -> 0.5.0.
--
-- 0.5.0 keeps durable named filters in files in the data directory (cuckoo/),
-- written at each checkpoint for the parts that changed, instead of logging a
-- full image of every durable filter to the WAL at every checkpoint. The
-- cuckoo_filters view gains checkpoint_write_bytes, checkpoint_wal_bytes and
-- disk_bytes. Stored cuckoofilter values are unchanged; durable filters that
-- 0.4.0 left (in cuckoo_filters.dat and its WAL) come back when the server
-- starts with 0.5.0's library, before this script runs.
--
-- Privileges granted or revoked on the view and its rows function carry over
-- to the new declarations. The catalog after this script equals a fresh 0.5.0
-- install's; tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.5.0'" to load this file. \quit

-- First: while the server still runs an older library (it is preloaded:
-- restart after installing), the update stops here, before anything changed.
-- A later library runs this script too (an update through several releases).
DO $$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,5,0}' THEN
        RAISE EXCEPTION 'this session runs cuckoo library %, the update needs 0.5.0 or later', @extschema@.cuckoo_library_version()
            USING HINT = 'Install cuckoo 0.5.0 and restart the server (the library is preloaded), then update.';
    END IF;
END
$$;

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
        "reason" TEXT,
        "checkpoint_write_bytes" bigint,
        "checkpoint_wal_bytes" bigint,
        "disk_bytes" bigint
    )
    STRICT VOLATILE PARALLEL SAFE
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper';
    CREATE VIEW cuckoo_filters AS
        SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
               failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason,
               checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes
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
