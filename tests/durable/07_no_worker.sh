# Durability 07 (sourced by run.sh; alone: bash tests/durable/run.sh 07):
#   without the durability worker (no background worker slot), durable
#   changes fail with 55000 and non-durable filters still work. (Makes the
#   main cluster anew.)

tests/tools/cluster.sh stop 2>/dev/null || true; rm -rf "$CLUSTER_DIR"
CLUSTER_CONF="max_worker_processes = 0" tests/tools/cluster.sh start
psql -c "CREATE EXTENSION cuckoo"
grep -q 'too many background workers' "$CLUSTER_DIR/server.log" || fail "the worker was registered despite max_worker_processes = 0"
expect_error 55000 "SELECT cf_create('d', 100)"
psql -c "SELECT cf_create('v', 100, durable => false)" -c "SELECT cf_insert('v', 1)" >/dev/null
[ "$(psql -c "SELECT cf_contains('v', 1)")" = t ] || fail "non-durable filters do not work without the worker"
ok "without the durability worker durable changes fail with 55000; non-durable filters work"
