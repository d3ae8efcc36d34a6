#!/usr/bin/env bash
# `make bench`: SQL benchmarks against their references, in one run, in a
# throwaway cluster. Prints ratios; absolute times on a shared machine are noise.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-bench} PGPORT=${PGPORT:-5494}
tests/cluster.sh start
trap 'tests/cluster.sh stop' EXIT
python3 tests/bench/sql_bench.py "$@"
