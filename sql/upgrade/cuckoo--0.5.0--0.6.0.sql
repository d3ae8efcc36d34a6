-- cuckoo 0.5.0 -> 0.6.0.
--
-- 0.6.0's filters know the type of their keys. Values built from now on record
-- it (values written before record none and answer exactly as before), named
-- filters take it from cf_create's new key_type argument, from the first
-- insert, or from the value cf_publish copies. A probe of another type answers
-- for the key PostgreSQL would call equal, or raises an error. New: overloads
-- over text for untyped keys (what client drivers send), cf_contains_each for
-- batched probes with an untyped array, cf_empty with a key type, and the
-- cuckoo_filters view's key_type column. cf_create gains key_type and is made
-- anew (CALLED ON NULL INPUT); privileges granted or revoked on it, on the view
-- and on its rows function carry over. The catalog after this script equals a
-- fresh 0.6.0 install's; tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.6.0'" to load this file. \quit

-- First: while the server still runs an older library (it is preloaded:
-- restart after installing), the update stops here, before anything changed.
-- A later library runs this script too (an update through several releases).
DO $$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,6,0}' THEN
        RAISE EXCEPTION 'this session runs cuckoo library %, the update needs 0.6.0 or later', @extschema@.cuckoo_library_version()
            USING HINT = 'Install cuckoo 0.6.0 and restart the server (the library is preloaded), then update.';
    END IF;
END
$$;

-- Untyped keys, and many at once from a client (as in cuckoo.sql).
CREATE FUNCTION cf_contains(cuckoofilter, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(cuckoofilter, text) IS 'false: the key is definitely absent; true: it may be present (text is read as the filter''s key type)';
CREATE FUNCTION cf_contains_each(cuckoofilter, keys anycompatiblearray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_value_many' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_each(cuckoofilter, anycompatiblearray) IS 'cf_contains for every element of an array, also an untyped one (read as the filter''s key type); NULL for NULL elements';
CREATE FUNCTION cf_insert(cuckoofilter, key text) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, key text) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- Typed keys of the string types that cast to text implicitly get exact
-- overloads, so that they keep their own type (a constant would otherwise be
-- folded into text before cuckoo sees the cast).
CREATE FUNCTION cf_contains(cuckoofilter, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_contains(cuckoofilter, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_insert(cuckoofilter, key bpchar) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_insert(cuckoofilter, key name) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, key bpchar) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, key name) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_empty(capacity bigint, fpp float8, key_type regtype) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_empty' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_contains_each(name text, keys anycompatiblearray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_named_many' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_each(text, anycompatiblearray) IS 'cf_contains by name for every element of an array, also an untyped one (read as the filter''s key type); NULL for NULL elements';
CREATE FUNCTION cf_contains(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(text, text) IS 'false: the key is definitely not in the named filter; true: it may be (text is read as the filter''s key type)';
CREATE FUNCTION cf_insert(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_delete(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- Typed bpchar and name keys by name keep their own type (see the values').
CREATE FUNCTION cf_contains(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_contains(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_insert(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_insert(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_delete(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_delete(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- cf_create gains key_type: made anew, its privileges carried over (a REVOKE
-- from PUBLIC that restricts who may create filters stays).
DO $$
DECLARE
    fn_acl aclitem[];
    g record;
BEGIN
    SELECT proacl INTO fn_acl FROM pg_catalog.pg_proc WHERE oid = 'cf_create(text, bigint, float8, boolean)'::regprocedure;
    DROP FUNCTION cf_create(text, bigint, float8, boolean);
    CREATE FUNCTION cf_create(name text, capacity bigint, fpp float8 DEFAULT 0.002, durable boolean DEFAULT true, key_type regtype DEFAULT NULL) RETURNS void
        AS 'MODULE_PATHNAME', 'cf_create' LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;
    COMMENT ON FUNCTION cf_create(text, bigint, float8, boolean, regtype) IS 'creates an empty named filter in shared memory for capacity keys of type key_type at false-positive rate fpp; durable filters are WAL-logged and survive restarts, crashes and failover';
    IF fn_acl IS NOT NULL THEN
        REVOKE ALL ON FUNCTION cf_create(text, bigint, float8, boolean, regtype) FROM PUBLIC;
        FOR g IN SELECT grantee, pg_catalog.bool_or(is_grantable) AS grantable FROM pg_catalog.aclexplode(fn_acl)
                  WHERE privilege_type = 'EXECUTE' GROUP BY grantee LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION cf_create(text, bigint, float8, boolean, regtype) TO %s%s',
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        DELETE FROM pg_catalog.pg_init_privs
         WHERE classoid = 'pg_catalog.pg_proc'::regclass AND objoid = 'cf_create(text, bigint, float8, boolean, regtype)'::regprocedure;
    END IF;
END
$$;

-- The view and its rows function gain a column (key_type): both are made anew, and the
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
        "key_type" TEXT
    )
    STRICT VOLATILE PARALLEL SAFE
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper';
    CREATE VIEW cuckoo_filters AS
        SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
               failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason,
               checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes, key_type
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
