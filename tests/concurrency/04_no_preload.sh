# Concurrency 04 (sourced by run.sh; alone: bash tests/concurrency/run.sh 04):
#   without shared_preload_libraries the functions explain what to do.
#   (Makes the cluster anew, without cuckoo preloaded.)

echo "== without shared_preload_libraries"
tests/tools/cluster.sh stop; rm -rf "$CLUSTER_DIR"
CLUSTER_CONF="shared_preload_libraries = ''" tests/tools/cluster.sh start
psql -c "CREATE EXTENSION cuckoo"
err=$(psql -c "SELECT cf_create('x', 10)" 2>&1 || true)
grep -q "cuckoo must be loaded via shared_preload_libraries" <<<"$err" || fail "unexpected: $err"
[ "$(psql -c "SELECT cf_contains(cf_agg(g), 5) FROM generate_series(1, 10) g")" = t ] || fail "values must work without preloading"
echo "ok: $err"
