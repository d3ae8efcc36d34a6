-- The pre-screen the planner adds for bound filters (cuckoo.auto_prescreen):
-- where it is added (EXISTS and IN over a bound column, NOT EXISTS, and
-- NOT IN over a NOT NULL one, when it makes the plan cheaper), where it is
-- not (NOT IN over a column that may be NULL, OR, aggregates, other types,
-- other equalities, nondeterministic collations, inheritance children), and
-- that every query answers as it does without it.
\set VERBOSITY terse
SELECT cf_drop(name) FROM cuckoo_filters;
CREATE TABLE ps_inner (id int PRIMARY KEY, k bigint, t text);
INSERT INTO ps_inner SELECT g, g * 7, 'k' || (g * 7) FROM generate_series(1, 100000) g;
INSERT INTO ps_inner VALUES (100001, NULL, NULL);
CREATE INDEX ON ps_inner (k);
CREATE TABLE ps_outer (id int, k bigint, i int, t text, j int);
INSERT INTO ps_outer SELECT g, CASE WHEN g % 100 = 0 THEN g * 7 ELSE g * 7 + 3 END, g * 7, 'k' || (g * 7 + (g % 100)::int::bigint) FROM generate_series(1, 20000) g;
UPDATE ps_outer SET j = k::int;
INSERT INTO ps_outer VALUES (0, NULL, NULL, NULL, NULL);
ANALYZE ps_inner, ps_outer;
CREATE TABLE ps_nn (k bigint NOT NULL);
INSERT INTO ps_nn SELECT g * 7 FROM generate_series(1, 5000) g;
ANALYZE ps_nn;
SELECT cf_bind('ps_k', 'ps_inner', 'k'), cf_bind('ps_t', 'ps_inner', 't'), cf_bind('ps_nn', 'ps_nn', 'k');

-- prescreened(q): whether the plan of q calls the pre-screen; same(q): q
-- answers the same with the pre-screen allowed and not. (That it can tell:
-- differs, below.)
CREATE FUNCTION prescreened(q text) RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE line text; found boolean := false;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    found := found OR line LIKE '%cf_bound_contains%';
  END LOOP;
  RETURN found;
END $f$;
CREATE FUNCTION same(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE a text; b text;
BEGIN
  -- q itself is planned (as EXPLAIN plans it), not a query around it, so
  -- that the pre-screen is in the plan whose answers are compared.
  EXECUTE 'CREATE TEMP TABLE same_on AS ' || q;
  SET LOCAL cuckoo.auto_prescreen = off;
  EXECUTE 'CREATE TEMP TABLE same_off AS ' || q;
  SET LOCAL cuckoo.auto_prescreen = on;
  SELECT md5(string_agg(r::text, ',' ORDER BY r::text)) INTO a FROM same_on r;
  SELECT md5(string_agg(r::text, ',' ORDER BY r::text)) INTO b FROM same_off r;
  DROP TABLE same_on, same_off;
  RETURN CASE WHEN a IS NOT DISTINCT FROM b THEN 'same' ELSE 'DIFFERENT' END;
END $f$;

-- Added: EXISTS and IN over the bound column, 1% of outer keys present.
CREATE TEMP TABLE cases (q text);
INSERT INTO cases VALUES
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE o.k = i.k AND i.id > 5)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.k IN (SELECT k FROM ps_inner)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.id > 10 AND o.k IN (SELECT i.k FROM ps_inner i WHERE i.id % 2 = 0)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.t = o.t)$$),
  -- An integer of another width: equal values hash alike in a filter.
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.j)$$),
  -- NOT EXISTS, and NOT IN over a NOT NULL column: a key the filter rules
  -- out makes them true without the probe (the NULL key of ps_outer too).
  ($$SELECT o.id FROM ps_outer o WHERE NOT EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.id > 10 AND NOT EXISTS (SELECT 1 FROM ps_inner i WHERE o.k = i.k AND i.id > 5)$$);
SELECT prescreened(q), same(q) FROM cases;
-- NOT IN runs its subquery again for each row when its rows do not fit in
-- work_mem: there the guard pays.
BEGIN;
SET LOCAL work_mem = '64kB';
SELECT prescreened(q), same(q) FROM (VALUES
  ($$SELECT o.id FROM ps_outer o WHERE o.id <= 2000 AND o.k NOT IN (SELECT k FROM ps_nn)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.id <= 2000 AND o.k NOT IN (SELECT n.k FROM ps_nn n WHERE n.k > 0)$$),
  -- The NULL key.
  ($$SELECT o.id FROM ps_outer o WHERE o.id = 0 AND o.k NOT IN (SELECT k FROM ps_nn)$$)) c(q);
COMMIT;
-- The guard's form keeps NOT IN's NULLs: a NULL key against rows (NULL) and
-- against none (true), an absent key (true), a present one (false).
SELECT k, e, k NOT IN (SELECT n.k FROM ps_nn n WHERE n.k > e) AS plain,
       NOT cf_bound_contains('ps_nn', k) OR k NOT IN (SELECT n.k FROM ps_nn n WHERE n.k > e) AS guarded
FROM (VALUES (NULL::bigint, 0), (NULL, 1000000), (3, 0), (3, 1000000), (7, 0)) v(k, e);
-- The guard is evaluated first, and the subquery only for keys it passes.
EXPLAIN (COSTS OFF) SELECT o.id FROM ps_outer o WHERE NOT EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k);
-- Left alone: NOT IN over a column that may hold NULL (a key absent from
-- the filter may still make NOT IN null), under OR, an aggregate (one row whatever
-- matches), another type, another operator, a nondeterministic collation,
-- a column of the subquery on both sides, a volatile outer expression.
CREATE COLLATION ps_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
DELETE FROM cases;
INSERT INTO cases VALUES
  ($$SELECT o.id FROM ps_outer o WHERE o.k NOT IN (SELECT k FROM ps_inner)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.id < 5 OR EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT count(*) FROM ps_inner i WHERE i.k = o.k)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k::numeric = o.i::numeric)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k >= o.k AND i.k <= o.k)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.t = o.t COLLATE ps_ci)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.id < 30 AND EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = i.id + o.k)$$),
  ($$SELECT o.id FROM ps_outer o WHERE o.id < 30 AND EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k + (random() * 0)::bigint)$$),
  ($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i LEFT JOIN ps_outer x ON x.id = i.id WHERE i.k = o.k)$$);
SELECT prescreened(q), same(q) FROM cases;
-- same() compares the two runs: a query whose answer follows the setting
-- differs.
SELECT same($$SELECT current_setting('cuckoo.auto_prescreen') AS s$$) AS differs;
-- The answers stay exact with NULL keys on both sides, and after changes.
DELETE FROM ps_inner WHERE id % 3 = 0;
UPDATE ps_inner SET k = k + 1 WHERE id % 5 = 0;
INSERT INTO ps_inner SELECT 200000 + g, g * 700, NULL FROM generate_series(1, 100) g;
SELECT cf_apply_deletes('ps_k') >= 0 AS applied;
SELECT same($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$),
       same($$SELECT o.id FROM ps_outer o WHERE o.k IN (SELECT k FROM ps_inner)$$),
       same($$SELECT o.id FROM ps_outer o WHERE o.k NOT IN (SELECT k FROM ps_inner)$$),
       same($$SELECT o.id FROM ps_outer o WHERE NOT EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$);
-- NOT IN over a NOT NULL column whose filter lost keys' rows: still exact;
-- dropping NOT NULL replans without the guard.
BEGIN;
SET LOCAL work_mem = '64kB';
DELETE FROM ps_nn WHERE k % 3 = 0;
SELECT prescreened($$SELECT o.id FROM ps_outer o WHERE o.id <= 2000 AND o.k NOT IN (SELECT k FROM ps_nn)$$),
       same($$SELECT o.id FROM ps_outer o WHERE o.id <= 2000 AND o.k NOT IN (SELECT k FROM ps_nn)$$);
PREPARE notin AS SELECT count(*) FROM ps_outer o WHERE o.id <= 2000 AND o.k NOT IN (SELECT k FROM ps_nn);
EXECUTE notin;
ALTER TABLE ps_nn ALTER k DROP NOT NULL;
INSERT INTO ps_nn VALUES (NULL);
EXECUTE notin;
SELECT prescreened($$SELECT o.id FROM ps_outer o WHERE o.id <= 2000 AND o.k NOT IN (SELECT k FROM ps_nn)$$);
DEALLOCATE notin;
COMMIT;
-- Inheritance children's rows are not in the parent's filter: left alone.
CREATE TABLE ps_child () INHERITS (ps_inner);
INSERT INTO ps_child VALUES (300000, 7 * 5000, 'child');
SELECT prescreened($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$),
       prescreened($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ONLY ps_inner i WHERE i.k = o.k)$$);
DROP TABLE ps_child;
-- Off: never added.
SET cuckoo.auto_prescreen = off;
SELECT prescreened($$SELECT o.id FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$);
RESET cuckoo.auto_prescreen;
-- A key expression too deep to walk within the stack is left alone, with no
-- error (PostgreSQL plans it without).
BEGIN;
SET LOCAL max_stack_depth = '300kB';
SELECT prescreened(format($$SELECT o.id FROM ps_outer o WHERE NOT EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = %s)$$,
                          repeat('(', 250) || 'o.k' || repeat(' + 0)', 250)));
COMMIT;
-- Every key present: the pre-screen would only cost, and is not added.
CREATE TABLE ps_all AS SELECT g AS id, (g * 7)::bigint AS k FROM generate_series(1, 20000) g;
ANALYZE ps_all;
SELECT prescreened($$SELECT count(*) FROM ps_all o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$),
       prescreened($$SELECT count(*) FROM ps_all o WHERE NOT EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$);

-- A role that may read the outer table but not the bound column: the
-- pre-screen it may call by hand answers "maybe" and tells it nothing.
CREATE ROLE ps_reader;
GRANT SELECT ON ps_outer TO ps_reader;
SET ROLE ps_reader;
SELECT count(*) FILTER (WHERE cf_bound_contains('ps_k', k)) = count(k) AS all_maybe FROM ps_outer;
SELECT err($$SELECT 1 FROM ps_outer o WHERE EXISTS (SELECT 1 FROM ps_inner i WHERE i.k = o.k)$$);
-- Nor may it lock the bound table to apply its deletes.
SELECT err($$SELECT cf_apply_deletes('ps_k')$$);
RESET ROLE;
GRANT SELECT (k) ON ps_inner TO ps_reader;
SET ROLE ps_reader;
SELECT count(*) FILTER (WHERE cf_bound_contains('ps_k', k)) < count(k) AS screens FROM ps_outer;
RESET ROLE;

SELECT cf_unbind('ps_k'), cf_unbind('ps_t'), cf_unbind('ps_nn');
DROP TABLE ps_inner, ps_outer, ps_all, ps_nn;
DROP ROLE ps_reader;
DROP COLLATION ps_ci;
DROP FUNCTION prescreened(text), same(text);
