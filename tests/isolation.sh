#!/usr/bin/env bash
# `make test-pg` leaves a running installation alone. A throwaway server runs
# from the system's installation with cuckoo preloaded (the release build that
# `make install` put there), a durable filter in use and a client opening new
# sessions that use it all along; meanwhile `make test-pg` builds, installs
# and runs the #[pg_test]s. Afterwards the server has the same start time and
# the same durability worker, no process died of a signal, the installed files
# are byte for byte what they were, and the filter holds every key it was given.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-isolation} PGPORT=${PGPORT:-5493}
export CLUSTER_CONF="cuckoo.shared_memory = 16MB"
fail() { echo "isolation: FAIL: $*" >&2; exit 1; }
q() { tests/tools/cluster.sh psql -d postgres -qAt "$@"; }
stop=$(mktemp -u /tmp/cuckoo-isolation-run.XXXXXX)
client=""
cleanup() { rm -f "$stop"; [ -z "$client" ] || wait "$client" 2>/dev/null || true; tests/tools/cluster.sh stop; }
trap cleanup EXIT

# Every cuckoo file the system has installed, with its checksum.
installed() {
  find "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)/extension" \
       -maxdepth 1 -name 'cuckoo*' -type f -print0 | sort -z | xargs -0 sha256sum
}
before=$(installed)
[ -n "$before" ] || fail "cuckoo is not installed (make install)"
grep -qF "$("$PG_CONFIG" --pkglibdir)/cuckoo.so" <<<"$before" || fail "no cuckoo.so is installed"

tests/tools/cluster.sh start
q -c "CREATE EXTENSION cuckoo" -c "SELECT cf_create('iso', 100000)"
started=$(q -c "SELECT pg_postmaster_start_time()")
worker() { q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cuckoo durability'"; }
worker_pid=$(worker)
[ -n "$worker_pid" ] || fail "the durability worker is not running"

# The client: each batch is a new session (a new backend loads the library
# anew) that inserts 100 keys (the first 500 batches: 50,000 keys, half the
# filter's capacity, however slow the machine) and checks every key given so far.
touch "$stop"
(
  n=0 keys=0
  while [ -e "$stop" ] || [ "$n" -eq 0 ]; do
    if [ "$n" -lt 500 ]; then
      added=$(q -c "SELECT count(*) FILTER (WHERE cf_insert('iso', i)) FROM generate_series($keys, $((keys + 99))) i")
      [ "$added" = 100 ] || { echo "isolation: $added of 100 keys inserted in batch $n" >&2; exit 1; }
      keys=$((keys + 100))
    fi
    n=$((n + 1))
    missing=$(q -c "SELECT count(*) FROM generate_series(0, $((keys - 1))) i WHERE NOT cf_contains('iso', i)")
    [ "$missing" = 0 ] || { echo "isolation: $missing keys missing after $n batches" >&2; exit 1; }
    q -c "CHECKPOINT"
    sleep 0.5
  done
  echo "$n $keys" > "$stop.batches"
) &
client=$!

make --no-print-directory test-pg

rm -f "$stop"
wait "$client" || fail "the client's sessions failed while make test-pg ran"
client=""
read -r batches keys < "$stop.batches"; rm -f "$stop.batches"
[ "$(q -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
[ "$(worker)" = "$worker_pid" ] || fail "the durability worker is not the one that was running (pid $worker_pid)"
if grep -E "terminated by signal|was terminated|reinitializ|PANIC" "$CLUSTER_DIR/server.log"; then
  fail "a process of the server was killed (server log above)"
fi
after=$(installed)
[ "$after" = "$before" ] || { diff <(echo "$before") <(echo "$after") >&2 || true; fail "installed files changed"; }
items=$(q -c "SELECT items FROM cuckoo_filters WHERE name = 'iso'")
[ "$items" = "$keys" ] || fail "the filter holds $items items, not $keys"
# The worker still maps the installed library file itself (a file renamed over
# it would show as "(deleted)"), and no test build.
lib="$("$PG_CONFIG" --pkglibdir)/cuckoo.so"
maps=$(grep 'cuckoo' "/proc/$worker_pid/maps" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }' | sort -u)
[ "$maps" = "$lib" ] || fail "the worker maps \"$maps\", not $lib"
echo "isolation: ok (server up since $started, worker $worker_pid, $batches client sessions, $keys keys, $(wc -l <<<"$before") installed files unchanged)"
