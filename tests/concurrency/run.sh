#!/usr/bin/env bash
# Named filters under concurrency, cancellation and exhaustion, against the
# installed extension in a throwaway cluster with a small region (16 MB;
# lib.sh), one scenario per file, NN_*.sh in this directory, run in order in
# one shell (each file's header says what it proves):
#   01 stress: CUCKOO_CLIENTS (default 4) sessions insert, probe and delete on
#      one filter at once, each checking its own keys; 01b snapshots and
#      registry changes under concurrent writers;
#   02 cancellation: statement_timeout, pg_cancel_backend and
#      pg_terminate_backend interrupt bulk inserts; the counts are exact;
#   03 exhaustion: 53200 when the region is full, dropped space reused;
#   03b growth under concurrency, and a filter that grows until the region
#      has no room; 03c insert if new: sessions offering the same keys;
#   04 without shared_preload_libraries the functions explain what to do.
#   tests/concurrency/run.sh            every scenario
#   tests/concurrency/run.sh 02 03c ... those
# Stops at the first failure, naming the scenario; exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/concurrency/lib.sh
source tests/tools/scenarios.sh
scenarios_select tests/concurrency "$@"
scenario=""
finish() {
  scenarios_report $? concurrency
  tests/tools/cluster.sh stop
}
tests/tools/cluster.sh stop 2>/dev/null; rm -rf "$CLUSTER_DIR"
trap finish EXIT
tests/tools/cluster.sh start
psql -c "CREATE EXTENSION cuckoo"
started=$(psql -c "SELECT pg_postmaster_start_time()")
for f in "${scenario_files[@]}"; do
  scenario=$(basename "$f" .sh)
  source "$f"
done
scenario=""
echo "concurrency tests passed"
