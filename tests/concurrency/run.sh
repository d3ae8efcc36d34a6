#!/usr/bin/env bash
# Named filters under concurrency, cancellation and exhaustion, against the
# installed extension in a throwaway cluster with a small region (16 MB):
#   1. stress: CUCKOO_CLIENTS (default 4) sessions insert, probe and delete on one
#      filter at once; each checks that every key it inserted and has not deleted
#      is found on every probe and that deleting it succeeds; counts agree at the end;
#   2. cancellation: statement_timeout and pg_cancel_backend interrupt bulk inserts;
#      the server never restarts, each filter's count matches what was stored,
#      and everything stored is found;
#   3. exhaustion: creating filters until the region is full gives 53200 with the
#      sizes, leaves existing filters intact, and dropped space is reused;
#   4. without shared_preload_libraries the functions explain what to do.
# The stress filter has room for CUCKOO_STRESS_CAPACITY keys (default 100000) and
# the clients keep it about 90% full.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-concurrency} PGPORT=${PGPORT:-5492}
export CLUSTER_CONF="cuckoo.shared_memory = 16MB"
CLIENTS=${CUCKOO_CLIENTS:-4}
CAPACITY=${CUCKOO_STRESS_CAPACITY:-100000}
tests/cluster.sh stop 2>/dev/null; rm -rf "$CLUSTER_DIR"
trap 'tests/cluster.sh stop' EXIT
tests/cluster.sh start
psql() { tests/cluster.sh psql -q -At "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
psql -c "CREATE EXTENSION cuckoo"
started=$(psql -c "SELECT pg_postmaster_start_time()")

# The clients together keep 90% of the slots filled, so that inserts move
# fingerprints (kicks) while others probe and delete.
psql -c "SELECT cf_create('stress', $CAPACITY)" >/dev/null
slots=$(psql -c "SELECT (i->>'buckets')::bigint * (i->>'bucket_size')::int FROM cf_info(cf_snapshot('stress')) i")
KEYS=$((slots * 9 / 10 / CLIENTS))
echo "== stress: $CLIENTS clients, each keeping $KEYS live keys, on one filter of $slots slots"
cat > /tmp/cuckoo-stress.sql <<'SQL'
-- One client: fills its own key range, then churns (insert a new key, delete the
-- oldest, probe live keys), checking every answer about its own live keys.
DO $$
DECLARE
  base bigint := :CLIENT::bigint * 1000000000;
  n int := :KEYS;
  lo bigint := 1;          -- oldest live key offset
  hi bigint := 0;          -- newest live key offset
  k bigint;
BEGIN
  PERFORM setseed(:CLIENT / 100.0);
  FOR i IN 1..n LOOP
    hi := hi + 1;
    IF NOT cf_insert('stress', base + hi) THEN RAISE EXCEPTION 'insert of % refused', base + hi; END IF;
    k := base + lo + floor(random() * (hi - lo + 1))::bigint;
    IF NOT cf_contains('stress', k) THEN RAISE EXCEPTION 'false negative: live key % not found', k; END IF;
  END LOOP;
  FOR i IN 1..n LOOP
    hi := hi + 1;
    IF NOT cf_insert('stress', base + hi) THEN RAISE EXCEPTION 'insert of % refused', base + hi; END IF;
    IF NOT cf_delete('stress', base + lo) THEN RAISE EXCEPTION 'delete of live key % found nothing', base + lo; END IF;
    lo := lo + 1;
    FOR j IN 1..3 LOOP
      k := base + lo + floor(random() * (hi - lo + 1))::bigint;
      IF NOT cf_contains('stress', k) THEN RAISE EXCEPTION 'false negative: live key % not found', k; END IF;
    END LOOP;
  END LOOP;
  -- Every live key, once more, while the other clients are still running.
  FOR o IN lo..hi LOOP
    IF NOT cf_contains('stress', base + o) THEN RAISE EXCEPTION 'false negative: live key % not found', base + o; END IF;
  END LOOP;
END $$;
SQL
pids=()
for c in $(seq 1 "$CLIENTS"); do
  sed "s/:CLIENT/$c/g; s/:KEYS/$KEYS/g" /tmp/cuckoo-stress.sql > "/tmp/cuckoo-stress-$c.sql"
  psql -f "/tmp/cuckoo-stress-$c.sql" > "/tmp/cuckoo-stress-$c.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { cat "/tmp/cuckoo-stress-$((i + 1)).log"; fail "stress client $((i + 1))"; }
done
# Each client leaves KEYS live keys: offsets KEYS+1 .. 2*KEYS.
expected=$((CLIENTS * KEYS))
row=$(psql -F' ' -c "SELECT items, inserts, deletes, failed_inserts, kicks, lookup_retries, round(load_factor::numeric, 3) FROM cuckoo_filters WHERE name = 'stress'")
read -r items inserts deletes failed kicks retries load <<<"$row"
echo "items=$items inserts=$inserts deletes=$deletes failed=$failed kicks=$kicks lookup_retries=$retries peak_load~$load"
[ "$items" = "$expected" ] || fail "items $items, expected $expected"
[ "$inserts" = $((2 * expected)) ] || fail "inserts $inserts"
[ "$deletes" = "$expected" ] || fail "deletes $deletes"
[ "$failed" = 0 ] || fail "failed inserts $failed"
[ "$kicks" -gt 0 ] || fail "no fingerprint was moved: the stress did not exercise migration"
missing=$(psql -c "SELECT count(*) FROM generate_series(1, $CLIENTS) c, generate_series($KEYS + 1, 2 * $KEYS) o WHERE NOT cf_contains('stress', c * 1000000000::bigint + o)")
[ "$missing" = 0 ] || fail "$missing live keys missing at the end"
snap=$(psql -c "SELECT cf_count(cf_snapshot('stress'))")
[ "$snap" = "$expected" ] || fail "snapshot count $snap"
psql -c "SELECT cf_drop('stress')" >/dev/null

echo "== cancellation"
psql -c "SELECT cf_create('bulk', 3000000)" >/dev/null
psql -c "SELECT cf_create('bystander', 1000)" -c "SELECT count(*) FROM generate_series(1, 500) g WHERE cf_insert('bystander', g)" >/dev/null
check_bulk() {
  # Keys are inserted in order by one backend; the filter's counters say how
  # many calls stored a key; all of those (1..n) must be found, and the count
  # of items must be exactly n.
  local n items
  read -r n items <<<"$(psql -F' ' -c "SELECT inserts, items FROM cuckoo_filters WHERE name = 'bulk'")"
  [ "$n" = "$items" ] || fail "$1: inserts $n but items $items"
  [ "$n" -gt 0 ] || fail "$1: nothing was inserted before the interruption"
  local missing
  missing=$(psql -c "SELECT count(*) FROM generate_series(1, $n) g WHERE NOT cf_contains('bulk', g)")
  [ "$missing" = 0 ] || fail "$1: $missing of $n stored keys missing"
  [ "$(psql -c "SELECT count(*) FROM generate_series(1, 500) g WHERE cf_contains('bystander', g)")" = 500 ] || fail "$1: bystander damaged"
  echo "$1: $n keys stored before the interruption, all found, count exact"
}
out=$(psql -c "SET statement_timeout = '300ms'" -c "SELECT count(*) FROM (SELECT generate_series(1, 100000000) AS g) s WHERE cf_insert('bulk', g)" 2>&1 || true)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout did not cancel: $out"
check_bulk statement_timeout
psql -c "SELECT cf_drop('bulk')" -c "SELECT cf_create('bulk', 3000000)" >/dev/null
psql -c "SELECT count(*) FROM (SELECT generate_series(1, 100000000) AS g) s WHERE cf_insert('bulk', g)" > /tmp/cuckoo-cancel.log 2>&1 &
victim=$!
sleep 1
psql -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%cf_insert(''bulk''%' AND pid <> pg_backend_pid()" >/dev/null
wait "$victim" && fail "pg_cancel_backend: the bulk insert was not cancelled"
grep -q "canceling statement due to user request" /tmp/cuckoo-cancel.log || fail "unexpected: $(cat /tmp/cuckoo-cancel.log)"
check_bulk pg_cancel_backend
psql -c "SELECT cf_drop('bulk')" -c "SELECT cf_create('bulk', 3000000)" >/dev/null
psql -c "SELECT count(*) FROM (SELECT generate_series(1, 100000000) AS g) s WHERE cf_insert('bulk', g)" > /tmp/cuckoo-cancel.log 2>&1 &
victim=$!
sleep 1
psql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%cf_insert(''bulk''%' AND pid <> pg_backend_pid()" >/dev/null
wait "$victim" && fail "pg_terminate_backend: the bulk insert was not stopped"
check_bulk pg_terminate_backend
# Cancel a publish and a snapshot of a large filter mid-statement: the registry lock
# and epoch pins must be left released (a drop then reclaims, a create succeeds).
out=$(psql -c "SET statement_timeout = '50ms'" -c "SELECT cf_publish('pub', cf_agg(g)) FROM generate_series(1, 3000000) g" 2>&1 || true)
grep -q "statement timeout" <<<"$out" || fail "publish was not cancelled: $out"
psql -c "SELECT cf_drop('bulk'), cf_drop('bystander'), cf_drop('pub')" >/dev/null
[ "$(psql -c "SELECT count(*) FROM cuckoo_filters")" = 0 ] || fail "filters left over"
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"

echo "== exhaustion and reuse"
n=0
while out=$(psql -c "SELECT cf_create('fill$n', 1000000)" 2>&1); do n=$((n + 1)); [ $n -lt 100 ] || fail "region never filled"; done
grep -Eq 'not enough cuckoo shared memory for filter "fill[0-9]+": requested [0-9]+ bytes, [0-9]+ bytes free' <<<"$out" || fail "unexpected error: $out"
err=$(psql -v VERBOSITY=verbose -c "\set VERBOSITY verbose" -c "SELECT cf_create('fill$n', 1000000)" 2>&1 || true)
grep -q "53200" <<<"$err" || fail "exhaustion SQLSTATE: $err"
echo "$n filters of 1M keys fit; the next: $(grep -o 'requested.*' <<<"$out")"
psql -c "SELECT cf_insert('fill0', 7)" >/dev/null
[ "$(psql -c "SELECT cf_contains('fill0', 7)")" = t ] || fail "existing filter damaged by the failed create"
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_drop('fill$i')" >/dev/null; done
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_create('again$i', 1000000)" >/dev/null || fail "dropped space not reused ($i)"; done
echo "after dropping all $n, $n new ones fit again"
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_drop('again$i')" >/dev/null; done
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
grep -E "PANIC|server process .* was terminated by signal" "$CLUSTER_DIR/server.log" && fail "crash in the server log"

echo "== without shared_preload_libraries"
tests/cluster.sh stop; rm -rf "$CLUSTER_DIR"
CLUSTER_CONF="shared_preload_libraries = ''" tests/cluster.sh start
psql -c "CREATE EXTENSION cuckoo"
err=$(psql -c "SELECT cf_create('x', 10)" 2>&1 || true)
grep -q "cuckoo must be loaded via shared_preload_libraries" <<<"$err" || fail "unexpected: $err"
[ "$(psql -c "SELECT cf_contains(cf_agg(g), 5) FROM generate_series(1, 10) g")" = t ] || fail "values must work without preloading"
echo "ok: $err"
echo "concurrency tests passed"
