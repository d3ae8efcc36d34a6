# Concurrency 02 (sourced by run.sh; alone: bash tests/concurrency/run.sh 02):
#   statement_timeout, pg_cancel_backend and pg_terminate_backend interrupt a
#   bulk insert that keeps a sliding window of keys (so it never fills the
#   filter); the server never restarts, the counts are exact and every live
#   key is found; a publish is cancelled too.

echo "== cancellation"
# One backend inserts keys 1, 2, 3, ... in order and, once WINDOW keys are live,
# deletes key g - WINDOW after inserting key g, so that at most WINDOW + 1 keys are
# ever stored and the filter can never fill, however fast the machine. The
# counters then say exactly which keys are live: 1..inserts were inserted and
# 1..deletes deleted, so deletes+1 .. inserts must all be found.
BULK_CAPACITY=3000000
WINDOW=1500000
BULK_QUERY="SELECT count(*) FROM (SELECT generate_series(1, 1000000000) AS g) s
  WHERE CASE WHEN cf_insert('bulk', g) THEN g <= $WINDOW OR cf_delete('bulk', g - $WINDOW) ELSE false END"
psql -c "SELECT cf_create('bulk', $BULK_CAPACITY)" >/dev/null
psql -c "SELECT cf_create('bystander', 1000)" -c "SELECT count(*) FROM generate_series(1, 500) g WHERE cf_insert('bystander', g)" >/dev/null
check_bulk() {
  local n d items failed missing
  read -r n d items failed <<<"$(psql -F' ' -c "SELECT inserts, deletes, items, failed_inserts FROM cuckoo_filters WHERE name = 'bulk'")"
  [ "$failed" = 0 ] || fail "$1: $failed inserts refused (the window must keep the filter from filling)"
  [ "$n" -gt 0 ] || fail "$1: nothing was inserted before the interruption"
  [ "$items" = $((n - d)) ] || fail "$1: inserts $n, deletes $d, but items $items"
  missing=$(psql -c "SELECT count(*) FROM generate_series($d + 1, $n) g WHERE NOT cf_contains('bulk', g)")
  [ "$missing" = 0 ] || fail "$1: $missing of $((n - d)) live keys missing"
  [ "$(psql -c "SELECT count(*) FROM generate_series(1, 500) g WHERE cf_contains('bystander', g)")" = 500 ] || fail "$1: bystander damaged"
  echo "$1: $n keys inserted and $d deleted before the interruption; all $((n - d)) live keys found, count exact"
}
out=$(psql -c "SET statement_timeout = '300ms'" -c "$BULK_QUERY" 2>&1 || true)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout did not cancel: $out"
check_bulk statement_timeout
# Interrupts a bulk insert from another session with pg_cancel_backend or
# pg_terminate_backend, then checks the filter.
interrupt_bulk() {
  psql -c "SELECT cf_drop('bulk')" -c "SELECT cf_create('bulk', $BULK_CAPACITY)" >/dev/null
  psql -c "$BULK_QUERY" > /tmp/cuckoo-cancel.log 2>&1 &
  local victim=$! tries=0
  # Interrupt once the window slides (keys are being deleted as well as
  # inserted), however long that takes on this machine.
  until [ "$(psql -c "SELECT deletes > 1000 FROM cuckoo_filters WHERE name = 'bulk'")" = t ]; do
    tries=$((tries + 1)); [ $tries -lt 3000 ] || fail "$1: the bulk insert never got going"
    sleep 0.1
  done
  psql -c "SELECT $1(pid) FROM pg_stat_activity WHERE query LIKE '%cf_insert(''bulk''%' AND pid <> pg_backend_pid()" >/dev/null
  wait "$victim" && fail "$1: the bulk insert was not interrupted"
  grep -q "$2" /tmp/cuckoo-cancel.log || fail "$1: unexpected: $(cat /tmp/cuckoo-cancel.log)"
  check_bulk "$1"
}
interrupt_bulk pg_cancel_backend "canceling statement due to user request"
interrupt_bulk pg_terminate_backend "terminating connection due to administrator command"
# Cancel a publish of a large filter mid-statement (while cf_agg builds it; the
# copy under the registry lock holds interrupts): nothing may be left locked or
# half-made, and the drops below must succeed.
out=$(psql -c "SET statement_timeout = '50ms'" -c "SELECT cf_publish('pub', cf_agg(g)) FROM generate_series(1, 3000000) g" 2>&1 || true)
grep -q "statement timeout" <<<"$out" || fail "publish was not cancelled: $out"
psql -c "SELECT cf_drop('bulk'), cf_drop('bystander'), cf_drop('pub')" >/dev/null
[ "$(psql -c "SELECT count(*) FROM cuckoo_filters")" = 0 ] || fail "filters left over"
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
