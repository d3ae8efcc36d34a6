#!/usr/bin/env bash
# `make bench`: SQL benchmarks against their references, in one run, in a
# throwaway cluster. Prints ratios; absolute times on a shared machine are noise.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-bench} PGPORT=${PGPORT:-5494}
tests/tools/cluster.sh start
trap 'tests/tools/cluster.sh stop' EXIT
# Parts: probe, build, space, sweep, large, exists, estimates, batched, bound (sql_bench.py), shared (shared_bench.sh, its own
# cluster), checkpoint (checkpoint_bench.sh: this release against 0.4.0, their own clusters) and keytype
# (keytype_bench.sh: a probe's cost against 0.5.0's) and growth (growth_bench.sh: lookups on a filter grown
# from 1,000 to 10M keys against filters made for 10M) and setops (setops_bench.sh: 1M keys loaded by one
# batched call against 1M one-key calls, time and WAL) and citus (citus_bench.sh: cf_sharded_agg pushed down
# on a Citus cluster against cf_agg's row-gather, its own cluster) and durable (durable_bench.sh: checkpoint WAL
# and files, an outage of cuckoo/, the first pass after a crash, against 0.9.0) and tenant (tenant_bench.sh:
# what issue 29's guards cost, against 0.10.0); all by default.
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(probe build space sweep large exists estimates batched bound shared checkpoint keytype growth setops citus durable tenant)
sql_parts=()
for p in "${parts[@]}"; do [ "$p" = shared ] || [ "$p" = checkpoint ] || [ "$p" = keytype ] || [ "$p" = growth ] || [ "$p" = setops ] || [ "$p" = citus ] || [ "$p" = durable ] || [ "$p" = tenant ] || sql_parts+=("$p"); done
[ ${#sql_parts[@]} -eq 0 ] || python3 tests/bench/sql_bench.py "${sql_parts[@]}"
# Part space also wrote its rows to target/bench/space.tsv: draw them.
if [[ " ${sql_parts[*]} " == *" space "* ]]; then
  python3 tests/bench/plot_space.py "${BENCH_SPACE_TSV:-target/bench/space.tsv}" docs/bits-per-item.svg
  echo "space: drew ${BENCH_SPACE_TSV:-target/bench/space.tsv} as docs/bits-per-item.svg"
fi
if [[ " ${parts[*]} " == *" shared "* ]]; then bash tests/bench/shared_bench.sh; fi
if [[ " ${parts[*]} " == *" checkpoint "* ]]; then bash tests/bench/checkpoint_bench.sh; fi
if [[ " ${parts[*]} " == *" keytype "* ]]; then bash tests/bench/keytype_bench.sh; fi
if [[ " ${parts[*]} " == *" growth "* ]]; then bash tests/bench/growth_bench.sh; fi
if [[ " ${parts[*]} " == *" setops "* ]]; then bash tests/bench/setops_bench.sh; fi
if [[ " ${parts[*]} " == *" citus "* ]]; then bash tests/bench/citus_bench.sh; fi
if [[ " ${parts[*]} " == *" durable "* ]]; then bash tests/bench/durable_bench.sh; fi
if [[ " ${parts[*]} " == *" tenant "* ]]; then bash tests/bench/tenant_bench.sh; fi
