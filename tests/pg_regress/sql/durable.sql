-- Durable named filters as a session sees them: the default, the view's new
-- columns, commit semantics like nextval's (no transaction ID, refused in
-- read-only transactions, not undone by ROLLBACK),
-- and the WAL records as pg_walinspect shows them. Restarts, crashes and
-- standbys are in tests/durable/.
\set VERBOSITY terse
SELECT cf_drop(name) FROM cuckoo_filters;
SELECT cf_create('d', 1000), cf_create('v', 1000, durable => false), cf_create('d2', 1000, 0.01, true);
SELECT name, durable, state, reason FROM cuckoo_filters ORDER BY name;

-- Changes take no transaction ID (the commit flushes their records without
-- one; tests/durable/02_backend_crash.sh crashes the server right after such commits).
BEGIN;
SELECT cf_insert('d', 1);
SELECT txid_current_if_assigned() IS NULL AS no_xid;
COMMIT;
BEGIN;
SELECT cf_delete('d', 1), cf_insert('d', 1), cf_insert('v', 1), cf_contains('d', 1);
SELECT txid_current_if_assigned() IS NULL AS no_xid;
COMMIT;

-- Not transactional, like nextval: a rolled-back insert stays.
BEGIN;
SELECT cf_insert('d', 77);
ROLLBACK;
SELECT cf_contains('d', 77);

-- Read-only transactions may look durable filters up but not change them;
-- non-durable filters behave as before.
BEGIN READ ONLY;
SELECT cf_contains('d', 1), cf_insert('v', 2), cf_delete('v', 2);
SELECT err($$SELECT cf_insert('d', 2)$$);
SELECT err($$SELECT cf_delete('d', 1)$$);
SELECT err($$SELECT cf_create('d3', 10)$$);
SELECT err($$SELECT cf_publish('d', cf_agg(1))$$);
SELECT err($$SELECT cf_drop('d')$$);
SELECT err($$SELECT cf_grant_lookup('d', 'public')$$);
ROLLBACK;

-- Changes by name are parallel unsafe (an xid cannot be assigned in parallel
-- mode); lookups stay parallel safe.
SELECT p.oid::regprocedure, p.proparallel FROM pg_proc p
 WHERE p.proname IN ('cf_insert', 'cf_delete', 'cf_contains', 'cf_create', 'cf_publish') AND p.proargtypes[0] = 'text'::regtype
 ORDER BY p.oid::regprocedure::text;

-- Publishing switches durability either way.
SELECT cf_publish('v', cf_agg(g)) FROM generate_series(1, 100) g;
SELECT cf_publish('d2', cf_agg(g), durable => false) FROM generate_series(1, 100) g;
SELECT name, durable, items FROM cuckoo_filters ORDER BY name;
SELECT cf_contains('v', 100), cf_contains('d2', 100);

-- The WAL records, named by the resource manager (without those of a
-- checkpoint's image pass, should one come in between).
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
SELECT pg_current_wal_insert_lsn() AS before \gset
SELECT cf_create('w', 100);
SELECT cf_insert('w', 1), cf_insert('w', 2), cf_delete('w', 2), cf_delete('w', 3);
SELECT cf_grant_lookup('w', 'public');
SELECT cf_publish('w', cf_agg(g)) FROM generate_series(1, 10) g;
SELECT cf_drop('w');
SELECT cf_insert('v', 5);
WITH r AS (
  SELECT start_lsn, end_lsn, record_type, description
    FROM pg_get_wal_records_info(:'before', pg_current_wal_flush_lsn()) WHERE resource_manager = 'cuckoo'),
images AS (
  SELECT upper(to_hex((end_lsn - '0/0'::pg_lsn)::bigint)) AS begin
    FROM r WHERE record_type = 'CONTENT_BEGIN' AND description LIKE 'Image%')
SELECT record_type, regexp_replace(regexp_replace(description, '(gen|begin|insert) [0-9A-F]+', '\1 X', 'g'), 'db [0-9]+', 'db N') AS description
  FROM r
 WHERE record_type NOT IN ('PASS_BEGIN', 'PASS_DONE', 'PLACEHOLDER') AND description NOT LIKE 'Image%'
   AND coalesce(substring(description FROM '^begin ([0-9A-F]+)'), '') NOT IN (SELECT begin FROM images)
 ORDER BY start_lsn;
DROP EXTENSION pg_walinspect;
SELECT cf_drop(name) FROM cuckoo_filters;

-- The library this session runs is the extension's version (else a restart is
-- pending after an upgrade).
SELECT cuckoo_library_version() = (SELECT extversion FROM pg_extension WHERE extname = 'cuckoo') AS library_current;
