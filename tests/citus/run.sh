#!/usr/bin/env bash
# cuckoo on a real Citus cluster (`make test-citus`, part of `make test`):
# builds Citus 13.2.2 if it is not installed (build-citus.sh of the shared
# tools, which installs its build dependencies), starts a coordinator and two
# workers on local ports with shared_preload_libraries = 'citus,cuckoo' (spelled '$libdir/citus,cuckoo' on two of the nodes),
# distributes tables over 32 shards (cluster.sh), then runs the scenarios,
# one per file, NN_*.sh in this directory, in order in one shell on that
# cluster (lib.sh: the shared helpers). Each file's header says what it
# proves:
#   01-02 cf_sharded_agg is pushed down (worker_partial_agg) and gives
#     cf_agg's filter byte for byte: whole table, GROUP BY, with fpp and
#     capacity; pre-screening with a filter in a reference table answers as
#     the semi-join;
#   03-05 by-name calls in distributed queries are never silently partial:
#     they fail (42704, 55000) unless the filter is a cluster copy
#     (cf_publish_cluster: identical on every node, lookups only) or declared
#     node-local (cf_node_local), which is right for co-located keys;
#   06 keys of every kind (numeric, date, timestamptz, an enum, arrays, inet,
#     varchar, bytea, text, smallint), none failing on the workers;
#   07 the partial states shipped: one key under 100 characters, and each
#     shard's within the Rice code's bound (figures printed);
#   08 key types (issue 30, item 5): cf_sharded_agg equals cf_agg for 16 key
#     types in 23 query shapes;
#   09-14 cluster copies whatever happens to nodes and to the coordinator
#     (issue 30): a node disabled during a publish, the coordinator killed
#     during one, a node added after one, a query straddling one, a name
#     claimed first by a role, rights per name.
# Against the installed cuckoo (run `make install` first). Ports CITUS_PORT
# (default 5470) and the two after it (and the third, for 11's node added),
# directory CITUS_DIR (default /tmp/cuckoo-citus); CITUS_KEEP=1 leaves the
# cluster running.
#   tests/citus/run.sh             every scenario
#   tests/citus/run.sh 12 07 ...   those, after the scenarios they need (the
#                                  "Needs:" line of each file)
# Stops at the first failure, naming the scenario; exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/../.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
BASE=${CITUS_DIR:-/tmp/cuckoo-citus}
PORT=${CITUS_PORT:-5470}
ROWS=${CITUS_ROWS:-200000}
source tests/citus/lib.sh
source tests/tools/scenarios.sh
scenarios_select tests/citus "$@"
source tests/citus/cluster.sh
ok "coordinator and 2 workers up ($(q coord -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), cuckoo $(q coord -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'"))"
# At exit: the scenario that failed, if one did; then what cluster.sh's own
# trap did (stop the nodes unless CITUS_KEEP=1).
scenario=""
finish() {
  scenarios_report $? citus
  [ "${CITUS_KEEP:-0}" = 1 ] || stop_all
}
trap finish EXIT
for f in "${scenario_files[@]}"; do
  scenario=$(basename "$f" .sh)
  echo "== citus $scenario"
  source "$f"
done
scenario=""
ok "done"
