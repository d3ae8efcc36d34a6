# A Citus coordinator and two workers on local ports, with cuckoo (sourced by
# tests/citus/run.sh and tests/bench/citus_bench.sh). Before sourcing: PGBIN, BASE
# (the clusters' directory), PORT (the coordinator's; the workers take the two
# after it), and a function fail. Builds Citus 13.2.2 if it is not installed
# (build-citus.sh of the shared tools, which installs its build dependencies),
# and leaves functions q NODE ARGS... (psql on node coord, w1, w2 or a
# later w3), start_node NODE, stop_all (called at exit unless CITUS_KEEP=1)
# and make_state_of.
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }
# The shared tools sit beside the repository (../shared); CUCKOO_SHARED names
# another place.
builder=""
for d in "${CUCKOO_SHARED:-}" ../shared /work/shared; do
  if [ -n "$d" ] && [ -f "$d/tools/build-citus.sh" ]; then builder="$d/tools/build-citus.sh"; break; fi
done
[ -n "$builder" ] || fail "build-citus.sh not found in ../shared/tools (set CUCKOO_SHARED)"
bash "$builder" >&2
citus_nodes=(coord w1 w2)
# Citus as shared_preload_libraries may spell it: by name on w1, by path on
# the coordinator and w2 (cuckoo must recognise it either way; issue 30).
preload_of() { case $1 in w1) echo "citus,cuckoo" ;; *) echo "\$libdir/citus,cuckoo" ;; esac; }
port_of() { case $1 in coord) echo "$PORT" ;; w1) echo $((PORT + 1)) ;; w2) echo $((PORT + 2)) ;; w3) echo $((PORT + 3)) ;; esac; }
q() { local n=$1; shift; "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$BASE/$n" -p "$(port_of "$n")" -U postgres -d postgres "$@"; }
stop_all() { for n in "${citus_nodes[@]}" w3; do [ -d "$BASE/$n/data" ] && as_pg "$PGBIN/pg_ctl" -D "$BASE/$n/data" -m fast -w stop >/dev/null 2>&1 || true; done; }
[ "${CITUS_KEEP:-0}" = 1 ] || trap stop_all EXIT
stop_all
rm -rf "$BASE"
# A node's server with Citus and cuckoo, started (not yet in the cluster).
# citus.local_hostname: Citus's connections to the node itself (shard moves)
# go through its socket, as every other connection here does.
start_node() {
  local n=$1
  install -d -o postgres -g postgres "$BASE/$n"
  as_pg "$PGBIN/initdb" -D "$BASE/$n/data" -A trust -U postgres >/dev/null
  cat >> "$BASE/$n/data/postgresql.conf" <<CONF
shared_preload_libraries = '$(preload_of "$n")'
port = $(port_of "$n")
listen_addresses = ''
unix_socket_directories = '$BASE/$n'
citus.local_hostname = '$BASE/$n'
max_worker_processes = 32
fsync = off
jit = off
${CITUS_CONF:-}
CONF
  as_pg "$PGBIN/pg_ctl" -D "$BASE/$n/data" -l "$BASE/$n/server.log" -w start >/dev/null
  q "$n" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION cuckoo"
}
for n in "${citus_nodes[@]}"; do
  start_node "$n"
done
q coord -c "SELECT citus_set_coordinator_host('$BASE/coord', $PORT)" >/dev/null
for w in w1 w2; do
  q coord -c "SELECT citus_add_node('$BASE/$w', $(port_of $w))" >/dev/null
done
[ "$(q coord -c "SELECT count(*) FROM citus_get_active_worker_nodes()")" = 2 ] || fail "the workers did not join"

# An aggregate state_of(bigint) on every node: cf_sharded_agg's state without
# its final function, to measure the text each shard ships.
make_state_of() {
  local ddl="CREATE AGGREGATE state_of(bigint) (SFUNC = cf_sharded_state_trans, STYPE = cf_sharded_state)"
  q coord -c "$ddl" >/dev/null
  q coord -c "SELECT count(*) FROM run_command_on_workers(\$\$$ddl\$\$)" >/dev/null 2>&1 || true
}
