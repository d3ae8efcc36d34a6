# Durability 09 (sourced by run.sh; alone: bash tests/durable/run.sh 09):
#   a crash right after a clean restart, before anything flushed the WAL.

# The window of 0.4.0: a crash after the worker starts and before anything
# flushes the WAL (the WAL writer slowed down to make it certain).
psql -c "SELECT cf_create('early', 100000)" -c "SELECT count(*) FROM generate_series(1, 50000) g WHERE cf_insert('early', g)" \
     -c "ALTER SYSTEM SET wal_writer_delay = '10s'" >/dev/null
started=$(grep -c "durability worker started" "$CLUSTER_DIR/server.log")
restart
for _ in $(seq 1 300); do
  [ "$(grep -c "durability worker started" "$CLUSTER_DIR/server.log")" -gt "$started" ] && break
  sleep 0.05
done
pg_ctl_ -m immediate -w stop; pg_ctl_ -w start; wait_ready
got=$(psql -c "SELECT state || ' ' || items || ' ' || (SELECT count(*) FROM generate_series(1, 50000) g WHERE NOT cf_contains('early', g)) FROM cuckoo_filters WHERE name = 'early'")
[ "$got" = "ready 50000 0" ] || fail "a crash right after a clean restart left 'early' as '$got'"
psql -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null
ok "a crash right after a clean restart keeps every key ($got)"
