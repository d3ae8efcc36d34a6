# Shared by the durability scenarios (tests/durable/NN_*.sh) and sourced by
# tests/durable/run.sh, which runs the scenarios in order in one shell against
# one main cluster (made by durable_start; 07 and 08 make it anew): a scenario
# finds the filters, tables and shell variables the earlier ones left, and
# names in its "Needs:" line the scenarios it takes them from.
# Clusters (all under /tmp, run as user postgres, against the installed
# extension): the main one in $CLUSTER_DIR (/tmp/cuckoo-durable) on $PGPORT
# (5480); a streaming standby -standby on 5481 (04); point-in-time recovery
# -pitr on 5481 (04b); the switchover's -sw and -swbk on 5482 and 5483 (13);
# the hand-copied backup -bk on 5484 (12); servers that ran 0.4.0 (-up-*) and
# 0.5.0 (-up050-*) on 5485 and 5486 (14, 15); the growing filter's standby
# -grow on 5487 (03b).
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-durable} PGPORT=${PGPORT:-5480}
SB_DIR=${CLUSTER_DIR}-standby SB_PORT=$((PGPORT + 1))
as_pg() { runuser -u postgres -- "$@"; }
psql() { tests/tools/cluster.sh psql -q -At "$@"; }
# psql on another cluster of the suite: its directory, its port, then psql's arguments.
psql_on() { local d=$1 p=$2; shift 2; "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$d" -p "$p" -U postgres "$@"; }
sbpsql() { psql_on "$SB_DIR" "$SB_PORT" "$@"; }
fail() { echo "durability: FAIL: $*" >&2; tail -30 "$CLUSTER_DIR/server.log" >&2 || true; exit 1; }
# Waits until the cluster at directory $1, port $2 (called $3) has finished recovery.
wait_promoted() {
  for _ in $(seq 1 600); do [ "$(psql_on "$1" "$2" -c "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && return 0; sleep 0.1; done
  fail "$3 did not finish recovery"
}
# Starts the copy in directory $1 (port $2, called $3) in archive recovery and
# waits until it has finished.
recover() {
  as_pg touch "$1/data/recovery.signal"
  as_pg "$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w start >/dev/null
  wait_promoted "$@"
}
ok() { echo "durability: $*"; }
# Makes a streaming hot standby of the main cluster in directory $1 with
# pg_basebackup, on port $2, and starts it; with a replication slot named $3
# if given (the primary then keeps the WAL the standby has not received).
start_standby() {
  local slot=()
  [ -n "${3:-}" ] && slot=(-C -S "$3")
  install -d -o postgres -g postgres "$1"
  as_pg "$PGBIN/pg_basebackup" -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres -D "$1/data" -R -X stream -c fast "${slot[@]}"
  cat >> "$1/data/postgresql.conf" <<CONF
port = $2
unix_socket_directories = '$1'
hot_standby = on
CONF
  as_pg "$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w start >/dev/null
}
EXTRA_DIRS=("${CLUSTER_DIR}-grow" "${CLUSTER_DIR}-pitr" "${CLUSTER_DIR}-sw" "${CLUSTER_DIR}-swbk" "${CLUSTER_DIR}-bk" "${CLUSTER_DIR}-archive"
            "${CLUSTER_DIR}-up-clean" "${CLUSTER_DIR}-up-crash" "${CLUSTER_DIR}-up050-clean" "${CLUSTER_DIR}-up050-crash")
cleanup() {
  tests/tools/cluster.sh stop 2>/dev/null || true
  local d
  for d in "$SB_DIR" "${EXTRA_DIRS[@]}"; do
    [ -d "$d/data" ] && as_pg "$PGBIN/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$d"
  done
  rm -rf "${CLUSTER_DIR}-tree040" "${CLUSTER_DIR}-tree050"
}
# The main cluster, new, with cuckoo and the role reader (run.sh calls it).
durable_start() {
  cleanup
  rm -rf "$CLUSTER_DIR"
  tests/tools/cluster.sh start
  psql -c "CREATE EXTENSION cuckoo" -c "CREATE ROLE reader"
}

# The main cluster's pg_ctl, a fast restart, and a wait for it to answer.
pg_ctl_() { as_pg "$PGBIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" "$@" >/dev/null; }
restart() { pg_ctl_ -m fast -w restart; }
wait_ready() {
  for _ in $(seq 1 600); do
    psql -d postgres -c "SELECT 1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "the server did not come back"
}
# Expects SQL $2 to fail with SQLSTATE $1.
expect_error() {
  local code=$1 sql=$2 out
  if out=$("$PGBIN/psql" -X -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "${3:-$CLUSTER_DIR}" -p "${4:-$PGPORT}" -U postgres -c "\\set VERBOSITY verbose" -c "$sql" 2>&1); then
    fail "expected $code from: $sql"
  fi
  grep -q "ERROR:  $code" <<<"$out" || fail "expected $code from: $sql; got: $out"
}
# The durable filters of the main cluster: their view rows, and their
# snapshots' digests (01, 04).
view="SELECT string_agg(concat_ws(',', name, capacity, items, bytes, fpp, durable, state, owner, lookup_grantee), ' ' ORDER BY name) FROM cuckoo_filters WHERE durable"
snaps="SELECT string_agg(name || ':' || md5(cf_snapshot(name)::text), ' ' ORDER BY name) FROM cuckoo_filters WHERE durable"

# The acknowledged keys of filter c (02, 02d, 03, 04). Each session inserts
# up to 1000 batches of 50 keys, one transaction per batch, and records in the
# same transaction the keys that were acknowledged (at most 2.2M keys in all,
# so the filter cannot fill up however fast the machine).
batch_script() { # iteration client
  local base=$(( ($1 * 10 + $2) * 1000000 ))
  for b in $(seq 0 999); do
    local lo=$((base + b * 50)) hi=$((base + b * 50 + 49))
    echo "INSERT INTO acked SELECT g FROM generate_series($lo, $hi) g WHERE cf_insert('c', g);"
  done
}
slack=0   # keys of transactions in flight at crashes: logged, never acknowledged
verify_c() { # label
  local acked items missing state
  acked=$(psql -c "SELECT count(*) FROM acked")
  missing=$(psql -c "SELECT count(*) FROM acked WHERE NOT cf_contains('c', k)")
  read -r items state < <(psql -F ' ' -c "SELECT items, state FROM cuckoo_filters WHERE name = 'c'")
  [ "$state" = ready ] || fail "$1: filter c is '$state'"
  [ "$missing" = 0 ] || fail "$1: $missing of $acked acknowledged keys are missing"
  [ "$items" -ge "$acked" ] && [ "$items" -le $((acked + slack)) ] || fail "$1: $items items for $acked acknowledged keys (at most $slack in flight)"
  echo "$acked $items"
}
# Crashes the server through a backend: a session that only sleeps is killed.
# With a pid given, that session (started before) is the victim.
crash_backend() {
  psql -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
  local p=$! victim=""
  for _ in $(seq 1 100); do
    victim=$(psql -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
    [ -n "$victim" ] && break
    sleep 0.05
  done
  kill -9 "$victim"; wait "$p" || true
  wait_ready
}

# Kills the postmaster and all its children at once (as an OOM killer or a
# power cut would), and waits for them to go.
kill_postmaster() {
  local pm kids
  pm=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")
  kids=$(pgrep -P "$pm" || true)
  # shellcheck disable=SC2086
  kill -9 "$pm" $kids
  # Where nothing reaps orphans (some containers' init), the dead postmaster
  # stays a zombie that PostgreSQL would take for a running server: its lock
  # files are then removed by hand.
  for _ in $(seq 1 50); do
    # shellcheck disable=SC2086
    [ -z "$(ps -o stat= -p "$pm" $kids 2>/dev/null | grep -v Z)" ] && break
    sleep 0.1
  done
  if ps -o stat= -p "$pm" 2>/dev/null | grep -q Z; then rm -f "$CLUSTER_DIR/data/postmaster.pid" "$CLUSTER_DIR/.s.PGSQL.$PGPORT.lock"; fi
}

# Filter ten_m of 08 is ready with $2 items and every key it was given: 2M
# and 100 (08), then 100,000 more (10).
check_ten_m() { # label, expected items
  local got
  got=$(psql -c "SELECT (SELECT state || ' ' || items FROM cuckoo_filters WHERE name = 'ten_m') || ' ' ||
                  (SELECT count(*) FROM generate_series(1, 2000000) g WHERE NOT cf_contains('ten_m', g)) || ' ' ||
                  (SELECT count(*) FROM generate_series(3000001, 3000100) g WHERE NOT cf_contains('ten_m', g)) || ' ' ||
                  (SELECT count(*) FROM generate_series(4000001, 4100000) g WHERE NOT cf_contains('ten_m', g) AND $2 > 2000100)")
  [ "$got" = "ready $2 0 0 0" ] || fail "$1: ten_m is '$got', expected 'ready $2 0 0 0'"
}
