-- cf_union, cf_union_agg and their compatibility checks.
\set VERBOSITY terse
-- Filters built for the same capacity and fpp have the same shape; their union
-- holds every key of each.
CREATE TABLE parts AS
  SELECT g % 3 AS p, cf_agg(g, 0.002, 3000) AS f FROM generate_series(1, 3000) g GROUP BY 1;
SELECT p, cf_count(f), cf_info(f) ->> 'buckets' AS buckets FROM parts ORDER BY p;
SELECT cf_count(cf_union(a.f, b.f)) FROM parts a, parts b WHERE a.p = 0 AND b.p = 1;
SELECT count(*) FILTER (WHERE cf_contains(u, g)) AS found
  FROM (SELECT cf_union(a.f, b.f) u FROM parts a, parts b WHERE a.p = 0 AND b.p = 1) x,
       generate_series(1, 3000) g WHERE g % 3 IN (0, 1);

-- Filters of different shapes cannot be merged into one table without their
-- keys (a fingerprint's bucket under one table size does not say where it goes
-- under another): their union keeps their tables side by side (format 3,
-- since 0.7.0). It says "maybe" exactly where either input does, and reports
-- the sum of its tables' bounds.
CREATE FUNCTION differs(u cuckoofilter, a cuckoofilter, b cuckoofilter, lo bigint, hi bigint) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM generate_series(lo, hi) g WHERE (cf_contains(a, g) OR cf_contains(b, g)) <> cf_contains(u, g) $$;
CREATE FUNCTION bound_is_sum(u cuckoofilter, a cuckoofilter, b cuckoofilter) RETURNS boolean LANGUAGE sql AS $$
  SELECT abs((cf_info(u) ->> 'fpp')::float8 - (cf_info(a) ->> 'fpp')::float8 - (cf_info(b) ->> 'fpp')::float8) < 1e-12 $$;
SELECT cf_info(u) ->> 'tables' AS tables, cf_info(u) ->> 'format_version' AS format, cf_count(u),
       differs(u, a, b, 1, 20000), bound_is_sum(u, a, b), left(u::text, 4) AS prefix
  FROM (SELECT cf_union(a, b) u, a, b FROM (SELECT cf_empty(100000, 0.01) a, cf_agg(g) b FROM generate_series(1, 100) g) x) y;
SELECT cf_info(u) ->> 'tables' AS tables, cf_count(u), differs(u, a, b, 1, 200000)
  FROM (SELECT cf_union(a, b) u, a, b FROM (SELECT cf_agg(g, 0.002, 1000) a, cf_agg(g + 100000, 0.002, 100000) b FROM generate_series(1, 100) g) x) y;
-- Same capacity and fpp, different key counts: same shape, one table.
SELECT cf_info(u) ->> 'buckets' AS buckets, cf_info(u) ->> 'tables' AS tables, cf_count(u), cf_contains(u, 77), cf_contains(u, 100077)
  FROM (SELECT cf_union(cf_agg(g, 0.002, 100000), cf_agg(g + 100000, 0.002, 100000) FILTER (WHERE g <= 50)) u
          FROM generate_series(1, 100) g) x;
-- Auto-sized filters of the same key count share a shape but leave room for
-- their own keys only: the union tries to merge them, does not fit, and keeps
-- two tables.
SELECT cf_info(u) ->> 'tables' AS tables, cf_count(u), differs(u, a, b, 1, 3000)
  FROM (SELECT cf_union(a, b) u, a, b FROM (SELECT cf_agg(g) a, cf_agg(g + 1000) b FROM generate_series(1, 1000) g) x) y;
-- Different fingerprint sizes: two tables.
SELECT cf_info(cf_union(cf_empty(10, 0.01), cf_empty(10, 0.00001))) ->> 'tables' AS tables;
-- Different seeds cannot be combined: a key hashes differently in each.
SELECT err($q$SELECT cf_union(cf_empty(10, 0.01),
       ('cf2:' || translate(encode(overlay(decode(substr(cf_empty(10, 0.01)::text, 5), 'base64') PLACING '\x01'::bytea FROM 17 FOR 1), 'base64'), E'\n', ''))::cuckoofilter)$q$);
-- A value written by 0.1.0 (format 1) and a format-2 value: two tables, each
-- with its own bucket mapping.
SELECT cf_info(u) ->> 'tables' AS tables, jsonb_path_query_array(cf_info(u), '$.tables_detail[*].bucket_mapping') AS mappings
  FROM (SELECT cf_union(cf_empty(10, 0.01), 'cf1:Q0tPRgEBDAQCAAAAAAAAADEhb29rY3VjAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=='::cuckoofilter) u) x;

-- Seven days, each built with plain cf_agg (sized for its own keys, so no two
-- have the same shape): the union of the days answers every key of every day,
-- and over 200,000 keys of none its measured rate is within the bound it
-- reports (allowing three standard deviations of the measurement).
CREATE TABLE days AS
  SELECT d, cf_agg(d * 1000000 + g) AS f FROM generate_series(0, 6) d, generate_series(1, 2000 + 317 * d) g GROUP BY d;
CREATE TABLE week AS SELECT cf_union_agg(f ORDER BY d) AS u FROM days;
SELECT cf_info(u) ->> 'tables' AS tables, cf_count(u) AS items,
       (SELECT count(*) FROM generate_series(0, 6) d, generate_series(1, 2000 + 317 * d) g WHERE NOT cf_contains(u, d * 1000000 + g)) AS missed
  FROM week;
SELECT positives, round(bound::numeric, 4) AS bound, positives / 200000.0 <= bound + 3 * sqrt(bound / 200000) AS within_bound
  FROM (SELECT (SELECT count(*) FROM generate_series(10000001, 10200000) g WHERE cf_contains(u, g)) AS positives,
               (cf_info(u) ->> 'fpp')::float8 AS bound FROM week) x;
SELECT u::text::cuckoofilter::text = u::text AS text_round_trip FROM week;

-- cf_union_agg: NULLs are skipped; the result answers like the union of the keys.
INSERT INTO parts VALUES (99, NULL);
SELECT cf_count(cf_union_agg(f)) FROM parts;
SELECT count(*) FILTER (WHERE cf_contains(u, g)) AS found FROM (SELECT cf_union_agg(f) u FROM parts) x, generate_series(1, 3000) g;
SELECT cf_union_agg(f) IS NULL AS empty_input FROM parts WHERE false;
-- Parallel: partial unions combine to the same filter as the serial plan.
CREATE TABLE many_parts AS
  SELECT g % 40 AS p, cf_agg(g, 0.002, 40000) AS f FROM generate_series(1, 40000) g GROUP BY 1;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT cf_union_agg(f) FROM many_parts;
SELECT cf_count(u) AS par_count, (SELECT count(*) FROM generate_series(1, 40000) g WHERE cf_contains(u, g)) AS par_found
  FROM (SELECT cf_union_agg(f) u FROM many_parts) x \gset
SET max_parallel_workers_per_gather = 0;
SELECT cf_count(u) AS ser_count, (SELECT count(*) FROM generate_series(1, 40000) g WHERE cf_contains(u, g)) AS ser_found
  FROM (SELECT cf_union_agg(f) u FROM many_parts) x \gset
SELECT :par_count AS parallel_count, :par_found AS parallel_found, :ser_count AS serial_count, :ser_found AS serial_found;
RESET ALL;
-- Direct calls of the transition function do not modify their input.
SELECT cf_count(cf_union_trans(a.f, b.f)), cf_count(a.f) FROM parts a, parts b WHERE a.p = 0 AND b.p = 1;
SELECT err($q$SELECT cf_agg(g, 0.002, 0) FROM generate_series(1, 3) g$q$);
SELECT err($q$SELECT cf_agg(g, 0.002, g) FROM generate_series(1, 3) g$q$);

-- The aggregates' internal-state support functions cannot be called from SQL.
SELECT err($q$SELECT cf_agg_trans(NULL, 1)$q$);
SELECT err($q$SELECT cf_agg_final(NULL)$q$);
