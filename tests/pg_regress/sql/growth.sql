-- Named filters that grow (0.7.0): cf_create's expansion (default 2) adds a
-- table when the filter is full, keeping the rate asked for; expansion => 0
-- keeps a fixed size, refusing inserts when full and keeping what it holds.
\set VERBOSITY terse
SELECT cf_create('grow', 1000, 0.002, false);
SELECT expansion, tables, capacity >= 1000 AS holds_its_capacity, fpp < 0.002 AS bound_under_rate FROM cuckoo_filters WHERE name = 'grow';
-- 60,000 keys into a filter made for 1,000: every insert is stored.
SELECT count(*) FILTER (WHERE cf_insert('grow', g)) AS stored FROM generate_series(1, 60000) g;
SELECT count(*) FILTER (WHERE NOT cf_contains('grow', g)) AS missed FROM generate_series(1, 60000) g;
SELECT tables >= 6 AS grew, items, failed_inserts, capacity >= 60000 AS capacity_is_the_total, fpp <= 0.002 AS rate_kept
  FROM cuckoo_filters WHERE name = 'grow';
-- Over 200,000 keys never inserted the measured rate stays under the rate asked for.
SELECT count(*) FILTER (WHERE cf_contains('grow', g)) <= 0.002 * 200000 AS measured_rate_kept FROM generate_series(1000001, 1200000) g;
-- A snapshot (format 3) answers every key as the filter does; published, it is
-- a filter that grows, with the same tables, answering the same.
CREATE TEMP TABLE snap AS SELECT cf_snapshot('grow') AS s;
SELECT cf_info(s) ->> 'format_version' AS format, (cf_info(s) ->> 'tables')::int = (SELECT tables FROM cuckoo_filters WHERE name = 'grow') AS same_tables,
       cf_info(s) ->> 'expansion' AS expansion, cf_count(s) AS items FROM snap;
SELECT count(*) AS differ FROM snap, generate_series(1, 80000) g WHERE cf_contains(s, g) <> cf_contains('grow', g);
SELECT cf_publish('grow2', s, false) FROM snap;
SELECT expansion, tables = (SELECT tables FROM cuckoo_filters WHERE name = 'grow') AS same_tables, items FROM cuckoo_filters WHERE name = 'grow2';
SELECT count(*) AS differ FROM generate_series(1, 80000) g WHERE cf_contains('grow2', g) <> cf_contains('grow', g);
SELECT count(*) FILTER (WHERE cf_insert('grow2', g)) AS stored_after_publish FROM generate_series(60001, 200000) g;
SELECT count(*) FILTER (WHERE NOT cf_contains('grow2', g)) AS missed FROM generate_series(1, 200000) g;
-- A value that grows takes inserts past its capacity too.
SELECT cf_count(cf_insert(s, -1)) AS one_more FROM snap;
-- Deletes: a key whose fingerprint is in one table only is removed; one whose
-- fingerprint is in several is kept (it might be another key's copy), and
-- cf_delete says false. Nearly every delete removes its key.
CREATE TEMP TABLE del AS SELECT g, cf_delete('grow', g) AS removed FROM generate_series(1, 60000) g;
SELECT count(*) FILTER (WHERE removed) > 59500 AS nearly_all_removed,
       count(*) FILTER (WHERE NOT removed AND NOT cf_contains('grow', g)) AS refused_but_gone,
       (SELECT items FROM cuckoo_filters WHERE name = 'grow') = count(*) FILTER (WHERE NOT removed) AS items_are_the_kept
  FROM del;

-- expansion => 0: a fixed size, as before 0.7.0.
SELECT cf_create('fixed', 500, 0.002, false, expansion => 0);
CREATE TEMP TABLE ins AS SELECT g, cf_insert('fixed', g) AS ok FROM generate_series(1, 2000) g;
SELECT count(*) FILTER (WHERE NOT ok) > 0 AS refused_when_full, count(*) FILTER (WHERE ok AND NOT cf_contains('fixed', g)) AS lost FROM ins;
SELECT expansion, tables, failed_inserts = (SELECT count(*) FROM ins WHERE NOT ok) AS refusals_counted,
       items = (SELECT count(*) FROM ins WHERE ok) AS items_exact FROM cuckoo_filters WHERE name = 'fixed';

-- Parameters.
SELECT err($$SELECT cf_create('bad', 10, 0.002, false, expansion => -1)$$);
SELECT err($$SELECT cf_create('bad', 10, 0.002, false, expansion => 65)$$);
SELECT err($$SELECT cf_create('bad', 10, 1e-7, false)$$);
SELECT cf_create('null_expansion', 10, 0.002, false, expansion => NULL) IS NULL AS is_null,
       (SELECT count(*) FROM cuckoo_filters WHERE name = 'null_expansion') AS made;
SELECT cf_create('x64', 10, 0.01, false, NULL, 64);
SELECT expansion FROM cuckoo_filters WHERE name = 'x64';

-- Malformed values of several tables: every truncation of a small one, a
-- table count of 0 and of 1 without growth, a growth plan without a rate,
-- trailing bytes: 22P02, and the session goes on.
CREATE TEMP TABLE u3 AS SELECT cf_union(cf_agg(g), cf_agg(g + 1000)) AS u FROM generate_series(1, 1000) g;
CREATE TEMP TABLE u3b AS SELECT decode(substr(u::text, 5), 'base64') AS b FROM u3;
SELECT count(*) FILTER (WHERE err(format('SELECT %L::cuckoofilter', 'cf3:' || translate(encode(substr(b, 1, n), 'base64'), E'\n', ''))) LIKE '22P02%') AS truncations_refused,
       count(*) AS truncations
  FROM u3b, generate_series(0, length(b) - 1, 7) n;
SELECT err(format('SELECT %L::cuckoofilter', 'cf3:' || translate(encode(overlay(b PLACING '\x00'::bytea FROM 7 FOR 1), 'base64'), E'\n', ''))) AS no_tables,
       err(format('SELECT %L::cuckoofilter', 'cf3:' || translate(encode(overlay(b PLACING '\x01'::bytea FROM 7 FOR 1), 'base64'), E'\n', ''))) AS one_table_no_growth,
       err(format('SELECT %L::cuckoofilter', 'cf3:' || translate(encode(overlay(b PLACING '\x02'::bytea FROM 9 FOR 1), 'base64'), E'\n', ''))) AS expansion_without_rate,
       err(format('SELECT %L::cuckoofilter', 'cf3:' || translate(encode(b || '\x00'::bytea, 'base64'), E'\n', ''))) AS trailing_byte,
       err(format('SELECT %L::cuckoofilter', 'cf2:' || translate(encode(b, 'base64'), E'\n', ''))) AS wrong_prefix
  FROM u3b;
SELECT u::text::cuckoofilter::text = u::text AS text_round_trip FROM u3;

-- The region's space is visible.
SELECT free_bytes > 0 AS has_room, free_bytes <= filter_bytes AND filter_bytes < size_bytes AS sizes_ordered,
       filters >= 3 AS counts_filters, largest_free_bytes <= free_bytes AS largest_within FROM cuckoo_region;

SELECT cf_drop('grow'), cf_drop('grow2'), cf_drop('fixed'), cf_drop('x64');
