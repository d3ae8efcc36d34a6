#!/usr/bin/env bash
# Client drivers as applications use them: psycopg 3, asyncpg and node-postgres,
# installed into target/clients/ (a Python virtual environment and a local
# node_modules, pinned versions), run the README's recipes as written (no casts)
# against a throwaway cluster and compare every answer with the same question
# asked in typed SQL (tests/clients/clients.py, tests/clients/clients.js).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-clients} PGPORT=${PGPORT:-5488}
root=$PWD/target/clients
if [ ! -x "$root/venv/bin/python" ] || ! "$root/venv/bin/python" -c "import psycopg, asyncpg" 2>/dev/null; then
  rm -rf "$root/venv"
  python3 -m venv "$root/venv"
  "$root/venv/bin/pip" install -q --disable-pip-version-check "psycopg[binary]==3.2.13" "asyncpg==0.30.0"
fi
if [ ! -f "$root/node/node_modules/pg/package.json" ]; then
  mkdir -p "$root/node"
  npm install --silent --no-audit --no-fund --prefix "$root/node" pg@8.23.1 >/dev/null
fi
trap 'tests/tools/cluster.sh stop' EXIT
tests/tools/cluster.sh start
tests/tools/cluster.sh psql -d postgres -qAt -c "DROP DATABASE IF EXISTS clients" -c "CREATE DATABASE clients"
tests/tools/cluster.sh psql -d clients -qAt -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION cuckoo;
-- Keys: integers 1..1000, strings 'k1'..'k1000', uuids md5('u1')..md5('u1000').
CREATE TABLE ints AS SELECT g::bigint AS k FROM generate_series(1, 1000) g;
CREATE TABLE strs AS SELECT 'k' || g AS k FROM generate_series(1, 1000) g;
CREATE TABLE uuids AS SELECT md5('u' || g)::uuid AS k FROM generate_series(1, 1000) g;
SELECT cf_publish('ints', cf_agg(k)) FROM ints;
SELECT cf_publish('strs', cf_agg(k)) FROM strs;
SELECT cf_publish('uuids', cf_agg(k)) FROM uuids;
CREATE TABLE filters AS
  SELECT 'ints' AS name, cf_agg(k) AS f FROM ints
  UNION ALL SELECT 'strs', cf_agg(k) FROM strs
  UNION ALL SELECT 'uuids', cf_agg(k) FROM uuids;
SQL
status=0
"$root/venv/bin/python" tests/clients/clients.py || status=1
NODE_PATH="$root/node/node_modules" node tests/clients/clients.js || status=1
exit $status
