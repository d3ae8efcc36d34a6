-- The cuckoofilter value type: text I/O, sizing, count/info, NULLs, parameters.
\set VERBOSITY terse

-- An empty filter (format 2): any bucket count, the fewest that hold the capacity
-- at the fpp; the shape (fingerprint bits, slots per bucket) follows the fpp.
SELECT cf_empty(10, 0.01);
SELECT cf_empty(10, 0.01)::text::cuckoofilter::text = cf_empty(10, 0.01)::text AS text_round_trip;
SELECT cf_info(cf_empty(1000, 0.01));
SELECT cf_info(cf_empty(1000, 0.0001)) ->> 'bucket_size' AS slots, cf_info(cf_empty(1000, 0.0001)) ->> 'fingerprint_bits' AS bits;
SELECT cf_info(cf_empty(1000, 0.000001)) ->> 'bucket_size' AS slots, cf_info(cf_empty(1000, 0.000001)) ->> 'fingerprint_bits' AS bits;

-- Parameters out of range: 22023.
SELECT err($q$SELECT cf_empty(0, 0.01)$q$);
SELECT err($q$SELECT cf_empty(-5, 0.01)$q$);
SELECT err($q$SELECT cf_empty(10, 0)$q$);
SELECT err($q$SELECT cf_empty(10, 1)$q$);
SELECT err($q$SELECT cf_empty(10, -0.1)$q$);
SELECT err($q$SELECT cf_empty(10, 'NaN')$q$);
SELECT err($q$SELECT cf_empty(10, 'Infinity')$q$);
SELECT err($q$SELECT cf_empty(10, 1e-9)$q$);
SELECT err($q$SELECT cf_empty(9223372036854775807, 0.01)$q$);
SELECT err($q$SELECT cf_empty(1000000000, 0.01)$q$);

-- Strict functions: NULL in, NULL out.
SELECT cf_empty(NULL, 0.01) IS NULL, cf_empty(10, NULL) IS NULL;
SELECT cf_contains(NULL::cuckoofilter, 1) IS NULL AS null_filter, cf_contains(cf_empty(10, 0.01), NULL::int) IS NULL AS null_key;
SELECT cf_insert(NULL, 1) IS NULL, cf_delete(cf_empty(10, 0.01), NULL::int) IS NULL, cf_count(NULL) IS NULL, cf_info(NULL) IS NULL;
SELECT cf_union(NULL, cf_empty(10, 0.01)) IS NULL;

-- Insert, probe, delete on a value; values are immutable.
CREATE TABLE v (f cuckoofilter);
INSERT INTO v SELECT cf_insert(cf_insert(cf_empty(100, 0.01), 42), 'hello'::text);
SELECT cf_count(f), cf_contains(f, 42), cf_contains(f, 'hello'::text), cf_contains(f, 43) FROM v;
SELECT cf_count(cf_delete(f, 42)) AS after_delete, cf_contains(cf_delete(f, 42), 42) AS still_there, cf_count(f) AS original FROM v;
-- Delete of a key that was never inserted reports nothing removed.
SELECT cf_count(cf_delete(f, 12345)) FROM v;
-- The same key twice is two copies; each delete removes one.
SELECT cf_count(cf_insert(f, 42)), cf_contains(cf_delete(cf_insert(f, 42), 42), 42) FROM v;

-- A full filter says so and keeps what it had.
CREATE TABLE full_test AS SELECT cf_empty(4, 0.01) AS f;
DO $$
DECLARE
  i int := 0;
  f cuckoofilter;
BEGIN
  SELECT full_test.f INTO f FROM full_test;
  LOOP
    BEGIN
      f := cf_insert(f, i);
    EXCEPTION WHEN program_limit_exceeded THEN
      RAISE NOTICE 'full after % inserts (% slots)', i, (cf_info(f) ->> 'buckets')::int * (cf_info(f) ->> 'bucket_size')::int;
      EXIT;
    END;
    i := i + 1;
  END LOOP;
  FOR j IN 0 .. i - 1 LOOP
    IF NOT cf_contains(f, j) THEN
      RAISE EXCEPTION 'key % lost after a failed insert', j;
    END IF;
  END LOOP;
  RAISE NOTICE 'all % keys still present, count %', i, cf_count(f);
END $$;
SELECT cf_insert(cf_agg(g), 0) FROM generate_series(1, 4) g WHERE false;

-- Storage: values are stored uncompressed (filter bits do not compress).
SELECT typstorage, typalign FROM pg_type WHERE typname = 'cuckoofilter';
CREATE TABLE stored AS SELECT cf_agg(g) AS f FROM generate_series(1, 100000) g;
SELECT pg_column_size(f) = (cf_info(f) ->> 'bytes')::int - 4 AS uncompressed FROM stored;
