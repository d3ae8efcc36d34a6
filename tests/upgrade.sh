#!/usr/bin/env bash
# The upgrade paths: CREATE EXTENSION cuckoo VERSION '0.1.0' (and each later one) then
# ALTER EXTENSION cuckoo UPDATE gives the same catalog as a fresh install of the
# current version (every member object with its definition, properties, comment
# and privileges), values stored before the update still answer as 0.1.0
# answered, and privileges changed on functions whose declaration the update
# replaces carry over. A view that calls cf_contains keeps working through the
# update (0.4.0 changes the one-key cf_contains' argument type in place).
# Expects the cluster of tests/tools/cluster.sh to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DIR=${CLUSTER_DIR:-/tmp/cuckoo-cluster}
PORT=${PGPORT:-5497}
q() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -At "$@"; }
fail() { echo "upgrade: FAIL: $*" >&2; exit 1; }
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
work=$(mktemp -d /tmp/cuckoo-upgrade.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Every object that belongs to the extension, described with everything that
# defines it, one line each, sorted.
cat > "$work/catalog.sql" <<'SQL'
WITH members AS (
  SELECT classid, objid, objsubid FROM pg_depend
   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cuckoo'))
SELECT line FROM (
  SELECT pg_describe_object(m.classid, m.objid, m.objsubid) || ' | comment: ' || coalesce(obj_description(m.objid, c.relname), '-') AS line
    FROM members m JOIN pg_class c ON c.oid = m.classid
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure || ' | ' || concat_ws(' ', p.prokind, p.provolatile, p.proparallel, p.proisstrict,
         p.prosecdef, p.proleakproof, p.procost, p.prorows, p.proretset, p.prorettype::regtype, p.prosupport, p.prosrc, p.probin,
         p.proconfig::text, p.proacl::text, pg_get_function_arguments(p.oid))
    FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
  UNION ALL
  SELECT 'aggregate ' || a.aggfnoid::regprocedure || ' | ' || concat_ws(' ', a.aggkind, a.aggtransfn, a.aggfinalfn, a.aggcombinefn,
         a.aggserialfn, a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn, a.aggfinalextra, a.aggfinalmodify,
         a.aggsortop, a.aggtranstype::regtype, a.aggtransspace, a.agginitval)
    FROM members m JOIN pg_aggregate a ON m.classid = 'pg_proc'::regclass AND a.aggfnoid = m.objid
  UNION ALL
  SELECT 'type ' || t.oid::regtype || ' | ' || concat_ws(' ', t.typlen, t.typbyval, t.typtype, t.typcategory, t.typalign, t.typstorage,
         t.typinput, t.typoutput, t.typreceive, t.typsend, t.typmodin, t.typanalyze, t.typsubscript, t.typacl::text)
    FROM members m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
  UNION ALL
  SELECT 'relation ' || c.oid::regclass || ' | ' || concat_ws(' ', c.relkind, c.relacl::text, pg_get_viewdef(c.oid))
    FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
  UNION ALL
  SELECT 'initial privileges ' || pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' | ' || i.privtype::text || ' ' || i.initprivs::text
    FROM members m JOIN pg_init_privs i ON i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = m.objsubid
  UNION ALL
  SELECT 'extension | ' || concat_ws(' ', e.extversion, e.extrelocatable, e.extnamespace::regnamespace,
         (SELECT array_agg(c::regclass::text) FROM unnest(e.extconfig) c)::text, e.extcondition::text)
    FROM pg_extension e WHERE e.extname = 'cuckoo'
) x ORDER BY line;
SQL

q -d postgres -c "DROP DATABASE IF EXISTS up_new" -c "CREATE DATABASE up_new"
q -d up_new -c "CREATE EXTENSION cuckoo"
q -d up_new -f "$work/catalog.sql" > "$work/fresh.txt"
lines=$(wc -l < "$work/fresh.txt")
[ "$lines" -gt 50 ] || fail "catalog description too short ($lines lines)"

answers="SELECT string_agg(id || ':' || md5(f::text) || ':' || (SELECT md5(string_agg(CASE WHEN cf_contains(f, g) THEN 't' ELSE 'f' END, '' ORDER BY g)) FROM generate_series(1, 20000) g), ',' ORDER BY id) FROM v1"
for from in 0.1.0 0.2.0 0.3.0 0.4.0 0.5.0 0.6.0 0.7.0 0.8.0 0.9.0 0.10.0 0.11.0 0.12.0; do
  db="up_${from//./_}"
  q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  # The old version, with values made by 0.1.0 stored in a table, then the update.
  q -d "$db" -c "CREATE EXTENSION cuckoo VERSION '$from'" \
    -c "CREATE TABLE v1 (id int PRIMARY KEY, note text, f cuckoofilter)" \
    -c "\\copy v1 FROM 'tests/pg_regress/data/v1_values.tsv'" \
    -c "CREATE VIEW v1_probe AS SELECT id, cf_contains(f, 7) AS has7, cf_contains(f, 'seven'::text) AS has_seven FROM v1" \
    -c "CREATE VIEW v1_change AS SELECT id, cf_count(cf_delete(cf_insert(f, 7), 8)) AS ins7 FROM v1"
  [ "$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "$from" ] || fail "$from not installed"
  if [ "$from" = 0.8.0 ]; then
    # A role with CREATE on the extension's schema makes an aggregate of the
    # name the 0.8.0 -> 0.9.0 step changes in place in pg_aggregate (for the
    # extension's own, with a bytea state): the update must leave it alone.
    q -d "$db" -c "DROP ROLE IF EXISTS up_intruder" -c "CREATE ROLE up_intruder" -c "GRANT CREATE ON SCHEMA public TO up_intruder" \
      -c "SET ROLE up_intruder" \
      -c "CREATE FUNCTION intruder_trans(bytea, circle) RETURNS bytea LANGUAGE sql IMMUTABLE AS 'SELECT \$1'" \
      -c "CREATE AGGREGATE cf_sharded_agg(circle) (sfunc = intruder_trans, stype = bytea, initcond = '')" -c "RESET ROLE"
  fi
  if [ "$from" = 0.9.0 ] || [ "$from" = 0.10.0 ] || [ "$from" = 0.11.0 ] || [ "$from" = 0.12.0 ]; then
    # A role with CREATE on the extension's schema defines an operator that
    # matches the update scripts' version check better than pg_catalog's, and
    # a format() for the view: run by the superuser's update, either would
    # make the role a superuser. The scripts name pg_catalog's.
    q -d "$db" -c "DROP ROLE IF EXISTS up_evil" -c "CREATE ROLE up_evil" -c "GRANT CREATE ON SCHEMA public TO up_evil" \
      -c "SET ROLE up_evil" \
      -c "CREATE FUNCTION evil_lt(a int[], b int[]) RETURNS bool LANGUAGE plpgsql AS \$\$ BEGIN IF current_setting('is_superuser') = 'on' THEN EXECUTE 'ALTER ROLE up_evil SUPERUSER'; END IF; RETURN a OPERATOR(pg_catalog.<) b; END \$\$" \
      -c "CREATE OPERATOR public.< (leftarg = int[], rightarg = int[], function = evil_lt)" \
      -c "CREATE FUNCTION format(f text, a timestamptz, b text) RETURNS text LANGUAGE plpgsql AS \$\$ BEGIN IF current_setting('is_superuser') = 'on' THEN EXECUTE 'ALTER ROLE up_evil SUPERUSER'; END IF; RETURN pg_catalog.format(f, a, b); END \$\$" \
      -c "RESET ROLE"
  fi
  if [ "$from" = 0.9.0 ] || [ "$from" = 0.10.0 ] || [ "$from" = 0.11.0 ]; then
    # A cluster copy and a node-local filter listed on this node (Citus
    # tables work without Citus): the copy carries no publish version.
    q -d "$db" -c "INSERT INTO cuckoo_cluster_filters (name, scope, digest) VALUES ('old_copy', 'cluster', 'd'), ('old_local', 'node', NULL)"
  fi
  before=$(q -d "$db" -c "$answers")
  view_before=$(q -d "$db" -c "SELECT string_agg(concat_ws(':', id, has7, has_seven), ',' ORDER BY id) FROM v1_probe")
  change_before=$(q -d "$db" -c "SELECT string_agg(concat_ws(':', id, ins7), ',' ORDER BY id) FROM v1_change")
  q -d "$db" -c "ALTER EXTENSION cuckoo UPDATE" 2> "$work/update.err"
  cat "$work/update.err" >&2
  # The view calls cf_contains: the 0.3.0 -> 0.4.0 step says so.
  if [ "$from" != 0.4.0 ] && [ "$from" != 0.5.0 ] && [ "$from" != 0.6.0 ] && [ "$from" != 0.7.0 ] && [ "$from" != 0.8.0 ] && [ "$from" != 0.9.0 ] && [ "$from" != 0.10.0 ] && [ "$from" != 0.11.0 ] && [ "$from" != 0.12.0 ]; then
    grep -q "1 stored object(s) call the one-key cf_contains" "$work/update.err" \
      || fail "the update from $from did not warn about the stored call of cf_contains"
  fi
  [ "$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "$version" ] || fail "$from not updated to $version"
  [ "$(q -d "$db" -c "$answers")" = "$before" ] || fail "stored 0.1.0 values answer differently after the update from $from"
  [ "$(q -d "$db" -c "SELECT string_agg(concat_ws(':', id, has7, has_seven), ',' ORDER BY id) FROM v1_probe")" = "$view_before" ] \
    || fail "a view calling cf_contains answers differently after the update from $from"
  # The view calls cf_insert and cf_delete: the 0.7.0 -> 0.8.0 step says so.
  if [ "$from" != 0.8.0 ] && [ "$from" != 0.9.0 ] && [ "$from" != 0.10.0 ] && [ "$from" != 0.11.0 ] && [ "$from" != 0.12.0 ]; then
    grep -q "1 stored object(s) call the one-key cf_insert or cf_delete" "$work/update.err" \
      || fail "the update from $from did not warn about the stored calls of cf_insert and cf_delete"
  fi
  [ "$(q -d "$db" -c "SELECT string_agg(concat_ws(':', id, ins7), ',' ORDER BY id) FROM v1_change")" = "$change_before" ] \
    || fail "a view calling cf_insert and cf_delete answers differently after the update from $from"
  if [ "$from" = 0.9.0 ] || [ "$from" = 0.10.0 ] || [ "$from" = 0.11.0 ] || [ "$from" = 0.12.0 ]; then
    [ "$(q -d "$db" -c "SELECT count(*) FROM pg_depend d JOIN pg_rewrite w ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid WHERE w.ev_class = 'cuckoo_filters'::regclass AND d.refobjid = 'public.format(text, timestamptz, text)'::regprocedure")" = 0 ] \
      || fail "after the update from $from, cuckoo_filters calls another role's format()"
    [ "$(q -d "$db" -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'up_evil'")" = f ] \
      || fail "the update from $from ran another role's operator or function as superuser"
    q -d "$db" -c "DROP OPERATOR public.< (int[], int[])" -c "DROP FUNCTION evil_lt(int[], int[])" -c "DROP FUNCTION format(text, timestamptz, text)" \
      -c "REVOKE CREATE ON SCHEMA public FROM up_evil" -c "DROP ROLE up_evil"
    echo "upgrade: the update from $from runs none of another role's operators or functions"
  fi
  if [ "$from" = 0.9.0 ] || [ "$from" = 0.10.0 ] || [ "$from" = 0.11.0 ]; then
    grep -q "cluster copies listed by an earlier release are unlisted on this node: old_copy" "$work/update.err" \
      || fail "the update from $from did not warn that it unlists the cluster copy it cannot version"
    [ "$(q -d "$db" -c "SELECT string_agg(concat_ws(':', name, scope, coalesce(owner, '-')), ',' ORDER BY name) FROM cuckoo_cluster_filters")" = "old_local:node:-" ] \
      || fail "after the update from $from the cluster listing is not the node-local row alone"
    q -d "$db" -c "DELETE FROM cuckoo_cluster_filters"
    echo "upgrade: the update from $from unlists (with a warning) the cluster copy it cannot version and keeps the node-local row"
  fi
  if [ "$from" = 0.8.0 ]; then
    [ "$(q -d "$db" -c "SELECT aggtransfn::text || ' ' || aggtranstype::regtype::text || ' ' || pg_get_userbyid(p.proowner) FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid WHERE a.aggfnoid = 'cf_sharded_agg(circle)'::regprocedure")" = "intruder_trans bytea up_intruder" ] \
      || fail "the update from 0.8.0 changed an aggregate cf_sharded_agg the extension does not own"
    q -d "$db" -c "DROP AGGREGATE cf_sharded_agg(circle)" -c "DROP FUNCTION intruder_trans(bytea, circle)" -c "REVOKE CREATE ON SCHEMA public FROM up_intruder" -c "DROP ROLE up_intruder"
    echo "upgrade: the update from 0.8.0 leaves another role's cf_sharded_agg(circle) as it was"
  fi
  q -d "$db" -c "DROP VIEW v1_probe" -c "DROP VIEW v1_change"
  # New values are format 2 and combine with each other after the update.
  [ "$(q -d "$db" -c "SELECT cf_info(cf_union(cf_agg(g, 0.01, 100), cf_agg(g + 50, 0.01, 100))) ->> 'format_version' FROM generate_series(1, 50) g")" = 2 ] \
    || fail "cf_agg after the update from $from does not write format 2"
  echo "upgrade: $from -> $version keeps stored values' answers"
  q -d "$db" -f "$work/catalog.sql" > "$work/updated.txt"
  if ! diff -u "$work/fresh.txt" "$work/updated.txt"; then
    fail "the catalog updated from $from differs from a fresh install's (diff above: - fresh, + updated)"
  fi
  echo "upgrade: catalog after ALTER EXTENSION UPDATE from $from equals a fresh install ($lines lines compared)"
  q -d postgres -c "DROP DATABASE $db"
done

# Privileges on objects whose declarations 0.3.0 replaces carry over: cf_create
# (it gained an argument) revoked from PUBLIC and granted to a role whose name
# needs quoting, with grant option; the view revoked from PUBLIC and granted to
# one role.
q -d postgres -c "DROP DATABASE IF EXISTS up_acl" -c "CREATE DATABASE up_acl" \
  -c 'DROP ROLE IF EXISTS "Cuckoo Maker"' -c 'CREATE ROLE "Cuckoo Maker"' \
  -c "DROP ROLE IF EXISTS cuckoo_viewer" -c "CREATE ROLE cuckoo_viewer"
q -d up_acl -c "CREATE EXTENSION cuckoo VERSION '0.2.0'" \
  -c "REVOKE EXECUTE ON FUNCTION cf_create(text, bigint, float8) FROM PUBLIC" \
  -c 'GRANT EXECUTE ON FUNCTION cf_create(text, bigint, float8) TO "Cuckoo Maker" WITH GRANT OPTION' \
  -c "REVOKE SELECT ON cuckoo_filters FROM PUBLIC" -c "GRANT SELECT ON cuckoo_filters TO cuckoo_viewer" \
  -c "ALTER EXTENSION cuckoo UPDATE"
acl=$(q -d up_acl -c "SELECT concat_ws(' ',
  has_function_privilege('public', 'cf_create(text,bigint,float8,boolean,regtype,integer)', 'EXECUTE'),
  has_function_privilege('Cuckoo Maker', 'cf_create(text,bigint,float8,boolean,regtype,integer)', 'EXECUTE WITH GRANT OPTION'),
  has_function_privilege('public', 'cf_publish(text,cuckoofilter,boolean)', 'EXECUTE'),
  has_table_privilege('public', 'cuckoo_filters', 'SELECT'),
  has_table_privilege('cuckoo_viewer', 'cuckoo_filters', 'SELECT'))")
# What pg_dump takes for the extension's own privileges stays a fresh install's,
# so that the administrator's changes are dumped.
q -d up_acl -f "$work/catalog.sql" | grep '^initial privileges' > "$work/acl-init.txt" || true
grep '^initial privileges' "$work/fresh.txt" > "$work/fresh-init.txt" || true
[ -s "$work/fresh-init.txt" ] || fail "no initial privileges recorded by a fresh install"
diff -u "$work/fresh-init.txt" "$work/acl-init.txt" || fail "the update recorded the administrator's privileges as the extension's initial ones"
[ "$acl" = "f t t f t" ] || fail "privileges did not carry over (cf_create public, Cuckoo Maker with grant option, cf_publish public, view public, view cuckoo_viewer: $acl)"
echo "upgrade: privileges on the replaced cf_create and view carry over"
q -d postgres -c "DROP DATABASE up_acl" -c "DROP DATABASE up_new" -c 'DROP ROLE "Cuckoo Maker"' -c "DROP ROLE cuckoo_viewer"
