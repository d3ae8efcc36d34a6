#!/usr/bin/env bash
# SQL-level tests against the installed extension in a throwaway cluster:
# pg_regress (tests/pg_regress), pg_isolation_regress (tests/pg_isolation:
# sessions whose steps interleave), then the dump/restore and COPY round trips, the
# 0.1.0 -> current update path, and a reinstall under a running session.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-regress} PGPORT=${PGPORT:-5496}
PG_REGRESS="$(dirname "$($PG_CONFIG --pgxs)")/../test/regress/pg_regress"
PG_ISOLATION_REGRESS="$(dirname "$($PG_CONFIG --pgxs)")/../test/isolation/pg_isolation_regress"
# Prepared transactions for tests/pg_isolation.
export CLUSTER_CONF="${CLUSTER_CONF:-}
max_prepared_transactions = 10"
out=$(mktemp -d /tmp/cuckoo-regress-out.XXXXXX)
chmod 777 "$out"
trap 'tests/tools/cluster.sh stop' EXIT
tests/tools/cluster.sh start

if ! "$PG_REGRESS" --host="$CLUSTER_DIR" --port="$PGPORT" --user=postgres \
     --inputdir=tests/pg_regress --outputdir="$out" --dbname=cuckoo_regress --schedule=tests/pg_regress/schedule; then
  cat "$out/regression.diffs" || true
  exit 1
fi
if ! "$PG_ISOLATION_REGRESS" --host="$CLUSTER_DIR" --port="$PGPORT" --user=postgres --use-existing \
     --inputdir=tests/pg_isolation --outputdir="$out/isolation" --dbname=cuckoo_regress --schedule=tests/pg_isolation/schedule; then
  cat "$out/isolation/regression.diffs" || true
  exit 1
fi
bash tests/roundtrip.sh
bash tests/upgrade.sh
bash tests/reinstall.sh
