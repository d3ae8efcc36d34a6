-- cuckoo 0.2.0 -> 0.3.0.
--
-- 0.3.0 makes named filters durable: cf_create and cf_publish take
-- `durable boolean DEFAULT true` (durable filters are WAL-logged through a
-- custom resource manager, survive restarts and crashes, and are replayed on
-- standbys), the cuckoo_filters view gains durable, state and reason, and the
-- by-name cf_insert and cf_delete become PARALLEL UNSAFE (a durable change
-- assigns the transaction an ID, as nextval does). Named filters made before
-- the server runs 0.3.0's library were never durable and do not survive the
-- restart it needs; stored cuckoofilter values are unchanged.
--
-- Privileges granted or revoked on the old cf_create and cf_publish carry over
-- to the new declarations. The catalog after this script equals a fresh 0.3.0
-- install's; tests/upgrade.sh checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.3.0'" to load this file. \quit

CREATE FUNCTION cf_create(name text, capacity bigint, fpp float8 DEFAULT 0.002, durable boolean DEFAULT true) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_create' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_create(text, bigint, float8, boolean) IS 'creates an empty named filter in shared memory for capacity keys at false-positive rate fpp; durable filters are WAL-logged and survive restarts, crashes and failover';
CREATE FUNCTION cf_publish(name text, f cuckoofilter, durable boolean DEFAULT true) RETURNS void
    AS 'MODULE_PATHNAME', 'cf_publish' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION cf_publish(text, cuckoofilter, boolean) IS 'creates a named filter as a copy of a value, or replaces its contents atomically; durable filters are WAL-logged';

-- Carry EXECUTE privileges over from the old declarations (only if they were
-- changed from the default).
DO $$
DECLARE
    pair text[];
    acl aclitem[];
    g record;
BEGIN
    FOREACH pair SLICE 1 IN ARRAY ARRAY[
        ['cf_create(text,bigint,double precision)', 'cf_create(text,bigint,double precision,boolean)'],
        ['cf_publish(text,cuckoofilter)', 'cf_publish(text,cuckoofilter,boolean)']]
    LOOP
        SELECT proacl INTO acl FROM pg_catalog.pg_proc WHERE oid = pair[1]::regprocedure;
        CONTINUE WHEN acl IS NULL;
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', pair[2]::regprocedure);
        FOR g IN SELECT DISTINCT grantee FROM pg_catalog.aclexplode(acl) WHERE privilege_type = 'EXECUTE' LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', pair[2]::regprocedure,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(g.grantee::regrole::text) END);
        END LOOP;
    END LOOP;
END
$$;

DROP FUNCTION cf_create(text, bigint, float8);
DROP FUNCTION cf_publish(text, cuckoofilter);

ALTER FUNCTION cf_insert(text, anyelement) PARALLEL UNSAFE;
ALTER FUNCTION cf_delete(text, anyelement) PARALLEL UNSAFE;

DROP VIEW cuckoo_filters;
DROP FUNCTION cuckoo_filters_rows();
CREATE FUNCTION "cuckoo_filters_rows"() RETURNS TABLE (
	"name" TEXT,
	"capacity" bigint,
	"items" bigint,
	"load_factor" double precision,
	"bytes" bigint,
	"fpp" double precision,
	"inserts" bigint,
	"lookups" bigint,
	"deletes" bigint,
	"failed_inserts" bigint,
	"lookup_retries" bigint,
	"kicks" bigint,
	"owner" TEXT,
	"lookup_grantee" TEXT,
	"durable" bool,
	"state" TEXT,
	"reason" TEXT
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'cuckoo_filters_rows_wrapper';
CREATE VIEW cuckoo_filters AS
    SELECT name, capacity, items, load_factor, bytes, fpp, inserts, lookups, deletes,
           failed_inserts, lookup_retries, kicks, owner, lookup_grantee, durable, state, reason
    FROM cuckoo_filters_rows();
GRANT SELECT ON cuckoo_filters TO PUBLIC;
COMMENT ON VIEW cuckoo_filters IS 'named cuckoo filters of this database visible to the current role, with usage counters';
