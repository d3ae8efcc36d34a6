# Durability 10 (sourced by run.sh; alone: bash tests/durable/run.sh 10):
#   a crash while a checkpoint's file is half written.
# Needs: 08 (filter ten_m).

# The worker pauses halfway through the cut's file (cuckoo.debug_cut_write_delay)
# and the whole server is killed there; a leftover half file must not count.
psql -c "SELECT count(*) FROM generate_series(4000001, 4100000) g WHERE cf_insert('ten_m', g)" \
     -c "ALTER SYSTEM SET cuckoo.debug_cut_write_delay = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
psql -c "CHECKPOINT" >/dev/null 2>&1 & ckpt=$!
for _ in $(seq 1 600); do
  compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null && break
  sleep 0.05
done
compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null || fail "no cut file was being written"
tmp_size=$(stat -c %s "$CLUSTER_DIR"/data/cuckoo/*.tmp | head -1)
psql -c "ALTER SYSTEM RESET cuckoo.debug_cut_write_delay" >/dev/null
kill_postmaster
wait "$ckpt" || true
pg_ctl_ -w start; wait_ready
check_ten_m "crash while a cut was half written" 2100100
compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null && fail "the half-written file is still there"
ok "a crash with a cut file half written ($tmp_size bytes under its temporary name) loses nothing"
