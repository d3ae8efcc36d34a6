-- Filters bound to a table column (cf_bind): every row any snapshot can see
-- has its key in the filter after inserts, updates, deletes, COPY, upserts,
-- rollbacks, savepoints and TRUNCATE; deletes leave once safe (cf_apply_deletes);
-- the errors and refusals (owners, hand-made triggers, column types); the
-- cuckoo_filters columns. Two sessions (old snapshots) are in
-- tests/pg_isolation.
\set VERBOSITY terse
-- A binding that needs a rebuild is rebuilt in the background when first
-- used (cuckoo.auto_rebuild, tested in tests/faults/bound.py): off here, so
-- that the states these tests show do not depend on a worker's timing.
SET cuckoo.auto_rebuild = off;
SELECT cf_drop(name) FROM cuckoo_filters;

CREATE TABLE bt (id int PRIMARY KEY, k bigint, note text);
INSERT INTO bt SELECT g, g * 10, 'row ' || g FROM generate_series(1, 5000) g;
INSERT INTO bt VALUES (5001, NULL, 'no key');
SELECT cf_bind('bt_k', 'bt', 'k');
SELECT name, items, key_type, durable, bound_table, bound_column, pending_deletes, dropped_deletes FROM cuckoo_filters;
-- missing: rows whose key the filter does not have (must be 0 everywhere).
CREATE VIEW bt_missing AS SELECT count(*) AS missing FROM bt WHERE k IS NOT NULL AND NOT cf_contains('bt_k', k);
SELECT * FROM bt_missing;
SELECT tgname ~ '^(cuckoo_[0-9a-f]{16}_(row|flush)|zz_cuckoo_[0-9a-f]{16}_new)$' AS named, tgenabled, tgtype FROM pg_trigger WHERE tgrelid = 'bt'::regclass ORDER BY tgname;

-- Inserts, COPY and upserts add keys before the statement ends.
INSERT INTO bt VALUES (6001, 60010, 'new');
SELECT cf_contains('bt_k', 60010::bigint) AS inserted;
COPY bt FROM STDIN;
6002	60020	copied
6003	60030	copied
\.
SELECT cf_contains('bt_k', 60020::bigint) AND cf_contains('bt_k', 60030::bigint) AS copied;
INSERT INTO bt VALUES (6001, 60011, 'upsert') ON CONFLICT (id) DO UPDATE SET k = excluded.k;
INSERT INTO bt VALUES (6004, 60040, 'upsert') ON CONFLICT (id) DO NOTHING;
SELECT cf_contains('bt_k', 60011::bigint) AS upserted, cf_contains('bt_k', 60040::bigint) AS upsert_inserted;
SELECT * FROM bt_missing;

-- The writing statement's own queries find the keys of the rows it wrote
-- (a RETURNING expression, a data-modifying WITH, an AFTER trigger that
-- fires before the binding's): the BEFORE trigger buffers them.
INSERT INTO bt VALUES (6101, 61010, 'returning') RETURNING cf_bound_contains('bt_k', k) AS returning_sees;
WITH ins AS (INSERT INTO bt VALUES (6102, 61020, 'with') RETURNING k)
SELECT cf_bound_contains('bt_k', k) AS with_sees FROM ins;
CREATE FUNCTION bt_sees() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (SELECT cf_bound_contains('bt_k', NEW.k)) THEN
        RAISE EXCEPTION 'key % of a written row missing', NEW.k;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER aa_sees AFTER INSERT OR UPDATE ON bt FOR EACH ROW EXECUTE FUNCTION bt_sees();
INSERT INTO bt VALUES (6103, 61030, 'trigger');
UPDATE bt SET k = 61031 WHERE id = 6103;
INSERT INTO bt VALUES (6103, 61032, 'upsert') ON CONFLICT (id) DO UPDATE SET k = excluded.k;
DROP TRIGGER aa_sees ON bt;
-- A key buffered for a row never written (a conflict, DO NOTHING) is not
-- added unless a probe looked meanwhile; then it leaves like a deleted
-- row's once its transaction committed (not one that a written row has
-- too). Within a savepoint rolled back, keys go with it.
SELECT pending_deletes AS pending_before FROM cuckoo_filters WHERE name = 'bt_k' \gset
INSERT INTO bt VALUES (1, 61040, 'conflict') ON CONFLICT (id) DO NOTHING;
INSERT INTO bt VALUES (2, 61050, 'conflict'), (6105, 61050, 'written') ON CONFLICT (id) DO NOTHING;
SELECT pending_deletes - :pending_before AS unwritten_queued FROM cuckoo_filters WHERE name = 'bt_k';
BEGIN;
SAVEPOINT s;
INSERT INTO bt VALUES (6106, 61060, 'rolled back');
ROLLBACK TO s;
INSERT INTO bt VALUES (6106, 61060, 'again');
COMMIT;
SELECT cf_apply_deletes('bt_k') >= 0 AS applied;
SELECT cf_contains('bt_k', 61040::bigint) AS unwritten_left, cf_contains('bt_k', 61050::bigint) AS written_kept,
       cf_contains('bt_k', 61060::bigint) AS again_kept;
SELECT * FROM bt_missing;
CREATE FUNCTION bt_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.note = 'skip' THEN NULL ELSE NEW END;
END $$;
CREATE TRIGGER zzz_skip BEFORE INSERT ON bt FOR EACH ROW EXECUTE FUNCTION bt_skip();
CREATE TRIGGER aa_sees AFTER INSERT ON bt FOR EACH ROW EXECUTE FUNCTION bt_sees();
SELECT pending_deletes AS pending_before FROM cuckoo_filters WHERE name = 'bt_k' \gset
INSERT INTO bt VALUES (6107, 61070, 'keep'), (6108, 61080, 'skip');
SELECT pending_deletes - :pending_before AS probed_unwritten_queued FROM cuckoo_filters WHERE name = 'bt_k';
DROP TRIGGER zzz_skip ON bt;
DROP TRIGGER aa_sees ON bt;
SELECT cf_apply_deletes('bt_k') >= 1 AS applied;
SELECT cf_contains('bt_k', 61070::bigint) AS kept, cf_contains('bt_k', 61080::bigint) AS skipped_left;
-- Matching the BEFORE trigger's keys is only a saving: many rows skipped
-- in a row, and a statement that a trigger runs on the same table, keep
-- every written row's key.
INSERT INTO bt SELECT g, g * 10 + 3, 'skipped' FROM generate_series(1, 40) g
UNION ALL SELECT 6200 + g, 62000 + g, 'written' FROM generate_series(1, 5) g ON CONFLICT (id) DO NOTHING;
CREATE FUNCTION bt_nest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.note = 'nest' THEN
        INSERT INTO bt VALUES (NEW.id + 1, NEW.k + 1, 'nested'), (NEW.id + 2, NEW.k + 2, 'nested');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER a_nest BEFORE INSERT ON bt FOR EACH ROW EXECUTE FUNCTION bt_nest();
INSERT INTO bt VALUES (6300, 63000, 'nest'), (6310, 63100, 'nest'), (6320, 63200, 'plain');
DROP TRIGGER a_nest ON bt;
SELECT cf_apply_deletes('bt_k') >= 0 AS applied;
SELECT count(*) AS written_kept FROM bt WHERE id > 6200 AND id < 6400 AND cf_contains('bt_k', k);
SELECT count(*) FILTER (WHERE cf_contains('bt_k', g * 10 + 3)) < 5 AS skipped_mostly_gone FROM generate_series(1, 40) g;
SELECT * FROM bt_missing;

-- A delete leaves only once applied; an update that keeps the key changes
-- nothing; one that changes it adds the new key at once.
DELETE FROM bt WHERE id = 6002;
SELECT cf_contains('bt_k', 60020::bigint) AS still_there, pending_deletes FROM cuckoo_filters WHERE name = 'bt_k';
SELECT cf_apply_deletes('bt_k');
SELECT cf_contains('bt_k', 60020::bigint) AS deleted, pending_deletes FROM cuckoo_filters WHERE name = 'bt_k';
UPDATE bt SET note = 'touched' WHERE id <= 100;
SELECT pending_deletes FROM cuckoo_filters WHERE name = 'bt_k';
UPDATE bt SET k = k + 1 WHERE id <= 10;
SELECT * FROM bt_missing;
SELECT cf_apply_deletes('bt_k');
-- (One old key of the ten is a false positive at this rate, always the same.)
SELECT count(*) FILTER (WHERE cf_contains('bt_k', g * 10)) AS old_keys_left, count(*) FILTER (WHERE cf_contains('bt_k', g * 10 + 1)) AS new_keys
FROM generate_series(1, 10) g;

-- Rolled back: a delete is discarded (the row stays, with its key); an
-- insert's key may stay (a false positive). Savepoints alike.
BEGIN;
DELETE FROM bt WHERE id = 6003;
INSERT INTO bt VALUES (7001, 70010, 'rolled back');
ROLLBACK;
BEGIN;
DELETE FROM bt WHERE id = 6004;
SAVEPOINT a;
DELETE FROM bt WHERE id = 6001;
ROLLBACK TO a;
COMMIT;
SELECT cf_apply_deletes('bt_k');
SELECT cf_contains('bt_k', 60030::bigint) AS kept_after_rollback, cf_contains('bt_k', 60011::bigint) AS kept_after_savepoint,
       cf_contains('bt_k', 60040::bigint) AS deleted_and_committed;
SELECT * FROM bt_missing;
-- A failing statement's deletes never reach the queue (its rows stay).
SELECT err($$INSERT INTO bt VALUES (6001, 1, 'duplicate id')$$);
SELECT err($$DELETE FROM bt WHERE id <= 3 RETURNING 1 / (id - 3)$$);
SELECT pending_deletes FROM cuckoo_filters WHERE name = 'bt_k';
SELECT * FROM bt_missing;

-- Keys of a row updated, deleted and inserted again in one transaction.
BEGIN;
UPDATE bt SET k = 999999 WHERE id = 20;
DELETE FROM bt WHERE id = 20;
INSERT INTO bt VALUES (20, 200, 'back');
COMMIT;
SELECT cf_apply_deletes('bt_k') >= 0 AS applied;
SELECT * FROM bt_missing;

-- A key with many rows: its pair saturates, its deletes are refused (the
-- key stays), and a rebuild clears what they left.
INSERT INTO bt SELECT 8000 + g, 424242, 'dup' FROM generate_series(1, 10) g;
DELETE FROM bt WHERE k = 424242;
SELECT cf_apply_deletes('bt_k');
SELECT cf_contains('bt_k', 424242::bigint) AS saturated_key_stays, dropped_deletes > 0 AS counted FROM cuckoo_filters WHERE name = 'bt_k';
SELECT cf_rebuild('bt_k') AS rows;
SELECT cf_contains('bt_k', 424242::bigint) AS cleared, pending_deletes, dropped_deletes FROM cuckoo_filters WHERE name = 'bt_k';
SELECT * FROM bt_missing;

-- Only the binding's own row trigger writes it: another naming it on the
-- same table (which would queue each delete twice) is refused. A fill
-- without the lock cf_bind and cf_rebuild take is refused too.
CREATE TRIGGER zz_extra AFTER DELETE ON bt FOR EACH ROW EXECUTE FUNCTION cf_bound_row('bt_k', 'k');
SELECT err($$DELETE FROM bt WHERE id = 1$$);
DROP TRIGGER zz_extra ON bt;
SELECT err($$SELECT cf_bound_fill('bt_k', 'bt', 'k')$$);

-- A bound filter changes only with its table: changes by name are refused.
SELECT err($$SELECT cf_insert('bt_k', 1::bigint)$$);
SELECT err($$SELECT cf_delete('bt_k', 10::bigint)$$);
SELECT err($$SELECT cf_insert('bt_k', ARRAY[1, 2]::bigint[])$$);
SELECT err($$SELECT cf_drop('bt_k')$$);
SELECT err($$SELECT cf_create('bt_k', 10, 0.01)$$);
SELECT err($$SELECT cf_publish('bt_k', cf_agg(g), false) FROM generate_series(1, 3) g$$);
SELECT * FROM bt_missing;

-- A cf_rebuild rolled back (cancelled, failed) leaves a filter that no
-- probe trusts: every key is a maybe until a rebuild commits.
SELECT cf_bound_ready('bt_k') AS ready, cf_bound_contains('bt_k', -5::bigint) AS absent_key;
BEGIN;
SELECT cf_rebuild('bt_k') > 0 AS rebuilt;
ROLLBACK;
SELECT state, cf_bound_ready('bt_k') AS ready, cf_bound_contains('bt_k', -5::bigint) AS absent_key FROM cuckoo_filters WHERE name = 'bt_k';
SELECT * FROM bt_missing;
SELECT cf_rebuild('bt_k') > 0 AS rebuilt;
SELECT state, cf_bound_ready('bt_k') AS ready, cf_bound_contains('bt_k', -5::bigint) AS absent_key FROM cuckoo_filters WHERE name = 'bt_k';

-- TRUNCATE empties the filter as of its commit (a filter that is not
-- durable here); rolled back, the rows stay and every key is a maybe until
-- a rebuild. A role with the TRUNCATE privilege keeps the filter its owner's.
CREATE TABLE bt2 (k text);
INSERT INTO bt2 VALUES ('a'), ('b');
SELECT cf_bind('bt2_k', 'bt2', 'k', 0.01, false);
BEGIN;
TRUNCATE bt2;
INSERT INTO bt2 VALUES ('z');
COMMIT;
SELECT state, cf_bound_contains('bt2_k', 'a'::text) AS a, cf_bound_contains('bt2_k', 'z'::text) AS z FROM cuckoo_filters WHERE name = 'bt2_k';
BEGIN;
TRUNCATE bt2;
ROLLBACK;
SELECT state, cf_bound_contains('bt2_k', 'nothing'::text) AS maybe, (SELECT count(*) FROM bt2) AS rows_kept FROM cuckoo_filters WHERE name = 'bt2_k';
SELECT cf_rebuild('bt2_k'), cf_bound_contains('bt2_k', 'z'::text) AS z, cf_bound_contains('bt2_k', 'nothing'::text) AS absent;
CREATE ROLE bound_truncater;
GRANT TRUNCATE, INSERT ON bt2 TO bound_truncater;
SET ROLE bound_truncater;
TRUNCATE bt2;
INSERT INTO bt2 VALUES ('a'), ('b');
RESET ROLE;
SELECT state, owner, cf_bound_contains('bt2_k', 'a'::text) AS a, cf_bound_contains('bt2_k', 'z'::text) AS z FROM cuckoo_filters WHERE name = 'bt2_k';
DROP OWNED BY bound_truncater;
DROP ROLE bound_truncater;
-- A TRUNCATE rolled back after a probe in its own transaction: the probe
-- trusted the empty filter for that transaction only.
BEGIN;
TRUNCATE bt2;
SELECT cf_bound_contains('bt2_k', 'a'::text) AS own_view;
ROLLBACK;
SELECT state, cf_bound_contains('bt2_k', 'a'::text) AS a FROM cuckoo_filters WHERE name = 'bt2_k';
SELECT cf_rebuild('bt2_k');
-- Rolled back to a savepoint: a call site that probed inside it (a
-- PL/pgSQL expression, kept for the transaction) asks again.
CREATE FUNCTION bt2_probe(k text) RETURNS boolean LANGUAGE plpgsql AS $f$ BEGIN RETURN cf_bound_contains('bt2_k', k); END $f$;
BEGIN;
SAVEPOINT s;
TRUNCATE bt2;
SELECT bt2_probe('a') AS inside;
ROLLBACK TO s;
SELECT bt2_probe('a') AS after_rollback_to, (SELECT count(*) FROM bt2 WHERE k = 'a') AS rows_a;
COMMIT;
DROP FUNCTION bt2_probe(text);
SELECT cf_rebuild('bt2_k');
-- A statement whose keys cannot be added (a filter that may not grow)
-- fails; rolled back, its keys go with its rows (they are not tried again
-- before every later statement), and the transaction goes on.
BEGIN;
SET LOCAL cuckoo.max_bytes_per_role = 1;
SAVEPOINT s;
SELECT err($$INSERT INTO bt2 SELECT 'g' || g FROM generate_series(1, 5000) g$$);
ROLLBACK TO s;
SELECT count(*) AS rows_now FROM bt2;
SET LOCAL cuckoo.max_bytes_per_role = -1;
INSERT INTO bt2 VALUES ('after');
COMMIT;
SELECT cf_bound_contains('bt2_k', 'after'::text) AS after, (SELECT count(*) FROM bt2) AS rows;
-- The same for a durable filter.
CREATE TABLE bt6 (k int);
INSERT INTO bt6 VALUES (1), (2);
SELECT cf_bind('bt6_k', 'bt6', 'k');
TRUNCATE bt6;
INSERT INTO bt6 VALUES (3);
SELECT state, durable, cf_bound_contains('bt6_k', 1) AS one, cf_bound_contains('bt6_k', 3) AS three FROM cuckoo_filters WHERE name = 'bt6_k';
SELECT cf_unbind('bt6_k');
DROP TABLE bt6;
INSERT INTO bt2 VALUES ('c');
SELECT cf_contains('bt2_k', 'c'::text);

-- Errors: what cannot be bound, a second binding of a name, writes through
-- a binding whose column changed.
SELECT err($$SELECT cf_bind('x', 'bt', 'nope')$$);
SELECT err($$SELECT cf_bind('bt_k', 'bt', 'k')$$);
SELECT err($$SELECT cf_bind('x', 'bt_missing', 'missing')$$);
CREATE TEMP TABLE bt_temp (k int);
SELECT err($$SELECT cf_bind('x', 'bt_temp', 'k')$$);
CREATE TABLE bt_pt (k point);
SELECT err($$SELECT cf_bind('x', 'bt_pt', 'k')$$);
CREATE COLLATION bt_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE bt_ci_t (k text COLLATE bt_ci);
SELECT err($$SELECT cf_bind('x', 'bt_ci_t', 'k')$$);
SELECT err($$SELECT cf_bind(NULL, 'bt', 'k')$$);
SELECT count(*) AS nothing_left_behind FROM cuckoo_filters WHERE name = 'x';
SELECT err($$SELECT cf_unbind('x')$$);
SELECT err($$SELECT cf_rebuild('x')$$);
SELECT err($$SELECT cf_apply_deletes('x')$$);
SELECT err($$SELECT cf_bound_row()$$);
-- DDL: a renamed column is followed; a type that hashes as the filter's
-- keys keeps the binding; any other type, a dropped column or a dropped
-- table ends it, with a NOTICE.
ALTER TABLE bt2 RENAME COLUMN k TO kk;
INSERT INTO bt2 VALUES ('d');
SELECT bound_column, cf_contains('bt2_k', 'd'::text) FROM cuckoo_filters WHERE name = 'bt2_k';
ALTER TABLE bt2 RENAME COLUMN kk TO k;
-- A type change that rewrites the column (its values may change, and no row
-- trigger fires) drops the filter until it is rebuilt (cf_rebuild, or the
-- binding's first use: cuckoo.auto_rebuild): probes answer maybe.
ALTER TABLE bt2 ALTER COLUMN k TYPE varchar(10);
SELECT state, bound_column, cf_bound_contains('bt2_k', 'zzz'::text) AS maybe FROM cuckoo_filters WHERE name = 'bt2_k';
SELECT cf_rebuild('bt2_k');
INSERT INTO bt2 VALUES ('e');
SELECT state, cf_contains('bt2_k', 'e'::text), cf_bound_contains('bt2_k', 'zzz'::text) AS absent FROM cuckoo_filters WHERE name = 'bt2_k';
ALTER TABLE bt2 ALTER COLUMN k TYPE varchar(10) USING upper(k);
SELECT state FROM cuckoo_filters WHERE name = 'bt2_k';
SELECT cf_rebuild('bt2_k') > 0 AS rebuilt, cf_bound_contains('bt2_k', 'E'::text) AS upper_e, cf_bound_contains('bt2_k', 'e'::text) AS lower_e;
-- Rolled back, a rewrite to another type leaves the binding needing a
-- rebuild (its filter was dropped), and DDL of any role later judges no
-- filter that is not the binding's: the binding stays.
BEGIN;
ALTER TABLE bt2 ALTER COLUMN k TYPE text USING lower(k);
ROLLBACK;
CREATE TEMP TABLE bt2_other (i int);
DROP TABLE bt2_other;
SELECT state, cf_bound_contains('bt2_k', 'zzz'::text) AS maybe, (SELECT count(*) FROM cuckoo_bindings WHERE name = 'bt2_k') AS bound
FROM cuckoo_filters WHERE name = 'bt2_k';
SELECT cf_rebuild('bt2_k'), cf_bound_contains('bt2_k', 'E'::text) AS upper_e;
-- A rewrite for another column keeps the filter.
ALTER TABLE bt2 ADD COLUMN n int;
ALTER TABLE bt2 ALTER COLUMN n TYPE bigint USING 1;
SELECT state FROM cuckoo_filters WHERE name = 'bt2_k';
ALTER TABLE bt2 DROP COLUMN n;
-- Another key type: rebuilt with it.
ALTER TABLE bt2 ALTER COLUMN k TYPE bigint USING length(k);
SELECT count(*) AS bindings, (SELECT state FROM cuckoo_filters WHERE name = 'bt2_k'),
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'bt2'::regclass) AS triggers
FROM cuckoo_bindings WHERE name = 'bt2_k';
INSERT INTO bt2 VALUES (7);
SELECT cf_rebuild('bt2_k'), cf_bound_contains('bt2_k', 7::bigint) AS seven, cf_bound_contains('bt2_k', 70::bigint) AS absent;
CREATE TABLE bt3 (id int, k int);
SELECT cf_bind('bt3_k', 'bt3', 'k');
ALTER TABLE bt3 DROP COLUMN k;
SELECT cf_bind('bt3_k', 'bt3', 'id');
DROP TABLE bt3;
SELECT count(*) AS bindings FROM cuckoo_bindings WHERE name = 'bt3_k';
CREATE TABLE bt3 (k int);
SELECT cf_bind('bt3_k', 'bt3', 'k');
-- Its triggers disabled or dropped: writes would go unseen, so it ends.
SELECT tgname AS row_trigger FROM pg_trigger WHERE tgrelid = 'bt3'::regclass AND tgname LIKE '%_row' \gset
ALTER TABLE bt3 DISABLE TRIGGER :"row_trigger";
SELECT cf_bind('bt3_k', 'bt3', 'k');
DROP TRIGGER :"row_trigger" ON bt3;
SELECT count(*) AS bindings FROM cuckoo_bindings WHERE name = 'bt3_k';
-- Disabled under session_replication_role = replica: the event triggers
-- fire then too, and it ends.
SELECT cf_bind('bt3_k', 'bt3', 'k');
SET session_replication_role = replica;
ALTER TABLE bt3 DISABLE TRIGGER ALL;
RESET session_replication_role;
SELECT count(*) AS bindings FROM cuckoo_bindings WHERE name = 'bt3_k';
ALTER TABLE bt3 ENABLE TRIGGER ALL;
-- Replaced by hand (a WHEN clause that skips every row): it ends too.
SELECT cf_bind('bt3_k', 'bt3', 'k');
SELECT tgname AS row_trigger FROM pg_trigger WHERE tgrelid = 'bt3'::regclass AND tgname LIKE '%_row' \gset
CREATE OR REPLACE TRIGGER :"row_trigger" AFTER INSERT OR UPDATE OR DELETE ON bt3 FOR EACH ROW WHEN (false) EXECUTE FUNCTION cf_bound_row('bt3_k', 'k');
SELECT count(*) AS bindings FROM cuckoo_bindings WHERE name = 'bt3_k';
DROP TABLE bt3;

-- An enum column's keys are its labels: a label added changes nothing, a
-- label renamed drops the filter until cf_rebuild (probes answer maybe).
CREATE TYPE bt_mood AS ENUM ('sad', 'ok');
CREATE TABLE bt4 (m bt_mood);
INSERT INTO bt4 VALUES ('sad'), ('ok');
SELECT cf_bind('bt4_m', 'bt4', 'm');
ALTER TYPE bt_mood ADD VALUE 'happy';
SELECT state, cf_bound_contains('bt4_m', 'happy'::bt_mood) AS happy FROM cuckoo_filters WHERE name = 'bt4_m';
ALTER TYPE bt_mood RENAME VALUE 'sad' TO 'blue';
SELECT state, cf_bound_contains('bt4_m', 'happy'::bt_mood) AS maybe FROM cuckoo_filters WHERE name = 'bt4_m';
-- Other DDL on the table leaves it so (no rebuild under its lock).
ALTER TABLE bt4 ALTER COLUMN m SET STATISTICS 50;
SELECT state FROM cuckoo_filters WHERE name = 'bt4_m';
-- A restore makes the binding's triggers (with the catalog's row restored
-- and no filter): the binding stays as it is, needing a rebuild (its first
-- use asks for one in the background; off here), and is not ended.
BEGIN;
SELECT format('DROP TRIGGER %I ON bt4; DROP TRIGGER %I ON bt4; DROP TRIGGER %I ON bt4',
              'cuckoo_' || left(md5('bt4_m'), 16) || '_row', 'cuckoo_' || left(md5('bt4_m'), 16) || '_flush',
              'zz_cuckoo_' || left(md5('bt4_m'), 16) || '_new') AS drops \gset
:drops;
SELECT cf_bound_triggers('bt4_m', 'bt4', 'm');
COMMIT;
SELECT state, (SELECT count(*) FROM cuckoo_bindings WHERE name = 'bt4_m') AS bound FROM cuckoo_filters WHERE name = 'bt4_m';
-- cf_rebuild reads the catalogs after its lock: not under a transaction
-- snapshot taken before it.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT err($$SELECT cf_rebuild('bt4_m')$$);
ROLLBACK;
SELECT cf_rebuild('bt4_m');
SELECT state, cf_bound_contains('bt4_m', 'blue'::bt_mood) AS blue, cf_bound_contains('bt4_m', 'happy'::bt_mood) AS happy
FROM cuckoo_filters WHERE name = 'bt4_m';
-- Triggers left without the catalog's row (a restore of the schema alone,
-- as for a logical replication subscriber) do nothing, as they did before.
SELECT cf_bound_reset('bt4_m', NULL, NULL, NULL, NULL);
DELETE FROM cuckoo_bindings WHERE name = 'bt4_m';
INSERT INTO bt4 VALUES ('ok');
UPDATE bt4 SET m = 'happy' WHERE m = 'ok';
INSERT INTO cuckoo_bindings (name, tab, col, attnum, fpp, durable, bound_by)
  VALUES ('bt4_m', 'bt4', 'm', 1, 0.002, true, current_user::regrole);
SELECT cf_rebuild('bt4_m');
SELECT cf_bound_contains('bt4_m', 'blue'::bt_mood) AS blue, cf_bound_contains('bt4_m', 'happy'::bt_mood) AS happy;
-- A filter there but not trusted (a rebuild rolled back) whose trigger is
-- disabled: the binding ends (else a TRUNCATE, which makes its filter
-- trusted, would leave writes unseen).
BEGIN;
SELECT cf_rebuild('bt4_m');
ROLLBACK;
SELECT format('ALTER TABLE bt4 DISABLE TRIGGER %I', 'cuckoo_' || left(md5('bt4_m'), 16) || '_row') AS dis \gset
:dis;
SELECT count(*) AS bound FROM cuckoo_bindings WHERE name = 'bt4_m';
DROP TABLE bt4;
DROP TYPE bt_mood;

-- Rows written through a partitioned parent fire the bound partition's row
-- triggers but not its statement trigger: their keys are in the filter
-- when the statement ends, for the transaction's next statements too.
CREATE TABLE bp (id int, k int) PARTITION BY RANGE (id);
CREATE TABLE bp1 PARTITION OF bp FOR VALUES FROM (0) TO (1000);
SELECT cf_bind('bp1_k', 'bp1', 'k');
BEGIN;
INSERT INTO bp VALUES (5, 4242);
SELECT cf_bound_contains('bp1_k', 4242) AS in_own_transaction;
COMMIT;
-- COPY through the parent (no statement of its own fires on the
-- partition): a cached plan run next finds the key.
SET plan_cache_mode = force_generic_plan;
PREPARE bp_q(int) AS SELECT count(*) FROM (VALUES ($1)) o(k) WHERE EXISTS (SELECT 1 FROM bp1 i WHERE i.k = o.k);
BEGIN;
COPY bp FROM STDIN;
6	4343
\.
EXECUTE bp_q(4343);
SELECT cf_bound_contains('bp1_k', 4343) AS after_copy;
COMMIT;
DEALLOCATE bp_q;
RESET plan_cache_mode;
-- An AFTER ROW trigger that fires after the binding's own sees the row's
-- key, in a query and in an expression.
CREATE FUNCTION bp_check() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  RAISE NOTICE 'key %: query %, expression %', NEW.k,
    (SELECT count(*) FROM bp1 WHERE cf_bound_contains('bp1_k', k) AND k = NEW.k),
    cf_bound_contains('bp1_k', NEW.k);
  RETURN NULL;
END $f$;
CREATE TRIGGER zz_check AFTER INSERT ON bp1 FOR EACH ROW EXECUTE FUNCTION bp_check();
INSERT INTO bp1 VALUES (7, 5454);
DROP TRIGGER zz_check ON bp1;
DROP FUNCTION bp_check();
SELECT cf_unbind('bp1_k');
DROP TABLE bp;

-- A partitioned table binds every partition at every level, those created
-- or attached later too: an attached table's rows get their keys as it is
-- attached. A partition detached keeps its keys (false positives); one
-- whose trigger is disabled ends the binding. The pre-screen applies to
-- EXISTS over the partitioned table.
CREATE TABLE pt (id int, k int) PARTITION BY RANGE (id);
CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (1000);
CREATE TABLE pt2 PARTITION OF pt FOR VALUES FROM (1000) TO (2000) PARTITION BY RANGE (id);
CREATE TABLE pt2a PARTITION OF pt2 FOR VALUES FROM (1000) TO (1500);
INSERT INTO pt SELECT g, g * 3 FROM generate_series(0, 1499) g;
ANALYZE pt, bt;
-- Filters are sized from the statistics: a partitioned table's leaves', a
-- table's own.
SELECT cf_bound_rows_estimate('pt') AS pt_rows, cf_bound_rows_estimate('pt2a') AS leaf_rows,
       cf_bound_rows_estimate('bt') > 5000 AS bt_rows;
SELECT cf_bind('pt_k', 'pt', 'k');
SELECT capacity >= 1500 AS sized FROM cuckoo_filters WHERE name = 'pt_k';
CREATE VIEW pt_missing AS SELECT count(*) AS missing FROM pt WHERE k IS NOT NULL AND NOT cf_contains('pt_k', k);
SELECT * FROM pt_missing;
SELECT c.relname, t.tgenabled, t.tgparentid <> 0 AS cloned FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relname LIKE 'pt%' AND t.tgname LIKE '%cuckoo%' ORDER BY c.relname, t.tgname COLLATE "C";
INSERT INTO pt VALUES (10, 100001);
INSERT INTO pt2a VALUES (1200, 100002);
UPDATE pt SET id = 1300 WHERE id = 10;
SELECT cf_bound_contains('pt_k', 100001) AS moved_row, cf_bound_contains('pt_k', 100002) AS leaf_row;
CREATE TABLE pt3 PARTITION OF pt FOR VALUES FROM (2000) TO (3000);
INSERT INTO pt VALUES (2500, 100003);
CREATE TABLE pt4 (id int, k int);
INSERT INTO pt4 SELECT g, g * 7 + 1 FROM generate_series(3000, 3999) g;
BEGIN;
INSERT INTO pt4 VALUES (3001, 100004);
ALTER TABLE pt ATTACH PARTITION pt4 FOR VALUES FROM (3000) TO (4000);
SELECT cf_bound_contains('pt_k', 100004) AS attached_in_transaction;
COMMIT;
SELECT * FROM pt_missing;
SELECT (SELECT count(*) FROM generate_series(0, 30000) o(k) WHERE EXISTS (SELECT 1 FROM pt i WHERE i.k = o.k))
     = (SELECT count(*) FROM pt WHERE k BETWEEN 0 AND 30000) AS exists_exact;
SELECT err($$SELECT cf_bound_fill('pt_k', 'pt1', 'k')$$);
ALTER TABLE pt DETACH PARTITION pt1;
DELETE FROM pt WHERE id >= 3000 AND id < 3100;
SELECT cf_apply_deletes('pt_k') >= 0 AS applied;
SELECT * FROM pt_missing;
-- Deletes made on a partition directly (no statement trigger of the
-- binding fires) are applied by the next such statement.
CREATE PROCEDURE pt_delete_leaf() LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..50 LOOP
        DELETE FROM pt4 WHERE id = 3100 + i;
        COMMIT;
        EXIT WHEN i >= 2 AND (SELECT pending_deletes FROM cuckoo_filters WHERE name = 'pt_k') <= 1;
        PERFORM pg_sleep(0.11);
    END LOOP;
END $$;
CALL pt_delete_leaf();
SELECT pending_deletes <= 1 AS leaf_deletes_applied FROM cuckoo_filters WHERE name = 'pt_k';
DROP PROCEDURE pt_delete_leaf();
SELECT * FROM pt_missing;
-- A rewrite of the bound column (partition by partition) drops the filter
-- until it is rebuilt; the rebuild reads every partition.
DROP VIEW pt_missing;
ALTER TABLE pt ALTER COLUMN k TYPE int USING k + 1;
SELECT state FROM cuckoo_filters WHERE name = 'pt_k';
SELECT cf_rebuild('pt_k') AS rows;
CREATE VIEW pt_missing AS SELECT count(*) AS missing FROM pt WHERE k IS NOT NULL AND NOT cf_contains('pt_k', k);
SELECT * FROM pt_missing;
-- A table attached by name while another of that name, in another schema,
-- is a partition already: only the one attached is read.
CREATE SCHEMA pt_other;
CREATE TABLE pt_other.pt3 (id int, k int);
INSERT INTO pt_other.pt3 VALUES (4500, 450045);
ALTER TABLE pt ATTACH PARTITION pt_other.pt3 FOR VALUES FROM (4000) TO (5000);
SELECT * FROM pt_missing;
-- A partition detached is no longer the binding's: a trigger made by hand
-- on it, named as the binding's, is refused in a session that wrote to it
-- while it was attached.
INSERT INTO pt_other.pt3 VALUES (4501, 450046);
DELETE FROM pt_other.pt3 WHERE id = 4501;
ALTER TABLE pt DETACH PARTITION pt_other.pt3;
SELECT tgname AS pt_row_trigger FROM pg_trigger WHERE tgrelid = 'pt'::regclass AND tgname LIKE 'cuckoo%row' \gset
CREATE TRIGGER :"pt_row_trigger" AFTER DELETE ON pt_other.pt3 FOR EACH ROW EXECUTE FUNCTION cf_bound_row('pt_k', 'k');
SELECT err($$DELETE FROM pt_other.pt3$$);
DROP SCHEMA pt_other CASCADE;
-- A statement that an AFTER trigger runs on the bound table (here an
-- UPDATE keeping a count) leaves the keys the outer statement set aside:
-- a later trigger of each outer row finds its key, in a probe and in an
-- EXISTS the planner pre-screens.
CREATE TABLE node (id int PRIMARY KEY, parent int, code int, nchild int DEFAULT 0);
INSERT INTO node SELECT g, NULL, g, 0 FROM generate_series(1, 2000) g;
CREATE TABLE node_probe (c int);
INSERT INTO node_probe VALUES (7200001), (7200002), (7200003);
ANALYZE node, node_probe;
SELECT cf_bind('node_code', 'node', 'code');
CREATE TABLE node_seen (id int, probe bool, found bigint);
CREATE FUNCTION node_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE node SET nchild = nchild + 1 WHERE id = NEW.parent; RETURN NULL; END $$;
CREATE FUNCTION node_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO node_seen SELECT NEW.id, cf_bound_contains('node_code', NEW.code),
        (SELECT count(*) FROM node_probe p WHERE cf_bound_contains('node_code', p.c) AND EXISTS (SELECT 1 FROM node n WHERE n.code = p.c));
    RETURN NULL;
END $$;
CREATE TRIGGER a_count AFTER INSERT ON node FOR EACH ROW EXECUTE FUNCTION node_count();
CREATE TRIGGER b_check AFTER INSERT ON node FOR EACH ROW EXECUTE FUNCTION node_check();
INSERT INTO node (id, parent, code) VALUES (400001, 1, 7200001), (400002, 1, 7200002), (400003, 2, 7200003);
SELECT * FROM node_seen ORDER BY id;
SELECT cf_unbind('node_code');
DROP TABLE node, node_probe, node_seen;
DROP FUNCTION node_count(), node_check();
-- Rows a foreign key's action writes (ON UPDATE CASCADE: their AFTER
-- triggers fire with the outer statement's) keep the keys their BEFORE
-- trigger set aside while an AFTER trigger of the outer statement runs a
-- statement of its own.
CREATE TABLE fk_parent (id int PRIMARY KEY);
CREATE TABLE fk_child (id int PRIMARY KEY, pid int REFERENCES fk_parent (id) ON UPDATE CASCADE);
INSERT INTO fk_parent SELECT g FROM generate_series(1, 2000) g;
INSERT INTO fk_child SELECT g, g FROM generate_series(1, 2000) g;
SELECT cf_bind('fk_child_pid', 'fk_child', 'pid');
CREATE TABLE fk_seen (id int, probe bool);
CREATE FUNCTION fk_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fk_seen VALUES (NEW.id, NULL);
    UPDATE fk_seen SET probe = cf_bound_contains('fk_child_pid', NEW.id) WHERE id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_check AFTER UPDATE ON fk_parent FOR EACH ROW EXECUTE FUNCTION fk_check();
UPDATE fk_parent SET id = id + 9000000 WHERE id <= 3;
SELECT * FROM fk_seen ORDER BY id;
SELECT count(*) AS missing FROM fk_child WHERE NOT cf_contains('fk_child_pid', pid);
SELECT cf_unbind('fk_child_pid');
DROP TABLE fk_child, fk_parent, fk_seen;
DROP FUNCTION fk_check();
SELECT tgname AS pt_row_trigger FROM pg_trigger WHERE tgrelid = 'pt3'::regclass AND tgname LIKE 'cuckoo%row' \gset
ALTER TABLE pt3 DISABLE TRIGGER :"pt_row_trigger";
SELECT count(*) AS still_bound FROM cuckoo_bindings WHERE name = 'pt_k';
DROP VIEW pt_missing;
DROP TABLE pt, pt1;

-- The binding's internal queries run as other roles with their operators
-- taken from pg_catalog, never from the caller's search_path: a role whose
-- own "=" would run as a superuser gets nothing.
CREATE ROLE bound_evil;
CREATE SCHEMA bound_evil AUTHORIZATION bound_evil;
CREATE TABLE bound_evil.t (k int);
ALTER TABLE bound_evil.t OWNER TO bound_evil;
SET ROLE bound_evil;
INSERT INTO bound_evil.t VALUES (1);
SELECT cf_bind('evil_k', 'bound_evil.t', 'k');
CREATE FUNCTION bound_evil.eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  IF current_user <> 'bound_evil' THEN RAISE EXCEPTION 'ran as %', current_user; END IF;
  RETURN pg_catalog.texteq(a, b);
END $f$;
CREATE OPERATOR bound_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = bound_evil.eq);
SET search_path = bound_evil, pg_catalog;
TRUNCATE bound_evil.t;
SELECT public.cf_rebuild('evil_k');
SELECT public.cf_unbind('evil_k');
RESET search_path;
RESET ROLE;
DROP SCHEMA bound_evil CASCADE;
DROP ROLE bound_evil;

-- One role's bindings hold at most cuckoo.max_bound_filters_per_role of the
-- shared slots (bt_k and bt2_k hold two; a dropped database's bindings hold
-- none: their slots are freed when one is wanted).
SELECT current_database() AS regress_db \gset
CREATE DATABASE cuckoo_bound_gone;
\c cuckoo_bound_gone
SET client_min_messages = warning;
CREATE EXTENSION cuckoo;
CREATE TABLE gone (k int);
SELECT cf_bind('gone_k', 'gone', 'k');
INSERT INTO gone VALUES (1);
\c :regress_db
\set VERBOSITY terse
DROP DATABASE cuckoo_bound_gone;
CREATE TABLE bt5 (k int);
SET cuckoo.max_bound_filters_per_role = 2;
SELECT err($$SELECT cf_bind('bt5_k', 'bt5', 'k')$$);
SELECT count(*) AS left_behind FROM cuckoo_bindings WHERE name = 'bt5_k';
RESET cuckoo.max_bound_filters_per_role;
SELECT cf_bind('bt5_k', 'bt5', 'k');
SELECT cf_unbind('bt5_k');
DROP TABLE bt5;

-- Another role: cannot bind, rebuild or unbind a table it does not own,
-- cannot write the catalog, and a trigger it makes by hand on its own table
-- cannot reach someone else's binding.
CREATE ROLE bound_other;
GRANT SELECT, INSERT, DELETE ON bt TO bound_other;
CREATE TABLE other_t (k bigint);
ALTER TABLE other_t OWNER TO bound_other;
SET ROLE bound_other;
SELECT err($$SELECT cf_bind('y', 'bt', 'k')$$);
SELECT err($$SELECT cf_rebuild('bt_k')$$);
SELECT err($$SELECT cf_unbind('bt_k')$$);
SELECT err($$INSERT INTO cuckoo_bindings VALUES ('z', 'other_t', 'k', 1, 0.1, true, 'bound_other')$$);
SELECT err($$SELECT cf_bound_register('bt_k', 'other_t', 'k', 0.1, true)$$);
SELECT err($$SELECT cf_bound_fill('bt_k', 'bt', 'k')$$);
CREATE TRIGGER stolen AFTER INSERT ON other_t FOR EACH ROW EXECUTE FUNCTION cf_bound_row('bt_k', 'k');
SELECT err($$INSERT INTO other_t VALUES (5)$$);
-- Writing the bound table itself is what the binding is for.
INSERT INTO bt VALUES (9001, 90010, 'other role');
DELETE FROM bt WHERE id = 9001;
SELECT name, bound_table FROM cuckoo_filters WHERE name = 'bt_k';
RESET ROLE;
SELECT cf_contains('bt_k', 90010::bigint) AS other_roles_insert;
SELECT * FROM bt_missing;

-- Many rows of one key in one statement (a column with few values): the key
-- takes its capped copies, not one a row; the filter neither grows nor
-- fills, and keeps every key.
CREATE TABLE bt_few (id serial, k bigint NOT NULL);
INSERT INTO bt_few (k) SELECT g FROM generate_series(1, 10000) g;
SELECT cf_bind('bt_few_k', 'bt_few', 'k');
SELECT bytes AS bytes_before FROM cuckoo_filters WHERE name = 'bt_few_k' \gset
INSERT INTO bt_few (k) SELECT 5 FROM generate_series(1, 1000);
UPDATE bt_few SET k = 7 WHERE id <= 500;
SELECT items, bytes = :bytes_before AS same_bytes FROM cuckoo_filters WHERE name = 'bt_few_k';
SELECT count(*) FILTER (WHERE NOT cf_contains('bt_few_k', k)) AS missing FROM bt_few;
SELECT cf_unbind('bt_few_k');
DROP TABLE bt_few;

-- A transaction that turns read-only after its writes still commits: the
-- deletes its commit queues (of keys added for rows never written: the
-- conflicting row's, which a probe in its statement made add) are
-- bookkeeping, not a change the transaction makes. cf_apply_deletes with
-- nothing ready (only the transaction's own deletes) changes nothing and is
-- allowed there. (A table of its own: no other transaction's delete can be
-- ready.)
CREATE TABLE bt_ro (id int PRIMARY KEY, k bigint);
INSERT INTO bt_ro VALUES (1, 11), (2, 12);
SELECT cf_bind('bt_ro_k', 'bt_ro', 'k');
BEGIN;
WITH ins AS (INSERT INTO bt_ro VALUES (1, 13) ON CONFLICT (id) DO NOTHING RETURNING k)
SELECT (SELECT count(*) FROM ins) AS inserted, cf_bound_contains('bt_ro_k', 13::bigint) AS probe_sees;
DELETE FROM bt_ro WHERE id = 2;
SET TRANSACTION READ ONLY;
SELECT cf_apply_deletes('bt_ro_k') AS applied_read_only;
COMMIT;
SELECT count(*) AS rows_left FROM bt_ro;
SELECT pending_deletes AS row_and_unwritten_key FROM cuckoo_filters WHERE name = 'bt_ro_k';
SELECT cf_unbind('bt_ro_k');
DROP TABLE bt_ro;

-- cf_unbind drops the triggers and the filter; the table is untouched.
SELECT cf_unbind('bt2_k');
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'bt2'::regclass;
SELECT count(*) AS filters_left FROM cuckoo_filters WHERE name = 'bt2_k';
INSERT INTO bt2 VALUES (8);
SELECT cf_unbind('bt_k');
DROP VIEW bt_missing;
DROP TABLE bt, bt2, bt_pt, bt_ci_t, other_t;
DROP COLLATION bt_ci;
DROP ROLE bound_other;
SELECT count(*) FROM cuckoo_bindings;
