-- The cuckoo extension's SQL surface for cuckoofilter values. Functions are
-- version-1 C functions (src/sql/); everything is immutable, strict and parallel
-- safe unless a comment says why not.

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

-- cf_agg: the state is a list of key hashes (internal). Transition, combine and
-- final functions are not strict: they create the state on the first row and
-- skip NULL keys. They are immutable and parallel safe; they refuse to run outside
-- an aggregate.
CREATE FUNCTION cf_agg_trans(internal, anyelement) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_trans(internal, anyelement, float8) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_trans(internal, anyelement, float8, bigint) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_serial(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_agg_serial' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_agg_deserial(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'cf_agg_deserial' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
-- The final functions the aggregates call: their arguments after the state
-- (always NULL, FINALFUNC_EXTRA) name the key's type, which the filter
-- records also where no row and no Aggref says it (a window frame with no
-- rows). cf_agg_final(internal) stays, for aggregates made with it.
CREATE FUNCTION cf_agg_final(internal, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal, anyelement, float8) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_agg_final(internal, anyelement, float8, bigint) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cf_agg(anyelement) (
    SFUNC = cf_agg_trans,
    STYPE = internal,
    FINALFUNC = cf_agg_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_agg_combine,
    SERIALFUNC = cf_agg_serial,
    DESERIALFUNC = cf_agg_deserial,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_agg(anyelement) IS 'a cuckoo filter of the distinct non-null keys, sized for them, false-positive rate at most 0.2%';

CREATE AGGREGATE cf_agg(anyelement, float8) (
    SFUNC = cf_agg_trans,
    STYPE = internal,
    FINALFUNC = cf_agg_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_agg_combine,
    SERIALFUNC = cf_agg_serial,
    DESERIALFUNC = cf_agg_deserial,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_agg(anyelement, float8) IS 'a cuckoo filter of the distinct non-null keys with the given false-positive rate';

-- Sized for at least `capacity` keys: filters built for the same capacity and fpp
-- have the same shape, so their union (cf_union, cf_union_agg) has room for all.
CREATE AGGREGATE cf_agg(anyelement, fpp float8, capacity bigint) (
    SFUNC = cf_agg_trans,
    STYPE = internal,
    FINALFUNC = cf_agg_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_agg_combine,
    SERIALFUNC = cf_agg_serial,
    DESERIALFUNC = cf_agg_deserial,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_agg(anyelement, float8, bigint) IS 'a cuckoo filter of the distinct non-null keys, sized for at least capacity keys';

CREATE FUNCTION cf_union_trans(cuckoofilter, cuckoofilter) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_union_trans' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE cf_union_agg(cuckoofilter) (
    SFUNC = cf_union_trans,
    STYPE = cuckoofilter,
    COMBINEFUNC = cf_union_trans,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_union_agg(cuckoofilter) IS 'the union of non-null filters of one shape (built with the same capacity and fpp)';

-- cf_sharded_state: cf_sharded_agg's state, the keys' hashes (and the rows'
-- fpp and capacity). In memory it grows in place; its text and binary forms,
-- which engines such as Citus ship between nodes, hold each distinct hash once,
-- sorted and Rice-coded ("cs1:" and base64; src/sql/value/sharded.rs).
CREATE TYPE cf_sharded_state;
CREATE FUNCTION cf_sharded_state_in(cstring) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_state_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_out(cf_sharded_state) RETURNS cstring
    AS 'MODULE_PATHNAME', 'cf_sharded_state_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_recv(internal) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_state_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_send(cf_sharded_state) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_state_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE cf_sharded_state (
    INPUT = cf_sharded_state_in,
    OUTPUT = cf_sharded_state_out,
    RECEIVE = cf_sharded_state_recv,
    SEND = cf_sharded_state_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = double,
    STORAGE = extended
);
COMMENT ON TYPE cf_sharded_state IS 'the partial state of cf_sharded_agg: the distinct key hashes, shipped between nodes in a dense form';

-- cf_sharded_agg: cf_agg with a cf_sharded_state state (the keys' hashes) and a
-- combine function, for engines that ship partial aggregate states between nodes but
-- cannot ship internal ones (Citus). The result equals cf_agg's for the same
-- arguments. Transition and combine are not strict (they create the state on the
-- first row and skip NULL keys); called by an aggregate they extend the state in
-- place, called otherwise they return a new one. The functions over bytea are
-- the state functions of 0.5.0 to 0.8.0, kept for states those releases made.
CREATE FUNCTION cf_sharded_trans(bytea, anyelement) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, anyelement) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, anyelement, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, anyelement, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, anyelement, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, anyelement, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_combine(bytea, bytea) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_combine(cf_sharded_state, cf_sharded_state) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_final(bytea) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
-- The final functions the aggregates call (FINALFUNC_EXTRA, as cf_agg's).
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state, anyelement, float8) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_final(cf_sharded_state, anyelement, float8, bigint) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cf_sharded_agg(anyelement) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(anyelement) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(anyelement, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(anyelement, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(anyelement, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(anyelement, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
-- The same for keys of these types, declared exactly: Citus runs an aggregate on
-- its workers only when the declared argument types equal the arguments' (a
-- polymorphic declaration never does), and calls the transition function
-- without a call expression, so the key's type comes from the declaration.
CREATE FUNCTION cf_sharded_trans(bytea, smallint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, smallint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, smallint, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, smallint, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, smallint, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, smallint, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, integer) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, integer) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, integer, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, integer, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, integer, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, integer, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, bigint, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, bigint, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, bigint, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, bigint, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, text) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, text) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, text, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, text, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, text, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, text, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, uuid) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, uuid) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, uuid, float8) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, uuid, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_trans(bytea, uuid, float8, bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, uuid, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
-- char(n) and name keys have their own declarations too: given to the text
-- one, they are cast to text (cf_agg hashes and records them as their own
-- types, and so does cf_sharded_agg).
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, character) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, character, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, character, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, name) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, name, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, name, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, "char") RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, "char", float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_state_trans(cf_sharded_state, "char", float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_trans' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cf_sharded_agg(smallint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(smallint) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(smallint, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(smallint, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(smallint, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(smallint, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(integer) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(integer) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(integer, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(integer, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(integer, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(integer, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(bigint) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(bigint, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(bigint, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(bigint, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(bigint, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(text) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(text) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(text, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(text, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(text, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(text, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(uuid) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(uuid) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(uuid, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(uuid, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(uuid, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(uuid, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(character) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(character) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(character, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(character, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(character, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(character, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(name) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(name) IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(name, float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(name, float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg(name, fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(name, float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
-- A "char" key would be ambiguous among the text, char(n) and name
-- declarations; cf_agg takes it as its own type, and so does this one.
CREATE AGGREGATE cf_sharded_agg("char") (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg("char") IS 'cf_agg with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg("char", float8) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg("char", float8) IS 'cf_agg(key, fpp) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';
CREATE AGGREGATE cf_sharded_agg("char", fpp float8, capacity bigint) (
    SFUNC = cf_sharded_state_trans,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg("char", float8, bigint) IS 'cf_agg(key, fpp, capacity) with a compact state (cf_sharded_state) and a combine function, for engines that combine partial states across nodes (Citus)';

-- cf_sharded_agg of keys of any type through one declaration that Citus can run
-- on its workers: cf_sharded_agg(cf_sharded_key(key)). On a cluster with Citus,
-- cuckoo's planner hook rewrites cf_sharded_agg(key) so for key types that have
-- no cf_sharded_agg of their own (src/sql/value/rewrite.rs).
CREATE FUNCTION cf_sharded_key(anyelement) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_key(anyelement, float8) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cf_sharded_key(anyelement, float8, bigint) RETURNS cf_sharded_state
    AS 'MODULE_PATHNAME', 'cf_sharded_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cf_sharded_key(anyelement) IS 'the cf_sharded_agg state of one key';
COMMENT ON FUNCTION cf_sharded_key(anyelement, float8) IS 'the cf_sharded_agg state of one key and an fpp';
COMMENT ON FUNCTION cf_sharded_key(anyelement, float8, bigint) IS 'the cf_sharded_agg state of one key, an fpp and a capacity';
CREATE AGGREGATE cf_sharded_agg(cf_sharded_state) (
    SFUNC = cf_sharded_state_combine,
    STYPE = cf_sharded_state,
    SSPACE = 200,
    FINALFUNC = cf_sharded_state_final,
    FINALFUNC_EXTRA,
    COMBINEFUNC = cf_sharded_state_combine,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE cf_sharded_agg(cf_sharded_state) IS 'the filter of the keys of cf_sharded_agg states (cf_sharded_key of each key, or partial states)';
-- On Citus, cuckoo's planner hook wraps every cf_sharded_agg call in
-- cf_sharded_typed(call, NULL::key type): with no rows the coordinator calls
-- the final function where the key's type is not in sight, and the empty
-- filter takes the key type cf_agg records (src/sql/value/rewrite.rs).
CREATE FUNCTION cf_sharded_typed(cuckoofilter, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_typed' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cf_sharded_typed(cuckoofilter, anyelement) IS 'the filter; one of no keys that records no key type records the type of the second argument (cf_sharded_agg on Citus over no rows)';

-- Named filters in shared memory (needs shared_preload_libraries = 'cuckoo').
-- They are not transactional: a change is visible to every session at once and
-- is not undone by ROLLBACK (like nextval). Durable filters (the default) are
-- WAL-logged: they survive restarts and crashes and are replayed on standbys.
-- Functions that read or change a filter are volatile (other sessions change it
-- during a statement); lookups are parallel safe (lock-free, from any process);
-- inserts and deletes are parallel unsafe, since a durable change assigns the
-- transaction an ID as nextval does; create, drop, publish and grants take the
-- registry lock.
CREATE FUNCTION cf_create(name text, capacity bigint, fpp float8 DEFAULT 0.002, durable boolean DEFAULT true, key_type regtype DEFAULT NULL, expansion integer DEFAULT 2) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_create' LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_create(text, bigint, float8, boolean, regtype, integer) IS 'creates an empty named filter in shared memory for capacity keys of type key_type at false-positive rate fpp; when full it adds a table expansion times larger, keeping the rate (expansion 0: a fixed size); durable filters are WAL-logged and survive restarts, crashes and failover';
CREATE FUNCTION cf_drop(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_drop' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_drop(text) IS 'drops a named filter; false if it does not exist';
CREATE FUNCTION cf_insert(name text, key anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_insert(text, anynonarray) IS 'adds a key to a named filter; false (and nothing lost) when it is full';
CREATE FUNCTION cf_contains(name text, key anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(text, anynonarray) IS 'false: the key is definitely not in the named filter; true: it may be';
CREATE FUNCTION cf_contains(name text, keys anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_named_many' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(text, anyarray) IS 'cf_contains by name for every element of an array at once; NULL for NULL elements';
CREATE FUNCTION cf_contains_key(name text, key anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_key(text, anyelement) IS 'cf_contains by name for one key of any type, an array key included';
CREATE FUNCTION cf_delete(name text, key anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- Untyped keys by name: read as the filter's key type (see the value overloads).
CREATE FUNCTION cf_contains_each(name text, keys anycompatiblearray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'cf_contains_named_many' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains_each(text, anycompatiblearray) IS 'cf_contains by name for every element of an array, also an untyped one (read as the filter''s key type); NULL for NULL elements';
CREATE FUNCTION cf_contains(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_contains(text, text) IS 'false: the key is definitely not in the named filter; true: it may be (text is read as the filter''s key type)';
CREATE FUNCTION cf_insert(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_delete(name text, key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- Typed bpchar and name keys by name keep their own type (see the values').
CREATE FUNCTION cf_contains(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_contains(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_contains_named' LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
CREATE FUNCTION cf_insert(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_insert(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_delete(name text, key bpchar) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_delete(name text, key name) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_delete_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_delete(text, anynonarray) IS 'removes one copy of the key''s fingerprint from a named filter; false if there is none';
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
CREATE FUNCTION cf_insert_new(name text, key anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_insert_new_named' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
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
CREATE FUNCTION cf_publish(name text, f cuckoofilter, durable boolean DEFAULT true) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_publish' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_publish(text, cuckoofilter, boolean) IS 'creates a named filter as a copy of a value, or replaces its contents atomically; durable filters are WAL-logged';
CREATE FUNCTION cf_snapshot(name text) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_snapshot' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_snapshot(text) IS 'a cuckoofilter value holding every key the named filter held throughout the call';
CREATE FUNCTION cf_grant_lookup(name text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_grant_lookup' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_grant_lookup(text, text) IS 'lets a role (and its members), or public, look up and snapshot a named filter; replaces the previous grant';
CREATE FUNCTION cf_revoke_lookup(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_revoke_lookup' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_revoke_lookup(text) IS 'withdraws the lookup grant of a named filter';

-- Named filters saved into a table, which pg_dump and pg_upgrade carry (the
-- filters themselves live in shared memory and in cuckoo/ in the data
-- directory, which neither carries): cf_save() before, cf_restore_saved()
-- after. Superusers only: a saved filter is published back under its
-- owner's name.
CREATE TABLE cuckoo_saved_filters (
    name text PRIMARY KEY,
    filter cuckoofilter NOT NULL,
    owner text NOT NULL,
    lookup_grantee text,
    durable boolean NOT NULL DEFAULT true,
    saved_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cuckoo_saved_filters IS 'named filters saved by cf_save() (each a snapshot, with its owner and lookup grant), which pg_dump and pg_upgrade carry; cf_restore_saved() publishes them again';

-- The rows of the three views below, from shared memory (src/sql/named/view.rs):
-- set-returning C functions, volatile (other sessions change the filters),
-- strict and parallel safe.
CREATE FUNCTION cuckoo_filters_rows() RETURNS TABLE (
    name text,
    capacity bigint,
    items bigint,
    load_factor double precision,
    bytes bigint,
    fpp double precision,
    inserts bigint,
    lookups bigint,
    deletes bigint,
    failed_inserts bigint,
    lookup_retries bigint,
    kicks bigint,
    owner text,
    lookup_grantee text,
    durable boolean,
    state text,
    reason text,
    checkpoint_write_bytes bigint,
    checkpoint_wal_bytes bigint,
    disk_bytes bigint,
    key_type text,
    expansion integer,
    tables integer
)   AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoo_region_rows() RETURNS TABLE (
    size_bytes bigint,
    filter_bytes bigint,
    free_bytes bigint,
    largest_free_bytes bigint,
    releasing_bytes bigint,
    filters integer,
    max_filters integer
)   AS 'MODULE_PATHNAME', 'cuckoo_region_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION cuckoo_usage_rows() RETURNS TABLE (
    role text,
    database text,
    filters bigint,
    bytes bigint,
    max_filters_per_role bigint,
    max_bytes_per_role bigint,
    max_filters_per_database bigint,
    max_bytes_per_database bigint
)   AS 'MODULE_PATHNAME', 'cuckoo_usage_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- The current database's named filters that the current role may look up;
-- and, as needing a reload, those saved by cf_save() that are not in shared
-- memory (after pg_upgrade, or a restore of a dump), for their owners.
CREATE VIEW cuckoo_filters AS
    SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
           failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason,
           checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes, key_type, expansion, tables
    FROM cuckoo_filters_rows()
    UNION ALL
    SELECT s.name, (s.info ->> 'capacity')::bigint, 0::bigint, 0::float8, 0::bigint,
           (s.info ->> 'fpp')::float8, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
           s.owner, s.lookup_grantee, s.durable, 'needs reload',
           pg_catalog.format('it is not in shared memory; a copy saved at %s is in cuckoo_saved_filters: restore it with SELECT cf_restore_saved(%L)', s.saved_at, s.name),
           NULL::bigint, NULL::bigint, NULL::bigint, s.info ->> 'key_type', NULL::integer, (s.info ->> 'tables')::integer
    FROM (SELECT v.*, cf_info(v.filter) AS info FROM cuckoo_saved_filters v
          WHERE v.name NOT IN (SELECT f.name FROM cuckoo_filters_rows() f)
            AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v.owner AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'))
          OFFSET 0) s;
GRANT SELECT ON cuckoo_filters TO PUBLIC;
COMMENT ON VIEW cuckoo_filters IS 'named cuckoo filters of this database visible to the current role, with usage counters; saved copies not in shared memory as needing a reload';

-- cf_save(name): copies the named filter (every durable filter of the
-- database, without a name) into cuckoo_saved_filters; returns how many.
CREATE FUNCTION cf_save(name text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    f record;
    n integer := 0;
BEGIN
    FOR f IN SELECT c.name, c.owner, c.lookup_grantee, c.durable, c.state, c.reason FROM @extschema@.cuckoo_filters_rows() c
              WHERE (cf_save.name IS NULL AND c.durable OR c.name = cf_save.name) ORDER BY c.name
    LOOP
        IF cf_save.name IS NULL AND f.state <> 'ready' THEN
            RAISE WARNING 'cuckoo: filter "%" is not saved: it needs a reload (%)', f.name, f.reason;
            CONTINUE;
        END IF;
        BEGIN
            INSERT INTO @extschema@.cuckoo_saved_filters AS s (name, filter, owner, lookup_grantee, durable)
                VALUES (f.name, @extschema@.cf_snapshot(f.name), f.owner, f.lookup_grantee, f.durable)
                ON CONFLICT ON CONSTRAINT cuckoo_saved_filters_pkey DO UPDATE
                SET filter = excluded.filter, owner = excluded.owner, lookup_grantee = excluded.lookup_grantee,
                    durable = excluded.durable, saved_at = now();
            n := n + 1;
        EXCEPTION WHEN undefined_object THEN
            -- Dropped since it was listed.
            IF cf_save.name IS NOT NULL THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    IF n = 0 AND cf_save.name IS NOT NULL THEN
        RAISE EXCEPTION 'cuckoo filter "%" does not exist', cf_save.name USING ERRCODE = 'undefined_object';
    END IF;
    RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION cf_save(text) FROM PUBLIC;
COMMENT ON FUNCTION cf_save(text) IS 'saves the named filter (without a name: every durable filter of the database) into cuckoo_saved_filters, which pg_dump and pg_upgrade carry';

-- cf_restore_saved(name): publishes the saved copies (all without a name)
-- whose filter is not in shared memory, or needs a reload, under their
-- owner's name and with their lookup grant, and deletes the rows restored;
-- returns how many. A name taken meanwhile by a filter that is ready is left
-- alone, with a warning (drop it first to restore the saved copy).
CREATE FUNCTION cf_restore_saved(name text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    s record;
    taken record;
    n integer := 0;
BEGIN
    FOR s IN SELECT * FROM @extschema@.cuckoo_saved_filters v
              WHERE (cf_restore_saved.name IS NULL OR v.name = cf_restore_saved.name)
              ORDER BY v.name
    LOOP
        SELECT c.owner, c.state INTO taken FROM @extschema@.cuckoo_filters_rows() c WHERE c.name = s.name;
        IF FOUND AND taken.state = 'ready' THEN
            RAISE WARNING 'cuckoo: saved filter "%" is not restored: a filter of that name (owner %) is in shared memory', s.name, taken.owner
                USING HINT = 'Drop it first (cf_drop) to restore the saved copy, or delete the row from cuckoo_saved_filters.';
            CONTINUE;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = s.owner) THEN
            PERFORM set_config('role', s.owner, true);
        ELSE
            RAISE WARNING 'cuckoo: the owner "%" of saved filter "%" does not exist; it is restored as the current user''s', s.owner, s.name;
        END IF;
        PERFORM @extschema@.cf_publish(s.name, s.filter, s.durable);
        IF s.lookup_grantee IS NOT NULL THEN
            PERFORM @extschema@.cf_grant_lookup(s.name, s.lookup_grantee);
        END IF;
        RESET ROLE;
        DELETE FROM @extschema@.cuckoo_saved_filters v WHERE v.name = s.name;
        n := n + 1;
    END LOOP;
    IF n = 0 AND cf_restore_saved.name IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM @extschema@.cuckoo_saved_filters v WHERE v.name = cf_restore_saved.name) THEN
        RAISE EXCEPTION 'no saved copy of cuckoo filter "%"', cf_restore_saved.name USING ERRCODE = 'undefined_object';
    END IF;
    RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION cf_restore_saved(text) FROM PUBLIC;
COMMENT ON FUNCTION cf_restore_saved(text) IS 'publishes the filters saved by cf_save that are not in shared memory (or need a reload), under their owners and with their lookup grants, and deletes the rows restored';

-- The shared region (cuckoo.shared_memory): its size and the room left for
-- filters and the tables growing filters add.
CREATE VIEW cuckoo_region AS
    SELECT size_bytes, filter_bytes, free_bytes, largest_free_bytes, releasing_bytes, filters, max_filters
    FROM cuckoo_region_rows();
GRANT SELECT ON cuckoo_region TO PUBLIC;
COMMENT ON VIEW cuckoo_region IS 'the shared memory region of named cuckoo filters: its size, free space and filter entries';

-- What each role owns in each database of the cluster (the region serves
-- them all; filters of dropped databases are left out): filters and region
-- bytes, every table included; a superuser sees every role, others the roles
-- whose privileges they have (and a row of their own for this database even
-- without filters); with the caps
-- (cuckoo.max_filters_per_role, cuckoo.max_bytes_per_role,
-- cuckoo.max_filters_per_database, cuckoo.max_bytes_per_database) in effect
-- in this session, NULL for none.
CREATE VIEW cuckoo_usage AS
    SELECT role, database, filters, bytes, max_filters_per_role, max_bytes_per_role,
           max_filters_per_database, max_bytes_per_database
    FROM cuckoo_usage_rows();
GRANT SELECT ON cuckoo_usage TO PUBLIC;
COMMENT ON VIEW cuckoo_usage IS 'named cuckoo filters and shared memory bytes each role owns in each database (of the roles whose privileges the current role has: its own, those it is a member of, every role for a superuser), with the caps per role and per database in effect in this session (NULL: none)';

-- Named filters on a Citus cluster (src/sql/named/citus.rs). In a backend that
-- runs part of a distributed query for another node, a by-name call may use
-- this node's filter only if this table lists it: 'cluster', this node's copy
-- of the value cf_publish_cluster() last published to every node (lookups
-- only; version: the publish, copy: which filter in this node's shared memory
-- it is), or 'node', declared by cf_node_local() to hold the keys of this
-- node's own shards. Every node has its own rows, written only through the
-- functions below, which check the caller's right on the name (owner: the
-- role that listed it).
CREATE TABLE cuckoo_cluster_filters (
    name text PRIMARY KEY,
    scope text NOT NULL CHECK (scope IN ('cluster', 'node')),
    digest text,
    set_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((scope = 'cluster') = (digest IS NOT NULL)),
    version bigint,
    copy text,
    owner regrole,
    CONSTRAINT cuckoo_cluster_filters_copy_check CHECK ((scope = 'cluster') = (version IS NOT NULL AND copy IS NOT NULL))
);
SELECT pg_catalog.pg_extension_config_dump('cuckoo_cluster_filters', '');
-- (cuckoo_saved_filters, above, is dumped too; registered after this one, as
-- the update from 0.9.0 registers it.)
SELECT pg_catalog.pg_extension_config_dump('cuckoo_saved_filters', '');
-- Everyone may read it but the digests (an md5 of a small filter tells its
-- keys to whoever tries them all). (The revoke, which takes nothing here,
-- gives the table the privileges the update from 0.11.0 leaves it.)
REVOKE SELECT ON cuckoo_cluster_filters FROM PUBLIC;
GRANT SELECT (name, scope, set_at, version, copy, owner) ON cuckoo_cluster_filters TO PUBLIC;
COMMENT ON TABLE cuckoo_cluster_filters IS 'named filters that distributed queries may use on this node: cluster copies (cf_publish_cluster) and node-local filters (cf_node_local)';

-- The cluster's record of each cluster copy: the publish (version) every
-- node's copy must be. cf_publish_cluster() makes it a Citus reference table
-- on first use, so that every node reads the same rows, and writes it in the
-- publishing transaction. A node whose listed copy is another publish's
-- answers no query by that name (src/sql/named/citus.rs).
CREATE TABLE cuckoo_cluster_copies (
    name text PRIMARY KEY,
    version bigint NOT NULL,
    owner regrole NOT NULL,
    digest text NOT NULL,
    durable boolean NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT (name, version, owner, durable, published_at) ON cuckoo_cluster_copies TO PUBLIC;
COMMENT ON TABLE cuckoo_cluster_copies IS 'the publish of each cluster copy that every Citus node must hold (a reference table once cf_publish_cluster has run)';
-- Where Citus is preloaded, the planner rewrites a by-name lookup's name into
-- cf_cluster_pin(name, latest): the latest publish the cluster recorded when
-- the query was planned. Every piece of a distributed query is then held to
-- that publish (a piece that finds a later one fails with 40001: retry).
CREATE FUNCTION cf_cluster_pin(name text, latest bigint) RETURNS text
    AS 'MODULE_PATHNAME', 'cf_cluster_pin' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_cluster_pin(text, bigint) IS 'used by the planner on a Citus cluster: the name, with the latest publish the query was planned with (read by the by-name lookup that takes it)';
CREATE FUNCTION cf_cluster_carry(latest bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_carry' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_cluster_carry(bigint) IS 'used by the planner on a Citus cluster: true; the statement that evaluates it holds the by-name lookups made out of the planner''s sight (in functions, in row-level security policies) to the latest publish it was planned with';

CREATE FUNCTION cf_cluster_list(name text, scope text, version bigint) RETURNS text
    AS 'MODULE_PATHNAME', 'cf_cluster_list' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_list(text, text, bigint) IS 'used by the cluster functions on each node: lists this node''s filter as a cluster copy of a publish (returning its digest) or as node-local (the filter''s owner only)';
CREATE FUNCTION cf_cluster_unlist(name text, scope text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_unlist' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_unlist(text, text) IS 'used by the cluster functions on each node: removes this node''s listing of a name (of one scope, or NULL: either)';
CREATE FUNCTION cf_cluster_current(name text, version bigint, digest text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_current' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cf_cluster_current(text, bigint, text) IS 'whether this node''s filter is listed as the cluster copy of that publish with that digest and is still the filter listed';
CREATE FUNCTION cf_cluster_begin(name text, new_version boolean) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cf_cluster_begin' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_begin(text, boolean) IS 'used by the cluster functions on the coordinator: checks the caller''s right, holds off other cluster changes of the name, returns a new publish version or the recorded one';
CREATE FUNCTION cf_cluster_record(name text, version bigint, digest text, durable boolean) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_cluster_record' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_record(text, bigint, text, boolean) IS 'used by cf_publish_cluster on the coordinator: records the publish every node must hold';
CREATE FUNCTION cf_cluster_forget(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_forget' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_forget(text) IS 'used by cf_drop_cluster on the coordinator: removes what the cluster records for a name';

-- Runs on each node for cf_publish_cluster and cf_sync_cluster: publishes the
-- value as this node's cluster copy of publish `version` (a caller that is
-- not the owner, or a member of the owning role, takes the filter over; one
-- that may not change it is refused) and returns the md5 of the copy's
-- snapshot, which the caller compares.
CREATE FUNCTION cf_cluster_copy(name text, version bigint, f cuckoofilter, durable boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    PERFORM @extschema@.cf_cluster_unlist(name, NULL);
    PERFORM @extschema@.cf_publish(name, f, durable);
    PERFORM @extschema@.cf_cluster_debug_stop('node', name);
    RETURN @extschema@.cf_cluster_list(name, 'cluster', version);
END
$fn$;
COMMENT ON FUNCTION cf_cluster_copy(text, bigint, cuckoofilter, boolean) IS 'used by cf_publish_cluster on each node: publishes a cluster copy of a publish and returns its digest';

-- Run on each node before cf_publish_cluster copies anything, and at stop
-- points of a publish for tests (cuckoo.debug_stop_publish).
CREATE FUNCTION cf_cluster_may_copy(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_cluster_may_copy' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_may_copy(text) IS 'used by cf_publish_cluster on each node: refuses a caller that may not replace the node''s filter or listing of the name';
CREATE FUNCTION cf_cluster_debug_stop(point text, name text) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_cluster_debug_stop' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_cluster_debug_stop(text, text) IS 'for tests: waits until cancelled at a point of a cluster publish named by cuckoo.debug_stop_publish';

-- The Citus nodes' answers to one command, or an error naming the first
-- node that failed.
CREATE FUNCTION cf_on_all_nodes(command text, what text) RETURNS TABLE (nodeid integer, result text)
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION '% needs the citus extension', what
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Without Citus, use cf_publish(), cf_drop() and the filter directly.';
    END IF;
    FOR r IN EXECUTE 'SELECT a.nodeid, a.success, a.result, n.nodename || '':'' || n.nodeport AS node FROM pg_catalog.run_command_on_all_nodes($1) a '
                  || 'LEFT JOIN pg_catalog.pg_dist_node n ON n.nodeid = a.nodeid ORDER BY a.nodeid' USING command LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION '% failed on Citus node % (%): %', what, r.nodeid, r.node, r.result
                USING ERRCODE = 'external_routine_exception';
        END IF;
        nodeid := r.nodeid;
        result := r.result;
        RETURN NEXT;
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION cf_on_all_nodes(text, text) IS 'runs a command on every active Citus node, failing on the first node that fails';

-- Primary nodes Citus lists as inactive (run_command_on_all_nodes does not
-- reach them), as 'host:port, ...', or NULL.
CREATE FUNCTION cf_cluster_inactive() RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    nodes text;
BEGIN
    EXECUTE 'SELECT string_agg(nodename || '':'' || nodeport, '', '' ORDER BY nodeid) FROM pg_catalog.pg_dist_node WHERE NOT isactive AND noderole = ''primary''' INTO nodes;
    RETURN nodes;
END
$fn$;
COMMENT ON FUNCTION cf_cluster_inactive() IS 'the primary Citus nodes that are inactive (the cluster functions cannot reach them)';

CREATE FUNCTION cf_publish_cluster(name text, f cuckoofilter, durable boolean DEFAULT true) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    version bigint;
    nodes integer;
    digests integer;
    digest text;
    inactive text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'cf_publish_cluster() needs the citus extension'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Without Citus, use cf_publish(), cf_drop() and the filter directly.';
    END IF;
    -- The caller's right, one cluster change of the name at a time, a new
    -- publish version; then every node's right, before anything is copied.
    version := @extschema@.cf_cluster_begin(name, true);
    PERFORM @extschema@.cf_on_all_nodes(format('SELECT %s.cf_cluster_may_copy(%L)', '@extschema@', name), 'cf_publish_cluster()');
    -- Each node takes the copy and lists it as this publish's: until the
    -- record below commits, those nodes answer no query by the name (the
    -- cluster records the previous publish), the others answer from the
    -- previous one. A failure or a stop here leaves errors, never a mix.
    BEGIN
        SELECT count(*), count(DISTINCT result), min(result) INTO nodes, digests, digest
          FROM @extschema@.cf_on_all_nodes(format('SELECT %s.cf_cluster_copy(%L, %s, %L::%s.cuckoofilter, %L)',
                 '@extschema@', name, version, f::text, '@extschema@', durable), 'cf_publish_cluster()');
        IF digests <> 1 THEN
            RAISE EXCEPTION 'cf_publish_cluster(): the nodes'' copies of cuckoo filter "%" differ', name
                USING ERRCODE = 'internal_error';
        END IF;
        -- Waits here when cuckoo.debug_stop_publish says so (tests only).
        PERFORM @extschema@.cf_cluster_debug_stop('record', name);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        RAISE WARNING 'cuckoo filter "%" was not published to every node: nodes that took the new copy answer no query by that name until a publish succeeds', name
            USING HINT = 'Publish it again with cf_publish_cluster() once every node is reachable.';
        RAISE;
    END;
    -- The publish every node must hold, with this transaction (Citus writes
    -- every replica of the reference table or none).
    PERFORM @extschema@.cf_cluster_record(name, version, digest, durable);
    inactive := @extschema@.cf_cluster_inactive();
    IF inactive IS NOT NULL THEN
        RAISE WARNING 'cuckoo filter "%" was not copied to inactive Citus node(s) %', name, inactive
            USING HINT = format('Once they are active again, run SELECT cf_sync_cluster(%L) on the coordinator; until then their queries by that name fail.', name);
    END IF;
    RETURN nodes;
END
$fn$;
COMMENT ON FUNCTION cf_publish_cluster(text, cuckoofilter, boolean) IS 'publishes a value as the named filter on every Citus node (identical copies that distributed queries may look up, the publisher their owner); a node that missed it answers no query by the name until cf_sync_cluster; returns the number of nodes';

CREATE FUNCTION cf_sync_cluster(name text) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    version bigint;
    rec record;
    f @extschema@.cuckoofilter;
    copied integer;
    bad text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'cf_sync_cluster() needs the citus extension' USING ERRCODE = 'feature_not_supported';
    END IF;
    version := @extschema@.cf_cluster_begin(name, false);
    SELECT * INTO rec FROM @extschema@.cuckoo_cluster_copies c WHERE c.name = cf_sync_cluster.name;
    IF version IS NULL OR NOT FOUND THEN
        RAISE EXCEPTION 'cuckoo filter "%" is not published to the cluster', name
            USING ERRCODE = 'undefined_object', HINT = 'Publish it with cf_publish_cluster().';
    END IF;
    IF NOT @extschema@.cf_cluster_current(name, version, rec.digest) THEN
        RAISE EXCEPTION 'the coordinator''s copy of cuckoo filter "%" is not the publish the cluster records', name
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Publish the value again with cf_publish_cluster().';
    END IF;
    f := @extschema@.cf_snapshot(name);
    -- Nodes whose copy is that publish's keep it; the others take the
    -- coordinator's (checked against the recorded digest).
    SELECT count(*) FILTER (WHERE result = 'copied'), string_agg(nodeid || ': ' || result, ', ') FILTER (WHERE result NOT IN ('copied', 'current'))
      INTO copied, bad
      FROM @extschema@.cf_on_all_nodes(format(
          'SELECT CASE WHEN %1$s.cf_cluster_current(%2$L, %3$s, %6$L) THEN ''current'' WHEN %1$s.cf_cluster_may_copy(%2$L) AND %1$s.cf_cluster_copy(%2$L, %3$s, %4$L::%1$s.cuckoofilter, %5$L) = %6$L THEN ''copied'' ELSE ''differs'' END',
          '@extschema@', name, version, f::text, rec.durable, rec.digest), 'cf_sync_cluster()');
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'cf_sync_cluster(): copies of cuckoo filter "%" differ from the publish recorded on node(s) %', name, bad
            USING ERRCODE = 'internal_error', HINT = 'Publish the value again with cf_publish_cluster().';
    END IF;
    RETURN copied;
END
$fn$;
COMMENT ON FUNCTION cf_sync_cluster(text) IS 'gives every active Citus node that lacks it the copy of a cluster filter the cluster last published (from the coordinator''s copy); returns the number of nodes copied to';

CREATE FUNCTION cf_node_local(name text, node_local boolean DEFAULT true) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN (SELECT count(*) FROM @extschema@.cf_on_all_nodes(
        CASE WHEN node_local THEN
            format('SELECT %s.cf_cluster_list(%L, ''node'', NULL) IS NULL', '@extschema@', name)
        ELSE
            format('SELECT %s.cf_cluster_unlist(%L, ''node'')', '@extschema@', name)
        END, 'cf_node_local()'));
END
$fn$;
COMMENT ON FUNCTION cf_node_local(text, boolean) IS 'declares on every Citus node that distributed queries may use that node''s own filter of this name (its keys are co-located with the distribution column; the filter''s owner only); false withdraws it';

CREATE FUNCTION cf_drop_cluster(name text) RETURNS integer
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'cf_drop_cluster() needs the citus extension' USING ERRCODE = 'feature_not_supported';
    END IF;
    PERFORM @extschema@.cf_cluster_forget(name);
    RETURN (SELECT count(*) FILTER (WHERE result = 't') FROM @extschema@.cf_on_all_nodes(
        format('SELECT %1$s.cf_cluster_unlist(%2$L, ''cluster'') IS NOT NULL AND %1$s.cf_drop(%2$L)', '@extschema@', name),
        'cf_drop_cluster()'));
END
$fn$;
COMMENT ON FUNCTION cf_drop_cluster(text) IS 'drops the named filter on every Citus node, unlists it and removes the cluster''s record of it; returns the number of nodes that had it';
