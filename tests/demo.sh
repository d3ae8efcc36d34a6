#!/usr/bin/env bash
# `make demo`: a throwaway cluster (user postgres, cuckoo preloaded) with sample
# data, showing cf_agg / cf_contains answering real queries.
set -euo pipefail
cd "$(dirname "$0")/.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-demo} PGPORT=${PGPORT:-5495}
tests/tools/cluster.sh start
trap 'tests/tools/cluster.sh stop' EXIT
tests/tools/cluster.sh psql -d postgres -c "DROP DATABASE IF EXISTS demo" -c "CREATE DATABASE demo" >/dev/null
tests/tools/cluster.sh psql -d demo -f tests/demo.sql
# Named filters are durable by default: WAL-logged and kept in files written at
# checkpoints for what changed, they come back after a restart (and after a
# crash; tests/durable/ shows both).
echo '== Durable: a checkpoint writes the filter to a file; a second one, with nothing changed, writes nothing.'
tests/tools/cluster.sh psql -q -d demo <<'SQL'
CHECKPOINT;
SELECT name, bytes, checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes FROM cuckoo_filters;
SELECT pg_current_wal_insert_lsn() AS before \gset
CHECKPOINT;
SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'before') AS wal_bytes_of_an_idle_checkpoint;
SQL
echo '== Durable: the server restarts, and the named filter is still there, with every key.'
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -m fast -w restart >/dev/null
tests/tools/cluster.sh psql -d demo -c "SELECT name, items, durable, state, (SELECT count(*) FROM flagged WHERE NOT cf_contains('flagged', account)) AS keys_missing FROM cuckoo_filters" \
  -c "SELECT cf_drop('flagged')"
