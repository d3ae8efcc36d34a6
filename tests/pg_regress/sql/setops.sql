-- Set operations (0.8.0): cf_insert_new (add only if absent), cf_count of a
-- key's copies, and cf_insert / cf_delete of arrays of keys, for named filters
-- and values; the _key forms for keys that are arrays.
\set VERBOSITY terse
SELECT cf_drop(name) FROM cuckoo_filters;

-- RedisBloom's CF tests (CF.ADD, CF.COUNT, CF.DEL, CF.ADDNX, CF.INSERT), on a
-- durable and on a non-durable named filter.
SELECT cf_create('so_d', 1000), cf_create('so_v', 1000, durable => false);
SELECT f, cf_insert(f, 'k1') AS add1, cf_insert(f, 'k1') AS add2, cf_count(f, 'k1') AS count FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_delete(f, 'k1') AS del1, cf_count(f, 'k1') AS count FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_delete(f, 'k1') AS del2, cf_count(f, 'k1') AS count FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_delete(f, 'k1') AS del3, cf_count(f, 'k1') AS count, cf_contains(f, 'k1') AS contains FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_insert_new(f, 'k1') AS addnx1 FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_insert_new(f, 'k1') AS addnx2, cf_count(f, 'k1') AS count FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_insert(f, 'k1') AS add, cf_count(f, 'k1') AS count FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT f, cf_insert(f, ARRAY['k2', 'k3', 'k4']) AS insert, cf_count(f, 'k2') AS count_k2 FROM unnest(ARRAY['so_d', 'so_v']) f;
SELECT cf_insert_new('so_d', ARRAY['k3', 'k5', 'k1']) AS insertnx, cf_count('so_d', 'k5') AS count_k5;
SELECT cf_delete('so_v', ARRAY['k1', 'k1', 'k1', 'k2']) AS del_many, cf_count('so_v', 'k1') AS count_k1, cf_count('so_v', 'k2') AS count_k2;
SELECT name, items, inserts, deletes, failed_inserts, key_type FROM cuckoo_filters ORDER BY name;
-- The argument types: a string literal is text; counts are integers.
SELECT pg_typeof(cf_insert_new('so_v', 'x')), pg_typeof(cf_insert_new('so_v', ARRAY['y'])), pg_typeof(cf_count('so_v', 'x')),
       pg_typeof(cf_insert('so_v', ARRAY['z'])), pg_typeof(cf_delete('so_v', ARRAY['z']));

-- The same on values (CF.DEL of an absent key leaves the value as it was).
CREATE TEMP TABLE so_val AS SELECT cf_insert(cf_insert(cf_empty(1000, 0.002), 'k1'), 'k1') AS f;
SELECT cf_count(f, 'k1') AS count, cf_count(f) AS items FROM so_val;
SELECT cf_count(cf_delete(f, 'k1'), 'k1') AS after_one_delete, cf_count(cf_delete(cf_delete(f, 'k1'), 'k1'), 'k1') AS after_two,
       cf_delete(cf_delete(cf_delete(f, 'k1'), 'k1'), 'k1')::text = cf_delete(cf_delete(f, 'k1'), 'k1')::text AS third_delete_changes_nothing,
       cf_count(cf_delete(cf_delete(cf_delete(f, 'k1'), 'k1'), 'k1')) AS items_after_three FROM so_val;
SELECT cf_count(cf_insert(f, ARRAY['k2', 'k3', 'k4'])) AS items, cf_contains(cf_insert(f, ARRAY['k2', 'k3', 'k4']), ARRAY['k2', 'k3', 'k4', 'k5']) FROM so_val;
SELECT pg_typeof(cf_count(f, 'k1')), pg_typeof(cf_count(f)), pg_typeof(cf_insert(f, ARRAY['a'])) FROM so_val;
-- The text, bpchar and name overloads: keys equal under the filter's key type
-- are one key (char's trailing blanks do not matter).
SELECT cf_create('so_char', 100, durable => false, key_type => 'char(4)'), cf_create('so_name', 100, durable => false, key_type => 'name');
SELECT cf_insert_new('so_char', 'ab'::char(4)) AS new, cf_insert_new('so_char', 'ab'::text) AS text_again, cf_insert_new('so_char', 'ab '::varchar) AS varchar_again,
       cf_count('so_char', 'ab'::char(2)) AS count_char, cf_count('so_char', 'ab  '::text) AS count_text, cf_count('so_char', 'ab') AS count_literal;
SELECT cf_insert_new('so_name', 'ab'::name) AS new, cf_insert_new('so_name', 'ab'::char(3)) AS char_again, cf_insert_new('so_name', 'ab') AS literal_again,
       cf_count('so_name', 'ab'::name) AS count_name, cf_count('so_name', 'ab'::char(4)) AS count_char, cf_count('so_name', 'ab') AS count_literal;
SELECT cf_count(cf_agg(w), 'ab'::char(3)) AS count_char, cf_count(cf_agg(w), 'ab'::name) AS count_name, cf_count(cf_agg(w), 'ab') AS count_literal
  FROM unnest(ARRAY['ab', 'ab', 'cd']::text[]) w;

-- Arrays of keys: one answer per element in the array's shape, NULL for NULL.
SELECT cf_create('so_b', 10000, durable => false);
SELECT cf_insert('so_b', ARRAY[1, NULL, 2]) AS ins, cf_insert_new('so_b', ARRAY[NULL, 3, 1]) AS ins_new, cf_delete('so_b', ARRAY[2, NULL, 99]) AS del;
SELECT cf_insert('so_b', '{}'::int[]) AS ins, cf_insert_new('so_b', '{}'::int[]) AS ins_new, cf_delete('so_b', '{}'::int[]) AS del;
SELECT cf_insert('so_b', ARRAY[NULL, NULL]::int[]) AS ins, cf_insert_new('so_b', ARRAY[NULL]::int[]) AS ins_new;
SELECT cf_insert('so_b', ARRAY[[10, 11], [12, 13]]) AS ins, cf_insert_new('so_b', ARRAY[[10, 14], [15, 11]]) AS ins_new,
       cf_delete('so_b', ARRAY[[10, 10], [NULL, 12]]) AS del;
SELECT cf_insert('so_b', '[5:6]={20,21}'::int[]) AS ins, cf_insert_new('so_b', '[-1:1]={21,22,NULL}'::int[]) AS ins_new,
       cf_delete('so_b', '[0:1]={20,20}'::int[]) AS del;
SELECT array_lower(cf_insert_new('so_b', '[5:6]={30,31}'::int[]), 1) AS lower_bound, array_dims(cf_insert('so_b', '[2:3][4:4]={{32},{33}}'::int[])) AS dims;
SELECT cf_insert('so_b', NULL::int[]) AS ins, cf_insert_new('so_b', NULL::int[]) AS ins_new, cf_delete('so_b', NULL::int[]) AS del,
       cf_insert(NULL::text, ARRAY[1]) AS no_name, cf_count('so_b', NULL::int) AS count_null, cf_insert_new('so_b', NULL::int) AS new_null;
-- A key repeated in one cf_insert_new is new once; cf_insert adds every copy.
SELECT cf_insert_new('so_b', ARRAY[40, 41, 40, 40, 41]) AS ins_new, cf_count('so_b', 40) AS count_40;
SELECT cf_insert_new('so_d', ARRAY['dup', 'dup', 'other', 'dup']) AS durable_ins_new, cf_count('so_d', 'dup') AS count_dup;
SELECT cf_insert('so_b', ARRAY[42, 42, 42]) AS ins, cf_count('so_b', 42) AS count_42, cf_delete('so_b', ARRAY[42, 42, 42, 42]) AS del, cf_count('so_b', 42) AS count_after;
-- What the batch did shows in the counters: a key found by cf_insert_new is a
-- lookup; the stored ones are inserts.
SELECT inserts, lookups, deletes, failed_inserts FROM cuckoo_filters WHERE name = 'so_b' \gset before_
SELECT cf_insert_new('so_b', ARRAY[50, 51, 50, 1, NULL]) AS ins_new;
SELECT inserts - :before_inserts AS inserts, lookups - :before_lookups AS lookups, deletes - :before_deletes AS deletes,
       failed_inserts - :before_failed_inserts AS failed_inserts FROM cuckoo_filters WHERE name = 'so_b';
-- Integer widths hash alike, and text elements are read as the filter's key type.
SELECT cf_insert_new('so_b', ARRAY[60]::int8[]) AS int8_new, cf_insert_new('so_b', ARRAY[60]::int2[]) AS int2_again,
       cf_insert_new('so_b', ARRAY['61', '60']) AS text_elements, cf_count('so_b', 61) AS count_61;
-- One answer per element agrees with one call per key.
SELECT bool_and(b = cf_contains('so_b', 1000 + k::int)) AS all_found, count(*) FILTER (WHERE b) AS stored
  FROM unnest(cf_insert('so_b', (SELECT array_agg(g) FROM generate_series(1001, 3000) g))) WITH ORDINALITY AS u(b, k);
SELECT count(*) FILTER (WHERE NOT cf_contains('so_b', g)) AS missed FROM generate_series(1001, 3000) g;
SELECT bool_and(b) AS all_removed FROM unnest(cf_delete('so_b', (SELECT array_agg(g) FROM generate_series(1001, 3000) g))) b;
SELECT count(*) FILTER (WHERE cf_count('so_b', g) <> 0) AS left_counted FROM generate_series(1001, 3000) g;

-- The _key forms take a key of any type: an array is one key. An array of the
-- same elements in another shape is another key that hashes alike
-- (PostgreSQL's array hash ignores the shape): the filter says {{1,2}} may be
-- present.
SELECT cf_create('so_arr', 100, durable => false);
SELECT cf_insert_key('so_arr', ARRAY[1, 2]) AS ins, cf_insert_new_key('so_arr', ARRAY[1, 2]) AS new_again, cf_insert_new_key('so_arr', ARRAY[2, 1]) AS new_other,
       ARRAY[[1, 2]] = ARRAY[1, 2] AS equal_2d, cf_contains_key('so_arr', ARRAY[[1, 2]]) AS has_2d, cf_insert_new_key('so_arr', ARRAY[[1, 2]]) AS new_2d;
SELECT key_type, items FROM cuckoo_filters WHERE name = 'so_arr';
SELECT cf_contains_key('so_arr', ARRAY[1, 2]) AS has_12, cf_count_key('so_arr', ARRAY[1, 2]) AS count_12, cf_count_key('so_arr', ARRAY[2, 1]) AS count_21,
       cf_count_key('so_arr', ARRAY[3]) AS count_3;
SELECT cf_delete_key('so_arr', ARRAY[1, 2]) AS del, cf_delete_key('so_arr', ARRAY[1, 2]) AS del_again, cf_count_key('so_arr', ARRAY[1, 2]) AS count_12;
-- Element forms on a filter of array keys are refused (42804), adding nothing.
SELECT err($$SELECT cf_insert('so_arr', ARRAY[1, 2])$$);
SELECT err($$SELECT cf_insert_new('so_arr', ARRAY[1, 2])$$);
SELECT items FROM cuckoo_filters WHERE name = 'so_arr';
-- The _key forms take scalar keys too.
SELECT cf_insert_key('so_b', 70) AS ins, cf_insert_new_key('so_b', 70) AS new_again, cf_count_key('so_b', 70) AS count,
       cf_delete_key('so_b', 70) AS del, cf_count_key('so_b', 70) AS count_after;
-- On values: an int[] key is one key.
CREATE TEMP TABLE so_av AS SELECT cf_insert_key(cf_insert_key(cf_empty(100, 0.002), ARRAY[1, 2]), ARRAY[1, 2]) AS f;
SELECT cf_count(f) AS items, cf_count_key(f, ARRAY[1, 2]) AS count_12, cf_contains_key(f, ARRAY[1, 2]) AS has_12, cf_contains_key(f, ARRAY[2, 1]) AS has_21,
       cf_count_key(cf_delete_key(f, ARRAY[1, 2]), ARRAY[1, 2]) AS after_delete FROM so_av;
SELECT cf_count_key(f, ARRAY[1, 2]) AS count_12 FROM (SELECT cf_agg(x) AS f FROM (VALUES (ARRAY[1, 2]), (ARRAY[1, 2]), (ARRAY[3])) v(x)) a;
SELECT err($$SELECT cf_insert(cf_agg(x), ARRAY[1, 2]) FROM (VALUES (ARRAY[1, 2])) v(x)$$);

-- Values: an array insert (or delete) holds what the one-key calls in a row
-- hold: the same items, copies of every key, and answers for any probe (where
-- a key sits, of its two buckets, may differ).
CREATE FUNCTION so_fold(f cuckoofilter, keys int[], del boolean) RETURNS cuckoofilter LANGUAGE plpgsql AS $f$
DECLARE k int;
BEGIN
  FOREACH k IN ARRAY keys LOOP
    IF k IS NOT NULL THEN
      f := CASE WHEN del THEN cf_delete(f, k) ELSE cf_insert(f, k) END;
    END IF;
  END LOOP;
  RETURN f;
END $f$;
CREATE TEMP TABLE so_keys AS SELECT array_agg(CASE WHEN g % 97 = 0 THEN NULL ELSE g % 700 END ORDER BY g) AS k,
       array_agg(g % 350 ORDER BY g) FILTER (WHERE g % 3 = 0) AS d FROM generate_series(1, 1000) g;
CREATE TEMP TABLE so_fv AS SELECT cf_insert(cf_empty(2000, 0.002), k) AS many, so_fold(cf_empty(2000, 0.002), k, false) AS one_by_one FROM so_keys;
SELECT cf_count(many) AS items, cf_count(many) = cf_count(one_by_one) AS same_items FROM so_fv;
SELECT count(*) FILTER (WHERE cf_count(many, g) <> cf_count(one_by_one, g)) AS counts_differ,
       count(*) FILTER (WHERE cf_count(many, g) < (SELECT count(*) FROM so_keys, unnest(k) x WHERE x = g)) AS undercounted,
       sum(cf_count(many, g)) AS copies FROM so_fv, generate_series(0, 699) g;
SELECT count(*) FILTER (WHERE cf_contains(many, g) <> cf_contains(one_by_one, g)) AS answers_differ FROM so_fv, generate_series(700, 100000) g;
SELECT cf_count(cf_delete(many, d)) AS items_after_delete, cf_count(cf_delete(many, d)) = cf_count(so_fold(one_by_one, d, true)) AS same_items
  FROM so_fv, so_keys;
SELECT count(*) FILTER (WHERE cf_count(a, g) <> cf_count(b, g)) AS counts_differ,
       count(*) FILTER (WHERE cf_count(a, g) < (SELECT count(*) FROM so_keys, unnest(k) x WHERE x = g) - (SELECT count(*) FROM so_keys, unnest(d) x WHERE x = g)) AS undercounted
  FROM (SELECT cf_delete(many, d) AS a, so_fold(one_by_one, d, true) AS b FROM so_fv, so_keys) s, generate_series(0, 699) g;
-- Empty and NULL arrays; a value that cannot grow and fills up is an error.
SELECT cf_insert(f, '{}'::text[])::text = f::text AS empty_insert, cf_delete(f, ARRAY[NULL]::text[])::text = f::text AS null_delete,
       cf_insert(f, NULL::text[]) IS NULL AS null_insert FROM so_val;
SELECT err($$SELECT cf_insert(cf_empty(10, 0.002), (SELECT array_agg(g) FROM generate_series(1, 1000) g))$$);
DROP FUNCTION so_fold(cuckoofilter, int[], boolean);

-- Errors. An unknown filter:
SELECT err($$SELECT cf_insert_new('so_missing', 1)$$);
SELECT err($$SELECT cf_insert_new('so_missing', ARRAY[1])$$);
SELECT err($$SELECT cf_insert('so_missing', ARRAY[1])$$);
SELECT err($$SELECT cf_delete('so_missing', ARRAY[1])$$);
SELECT err($$SELECT cf_count('so_missing', 1)$$);
SELECT err($$SELECT cf_count_key('so_missing', ARRAY[1])$$);
SELECT err($$SELECT cf_insert_key('so_missing', ARRAY[1])$$);
SELECT err($$SELECT cf_insert_new_key('so_missing', ARRAY[1])$$);
SELECT err($$SELECT cf_delete_key('so_missing', ARRAY[1])$$);
-- A key with no equal among an integer filter's keys refuses the whole call
-- (22003), adding nothing; deletes and counts answer false and 0.
SELECT cf_create('so_int', 100, durable => false, key_type => 'int8');
SELECT cf_insert('so_int', ARRAY[1, 2]);
SELECT err($$SELECT cf_insert_new('so_int', 1.5)$$);
SELECT err($$SELECT cf_insert_new('so_int', ARRAY[3, 1.5, 4])$$);
SELECT err($$SELECT cf_insert('so_int', ARRAY[3, 1.5, 4])$$);
SELECT err($$SELECT cf_insert('so_int', ARRAY[3, 99999999999999999999999, 4])$$);
SELECT items, inserts, failed_inserts FROM cuckoo_filters WHERE name = 'so_int';
SELECT cf_contains('so_int', ARRAY[3, 4]) AS not_added, cf_delete('so_int', ARRAY[1, 1.5, 2.0]) AS del, cf_count('so_int', 1.5) AS count_frac,
       cf_count('so_int', 2.0) AS count_2;
SELECT err($$SELECT cf_insert(cf_empty(100, 0.002, 'int8'), ARRAY[3, 1.5])$$);
SELECT cf_count(cf_delete(cf_insert(cf_empty(100, 0.002, 'int8'), ARRAY[1, 2]), ARRAY[1.5, 2.0])) AS items;
-- Keys of another type: text is read as the key type, other types are refused.
SELECT err($$SELECT cf_insert_new('so_int', 'x'::text)$$);
SELECT err($$SELECT cf_insert_new('so_int', ARRAY['5', 'x'])$$);
SELECT err($$SELECT cf_insert_new('so_int', '2020-01-02'::date)$$);
SELECT err($$SELECT cf_insert('so_int', ARRAY['2020-01-02'::date])$$);
SELECT err($$SELECT cf_delete('so_int', ARRAY['2020-01-02'::date])$$);
SELECT err($$SELECT cf_count('so_int', '2020-01-02'::date)$$);
SELECT err($$SELECT cf_insert('so_int', ARRAY[point(1, 2)])$$);
SELECT items, cf_count('so_int', 5) AS count_5 FROM cuckoo_filters WHERE name = 'so_int';

-- Permissions: changes need the owner's membership; a lookup grant allows
-- cf_count.
SET client_min_messages = warning;
DROP ROLE IF EXISTS cf_so_owner; DROP ROLE IF EXISTS cf_so_other;
RESET client_min_messages;
CREATE ROLE cf_so_owner; CREATE ROLE cf_so_other;
SET ROLE cf_so_owner;
SELECT cf_create('so_owned', 1000), cf_create('so_owned_pending', 1000);
SELECT cf_insert('so_owned', ARRAY[1, 2, 3]);
SET ROLE cf_so_other;
SELECT err($$SELECT cf_insert_new('so_owned', 4)$$);
SELECT err($$SELECT cf_insert_new('so_owned', ARRAY[4])$$);
SELECT err($$SELECT cf_insert('so_owned', ARRAY[4])$$);
SELECT err($$SELECT cf_delete('so_owned', ARRAY[1])$$);
SELECT err($$SELECT cf_insert_key('so_owned', 4)$$);
SELECT err($$SELECT cf_delete_key('so_owned', 1)$$);
SELECT err($$SELECT cf_count('so_owned', 1)$$);
SELECT err($$SELECT cf_count_key('so_owned', 1)$$);
SELECT err($$SELECT cf_insert('so_owned_pending', ARRAY[4])$$);
SET ROLE cf_so_owner;
SELECT cf_grant_lookup('so_owned', 'cf_so_other');
SELECT name, items, key_type FROM cuckoo_filters WHERE name LIKE 'so_owned%' ORDER BY name;
SET ROLE cf_so_other;
SELECT cf_count('so_owned', 1) AS count_1, cf_count('so_owned', 4) AS count_4, cf_count_key('so_owned', 2) AS count_2, cf_contains('so_owned', ARRAY[1, 4]);
SELECT err($$SELECT cf_insert_new('so_owned', ARRAY[4])$$);
SELECT err($$SELECT cf_insert('so_owned', ARRAY[4])$$);
SELECT err($$SELECT cf_delete('so_owned', ARRAY[1])$$);
RESET ROLE;
SELECT cf_insert_new('so_owned', ARRAY[3, 4]) AS superuser, (SELECT items FROM cuckoo_filters WHERE name = 'so_owned');

-- Durable filters: batches take no transaction ID; read-only transactions
-- refuse changes to durable filters and allow those to non-durable ones.
BEGIN;
SELECT cf_insert('so_d', ARRAY['t1', 't2']) AS ins, cf_insert_new('so_d', ARRAY['t2', 't3']) AS ins_new, cf_delete('so_d', ARRAY['t1']) AS del,
       cf_insert_new('so_d', 't4') AS one_new;
SELECT txid_current_if_assigned() IS NULL AS no_xid;
COMMIT;
SELECT items FROM cuckoo_filters WHERE name = 'so_d' \gset before_
BEGIN READ ONLY;
SELECT cf_count('so_d', 't2') AS count, cf_contains('so_d', ARRAY['t2', 't1']) AS contains;
SELECT err($$SELECT cf_insert_new('so_d', 'ro')$$);
SELECT err($$SELECT cf_insert_new('so_d', 't2')$$);
SELECT err($$SELECT cf_insert_new('so_d', ARRAY['ro'])$$);
SELECT err($$SELECT cf_insert('so_d', ARRAY['ro'])$$);
SELECT err($$SELECT cf_delete('so_d', ARRAY['t2'])$$);
SELECT err($$SELECT cf_insert_key('so_d', 'ro'::text)$$);
SELECT err($$SELECT cf_delete_key('so_d', 't2'::text)$$);
SELECT err($$SELECT cf_insert('so_owned_pending', ARRAY[4])$$);
SELECT cf_insert_new('so_v', 'ro') AS new, cf_insert_new('so_v', ARRAY['ro', 'ro2']) AS ins_new, cf_insert('so_v', ARRAY['ro3', 'ro3']) AS ins,
       cf_delete('so_v', ARRAY['ro3', 'ro4']) AS del, cf_count('so_v', 'ro3') AS count;
ROLLBACK;
SELECT items - :before_items AS durable_changed, cf_count('so_d', 'ro') AS durable_ro, cf_count('so_v', 'ro2') AS not_undone FROM cuckoo_filters WHERE name = 'so_d';
SELECT name, key_type FROM cuckoo_filters WHERE name = 'so_owned_pending';

-- A full fixed-size filter: a batch stores what fits, says false for the
-- rest, and keeps every key it stored.
SELECT cf_create('so_full', 100, expansion => 0);
CREATE TEMP TABLE so_full_ins AS SELECT k, b FROM unnest(cf_insert('so_full', (SELECT array_agg(g) FROM generate_series(1, 300) g))) WITH ORDINALITY AS u(b, k);
SELECT count(*) FILTER (WHERE b) >= 100 AS capacity_reached, count(*) FILTER (WHERE NOT b) > 0 AS some_refused,
       count(*) FILTER (WHERE b AND NOT cf_contains('so_full', k::int)) AS stored_lost FROM so_full_ins;
SELECT items = (SELECT count(*) FROM so_full_ins WHERE b) AS items_are_the_stored, inserts = items AS inserts_agree,
       failed_inserts = (SELECT count(*) FROM so_full_ins WHERE NOT b) AS refusals_counted, tables FROM cuckoo_filters WHERE name = 'so_full';
-- Keys the full filter says are absent: cf_insert_new refuses them, storing
-- nothing and counting failed inserts; a key found counts a lookup (as does
-- the cf_contains).
SELECT min(g) AS absent, max(g) AS absent2 FROM (SELECT g FROM generate_series(100001, 200000) g WHERE NOT cf_contains('so_full', g) ORDER BY g LIMIT 2) a \gset
SELECT items, failed_inserts, lookups FROM cuckoo_filters WHERE name = 'so_full' \gset before_
SELECT cf_insert_new('so_full', :absent) AS new, cf_contains('so_full', :absent) AS stored;
SELECT cf_insert_new('so_full', ARRAY[:absent, :absent2, 1]) AS ins_new;
SELECT items - :before_items AS items_added, failed_inserts - :before_failed_inserts AS failed_inserts,
       lookups - :before_lookups AS lookups FROM cuckoo_filters WHERE name = 'so_full';
SELECT count(*) FILTER (WHERE NOT cf_contains('so_full', k::int)) AS stored_lost FROM so_full_ins WHERE b;
-- A full value: an array insert is refused whole.
SELECT err($$SELECT cf_insert(cf_snapshot('so_full'), ARRAY[1, 2, 3])$$) LIKE '54000%' AS value_full;

-- A filter that grows: 5,000 new keys in one call into a filter made for 100.
-- A new key answers false only when the filter already says it may be present,
-- at most at the rate asked for (0.002): at most 10 expected (and fewer, the
-- filter being emptier most of the time), so more than 30 is out of reach of
-- chance.
SELECT cf_create('so_grow', 100, durable => false), cf_create('so_grow_d', 100);
CREATE TEMP TABLE so_grow_ins AS SELECT f, k, b FROM unnest(ARRAY['so_grow', 'so_grow_d']) f,
  LATERAL unnest(cf_insert_new(f, (SELECT array_agg(g) FROM generate_series(1, 5000) g))) WITH ORDINALITY AS u(b, k);
SELECT name, items = (SELECT count(*) FROM so_grow_ins WHERE f = name AND b) AS items_are_the_new, inserts = items AS inserts_agree,
       lookups = (SELECT count(*) FROM so_grow_ins WHERE f = name AND NOT b) AS found_are_lookups, failed_inserts, tables > 1 AS grew, expansion
  FROM cuckoo_filters WHERE name LIKE 'so_grow%' ORDER BY name;
SELECT f, count(*) AS answers, count(*) FILTER (WHERE b) BETWEEN 4970 AND 5000 AS nearly_all_new, count(*) FILTER (WHERE b IS NULL) AS nulls,
       count(*) FILTER (WHERE NOT cf_contains(f, k::int)) AS missed FROM so_grow_ins GROUP BY f ORDER BY f;
-- Both filters answered alike (the same keys, the same hashes).
SELECT count(*) AS differ FROM so_grow_ins a JOIN so_grow_ins b USING (k) WHERE a.f = 'so_grow' AND b.f = 'so_grow_d' AND a.b <> b.b;
-- Again: nothing is new.
SELECT f, count(*) FILTER (WHERE b) AS new_again, count(*) AS answers FROM unnest(ARRAY['so_grow', 'so_grow_d']) f,
  LATERAL unnest(cf_insert_new(f, (SELECT array_agg(g) FROM generate_series(1, 5000) g))) b GROUP BY f ORDER BY f;
SELECT name, items = (SELECT count(*) FROM so_grow_ins WHERE f = name AND b) AS items_unchanged FROM cuckoo_filters WHERE name LIKE 'so_grow%' ORDER BY name;
-- More than one chunk (8,192 keys) in a call, to a durable filter that grows.
SELECT count(*) FILTER (WHERE b) AS stored, count(*) AS answers FROM unnest(cf_insert('so_grow_d', (SELECT array_agg(g) FROM generate_series(10001, 30000) g))) b;
SELECT count(*) FILTER (WHERE NOT cf_contains('so_grow_d', g)) AS missed FROM generate_series(10001, 30000) g;
SELECT count(*) FILTER (WHERE b) >= 19900 AS nearly_all_removed, count(*) AS answers FROM unnest(cf_delete('so_grow_d', (SELECT array_agg(g) FROM generate_series(10001, 30000) g))) b;

-- A filter whose key type is pending takes the type of the first batch's
-- elements (not of an empty batch).
SELECT cf_create('so_pending', 100, durable => false), cf_create('so_pending_d', 100);
SELECT cf_insert('so_pending', '{}'::int8[]) AS empty, (SELECT key_type FROM cuckoo_filters WHERE name = 'so_pending');
-- Only keys that are there fix the type (all NULL: still pending), and only
-- keys that can be keys (a refused type leaves it pending).
SELECT cf_insert('so_pending', ARRAY[NULL]::int4[]) AS nulls, (SELECT key_type FROM cuckoo_filters WHERE name = 'so_pending');
SELECT err($$SELECT cf_insert('so_pending', ARRAY[point(1, 2)])$$), (SELECT key_type FROM cuckoo_filters WHERE name = 'so_pending');
SELECT err($$SELECT cf_insert_new('so_pending', ARRAY[point(1, 2)])$$), (SELECT key_type FROM cuckoo_filters WHERE name = 'so_pending');
SELECT cf_insert('so_pending', ARRAY[1, 2]::int8[]) AS ins, (SELECT key_type FROM cuckoo_filters WHERE name = 'so_pending');
SELECT cf_contains('so_pending', ARRAY[1, 2, 3]::int2[]) AS int2_probe, cf_insert_new('so_pending', ARRAY[2, 3]) AS ins_new;
SELECT cf_insert_new('so_pending_d', ARRAY['a', 'b', 'a']) AS ins_new, (SELECT key_type FROM cuckoo_filters WHERE name = 'so_pending_d');
SELECT err($$SELECT cf_insert('so_pending_d', ARRAY[1])$$);
SELECT name, key_type, items FROM cuckoo_filters WHERE name LIKE 'so_pending%' ORDER BY name;

-- The new functions' properties: changes by name are volatile and parallel
-- unsafe, counts parallel safe; value forms immutable; all strict.
SELECT p.oid::regprocedure, p.provolatile, p.proparallel, p.proisstrict, p.prorettype::regtype
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname IN ('cf_insert_new', 'cf_insert_new_key', 'cf_count', 'cf_count_key', 'cf_insert_key', 'cf_delete_key')
    OR (p.proname IN ('cf_insert', 'cf_delete') AND 'anyarray'::regtype = ANY (p.proargtypes))
 ORDER BY p.oid::regprocedure::text;

SELECT cf_drop(name) FROM cuckoo_filters ORDER BY name;
SELECT count(*) AS left_over FROM cuckoo_filters;
DROP TABLE so_val, so_av, so_keys, so_fv, so_full_ins, so_grow_ins;
DROP ROLE cf_so_owner; DROP ROLE cf_so_other;
