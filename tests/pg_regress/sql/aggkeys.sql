-- The key type cf_agg records, on every path (issue 30, item 5): for keys of
-- every kind, cf_sharded_agg gives cf_agg's filter byte for byte over the
-- same rows (md5 of the text form, so the recorded key type too): char(n)
-- name and "char" keys (which have their own cf_sharded_agg declarations), citext
-- (given to the text declaration through an implicit cast), no rows (a WHERE
-- that matches nothing, an empty table, with fpp and capacity), NULL keys,
-- rows and groups whose keys are all NULL, DISTINCT, explicit
-- cf_sharded_key, a parallel plan over no rows; and cf_agg OVER a window,
-- and cf_sharded_agg OVER it, give cf_agg's filter of the frame's rows,
-- empty frames included, also when one window node computes several. Each
-- check lists what differs; none may.
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS citext;
RESET client_min_messages;
CREATE TYPE ak_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE ak (id int, g int, k_int8 bigint, k_int4 int, k_int2 smallint, k_num numeric, k_text text,
  k_vc varchar(20), k_ch char(6), k_name name, k_bytea bytea, k_date date, k_ts timestamptz, k_uuid uuid,
  k_inet inet, k_mood ak_mood, k_arr int[], k_ci citext, k_qch "char");
-- Group g = 0 and every seventh row hold NULL keys only.
INSERT INTO ak SELECT i, i % 5, n * 7919 % 500, n, n::smallint, n / 7.0, 't' || n, 'v' || n, 'c' || n,
    ('n' || n)::name, decode(md5(n::text), 'hex'), date '2026-01-01' + n, timestamptz '2026-01-01 00:00+00' + n * interval '1 minute',
    md5(n::text)::uuid, ('10.0.0.' || n % 250)::inet, (enum_range(NULL::ak_mood))[1 + n % 3], ARRAY[n % 30, n % 7],
    CASE WHEN n % 2 = 0 THEN 'Ci' ELSE 'cI' END || n % 40, chr(65 + n % 26)::"char"
  FROM generate_series(1, 300) i, LATERAL (SELECT CASE WHEN i % 5 = 0 OR i % 7 = 0 THEN NULL ELSE i * 3 % 211 END AS n) x;
CREATE TABLE ak_empty (LIKE ak);
CREATE TABLE ak_cols (c text);
INSERT INTO ak_cols VALUES ('k_int8'), ('k_int4'), ('k_int2'), ('k_num'), ('k_text'), ('k_vc'), ('k_ch'), ('k_name'),
  ('k_bytea'), ('k_date'), ('k_ts'), ('k_uuid'), ('k_inet'), ('k_mood'), ('k_arr'), ('k_ci'), ('k_qch');
-- char(n), name and "char" keys resolve to their own cf_sharded_agg; varchar
-- and citext keys are cast to text (varchar keys are text keys).
EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_sharded_agg(k_ch), cf_sharded_agg(k_name), cf_sharded_agg(k_vc), cf_sharded_agg(k_ci), cf_sharded_agg(k_qch) FROM ak;
-- check(name, query): the query with %1$s for the aggregate and %2$s for
-- the key column, run with cf_sharded_agg and with cf_agg for every key
-- column; the rows where the two differ (or either fails).
CREATE TABLE ak_diff (shape text, key text, sharded text, cf_agg text);
CREATE TABLE ak_checked (shape text, key text);
CREATE FUNCTION ak_run(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $f$;
-- compare(shape, query a, query b): queries with %s for the key column.
CREATE FUNCTION ak_compare(shape text, qa text, qb text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
  c text;
  a text;
  b text;
BEGIN
  FOR c IN SELECT ak_cols.c FROM ak_cols LOOP
    a := ak_run(format(qa, c));
    b := ak_run(format(qb, c));
    INSERT INTO ak_checked VALUES (shape, c);
    IF a IS DISTINCT FROM b OR length(b) = 5 THEN
      INSERT INTO ak_diff VALUES (shape, c, a, b);
    END IF;
  END LOOP;
END $f$;
CREATE FUNCTION ak_check(shape text, q text) RETURNS void LANGUAGE sql AS $f$
  SELECT ak_compare(shape, format(q, 'cf_sharded_agg', '%1$s'), format(q, 'cf_agg', '%1$s'))
$f$;
-- cf_sharded_agg against cf_agg.
SELECT ak_check('whole table', 'SELECT md5(%1$s(%2$s)::text) FROM ak');
SELECT ak_check('fpp and capacity', 'SELECT md5(%1$s(%2$s, 0.01, 1000)::text) FROM ak');
SELECT ak_check('a WHERE that matches nothing', 'SELECT md5(%1$s(%2$s)::text) FROM ak WHERE id < 0');
SELECT ak_check('a WHERE that matches nothing, fpp', 'SELECT md5(%1$s(%2$s, 0.05)::text) FROM ak WHERE id < 0');
SELECT ak_check('an empty table', 'SELECT md5(%1$s(%2$s)::text) FROM ak_empty');
SELECT ak_check('an empty table, fpp and capacity', 'SELECT md5(%1$s(%2$s, 0.01, 1000)::text) FROM ak_empty');
SELECT ak_check('rows whose keys are all NULL', 'SELECT md5(%1$s(%2$s)::text) FROM ak WHERE g = 0');
SELECT ak_check('GROUP BY (group 0: all keys NULL)',
  'SELECT md5(string_agg(g || '':'' || h, '','' ORDER BY g)) FROM (SELECT g, md5(%1$s(%2$s)::text) h FROM ak GROUP BY g) s');
SELECT ak_check('DISTINCT keys', 'SELECT md5(%1$s(DISTINCT %2$s)::text) FROM ak');
SELECT ak_check('DISTINCT keys, no rows', 'SELECT md5(%1$s(DISTINCT %2$s)::text) FROM ak WHERE id < 0');
SELECT ak_check('ORDER BY in the call, fpp', 'SELECT md5(%1$s(%2$s, 0.01 ORDER BY id DESC)::text) FROM ak');
-- cf_sharded_agg of cf_sharded_key states is cf_agg of the keys.
SELECT ak_compare('cf_sharded_key states', 'SELECT md5(cf_sharded_agg(cf_sharded_key(%s))::text) FROM ak',
  'SELECT md5(cf_agg(%s)::text) FROM ak');
SELECT ak_compare('cf_sharded_key states, no rows', 'SELECT md5(cf_sharded_agg(cf_sharded_key(%s))::text) FROM ak WHERE id < 0',
  'SELECT md5(cf_agg(%s)::text) FROM ak WHERE id < 0');
SELECT ak_compare('cf_sharded_key states, all NULL', 'SELECT md5(cf_sharded_agg(cf_sharded_key(%s))::text) FROM ak WHERE g = 0',
  'SELECT md5(cf_agg(%s)::text) FROM ak WHERE g = 0');
-- A parallel plan over no rows: the final step combines partial states
-- that say nothing. (id + 0 < 0: a condition whose rows the planner
-- estimates as many, so that it aggregates in the workers.)
CREATE TABLE ak_big AS SELECT a.* FROM ak a, generate_series(1, 100);
ANALYZE ak_big;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT cf_sharded_agg(k_ci), cf_agg(k_ci) FROM ak_big WHERE id + 0 < 0;
SELECT ak_check('a parallel plan', 'SELECT md5(%1$s(%2$s)::text) FROM ak_big');
SELECT ak_check('a parallel plan over no rows', 'SELECT md5(%1$s(%2$s)::text) FROM ak_big WHERE id + 0 < 0');
SELECT ak_compare('a parallel plan over no rows, cf_sharded_key states',
  'SELECT md5(cf_sharded_agg(cf_sharded_key(%s))::text) FROM ak_big WHERE id + 0 < 0', 'SELECT md5(cf_agg(%s)::text) FROM ak WHERE id < 0');
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- Windows: each row's filter against cf_agg over its frame's rows (a
-- correlated subquery), for cf_agg and cf_sharded_agg. A frame of the next
-- row only is empty on each partition's last row; with EXCLUDE CURRENT ROW,
-- a partition of one row has an empty frame.
CREATE FUNCTION ak_window(shape text, frame text, rows_of text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE f text;
BEGIN
  FOREACH f IN ARRAY ARRAY['cf_agg', 'cf_sharded_agg'] LOOP
    PERFORM ak_compare(f || ' OVER ' || shape,
      format('SELECT md5(string_agg(md5(w::text), '','' ORDER BY id)) FROM (SELECT id, %s(%%1$s) OVER (%s) w FROM ak) s', f, frame),
      format('SELECT md5(string_agg(md5((SELECT cf_agg(b.%%1$s) FROM ak b WHERE %s)::text), '','' ORDER BY a.id)) FROM ak a', rows_of));
  END LOOP;
END $f$;
SELECT ak_window('(PARTITION BY g)', 'PARTITION BY g', 'b.g = a.g');
SELECT ak_window('(ORDER BY id ROWS 2 PRECEDING)', 'ORDER BY id ROWS 2 PRECEDING', 'b.id BETWEEN a.id - 2 AND a.id');
SELECT ak_window('(PARTITION BY g ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 1 FOLLOWING)',
  'PARTITION BY g ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 1 FOLLOWING',
  'b.g = a.g AND b.id = (SELECT min(c.id) FROM ak c WHERE c.g = a.g AND c.id > a.id)');
SELECT ak_window('(PARTITION BY id ... EXCLUDE CURRENT ROW)', 'PARTITION BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW', 'false');
-- Several window aggregates of one node (over keys of other types): each
-- still records its own key's type, empty frames included.
CREATE FUNCTION ak_window_with_others(f text, others text) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM ak_compare(f || ' OVER a window with others',
    format('SELECT md5(string_agg(md5(w::text), '','' ORDER BY id)) FROM (SELECT id, %s(%%1$s) OVER w w, %s FROM ak WINDOW w AS (PARTITION BY g ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 1 FOLLOWING)) s', f, others),
    'SELECT md5(string_agg(md5((SELECT cf_agg(b.%1$s) FROM ak b WHERE b.g = a.g AND b.id = (SELECT min(c.id) FROM ak c WHERE c.g = a.g AND c.id > a.id))::text), '','' ORDER BY a.id)) FROM ak a');
END $f$;
SELECT ak_window_with_others('cf_agg', 'cf_agg(k_int8) OVER w o1, cf_agg(k_text) OVER w o2');
SELECT ak_window_with_others('cf_sharded_agg', 'cf_sharded_agg(k_int8) OVER w o1, cf_sharded_agg(k_num) OVER w o2');
-- Nothing differs; every key column was checked in every shape.
SELECT shape, key, sharded, cf_agg FROM ak_diff ORDER BY shape, key;
SELECT count(*) AS checks, count(DISTINCT shape) AS shapes, count(DISTINCT key) AS keys FROM ak_checked;
-- The key types recorded, as cf_info shows them (also over no rows, for a
-- group of NULL keys and in a window).
SELECT c AS key,
       ak_run(format('SELECT cf_info(cf_sharded_agg(%s)) ->> ''key_type'' FROM ak WHERE id < 0', c)) AS no_rows,
       ak_run(format('SELECT cf_info(cf_sharded_agg(%s)) ->> ''key_type'' FROM ak WHERE g = 0', c)) AS all_null,
       ak_run(format('SELECT cf_info(cf_agg(%s) OVER ()) ->> ''key_type'' FROM ak LIMIT 1', c)) AS window
  FROM ak_cols ORDER BY c;
-- A probe of a filter made over no rows reads text as the key type.
SELECT cf_contains(cf_sharded_agg(k_num), '1.5'), cf_contains(cf_sharded_agg(k_ch), 'c1') FROM ak WHERE id < 0;
-- A key type that cannot be a key: the error of a row of it (42883), also
-- over no rows and for NULL keys only.
SELECT f, w AS rows_where, err(format('SELECT %s(x) FROM (SELECT NULL::point x WHERE %s) s', f, w)) AS error
  FROM unnest(ARRAY['cf_agg', 'cf_sharded_agg']) f, unnest(ARRAY['false', 'true']) w ORDER BY f, w;
DROP TABLE ak, ak_empty, ak_big, ak_cols, ak_diff, ak_checked;
DROP FUNCTION ak_window(text, text, text), ak_window_with_others(text, text), ak_check(text, text), ak_compare(text, text, text), ak_run(text);
DROP TYPE ak_mood;
