-- Planner support: row estimates for cf_contains from the filter probing the key
-- column's statistics, and its per-call cost. Tables of 10,000 rows are sampled
-- whole by ANALYZE, so their statistics (and these estimates) do not vary.
CREATE TABLE probe AS SELECT g AS a, g % 2 = 0 AS even FROM generate_series(1, 10000) g;
CREATE TABLE skewed AS SELECT CASE WHEN g <= 5000 THEN 7 ELSE 100000 + g END AS a FROM generate_series(1, 10000) g;
ANALYZE probe, skewed;
-- The estimated rows of a query's top plan node.
CREATE FUNCTION est(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END $$;
-- EXPLAIN (COSTS OFF) of a query, a custom plan's filter literal shortened.
CREATE FUNCTION plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        RETURN NEXT regexp_replace(line, '''cf2:[^'']*''::cuckoofilter', '<filter>', 'g');
    END LOOP;
END $$;
-- Filters passing 10% and 50% of probe, and one holding skewed's common value.
SELECT cf_agg(g) AS f10 FROM generate_series(1, 1000) g \gset
SELECT cf_agg(g) AS f50 FROM generate_series(1, 10000) g WHERE hashint4(g) % 2 = 0 \gset
SELECT cf_agg(7) AS f7 \gset
-- A literal filter (or a bound parameter of a custom plan) is known to the
-- planner: estimate and truth within 2x.
CREATE FUNCTION check_estimate(q text, filter text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE e bigint; t bigint;
BEGIN
    e := est(format(q, quote_literal(filter) || '::cuckoofilter'));
    EXECUTE format('SELECT count(*) FROM (%s) s', format(q, quote_literal(filter) || '::cuckoofilter')) INTO t;
    RETURN format('true %s, estimate within 2x: %s', t, e BETWEEN t / 2 AND t * 2);
END $$;
SELECT check_estimate('SELECT * FROM probe WHERE cf_contains(%s, a)', :'f10');
SELECT check_estimate('SELECT * FROM probe WHERE cf_contains(%s, a)', :'f50');
-- The common value is found among the most-common values (5,000 rows).
SELECT check_estimate('SELECT * FROM skewed WHERE cf_contains(%s, a)', :'f7');
-- Before: PostgreSQL's default of 1/3 for every one of these.
SELECT est(format('SELECT * FROM probe WHERE cf_contains(%L::cuckoofilter, a)', :'f10')) < 3333 AS below_default;
-- Not known at plan time (a scalar subquery is a Param): 1/3.
CREATE TABLE filters AS SELECT 'f10' AS name, :'f10'::cuckoofilter AS f;
SELECT est('SELECT * FROM probe WHERE cf_contains((SELECT f FROM filters), a)');
-- A NULL filter passes nothing (PostgreSQL folds the strict call to NULL).
SELECT est('SELECT * FROM probe WHERE cf_contains(NULL::cuckoofilter, a)');
-- A key that is an expression has no statistics, nor a known number of
-- distinct values: the default.
SELECT est(format('SELECT * FROM probe WHERE cf_contains(%L::cuckoofilter, a + 0)', :'f10'));
-- Named filters: a constant name is looked up at plan time.
SELECT cf_create('planner_f10', 2000, durable => false);
SELECT count(*) FILTER (WHERE cf_insert('planner_f10', g)) FROM generate_series(1, 1000) g;
SELECT est('SELECT * FROM probe WHERE cf_contains(''planner_f10'', a)') BETWEEN 500 AND 2000 AS named_within_2x;
-- A missing filter is left to the executor to report.
SELECT est('SELECT * FROM probe WHERE cf_contains(''planner_missing'', a)');
SELECT cf_contains('planner_missing', 1);
-- A role that may not look the filter up learns nothing from the estimate.
CREATE ROLE cuckoo_planner_outsider;
GRANT SELECT ON probe TO cuckoo_planner_outsider;
SET ROLE cuckoo_planner_outsider;
SELECT est('SELECT * FROM probe WHERE cf_contains(''planner_f10'', a)');
RESET ROLE;
-- Lookups by the planner are not counted.
SELECT lookups FROM cuckoo_filters WHERE name = 'planner_f10';
SELECT cf_drop('planner_f10');

-- The estimate changes the plan: a pre-screen that passes few rows makes an
-- index probe per survivor cheaper than hashing the whole key table. The
-- answer is the same: the filter holds every key of the table EXISTS reads.
CREATE TABLE big_keys AS SELECT g AS k FROM generate_series(1, 200000) g;
CREATE INDEX ON big_keys (k);
CREATE TABLE views AS SELECT (g::bigint * 7919) % 60000000 AS a FROM generate_series(1, 1000000) g;
-- The largest statistics target samples all 1M rows: the plans do not vary.
ALTER TABLE views ALTER a SET STATISTICS 10000;
VACUUM ANALYZE big_keys, views;
SELECT cf_agg(k) AS fk FROM big_keys \gset
SELECT check_estimate('SELECT * FROM views WHERE cf_contains(%s, a)', :'fk');
SET max_parallel_workers_per_gather = 0;
PREPARE screened(cuckoofilter) AS
    SELECT count(*) FROM views v WHERE cf_contains($1, v.a) AND EXISTS (SELECT 1 FROM big_keys b WHERE b.k = v.a);
SELECT plan('SELECT count(*) FROM views v WHERE EXISTS (SELECT 1 FROM big_keys b WHERE b.k = v.a)');
SELECT plan(format('EXECUTE screened(%L)', :'fk'));
EXECUTE screened(:'fk');
SELECT count(*) FROM views v WHERE EXISTS (SELECT 1 FROM big_keys b WHERE b.k = v.a);
RESET max_parallel_workers_per_gather;

-- Cost: quals run cheapest first. cf_contains costs more than a one-operator
-- function and less than an expensive one.
CREATE FUNCTION cheap(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE COST 1 AS 'BEGIN RETURN $1 > 0; END';
CREATE FUNCTION costly(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE COST 1000 AS 'BEGIN RETURN $1 > 0; END';
PREPARE ordered(cuckoofilter) AS SELECT * FROM probe WHERE costly(a) AND cf_contains($1, a) AND cheap(a);
SELECT plan(format('EXECUTE ordered(%L)', :'f10'));
-- The cost of an argument used twice by an inlined SQL function is asked
-- without a planner state.
CREATE FUNCTION twice(b boolean[]) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT cardinality(b) + cardinality(b)';
SELECT cf_create('planner_twice', 100, durable => false);
SELECT twice(cf_contains('planner_twice', ARRAY[1, 2])), twice(cf_contains(:'f10'::cuckoofilter, ARRAY[1, 2, 3]));
SELECT cf_drop('planner_twice');
DROP OWNED BY cuckoo_planner_outsider;
DROP ROLE cuckoo_planner_outsider;
