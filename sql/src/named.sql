-- The current version's SQL: the functions over named filters in shared
-- memory (src/sql/named/functions.rs; the batched forms in src/sql/batch.rs).
-- Joined into cuckoo--<version>.sql after sharded.sql, before saved.sql (src/lib.rs).

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
-- 0.8.0: set operations by name. cf_insert and cf_delete take an array of keys
-- too (one answer per element, NULL for NULL; on a durable filter one WAL
-- record per 8,192 keys); the one-key forms take anynonarray, and cf_insert_key
-- and cf_delete_key take a key of any type, arrays included, as cf_contains_key
-- does. cf_insert_new adds a key only if the filter says it is absent (exactly
-- one of concurrent calls for a new key returns true); cf_count counts a key's
-- copies.
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
