-- Named filters in shared memory: the API, literal resolution, errors, publish and
-- snapshot round trips, permissions with two roles, and database isolation.
\set VERBOSITY terse
SELECT cf_drop(name) FROM cuckoo_filters;

-- A string literal as the first argument picks the named-filter overloads.
SELECT cf_create('n', 10000);
SELECT cf_insert('n', 42), cf_insert('n', '9'::text), cf_insert('n', 7::int2);
SELECT pg_typeof(cf_insert('n', 43)), pg_typeof(cf_contains('n', 42));
SELECT cf_contains('n', 42), cf_contains('n', 42::int8), cf_contains('n', 7), cf_contains('n', '9'::text);
SELECT count(*) FILTER (WHERE cf_contains('n', g)) AS false_positives FROM generate_series(1000, 100999) g;
SELECT cf_delete('n', 42), cf_delete('n', 42), cf_contains('n', 42);
SELECT name, capacity, items, bytes, fpp, inserts, lookups, deletes, failed_inserts, owner, lookup_grantee FROM cuckoo_filters;
SELECT cf_contains('n', NULL::int), cf_insert('n', NULL::int), cf_insert(NULL::text, 1);
EXPLAIN (COSTS OFF, VERBOSE) SELECT cf_contains('n', 1);

-- Errors.
SELECT err($$SELECT cf_create('n', 10)$$);
SELECT err($$SELECT cf_contains('missing', 1)$$);
SELECT err($$SELECT cf_insert('missing', 1)$$);
SELECT err($$SELECT cf_delete('missing', 1)$$);
SELECT err($$SELECT cf_snapshot('missing')$$);
SELECT cf_drop('missing');
SELECT err($$SELECT cf_create('bad', 0)$$);
SELECT err($$SELECT cf_create('bad', -5)$$);
SELECT err($$SELECT cf_create('bad', 1000, 0)$$);
SELECT err($$SELECT cf_create('bad', 1000, 1.5)$$);
SELECT err($$SELECT cf_create('bad', 1000, 'NaN')$$);
SELECT err($$SELECT cf_create('', 10)$$);
SELECT err(format($$SELECT cf_create(%L, 10)$$, repeat('x', 64)));
SELECT err($$SELECT cf_create('huge', 9000000000000000000)$$);
SELECT err($$SELECT cf_create('huge', 4000000000)$$) ~ '^53200: not enough cuckoo shared memory for filter "huge": requested \d+ bytes, \d+ bytes free' AS exhaustion_message;

-- A full filter says so and keeps everything.
SELECT cf_create('tiny', 100, expansion => 0);
CREATE TEMP TABLE tiny_ins AS SELECT g, cf_insert('tiny', g) AS ok FROM generate_series(1, 300) g;
SELECT count(*) FILTER (WHERE ok) >= 100 AS capacity_reached, count(*) FILTER (WHERE NOT ok) > 0 AS some_refused FROM tiny_ins;
SELECT bool_and(cf_contains('tiny', g)) AS all_stored_found FROM tiny_ins WHERE ok;
SELECT items = (SELECT count(*) FROM tiny_ins WHERE ok) AS items_agree, inserts = items AS inserts_agree,
       failed_inserts = (SELECT count(*) FROM tiny_ins WHERE NOT ok) AS failures_counted, load_factor > 0.9 AS high_load
  FROM cuckoo_filters WHERE name = 'tiny';

-- cf_publish and cf_snapshot: values and named filters hash keys identically.
SELECT cf_publish('p', cf_agg(g)) FROM generate_series(1, 50000) g;
SELECT count(*) FILTER (WHERE cf_contains('p', g)) AS found FROM generate_series(1, 50000) g;
SELECT count(*) FILTER (WHERE cf_contains('p', g) <> cf_contains(s.f, g)) AS disagreements
  FROM (SELECT cf_snapshot('p') AS f OFFSET 0) s, generate_series(1, 200000) g;
SELECT cf_snapshot('p')::text = (SELECT cf_agg(g)::text FROM generate_series(1, 50000) g) AS snapshot_equals_published;
SELECT items, capacity >= 50000 AS capacity_ok FROM cuckoo_filters WHERE name = 'p';
-- Replacing keeps the name and swaps the contents in one step.
SELECT cf_publish('p', cf_agg(g)) FROM generate_series(100001, 100100) g;
SELECT cf_contains('p', 1) AS old_key, cf_contains('p', 100050) AS new_key, (SELECT items FROM cuckoo_filters WHERE name = 'p');
-- Snapshot of a filter being changed by this session, then inserted into as a value.
SELECT cf_count(cf_insert(cf_snapshot('n'), 999999)) = (SELECT items + 1 FROM cuckoo_filters WHERE name = 'n') AS snapshot_is_a_value;

-- Permissions: the owner's members may do anything; lookups may be granted.
SET client_min_messages = warning;
DROP ROLE IF EXISTS cf_alice; DROP ROLE IF EXISTS cf_bob; DROP ROLE IF EXISTS cf_carol;
RESET client_min_messages;
CREATE ROLE cf_alice; CREATE ROLE cf_bob; CREATE ROLE cf_carol IN ROLE cf_alice;
GRANT EXECUTE ON FUNCTION err(text) TO PUBLIC;
SET ROLE cf_alice;
SELECT cf_create('owned', 1000);
SELECT cf_insert('owned', 1);
SET ROLE cf_bob;
SELECT err($$SELECT cf_contains('owned', 1)$$);
SELECT err($$SELECT cf_insert('owned', 2)$$);
SELECT err($$SELECT cf_delete('owned', 1)$$);
SELECT err($$SELECT cf_snapshot('owned')$$);
SELECT err($$SELECT cf_publish('owned', cf_empty(10, 0.01))$$);
SELECT err($$SELECT cf_drop('owned')$$);
SELECT err($$SELECT cf_grant_lookup('owned', 'cf_bob')$$);
SELECT count(*) AS bob_sees FROM cuckoo_filters WHERE name = 'owned';
SET ROLE cf_carol;  -- a member of the owner
SELECT cf_insert('owned', 2), cf_contains('owned', 2);
SELECT cf_grant_lookup('owned', 'cf_bob');
SET ROLE cf_bob;
SELECT cf_contains('owned', 1), cf_contains('owned', 2), cf_count(cf_snapshot('owned'));
SELECT err($$SELECT cf_insert('owned', 3)$$);
SELECT name, owner, lookup_grantee FROM cuckoo_filters WHERE name = 'owned';
SET ROLE cf_alice;
SELECT cf_revoke_lookup('owned');
SET ROLE cf_bob;
SELECT err($$SELECT cf_contains('owned', 1)$$);
SET ROLE cf_alice;
SELECT cf_grant_lookup('owned', 'public');
SET ROLE cf_bob;
SELECT cf_contains('owned', 1);
SELECT err($$SELECT cf_grant_lookup('owned', 'no_such_role')$$);
RESET ROLE;
-- One expression, several roles: access checked for one role is not reused for
-- the next (a plpgsql loop's expression keeps its state across iterations).
SELECT cf_revoke_lookup('owned');
CREATE FUNCTION probe_as(roles text[]) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE r text; out text := '';
BEGIN
  FOREACH r IN ARRAY roles LOOP
    EXECUTE format('SET LOCAL ROLE %I', r);
    BEGIN
      out := out || r || ':' || cf_contains('owned', 1)::text || ' ';
    EXCEPTION WHEN insufficient_privilege THEN
      out := out || r || ':denied ';
    END;
  END LOOP;
  RETURN out;
END $f$;
GRANT EXECUTE ON FUNCTION probe_as(text[]) TO PUBLIC;
BEGIN;
SELECT probe_as(ARRAY['cf_alice', 'cf_bob', 'cf_carol', 'cf_bob']);
ROLLBACK;
DROP FUNCTION probe_as(text[]);
SELECT cf_insert('owned', 3), cf_contains('owned', 3);  -- superuser
SELECT err($$SELECT cf_grant_lookup('owned', 'no_such_role')$$);
-- Publishing over a filter: a member of the owning role refreshes it (owner
-- and grant stay); a superuser who is not a member takes it over (the
-- publisher's, with no grant: the role it was granted to loses it).
SELECT cf_grant_lookup('owned', 'cf_bob');
SET ROLE cf_carol;
SELECT cf_publish('owned', cf_agg(g)) FROM generate_series(10, 20) g;
SELECT name, owner, lookup_grantee, items FROM cuckoo_filters WHERE name = 'owned';
SET ROLE cf_bob;
SELECT err($$SELECT cf_contains('owned', 10)$$);
SET ROLE cf_alice;
SELECT err($$SELECT cf_contains('owned', 10)$$);
RESET ROLE;
SELECT cf_publish('owned', cf_agg(g)) FROM generate_series(10, 30) g;  -- superuser
SELECT owner = current_user AS superuser_owns, lookup_grantee, items FROM cuckoo_filters WHERE name = 'owned';

-- Filters are invisible to other databases.
\set here :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS cf_regress_other;
RESET client_min_messages;
CREATE DATABASE cf_regress_other;
\c cf_regress_other
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION cuckoo;
RESET client_min_messages;
SELECT count(*) AS visible FROM cuckoo_filters;
SELECT cf_contains('n', 7);
SELECT cf_create('n', 10), cf_insert('n', 7), cf_contains('n', 7);
SELECT name, items FROM cuckoo_filters;
SELECT cf_drop('n');
\c :here
\set VERBOSITY terse
SELECT name, items FROM cuckoo_filters ORDER BY name;
DROP DATABASE cf_regress_other;

SELECT cf_drop(name) FROM cuckoo_filters ORDER BY name;
SELECT count(*) AS left_over FROM cuckoo_filters;
DROP ROLE cf_carol; DROP ROLE cf_bob; DROP ROLE cf_alice;
