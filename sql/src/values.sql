-- The current version's SQL: the cuckoofilter value type and the functions over
-- values (src/sql/value/datatype.rs and functions.rs; the batched forms in
-- src/sql/batch.rs, the planner support function in src/sql/planner.rs).
-- src/lib.rs joins the files of sql/src/ into the install script of the current
-- version, cuckoo--<version>.sql, in this order: values, aggregates, sharded,
-- named, saved, views, citus; each file may use what the files before it
-- declare. The install scripts of earlier releases are frozen in sql/install/,
-- the update scripts are in sql/upgrade/ (docs/upgrading.md).
-- Functions are version-1 C functions; everything is immutable, strict and
-- parallel safe unless a comment says why not.
-- Joined into cuckoo--<version>.sql first, before aggregates.sql (src/lib.rs).

CREATE TYPE cuckoofilter;

CREATE FUNCTION cuckoofilter_in(cstring) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cuckoofilter_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoofilter_out(cuckoofilter) RETURNS cstring
    AS 'MODULE_PATHNAME', 'cuckoofilter_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoofilter_recv(internal) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cuckoofilter_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoofilter_send(cuckoofilter) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cuckoofilter_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Filter bits do not compress: storage external keeps values uncompressed (and
-- out of line when large), so a probe reads them in place after one fetch.
-- Alignment double makes the bucket words 8-aligned inside tuples.
CREATE TYPE cuckoofilter (
    INPUT = cuckoofilter_in,
    OUTPUT = cuckoofilter_out,
    RECEIVE = cuckoofilter_recv,
    SEND = cuckoofilter_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = double,
    STORAGE = external
);
COMMENT ON TYPE cuckoofilter IS 'a cuckoo filter: approximate set membership with deletion, no false negatives';

-- The planner support function of every cf_contains: row estimates from the
-- filter probing the key column's statistics, and the probe's cost.
CREATE FUNCTION cf_contains_support(internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_contains_support' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- One key (anynonarray), or many at once (anyarray: one answer per element,
-- NULL for a NULL key, in the array's shape).
CREATE FUNCTION cf_contains(cuckoofilter, anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(cuckoofilter, anynonarray) IS 'false: the key is definitely absent; true: it may be present';
CREATE FUNCTION cf_contains(cuckoofilter, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_value_many' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(cuckoofilter, anyarray) IS 'cf_contains for every element of an array at once (batched, prefetching lookups); NULL for NULL elements';
-- cf_contains_key: the one-key probe for a key of any type, arrays included
-- (cf_contains with an array probes its elements).
CREATE FUNCTION cf_contains_key(cuckoofilter, anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_key(cuckoofilter, anyelement) IS 'cf_contains for one key of any type, an array key included: false: definitely absent; true: may be present';

CREATE FUNCTION cf_insert(cuckoofilter, anynonarray) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, anynonarray) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- An untyped key (a client's parameter, a string literal) resolves to these
-- text overloads: it is read with the filter's key type's input function (a
-- value that records none hashes it as text, as before). A typed key of
-- another string type reaches them through its implicit cast and is hashed as
-- its own type.
CREATE FUNCTION cf_contains(cuckoofilter, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(cuckoofilter, text) IS 'false: the key is definitely absent; true: it may be present (text is read as the filter''s key type)';
-- Many keys at once from a client: an untyped array parameter (what drivers send)
-- resolves to text[] here (anycompatiblearray), a typed one keeps its type;
-- cf_contains(f, $1) cannot return an array for an untyped $1.
CREATE FUNCTION cf_contains_each(cuckoofilter, keys anycompatiblearray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_value_many' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_each(cuckoofilter, anycompatiblearray) IS 'cf_contains for every element of an array, also an untyped one (read as the filter''s key type); NULL for NULL elements';
CREATE FUNCTION cf_insert(cuckoofilter, key text) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, key text) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- Typed keys of the string types that cast to text implicitly get exact
-- overloads, so that they keep their own type (a constant would otherwise be
-- folded into text before cuckoo sees the cast).
CREATE FUNCTION cf_contains(cuckoofilter, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_contains(cuckoofilter, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_insert(cuckoofilter, key bpchar) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_insert(cuckoofilter, key name) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_insert_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, key bpchar) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_delete(cuckoofilter, key name) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_delete_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_union(cuckoofilter, cuckoofilter) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_union_value' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_empty(capacity bigint, fpp float8) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_empty' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_empty(capacity bigint, fpp float8, key_type regtype) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_empty' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_count(cuckoofilter) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cf_count' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoo_library_version() RETURNS text
    AS 'MODULE_PATHNAME', 'cuckoo_library_version' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cuckoo_library_version() IS 'the version of the cuckoo shared library this session runs (the preloaded library changes at a server restart)';
CREATE FUNCTION cf_info(cuckoofilter) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cf_info' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- 0.8.0: set operations on values. cf_insert and cf_delete take an array of
-- keys too; the one-key forms take anynonarray, and cf_insert_key and
-- cf_delete_key take a key of any type, arrays included, as cf_contains_key
-- does; cf_count counts a key's copies.
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
