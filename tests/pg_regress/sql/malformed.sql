-- Malformed text input: every variant raises 22P02, none crashes the backend.
\set VERBOSITY terse
SELECT err($q$SELECT ''::cuckoofilter$q$);
SELECT err($q$SELECT 'cf1:'::cuckoofilter$q$);
SELECT err($q$SELECT 'cf2:AAAA'::cuckoofilter$q$);
SELECT err($q$SELECT 'CF1:AAAA'::cuckoofilter$q$);
SELECT err($q$SELECT 'cf1:!!!!'::cuckoofilter$q$);
SELECT err($q$SELECT 'cf1:AAA'::cuckoofilter$q$);
SELECT err($q$SELECT ' cf1:AAAA'::cuckoofilter$q$);
SELECT err($q$SELECT 'cf1:AAAA '::cuckoofilter$q$);
SELECT err($q$SELECT '{"buckets": []}'::cuckoofilter$q$);

CREATE FUNCTION b64(bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'cf1:' || translate(encode($1, 'base64'), E'\n', '') $$;
CREATE TABLE good AS SELECT decode(substr(cf_agg(g)::text, 5), 'base64') AS raw FROM generate_series(1, 50) g;
SELECT length(raw) AS body_bytes, b64(raw)::cuckoofilter IS NOT NULL AS good_parses FROM good;

CREATE TABLE candidates (why text, input text);
-- Every truncation, and every extension by trailing bytes.
INSERT INTO candidates SELECT 'truncated to ' || l, b64(substr(raw, 1, l)) FROM good, generate_series(0, length(raw) - 1) l;
INSERT INTO candidates SELECT 'plus ' || n || ' bytes', b64(raw || substr('\x0000000000000000ff'::bytea, 1, n)) FROM good, generate_series(1, 9) n;
-- Header fields set to wrong values (the seed, bytes 16-23, may be anything).
INSERT INTO candidates
  SELECT 'byte ' || pos || ' = ' || val, b64(set_byte(raw, pos, val))
  FROM good, generate_series(0, 31) pos, unnest(ARRAY[0, 1, 2, 3, 5, 7, 13, 16, 25, 33, 64, 127, 200, 255]) val
  WHERE (pos < 16 OR pos >= 24) AND get_byte(raw, pos) <> val;
-- Random garbage of random lengths.
SELECT setseed(0.42);
INSERT INTO candidates
  SELECT 'random ' || i, b64(decode(string_agg(lpad(to_hex((random() * 255)::int), 2, '0'), ''), 'hex'))
  FROM generate_series(1, 60) i, LATERAL generate_series(1, 1 + (i * 7) % 200) j GROUP BY i;

DO $$
DECLARE
  c record;
  total int := 0;
  rejected int := 0;
  accepted text[] := '{}';
BEGIN
  FOR c IN SELECT * FROM candidates LOOP
    total := total + 1;
    BEGIN
      PERFORM c.input::cuckoofilter;
      accepted := accepted || c.why;
    EXCEPTION WHEN invalid_text_representation THEN
      rejected := rejected + 1;
    END;
  END LOOP;
  RAISE NOTICE '% malformed inputs, % rejected with 22P02, accepted: %', total, rejected, accepted;
END $$;
-- The backend is alive and still answers correctly.
SELECT cf_contains(b64(raw)::cuckoofilter, 7), cf_count(b64(raw)::cuckoofilter) FROM good;
