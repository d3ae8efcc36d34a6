-- cuckoo 0.10.0 -> 0.11.0.
--
-- 0.11.0 makes what one role sends cost only that role: every loop a caller
-- sizes checks for interrupts; memory is PostgreSQL's or fails as an ERROR;
-- values are at most 767 MB (their text form fits PostgreSQL's 1 GB limit);
-- key types named in a value are checked when it is made; superusers can
-- cap the shared region per role and per database; DROP ROLE refuses a role
-- that owns named filters. Stored values are unchanged.
-- The catalog after this script equals a fresh 0.11.0 install's;
-- tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.11.0'" to load this file. \quit

-- The server must run 0.11.0's library (it is preloaded: restart after
-- installing), or nothing changes.
DO $check$
BEGIN
    IF @extschema@.cuckoo_library_version() <> '0.11.0' THEN
        RAISE EXCEPTION 'cuckoo: this session runs the library of cuckoo %, not 0.11.0', @extschema@.cuckoo_library_version()
            USING HINT = 'Install 0.11.0''s files, restart the server (the library is preloaded), then update.';
    END IF;
END
$check$;
