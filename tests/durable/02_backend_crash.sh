# Durability 02 (sourced by run.sh; alone: bash tests/durable/run.sh 02):
#   kill -9 of one backend while 4 sessions insert (and CHECKPOINTs run), ten
#   times: every key whose insert a committed transaction acknowledged is
#   found, and the item count is that of the acknowledged keys plus at most
#   the batches in flight; then five transactions that only insert, each
#   followed at once by a crash; then full filters (refused inserts), from one
#   session and from four, give the same answers after a crash.

psql -c "CREATE TABLE acked (k bigint)" -c "SELECT cf_create('c', 3000000)" >/dev/null
for i in $(seq 1 10); do
  pids=()
  for c in 1 2 3 4; do
    batch_script "$i" "$c" > "/tmp/cuckoo-durable-$c.sql"
    psql -f "/tmp/cuckoo-durable-$c.sql" >/dev/null 2>&1 & pids+=($!)
  done
  ( for _ in 1 2 3; do psql -c "CHECKPOINT" >/dev/null 2>&1 || true; sleep 0.2; done ) & pids+=($!)
  psql -c "SELECT pg_sleep(600)" >/dev/null 2>&1 & pids+=($!)
  # Crash once the sessions are under way: 5000 more keys acknowledged.
  target=$(( $(psql -c "SELECT count(*) FROM acked") + 5000 ))
  for _ in $(seq 1 600); do
    [ "$(psql -c "SELECT count(*) >= $target FROM acked")" = t ] && break
    sleep 0.05
  done
  victim=$(psql -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
  [ -n "$victim" ] || fail "no victim session"
  kill -9 "$victim"
  for p in "${pids[@]}"; do wait "$p" || true; done
  wait_ready
  slack=$((slack + 4 * 50))
  read -r acked items < <(verify_c "crash $i")
  echo "  crash $i: $acked acknowledged keys, $items items"
done
grep -q "all server processes terminated; reinitializing" "$CLUSTER_DIR/server.log" || fail "the backend crashes did not reinitialise the server"
ok "10 backend crashes during inserts lose no acknowledged key"

# A transaction whose only change is one cf_insert: acknowledged, then the
# server crashes at once. The WAL writer is slowed down so that only the
# commit's own flush can have saved the record.
psql -c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c "SELECT pg_reload_conf()" -c "SELECT cf_create('solo', 100)" >/dev/null
for k in 1 2 3 4 5; do
  psql -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
  sleeper=$!
  victim=""
  for _ in $(seq 1 100); do
    victim=$(psql -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
    [ -n "$victim" ] && break
    sleep 0.05
  done
  [ "$(psql -c "SELECT cf_insert('solo', $k)")" = t ] || fail "solo insert $k"
  kill -9 "$victim"; wait "$sleeper" || true
  wait_ready
done
[ "$(psql -c "SELECT string_agg(cf_contains('solo', k)::text, ',') || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'solo') FROM generate_series(1, 5) k")" = "true,true,true,true,true 5" ] \
  || fail "single acknowledged inserts lost in crashes: $(psql -c "SELECT string_agg(cf_contains('solo', k)::text, ',') FROM generate_series(1, 5) k")"
psql -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null
ok "a transaction that only inserts is durable once acknowledged (5 crashes right after the commit)"

# Full filters: refused inserts change nothing on the primary and nothing in
# replay. One session (replay order = the primary's: exact answers), then four
# at once (every acknowledged key found, or the filter marked for reload).
psql -c "SELECT cf_create('tiny', 100, expansion => 0)" -c "CREATE TABLE acked2 (k bigint)" >/dev/null
stored=$(psql -c "SELECT count(*) FROM generate_series(1, 2000) g WHERE cf_insert('tiny', g)")
psql -c "SELECT count(*) FROM generate_series(1, 30) g WHERE cf_delete('tiny', g)" >/dev/null
answers="SELECT md5(string_agg(cf_contains('tiny', g)::text, ',' ORDER BY g)) || ' ' || (SELECT items || ' ' || state FROM cuckoo_filters WHERE name = 'tiny') FROM generate_series(1, 5000) g"
before=$(psql -c "$answers")
[ "$(psql -c "SELECT failed_inserts > 0 FROM cuckoo_filters WHERE name = 'tiny'")" = t ] || fail "tiny did not fill up"
crash_backend
[ "$(psql -c "$answers")" = "$before" ] || fail "a full filter answers differently after a crash: $(psql -c "$answers"), before: $before"
psql -c "SELECT cf_create('tiny4', 1000, expansion => 0)" >/dev/null
pids=()
for c in 1 2 3 4; do
  psql -c "INSERT INTO acked2 SELECT g FROM generate_series($c * 10000, $c * 10000 + 999) g WHERE cf_insert('tiny4', g)" >/dev/null & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
crash_backend
read -r state items < <(psql -F ' ' -c "SELECT state, items FROM cuckoo_filters WHERE name = 'tiny4'")
if [ "$state" = ready ]; then
  [ "$(psql -c "SELECT count(*) FROM acked2 WHERE NOT cf_contains('tiny4', k)")" = 0 ] || fail "tiny4 lost acknowledged keys"
  [ "$items" = "$(psql -c "SELECT count(*) FROM acked2")" ] || fail "tiny4 holds $items items for $(psql -c "SELECT count(*) FROM acked2") acknowledged keys"
  full4="exact"
else
  [ "$state" = "needs reload" ] || fail "tiny4 is '$state'"
  expect_error 55000 "SELECT cf_contains('tiny4', 1)"
  full4="marked for reload ($(psql -c "SELECT reason FROM cuckoo_filters WHERE name = 'tiny4'"))"
fi
ok "full filters: $stored of 2000 keys stored by one session, same answers after a crash; four sessions: $full4"
