-- cuckoo 0.10.0 -> 0.11.0.
--
-- 0.11.0 makes what one role sends cost only that role: every loop a caller
-- sizes checks for interrupts; memory is PostgreSQL's or fails as an ERROR;
-- values are at most 767 MB (their text form fits PostgreSQL's 1 GB limit);
-- key types named in a value are checked when it is made; superusers can
-- cap the shared region per role and per database; DROP ROLE refuses a role
-- that owns named filters. Stored values are unchanged.
-- The catalog after this script equals a fresh 0.11.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.11.0'" to load this file. \quit

-- The server must run 0.11.0's library or a later one (it is preloaded:
-- restart after installing), or nothing changes. (A later library runs this
-- step on the way to its own version.)
DO $check$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,11,0}'::int[] THEN
        RAISE EXCEPTION 'cuckoo: this session runs the library of cuckoo %, older than 0.11.0', @extschema@.cuckoo_library_version()
            USING HINT = 'Install 0.11.0''s files, restart the server (the library is preloaded), then update.';
    END IF;
END
$check$;

-- Each role's and database's use of the shared region, with the caps
-- (as in cuckoo.sql).
CREATE FUNCTION "cuckoo_usage_rows"() RETURNS TABLE (
    "role" TEXT,
    "database" TEXT,
    "filters" bigint,
    "bytes" bigint,
    "max_filters_per_role" bigint,
    "max_bytes_per_role" bigint,
    "max_filters_per_database" bigint,
    "max_bytes_per_database" bigint
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'cuckoo_usage_rows_wrapper';
-- What each role owns in each database of the cluster (the region serves
-- them all; filters of dropped databases are left out): filters and region
-- bytes, every table included; a superuser sees every role, others the roles
-- whose privileges they have (and a row of their own for this database even
-- without filters); with the caps
-- (cuckoo.max_filters_per_role, cuckoo.max_bytes_per_role,
-- cuckoo.max_filters_per_database, cuckoo.max_bytes_per_database) in effect
-- in this session, NULL for none.
CREATE VIEW cuckoo_usage AS
    SELECT role, database, filters, bytes, max_filters_per_role, max_bytes_per_role,
           max_filters_per_database, max_bytes_per_database
    FROM cuckoo_usage_rows();
GRANT SELECT ON cuckoo_usage TO PUBLIC;
COMMENT ON VIEW cuckoo_usage IS 'named cuckoo filters and shared memory bytes each role owns in each database (of the roles whose privileges the current role has: its own, those it is a member of, every role for a superuser), with the caps per role and per database in effect in this session (NULL: none)';

-- cuckoo_filters again, with pg_catalog.format written out: a view's calls
-- are bound when it is made, and an update script runs with the extension's
-- schema in search_path, where a role with CREATE on it could have made a
-- format() that matches better than pg_catalog's (which then ran for whoever
-- read the view).
CREATE OR REPLACE VIEW cuckoo_filters AS
    SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
           failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason,
           checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes, key_type, expansion, tables
    FROM cuckoo_filters_rows()
    UNION ALL
    SELECT s.name, (s.info ->> 'capacity')::bigint, 0::bigint, 0::float8, 0::bigint,
           (s.info ->> 'fpp')::float8, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
           s.owner, s.lookup_grantee, s.durable, 'needs reload',
           pg_catalog.format('it is not in shared memory; a copy saved at %s is in cuckoo_saved_filters: restore it with SELECT cf_restore_saved(%L)', s.saved_at, s.name),
           NULL::bigint, NULL::bigint, NULL::bigint, s.info ->> 'key_type', NULL::integer, (s.info ->> 'tables')::integer
    FROM (SELECT v.*, cf_info(v.filter) AS info FROM cuckoo_saved_filters v
          WHERE v.name NOT IN (SELECT f.name FROM cuckoo_filters_rows() f)
            AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v.owner AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'))
          OFFSET 0) s;
