#!/usr/bin/env bash
# Durable filters at checkpoints: this release against 0.4.0 in the same run
# (0.4.0 built once from this repository's history by tests/tools/old-build.sh and
# run from a private tree by tests/tools/pgtree.sh), each in its own cluster with
# fsync on:
#
#   wal        WAL bytes one CHECKPOINT writes after N keys were inserted
#              (N = 0, 100, 10k, 1M, then 1M again, which makes this release
#              write a new base, to the WAL too) into a durable filter sized for
#              10M keys holding 2M (21 MB); also the bytes of files it writes
#              (0.4.0 writes none: its images go to the WAL) and the WAL the
#              inserts themselves wrote (the same for both)
#   region     CHECKPOINT duration (the server's own "checkpoint complete ...
#              total=" figure) with the default 64 MB region full of durable
#              filters: idle, and after 1% more keys went into each
#   inserts    durable cf_insert transactions per second (pgbench, 2 clients,
#              synchronous_commit on), 0.4.0 and this release interleaved,
#              median of rounds; and the 99th percentile and the maximum
#              insert latency, without checkpoints and with a CHECKPOINT every
#              second meanwhile (the pause a checkpoint imposes on writers)
#
# Prints figures side by side and ratios (this release / 0.4.0); absolute times
# on a shared machine are noise.
# Env: CKPT_BENCH_ROUNDS (3), CKPT_BENCH_SECONDS (10) per pgbench run.
set -euo pipefail
cd "$(dirname "$0")/../.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ROUNDS=${CKPT_BENCH_ROUNDS:-3}
SECS=${CKPT_BENCH_SECONDS:-10}
source tests/bench/lib.sh
pair_init ckpt 0.4.0 94ac4d7038371d5c93bb138a9f92c66fe4e060b7 5491 5492
start() { # version
  pair_start "$1" "max_wal_size = 8GB
checkpoint_timeout = 1h"
  q "$1" -c "CREATE EXTENSION cuckoo" >/dev/null
}
# The last "checkpoint complete" total time in a server's log, in ms.
last_ckpt_ms() { grep -o 'checkpoint complete:.*total=[0-9.]* s' "$(dir "$1")/server.log" | tail -1 | sed 's/.*total=\([0-9.]*\) s/\1/' | awk '{printf "%d", $1 * 1000}'; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

for v in old new; do start "$v"; done
echo "checkpoint bench: 0.4.0 = $(q old -c "SELECT cuckoo_library_version()"), this release = $(q new -c "SELECT cuckoo_library_version()")"

# ---- wal: WAL and files per checkpoint against the keys changed -----------------
printf '\n%-10s %14s %14s %8s %14s %14s\n' "keys" "0.4.0 WAL" "WAL" "ratio" "files" "inserts' WAL"
next=3000000
for v in old new; do
  q "$v" -c "SELECT cf_publish('big', cf_agg(g, 0.002, 10000000)) FROM generate_series(1, 2000000) g" -c "CHECKPOINT" -c "CHECKPOINT" >/dev/null
done
for n in 0 100 10000 1000000 1000000; do
  declare -A W=() I=()
  for v in old new; do
    a=$(lsn "$v")
    [ "$n" -eq 0 ] || q "$v" -c "SELECT count(*) FROM generate_series($next, $next + $n - 1) g WHERE cf_insert('big', g)" >/dev/null
    b=$(lsn "$v")
    q "$v" -c "CHECKPOINT" >/dev/null
    c=$(lsn "$v")
    W[$v]=$(diff_lsn "$v" "$b" "$c")
    I[$v]=$(diff_lsn "$v" "$a" "$b")
  done
  files=$(q new -c "SELECT checkpoint_write_bytes FROM cuckoo_filters WHERE name = 'big'")
  [ "$n" -eq 0 ] && files=0
  printf '%-10s %14s %14s %8s %14s %14s\n' "$n" "${W[old]}" "${W[new]}" "$(ratio "${W[new]}" "${W[old]}")" "$files" "${I[new]}"
  total_old=$(( ${total_old:-0} + ${W[old]} )) total_new=$(( ${total_new:-0} + ${W[new]} ))
  next=$((next + n))
done
printf '%-10s %14s %14s %8s\n' "all five" "$total_old" "$total_new" "$(ratio "$total_new" "$total_old")"
echo "(filter: $(q new -c "SELECT bytes FROM cuckoo_filters WHERE name = 'big'") bytes in shared memory; 'files' is 0 when nothing changed: no cut is made)"

# ---- region: checkpoint duration with the default region full --------------------
for v in old new; do
  q "$v" -c "SELECT cf_drop('big')" >/dev/null
  q "$v" -c "DO \$\$ DECLARE i int := 0; BEGIN
      LOOP
        BEGIN
          PERFORM cf_publish('r' || i, cf_agg(g, 0.002, CASE WHEN i < 2 THEN 10000000 ELSE 1000000 END))
             FROM generate_series(1, CASE WHEN i < 2 THEN 5000000 ELSE 500000 END) g;
        EXCEPTION WHEN out_of_memory THEN EXIT; END;
        i := i + 1;
      END LOOP; END \$\$" -c "CHECKPOINT" >/dev/null
done
printf '\n%-28s %10s %10s %8s\n' "full region, checkpoint ms" "0.4.0" "this" "ratio"
declare -A T=()
for v in old new; do q "$v" -c "CHECKPOINT" >/dev/null; T[$v]=$(last_ckpt_ms "$v"); done
printf '%-28s %10s %10s %8s\n' "idle" "${T[old]}" "${T[new]}" "$(ratio "${T[new]}" "${T[old]}")"
for v in old new; do
  q "$v" -c "SELECT sum((SELECT count(*) FROM generate_series(100000000 + i * 1000000, 100000000 + i * 1000000 + (items / 100)::int) g WHERE cf_insert(name, g))) FROM (SELECT name, items, row_number() OVER (ORDER BY name) AS i FROM cuckoo_filters) f" >/dev/null
  q "$v" -c "CHECKPOINT" >/dev/null; T[$v]=$(last_ckpt_ms "$v")
done
printf '%-28s %10s %10s %8s\n' "after 1% more keys in each" "${T[old]}" "${T[new]}" "$(ratio "${T[new]}" "${T[old]}")"
echo "(region: $(q new -c "SELECT count(*) || ' durable filters, ' || sum(bytes) || ' bytes' FROM cuckoo_filters"); this release wrote $(q new -c "SELECT sum(checkpoint_write_bytes) FROM cuckoo_filters") bytes of files at that checkpoint)"

# ---- inserts: durable insert rate, and insert latency under checkpoints ----------
for v in old new; do
  # A filter of fixed size in both (0.7.0's cf_create makes one that grows).
  fixed=""; [ "$v" = new ] && fixed=", expansion => 0"
  q "$v" -c "SELECT cf_drop(name) FROM cuckoo_filters" -c "SELECT cf_create('dd', 30000000$fixed)" -c "CHECKPOINT" >/dev/null
done
echo 'SELECT cf_insert('"'dd'"', (random() * 1e15)::bigint);' > "$work/ins.sql"
chmod 644 "$work/ins.sql"
bench() { # version, log prefix or ''
  local v=$1 log=${2:-} args=()
  [ -n "$log" ] && args=(-l --log-prefix="$log")
  (cd "$work" && "$PGBIN/pgbench" -n -h "$(dir "$v")" -p "${PORT[$v]}" -U postgres -c 2 -j 2 -T "$SECS" -f "$work/ins.sql" "${args[@]}" postgres 2>/dev/null) \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
declare -A TPS=([old]="" [new]="")
for r in $(seq 1 "$ROUNDS"); do
  for v in old new; do TPS[$v]="${TPS[$v]} $(bench "$v")"; done
done
mo=$(tr ' ' '\n' <<<"${TPS[old]}" | grep . | median); mn=$(tr ' ' '\n' <<<"${TPS[new]}" | grep . | median)
printf '\n%-40s %10s %10s %8s\n' "durable inserts" "0.4.0" "this" "ratio"
printf '%-40s %10s %10s %8s\n' "tps (median of $ROUNDS)" "$mo" "$mn" "$(ratio "$mn" "$mo")"
declare -A P99=() MAX=()
latency() { # version, name, with checkpoints (1/0)
  local v=$1 loop=""
  if [ "$3" = 1 ]; then
    ( end=$((SECONDS + SECS)); while [ $SECONDS -lt $end ]; do q "$v" -c "CHECKPOINT" >/dev/null 2>&1 || true; sleep 1; done ) & loop=$!
  fi
  bench "$v" "$2" >/dev/null
  [ -z "$loop" ] || wait "$loop"
  # pgbench's log: client, transaction, latency in microseconds, ...
  cat "$work/$2".* | awk '{print $3}' | sort -n | awk '{a[NR] = $1} END {printf "%.1f %.1f\n", a[int(NR * 0.99)] / 1000, a[NR] / 1000}'
}
for with in 0 1; do
  for v in old new; do read -r P99[$v] MAX[$v] < <(latency "$v" "lat_${v}_$with" "$with"); done
  what=$([ "$with" = 1 ] && echo "a CHECKPOINT every second" || echo "no checkpoint")
  printf '%-40s %10s %10s %8s\n' "p99 ms, $what" "${P99[old]}" "${P99[new]}" "$(ratio "${P99[new]}" "${P99[old]}")"
  printf '%-40s %10s %10s %8s\n' "max ms, $what" "${MAX[old]}" "${MAX[new]}" "$(ratio "${MAX[new]}" "${MAX[old]}")"
done
echo "(the filter 'dd' holds $(q new -c "SELECT items FROM cuckoo_filters WHERE name = 'dd'") keys in this release's cluster at the end)"
