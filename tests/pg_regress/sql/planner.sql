-- Planner support: row estimates for cf_contains from the filter probing the key
-- column's statistics or a sample of its rows, and its per-call cost. Tables of
-- 10,000 rows are sampled whole by ANALYZE and by the planner, so their
-- statistics (and these estimates) do not vary.
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

-- Estimates from a sample of the key column that the planner reads
-- (cuckoo.estimate_sample_rows, 30,000 rows by default): within 2x of the rows
-- that pass, for pass rates from 0.1% to 100%, at the default statistics
-- target, for a value and a named filter, in 5 fresh ANALYZEs of each (a plan
-- after an ANALYZE reads a new sample). 300,000 rows in 1,328 blocks: the
-- sample takes 23 rows at random from each block, so keys in a pattern along
-- the rows (every 1000th, every other) are not met in step.
CREATE TABLE sampled AS SELECT g AS a FROM generate_series(1, 300000) g;
ALTER TABLE sampled SET (autovacuum_enabled = off);
CREATE FUNCTION sampled_within_2x(every int, fresh int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE f cuckoofilter; t bigint; tn bigint; ev bigint; en bigint; ok_v int := 0; ok_n int := 0;
BEGIN
    SELECT cf_agg(g) INTO f FROM generate_series(1, 300000) g WHERE g % every = 0;
    PERFORM cf_create('planner_sampled', 300000 / every, durable => false);
    PERFORM count(*) FILTER (WHERE cf_insert('planner_sampled', g)) FROM generate_series(1, 300000) g WHERE g % every = 0;
    SELECT count(*) INTO t FROM sampled WHERE cf_contains(f, a);
    SELECT count(*) INTO tn FROM sampled WHERE cf_contains('planner_sampled', a);
    FOR i IN 1..fresh LOOP
        ANALYZE sampled;
        ev := est(format('SELECT * FROM sampled WHERE cf_contains(%L::cuckoofilter, a)', f));
        en := est('SELECT * FROM sampled WHERE cf_contains(''planner_sampled'', a)');
        ok_v := ok_v + (ev BETWEEN t / 2 AND t * 2)::int;
        ok_n := ok_n + (en BETWEEN tn / 2 AND tn * 2)::int;
    END LOOP;
    PERFORM cf_drop('planner_sampled');
    RETURN format('1 in %s keyed: value %s/%s, named %s/%s within 2x', every, ok_v, fresh, ok_n, fresh);
END $$;
SELECT sampled_within_2x(every, 5) FROM (VALUES (1000), (100), (2), (1)) v(every);
-- A table with row-level security is not sampled (a sample would read rows a
-- role's policies hide from it): its estimate is what the statistics give. A
-- table never analyzed (no statistics) shows it: PostgreSQL's default of 1/3
-- under row security (times the policy's own 1/3), the sample's estimate
-- (1,000 keys of 10,000 rows) without.
CREATE TABLE hidden AS SELECT g AS a FROM generate_series(1, 10000) g;
ALTER TABLE hidden SET (autovacuum_enabled = off);
ALTER TABLE hidden ENABLE ROW LEVEL SECURITY;
CREATE POLICY planner_none ON hidden USING (a < 0);
GRANT SELECT ON hidden TO cuckoo_planner_outsider;
SET ROLE cuckoo_planner_outsider;
SELECT est(format('SELECT * FROM hidden WHERE cf_contains(%L::cuckoofilter, a)', :'f10')) AS row_security;
RESET ROLE;
ALTER TABLE hidden DISABLE ROW LEVEL SECURITY;
SELECT est(format('SELECT * FROM hidden WHERE cf_contains(%L::cuckoofilter, a)', :'f10')) BETWEEN 500 AND 2000 AS sampled;
-- The sample never runs a role's own function on rows: a table the role may
-- not read (never analyzed, so the planner's own statistics rule lets it
-- plan) is planned without the role's implicit cast from the column's type
-- to the filter's key type seeing a row, and refused when it runs.
CREATE TABLE secret AS SELECT g AS a FROM generate_series(1, 1000) g;
GRANT CREATE ON SCHEMA public TO cuckoo_planner_outsider;
SET ROLE cuckoo_planner_outsider;
CREATE TYPE planner_t AS (a int);
CREATE FUNCTION planner_leak(int) RETURNS planner_t LANGUAGE plpgsql AS 'BEGIN RAISE NOTICE ''saw %'', $1; RETURN row($1); END';
CREATE CAST (int AS planner_t) WITH FUNCTION planner_leak(int) AS IMPLICIT;
EXPLAIN (COSTS OFF) SELECT * FROM secret WHERE cf_contains(cf_empty(10, 0.01, 'planner_t'), a);
-- Nor on a table it may read: the sample hashes keys only with built-in
-- code, without conversions.
CREATE TABLE mine AS SELECT g AS a FROM generate_series(1, 1000) g;
SELECT est('SELECT * FROM mine WHERE cf_contains(cf_empty(10, 0.01, ''planner_t''), a)') > 0 AS planned;
RESET ROLE;
DROP CAST (int AS planner_t);
REVOKE CREATE ON SCHEMA public FROM cuckoo_planner_outsider;
-- Nor does a conversion fail at plan time on a row the query never reads: a
-- date too large for a timestamp filter.
CREATE TABLE dated AS SELECT g AS id, '2020-01-01'::date + g AS d FROM generate_series(1, 1000) g;
INSERT INTO dated VALUES (1001, '5000000-01-01');
SELECT count(*) FROM dated WHERE id = 5 AND cf_contains(cf_empty(10, 0.01, 'timestamp'), d);
-- Nor from the statistics, whose histogram holds that date.
ANALYZE dated;
SELECT count(*) FROM dated WHERE id = 5 AND cf_contains(cf_empty(10, 0.01, 'timestamp'), d);
-- Out of range: refused.
SET cuckoo.estimate_sample_rows = -1;
SET cuckoo.estimate_sample_rows = 2000000;
DROP OWNED BY cuckoo_planner_outsider;
DROP ROLE cuckoo_planner_outsider;
