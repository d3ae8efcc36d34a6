#!/usr/bin/env bash
# Set operations (`make bench`, part setops): loading KEYS keys into a named
# filter with one batched call against KEYS one-key calls in one statement, in
# one cluster, interleaved rounds, median times and ratios; and the WAL each
# writes per key (pg_current_wal_insert_lsn before and after: the whole
# cluster's WAL, of which the load is all there is).
#
#   single   SELECT count(*) FILTER (WHERE cf_insert('f', g)) FROM generate_series(1, KEYS) g
#   batched  SELECT KEYS - cardinality(array_positions(cf_insert('f', ARRAY(SELECT generate_series(1, KEYS))), false))
#
# (the batched form counts the keys it stored from the positions of the
# refused ones: what a loader checks) for cf_insert and cf_insert_new,
# durable and not, each into a new filter made
# for KEYS keys. Goals (issue 20): durable batched >= 3x single with fewer WAL
# bytes per key; non-durable batched >= 1.5x single. Also the share of new keys
# that cf_insert_new refused (false positives of the keys inserted before).
#
# Env: SETOPS_BENCH_KEYS (1000000), SETOPS_BENCH_ROUNDS (3),
#      SETOPS_BENCH_DIR (/tmp/cuckoo-setops-bench), SETOPS_BENCH_PORT (5486).
set -euo pipefail
cd "$(dirname "$0")/../.."
KEYS=${SETOPS_BENCH_KEYS:-1000000}
ROUNDS=${SETOPS_BENCH_ROUNDS:-3}
export CLUSTER_DIR=${SETOPS_BENCH_DIR:-/tmp/cuckoo-setops-bench}
export PGPORT=${SETOPS_BENCH_PORT:-5486}
cleanup() { tests/tools/cluster.sh stop || true; }
trap cleanup EXIT
export CLUSTER_CONF="cuckoo.shared_memory = 128MB"
tests/tools/cluster.sh start
sql() { tests/tools/cluster.sh psql -d postgres -qAt "$@"; }
sql -c "DROP EXTENSION IF EXISTS cuckoo" -c "CREATE EXTENSION cuckoo" >/dev/null
source tests/bench/lib.sh

# One load: prints "seconds wal_bytes stored".
load() { # function durable form
  local fn=$1 durable=$2 form=$3 q t0 t1 w0 w1 n
  sql -c "SELECT cf_drop('f')" -c "SELECT cf_create('f', $KEYS, durable => $durable)" -c "CHECKPOINT" >/dev/null
  if [ "$form" = single ]; then
    q="SELECT count(*) FILTER (WHERE $fn('f', g)) FROM generate_series(1, $KEYS) g"
  else
    q="SELECT $KEYS - cardinality(array_positions($fn('f', ARRAY(SELECT generate_series(1, $KEYS))), false))"
  fi
  w0=$(sql -c "SELECT pg_current_wal_insert_lsn()")
  t0=$(date +%s.%N)
  n=$(sql -c "$q")
  t1=$(date +%s.%N)
  w1=$(sql -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$w0')")
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}') $w1 $n"
}

declare -A T W N
echo "setops: $KEYS keys per load, $ROUNDS rounds, order alternated"
cases=()
for fn in cf_insert cf_insert_new; do
  for durable in true false; do
    cases+=("$fn $durable")
  done
done
for ((r = 0; r < ROUNDS; r++)); do
  for c in "${cases[@]}"; do
    forms=(single batched)
    ((r % 2)) && forms=(batched single)
    for form in "${forms[@]}"; do
      read -r secs wal n < <(load $c "$form")
      key="$c $form"
      T[$key]="${T[$key]:-} $secs"; W[$key]=$wal; N[$key]=$n
      printf '  round %d %-13s durable=%-5s %-7s %7.3f s  %9.1f WAL bytes/key  %d stored\n' $((r + 1)) ${c% *} ${c#* } "$form" "$secs" \
        "$(awk -v w="$wal" -v k="$KEYS" 'BEGIN {print w / k}')" "$n"
      if [ "$n" -lt $((KEYS * 99 / 100)) ]; then echo "setops bench: $key stored only $n of $KEYS keys" >&2; exit 1; fi
    done
  done
done
echo "medians (batched against single-key calls in one statement):"
printf '  %-13s %-7s %10s %10s %8s %12s %12s %s\n' function durable single_s batched_s speedup wal/key_1 wal/key_b goal
for c in "${cases[@]}"; do
  s=$(median <<<"${T[$c single]}"); b=$(median <<<"${T[$c batched]}")
  ws=${W[$c single]}; wb=${W[$c batched]}
  awk -v f="${c% *}" -v d="${c#* }" -v s="$s" -v b="$b" -v ws="$ws" -v wb="$wb" -v k="$KEYS" 'BEGIN {
    r = s / b; goal = (d == "true") ? 3 : 1.5
    verdict = (r >= goal) ? "ok" : "BELOW GOAL"
    if (d == "true" && wb >= ws) verdict = verdict ", WAL NOT SMALLER"
    printf "  %-13s %-7s %10.3f %10.3f %7.2fx %12.1f %12.1f >= %.1fx %s\n", f, d, s, b, r, ws / k, wb / k, goal, verdict }'
done
# cf_insert_new of KEYS new keys: those refused looked present (false
# positives of the keys before them).
for c in "cf_insert_new false"; do
  n=${N[$c batched]}
  awk -v n="$n" -v k="$KEYS" 'BEGIN {printf "cf_insert_new of %d new keys: %d refused as maybe present (%.4f%%; the filter bound is 0.2%% at capacity)\n", k, k - n, 100 * (k - n) / k}'
done
