# Durability 03 (sourced by run.sh; alone: bash tests/durable/run.sh 03):
#   kill -9 of the postmaster and all its processes during inserts, restart,
#   an immediate CHECKPOINT, then a crash again: the same checks as 02.
# Needs: 02 (the table acked, filter c and the count slack).

pids=()
for c in 1 2 3 4; do
  batch_script 11 "$c" > "/tmp/cuckoo-durable-$c.sql"
  psql -f "/tmp/cuckoo-durable-$c.sql" >/dev/null 2>&1 & pids+=($!)
done
sleep 0.7
kill_postmaster
for p in "${pids[@]}"; do wait "$p" || true; done
pg_ctl_ -w start
psql -c "CHECKPOINT"
slack=$((slack + 4 * 50))
verify_c "postmaster killed" >/dev/null
victim_session() { psql -c "SELECT pg_sleep(600)" >/dev/null 2>&1 & }
victim_session; sleep 0.5
kill -9 "$(psql -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")"; wait || true
wait_ready
read -r acked items < <(verify_c "crash after the post-recovery checkpoint")
ok "postmaster kill, restart, CHECKPOINT, crash: $acked acknowledged keys all found, $items items"
