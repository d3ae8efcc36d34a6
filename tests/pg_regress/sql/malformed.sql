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

-- Mutations of a format-2 value (cf_agg over 50 keys: semi-sorted buckets) and
-- of a format-1 value written by 0.1.0 (the fixture below: cf_agg over 1..50 with
-- key 5 deleted and key 7 inserted twice more).
CREATE FUNCTION b64(v int, raw bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'cf' || v || ':' || translate(encode(raw, 'base64'), E'\n', '') $$;
CREATE TABLE good (v int, raw bytea);
INSERT INTO good SELECT 2, decode(substr(cf_agg(g)::text, 5), 'base64') FROM generate_series(1, 50) g;
INSERT INTO good SELECT 2, decode(substr(cf_agg(g, 0.0001)::text, 5), 'base64') FROM generate_series(1, 50) g;
INSERT INTO good VALUES (1, decode('Q0tPRgEBDAQEAAAAAAAAADEhb29rY3VjMwAAAAAAAAAf1dMAAAAAAJLzOaNpoQIAxiB+u6vvAgC3DKZyWsICALvbn7u7ygIA0BadAAAAAACd59xNfecCAMe4/d8JAAEAztBuSD9XAQAyMa7CDwAAAIWNOnPPhQQAYwIAAAAAAAApJYgAAAABAJEKPwAAAAEAqnNhl60jAQAAQidY15EAAA==', 'base64'));
SELECT v, length(raw) AS body_bytes, b64(v, raw)::cuckoofilter IS NOT NULL AS good_parses,
       cf_info(b64(v, raw)::cuckoofilter) ->> 'bucket_encoding' AS encoding,
       (cf_info(b64(v, raw)::cuckoofilter) ->> 'buckets')::int * (cf_info(b64(v, raw)::cuckoofilter) ->> 'bucket_size')::int AS slots
  FROM good ORDER BY v, length(raw);

CREATE TABLE candidates (why text, input text);
-- Every truncation, and every extension by trailing bytes.
INSERT INTO candidates SELECT v || ': truncated to ' || l, b64(v, substr(raw, 1, l)) FROM good, generate_series(0, length(raw) - 1) l;
INSERT INTO candidates SELECT v || ': plus ' || n || ' bytes', b64(v, raw || substr('\x0000000000000000ff'::bytea, 1, n)) FROM good, generate_series(1, 9) n;
-- Header fields set to wrong values; the header is 32 bytes in format 1, 48 in
-- format 2. The seed (bytes 16-23) may be anything, and format 2's capacity
-- (bytes 40-47) anything from 1 to the slot count (here 56 and 57), so only
-- out-of-range values of its low byte are candidates.
INSERT INTO candidates
  SELECT v || ': byte ' || pos || ' = ' || val, b64(v, set_byte(raw, pos, val))
  FROM good, generate_series(0, 47) pos, unnest(ARRAY[0, 1, 2, 3, 5, 7, 13, 16, 25, 33, 64, 127, 200, 255]) val
  WHERE (pos < 16 OR pos >= 24) AND pos < CASE v WHEN 1 THEN 32 ELSE 48 END AND get_byte(raw, pos) <> val
    AND NOT (v = 2 AND pos = 40 AND val BETWEEN 1 AND 56)
    -- Format 2's key type (kind at byte 10, OID at bytes 12-15; these values
    -- record integer keys): another built-in type with a hash function is a
    -- valid value for keys of that type.
    AND NOT (v = 2 AND pos BETWEEN 12 AND 15 AND EXISTS (
      SELECT 1 FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
       WHERE a.amname = 'hash' AND c.opcdefault AND c.opcintype::bigint < 16384
         AND c.opcintype::bigint = get_byte(set_byte(raw, pos, val), 12) + 256 * get_byte(set_byte(raw, pos, val), 13)
             + 65536 * get_byte(set_byte(raw, pos, val), 14) + 16777216::bigint * get_byte(set_byte(raw, pos, val), 15)));
-- The version byte swapped between formats, and a text prefix that does not match
-- the body's version.
INSERT INTO candidates SELECT v || ': version byte ' || (3 - v), b64(v, set_byte(raw, 4, 3 - v)) FROM good;
INSERT INTO candidates SELECT v || ': prefix cf' || (3 - v), b64(3 - v, raw) FROM good;
-- Format 2's padding bits after the last bucket and its 7 trailing bytes must be
-- zero; so must the unused high bits of a semi-sorted bucket's 12-bit prefix code
-- (codes 3876..4095 name no prefix tuple).
INSERT INTO candidates SELECT '2: last byte ' || val, b64(2, set_byte(raw, length(raw) - 1, val)) FROM good, unnest(ARRAY[1, 128]) val WHERE v = 2;
INSERT INTO candidates SELECT '2: prefix code 4095 in bucket 0', b64(2, set_byte(set_byte(raw, 48, 255), 49, get_byte(raw, 49) | 15)) FROM good WHERE v = 2 AND get_byte(raw, 9) = 2;
-- Random garbage of random lengths, with and without a valid-looking header.
SELECT setseed(0.42);
INSERT INTO candidates
  SELECT 'random ' || i, b64(2, decode(string_agg(lpad(to_hex((random() * 255)::int), 2, '0'), ''), 'hex'))
  FROM generate_series(1, 60) i, LATERAL generate_series(1, 1 + (i * 7) % 200) j GROUP BY i;
INSERT INTO candidates
  SELECT 'random body ' || i, b64(2, substr(raw, 1, 48) || decode(string_agg(lpad(to_hex((random() * 255)::int), 2, '0'), ''), 'hex'))
  FROM good, generate_series(1, 30) i, LATERAL generate_series(1, length(raw) - 48) j WHERE v = 2 GROUP BY i, raw;

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
SELECT v, cf_contains(b64(v, raw)::cuckoofilter, 7), cf_count(b64(v, raw)::cuckoofilter) FROM good ORDER BY v, length(raw);
