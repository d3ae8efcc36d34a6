-- cuckoo 0.9.0 -> 0.10.0.
--
-- 0.10.0 makes durable named filters durable on every node by construction:
-- a PASS record after each checkpoint pass and a coverage file in cuckoo/
-- (what the files cover, which generations are live); standbys that restart
-- from a checkpoint their files do not cover say their filters need a
-- reload until the primary logs them again; files named during recovery move
-- minRecoveryPoint; every record is checked before it is logged, and replay
-- never stops the server for a record of cuckoo's. Update standbys first:
-- 0.9.0 cannot replay the new PASS record.
-- In SQL: the table cuckoo_saved_filters with cf_save() and
-- cf_restore_saved(), which carry named filters through pg_dump and
-- pg_upgrade, and cuckoo_filters lists saved copies that are not in shared
-- memory as needing a reload. Stored values are unchanged.
-- The catalog after this script equals a fresh 0.10.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.10.0'" to load this file. \quit

-- The server must run 0.10.0's library or a later one (it is preloaded:
-- restart after installing), or nothing changes. (A later library runs this
-- step on the way to its own version.)
DO $check$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,10,0}'::int[] THEN
        RAISE EXCEPTION 'cuckoo: this session runs the library of cuckoo %, older than 0.10.0', @extschema@.cuckoo_library_version()
            USING HINT = 'Install 0.10.0''s files, restart the server (the library is preloaded), then update.';
    END IF;
END
$check$;

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
SELECT pg_catalog.pg_extension_config_dump('cuckoo_saved_filters', '');
COMMENT ON TABLE cuckoo_saved_filters IS 'named filters saved by cf_save() (each a snapshot, with its owner and lookup grant), which pg_dump and pg_upgrade carry; cf_restore_saved() publishes them again';

-- The current database's named filters that the current role may look up;
-- and, as needing a reload, those saved by cf_save() that are not in shared
-- memory (after pg_upgrade, or a restore of a dump), for their owners.
CREATE OR REPLACE VIEW cuckoo_filters AS
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
-- (Its privileges stay as they were: CREATE OR REPLACE keeps them.)
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
