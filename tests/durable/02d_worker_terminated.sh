# Durability 02d (sourced by run.sh; alone: bash tests/durable/run.sh 02d):
#   the durability worker stopped by pg_terminate_backend: writers wait for
#   its restart and nothing is lost.
# Needs: 02 (the table acked, filter c and the count slack).

# The worker stopped by an administrator: writers wait for its restart.
psql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'cuckoo durability'" >/dev/null
psql -c "INSERT INTO acked SELECT g FROM generate_series(900000000, 900000099) g WHERE cf_insert('c', g)"
pg_ctl_ -m immediate -w stop; pg_ctl_ -w start; wait_ready
verify_c "worker terminated" >/dev/null
ok "inserts wait for a restarted durability worker and survive a crash"
