-- The current version's SQL: cf_sharded_agg, cf_agg with a state of its own
-- type (cf_sharded_state) and a combine function, for engines that ship partial
-- states between nodes (Citus): the state type, the aggregates over keys of any
-- type and over exactly declared key types, and cf_sharded_key and
-- cf_sharded_typed, which cuckoo's planner hook writes into cf_sharded_agg
-- calls on Citus (src/sql/value/sharded.rs and rewrite.rs). Functions are
-- version-1 C functions; everything is immutable and parallel safe.
-- Joined into cuckoo--<version>.sql after aggregates.sql, before named.sql (src/lib.rs).

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
-- no cf_sharded_agg of their own (src/sql/citus/rewrite.rs).
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
-- filter takes the key type cf_agg records (src/sql/citus/rewrite.rs).
CREATE FUNCTION cf_sharded_typed(cuckoofilter, anyelement) RETURNS cuckoofilter
    AS 'MODULE_PATHNAME', 'cf_sharded_typed' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cf_sharded_typed(cuckoofilter, anyelement) IS 'the filter; one of no keys that records no key type records the type of the second argument (cf_sharded_agg on Citus over no rows)';
