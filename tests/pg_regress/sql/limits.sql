-- Caps per role and per database on the shared region (cuckoo.max_filters_per_role,
-- cuckoo.max_bytes_per_role, cuckoo.max_filters_per_database,
-- cuckoo.max_bytes_per_database): creation, publish and growth refused with
-- 53200 and a hint naming the setting; only superusers set them; the
-- cuckoo_usage view and who sees what; DROP ROLE of a role that owns filters.
\set VERBOSITY terse
SET client_min_messages = warning;
DROP DATABASE IF EXISTS cf_lim_other;
DROP ROLE IF EXISTS cf_lim_a; DROP ROLE IF EXISTS cf_lim_b; DROP ROLE IF EXISTS cf_lim_c;
RESET client_min_messages;
CREATE ROLE cf_lim_a LOGIN; CREATE ROLE cf_lim_b LOGIN; CREATE ROLE cf_lim_c LOGIN CREATEROLE;
GRANT EXECUTE ON FUNCTION err(text) TO PUBLIC;
-- errh(q): the SQLSTATE, message, detail and hint of q's error.
CREATE FUNCTION errh(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE st text; msg text; det text; hint text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN st || ': ' || msg || coalesce(E'\nDETAIL: ' || nullif(det, ''), '') || coalesce(E'\nHINT: ' || nullif(hint, ''), '');
END $f$;
GRANT EXECUTE ON FUNCTION errh(text) TO PUBLIC;
-- fill(f, first): inserts first, first + 1, ... into f one at a time until an
-- insert fails; its error, and in lim.stored how many went in.
CREATE FUNCTION fill(f text, first int) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE k int := first; st text; msg text; hint text;
BEGIN
  LOOP
    PERFORM cf_insert(f, k);
    k := k + 1;
  END LOOP;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
  PERFORM set_config('lim.stored', (k - first)::text, false);
  RETURN st || ': ' || msg || E'\nHINT: ' || hint;
END $f$;
GRANT EXECUTE ON FUNCTION fill(text, int) TO PUBLIC;

-- No caps by default.
SHOW cuckoo.max_filters_per_role;
SHOW cuckoo.max_bytes_per_role;
SHOW cuckoo.max_filters_per_database;
SHOW cuckoo.max_bytes_per_database;

-- Only superusers set them, in any way.
SET ROLE cf_lim_a;
SELECT err($$SET cuckoo.max_filters_per_role = 100$$);
SELECT err($$SET LOCAL cuckoo.max_bytes_per_role = -1$$);
SELECT err($$RESET cuckoo.max_bytes_per_database$$);
SELECT err($$SELECT set_config('cuckoo.max_filters_per_database', '-1', false)$$);
SELECT err($$ALTER ROLE cf_lim_a SET cuckoo.max_filters_per_role = 100$$);
SELECT err($$CREATE FUNCTION pg_temp.lift() RETURNS int LANGUAGE sql SET cuckoo.max_bytes_per_role = -1 AS 'SELECT 1'$$);
RESET ROLE;

-- Filters per role: two here, for every role, over every database.
SET cuckoo.max_filters_per_role = 2;
SET ROLE cf_lim_a;
SELECT cf_create('lim_a1', 1000), cf_create('lim_a2', 1000);
SELECT errh($$SELECT cf_create('lim_a3', 1000)$$);
SELECT errh($$SELECT cf_publish('lim_a3', cf_agg(g)) FROM generate_series(1, 10) g$$);
-- A name that exists is still 42710.
SELECT err($$SELECT cf_create('lim_a1', 1000)$$);
-- Replacing the contents of a filter is no new filter.
SELECT cf_publish('lim_a2', cf_agg(g)) FROM generate_series(1, 10) g;
SELECT name, owner FROM cuckoo_filters WHERE name LIKE 'lim%' ORDER BY name;
-- A second role is not affected by the first one's filters.
SET ROLE cf_lim_b;
SELECT cf_create('lim_b1', 1000), cf_create('lim_b2', 1000);
SELECT err($$SELECT cf_create('lim_b3', 1000)$$);
RESET ROLE;
SELECT cf_drop('lim_b2');

-- Bytes per role: 64 kB. A filter of 1,000 keys takes 4 kB (one block).
RESET cuckoo.max_filters_per_role;
SET cuckoo.max_bytes_per_role = '64kB';
SHOW cuckoo.max_bytes_per_role;
SET ROLE cf_lim_a;
SELECT errh($$SELECT cf_create('lim_big', 1000000)$$);
-- Publishing over a filter: the new size counts, the old is released.
SELECT errh($$SELECT cf_publish('lim_a2', cf_agg(g)) FROM generate_series(1, 100000) g$$);
SELECT cf_publish('lim_a2', cf_agg(g)) FROM generate_series(1, 20000) g;
SELECT name, bytes FROM cuckoo_filters WHERE name LIKE 'lim_a%' ORDER BY name;
SELECT cf_publish('lim_a2', cf_agg(g)) FROM generate_series(1, 10) g;

-- Growth: a filter that grows adds tables while the cap leaves room; the
-- insert that needs a table past it fails (53200), the keys stored before
-- stay, and batched inserts fail the same way.
SELECT cf_create('lim_grow', 1000, expansion => 2);
SELECT fill('lim_grow', 0);
SELECT current_setting('lim.stored')::int > 1000 AS grew,
       count(*) FILTER (WHERE cf_contains('lim_grow', g)) = current_setting('lim.stored')::int AS all_found
  FROM generate_series(0, current_setting('lim.stored')::int - 1) g;
SELECT name, tables, bytes FROM cuckoo_filters WHERE name LIKE 'lim_a%' OR name = 'lim_grow' ORDER BY name;
SELECT filters, bytes, max_bytes_per_role FROM cuckoo_usage;
SELECT errh($$SELECT cf_insert('lim_grow', ARRAY(SELECT generate_series(1000000, 1010000)))$$);
SELECT errh($$SELECT cf_insert_new('lim_grow', 2000000)$$) LIKE '53200: cuckoo filter "lim_grow" is full and cannot grow%' AS insert_new_refused;
SELECT count(*) FILTER (WHERE cf_contains('lim_grow', g)) = current_setting('lim.stored')::int AS still_all_found
  FROM generate_series(0, current_setting('lim.stored')::int - 1) g;
-- The same filter grows again once the cap leaves room.
RESET ROLE;
SET cuckoo.max_bytes_per_role = '1MB';
SET ROLE cf_lim_a;
SELECT fill('lim_grow', 5000000) LIKE '53200: cuckoo filter "lim_grow" is full and cannot grow%' AS refused_again_later;
SELECT tables > 3 AS more_tables FROM cuckoo_filters WHERE name = 'lim_grow';
-- Without growth a full filter answers false, as before (no cap involved).
SELECT cf_create('lim_fixed', 100, expansion => 0);
SELECT count(*) FILTER (WHERE NOT cf_insert('lim_fixed', g)) > 0 AS some_refused FROM generate_series(1, 1000) g;
SELECT cf_drop('lim_fixed');
RESET ROLE;
RESET cuckoo.max_bytes_per_role;

-- A value larger than the whole region is refused before it is expanded.
SELECT err($$SELECT cf_publish('lim_huge', cf_empty(40000000, 0.5))$$)
       ~ '^53200: not enough cuckoo shared memory for filter "lim_huge": it needs \d+ bytes, the whole region holds \d+ bytes of filters$' AS refused_early;

-- Per database, set with ALTER DATABASE (in effect from the next
-- connection): one filter, whoever owns it; then 16 kB.
\set here :DBNAME
CREATE DATABASE cf_lim_other;
ALTER DATABASE cf_lim_other SET cuckoo.max_filters_per_database = 1;
\c cf_lim_other
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION cuckoo;
RESET client_min_messages;
CREATE FUNCTION errh(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE st text; msg text; hint text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
  RETURN st || ': ' || msg || E'\nHINT: ' || hint;
END $f$;
\c cf_lim_other cf_lim_b
\set VERBOSITY terse
SHOW cuckoo.max_filters_per_database;
SELECT cf_create('lim_b_other', 1000);
\c cf_lim_other cf_lim_a
\set VERBOSITY terse
SELECT errh($$SELECT cf_create('lim_a_other', 1000)$$);
\c cf_lim_other postgres
\set VERBOSITY terse
ALTER DATABASE cf_lim_other RESET cuckoo.max_filters_per_database;
ALTER DATABASE cf_lim_other SET cuckoo.max_bytes_per_database = '16kB';
\c cf_lim_other cf_lim_a
\set VERBOSITY terse
SHOW cuckoo.max_bytes_per_database;
SELECT cf_create('lim_a_other', 1000);
SELECT errh($$SELECT cf_create('lim_a_other2', 100000)$$);
\c :here postgres
\set VERBOSITY terse
-- The other database's cap does not apply here.
SET ROLE cf_lim_a;
SELECT cf_create('lim_a_here', 100000);
SELECT cf_drop('lim_a_here');
RESET ROLE;

-- cuckoo_usage: a superuser sees every role in every database (the region
-- serves the cluster), with the caps in effect in this session.
SET cuckoo.max_filters_per_role = 10;
SET cuckoo.max_bytes_per_database = '1GB';
SELECT * FROM cuckoo_usage WHERE role LIKE 'cf_lim%' ORDER BY role, database;
-- Anyone else sees their own rows (all databases) and no other role's; a
-- row for this database even without filters.
SET ROLE cf_lim_b;
SELECT role, database, filters, bytes FROM cuckoo_usage ORDER BY role, database;
SET ROLE cf_lim_c;
SELECT role, database, filters, bytes FROM cuckoo_usage ORDER BY role, database;
RESET ROLE;
RESET cuckoo.max_filters_per_role;
RESET cuckoo.max_bytes_per_database;

-- DROP ROLE of a role that owns filters, in any database, is refused (the
-- detail names five).
SET ROLE cf_lim_a;
SELECT cf_create('lim_a5', 10), cf_create('lim_a6', 10);
RESET ROLE;
SELECT errh($$DROP ROLE cf_lim_a$$);
SELECT errh($$DROP ROLE cf_lim_c, cf_lim_b$$);
-- Only to roles that may drop it: others get PostgreSQL's own error.
SET ROLE cf_lim_b;
SELECT errh($$DROP ROLE cf_lim_a$$);
SET ROLE cf_lim_c;  -- CREATEROLE
SELECT errh($$DROP ROLE cf_lim_a$$);
RESET ROLE;
SET client_min_messages = warning;
DROP ROLE IF EXISTS cf_lim_nobody;
RESET client_min_messages;
-- DROP OWNED and REASSIGN OWNED leave named filters alone, and say so.
DROP OWNED BY cf_lim_b;
REASSIGN OWNED BY cf_lim_b TO cf_lim_c;
SELECT name, owner FROM cuckoo_filters WHERE name LIKE 'lim%' ORDER BY name;
-- Dropped with cf_drop (here by a superuser), the role can be dropped; a
-- dropped database's filters do not hold it.
SELECT cf_drop('lim_b1');
DROP DATABASE cf_lim_other;
DROP ROLE cf_lim_b;
SELECT cf_drop(name) FROM cuckoo_filters WHERE owner = 'cf_lim_a' ORDER BY name;
DROP ROLE cf_lim_a, cf_lim_c;
SELECT count(*) AS left_over FROM cuckoo_usage WHERE role LIKE 'cf_lim%' OR role IS NULL;
DROP FUNCTION errh(text);
DROP FUNCTION fill(text, int);
