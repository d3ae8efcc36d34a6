-- The current version's SQL: the views cuckoo_filters (named filters, and the
-- saved copies of saved.sql that are not in shared memory), cuckoo_region and
-- cuckoo_usage, over set-returning C functions (src/sql/named/view.rs).
-- Joined into cuckoo--<version>.sql after saved.sql, before citus.sql (src/lib.rs).

-- The rows of the three views below, from shared memory (src/sql/named/view.rs):
-- set-returning C functions, volatile (other sessions change the filters),
-- strict and parallel safe.
CREATE FUNCTION cuckoo_filters_rows() RETURNS TABLE (
    name text,
    capacity bigint,
    items bigint,
    load_factor double precision,
    bytes bigint,
    fpp double precision,
    inserts bigint,
    lookups bigint,
    deletes bigint,
    failed_inserts bigint,
    lookup_retries bigint,
    kicks bigint,
    owner text,
    lookup_grantee text,
    durable boolean,
    state text,
    reason text,
    checkpoint_write_bytes bigint,
    checkpoint_wal_bytes bigint,
    disk_bytes bigint,
    key_type text,
    expansion integer,
    tables integer
)   AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoo_region_rows() RETURNS TABLE (
    size_bytes bigint,
    filter_bytes bigint,
    free_bytes bigint,
    largest_free_bytes bigint,
    releasing_bytes bigint,
    filters integer,
    max_filters integer
)   AS 'MODULE_PATHNAME', 'cuckoo_region_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoo_usage_rows() RETURNS TABLE (
    role text,
    database text,
    filters bigint,
    bytes bigint,
    max_filters_per_role bigint,
    max_bytes_per_role bigint,
    max_filters_per_database bigint,
    max_bytes_per_database bigint
)   AS 'MODULE_PATHNAME', 'cuckoo_usage_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- The current database's named filters that the current role may look up;
-- and, as needing a reload, those saved by cf_save() that are not in shared
-- memory (after pg_upgrade, or a restore of a dump), for their owners.
CREATE VIEW cuckoo_filters AS
    SELECT f.name, f.capacity, f.items, f.load_factor, f.bytes, f.fpp, f.inserts, f.lookups, f.deletes,
           f.failed_inserts, f.lookup_retries, f.kicks, f.owner, f.lookup_grantee, f.durable,
           CASE WHEN b.name IS NOT NULL AND (f.state <> 'ready' OR NOT cf_bound_ready(b.name)) THEN 'needs rebuild' ELSE f.state END AS state,
           CASE WHEN b.name IS NOT NULL AND f.state <> 'ready'
                THEN pg_catalog.format('%s; it is bound to column %I of %s: rebuild it with SELECT cf_rebuild(%L)', f.reason, b.col::text, b.tab::text, b.name) COLLATE "default"
                WHEN b.name IS NOT NULL AND NOT cf_bound_ready(b.name)
                THEN pg_catalog.format('its contents are not those of a committed fill from %s (a cf_bind or cf_rebuild was cancelled, failed or cut by a crash): pre-screens treat every key as present until SELECT cf_rebuild(%L)', b.tab::text, b.name) COLLATE "default"
                ELSE f.reason END AS reason,
           f.checkpoint_write_bytes, f.checkpoint_wal_bytes, f.disk_bytes, f.key_type, f.expansion, f.tables,
           b.tab AS bound_table, b.col AS bound_column,
           CASE WHEN b.name IS NOT NULL THEN COALESCE(r.pending_deletes, 0) END AS pending_deletes,
           CASE WHEN b.name IS NOT NULL THEN COALESCE(r.dropped_deletes + r.refused_deletes, 0) END AS dropped_deletes
    FROM (SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
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
          OFFSET 0) s
    ) f
    LEFT JOIN cuckoo_bindings b ON b.name = f.name
    LEFT JOIN cuckoo_bound_rows() r ON r.name = f.name
    UNION ALL
    -- Bindings whose filter is not in shared memory (after a restore of a
    -- dump or pg_upgrade, or a restart of a filter that is not durable).
    SELECT b.name, NULL::bigint, 0::bigint, 0::float8, 0::bigint, b.fpp, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
           0::bigint, 0::bigint, b.bound_by::text, NULL::text, b.durable, 'needs rebuild',
           pg_catalog.format('it is bound to column %I of %s but not in shared memory: rebuild it with SELECT cf_rebuild(%L)', b.col::text, b.tab::text, b.name) COLLATE "default",
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::integer, NULL::integer,
           b.tab, b.col, NULL::bigint, NULL::bigint
    FROM cuckoo_bindings b
    WHERE NOT cf_bound_present(b.name);
GRANT SELECT ON cuckoo_filters TO PUBLIC;
COMMENT ON VIEW cuckoo_filters IS 'named cuckoo filters of this database visible to the current role, with usage counters; saved copies not in shared memory as needing a reload; for filters bound to a table column (cf_bind), the table, the column, the deletes waiting until no snapshot can see their rows and the deletes dropped (their keys stay until cf_rebuild)';

-- The shared region (cuckoo.shared_memory): its size and the room left for
-- filters and the tables growing filters add.
CREATE VIEW cuckoo_region AS
    SELECT size_bytes, filter_bytes, free_bytes, largest_free_bytes, releasing_bytes, filters, max_filters
    FROM cuckoo_region_rows();
GRANT SELECT ON cuckoo_region TO PUBLIC;
COMMENT ON VIEW cuckoo_region IS 'the shared memory region of named cuckoo filters: its size, free space and filter entries';

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
