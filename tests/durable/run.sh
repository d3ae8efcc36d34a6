#!/usr/bin/env bash
# Durable named filters (`make test-durable`), against the installed extension
# in throwaway clusters: one scenario per file, NN_*.sh in this directory, run
# in order in one shell on one main cluster (lib.sh: the clusters, their
# ports and directories, the shared helpers). Each file's header says what it
# proves:
#   01 a clean restart; 02 crashes of one backend during inserts (ten kill -9s,
#   transactions that only insert, full filters); 02b batched calls and a
#   crash; 02c publishes, grants and drops racing checkpoints; 02d the
#   durability worker terminated; 03 kill -9 of the postmaster; 03b a filter
#   that grows to 2M keys under a standby; 04 a streaming standby, promoted;
#   04b point-in-time recovery; 05 a region too small at restart; 06 a corrupt
#   WAL record; 07 no durability worker; 08 what checkpoints write; 09 a crash
#   right after a clean restart; 10 a crash while a cut is half written;
#   11 damaged files; 11b a cut that cannot be written; 12 a base backup
#   copied by hand during a cut; 13 a clean switchover; 14 a server that ran
#   0.4.0; 15 a server that ran 0.5.0.
#   tests/durable/run.sh             every scenario
#   tests/durable/run.sh 04b 11 ...  those, after the scenarios they need (the
#                                    "Needs:" line of each file)
# Stops at the first failure, naming the scenario; exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/durable/lib.sh
source tests/tools/scenarios.sh
scenarios_select tests/durable "$@"
scenario=""
finish() {
  scenarios_report $? durability
  cleanup
}
trap finish EXIT
durable_start
for f in "${scenario_files[@]}"; do
  scenario=$(basename "$f" .sh)
  echo "== durability $scenario (at ${SECONDS} s)"
  source "$f"
done
scenario=""
echo "durability tests passed (${SECONDS} s)"
