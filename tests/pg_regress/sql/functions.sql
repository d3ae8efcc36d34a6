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

-- Filters of different bucket counts cannot be merged without their keys (a
-- fingerprint's bucket under one table size does not say where it goes under
-- another); the error says what differs and how to build compatible filters.
\set VERBOSITY default
SELECT cf_union(cf_empty(100000, 0.01), cf_agg(g)) FROM generate_series(1, 100) g;
\set VERBOSITY terse
SELECT err($q$SELECT cf_union(cf_agg(g, 0.002, 1000), cf_agg(g + 100000, 0.002, 100000)) FROM generate_series(1, 100) g$q$);
-- Same capacity and fpp, different key counts: same shape, the union works.
SELECT cf_info(u) ->> 'buckets' AS buckets, cf_count(u), cf_contains(u, 77), cf_contains(u, 100077)
  FROM (SELECT cf_union(cf_agg(g, 0.002, 100000), cf_agg(g + 100000, 0.002, 100000) FILTER (WHERE g <= 50)) u
          FROM generate_series(1, 100) g) x;
-- Auto-sized filters of the same key count share a shape but leave room for
-- their own keys only: their union does not fit.
SELECT err($q$SELECT cf_union(cf_agg(g), cf_agg(g + 1000)) FROM generate_series(1, 1000) g$q$);
-- Different fingerprint sizes or seeds cannot be merged.
SELECT err($q$SELECT cf_union(cf_empty(10, 0.01), cf_empty(10, 0.00001))$q$);
SELECT err($q$SELECT cf_union(cf_empty(10, 0.01),
       ('cf2:' || translate(encode(overlay(decode(substr(cf_empty(10, 0.01)::text, 5), 'base64') PLACING '\x01'::bytea FROM 17 FOR 1), 'base64'), E'\n', ''))::cuckoofilter)$q$);
-- A value written by 0.1.0 (format 1) and a format-2 value cannot be merged.
\set VERBOSITY default
SELECT cf_union(cf_empty(10, 0.01), 'cf1:Q0tPRgEBDAQCAAAAAAAAADEhb29rY3VjAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=='::cuckoofilter);
\set VERBOSITY terse

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
