#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster, run as user postgres, with cuckoo preloaded.
#   tests/tools/cluster.sh start|stop|psql [args]
# CLUSTER_DIR (default /tmp/cuckoo-cluster) and PGPORT (default 5497) choose where;
# CLUSTER_CONF adds postgresql.conf lines (e.g. "cuckoo.shared_memory = 16MB").
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DIR=${CLUSTER_DIR:-/tmp/cuckoo-cluster}
PORT=${PGPORT:-5497}
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }

case "${1:-}" in
  start)
    if [ -f "$DIR/data/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
      as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w restart >/dev/null
      exit 0
    fi
    rm -rf "$DIR"
    install -d -o postgres -g postgres "$DIR"
    as_pg "$PGBIN/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
    cat >> "$DIR/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cuckoo'
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DIR'
max_parallel_workers_per_gather = 2
shared_buffers = 512MB
jit = off
fsync = off
${CLUSTER_CONF:-}
CONF
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null
    ;;
  stop)
    [ -d "$DIR/data" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null || true
    ;;
  psql)
    shift
    exec "$PGBIN/psql" -X -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres "$@"
    ;;
  *)
    echo "usage: $0 start|stop|psql [args]" >&2; exit 2 ;;
esac
