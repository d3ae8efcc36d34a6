#!/usr/bin/env bash
# `make demo`: a throwaway cluster (user postgres, cuckoo preloaded) with sample
# data, showing cf_agg / cf_contains answering real queries.
set -euo pipefail
cd "$(dirname "$0")/.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-demo} PGPORT=${PGPORT:-5495}
tests/cluster.sh start
trap 'tests/cluster.sh stop' EXIT
tests/cluster.sh psql -d postgres -c "DROP DATABASE IF EXISTS demo" -c "CREATE DATABASE demo" >/dev/null
tests/cluster.sh psql -d demo -f tests/demo.sql
