-- Values written by cuckoo 0.1.0 (format 1: power-of-two tables, 64-bit bucket
-- words) must load and answer every probe exactly as 0.1.0 answered it. The
-- fixtures in data/v1_values.tsv were made by 0.1.0, and this file's expected
-- output was produced by running it against 0.1.0: every count and every md5 of
-- an answer vector below is 0.1.0's own.
\set VERBOSITY terse
CREATE TABLE v1 (id int PRIMARY KEY, note text, f cuckoofilter);
\copy v1 FROM 'tests/pg_regress/data/v1_values.tsv'
SELECT id, note, cf_count(f) AS items, cf_info(f) ->> 'buckets' AS buckets,
       cf_info(f) ->> 'bucket_size' AS slots, cf_info(f) ->> 'fingerprint_bits' AS bits
  FROM v1 ORDER BY id;

-- Every answer over a range of keys, as an md5 of the answer string (t/f per key),
-- plus the number of positives. Integer keys of every width are the same key.
CREATE FUNCTION answers(f cuckoofilter, lo bigint, hi bigint) RETURNS text LANGUAGE sql AS $$
  SELECT count(*) FILTER (WHERE a) || ' ' || md5(string_agg(CASE WHEN a THEN 't' ELSE 'f' END, '' ORDER BY g))
  FROM (SELECT g, cf_contains(f, g) AS a FROM generate_series(lo, hi) g) s $$;
SELECT id, answers(f, 1, 200000) FROM v1 WHERE id IN (1, 3, 4, 5, 7, 8, 9) ORDER BY id;
SELECT count(*) FILTER (WHERE cf_contains(f, g::int)) AS int4_hits, count(*) FILTER (WHERE cf_contains(f, g::int2)) AS int2_hits
  FROM v1, generate_series(1, 30000) g WHERE id = 1;
SELECT count(*) FILTER (WHERE cf_contains(f, md5(g::text))) AS text_hits,
       md5(string_agg(CASE WHEN cf_contains(f, md5(g::text)) THEN 't' ELSE 'f' END, '' ORDER BY g)) AS text_answers
  FROM v1, generate_series(1, 100000) g WHERE id = 2;
SELECT count(*) FILTER (WHERE cf_contains(f, date '2000-01-01' + g)) AS date_hits,
       md5(string_agg(CASE WHEN cf_contains(f, date '2000-01-01' + g) THEN 't' ELSE 'f' END, '' ORDER BY g)) AS date_answers
  FROM v1, generate_series(1, 20000) g WHERE id = 6;

-- Output is unchanged: text and binary forms round trip to the same bytes.
SELECT id, md5(f::text) AS text_md5, md5(cuckoofilter_send(f)) AS binary_md5,
       f::text::cuckoofilter::text = f::text AS text_round_trip FROM v1 ORDER BY id;

-- Changing a format-1 value: insert, delete, union, union_agg answer as 0.1.0's did.
SELECT answers(cf_insert(cf_insert(f, 500000), 500001), 1, 200000) AS inserted,
       cf_count(cf_insert(f, 500000)) AS count_after_insert FROM v1 WHERE id = 1;
SELECT answers(cf_delete(f, 7), 1, 200000) AS deleted_one_copy_of_7, cf_count(cf_delete(f, 7)) AS count_after,
       cf_contains(cf_delete(cf_delete(cf_delete(f, 7), 7), 7), 7) AS all_copies_deleted FROM v1 WHERE id = 5;
SELECT answers(cf_union(a.f, b.f), 1, 200000) AS same_shape, cf_count(cf_union(a.f, b.f)) AS items
  FROM v1 a, v1 b WHERE a.id = 7 AND b.id = 8;
SELECT answers(cf_union(a.f, b.f), 1, 200000) AS folded, cf_info(cf_union(a.f, b.f)) ->> 'buckets' AS buckets
  FROM v1 a, v1 b WHERE a.id = 1 AND b.id = 9;
-- 0.1.0 could not merge these (no room); since 0.7.0 their union keeps both
-- tables and says "maybe" exactly where either does.
WITH x AS MATERIALIZED (SELECT cf_union(a.f, b.f) u, a.f a, b.f b FROM v1 a, v1 b WHERE a.id = 1 AND b.id = 7)
SELECT cf_info(u) ->> 'tables' AS tables,
       (SELECT count(*) FROM generate_series(1, 200000) g WHERE (cf_contains(a, g) OR cf_contains(b, g)) <> cf_contains(u, g)) AS differs
  FROM x;
SELECT answers(cf_union_agg(f), 1, 200000) AS union_agg FROM v1 WHERE id IN (7, 8);

-- Published into shared memory, a format-1 value answers the same by name, and
-- its snapshot answers the same again.
SELECT cf_publish('v1_published', f) FROM v1 WHERE id = 1;
SELECT count(*) FILTER (WHERE cf_contains('v1_published', g)) AS named_hits,
       md5(string_agg(CASE WHEN cf_contains('v1_published', g) THEN 't' ELSE 'f' END, '' ORDER BY g)) AS named_answers
  FROM generate_series(1, 200000) g;
SELECT answers(cf_snapshot('v1_published'), 1, 200000) AS snapshot;
SELECT cf_insert('v1_published', 500000), cf_contains('v1_published', 500000);
SELECT cf_drop('v1_published');
