-- Keys of any type with a default hash operator class.
\set VERBOSITY terse
CREATE TABLE ints AS SELECT cf_agg(g::int8) AS f8, cf_agg(g::int4) AS f4, cf_agg(g::int2) AS f2 FROM generate_series(1, 1000) g;
-- Equal integers match across widths, as in PostgreSQL's integer hash family:
-- the three filters differ only in the key type they record (header bytes
-- 10 to 15), which is blanked for the comparison.
CREATE FUNCTION untyped(f cuckoofilter) RETURNS bytea LANGUAGE sql AS
  $$ SELECT overlay(decode(substr(f::text, 5), 'base64') placing '\x000000000000'::bytea from 11 for 6) $$;
SELECT cf_contains(f8, 42::int4), cf_contains(f8, 42::int2), cf_contains(f4, 42::int8), cf_contains(f2, 42::int8),
       untyped(f8) = untyped(f4) AND untyped(f4) = untyped(f2) AS identical_filters,
       cf_info(f8) ->> 'key_type' AS t8, cf_info(f4) ->> 'key_type' AS t4, cf_info(f2) ->> 'key_type' AS t2 FROM ints;
DROP FUNCTION untyped(cuckoofilter);
SELECT count(*) FILTER (WHERE cf_contains(f8, g::int4)) AS members_found FROM ints, generate_series(1, 1000) g;

-- Strings: text and varchar agree; bytea and uuid have fast paths.
SELECT cf_contains(cf_agg(s), 'abc'::varchar), cf_contains(cf_agg(s::varchar), 'abc'::text), cf_contains(cf_agg(s), 'abd'::text)
  FROM (VALUES ('abc'::text), ('xyz')) v(s);
SELECT cf_contains(cf_agg(b), '\x0102'::bytea), cf_contains(cf_agg(b), '\x0103'::bytea) FROM (VALUES ('\x0102'::bytea)) v(b);
SELECT cf_contains(cf_agg(u), 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid),
       cf_contains(cf_agg(u), 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12'::uuid)
  FROM (VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)) v(u);
-- Long (toasted) strings.
SELECT cf_contains(cf_agg(s), repeat('x', 100000)), cf_contains(cf_agg(s), repeat('x', 99999))
  FROM (SELECT repeat('x', 100000) s) v;

-- Other types go through their own extended hash function: equality decides.
SELECT cf_contains(cf_agg(x), 1.5::float4) AS float_cross_width FROM (VALUES (1.5::float8)) v(x);
SELECT cf_contains(cf_agg(x), 1.50::numeric) AS numeric_scale_ignored FROM (VALUES (1.5::numeric)) v(x);
SELECT cf_contains(cf_agg(x), '2020-01-01'::date), cf_contains(cf_agg(x), '2020-01-02'::date) FROM (VALUES ('2020-01-01'::date)) v(x);
SELECT cf_contains(cf_agg(x), '2020-01-01 10:00+00'::timestamptz) FROM (VALUES ('2020-01-01 12:00+02'::timestamptz)) v(x);
SELECT cf_contains(cf_agg(x), 'a '::char(3)) AS bpchar_trailing_blanks FROM (VALUES ('a'::char(1))) v(x);
-- (cf_contains with an array probes its elements, which a filter of array
-- keys refuses; cf_contains_key probes one key of any type.)
SELECT cf_contains_key(cf_agg(x), ARRAY[1,2,3]), cf_contains_key(cf_agg(x), ARRAY[1,2]) FROM (VALUES (ARRAY[1,2,3])) v(x);
SELECT cf_contains(cf_agg(x), ARRAY[1,2,3]) FROM (VALUES (ARRAY[1,2,3])) v(x);
SELECT cf_contains(cf_agg(x), true), cf_contains(cf_agg(x), false) FROM (VALUES (true)) v(x);
CREATE DOMAIN positive_int AS int CHECK (VALUE > 0);
SELECT cf_contains(cf_agg(x), 7), cf_contains(cf_agg(7), 7::positive_int) FROM (VALUES (7::positive_int)) v(x);
-- Keys under a nondeterministic collation are refused (their equality is not byte
-- equality); a deterministic non-default collation hashes like any other.
CREATE COLLATION case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT err($q$SELECT cf_agg(s COLLATE case_insensitive) FROM (VALUES ('abc'::text)) v(s)$q$);
SELECT err($q$SELECT cf_contains(cf_agg(s), 'abc'::text COLLATE case_insensitive) FROM (VALUES ('abc'::text)) v(s)$q$);
SELECT cf_contains(cf_agg(s COLLATE "C"), 'abc'::text COLLATE "POSIX") FROM (VALUES ('abc'::text)) v(s);

-- A type without a hash operator class cannot be a key.
SELECT err($q$SELECT cf_contains(cf_empty(10, 0.01), point(1, 2))$q$);
SELECT err($q$SELECT cf_agg(x) FROM (VALUES (point(1, 2))) v(x)$q$);
