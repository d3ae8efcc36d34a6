-- The cuckoo extension at work: a filter in front of an exact check.
\pset footer off
\echo '== Sample data: 2M page views, and 50k accounts flagged for review (indexed).'
CREATE EXTENSION cuckoo;
CREATE TABLE views   AS SELECT g AS id, (g::bigint * 7919) % 5000000 AS account FROM generate_series(1, 2000000) g;
CREATE TABLE flagged AS SELECT g * 100 AS account, 'review' AS reason FROM generate_series(1, 50000) g;
CREATE INDEX ON flagged (account);
ANALYZE views; ANALYZE flagged;

\echo '== Build a filter of the flagged accounts with cf_agg and store it.'
CREATE TABLE filters AS SELECT 'flagged' AS name, cf_agg(account) AS f FROM flagged;
SELECT name, cf_count(f) AS items, jsonb_pretty(cf_info(f) - 'seed' - 'hash' - 'format_version') AS info FROM filters;

\echo '== Probe it: a flagged account is maybe-present, and most others are definitely absent.'
SELECT k AS account, cf_contains(f, k) AS maybe_present, EXISTS (SELECT 1 FROM flagged WHERE account = k) AS really_present
FROM filters, (VALUES (100), (4200), (4242), (12345), (5000000)) v(k);

\echo '== Any hashable type works; integer widths agree (int4 42 finds int8 42).'
SELECT cf_contains(cf_agg(x::bigint), 42::int) AS int4_in_int8, cf_contains(cf_agg(x::text), '42'::text) AS text
FROM generate_series(1, 100) x;

\echo '== Pre-screened EXISTS: cf_contains(...) AND EXISTS (...) is exact end to end.'
\timing on
SET max_parallel_workers_per_gather = 0;
SET enable_hashjoin = off; SET enable_mergejoin = off;  -- force one index probe per view, as a remote or costly check would
SELECT count(*) AS flagged_views_plain FROM views v WHERE EXISTS (SELECT 1 FROM flagged WHERE account = v.account);
-- Pass the filter as a scalar subquery: it is fetched once (an InitPlan) and the
-- probe runs on the scan, before the exact check.
SELECT count(*) AS flagged_views_prescreened FROM views v
WHERE cf_contains((SELECT f FROM filters WHERE name = 'flagged'), v.account)
  AND EXISTS (SELECT 1 FROM flagged WHERE account = v.account);
\timing off
\echo '== How many views reached the exact check (the rest were skipped by the filter):'
SELECT count(*) AS views, count(*) FILTER (WHERE cf_contains(f, account)) AS reached_exact_check,
       count(*) FILTER (WHERE cf_contains(f, account)) - count(*) FILTER (WHERE EXISTS (SELECT 1 FROM flagged x WHERE x.account = v.account)) AS false_positives
FROM views v, filters;

\echo '== The filter survives text/binary I/O, so pg_dump and COPY carry it.'
SELECT left(f::text, 60) || '...' AS text_form, length(f::text) AS text_bytes FROM filters;

\echo '== Named filters live in shared memory: every session inserts, probes and deletes at once, without locks.'
SELECT cf_create('flagged', 100000);                          -- capacity, fpp defaults to 0.002
SELECT count(*) FILTER (WHERE cf_insert('flagged', account)) AS inserted FROM flagged;
SELECT cf_insert('flagged', 4242) AS newly_flagged, cf_contains('flagged', 4242) AS maybe_present,
       cf_delete('flagged', 4242) AS unflagged, cf_contains('flagged', 4242) AS after_delete;
\echo '== The same pre-screened EXISTS, against the named filter (no value to fetch, nothing to detoast):'
\timing on
SELECT count(*) AS flagged_views_prescreened FROM views v
WHERE cf_contains('flagged', v.account)
  AND EXISTS (SELECT 1 FROM flagged WHERE account = v.account);
\timing off
\echo '== The planner asks the filter how many views it passes (PostgreSQL alone would guess a third: 666667 rows):'
EXPLAIN SELECT * FROM views v WHERE cf_contains('flagged', v.account);
SELECT count(*) AS really_passing FROM views v WHERE cf_contains('flagged', v.account);
\echo '== Many keys in one call (batched, prefetching lookups): one answer per key, NULL for NULL.'
SELECT cf_contains('flagged', ARRAY[100, 4242, NULL, 200]) AS batched;
SELECT cf_contains(cf_snapshot('flagged'), 100) AS snapshot_agrees;   -- a copy as a cuckoofilter value
\echo '== A named filter grows: made for 1,000 keys, it takes 200,000 and keeps its false-positive rate.'
SELECT cf_create('seen', 1000);
SELECT count(*) FILTER (WHERE cf_insert('seen', g)) AS stored_of_200000 FROM generate_series(1, 200000) g;
SELECT count(*) FILTER (WHERE cf_contains('seen', g)) AS maybe_of_200000_never_inserted FROM generate_series(1000001, 1200000) g;
\echo '== Deduplicate with cf_insert_new: true only the first time a key is seen (exactly once, even from many sessions at once).'
SELECT cf_insert_new('seen', 500000) AS first_time, cf_insert_new('seen', 500000) AS again, cf_count('seen', 500000) AS copies;
SELECT array_length(array_positions(cf_insert_new('seen', ARRAY(SELECT g % 250000 + 150001 FROM generate_series(1, 300000) g)), true), 1) AS new_of_300000_with_repeats;   -- one call: one WAL record per 8,192 keys
\echo '== Filters of any shapes union: seven days, each built with plain cf_agg, into one week.'
SELECT cf_info(w) ->> 'tables' AS tables, cf_count(w) AS items, round((cf_info(w) ->> 'fpp')::numeric, 4) AS fpp_bound,
       (SELECT count(*) FROM generate_series(1, 7) d, generate_series(1, 1000 + 100 * d) g WHERE NOT cf_contains(w, d * 1000000 + g)) AS missed
FROM (SELECT cf_union_agg(f) AS w FROM (SELECT cf_agg(d * 1000000 + g) AS f FROM generate_series(1, 7) d, generate_series(1, 1000 + 100 * d) g GROUP BY d) days) s;
\echo '== Bind a filter to a table: 1M payments (indexed), of which 0.2% of the views have an account.'
CREATE TABLE payments AS SELECT g AS id, g::bigint * 500 AS account, 'card' AS method FROM generate_series(1, 1000000) g;
CREATE INDEX ON payments (account);
ANALYZE payments;
SELECT cf_bind('paying_account', 'payments', 'account') AS rows_read;   -- kept in step with every write from now on
RESET enable_hashjoin; RESET enable_mergejoin; RESET max_parallel_workers_per_gather;
\echo '== The same unmodified EXISTS, without and with the binding (the planner adds the pre-screen where it pays):'
\timing on
SET cuckoo.auto_prescreen = off;
SELECT count(*) AS paying_views_without FROM views v WHERE EXISTS (SELECT 1 FROM payments p WHERE p.account = v.account);
RESET cuckoo.auto_prescreen;
SELECT count(*) AS paying_views_with FROM views v WHERE EXISTS (SELECT 1 FROM payments p WHERE p.account = v.account);
\timing off
EXPLAIN (COSTS OFF) SELECT count(*) FROM views v WHERE EXISTS (SELECT 1 FROM payments p WHERE p.account = v.account);
\echo '== Writes keep it exact: a new row is found at once; a deleted one leaves once no snapshot can see it.'
INSERT INTO payments VALUES (0, 4243, 'new');
SELECT cf_bound_contains('paying_account', 4243::bigint) AS new_row_found;
DELETE FROM payments WHERE id = 0;
SELECT cf_apply_deletes('paying_account') AS keys_removed, cf_bound_contains('paying_account', 4243::bigint) AS deleted_row_found;
SELECT name, bound_table, bound_column, pending_deletes, dropped_deletes FROM cuckoo_filters WHERE bound_table IS NOT NULL;
SELECT name, capacity, items, round(load_factor::numeric, 3) AS load, bytes, round(fpp::numeric, 5) AS fpp, tables, expansion, inserts, lookups, deletes, failed_inserts, kicks, durable
FROM cuckoo_filters ORDER BY name;
SELECT size_bytes, free_bytes, filters FROM cuckoo_region;

