-- cf_agg: sizing, duplicates, NULLs, fpp, and parallel plans.
\set VERBOSITY terse
CREATE TABLE keys AS SELECT g AS k FROM generate_series(1, 200000) g;
INSERT INTO keys SELECT NULL FROM generate_series(1, 10);
INSERT INTO keys SELECT k FROM keys WHERE k <= 1000;   -- duplicates
ANALYZE keys;
CREATE TABLE agg AS SELECT cf_agg(k) AS f, cf_agg(k, 0.0001) AS f_low FROM keys;

-- Distinct non-null keys only; default fpp 0.2% at 4 slots x 12 bits, sized exactly
-- for the keys: the load is close to (and never above) 95.5%.
SELECT cf_count(f), cf_info(f) ->> 'fingerprint_bits' AS bits, cf_info(f) ->> 'bucket_size' AS slots,
       (cf_info(f) ->> 'load_factor')::float8 BETWEEN 0.9 AND 0.955 AS load_ok FROM agg;
SELECT cf_count(f_low), cf_info(f_low) ->> 'fingerprint_bits' AS bits FROM agg;
-- No false negatives.
SELECT count(*) FILTER (WHERE NOT cf_contains(f, k)) AS false_negatives FROM agg, keys WHERE k IS NOT NULL;
-- Measured false-positive rate within the target, over 500k keys never inserted.
SELECT count(*) FILTER (WHERE cf_contains(f, g)) / 500000.0 <= 0.002 AS fpp_within_default,
       count(*) FILTER (WHERE cf_contains(f_low, g)) / 500000.0 <= 0.0001 AS fpp_within_low
  FROM agg, generate_series(1000001, 1500000) g;

-- No rows, or only NULLs: an empty filter.
SELECT cf_count(cf_agg(k)) FROM keys WHERE k IS NULL;
SELECT cf_count(cf_agg(k)) FROM keys WHERE false;
-- fpp is checked, and must not change between rows.
SELECT err($q$SELECT cf_agg(k, 0) FROM keys$q$);
SELECT err($q$SELECT cf_agg(k, 2) FROM keys$q$);
SELECT err($q$SELECT cf_agg(k, k / 1000000.0 + 0.01) FROM keys$q$);
-- GROUP BY: one filter per group.
SELECT k % 3 AS g, cf_count(cf_agg(k)) FROM keys WHERE k IS NOT NULL GROUP BY 1 ORDER BY 1;

-- Parallel plans: Partial Aggregate in the workers, and the same filter as serial.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT cf_agg(k) FROM keys;
SELECT md5(cf_agg(k)::text) AS par_f, md5(cf_agg(k, 0.0001)::text) AS par_low FROM keys \gset
CREATE TEMP TABLE par AS SELECT cf_agg(k) AS f FROM keys;
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT cf_agg(k) FROM keys;
SELECT md5(cf_agg(k)::text) AS ser_f, md5(cf_agg(k, 0.0001)::text) AS ser_low FROM keys \gset
SELECT :'par_f' = :'ser_f' AS same_filter, :'par_low' = :'ser_low' AS same_low;
SELECT count(*) FILTER (WHERE cf_contains(par.f, g) <> cf_contains(agg.f, g)) AS differing_answers
  FROM par, agg, generate_series(1, 400000) g;
RESET ALL;
