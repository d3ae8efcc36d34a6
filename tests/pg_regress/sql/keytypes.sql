-- Filters that know their key type: a matrix of key types × probe types, for
-- values and for named filters. Each filter holds one key; each probe is a
-- value of some type, equal to that key or not. For every pair the result is
-- what cuckoo answers (t, f, or the SQLSTATE of its error) next to what
-- PostgreSQL's own `=` says (t, f, or "-" when the two types do not compare).
-- No pair may answer f where PostgreSQL says t: that would be a false negative.
\set VERBOSITY terse
CREATE TYPE kt_mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN kt_positive AS int CHECK (VALUE > 0);
CREATE TABLE kt_keys (key_type text, key text);
INSERT INTO kt_keys VALUES
  ('int2', '42::int2'), ('int4', '42::int4'), ('int8', '42::int8'), ('numeric', '42::numeric'),
  ('float8', '42::float8'), ('text', '''42''::text'), ('varchar', '''42''::varchar'),
  ('char(4)', '''42''::char(4)'), ('name', '''42''::name'), ('uuid', '''00000000-0000-0000-0000-000000000042''::uuid'),
  ('date', '''2020-01-02''::date'), ('timestamp', '''2020-01-02''::timestamp'), ('kt_mood', '''ok''::kt_mood'),
  ('kt_positive', '42::kt_positive'), ('int4[]', 'ARRAY[4, 2]'), ('bool', 'true');
CREATE TABLE kt_probes (probe text);
INSERT INTO kt_probes VALUES
  ('42::int2'), ('42::int4'), ('42::int8'), ('43::int8'), ('42::numeric'), ('42.5::numeric'), ('42::float8'),
  ('42.5::float8'), ('''42''::text'), ('''042''::text'), ('''ok''::text'), ('''x''::text'), ('''42''::varchar'),
  ('''42 ''::char(4)'), ('''42''::name'), ('''00000000-0000-0000-0000-000000000042''::uuid'),
  ('''2020-01-02''::date'), ('''2020-01-02''::timestamp'), ('''2020-01-02 00:00:01''::timestamp'),
  ('''ok''::kt_mood'), ('''happy''::kt_mood'), ('42::kt_positive'), ('ARRAY[4, 2]'), ('true');
CREATE TABLE kt_results (form text, key_type text, probe text, cuckoo text, pg_equal text);
CREATE TABLE kt_recorded (key_type text, value_records text, named_records text);
DO $$
DECLARE
  k record;
  p record;
  answer text;
  equal text;
BEGIN
  FOR k IN SELECT * FROM kt_keys LOOP
    EXECUTE format('CREATE TEMP TABLE kt_f AS SELECT cf_agg(%s) AS f', k.key);
    EXECUTE format('SELECT cf_drop(''kt_named'')');
    EXECUTE format('SELECT cf_create(''kt_named'', 100, durable => false)');
    EXECUTE format('SELECT cf_insert_key(''kt_named'', %s)', k.key);
    INSERT INTO kt_recorded SELECT k.key_type, (SELECT cf_info(f) ->> 'key_type' FROM kt_f),
      (SELECT key_type FROM cuckoo_filters WHERE name = 'kt_named');
    FOR p IN SELECT * FROM kt_probes LOOP
      BEGIN
        EXECUTE format('SELECT (%s = %s)::text', k.key, p.probe) INTO equal;
      EXCEPTION WHEN OTHERS THEN
        equal := '-';
      END;
      BEGIN
        EXECUTE format('SELECT cf_contains_key(f, %s)::text FROM kt_f', p.probe) INTO answer;
      EXCEPTION WHEN OTHERS THEN
        answer := SQLSTATE;
      END;
      INSERT INTO kt_results VALUES ('value', k.key_type, p.probe, answer, equal);
      BEGIN
        EXECUTE format('SELECT cf_contains_key(''kt_named'', %s)::text', p.probe) INTO answer;
      EXCEPTION WHEN OTHERS THEN
        answer := SQLSTATE;
      END;
      INSERT INTO kt_results VALUES ('named', k.key_type, p.probe, answer, equal);
    END LOOP;
    DROP TABLE kt_f;
  END LOOP;
  PERFORM cf_drop('kt_named');
END
$$;
-- Every key type records itself (a domain its base type, varchar text); a
-- named filter created without one takes its first insert's.
SELECT * FROM kt_recorded ORDER BY key_type;
-- The matrix: values and named filters answer alike.
SELECT key_type, probe, cuckoo, pg_equal FROM kt_results WHERE form = 'value' ORDER BY key_type, probe;
SELECT count(*) AS named_differs FROM kt_results v JOIN kt_results n USING (key_type, probe)
 WHERE v.form = 'value' AND n.form = 'named' AND v.cuckoo <> n.cuckoo;
-- The promise: no false negative, for any pair.
SELECT count(*) AS false_negatives FROM kt_results WHERE pg_equal = 'true' AND cuckoo = 'false';
DROP TABLE kt_results, kt_recorded, kt_probes, kt_keys;
DROP DOMAIN kt_positive;
DROP TYPE kt_mood;
