-- cuckoo 0.6.0 -> 0.7.0.
--
-- 0.7.0's named filters grow: cf_create gains expansion (default 2: when the
-- filter is full, a table twice the last one's size is added, keeping the
-- rate asked for; 0 keeps a fixed size). Filters that exist keep a fixed size.
-- Values may hold several tables (format 3): cf_union and cf_union_agg accept
-- filters of any shapes. The cuckoo_filters view gains expansion and tables;
-- the new cuckoo_region view shows the shared region's free space. cf_create
-- is made anew; privileges granted or revoked on it, on the view and on its
-- rows function carry over. The catalog after this script equals a fresh
-- 0.7.0 install's; tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.7.0'" to load this file. \quit

-- First: while the server still runs an older library (it is preloaded:
-- restart after installing), the update stops here, before anything changed.
-- A later library runs this script too (an update through several releases).
DO $$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,7,0}' THEN
        RAISE EXCEPTION 'this session runs cuckoo library %, the update needs 0.7.0 or later', @extschema@.cuckoo_library_version()
            USING HINT = 'Install cuckoo 0.7.0 and restart the server (the library is preloaded), then update.';
    END IF;
END
$$;

-- cf_create gains expansion: made anew, its privileges carried over (a REVOKE
-- from PUBLIC that restricts who may create filters stays).
DO $$
DECLARE
    fn_acl aclitem[];
    g record;
BEGIN
    SELECT proacl INTO fn_acl FROM pg_catalog.pg_proc WHERE oid = 'cf_create(text, bigint, float8, boolean, regtype)'::regprocedure;
    DROP FUNCTION cf_create(text, bigint, float8, boolean, regtype);
    CREATE FUNCTION cf_create(name text, capacity bigint, fpp float8 DEFAULT 0.002, durable boolean DEFAULT true, key_type regtype DEFAULT NULL, expansion integer DEFAULT 2) RETURNS void
        AS 'MODULE_PATHNAME', 'cf_create' LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;
    COMMENT ON FUNCTION cf_create(text, bigint, float8, boolean, regtype, integer) IS 'creates an empty named filter in shared memory for capacity keys of type key_type at false-positive rate fpp; when full it adds a table expansion times larger, keeping the rate (expansion 0: a fixed size); durable filters are WAL-logged and survive restarts, crashes and failover';
    IF fn_acl IS NOT NULL THEN
        REVOKE ALL ON FUNCTION cf_create(text, bigint, float8, boolean, regtype, integer) FROM PUBLIC;
        FOR g IN SELECT grantee, pg_catalog.bool_or(is_grantable) AS grantable FROM pg_catalog.aclexplode(fn_acl)
                  WHERE privilege_type = 'EXECUTE' GROUP BY grantee LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION cf_create(text, bigint, float8, boolean, regtype, integer) TO %s%s',
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        DELETE FROM pg_catalog.pg_init_privs
         WHERE classoid = 'pg_catalog.pg_proc'::regclass AND objoid = 'cf_create(text, bigint, float8, boolean, regtype, integer)'::regprocedure;
    END IF;
END
$$;

-- The shared region's space (as in cuckoo.sql).
CREATE FUNCTION "cuckoo_region_rows"() RETURNS TABLE (
    "size_bytes" bigint,
    "filter_bytes" bigint,
    "free_bytes" bigint,
    "largest_free_bytes" bigint,
    "releasing_bytes" bigint,
    "filters" INT,
    "max_filters" INT
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'cuckoo_region_rows_wrapper';
CREATE VIEW cuckoo_region AS
    SELECT size_bytes, filter_bytes, free_bytes, largest_free_bytes, releasing_bytes, filters, max_filters
    FROM cuckoo_region_rows();
GRANT SELECT ON cuckoo_region TO PUBLIC;
COMMENT ON VIEW cuckoo_region IS 'the shared memory region of named cuckoo filters: its size, free space and filter entries';

-- The view and its rows function gain two columns (expansion, tables): both are made anew, and the
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
        "disk_bytes" bigint,
        "key_type" TEXT,
        "expansion" INT,
        "tables" INT
    )
    STRICT VOLATILE PARALLEL SAFE
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper';
    CREATE VIEW cuckoo_filters AS
        SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
               failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason,
               checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes, key_type, expansion, tables
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
