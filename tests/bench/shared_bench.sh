#!/usr/bin/env bash
# Named (shared-memory) cuckoo filters under concurrent pgbench load, each against
# a reference measured in the same run, interleaved, median of several rounds:
#
#   filter     SELECT cf_contains('f', :k)                   1M keys in a 2M filter
#   filter_d   SELECT cf_contains('fd', :k)                  the same, durable
#   btree      SELECT EXISTS (SELECT 1 FROM t WHERE k = :k)  1M-row bigint primary key
#   mix        50% cf_insert('g', <fresh key>), 50% cf_contains('g', :k)
#   lookup_g   cf_contains('g', :k) only, on the same 20M filter as mix
#   ins_d      SELECT cf_insert('dd', <random key>)          durable filter
#   ins_v      SELECT cf_insert('dv', <random key>)          durable => false
#   ins_t      INSERT INTO ti (k) VALUES (<random key>)      table with a btree index
#   ins_d_async, ins_t_async: ins_d and ins_t with synchronous_commit = off
#
# Durable filters are WAL-logged (one small record per insert, and each
# inserting transaction is committed like a table INSERT's: logged, flushed);
# the cluster runs with fsync = on and synchronous_commit = on so that commit
# flushes cost what they cost. f, g and dv are not durable, fd and dd are.
# Goals: filter_d/filter >= 0.95 (lookups unchanged), ins_d/ins_t >= 1.5; the
# asynchronous pair shows the ratio when commits do not wait for the disk.
#
# :k is random over 1..2M, so half the probes hit and half miss. The mix is two
# single-statement pgbench scripts weighted @1/@1 (pgbench picks one per
# transaction), so a mix transaction is one statement, like a lookup_g one, and
# the two TPS figures compare directly. Goals: filter/btree >= 1.0,
# mix/lookup_g >= 0.9. Absolute TPS on a shared machine is noise; read ratios.
#
# Keys are sent as :k::bigint in every script (the btree probe too), which is how
# an application calls cf_contains(text, anyelement) with a prepared statement:
# an untyped parameter cannot resolve anyelement. With SHARED_BENCH_KEY_TYPE=''
# the scripts send untyped keys; prepared mode then fails and the script falls
# back to the simple protocol for every contender, and says so.
#
# Env: SHARED_BENCH_SECONDS (20) per run, SHARED_BENCH_ROUNDS (3),
#      SHARED_BENCH_WARMUP (3) seconds per contender before round 1 (0: none),
#      SHARED_BENCH_KEY_TYPE (bigint), SHARED_BENCH_DIR (/tmp/cuckoo-shared-bench),
#      SHARED_BENCH_PORT (5493). CLUSTER_DIR/PGPORT are deliberately not
#      inherited, so a caller's own cluster (run.sh: 5494) is left alone.
set -euo pipefail
cd "$(dirname "$0")/../.."

SECONDS_PER_RUN=${SHARED_BENCH_SECONDS:-20}
ROUNDS=${SHARED_BENCH_ROUNDS:-3}
WARMUP=${SHARED_BENCH_WARMUP:-3}
KEY_TYPE=${SHARED_BENCH_KEY_TYPE-bigint}
export CLUSTER_DIR=${SHARED_BENCH_DIR:-/tmp/cuckoo-shared-bench}
export PGPORT=${SHARED_BENCH_PORT:-5493}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
DB=bench
KEYS=1000000            # rows in t and keys pre-filled into f and g
F_CAPACITY=2000000
G_CAPACITY=20000000     # ~64MB of shared memory: more than the 64MB default region
D_CAPACITY=30000000     # insert targets: room for what 8 clients insert in all the runs
SHMEM=384MB
CONTENDERS=(filter filter_d btree mix lookup_g ins_d ins_v ins_t ins_d_async ins_t_async)

started=$(date +%s)
work=$(mktemp -d /tmp/cuckoo-shared-bench-scripts.XXXXXX)
cleanup() { tests/tools/cluster.sh stop || true; rm -rf "$work"; }
trap cleanup EXIT

sql() { tests/tools/cluster.sh psql -d "$DB" -qAt "$@"; }

# --- cluster ----------------------------------------------------------------
# CLUSTER_CONF is honoured by cluster.sh versions that support it, on a fresh
# cluster only; otherwise ALTER SYSTEM and a restart do the same.
export CLUSTER_CONF="cuckoo.shared_memory = $SHMEM
fsync = on
synchronous_commit = on"
tests/tools/cluster.sh start
if [ "$(tests/tools/cluster.sh psql -d postgres -qAt -c 'SHOW cuckoo.shared_memory')" != "$SHMEM" ]; then
  tests/tools/cluster.sh psql -d postgres -q -c "ALTER SYSTEM SET cuckoo.shared_memory = '$SHMEM'"
  tests/tools/cluster.sh start   # a running cluster is restarted
fi
tests/tools/cluster.sh psql -d postgres -q -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"

echo "setup: t(k bigint primary key) with $KEYS keys, filters f ($F_CAPACITY) and g ($G_CAPACITY)"
sql -c "CREATE EXTENSION cuckoo" \
    -c "CREATE TABLE t (k bigint PRIMARY KEY)" \
    -c "INSERT INTO t SELECT g FROM generate_series(1, $KEYS) g" \
    -c "VACUUM ANALYZE t" \
    -c "CREATE TABLE ti (k bigint)" -c "CREATE INDEX ON ti (k)" \
    -c "SELECT cf_create('f', $F_CAPACITY, durable => false)" \
    -c "SELECT cf_create('fd', $F_CAPACITY)" \
    -c "SELECT cf_create('g', $G_CAPACITY, durable => false)" \
    -c "SELECT cf_create('dd', $D_CAPACITY)" \
    -c "SELECT cf_create('dv', $D_CAPACITY, durable => false)" >/dev/null
for name in f fd g; do
  n=$(sql -c "SELECT count(*) FILTER (WHERE cf_insert('$name', k)) FROM t")
  if [ "$n" != "$KEYS" ]; then
    echo "filling $name inserted $n of $KEYS keys" >&2
    exit 1
  fi
done
sql -c "SELECT count(*) FROM t WHERE k > 0" >/dev/null   # pull t's heap into shared_buffers

# --- pgbench scripts ---------------------------------------------------------
key=":k${KEY_TYPE:+::$KEY_TYPE}"
key2=":k2${KEY_TYPE:+::$KEY_TYPE}"
set_k='\set k random(1, 2000000)'
printf '%s\nSELECT cf_contains('"'f'"', %s);\n' "$set_k" "$key" > "$work/filter.sql"
printf '%s\nSELECT EXISTS (SELECT 1 FROM t WHERE k = %s);\n' "$set_k" "$key" > "$work/btree.sql"
printf '%s\nSELECT cf_contains('"'g'"', %s);\n' "$set_k" "$key" > "$work/lookup_g.sql"
printf '%s\nSELECT cf_insert('"'g'"', %s);\n' '\set k2 random(3000000, 1000000000)' "$key2" > "$work/insert_g.sql"
printf '%s\nSELECT cf_contains('"'fd'"', %s);\n' "$set_k" "$key" > "$work/filter_d.sql"
printf '%s\nSELECT cf_insert('"'dd'"', %s);\n' '\set k2 random(1, 1000000000)' "$key2" > "$work/ins_d.sql"
printf '%s\nSELECT cf_insert('"'dv'"', %s);\n' '\set k2 random(1, 1000000000)' "$key2" > "$work/ins_v.sql"
printf '%s\nINSERT INTO ti (k) VALUES (%s);\n' '\set k2 random(1, 1000000000)' "$key2" > "$work/ins_t.sql"

script_args() {
  case $1 in
    filter)   echo "-f $work/filter.sql" ;;
    filter_d) echo "-f $work/filter_d.sql" ;;
    ins_d)    echo "-f $work/ins_d.sql" ;;
    ins_v)    echo "-f $work/ins_v.sql" ;;
    ins_t)    echo "-f $work/ins_t.sql" ;;
    ins_d_async) echo "-f $work/ins_d.sql" ;;
    ins_t_async) echo "-f $work/ins_t.sql" ;;
    btree)    echo "-f $work/btree.sql" ;;
    mix)      echo "-f $work/insert_g.sql@1 -f $work/lookup_g.sql@1" ;;
    lookup_g) echo "-f $work/lookup_g.sql" ;;
  esac
}

# --- query mode ----------------------------------------------------------------
log_lines() { wc -l < "$CLUSTER_DIR/server.log"; }
MODE=prepared
probe_log_start=$(log_lines)
if ! probe=$("$PGBENCH" -n -c 1 -j 1 -t 1 -M prepared -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres \
             -f "$work/filter.sql" "$DB" 2>&1); then
  MODE=simple
  echo "NOTE: -M prepared failed for $(tail -n 1 "$work/filter.sql")"
  grep -m 1 'ERROR' <<<"$probe" | sed 's/^/      /' || true
  echo "      falling back to -M simple (literal keys) for every contender"
fi
bench_log_start=$(log_lines)

# --- runs ----------------------------------------------------------------------
declare -A TPS TXNS
[ "$MODE" = prepared ] && TXNS[filter]=1   # the probe's one lookup
# Runs one contender for $2 seconds; sets RUN_TPS and adds its transactions to TXNS.
# (pgbench's per-script counts are not used: its threads add to them unlocked.)
run() {
  local name=$1 secs=$2 out
  # shellcheck disable=SC2046  # script_args is a word list of paths without spaces
  local opts=""
  [[ $name == *_async ]] && opts="-c synchronous_commit=off"
  if ! out=$(PGOPTIONS="$opts" "$PGBENCH" -n -c 8 -j 2 -T "$secs" -M "$MODE" -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres \
             $(script_args "$name") "$DB" 2>&1); then
    echo "pgbench $name failed:" >&2
    echo "$out" >&2
    exit 1
  fi
  RUN_TPS=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
  if [ -z "$RUN_TPS" ] || ! grep -q '^number of failed transactions: 0 ' <<<"$out"; then
    echo "pgbench $name: no tps line or failed transactions:" >&2
    echo "$out" >&2
    exit 1
  fi
  TXNS[$name]=$(( ${TXNS[$name]:-0} + $(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out") ))
}

echo "pgbench -n -c 8 -j 2 -T $SECONDS_PER_RUN -M $MODE, $ROUNDS rounds, order rotated each round"
if [ "$WARMUP" -gt 0 ]; then
  for name in "${CONTENDERS[@]}"; do run "$name" "$WARMUP"; done
fi
printf '%-6s %-9s %12s\n' round contender tps
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#CONTENDERS[@]}; i++)); do
    name=${CONTENDERS[$(( (i + r) % ${#CONTENDERS[@]} ))]}
    run "$name" "$SECONDS_PER_RUN"
    TPS[$name]="${TPS[$name]:-} $RUN_TPS"
    printf '%-6s %-9s %12.0f\n' $((r + 1)) "$name" "$RUN_TPS"
  done
done

# --- summary -------------------------------------------------------------------
source tests/bench/lib.sh
declare -A MED
echo
echo "median TPS over $ROUNDS rounds of ${SECONDS_PER_RUN}s (-M $MODE, 8 clients):"
printf '  %-9s %12s   %s\n' contender median "all rounds"
for name in "${CONTENDERS[@]}"; do
  MED[$name]=$(median <<<"${TPS[$name]}")
  printf '  %-9s %12.0f   %s\n' "$name" "${MED[$name]}" "$(printf '%.0f ' ${TPS[$name]})"
done
ratio() {  # name, numerator, denominator, goal
  awk -v n="$2" -v d="$3" -v g="$4" -v l="$1" \
    'BEGIN {r = n / d; printf "  %-18s %6.3f   goal >= %.2f  %s\n", l, r, g, (r >= g) ? "ok" : "BELOW GOAL"}'
}
echo "ratios of medians:"
ratio "filter/btree" "${MED[filter]}" "${MED[btree]}" 1.0
ratio "mix/lookup_g" "${MED[mix]}" "${MED[lookup_g]}" 0.9
ratio "filter_d/filter" "${MED[filter_d]}" "${MED[filter]}" 0.95
ratio "ins_d/ins_t" "${MED[ins_d]}" "${MED[ins_t]}" 1.5
awk -v d="${MED[ins_d]}" -v v="${MED[ins_v]}" 'BEGIN {printf "  %-18s %6.3f   (the cost of logging and committing durably)\n", "ins_d/ins_v", d / v}'
awk -v d="${MED[ins_d_async]}" -v t="${MED[ins_t_async]}" 'BEGIN {printf "  %-18s %6.3f   (synchronous_commit = off: no wait for the disk)\n", "ins_d/ins_t async", d / t}'

echo
echo "named filters after the runs:"
tests/tools/cluster.sh psql -d "$DB" -q -P footer=off -c "
  SELECT name, capacity, items, round(load_factor::numeric, 4) AS load_factor, inserts, lookups,
         failed_inserts, lookup_retries, kicks
  FROM cuckoo_filters ORDER BY name"
# Counter check: every transaction is exactly one cf_* call on one filter.
read -r f_lookups g_inserts g_lookups < <(sql -F ' ' -c "
  SELECT (SELECT lookups FROM cuckoo_filters WHERE name = 'f'),
         (SELECT inserts FROM cuckoo_filters WHERE name = 'g'),
         (SELECT lookups FROM cuckoo_filters WHERE name = 'g')")
g_calls=$(( ${TXNS[mix]:-0} + ${TXNS[lookup_g]:-0} ))
echo "counters vs pgbench transactions (warm-up included):"
printf '  %-32s %10d   filter transactions   %10d\n' "f.lookups" "$f_lookups" "${TXNS[filter]:-0}"
printf '  %-32s %10d   mix + lookup_g        %10d\n' "g.inserts - $KEYS + g.lookups" \
  $(( g_inserts - KEYS + g_lookups )) "$g_calls"
printf '  %-32s %10s\n' "insert share of mix" \
  "$(awk -v i=$(( g_inserts - KEYS )) -v m="${TXNS[mix]:-0}" 'BEGIN {printf "%.3f", m ? i / m : 0}')"

new_errors=$(tail -n +"$((bench_log_start + 1))" "$CLUSTER_DIR/server.log" | grep -E 'ERROR|FATAL|PANIC|WARNING|terminated by signal' || true)
if [ -n "$new_errors" ]; then
  echo "server log: problems during the runs ($CLUSTER_DIR/server.log):"
  head -n 20 <<<"$new_errors" | sed 's/^/  /'
else
  echo "server log: no ERROR/WARNING/FATAL/PANIC during the runs" \
       "($((bench_log_start - probe_log_start)) lines from the query-mode probe before them)"
fi
echo "total runtime: $(( $(date +%s) - started ))s"
