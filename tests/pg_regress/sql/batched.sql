-- Batched probes: cf_contains(f, keys anyarray) -> boolean[], for values and
-- named filters.
CREATE TABLE bk AS SELECT cf_agg(g) AS f FROM generate_series(1, 1000) g;
SELECT cf_contains(f, ARRAY[1, 2, NULL, 5000]) FROM bk;
-- The answer has the keys' shape; empty arrays give empty arrays.
SELECT cf_contains(f, '{}'::int[]) FROM bk;
SELECT cf_contains(f, ARRAY[]::text[]) FROM bk;
SELECT cf_contains(f, '[0:2]={1,2,3}'::int[]) FROM bk;
SELECT cf_contains(f, '{{1,2},{3,5000}}'::bigint[]) FROM bk;
SELECT cf_contains(f, ARRAY[NULL, NULL]::int[]) FROM bk;
SELECT cf_contains(f, NULL::int[]) FROM bk;
-- Every answer equals the single probe's (present and absent keys, and
-- integer widths hash alike).
SELECT count(*) AS keys, count(*) FILTER (WHERE b) AS maybe,
       bool_and(b = cf_contains(f, k::int)) AS same_as_single
FROM bk, unnest(cf_contains(f, (SELECT array_agg(g::smallint ORDER BY g) FROM generate_series(1, 30000) g))) WITH ORDINALITY AS u(b, k);
-- Text keys.
SELECT cf_contains(cf_agg(w), ARRAY['alpha', 'beta', 'omega', NULL]) FROM unnest(ARRAY['alpha', 'beta', 'gamma']) w;
-- Element types that cannot be keys, and bad arrays, are clear errors.
\set VERBOSITY sqlstate
SELECT cf_contains(f, ARRAY[point(1, 2)]) FROM bk;
CREATE COLLATION batched_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT cf_contains(f, ARRAY['a' COLLATE batched_ci]) FROM bk;
SELECT cf_contains(f, ARRAY[1, 'x']) FROM bk;
\set VERBOSITY default
SELECT cf_contains(f, ARRAY[point(1, 2)]) FROM bk;
-- A filter records its key type: text elements are read as that type (here
-- integers), as single probes are.
SELECT cf_contains(f, ARRAY['1', '2']) FROM bk;
-- One key that is itself an array resolves to the batched form, which probes
-- its elements: a filter of array keys refuses element keys (42804, naming
-- cf_contains_key), which probes the array as one key.
SELECT cf_contains(cf_agg(x), ARRAY[1, 2]) FROM (VALUES (ARRAY[1, 2])) v(x);
SELECT cf_contains_key(cf_agg(x), ARRAY[1, 2]) FROM (VALUES (ARRAY[1, 2])) v(x);
SELECT cf_create('batched_arrays', 100, durable => false);
SELECT cf_insert_key('batched_arrays', ARRAY[1, 2]);
SELECT cf_contains('batched_arrays', ARRAY[1, 2]);
SELECT cf_contains_key('batched_arrays', ARRAY[1, 2]), cf_contains_key('batched_arrays', ARRAY[2, 1]);
SELECT cf_drop('batched_arrays');

-- Named filters.
SELECT cf_create('batched', 10000, durable => false);
SELECT count(*) FILTER (WHERE cf_insert('batched', g)) FROM generate_series(1, 1000) g;
SELECT cf_contains('batched', ARRAY[1, 999, NULL, 5000]);
SELECT cf_contains('batched', '{}'::int[]);
SELECT cf_contains('batched', '{{1,2},{3,5000}}'::bigint[]);
SELECT bool_and(b = cf_contains('batched', k::int)) AS same_as_single
FROM unnest(cf_contains('batched', (SELECT array_agg(g ORDER BY g) FROM generate_series(1, 30000) g))) WITH ORDINALITY AS u(b, k);
-- A batch counts a lookup per non-null key.
SELECT lookups FROM cuckoo_filters WHERE name = 'batched';
SELECT cf_contains('batched', ARRAY[1, NULL, 3]);
SELECT lookups FROM cuckoo_filters WHERE name = 'batched';
SELECT cf_contains('batched_missing', ARRAY[1]);
SELECT cf_drop('batched');
DROP COLLATION batched_ci;
