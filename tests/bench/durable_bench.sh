#!/usr/bin/env bash
# The operating cost of durability on every node (0.10.0) against 0.9.0 in the
# same run (0.9.0 built once from this repository's history by
# tests/tools/old-build.sh and run from a private tree by tests/tools/pgtree.sh), each in
# its own cluster with fsync on, a durable filter sized for 10M keys holding 2M
# (21 MB):
#
#   idle       WAL bytes of a CHECKPOINT when no filter changed (this release
#              adds its PASS record), median of three
#   100 keys   WAL bytes and file bytes of the CHECKPOINT after 100 inserts, and
#              both as a share of the filter's bytes
#   outage     WAL bytes written during 20 s with cuckoo/ unwritable while a
#              compaction is due (0.9.0 logged the base again at every retry,
#              every second; this release logs it once)
#   recovery   (this release) WAL of the first pass after a crash that followed
#              100 inserts: the base of the filter the end of recovery wrote
#
# Prints figures side by side and ratios (this release / 0.9.0).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTAGE=${DURABLE_BENCH_OUTAGE:-20}
source tests/bench/lib.sh
pair_init durable 0.9.0 eab3af3fbe5943cc8da26025dfb949fc4040d87d 5495 5496
start() { # version
  pair_start "$1" "max_wal_size = 8GB
checkpoint_timeout = 1h"
  q "$1" -c "CREATE EXTENSION cuckoo" >/dev/null
}
share() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f%%", 100 * a / b }'; }

for v in old new; do start "$v"; done
echo "durable bench: 0.9.0 = $(q old -c "SELECT cuckoo_library_version()"), this release = $(q new -c "SELECT cuckoo_library_version()")"
for v in old new; do
  q "$v" -c "SELECT cf_publish('big', cf_agg(g, 0.002, 10000000)) FROM generate_series(1, 2000000) g" -c "CHECKPOINT" -c "CHECKPOINT" >/dev/null
done
fbytes=$(q new -c "SELECT bytes FROM cuckoo_filters WHERE name = 'big'")

# ---- idle and 100 keys ---------------------------------------------------------
declare -A IDLE=() W100=() F100=()
for v in old new; do
  IDLE[$v]=$(for _ in 1 2 3; do a=$(lsn "$v"); q "$v" -c "CHECKPOINT" >/dev/null; b=$(lsn "$v"); diff_lsn "$v" "$a" "$b"; done | median)
  q "$v" -c "SELECT count(*) FROM generate_series(3000001, 3000100) g WHERE cf_insert('big', g)" >/dev/null
  a=$(lsn "$v"); q "$v" -c "CHECKPOINT" >/dev/null; b=$(lsn "$v")
  W100[$v]=$(diff_lsn "$v" "$a" "$b")
  F100[$v]=$(q "$v" -c "SELECT checkpoint_write_bytes FROM cuckoo_filters WHERE name = 'big'")
done
printf '\n%-34s %12s %12s %8s\n' "checkpoint of a $fbytes-byte filter" "0.9.0" "this" "ratio"
printf '%-34s %12s %12s %8s\n' "idle: WAL bytes" "${IDLE[old]}" "${IDLE[new]}" "$(ratio "${IDLE[new]}" "${IDLE[old]}")"
printf '%-34s %12s %12s %8s\n' "after 100 keys: WAL bytes" "${W100[old]}" "${W100[new]}" "$(ratio "${W100[new]}" "${W100[old]}")"
printf '%-34s %12s %12s %8s\n' "after 100 keys: file bytes" "${F100[old]}" "${F100[new]}" "$(ratio "${F100[new]}" "${F100[old]}")"
printf '%-34s %12s %12s\n' "after 100 keys: WAL / filter" "$(share "${W100[old]}" "$fbytes")" "$(share "${W100[new]}" "$fbytes")"
printf '%-34s %12s %12s\n' "after 100 keys: file / filter" "$(share "${F100[old]}" "$fbytes")" "$(share "${F100[new]}" "$fbytes")"

# ---- an outage of cuckoo/ with a compaction due ----------------------------------
# 1M more keys make the next delta about the filter's size: the cut after it
# is a compaction, which logs the base.
declare -A OUT=()
for v in old new; do
  q "$v" -c "SELECT count(*) FROM generate_series(4000001, 5000000) g WHERE cf_insert('big', g)" -c "CHECKPOINT" >/dev/null
  q "$v" -c "SELECT count(*) FROM generate_series(5000001, 5000100) g WHERE cf_insert('big', g)" >/dev/null
  chmod 500 "$(dir "$v")/data/cuckoo"
  a=$(lsn "$v")
  q "$v" -c "CHECKPOINT" >/dev/null 2>&1 & ck=$!
  sleep "$OUTAGE"
  b=$(lsn "$v")
  OUT[$v]=$(diff_lsn "$v" "$a" "$b")
  chmod 700 "$(dir "$v")/data/cuckoo"
  wait "$ck" || true
done
printf '\n%-34s %12s %12s %8s\n' "${OUTAGE} s outage, compaction due" "0.9.0" "this" "ratio"
printf '%-34s %12s %12s %8s\n' "WAL bytes during the outage" "${OUT[old]}" "${OUT[new]}" "$(ratio "${OUT[new]}" "${OUT[old]}")"
printf '%-34s %12s %12s\n' "  in filters' sizes" "$(awk -v a="${OUT[old]}" -v b="$fbytes" 'BEGIN{printf "%.1f", a/b}')" "$(awk -v a="${OUT[new]}" -v b="$fbytes" 'BEGIN{printf "%.1f", a/b}')"

# ---- the first pass after a crash recovery (this release) -----------------------
q new -c "SELECT count(*) FROM generate_series(6000001, 6000100) g WHERE cf_insert('big', g)" >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$(dir new)/data" -m immediate -w stop >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$(dir new)/data" -l "$(dir new)/server.log" -w start >/dev/null
a=$(q new -c "SELECT redo_lsn FROM pg_control_checkpoint()")
for _ in $(seq 1 600); do q new -c "SELECT 1 FROM pg_stat_activity WHERE backend_type = 'cuckoo durability'" | grep -q 1 && break; sleep 0.1; done
q new -c "SELECT cf_insert('big', 7000001::bigint)" >/dev/null
b=$(lsn new)
echo
echo "after a crash that followed 100 inserts: the first pass logged $(diff_lsn new "$a" "$b") bytes of WAL ($(share "$(diff_lsn new "$a" "$b")" "$fbytes") of the filter: its base, once)"
