-- Filters built across nodes: cf_sharded_agg (a state other nodes can ship),
-- and cf_agg pushed down to postgres_fdw servers, unioned.
CREATE TABLE sk AS SELECT (g % 30000)::bigint AS k FROM generate_series(1, 100000) g;
INSERT INTO sk VALUES (NULL), (NULL);
-- The same filter as cf_agg, byte for byte, for each overload.
SELECT cf_sharded_agg(k)::text = cf_agg(k)::text AS same,
       cf_sharded_agg(k, 0.01)::text = cf_agg(k, 0.01)::text AS same_fpp,
       cf_sharded_agg(k, 0.001, 50000)::text = cf_agg(k, 0.001, 50000)::text AS same_capacity
FROM sk;
SELECT cf_sharded_agg(k)::text = cf_agg(k)::text AS same_no_rows FROM sk WHERE k < 0;
-- Keys of the exactly declared types (for Citus) and of any other hashable type.
SELECT bool_and(same) AS same_for_every_type FROM (
    SELECT cf_sharded_agg(k::smallint)::text = cf_agg(k::smallint)::text FROM sk WHERE k < 30000
    UNION ALL SELECT cf_sharded_agg(k::integer)::text = cf_agg(k::integer)::text FROM sk
    UNION ALL SELECT cf_sharded_agg(k::text, 0.01)::text = cf_agg(k::text, 0.01)::text FROM sk
    UNION ALL SELECT cf_sharded_agg(md5(k::text)::uuid, 0.01, 40000)::text = cf_agg(md5(k::text)::uuid, 0.01, 40000)::text FROM sk
    UNION ALL SELECT cf_sharded_agg(k::numeric)::text = cf_agg(k::numeric)::text FROM sk
    UNION ALL SELECT cf_sharded_agg(k::varchar)::text = cf_agg(k::varchar)::text FROM sk) s(same);
SELECT p.oid::regprocedure AS declared FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid
 WHERE p.proname = 'cf_sharded_agg' AND p.pronargs = 1 ORDER BY p.oid::regprocedure::text;
SELECT cf_count(cf_sharded_agg(k)) FROM sk;
-- Partial states combined, as Citus combines the shards' states: a parallel
-- plan ships bytea states from the workers to the leader.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT cf_sharded_agg(k) FROM sk;
SELECT cf_sharded_agg(k)::text = (SELECT cf_agg(k)::text FROM sk) AS same_parallel FROM sk;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- Per-shard filters (keys split by value) of one capacity union into the
-- filter of all keys: same count and the same answer for every key, present or not.
WITH shards AS (SELECT cf_sharded_agg(k, 0.002, 40000) AS f FROM sk GROUP BY k % 4),
     whole AS (SELECT cf_agg(k, 0.002, 40000) AS f FROM sk),
     u AS (SELECT cf_union_agg(f) AS f FROM shards)
SELECT cf_count(u.f) = cf_count(whole.f) AS same_count,
       (SELECT bool_and(cf_contains(u.f, g) = cf_contains(whole.f, g)) FROM generate_series(-50000, 100000) g) AS same_answers
FROM u, whole;
-- The functions called directly (as an engine driving them would) leave their
-- inputs alone and give the same filter.
SELECT cf_sharded_final(cf_sharded_combine(cf_sharded_trans(cf_sharded_trans(NULL, 1::bigint), 2::bigint), cf_sharded_trans(NULL, 3::bigint)))::text
       = (SELECT cf_agg(g::bigint)::text FROM generate_series(1, 3) g) AS same_direct;
-- Misuse.
\set VERBOSITY sqlstate
SELECT cf_sharded_final('\x00'::bytea);
SELECT cf_sharded_agg(k, 0.01, g) FROM (VALUES (1, 10), (2, 20)) v(k, g);
-- Rates and capacities are checked as cf_agg checks them.
SELECT cf_sharded_agg(k, 0.0) FROM sk;
SELECT cf_sharded_agg(k, 0.01, 0) FROM sk;
SELECT cf_agg(k, 0.01, 0) FROM sk;
CREATE AGGREGATE bad_sharded(int) (SFUNC = cf_sharded_trans, STYPE = bytea, FINALFUNC = cf_sharded_final, INITCOND = '\x0102');
SELECT bad_sharded(g) FROM generate_series(1, 3) g;
\set VERBOSITY default
SELECT cf_sharded_final('\x00'::bytea);
DROP AGGREGATE bad_sharded(int);

-- The state type (0.9.0): what an engine such as Citus ships between nodes is
-- cf_sharded_state's text form, each distinct hash once, Rice-coded.
CREATE AGGREGATE state_of(anyelement) (SFUNC = cf_sharded_state_trans, STYPE = cf_sharded_state);
SELECT state_of(1::bigint)::text AS one_key, length(state_of(1::bigint)::text) AS one_key_chars;
SELECT count(DISTINCT k) AS keys, length(state_of(k)::text) AS chars,
       round(length(state_of(k)::text)::numeric / count(DISTINCT k), 2) AS chars_per_key,
       state_of(k)::text::cf_sharded_state::text = state_of(k)::text AS text_round_trip,
       length(cf_sharded_state_send(state_of(k))) AS binary_bytes
FROM sk;
-- Partial states combine into cf_agg's filter, by text or as they are.
SELECT cf_sharded_agg(s)::text = (SELECT cf_agg(k)::text FROM sk) AS states_combined,
       cf_sharded_agg(s::text::cf_sharded_state)::text = (SELECT cf_agg(k)::text FROM sk) AS states_through_text
FROM (SELECT state_of(k) AS s FROM sk GROUP BY k % 7) x;
-- cf_sharded_key: one key's state (keys of any type go through it on Citus).
SELECT cf_sharded_agg(cf_sharded_key(k))::text = cf_agg(k)::text AS same_key,
       cf_sharded_agg(cf_sharded_key(k::numeric, 0.01))::text = cf_agg(k::numeric, 0.01)::text AS same_numeric,
       cf_sharded_agg(cf_sharded_key(k::text, 0.001, 50000))::text = cf_agg(k::text, 0.001, 50000)::text AS same_text
FROM sk;
SELECT cf_sharded_agg(cf_sharded_key(k::numeric))::text = cf_agg(k::numeric)::text AS same_no_rows,
       cf_info(cf_sharded_agg(cf_sharded_key(k::numeric))) ->> 'key_type' AS key_type,
       cf_info(cf_sharded_agg(cf_sharded_state_trans(NULL, k))) ->> 'key_type' AS other_state_function
FROM sk WHERE k < 0;
-- An enum travels by its name (its OID differs from node to node).
CREATE TYPE shard_mood AS ENUM ('low', 'high');
SELECT position('public.shard_mood'::bytea IN cf_sharded_state_send(state_of('low'::shard_mood))) > 0 AS enum_by_name,
       (SELECT cf_sharded_agg(s::text::cf_sharded_state) FROM (SELECT state_of(m) AS s FROM unnest(enum_range(NULL::shard_mood)) m) x)::text
       = (SELECT cf_agg(m) FROM unnest(enum_range(NULL::shard_mood)) m)::text AS enum_same;
SELECT state_of('low'::shard_mood)::text AS enum_state \gset
DROP TYPE shard_mood;
\set VERBOSITY sqlstate
SELECT :'enum_state'::cf_sharded_state;
SELECT 'cs1:'::cf_sharded_state;
SELECT 'cs2:Q1MBAAEUATXVrZisbnDPAA=='::cf_sharded_state;
SELECT 'cs1:Q1MBAAEUATXVrZisbnDP'::cf_sharded_state;
SELECT 'cs1:Q1MBAAEUATXVrZisbnDPAAA='::cf_sharded_state;
SELECT 'cs1:Q1MBCAEUATXVrZisbnDPAA=='::cf_sharded_state; -- an unknown flag
SELECT 'cs1:not base64!'::cf_sharded_state;
-- 400M hashes claimed in 1,000 bytes: refused before anything is sized by them.
SELECT ('cs1:' || translate(encode('\x4353010001148088debe01'::bytea || decode(repeat('00', 1000), 'hex'), 'base64'), E'\n', ''))::cf_sharded_state;
-- Key type names that are not one, do not parse, or name a type of another kind.
SELECT 'cs1:Q1MBAAIGaW50NCAoAA=='::cf_sharded_state;
SELECT 'cs1:Q1MBAAIIc2VsZWN0LngA'::cf_sharded_state;
SELECT 'cs1:Q1MBAAIPcGdfY2F0YWxvZy5pbnQ0AA=='::cf_sharded_state;
\set VERBOSITY default
SELECT ('cs1:' || translate(encode('\x4353010001148088debe01'::bytea || decode(repeat('00', 1000), 'hex'), 'base64'), E'\n', ''))::cf_sharded_state;
SELECT 'cs1:Q1MBAAIIc2VsZWN0LngA'::cf_sharded_state;
SELECT 'cs1:Q1MBAAEUATXVrZisbnDPAA=='::cf_sharded_state::text AS valid_one_key;
SELECT 'cs1:Q1MBAAEUATXVrZisbnDP'::cf_sharded_state;
DROP AGGREGATE state_of(anyelement);

-- Named filters across Citus nodes need Citus (tests/citus/run.sh runs them on a
-- real cluster); cuckoo_cluster_filters lists nothing here.
\set VERBOSITY sqlstate
SELECT cf_publish_cluster('everywhere', cf_agg(1));
SELECT cf_node_local('everywhere');
SELECT cf_drop_cluster('everywhere');
SELECT cf_sync_cluster('everywhere');
\set VERBOSITY default
SELECT cf_publish_cluster('everywhere', cf_agg(1));
SELECT count(*) AS listed FROM cuckoo_cluster_filters;
-- cf_cluster_pin (what the planner makes of a by-name lookup's name on a
-- Citus cluster) returns the name; without Citus a lookup ignores the pin.
SELECT cf_cluster_pin('everywhere', 42) AS pinned_name;
SELECT cf_create('pin_here', 100, durable => false) IS NOT NULL AS made;
SELECT cf_insert('pin_here', 7);
SELECT cf_contains(cf_cluster_pin('pin_here', 1), 7) AS hit,
       cf_count(cf_cluster_pin('pin_here', 0), 7) AS counted;
SELECT cf_drop('pin_here');

-- postgres_fdw: two shard databases on this server, reached as foreign servers.
\getenv pghost PGHOST
\getenv pgport PGPORT
CREATE DATABASE cuckoo_shard1;
CREATE DATABASE cuckoo_shard2;
\c cuckoo_shard1
CREATE EXTENSION cuckoo;
CREATE TABLE t AS SELECT g::bigint AS k FROM generate_series(1, 60000, 2) g;
-- Named filters are per server (and database): this one is the shard's.
SELECT cf_create('shard_local', 100, durable => false);
\c cuckoo_shard2
CREATE EXTENSION cuckoo;
CREATE TABLE t AS SELECT g::bigint AS k FROM generate_series(2, 60000, 2) g;
\c cuckoo_regress
CREATE EXTENSION postgres_fdw;
CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'pghost', port :'pgport', dbname 'cuckoo_shard1', extensions 'cuckoo');
CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'pghost', port :'pgport', dbname 'cuckoo_shard2', extensions 'cuckoo');
CREATE SERVER shard1_plain FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'pghost', port :'pgport', dbname 'cuckoo_shard1');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard1;
CREATE USER MAPPING FOR CURRENT_USER SERVER shard2;
CREATE USER MAPPING FOR CURRENT_USER SERVER shard1_plain;
CREATE FOREIGN TABLE ft1 (k bigint) SERVER shard1 OPTIONS (table_name 't');
CREATE FOREIGN TABLE ft2 (k bigint) SERVER shard2 OPTIONS (table_name 't');
CREATE FOREIGN TABLE ft1_plain (k bigint) SERVER shard1_plain OPTIONS (table_name 't');
-- With extensions 'cuckoo', the remote builds the filter: only the value travels.
EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_agg(k, 0.002, 60000) FROM ft1;
EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_sharded_agg(k, 0.002, 60000) FROM ft1;
-- Without it, every row travels and the filter is built here.
EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_agg(k, 0.002, 60000) FROM ft1_plain;
-- cf_union_agg over the servers gives the filter of one cf_agg over all rows:
-- the same shape, count and answers.
CREATE TABLE everything AS SELECT k FROM ft1 UNION ALL SELECT k FROM ft2;
WITH parts AS (SELECT cf_agg(k, 0.002, 60000) AS f FROM ft1 UNION ALL SELECT cf_agg(k, 0.002, 60000) FROM ft2),
     u AS (SELECT cf_union_agg(f) AS f FROM parts),
     whole AS (SELECT cf_agg(k, 0.002, 60000) AS f FROM everything)
SELECT cf_count(u.f) AS items,
       cf_info(u.f) - 'items' - 'load_factor' - 'fpp' - 'bits_per_item' = cf_info(whole.f) - 'items' - 'load_factor' - 'fpp' - 'bits_per_item' AS same_shape,
       cf_count(u.f) = cf_count(whole.f) AS same_count,
       (SELECT count(*) FROM generate_series(-100000, 100000) g WHERE cf_contains(u.f, g) <> cf_contains(whole.f, g)) AS answers_differ
FROM u, whole;
-- cf_contains on a value is immutable and shipped; by name it is volatile and
-- runs here, against this server's filters.
SELECT cf_agg(1) AS tiny \gset
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM ft1 WHERE cf_contains(:'tiny'::cuckoofilter, k);
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM ft1 WHERE cf_contains('shard_local', k);
SELECT postgres_fdw_disconnect_all();
DROP FOREIGN TABLE ft1, ft2, ft1_plain;
SET client_min_messages = warning;
DROP SERVER shard1, shard2, shard1_plain CASCADE;
RESET client_min_messages;
DROP EXTENSION postgres_fdw;
DROP DATABASE cuckoo_shard1;
DROP DATABASE cuckoo_shard2;
