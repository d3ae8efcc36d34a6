# Durability 11b (sourced by run.sh; alone: bash tests/durable/run.sh 11b):
#   a cut that cannot be written (the directory read-only): the checkpoint
#   waits instead of completing, and a crash loses nothing.

# The worker cannot create files (the directory made read-only): the
# checkpoint must wait, not complete without the filter's changes on file;
# the whole server is killed meanwhile, and every key comes back.
psql -c "SELECT cf_create('held', 100000)" -c "SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_insert('held', g)" -c "CHECKPOINT" \
     -c "SELECT count(*) FROM generate_series(1001, 2000) g WHERE cf_insert('held', g)" >/dev/null
before_ckpt=$(as_pg "$PGBIN/pg_controldata" -D "$CLUSTER_DIR/data" | sed -n 's/^Latest checkpoint location: *//p')
warned=$(grep -c "a checkpoint cut failed" "$CLUSTER_DIR/server.log" || true)
chmod 500 "$CLUSTER_DIR/data/cuckoo"
psql -c "CHECKPOINT" >/dev/null 2>&1 & ckpt=$!
for _ in $(seq 1 600); do
  [ "$(grep -c "a checkpoint cut failed" "$CLUSTER_DIR/server.log" || true)" -gt "$warned" ] && break
  sleep 0.05
done
[ "$(grep -c "a checkpoint cut failed" "$CLUSTER_DIR/server.log" || true)" -gt "$warned" ] || fail "the worker did not report the failed cut"
sleep 1
kill -0 "$ckpt" 2>/dev/null || fail "the CHECKPOINT completed although the cut could not be written"
[ "$(as_pg "$PGBIN/pg_controldata" -D "$CLUSTER_DIR/data" | sed -n 's/^Latest checkpoint location: *//p')" = "$before_ckpt" ] || fail "a checkpoint completed although the cut could not be written"
kill_postmaster
wait "$ckpt" || true
chmod 700 "$CLUSTER_DIR/data/cuckoo"
pg_ctl_ -w start; wait_ready
[ "$(psql -c "SELECT state || ' ' || items || ' ' || (SELECT count(*) FROM generate_series(1, 2000) g WHERE NOT cf_contains('held', g)) FROM cuckoo_filters WHERE name = 'held'")" = "ready 2000 0" ] \
  || fail "held after a crash while its cut could not be written: $(psql -c "SELECT state, items FROM cuckoo_filters WHERE name = 'held'")"
psql -c "CHECKPOINT" >/dev/null
ok "a cut that cannot be written holds the checkpoint back (the worker warns and retries); a crash then loses nothing"
