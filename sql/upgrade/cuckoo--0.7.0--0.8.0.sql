-- cuckoo 0.7.0 -> 0.8.0.
--
-- 0.8.0 adds set operations: cf_insert_new (insert if new, exactly once among
-- concurrent calls), cf_count of a key, and batched cf_insert, cf_delete and
-- cf_insert_new of an array of keys (for named filters one answer per
-- element; for values one copy of the value for all keys). So that a call with
-- an array resolves to the batched forms, the one-key cf_insert and cf_delete
-- now take anynonarray instead of anyelement, as cf_contains did in 0.4.0; a
-- key that is itself an array goes to the new cf_insert_key and cf_delete_key.
-- Stored cuckoofilter values and named filters are unchanged; durable filters'
-- WAL gains batch forms of the INSERT, REFUSED and DELETE records (a standby
-- must run 0.8.0's library before its primary does).
--
-- The one-key cf_insert and cf_delete keep their identity (their OID): their
-- argument type is changed in place in pg_proc, as no ALTER FUNCTION can, so
-- that views, functions and privileges that refer to them stay as they are.
-- The catalog after this script equals a fresh 0.8.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.8.0'" to load this file. \quit

-- First, a function that only 0.8.0's library has: while the server still runs
-- an older library (it is preloaded: restart after installing), the update
-- stops here with "could not find function", before anything changed.
CREATE FUNCTION cf_insert_new(name text, key anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_new_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- Stored calls (views, rules, defaults, policies, SQL-standard function
-- bodies) keep calling the same functions. One that passes an array-valued
-- key keeps adding it as one key, but its definition now reads as the batched
-- form: a dump and restore would turn it into a batched call.
DO $$
DECLARE
    n bigint;
BEGIN
    SELECT pg_catalog.count(DISTINCT (d.classid, d.objid)) INTO n FROM pg_catalog.pg_depend d
     WHERE d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype = 'n'
       AND d.refobjid IN ('@extschema@.cf_insert(@extschema@.cuckoofilter, pg_catalog.anyelement)'::pg_catalog.regprocedure,
                          '@extschema@.cf_delete(@extschema@.cuckoofilter, pg_catalog.anyelement)'::pg_catalog.regprocedure,
                          '@extschema@.cf_insert(pg_catalog.text, pg_catalog.anyelement)'::pg_catalog.regprocedure,
                          '@extschema@.cf_delete(pg_catalog.text, pg_catalog.anyelement)'::pg_catalog.regprocedure);
    IF n > 0 THEN
        RAISE WARNING '% stored object(s) call the one-key cf_insert or cf_delete', n
            USING DETAIL = 'They keep working. One that passes a key that is itself an array would become a batched call when dumped and restored.',
                  HINT = 'Rewrite such calls with cf_insert_key or cf_delete_key before the next dump.';
    END IF;
END $$;

UPDATE pg_catalog.pg_proc
   SET proargtypes = pg_catalog.format('%s %s', proargtypes[0], 'pg_catalog.anynonarray'::pg_catalog.regtype::pg_catalog.oid)::pg_catalog.oidvector
 WHERE oid IN ('@extschema@.cf_insert(@extschema@.cuckoofilter, pg_catalog.anyelement)'::pg_catalog.regprocedure,
               '@extschema@.cf_delete(@extschema@.cuckoofilter, pg_catalog.anyelement)'::pg_catalog.regprocedure,
               '@extschema@.cf_insert(pg_catalog.text, pg_catalog.anyelement)'::pg_catalog.regprocedure,
               '@extschema@.cf_delete(pg_catalog.text, pg_catalog.anyelement)'::pg_catalog.regprocedure);

-- 0.8.0: set operations. cf_insert and cf_delete take an array of keys too
-- (one answer per element, NULL for NULL; on a durable filter one WAL record
-- per 8,192 keys); the one-key forms take anynonarray, and cf_insert_key and
-- cf_delete_key take a key of any type, arrays included, as cf_contains_key
-- does. cf_insert_new adds a key only if the filter says it is absent
-- (exactly one of concurrent calls for a new key returns true); cf_count
-- counts a key's copies.
CREATE FUNCTION cf_insert(cuckoofilter, keys anyarray) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value_many' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_insert(cuckoofilter, anyarray) IS 'the filter with every non-null element of the array added (one copy of the value for all of them); an error if it becomes full';
CREATE FUNCTION cf_delete(cuckoofilter, keys anyarray) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value_many' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_delete(cuckoofilter, anyarray) IS 'the filter with one copy of each non-null element''s fingerprint removed, where there is one';
CREATE FUNCTION cf_insert_key(cuckoofilter, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_insert_key(cuckoofilter, anyelement) IS 'cf_insert of one key of any type, an array key included';
CREATE FUNCTION cf_delete_key(cuckoofilter, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_delete_key(cuckoofilter, anyelement) IS 'cf_delete of one key of any type, an array key included';
CREATE FUNCTION cf_count(cuckoofilter, key anynonarray) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_key_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_count(cuckoofilter, anynonarray) IS 'copies of the key''s fingerprint in the filter: at least the times it was inserted and not deleted (CF.COUNT)';
CREATE FUNCTION cf_count(cuckoofilter, key text) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_key_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count(cuckoofilter, key bpchar) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_key_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count(cuckoofilter, key name) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_key_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count_key(cuckoofilter, anyelement) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_key_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_count_key(cuckoofilter, anyelement) IS 'cf_count of one key of any type, an array key included';

CREATE FUNCTION cf_insert(name text, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_insert_named_many' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_insert(text, anyarray) IS 'cf_insert by name of every element of an array (a durable filter logs one WAL record per 8,192 keys); NULL for NULL elements';
CREATE FUNCTION cf_delete(name text, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_delete_named_many' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_delete(text, anyarray) IS 'cf_delete by name of every element of an array, in order; NULL for NULL elements';
CREATE FUNCTION cf_insert_key(name text, key anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_insert_key(text, anyelement) IS 'cf_insert by name of one key of any type, an array key included';
CREATE FUNCTION cf_delete_key(name text, key anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_delete_key(text, anyelement) IS 'cf_delete by name of one key of any type, an array key included';
COMMENT ON FUNCTION cf_insert_new(text, anynonarray) IS 'adds the key and returns true if the named filter says it is definitely absent; false, adding nothing, if it may be present (a false positive too) or the filter is full; of concurrent calls for a new key exactly one returns true';
CREATE FUNCTION cf_insert_new(name text, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_insert_new_named_many' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_insert_new(text, anyarray) IS 'cf_insert_new of every element of an array, in order (a key repeated in the array is new once); NULL for NULL elements';
CREATE FUNCTION cf_insert_new_key(name text, key anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_new_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_insert_new_key(text, anyelement) IS 'cf_insert_new of one key of any type, an array key included';
CREATE FUNCTION cf_insert_new(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_new_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_insert_new(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_new_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_insert_new(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_new_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_count(name text, key anynonarray) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_count(text, anynonarray) IS 'copies of the key''s fingerprint in the named filter: at least the times it was inserted and not deleted (CF.COUNT)';
CREATE FUNCTION cf_count(name text, key text) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count(name text, key bpchar) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count(name text, key name) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count_key(name text, key anyelement) RETURNS integer
    AS 'MODULE_PATHNAME', 'cf_count_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_count_key(text, anyelement) IS 'cf_count by name of one key of any type, an array key included';
