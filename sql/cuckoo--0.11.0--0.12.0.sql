-- cuckoo 0.11.0 -> 0.12.0.
--
-- 0.12.0 makes a cluster copy on Citus the published filter on every node or
-- an error (issue 30). Stored values are unchanged.
-- The catalog after this script equals a fresh 0.12.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.12.0'" to load this file. \quit

-- The server must run 0.12.0's library or a later one (it is preloaded:
-- restart after installing), or nothing changes. (A later library runs this
-- step on the way to its own version.)
DO $check$
BEGIN
    IF pg_catalog.string_to_array(@extschema@.cuckoo_library_version(), '.')::int[] OPERATOR(pg_catalog.<) '{0,12,0}'::int[] THEN
        RAISE EXCEPTION 'cuckoo: this session runs the library of cuckoo %, older than 0.12.0', @extschema@.cuckoo_library_version()
            USING HINT = 'Install 0.12.0''s files, restart the server (the library is preloaded), then update.';
    END IF;
END
$check$;

-- ==== Cluster copies: versioned, two-phase publish (issue 30, items 1, 2, 4, 6) ====

-- ==== Key types recorded as cf_agg records them (issue 30, item 5) ====
