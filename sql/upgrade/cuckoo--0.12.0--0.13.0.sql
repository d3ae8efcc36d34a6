-- cuckoo 0.12.0 -> 0.13.0.
--
-- 0.13.0 binds named filters to a table column (issue 33): the catalog
-- cuckoo_bindings, cf_bind(), cf_unbind(), cf_rebuild(), cf_apply_deletes()
-- and the functions their triggers call; cuckoo_filters gains the bound
-- table and column and the pending and dropped deletes. Stored values and
-- named filters are unchanged; the WAL gains one record kind (HORIZON), so a
-- standby replaying a 0.13.0 primary's WAL must run 0.13.0's library.
-- The catalog after this script equals a fresh 0.13.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.13.0'" to load this file. \quit

-- The server must run 0.13.0's library or a later one (it is preloaded:
-- restart after installing), or nothing changes. (A later library runs this
-- step on the way to its own version.)
DO $check$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,13,0}'::int[] THEN
        RAISE EXCEPTION 'cuckoo: this session runs the library of cuckoo %, older than 0.13.0', @extschema@.cuckoo_library_version()
            USING HINT = 'Install 0.13.0''s files, restart the server (the library is preloaded), then update.';
    END IF;
END
$check$;

-- ==== Bound filters (sql/src/bound.sql) ====

-- The bindings of this database. Rows are written only by cf_bind() and
-- cf_unbind() (through cf_bound_register() and cf_bound_unregister(), which
-- check that the caller owns the table and the filter); everyone may read
-- them, as everyone may read pg_trigger.
CREATE TABLE cuckoo_bindings (
    name text PRIMARY KEY,
    tab regclass NOT NULL,
    col name NOT NULL,
    -- The column's number when last bound or rebuilt on this server (so that
    -- a rename is followed; a restored row's is set again by cf_rebuild).
    attnum smallint NOT NULL,
    fpp float8 NOT NULL,
    durable boolean NOT NULL,
    bound_by regrole NOT NULL,
    bound_at timestamptz NOT NULL DEFAULT now(),
    -- What identifies the contents the last committed fill made (a durable
    -- filter's generation, else an identity kept in shared memory): a probe
    -- trusts the filter only when it is this one, so that a fill cancelled,
    -- failed or cut by a crash leaves "maybe" answers, not false negatives.
    built bigint,
    -- For a column of an enum type (keys are its labels): the labels, as
    -- oid:label, when last filled, so that a label renamed is noticed.
    enum_labels text[]
);
GRANT SELECT ON cuckoo_bindings TO PUBLIC;
-- Every change of the catalog makes each backend read it again for its plans.
CREATE FUNCTION cf_bound_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cf_bound_changed' LANGUAGE C;
CREATE TRIGGER cuckoo_bindings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cuckoo_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION cf_bound_changed();
COMMENT ON TABLE cuckoo_bindings IS 'named cuckoo filters bound to a table column by cf_bind(), kept in step with the table by triggers';

-- What the triggers and cf_bind() call (src/sql/bound/).
CREATE FUNCTION cf_bound_row() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cf_bound_row' LANGUAGE C;
COMMENT ON FUNCTION cf_bound_row() IS 'the row triggers of a table bound to a cuckoo filter (cf_bind): hash each written row''s key (BEFORE: each new version''s, early; AFTER: the rest)';
CREATE FUNCTION cf_bound_flush() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cf_bound_flush' LANGUAGE C;
COMMENT ON FUNCTION cf_bound_flush() IS 'the statement trigger of a table bound to a cuckoo filter (cf_bind): adds the statement''s keys and queues its deletes';
CREATE FUNCTION cf_bound_register(name text, tab regclass, col text, fpp float8, durable boolean) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_bound_register' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_bound_unregister(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_bound_unregister' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_bound_fill(name text, tab regclass, col text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cf_bound_fill' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_bound_reset(name text, capacity bigint, fpp float8, durable boolean, typ regtype) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_bound_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION cf_bound_altered(tab oid, attnum int2) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_bound_altered' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cf_bound_ready(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_bound_ready' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cf_bound_release(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_bound_release' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- The partitions of a partitioned table at every level (level 1: its own),
-- read from pg_inherits without locking them. (pg_partition_tree locks each:
-- the DDL event trigger, run by every ALTER TABLE, then deadlocked with
-- another session altering a partition, as a parallel pg_restore does.)
CREATE FUNCTION cf_bound_partitions(tab regclass) RETURNS TABLE (relid oid, level int)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $fn$
    WITH RECURSIVE t(relid, level) AS (
        SELECT i.inhrelid, 1 FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhparent
         WHERE i.inhparent = $1 AND c.relkind = 'p'
        UNION ALL
        SELECT i.inhrelid, t.level + 1 FROM t JOIN pg_catalog.pg_inherits i ON i.inhparent = t.relid
          JOIN pg_catalog.pg_class c ON c.oid = i.inhparent AND c.relkind = 'p')
    SELECT t.relid, t.level FROM t
$fn$;
-- The rows a table holds by its statistics (a partitioned table: its
-- leaves'), for sizing its filter.
CREATE FUNCTION cf_bound_rows_estimate(tab regclass) RETURNS float8
    LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT CASE WHEN c.relkind = 'p'
                THEN (SELECT COALESCE(pg_catalog.sum(GREATEST(l.reltuples, 0)), 0)
                        FROM pg_catalog.pg_partition_tree($1) p JOIN pg_catalog.pg_class l ON l.oid = p.relid
                       WHERE p.isleaf)
                ELSE GREATEST(c.reltuples, 0) END::float8
      FROM pg_catalog.pg_class c WHERE c.oid = $1
$fn$;
-- The tables an ALTER TABLE command attached as partitions, and adding
-- their rows' keys to a binding of a table they are now partitions of (the
-- DDL event trigger's).
CREATE FUNCTION cf_bound_attached(command pg_ddl_command) RETURNS oid[]
    AS 'MODULE_PATHNAME', 'cf_bound_attached' LANGUAGE C STABLE STRICT PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION cf_bound_attached(pg_ddl_command) FROM PUBLIC;
CREATE FUNCTION cf_bound_fill_attached(name text, part regclass) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cf_bound_fill_attached' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION cf_bound_fill_attached(text, regclass) FROM PUBLIC;
CREATE FUNCTION cf_bound_present(name text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_bound_present' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION cuckoo_bound_rows() RETURNS TABLE (
    name text,
    pending_deletes bigint,
    dropped_deletes bigint,
    applied_deletes bigint,
    refused_deletes bigint,
    saturated_versions bigint
)   AS 'MODULE_PATHNAME', 'cuckoo_bound_rows_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- The pre-screen the planner adds to EXISTS and IN subqueries over a bound
-- column (cuckoo.auto_prescreen; src/sql/bound/prescreen.rs).
CREATE FUNCTION cf_bound_contains(name text, key anynonarray) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_bound_contains' LANGUAGE C STABLE STRICT PARALLEL SAFE
    SUPPORT cf_contains_support;
COMMENT ON FUNCTION cf_bound_contains(text, anynonarray) IS 'false: no row of the table the named filter is bound to that any snapshot can see has the key; true: one may (also for a role that may not read the bound column, or while the filter needs a rebuild)';

CREATE FUNCTION cf_apply_deletes(name text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cf_apply_deletes' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_apply_deletes(text) IS 'applies the queued deletes of a bound cuckoo filter that are safe now (their transactions committed, and no snapshot can still see the deleted rows); returns the keys removed';

-- The three triggers of binding `name` on `tab`, made or made again as
-- cf_bind makes them: the AFTER row trigger hashes each written row's key
-- (the new version's to add, the old one's to delete); the statement
-- trigger hands them to the filter, and after a TRUNCATE empties it as of
-- the transaction's commit; the BEFORE row trigger (its name sorts after
-- most others') buffers each new version's key before the row is written,
-- so that a query the writing statement runs (a RETURNING function, a
-- data-modifying WITH, another AFTER trigger) finds it, and the AFTER
-- trigger does not add it again. ENABLE ALWAYS: they fire for logical
-- replication's apply and under session_replication_role = replica too.
-- Runs with the caller's rights (CREATE TRIGGER checks them).
CREATE FUNCTION cf_bound_triggers(name text, tab regclass, col name) RETURNS void
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    trig text := 'cuckoo_' || pg_catalog.left(pg_catalog.md5(cf_bound_triggers.name), 16);
BEGIN
    EXECUTE pg_catalog.format('CREATE OR REPLACE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION @extschema@.cf_bound_row(%L, %L)',
                              trig || '_row', cf_bound_triggers.tab, cf_bound_triggers.name, cf_bound_triggers.col);
    EXECUTE pg_catalog.format('CREATE OR REPLACE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.cf_bound_flush()',
                              trig || '_flush', cf_bound_triggers.tab);
    EXECUTE pg_catalog.format('CREATE OR REPLACE TRIGGER %I BEFORE INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION @extschema@.cf_bound_row(%L, %L)',
                              'zz_' || trig || '_new', cf_bound_triggers.tab, cf_bound_triggers.name, cf_bound_triggers.col);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', cf_bound_triggers.tab, trig || '_row');
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', cf_bound_triggers.tab, trig || '_flush');
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', cf_bound_triggers.tab, 'zz_' || trig || '_new');
END
$fn$;

-- Whether binding `name`'s triggers on `tab` are exactly those
-- cf_bound_triggers makes, enabled always: a trigger replaced (CREATE OR
-- REPLACE TRIGGER with a WHEN clause, a column list, other arguments or
-- another function), disabled or dropped would let writes go unseen.
CREATE FUNCTION cf_bound_triggers_ok(name text, tab regclass, col name) RETURNS boolean
    LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $fn$
    -- Every partition (at every level) of a partitioned table has the two
    -- row triggers, cloned from the table's, enabled always.
    SELECT NOT EXISTS (
        SELECT 1 FROM @extschema@.cf_bound_partitions($2) p
         WHERE (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger t
                 WHERE t.tgrelid = p.relid AND t.tgenabled = 'A' AND t.tgparentid <> 0
                   AND t.tgfoid = '@extschema@.cf_bound_row()'::regprocedure
                   AND t.tgname IN ('cuckoo_' || pg_catalog.left(pg_catalog.md5($1), 16) || '_row',
                                    'zz_cuckoo_' || pg_catalog.left(pg_catalog.md5($1), 16) || '_new')) <> 2)
    AND (SELECT pg_catalog.count(*) = 3 FROM pg_catalog.pg_trigger t
     WHERE t.tgrelid = $2
       AND t.tgenabled = 'A' AND t.tgqual IS NULL AND t.tgattr = ''::int2vector
       AND t.tgconstraint = 0 AND NOT t.tgisinternal
       AND ((t.tgname = 'cuckoo_' || pg_catalog.left(pg_catalog.md5($1), 16) || '_row'
             AND t.tgfoid = '@extschema@.cf_bound_row()'::regprocedure
             AND t.tgtype = 29 AND t.tgnargs = 2
             AND t.tgargs = pg_catalog.convert_to($1, pg_catalog.getdatabaseencoding()) || '\x00'::bytea
                            || pg_catalog.convert_to($3::text, pg_catalog.getdatabaseencoding()) || '\x00'::bytea)
         OR (t.tgname = 'cuckoo_' || pg_catalog.left(pg_catalog.md5($1), 16) || '_flush'
             AND t.tgfoid = '@extschema@.cf_bound_flush()'::regprocedure
             AND t.tgtype = 60 AND t.tgnargs = 0)
         OR (t.tgname = 'zz_cuckoo_' || pg_catalog.left(pg_catalog.md5($1), 16) || '_new'
             AND t.tgfoid = '@extschema@.cf_bound_row()'::regprocedure
             AND t.tgtype = 23 AND t.tgnargs = 2
             AND t.tgargs = pg_catalog.convert_to($1, pg_catalog.getdatabaseencoding()) || '\x00'::bytea
                            || pg_catalog.convert_to($3::text, pg_catalog.getdatabaseencoding()) || '\x00'::bytea)))
$fn$;

-- cf_bind(name, tab, col, fpp, durable): makes the named filter `name`
-- (dropping a filter of that name the caller owns), binds it to column `col`
-- of table `tab`, fills it from the table and keeps it in step from then on;
-- returns the rows whose keys it holds. Holds a SHARE ROW EXCLUSIVE lock on
-- the table until the transaction ends (readers go on; writers wait), as
-- CREATE TRIGGER does. For the table's owner.
CREATE FUNCTION cf_bind(name text, tab regclass, col text, fpp float8 DEFAULT 0.002, durable boolean DEFAULT true) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    att record;
    rel record;
    cap bigint;
BEGIN
    IF cf_bind.name IS NULL OR cf_bind.tab IS NULL OR cf_bind.col IS NULL OR cf_bind.fpp IS NULL OR cf_bind.durable IS NULL THEN
        RAISE EXCEPTION 'cf_bind() arguments must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT c.relkind, c.relowner, c.relpersistence, c.reltuples INTO rel FROM pg_class c WHERE c.oid = cf_bind.tab;
    IF NOT pg_has_role(rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', cf_bind.tab USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'cannot bind a cuckoo filter to %: it is not a table', cf_bind.tab USING ERRCODE = 'wrong_object_type';
    ELSIF rel.relpersistence = 't' THEN
        RAISE EXCEPTION 'cannot bind a cuckoo filter to temporary table %', cf_bind.tab USING ERRCODE = 'feature_not_supported';
    END IF;
    SELECT a.attnum, a.atttypid, a.attcollation INTO att FROM pg_attribute a
     WHERE a.attrelid = cf_bind.tab AND a.attname = cf_bind.col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', cf_bind.col, cf_bind.tab USING ERRCODE = 'undefined_column';
    END IF;
    -- Refused before anything is made: a column whose equality is not byte
    -- for byte (a case-insensitive collation) would make false negatives.
    IF EXISTS (SELECT 1 FROM pg_collation c WHERE c.oid = att.attcollation AND NOT c.collisdeterministic) THEN
        RAISE EXCEPTION 'cuckoo filter keys cannot use a nondeterministic collation'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = pg_catalog.format('Column %I of %s has a nondeterministic collation.', cf_bind.col, cf_bind.tab);
    END IF;
    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', cf_bind.tab);
    IF EXISTS (SELECT 1 FROM @extschema@.cuckoo_bindings b WHERE b.name = cf_bind.name) THEN
        RAISE EXCEPTION 'cuckoo filter "%" is already bound to a table', cf_bind.name
            USING ERRCODE = 'duplicate_object', HINT = 'Unbind it first (cf_unbind), or choose another name.';
    END IF;
    -- A filter of that name (the caller's: cf_drop checks) is taken over.
    PERFORM @extschema@.cf_drop(cf_bind.name);
    cap := GREATEST(1024, (@extschema@.cf_bound_rows_estimate(cf_bind.tab) * 1.25)::bigint);
    PERFORM @extschema@.cf_create(cf_bind.name, cap, cf_bind.fpp, cf_bind.durable, att.atttypid::regtype);
    -- Its triggers before the catalog row: the DDL event trigger ends a
    -- binding whose triggers are not as they should be. No other session
    -- writes the table meanwhile.
    PERFORM @extschema@.cf_bound_triggers(cf_bind.name, cf_bind.tab, cf_bind.col);
    PERFORM @extschema@.cf_bound_register(cf_bind.name, cf_bind.tab, cf_bind.col, cf_bind.fpp, cf_bind.durable);
    RETURN @extschema@.cf_bound_fill(cf_bind.name, cf_bind.tab, cf_bind.col);
END
$fn$;
COMMENT ON FUNCTION cf_bind(text, regclass, text, float8, boolean) IS 'makes the named cuckoo filter name, binds it to column col of table tab, fills it from the table and keeps it in step with every later write, so that every row any snapshot can see has its key in the filter; returns the rows whose keys it holds';

-- cf_unbind(name): drops the binding, its triggers and its filter. For the
-- table's owner.
CREATE FUNCTION cf_unbind(name text) RETURNS void
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    b record;
    trig text := 'cuckoo_' || pg_catalog.left(pg_catalog.md5(cf_unbind.name), 16);
BEGIN
    SELECT * INTO b FROM @extschema@.cuckoo_bindings v WHERE v.name = cf_unbind.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cuckoo filter "%" is not bound to a table', cf_unbind.name USING ERRCODE = 'undefined_object';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = b.tab AND NOT pg_has_role(c.relowner, 'USAGE')) THEN
        RAISE EXCEPTION 'must be owner of table %', b.tab USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The catalog row first: dropping the triggers runs the DDL event
    -- trigger, which ends a binding whose triggers are gone.
    PERFORM @extschema@.cf_bound_release(cf_unbind.name);
    PERFORM @extschema@.cf_bound_unregister(cf_unbind.name);
    IF b.tab IS NOT NULL AND EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = b.tab) THEN
        EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', trig || '_row', b.tab);
        EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', trig || '_flush', b.tab);
        EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', 'zz_' || trig || '_new', b.tab);
    END IF;
    PERFORM @extschema@.cf_drop(cf_unbind.name);
END
$fn$;
COMMENT ON FUNCTION cf_unbind(text) IS 'ends a binding made by cf_bind: drops its triggers and its named filter';

-- cf_rebuild(name): fills the bound filter again from its table (deletes
-- that were dropped or refused no longer leave keys behind) without blocking
-- writers, as CREATE INDEX CONCURRENTLY builds an index: it holds a SHARE
-- UPDATE EXCLUSIVE lock on the table (DDL, VACUUM and other fills wait;
-- reads and writes go on) until the transaction ends. Probes answer "maybe"
-- from its start until it commits. Only if the binding's triggers are not
-- as cf_bind makes them (a restore may leave them disabled) are they made
-- again, under a SHARE ROW EXCLUSIVE lock, which writers wait for.
CREATE FUNCTION cf_rebuild(name text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    b record;
    att record;
    cap bigint;
BEGIN
    SELECT * INTO b FROM @extschema@.cuckoo_bindings v WHERE v.name = cf_rebuild.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cuckoo filter "%" is not bound to a table', cf_rebuild.name USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = b.tab), 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', b.tab USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- What it reads of the catalogs after its lock must be current: a
    -- trigger of the binding disabled while it waited would otherwise be
    -- taken as it was.
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'cf_rebuild() cannot run in a % transaction', pg_catalog.current_setting('transaction_isolation')
            USING ERRCODE = 'feature_not_supported', HINT = 'Run it in a READ COMMITTED transaction.';
    END IF;
    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', b.tab);
    SELECT a.atttypid INTO att FROM pg_attribute a
     WHERE a.attrelid = b.tab AND a.attname = b.col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation %, to which cuckoo filter "%" is bound, does not exist', b.col, b.tab, cf_rebuild.name
            USING ERRCODE = 'undefined_column';
    END IF;
    cap := GREATEST(1024, (@extschema@.cf_bound_rows_estimate(b.tab) * 1.25)::bigint);
    IF NOT @extschema@.cf_bound_triggers_ok(cf_rebuild.name, b.tab, b.col) THEN
        -- The filter goes first (a cancelled or failed rebuild leaves a
        -- filter the catalog does not name), then its triggers are made
        -- again while it is missing.
        EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', b.tab);
        PERFORM @extschema@.cf_bound_reset(cf_rebuild.name, NULL, NULL, NULL, NULL);
        PERFORM @extschema@.cf_bound_triggers(cf_rebuild.name, b.tab, b.col);
    END IF;
    -- The filter is made again, empty (probes answer "maybe" until the fill
    -- commits), then filled while writers add their rows' keys to it.
    PERFORM @extschema@.cf_bound_reset(cf_rebuild.name, cap, b.fpp, b.durable, att.atttypid::regtype);
    RETURN @extschema@.cf_bound_fill(cf_rebuild.name, b.tab, b.col);
END
$fn$;
COMMENT ON FUNCTION cf_rebuild(text) IS 'fills a bound cuckoo filter again from its table without blocking writers, clearing the keys that dropped deletes left; returns the rows whose keys it holds';

-- DDL on a bound table keeps its binding right, or leaves its filter to be
-- rebuilt, or ends it, with a NOTICE (never a filter that silently misses
-- keys): a renamed column is followed; a label of the column's enum type
-- renamed (its rows' keys change) drops the filter until cf_rebuild (probes
-- answer "maybe" meanwhile); a dropped table or column, a column whose type
-- no longer hashes as the filter's keys, or a trigger of the binding
-- disabled, dropped or replaced, ends the binding (triggers, catalog row and
-- filter go). (A table rewritten with new column values: cf_bound_rewrite.)
-- A table attached as a partition of a bound partitioned table gets its
-- rows' keys. Runs as the extension's owner (it writes the catalog and may
-- drop another role's filter), for every ALTER TABLE, ALTER TYPE, CREATE
-- TRIGGER, ALTER TRIGGER, CREATE FOREIGN TABLE and drop; it only reads the
-- catalogs and acts on bindings whose table, partitions, column, type or
-- triggers changed.
CREATE FUNCTION cf_bound_ddl() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    b record;
    a record;
    trig text;
    why text;
    base oid;
    labels text[];
    part oid;
BEGIN
    -- Its own trigger changes (a rename followed) run it again: not then.
    IF @extschema@.cf_bound_ddl_quiet(NULL) THEN
        RETURN;
    END IF;
    -- A table attached as a partition of a bound partitioned table (at any
    -- level): its rows, which no trigger of the binding saw, get their keys
    -- before the command's transaction can commit. (A partition detached
    -- keeps its keys in the filter: false positives.)
    IF TG_EVENT = 'ddl_command_end' THEN
        FOR part IN SELECT DISTINCT pg_catalog.unnest(@extschema@.cf_bound_attached(c.command))
                      FROM pg_catalog.pg_event_trigger_ddl_commands() c WHERE c.command_tag = 'ALTER TABLE' LOOP
            FOR b IN SELECT * FROM @extschema@.cuckoo_bindings v
                      WHERE v.tab IN (SELECT anc.relid FROM pg_catalog.pg_partition_ancestors(part) anc WHERE anc.relid <> part)
                      ORDER BY v.name LOOP
                IF @extschema@.cf_bound_present(b.name) THEN
                    PERFORM @extschema@.cf_bound_fill_attached(b.name, part);
                END IF;
            END LOOP;
        END LOOP;
    END IF;
    FOR b IN SELECT * FROM @extschema@.cuckoo_bindings v ORDER BY v.name LOOP
        trig := 'cuckoo_' || pg_catalog.left(pg_catalog.md5(b.name), 16);
        why := NULL;
        IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = b.tab) THEN
            why := 'its table was dropped';
        ELSE
            SELECT t.attname, t.atttypid, t.attisdropped INTO a FROM pg_attribute t
             WHERE t.attrelid = b.tab AND t.attnum = b.attnum;
            IF NOT FOUND OR a.attisdropped THEN
                why := pg_catalog.format('column %I of %s was dropped', b.col, b.tab);
            ELSIF NOT @extschema@.cf_bound_key_ok(b.name, a.atttypid) THEN
                why := pg_catalog.format('column %I of %s changed type to %s', a.attname, b.tab, a.atttypid::regtype);
            ELSIF EXISTS (SELECT 1 FROM @extschema@.cf_bound_partitions(b.tab) p JOIN pg_class c ON c.oid = p.relid
                           WHERE c.relkind NOT IN ('r', 'p')) THEN
                -- A foreign table made a partition: writes elsewhere would
                -- go unseen.
                why := pg_catalog.format('a partition of %s is not a table of this server', b.tab);
            ELSIF @extschema@.cf_bound_present(b.name) AND NOT @extschema@.cf_bound_triggers_ok(b.name, b.tab, b.col) THEN
                -- Without the triggers as cf_bind makes them, writes would
                -- go unseen (DISABLE TRIGGER, DROP TRIGGER, CREATE OR REPLACE
                -- TRIGGER). A binding whose filter is missing (a restore
                -- making its triggers) is used by nothing; cf_rebuild sets
                -- them right (it makes them again under its lock).
                why := pg_catalog.format('its triggers on %s were disabled, dropped or replaced', b.tab);
            ELSIF a.attname <> b.col THEN
                -- Renamed: the row triggers name the column they read. (The
                -- row first: changing the triggers runs this function again.)
                UPDATE @extschema@.cuckoo_bindings v SET col = a.attname WHERE v.name = b.name;
                PERFORM @extschema@.cf_bound_ddl_quiet(true);
                EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig || '_row', b.tab);
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', 'zz_' || trig || '_new', b.tab);
                PERFORM @extschema@.cf_bound_triggers(b.name, b.tab, a.attname);
                PERFORM @extschema@.cf_bound_ddl_quiet(false);
            ELSIF b.enum_labels IS NOT NULL AND @extschema@.cf_bound_present(b.name) THEN
                -- Keys of an enum column are its labels: a label renamed
                -- (ALTER TYPE ... RENAME VALUE) changes the key of every row
                -- holding it. Labels added change none.
                base := a.atttypid;
                WHILE (SELECT t.typtype FROM pg_type t WHERE t.oid = base) = 'd' LOOP
                    base := (SELECT t.typbasetype FROM pg_type t WHERE t.oid = base);
                END LOOP;
                labels := (SELECT pg_catalog.array_agg(e.oid::text || ':' || e.enumlabel ORDER BY e.oid)
                             FROM pg_enum e WHERE e.enumtypid = base);
                IF labels IS DISTINCT FROM b.enum_labels THEN
                    IF labels @> b.enum_labels THEN
                        UPDATE @extschema@.cuckoo_bindings v SET enum_labels = labels WHERE v.name = b.name;
                    ELSE
                        RAISE NOTICE 'cuckoo: filter "%" bound to column % of % is dropped until it is rebuilt: a label of type % was renamed', b.name, b.col, b.tab, base::regtype
                            USING HINT = pg_catalog.format('Meanwhile pre-screens treat every key as present. Rebuild it with SELECT cf_rebuild(%L).', b.name);
                        PERFORM @extschema@.cf_bound_reset(b.name, NULL, NULL, NULL, NULL);
                    END IF;
                END IF;
            END IF;
        END IF;
        IF why IS NOT NULL THEN
            RAISE NOTICE 'cuckoo: the binding of filter "%" ends: %; the filter is dropped', b.name, why
                USING HINT = 'Bind it again with cf_bind() if need be.';
            -- The row first: dropping the triggers runs this function again.
            PERFORM @extschema@.cf_bound_release(b.name);
            DELETE FROM @extschema@.cuckoo_bindings v WHERE v.name = b.name;
            IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = b.tab) THEN
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', trig || '_row', b.tab);
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', trig || '_flush', b.tab);
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', 'zz_' || trig || '_new', b.tab);
            END IF;
            PERFORM @extschema@.cf_drop(b.name);
        END IF;
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION cf_bound_ddl() FROM PUBLIC;
-- Whether cf_bound_ddl is changing a binding's triggers itself (NULL: ask;
-- true, false: set). The extension's owner's only: cf_bound_ddl runs as it.
CREATE FUNCTION cf_bound_ddl_quiet(quiet boolean) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_bound_ddl_quiet' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION cf_bound_ddl_quiet(boolean) FROM PUBLIC;
CREATE FUNCTION cf_bound_key_ok(name text, typ oid) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cf_bound_key_ok' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE EVENT TRIGGER cuckoo_bound_alter ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE', 'CREATE TRIGGER', 'ALTER TRIGGER', 'CREATE FOREIGN TABLE')
    EXECUTE FUNCTION cf_bound_ddl();
CREATE EVENT TRIGGER cuckoo_bound_drop ON sql_drop
    EXECUTE FUNCTION cf_bound_ddl();
-- As the tables' triggers: they fire under session_replication_role =
-- replica too (else DDL made then would go unseen).
ALTER EVENT TRIGGER cuckoo_bound_alter ENABLE ALWAYS;
ALTER EVENT TRIGGER cuckoo_bound_drop ENABLE ALWAYS;

-- A bound table rewritten with new values of its bound column (ALTER TABLE
-- ... ALTER COLUMN ... TYPE, maybe with USING, which fires no row trigger):
-- the binding's filter is dropped before the rewrite, until cf_rebuild
-- (probes answer "maybe" meanwhile), with a NOTICE. Rewrites that keep the
-- column's values (SET LOGGED, SET ACCESS METHOD, a column added with a
-- volatile default, another column's type changed) change nothing. Runs as
-- the extension's owner, as cf_bound_ddl does.
CREATE FUNCTION cf_bound_rewrite() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    b record;
BEGIN
    IF pg_catalog.pg_event_trigger_table_rewrite_reason() & 4 = 0 THEN
        RETURN;
    END IF;
    -- (A partitioned table's partitions are rewritten one by one.)
    FOR b IN SELECT * FROM @extschema@.cuckoo_bindings v
              WHERE v.tab = pg_catalog.pg_event_trigger_table_rewrite_oid()
                 OR v.tab IN (SELECT anc.relid FROM pg_catalog.pg_partition_ancestors(pg_catalog.pg_event_trigger_table_rewrite_oid()) anc)
              ORDER BY v.name LOOP
        IF @extschema@.cf_bound_present(b.name) AND @extschema@.cf_bound_altered(b.tab, b.attnum) THEN
            RAISE NOTICE 'cuckoo: filter "%" bound to column % of % is dropped until it is rebuilt: the table is rewritten with new values of the column', b.name, b.col, b.tab
                USING HINT = pg_catalog.format('Meanwhile pre-screens treat every key as present. Rebuild it with SELECT cf_rebuild(%L).', b.name);
            PERFORM @extschema@.cf_bound_reset(b.name, NULL, NULL, NULL, NULL);
        END IF;
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION cf_bound_rewrite() FROM PUBLIC;
CREATE EVENT TRIGGER cuckoo_bound_rewrite ON table_rewrite
    EXECUTE FUNCTION cf_bound_rewrite();
ALTER EVENT TRIGGER cuckoo_bound_rewrite ENABLE ALWAYS;

-- ==== cuckoo_filters shows bindings (sql/src/views.sql) ====

-- The current database's named filters that the current role may look up;
-- and, as needing a reload, those saved by cf_save() that are not in shared
-- memory (after pg_upgrade, or a restore of a dump), for their owners.
CREATE OR REPLACE VIEW cuckoo_filters AS
    SELECT f.name, f.capacity, f.items, f.load_factor, f.bytes, f.fpp, f.inserts, f.lookups, f.deletes,
           f.failed_inserts, f.lookup_retries, f.kicks, f.owner, f.lookup_grantee, f.durable,
           CASE WHEN b.name IS NOT NULL AND (f.state <> 'ready' OR NOT cf_bound_ready(b.name)) THEN 'needs rebuild' ELSE f.state END AS state,
           CASE WHEN b.name IS NOT NULL AND f.state <> 'ready'
                THEN pg_catalog.format('%s; it is bound to column %I of %s: rebuild it with SELECT cf_rebuild(%L)', f.reason, b.col::text, b.tab::text, b.name) COLLATE "default"
                WHEN b.name IS NOT NULL AND NOT cf_bound_ready(b.name)
                THEN pg_catalog.format('its contents are not those of a committed fill from %s (a cf_bind or cf_rebuild was cancelled, failed or cut by a crash): pre-screens treat every key as present until SELECT cf_rebuild(%L)', b.tab::text, b.name) COLLATE "default"
                ELSE f.reason END AS reason,
           f.checkpoint_write_bytes, f.checkpoint_wal_bytes, f.disk_bytes, f.key_type, f.expansion, f.tables,
           b.tab AS bound_table, b.col AS bound_column,
           CASE WHEN b.name IS NOT NULL THEN COALESCE(r.pending_deletes, 0) END AS pending_deletes,
           CASE WHEN b.name IS NOT NULL THEN COALESCE(r.dropped_deletes + r.refused_deletes, 0) END AS dropped_deletes
    FROM (SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
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
          OFFSET 0) s
    ) f
    LEFT JOIN cuckoo_bindings b ON b.name = f.name
    LEFT JOIN cuckoo_bound_rows() r ON r.name = f.name
    UNION ALL
    -- Bindings whose filter is not in shared memory (after a restore of a
    -- dump or pg_upgrade, or a restart of a filter that is not durable).
    SELECT b.name, NULL::bigint, 0::bigint, 0::float8, 0::bigint, b.fpp, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
           0::bigint, 0::bigint, b.bound_by::text, NULL::text, b.durable, 'needs rebuild',
           pg_catalog.format('it is bound to column %I of %s but not in shared memory: rebuild it with SELECT cf_rebuild(%L)', b.col::text, b.tab::text, b.name) COLLATE "default",
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::integer, NULL::integer,
           b.tab, b.col, NULL::bigint, NULL::bigint
    FROM cuckoo_bindings b
    WHERE NOT cf_bound_present(b.name);
-- (Its grant to PUBLIC is kept: CREATE OR REPLACE VIEW keeps privileges.)
COMMENT ON VIEW cuckoo_filters IS 'named cuckoo filters of this database visible to the current role, with usage counters; saved copies not in shared memory as needing a reload; for filters bound to a table column (cf_bind), the table, the column, the deletes waiting until no snapshot can see their rows and the deletes dropped (their keys stay until cf_rebuild)';

-- ==== pg_dump carries the bindings (sql/src/citus.sql) ====

SELECT pg_catalog.pg_extension_config_dump('cuckoo_bindings', '');
