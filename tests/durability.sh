#!/usr/bin/env bash
# Durable named filters, against the installed extension in throwaway clusters:
#   1. clean restart: durable filters (filled, published, with deletes and a
#      grant) come back exactly; non-durable ones are gone;
#   2. kill -9 of one backend while 4 sessions insert (and CHECKPOINTs run), ten
#      times: every key whose insert a committed transaction acknowledged is
#      found, and the item count is that of the acknowledged keys plus at most
#      the batches in flight; the durability worker stopped by
#      pg_terminate_backend: writers wait for its restart and nothing is lost;
#   2b. batched inserts, deletes and inserts-if-new, then a crash: the same
#      counts, answers and items;
#   3. kill -9 of the postmaster and all its processes during inserts, restart,
#      an immediate CHECKPOINT, then a crash again: the same checks;
#   3b. a filter made for 1,000 keys takes 2M from two sessions while a standby
#      replays it: every key everywhere, a postmaster kill loses nothing, the
#      rate and the bytes are those asked for;
#   4. a streaming hot standby made with pg_basebackup: filters created, filled,
#      published, deleted from, granted and dropped on the primary look the same
#      there (items, snapshots, every lookup); writes there fail with 25006;
#      after promotion it accepts writes and keeps its filters across a restart;
#   4b. point-in-time recovery from a base backup and archived WAL to an LSN
#      gives the filters as they were at that LSN;
#   5. a region too small at restart: the filters that do not fit are listed in
#      the log and kept as 'needs reload' (probes raise 55000), the server runs,
#      and cf_publish brings them back;
#   6. a corrupt WAL record (valid CRC, bad contents) is not applied: a warning
#      names it, its filter needs a reload, and the server starts;
#   7. without the durability worker (no background worker slot), durable
#      changes fail with 55000 and non-durable filters still work;
#   8. idle checkpoints write no cuckoo WAL but their PASS record; 100 inserts into a 21 MB filter
#      cost a checkpoint a small delta file and a few records; a crash right
#      after idle checkpoints keeps every key (all from the files and the WAL);
#   9. a crash right after a clean restart, before anything flushed the WAL;
#  10. a crash while a checkpoint's file is half written;
#  11. damaged files (a flipped byte, a truncation, a stray temporary file);
#  11b. a cut that cannot be written (the directory read-only): the
#      checkpoint waits instead of completing, and a crash loses nothing;
#  12. a base backup copied by hand while a cut is half written, after a
#      compaction and a drop removed files it then lacks;
#  13. a clean switchover: the standby restarts from the primary's shutdown
#      checkpoint, is promoted, the old primary follows it, and a backup is
#      taken from that;
#  14. a server that ran 0.4.0, started with this release after a clean stop
#      and after a crash, then ALTER EXTENSION UPDATE.
set -euo pipefail
cd "$(dirname "$0")/.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-durable} PGPORT=${PGPORT:-5480}
SB_DIR=${CLUSTER_DIR}-standby SB_PORT=$((PGPORT + 1))
as_pg() { runuser -u postgres -- "$@"; }
psql() { tests/tools/cluster.sh psql -q -At "$@"; }
# psql on another cluster of this script: its directory, its port, then psql's arguments.
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
trap cleanup EXIT
cleanup
rm -rf "$CLUSTER_DIR"
tests/tools/cluster.sh start

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

psql -c "CREATE EXTENSION cuckoo" -c "CREATE ROLE reader"

# ---- 1. clean restart ---------------------------------------------------------
psql -c "SELECT cf_create('filled', 200000)" \
     -c "SELECT count(*) FROM generate_series(1, 100000) g WHERE cf_insert('filled', g)" \
     -c "SELECT count(*) FROM generate_series(1, 20000) g WHERE cf_delete('filled', g)" \
     -c "SELECT cf_publish('published', cf_agg(g)) FROM generate_series(1, 50000) g" \
     -c "SELECT cf_grant_lookup('published', 'reader')" \
     -c "SELECT cf_create('volatile', 1000, durable => false)" \
     -c "SELECT cf_insert('volatile', 1)" >/dev/null
view="SELECT string_agg(concat_ws(',', name, capacity, items, bytes, fpp, durable, state, owner, lookup_grantee), ' ' ORDER BY name) FROM cuckoo_filters WHERE durable"
before=$(psql -c "$view")
snaps="SELECT string_agg(name || ':' || md5(cf_snapshot(name)::text), ' ' ORDER BY name) FROM cuckoo_filters WHERE durable"
snaps_before=$(psql -c "$snaps")
restart
[ "$(psql -c "$view")" = "$before" ] || fail "filters after a restart: $(psql -c "$view"), before: $before"
[ "$(psql -c "$snaps")" = "$snaps_before" ] || fail "snapshots differ after a restart"
[ "$(psql -c "SELECT count(*) FROM generate_series(20001, 100000) g WHERE NOT cf_contains('filled', g)")" = 0 ] || fail "keys lost in a restart"
[ "$(psql -c "SELECT count(*) FROM cuckoo_filters WHERE name = 'volatile'")" = 0 ] || fail "a non-durable filter survived a restart"
ok "clean restart keeps durable filters exactly ($before)"

# ---- 2. crashes of one backend during inserts ------------------------------
psql -c "CREATE TABLE acked (k bigint)" -c "SELECT cf_create('c', 3000000)" >/dev/null
# Each session inserts up to 1000 batches of 50 keys, one transaction per batch,
# and records in the same transaction the keys that were acknowledged (at most
# 2.2M keys in all, so the filter cannot fill up however fast the machine).
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
for i in $(seq 1 10); do
  pids=()
  for c in 1 2 3 4; do
    batch_script "$i" "$c" > "/tmp/cuckoo-durable-$c.sql"
    psql -f "/tmp/cuckoo-durable-$c.sql" >/dev/null 2>&1 & pids+=($!)
  done
  ( for _ in 1 2 3; do psql -c "CHECKPOINT" >/dev/null 2>&1 || true; sleep 0.2; done ) & pids+=($!)
  psql -c "SELECT pg_sleep(600)" >/dev/null 2>&1 & pids+=($!)
  # Crash once the sessions are under way: 5000 more keys acknowledged.
  target=$(( $(psql -c "SELECT count(*) FROM acked") + 5000 ))
  for _ in $(seq 1 600); do
    [ "$(psql -c "SELECT count(*) >= $target FROM acked")" = t ] && break
    sleep 0.05
  done
  victim=$(psql -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
  [ -n "$victim" ] || fail "no victim session"
  kill -9 "$victim"
  for p in "${pids[@]}"; do wait "$p" || true; done
  wait_ready
  slack=$((slack + 4 * 50))
  read -r acked items < <(verify_c "crash $i")
  echo "  crash $i: $acked acknowledged keys, $items items"
done
grep -q "all server processes terminated; reinitializing" "$CLUSTER_DIR/server.log" || fail "the backend crashes did not reinitialise the server"
ok "10 backend crashes during inserts lose no acknowledged key"

# A transaction whose only change is one cf_insert: acknowledged, then the
# server crashes at once. The WAL writer is slowed down so that only the
# commit's own flush can have saved the record.
psql -c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c "SELECT pg_reload_conf()" -c "SELECT cf_create('solo', 100)" >/dev/null
for k in 1 2 3 4 5; do
  psql -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
  sleeper=$!
  victim=""
  for _ in $(seq 1 100); do
    victim=$(psql -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
    [ -n "$victim" ] && break
    sleep 0.05
  done
  [ "$(psql -c "SELECT cf_insert('solo', $k)")" = t ] || fail "solo insert $k"
  kill -9 "$victim"; wait "$sleeper" || true
  wait_ready
done
[ "$(psql -c "SELECT string_agg(cf_contains('solo', k)::text, ',') || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'solo') FROM generate_series(1, 5) k")" = "true,true,true,true,true 5" ] \
  || fail "single acknowledged inserts lost in crashes: $(psql -c "SELECT string_agg(cf_contains('solo', k)::text, ',') FROM generate_series(1, 5) k")"
psql -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null
ok "a transaction that only inserts is durable once acknowledged (5 crashes right after the commit)"

# Full filters: refused inserts change nothing on the primary and nothing in
# replay. One session (replay order = the primary's: exact answers), then four
# at once (every acknowledged key found, or the filter marked for reload).
psql -c "SELECT cf_create('tiny', 100, expansion => 0)" -c "CREATE TABLE acked2 (k bigint)" >/dev/null
stored=$(psql -c "SELECT count(*) FROM generate_series(1, 2000) g WHERE cf_insert('tiny', g)")
psql -c "SELECT count(*) FROM generate_series(1, 30) g WHERE cf_delete('tiny', g)" >/dev/null
answers="SELECT md5(string_agg(cf_contains('tiny', g)::text, ',' ORDER BY g)) || ' ' || (SELECT items || ' ' || state FROM cuckoo_filters WHERE name = 'tiny') FROM generate_series(1, 5000) g"
before=$(psql -c "$answers")
[ "$(psql -c "SELECT failed_inserts > 0 FROM cuckoo_filters WHERE name = 'tiny'")" = t ] || fail "tiny did not fill up"
crash_backend
[ "$(psql -c "$answers")" = "$before" ] || fail "a full filter answers differently after a crash: $(psql -c "$answers"), before: $before"
psql -c "SELECT cf_create('tiny4', 1000, expansion => 0)" >/dev/null
pids=()
for c in 1 2 3 4; do
  psql -c "INSERT INTO acked2 SELECT g FROM generate_series($c * 10000, $c * 10000 + 999) g WHERE cf_insert('tiny4', g)" >/dev/null & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
crash_backend
read -r state items < <(psql -F ' ' -c "SELECT state, items FROM cuckoo_filters WHERE name = 'tiny4'")
if [ "$state" = ready ]; then
  [ "$(psql -c "SELECT count(*) FROM acked2 WHERE NOT cf_contains('tiny4', k)")" = 0 ] || fail "tiny4 lost acknowledged keys"
  [ "$items" = "$(psql -c "SELECT count(*) FROM acked2")" ] || fail "tiny4 holds $items items for $(psql -c "SELECT count(*) FROM acked2") acknowledged keys"
  full4="exact"
else
  [ "$state" = "needs reload" ] || fail "tiny4 is '$state'"
  expect_error 55000 "SELECT cf_contains('tiny4', 1)"
  full4="marked for reload ($(psql -c "SELECT reason FROM cuckoo_filters WHERE name = 'tiny4'"))"
fi
ok "full filters: $stored of 2000 keys stored by one session, same answers after a crash; four sessions: $full4"

# Batched calls and inserts-if-new (0.8.0), one session, then a crash: every
# key's count, every answer and the item counts are the same. A batch is one
# INSERT record per 8,192 keys logged before it takes effect, its refusals one
# REFUSED record after, its deletes one DELETE record after; an insert-if-new
# that finds its key there logs nothing, one that loses a race logs its
# refusal. (Replay stores an insert-if-new's key by the plain insert, so the
# layout of a table may differ from the primary's: the answers do not.)
psql -c "SELECT cf_create('bat', 300000)" \
     -c "SELECT cf_insert('bat', array_agg(g)) FROM generate_series(1, 100000) g" \
     -c "SELECT cf_delete('bat', array_agg(g)) FROM generate_series(1, 20000) g" \
     -c "SELECT cf_insert_new('bat', array_agg(g)) FROM generate_series(90001, 120000) g" \
     -c "SELECT count(*) FILTER (WHERE cf_insert_new('bat', g)) FROM generate_series(110001, 130000) g" \
     -c "SELECT cf_insert('bat', array_agg(g % 1000)) FROM generate_series(1, 3000) g" \
     -c "SELECT cf_create('batfull', 500, expansion => 0)" \
     -c "SELECT cf_insert('batfull', array_agg(g)) FROM generate_series(1, 2000) g" \
     -c "SELECT cf_delete('batfull', array_agg(g)) FROM generate_series(1, 100) g" \
     -c "SELECT cf_insert('batfull', array_agg(g)) FROM generate_series(3001, 3200) g" >/dev/null
bat="SELECT (SELECT md5(string_agg(cf_count('bat', g)::text, ',' ORDER BY g)) FROM generate_series(1, 140000) g) || ' ' ||
  (SELECT md5(string_agg(cf_contains('batfull', g)::text, ',' ORDER BY g)) FROM generate_series(1, 5000) g) || ' ' ||
  (SELECT string_agg(name || ':' || items || ':' || state, ' ' ORDER BY name) FROM cuckoo_filters WHERE name IN ('bat', 'batfull'))"
before=$(psql -c "$bat")
# 80,000 keys left by the first two calls, 30,000 new keys inserted if new (a
# false positive refuses a few), 3,000 plain inserts of repeated keys.
[ "$(psql -c "SELECT items BETWEEN 113000 - 200 AND 113000 FROM cuckoo_filters WHERE name = 'bat'")" = t ] \
  || fail "batched calls left $(psql -c "SELECT items FROM cuckoo_filters WHERE name = 'bat'") items in bat, not about 113,000"
[ "$(psql -c "SELECT failed_inserts > 0 FROM cuckoo_filters WHERE name = 'batfull'")" = t ] || fail "batfull did not fill up"
crash_backend
[ "$(psql -c "$bat")" = "$before" ] || fail "batched changes answer differently after a crash: $(psql -c "$bat"), before: $before"
ok "batched inserts, deletes and inserts-if-new: the same counts, answers and items after a crash ($before)"

# Publishes, grants and drops racing checkpoint image passes: after a crash the
# filter holds what the last committed publish put there, with the last grant.
psql -c "CREATE TABLE pubs (i int, readers text)" >/dev/null
cat > /tmp/cuckoo-durable-pub.sql <<'SQL'
SELECT format('BEGIN; INSERT INTO pubs VALUES (%s, %L); SELECT cf_publish(''raced'', cf_agg(g)) FROM generate_series(%s, %s + 20000) g; SELECT %s; COMMIT;',
              i, CASE WHEN i % 2 = 0 THEN 'public' ELSE 'reader' END, i * 100000, i * 100000,
              CASE WHEN i % 2 = 0 THEN 'cf_grant_lookup(''raced'', ''public'')' ELSE 'cf_grant_lookup(''raced'', ''reader'')' END)
  FROM generate_series(1, 60) i \gexec
SQL
psql -f /tmp/cuckoo-durable-pub.sql >/dev/null & pub=$!
psql -c "SELECT cf_create('dropped_often', 10)" >/dev/null
( for _ in $(seq 1 40); do
    psql -c "SELECT cf_drop('dropped_often')" -c "SELECT cf_create('dropped_often', 10)" >/dev/null 2>&1 || true
  done ) & dropper=$!
( for _ in $(seq 1 30); do psql -c "CHECKPOINT" >/dev/null 2>&1 || true; done ) & checkpointer=$!
wait "$pub" "$dropper" "$checkpointer"
crash_backend
read -r last readers < <(psql -F ' ' -c "SELECT i, readers FROM pubs ORDER BY i DESC LIMIT 1")
state=$(psql -c "SELECT state || ' ' || lookup_grantee FROM cuckoo_filters WHERE name = 'raced'")
[ "$state" = "ready $readers" ] || fail "raced filter after a crash: '$state', expected 'ready $readers'"
[ "$(psql -c "SELECT count(*) FROM generate_series($last * 100000, $last * 100000 + 20000) g WHERE NOT cf_contains('raced', g)")" = 0 ] \
  || fail "the raced filter lost keys of its last publish"
[ "$(psql -c "SELECT count(*) FROM cuckoo_filters WHERE name = 'dropped_often'")" = 1 ] || fail "dropped_often is missing after a crash"
ok "60 publishes with grants and 40 drop/create pairs racing 30 checkpoints: the last of each survives a crash"

# The worker stopped by an administrator: writers wait for its restart.
psql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'cuckoo durability'" >/dev/null
psql -c "INSERT INTO acked SELECT g FROM generate_series(900000000, 900000099) g WHERE cf_insert('c', g)"
pg_ctl_ -m immediate -w stop; pg_ctl_ -w start; wait_ready
verify_c "worker terminated" >/dev/null
ok "inserts wait for a restarted durability worker and survive a crash"

# ---- 3. kill -9 of the postmaster ------------------------------------------
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

# ---- 3b. a filter that grows -----------------------------------------------------
# A durable filter created for 1,000 keys takes 2M from two sessions at once,
# while a streaming standby replays it and checkpoints cut its tables: every
# insert is stored, the standby answers every key, a kill -9 of the postmaster
# loses nothing, the measured rate over 2M keys never inserted stays at or
# under the 0.2% asked for, and the filter takes at most 1.5 times the bytes
# of one created for 2M keys. Then growth in replay after the crash: more
# inserts, crash again, still every key.
GR=${CLUSTER_DIR}-grow GR_PORT=$((PGPORT + 7))
grpsql() { psql_on "$GR" "$GR_PORT" "$@"; }
# A slot: the fill writes about 100 MB of WAL, which checkpoints would recycle
# before a slower standby received it.
start_standby "$GR" "$GR_PORT" cuckoo_grow
psql -c "SELECT cf_create('grown', 1000)" -c "SELECT cf_create('ref2m', 2000000, expansion => 0)" >/dev/null
pids=()
for part in 0 1; do
  psql -c "SELECT count(*) FILTER (WHERE cf_insert('grown', 2 * g + $part)) FROM generate_series(0, 999999) g" > "/tmp/cuckoo-durable-grow-$part.out" & pids+=($!)
done
sleep 1; psql -c "CHECKPOINT" >/dev/null
for p in "${pids[@]}"; do wait "$p"; done
[ "$(cat /tmp/cuckoo-durable-grow-0.out /tmp/cuckoo-durable-grow-1.out | tr '\n' ' ')" = "1000000 1000000 " ] \
  || fail "a filter that grows refused inserts: $(cat /tmp/cuckoo-durable-grow-*.out | tr '\n' ' ')"
grow_row="SELECT concat_ws(' ', items, failed_inserts, tables, state) FROM cuckoo_filters WHERE name = 'grown'"
grow_missed="SELECT count(*) FROM generate_series(0, 1999999) g WHERE NOT cf_contains('grown', g)"
read -r items failed tables state < <(psql -c "$grow_row")
[ "$items $failed $state" = "2000000 0 ready" ] && [ "$tables" -ge 10 ] || fail "grown after the fill: $items $failed $tables $state"
[ "$(psql -c "$grow_missed")" = 0 ] || fail "grown misses keys after the fill"
target=$(psql -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 3000); do [ "$(grpsql -c "SELECT pg_last_wal_replay_lsn() >= '$target'" 2>/dev/null)" = t ] && break; sleep 0.1; done
[ "$(grpsql -c "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ] || fail "the standby did not replay the fill within 300 s"
[ "$(grpsql -c "$grow_missed")" = 0 ] || fail "the standby misses keys of the filter that grew"
sb_tables=$(grpsql -c "SELECT tables FROM cuckoo_filters WHERE name = 'grown'")
kill_postmaster
pg_ctl_ -w start
wait_ready
read -r items2 failed2 tables2 state2 < <(psql -c "$grow_row")
[ "$items2 $state2" = "2000000 ready" ] || fail "grown after a postmaster kill: $items2 $failed2 $tables2 $state2"
[ "$(psql -c "$grow_missed")" = 0 ] || fail "grown lost keys in the postmaster kill"
fp=$(psql -c "SELECT count(*) FROM generate_series(10000000, 11999999) g WHERE cf_contains('grown', g)")
[ "$fp" -le 4000 ] || fail "grown answers $fp of 2M absent keys (more than 0.2%)"
read -r gbytes rbytes < <(psql -F ' ' -c "SELECT (SELECT bytes FROM cuckoo_filters WHERE name = 'grown'), (SELECT bytes FROM cuckoo_filters WHERE name = 'ref2m')")
awk -v g="$gbytes" -v r="$rbytes" 'BEGIN {exit !(g <= 1.5 * r)}' || fail "grown takes $gbytes bytes, more than 1.5 x $rbytes"
# More growth, logged after the crash and replayed by the next one.
psql -c "SELECT count(*) FROM generate_series(2000000, 3999999) g WHERE cf_insert('grown', g)" >/dev/null
kill_postmaster
pg_ctl_ -w start
wait_ready
[ "$(psql -c "SELECT count(*) FROM generate_series(0, 3999999) g WHERE NOT cf_contains('grown', g)")" = 0 ] || fail "grown lost keys added after the first crash"
as_pg "$PGBIN/pg_ctl" -D "$GR/data" -m fast -w stop >/dev/null
rm -rf "$GR"
psql -c "SELECT pg_drop_replication_slot('cuckoo_grow')" >/dev/null
psql -c "SELECT cf_drop('grown')" -c "SELECT cf_drop('ref2m')" >/dev/null
ok "a filter made for 1,000 keys took 2M from two sessions (every insert stored, $tables2 tables; standby: $sb_tables, every key), a postmaster kill lost nothing, $fp of 2M absent keys answered maybe ($(awk -v f="$fp" 'BEGIN {printf "%.4f%%", 100 * f / 2e6}')), $gbytes bytes = $(awk -v g="$gbytes" -v r="$rbytes" 'BEGIN {printf "%.2f", g / r}') x a filter made for 2M; 2M more keys after the crash replayed by the next one"

# ---- 4. streaming standby ----------------------------------------------------
start_standby "$SB_DIR" "$SB_PORT"
psql -c "SELECT cf_create('s_seq', 100000)" \
     -c "SELECT count(*) FROM generate_series(1, 60000) g WHERE cf_insert('s_seq', g)" \
     -c "SELECT count(*) FROM generate_series(1, 10000) g WHERE cf_delete('s_seq', g)" \
     -c "SELECT cf_publish('s_pub', cf_agg(g)) FROM generate_series(1, 70000) g" \
     -c "SELECT cf_publish('published', cf_agg(g)) FROM generate_series(100, 200) g" \
     -c "SELECT cf_grant_lookup('s_seq', 'public')" \
     -c "SELECT cf_create('s_gone', 1000)" -c "SELECT cf_drop('s_gone')" \
     -c "SELECT cf_create('s_volatile', 1000, durable => false)" \
     -c "SELECT cf_create('s_set', 100000)" \
     -c "SELECT cf_insert('s_set', array_agg(g)) FROM generate_series(1, 30000) g" \
     -c "SELECT cf_delete('s_set', array_agg(g)) FROM generate_series(1, 5000) g" \
     -c "SELECT cf_insert_new('s_set', array_agg(g)) FROM generate_series(25001, 40000) g" \
     -c "SELECT count(*) FILTER (WHERE cf_insert_new('s_set', g)) FROM generate_series(39001, 41000) g" >/dev/null
pids=()
for c in 1 2 3 4; do
  psql -c "SELECT count(*) FROM generate_series($c * 100000, $c * 100000 + 19999) g WHERE cf_insert('c', g)" >/dev/null & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
target=$(psql -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 600); do
  [ "$(sbpsql -d postgres -c "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ] && break
  sleep 0.1
done
[ "$(sbpsql -c "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"
primary_view=$(psql -c "$view")
standby_view=$(sbpsql -c "$view")
[ "$primary_view" = "$standby_view" ] || fail "standby filters differ: $standby_view; primary: $primary_view"
for f in s_seq s_pub published; do
  [ "$(psql -c "SELECT md5(cf_snapshot('$f')::text)")" = "$(sbpsql -c "SELECT md5(cf_snapshot('$f')::text)")" ] || fail "snapshot of $f differs on the standby"
done
counts="SELECT md5(string_agg(cf_count('s_set', g)::text, ',' ORDER BY g)) FROM generate_series(1, 45000) g"
[ "$(psql -c "$counts")" = "$(sbpsql -c "$counts")" ] || fail "the standby counts keys of batched calls differently"
[ "$(sbpsql -c "SELECT count(*) FROM acked WHERE NOT cf_contains('c', k)")" = 0 ] || fail "standby lookups miss keys"
[ "$(sbpsql -c "SELECT count(*) FROM generate_series(100000, 499999) g WHERE g % 100000 < 20000 AND NOT cf_contains('c', g)")" = 0 ] || fail "standby misses concurrently inserted keys"
[ "$(sbpsql -c "SELECT count(*) FROM cuckoo_filters WHERE name IN ('s_gone', 's_volatile')")" = 0 ] || fail "dropped or non-durable filters on the standby"
for sql in "SELECT cf_insert('s_seq', 1)" "SELECT cf_delete('s_seq', 1)" "SELECT cf_insert('s_seq', ARRAY[1])" "SELECT cf_delete('s_seq', ARRAY[1])" \
           "SELECT cf_insert_new('s_seq', 1)" "SELECT cf_insert_new('s_seq', ARRAY[1])" "SELECT cf_create('x', 10)" "SELECT cf_create('x', 10, durable => false)" \
           "SELECT cf_drop('s_seq')" "SELECT cf_publish('x', cf_agg(1))" "SELECT cf_grant_lookup('s_seq', 'reader')"; do
  expect_error 25006 "$sql" "$SB_DIR" "$SB_PORT"
done
ok "standby: $(sbpsql -c "SELECT count(*) FROM cuckoo_filters") filters identical to the primary's, lookups agree, writes fail with 25006"
as_pg "$PGBIN/pg_ctl" -D "$SB_DIR/data" -w promote >/dev/null
for _ in $(seq 1 100); do sbpsql -c "SELECT cf_insert('s_seq', -1)" >/dev/null 2>&1 && break; sleep 0.1; done
[ "$(sbpsql -c "SELECT cf_insert('s_seq', -2)")" = t ] || fail "the promoted standby does not accept writes"
as_pg "$PGBIN/pg_ctl" -D "$SB_DIR/data" -m fast -w restart >/dev/null
[ "$(sbpsql -c "SELECT cf_contains('s_seq', -1) AND cf_contains('s_seq', -2) AND cf_contains('s_seq', 50000)")" = t ] || fail "the promoted standby lost keys in a restart"
as_pg "$PGBIN/pg_ctl" -D "$SB_DIR/data" -m fast -w stop >/dev/null
ok "promoted standby accepts writes and keeps them across a restart"

# ---- 4b. point-in-time recovery ---------------------------------------------
ARCHIVE=$CLUSTER_DIR/archive PITR_DIR=${CLUSTER_DIR}-pitr
install -d -o postgres -g postgres "$ARCHIVE" "$PITR_DIR"
psql -c "ALTER SYSTEM SET archive_mode = on" -c "ALTER SYSTEM SET archive_command = 'cp %p $ARCHIVE/%f'" >/dev/null
restart
as_pg "$PGBIN/pg_basebackup" -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres -D "$PITR_DIR/data" -X stream -c fast
psql -c "SELECT cf_create('pitr_a', 10000)" -c "SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_insert('pitr_a', g)" \
     -c "SELECT cf_create('pitr_b', 100)" >/dev/null
at_target=$(psql -c "SELECT md5(cf_snapshot('pitr_a')::text)")
target=$(psql -c "SELECT pg_current_wal_insert_lsn()")
psql -c "SELECT count(*) FROM generate_series(1001, 2000) g WHERE cf_insert('pitr_a', g)" -c "SELECT cf_drop('pitr_b')" >/dev/null
last=$(psql -c "SELECT pg_walfile_name(pg_current_wal_lsn())")
psql -c "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 1 300); do
  [ -f "$ARCHIVE/$last" ] && break
  sleep 0.1
done
[ -f "$ARCHIVE/$last" ] || fail "WAL segment $last was not archived"
cat >> "$PITR_DIR/data/postgresql.conf" <<CONF
port = $SB_PORT
unix_socket_directories = '$PITR_DIR'
archive_mode = off
restore_command = 'cp $ARCHIVE/%f %p'
recovery_target_lsn = '$target'
recovery_target_action = 'promote'
recovery_target_inclusive = off
CONF
recover "$PITR_DIR" "$SB_PORT" "point-in-time recovery"
pitr() { psql_on "$PITR_DIR" "$SB_PORT" "$@"; }
got=$(pitr -c "SELECT md5(cf_snapshot('pitr_a')::text) || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'pitr_a') || ' ' || (SELECT count(*) FROM cuckoo_filters WHERE name = 'pitr_b')")
[ "$got" = "$at_target 1000 1" ] || fail "point-in-time recovery to $target gave '$got', expected '$at_target 1000 1'"
as_pg "$PGBIN/pg_ctl" -D "$PITR_DIR/data" -m immediate -w stop >/dev/null
rm -rf "$PITR_DIR"
psql -c "ALTER SYSTEM RESET archive_mode" -c "ALTER SYSTEM RESET archive_command" >/dev/null
restart
ok "point-in-time recovery to an LSN gives the filters as they were there (snapshot bytes, items, a later drop undone)"

# ---- 5. region too small at restart ----------------------------------------
psql -c "SELECT cf_create('big', 10000000)" -c "SELECT cf_insert('big', 42)" >/dev/null
echo "cuckoo.shared_memory = 16MB" >> "$CLUSTER_DIR/data/postgresql.conf"
restart
grep -q 'durable filter "big" (database [0-9]*, [0-9]* bytes) does not fit in cuckoo.shared_memory' "$CLUSTER_DIR/server.log" \
  || fail "no log line names the filter that did not fit"
[ "$(psql -c "SELECT state || ': ' || reason FROM cuckoo_filters WHERE name = 'big'")" = "needs reload: it did not fit in cuckoo.shared_memory when it was restored" ] \
  || fail "big is not marked for reload: $(psql -c "SELECT state, reason FROM cuckoo_filters WHERE name = 'big'")"
expect_error 55000 "SELECT cf_contains('big', 42)"
expect_error 55000 "SELECT cf_snapshot('big')"
[ "$(psql -c "SELECT cf_contains('published', 150)")" = t ] || fail "a filter that fits was not restored"
restart
[ "$(psql -c "SELECT state FROM cuckoo_filters WHERE name = 'big'")" = "needs reload" ] || fail "the placeholder did not survive a restart"
psql -c "SELECT cf_publish('big', cf_agg(g, 0.01)) FROM generate_series(1, 1000) g" >/dev/null
[ "$(psql -c "SELECT state FROM cuckoo_filters WHERE name = 'big'")|$(psql -c "SELECT cf_contains('big', 999)")" = "ready|t" ] || fail "cf_publish did not bring big back"
sed -i '/cuckoo.shared_memory = 16MB/d' "$CLUSTER_DIR/data/postgresql.conf"
ok "filters that do not fit at restart are reported, kept as 'needs reload', and restored by cf_publish"

# ---- 6. a corrupt WAL record -----------------------------------------------
psql -c "CHECKPOINT"
start_lsn=$(psql -c "SELECT pg_current_wal_lsn()")
psql -c "SELECT cf_create('corrupt_me', 1000)" -c "SELECT cf_insert('corrupt_me', 5::bigint)" >/dev/null
end_lsn=$(psql -c "SELECT pg_current_wal_lsn()")
segment=$(psql -c "SELECT pg_walfile_name('$start_lsn')")
pg_ctl_ -m immediate -w stop
python3 - "$CLUSTER_DIR/data/pg_wal/$segment" "$start_lsn" "$end_lsn" <<'PY'
import struct, sys
path, start, end = sys.argv[1], sys.argv[2], sys.argv[3]
lsn = lambda s: (int(s.split('/')[0], 16) << 32) | int(s.split('/')[1], 16)
seg = 16 << 20
def crc32c(data, crc=0xFFFFFFFF):
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc
buf = bytearray(open(path, 'rb').read())
pos = lsn(start) % seg
found = False
while pos < lsn(end) % seg:
    if pos % 8192 == 0:
        pos += 40 if pos % seg == 0 else 24      # page header (long on the first page)
        continue
    tot, xid, prev, info, rmid = struct.unpack_from('<IIQBB', buf, pos)
    if tot == 0:
        break
    if rmid == 128 and info & 0xF0 == 0xE0 and (pos % 8192) + tot <= 8192:
        body = pos + 24 + 2                         # XLR_BLOCK_ID_DATA_SHORT, length
        buf[body + 8] = 0                           # KEY_TYPE's kind: none
        rec = bytes(buf[pos:pos + tot])
        crc = crc32c(rec[24:]); crc = crc32c(rec[:20], crc) ^ 0xFFFFFFFF
        struct.pack_into('<I', buf, pos + 20, crc)
        found = True
        break
    pos += (tot + 7) & ~7
if not found:
    sys.exit("no KEY_TYPE record found on one page")
open(path, 'wb').write(buf)
PY
pg_ctl_ -w start || fail "the server did not start past a corrupt cuckoo record"
grep -q 'cuckoo: cannot replay the WAL record ending at .*: KEY_TYPE record has a bad key type; durable filter "corrupt_me"' "$CLUSTER_DIR/server.log" \
  || fail "no clear message for the corrupt record"
[ "$(psql -c "SELECT state FROM cuckoo_filters WHERE name = 'corrupt_me'")" = "needs reload" ] || fail "the filter of the corrupt record does not say it needs a reload"
expect_error 55000 "SELECT cf_contains('corrupt_me', 5::bigint)"
ok "a corrupt record is not applied, its filter needs a reload, the server starts: $(grep -o 'cuckoo: cannot replay[^;]*' "$CLUSTER_DIR/server.log" | tail -1)"

# ---- 7. no durability worker -------------------------------------------------
tests/tools/cluster.sh stop 2>/dev/null || true; rm -rf "$CLUSTER_DIR"
CLUSTER_CONF="max_worker_processes = 0" tests/tools/cluster.sh start
psql -c "CREATE EXTENSION cuckoo"
grep -q 'too many background workers' "$CLUSTER_DIR/server.log" || fail "the worker was registered despite max_worker_processes = 0"
expect_error 55000 "SELECT cf_create('d', 100)"
psql -c "SELECT cf_create('v', 100, durable => false)" -c "SELECT cf_insert('v', 1)" >/dev/null
[ "$(psql -c "SELECT cf_contains('v', 1)")" = t ] || fail "non-durable filters do not work without the worker"
ok "without the durability worker durable changes fail with 55000; non-durable filters work"

# ---- 8. checkpoints write in proportion to what changed ---------------------
# A durable filter for 10M keys (21 MB) holding 2M: idle checkpoints write no
# cuckoo WAL but the PASS record that says the files cover their redo
# position, 100 inserts cost a checkpoint a small delta file and a
# few records; then a crash right after idle checkpoints, so that everything
# comes back from the files and the WAL since, not from a recent image.
tests/tools/cluster.sh stop 2>/dev/null || true; rm -rf "$CLUSTER_DIR"
tests/tools/cluster.sh start
psql -c "CREATE EXTENSION cuckoo" -c "CREATE EXTENSION pg_walinspect"
psql -c "SELECT cf_publish('ten_m', cf_agg(g, 0.002, 10000000)) FROM generate_series(1, 2000000) g" -c "CHECKPOINT" >/dev/null
fbytes=$(psql -c "SELECT bytes FROM cuckoo_filters WHERE name = 'ten_m'")
lsn() { psql -c "SELECT pg_current_wal_insert_lsn()"; }
wal_between() { psql -c "SELECT pg_wal_lsn_diff('$2', '$1')::bigint"; }
cuckoo_records() { psql -c "SELECT count(*) FROM pg_get_wal_records_info('$1', '$2') WHERE resource_manager = 'cuckoo' AND record_type <> 'EXT'"; }
pass_records() { psql -c "SELECT count(*) FROM pg_get_wal_records_info('$1', '$2') WHERE resource_manager = 'cuckoo' AND record_type = 'EXT'"; }
idle=""
for i in 1 2 3; do
  a=$(lsn); psql -c "CHECKPOINT" >/dev/null; b=$(lsn)
  w=$(wal_between "$a" "$b")
  [ "$w" -lt 65536 ] || fail "idle checkpoint $i wrote $w bytes of WAL"
  [ "$(cuckoo_records "$a" "$b")" = 0 ] || fail "idle checkpoint $i wrote cuckoo records besides its PASS"
  [ "$(pass_records "$a" "$b")" = 1 ] || fail "idle checkpoint $i did not write one PASS record"
  idle="$idle $w"
done
a=$(lsn)
psql -c "SELECT count(*) FROM generate_series(3000001, 3000100) g WHERE cf_insert('ten_m', g)" -c "CHECKPOINT" >/dev/null
b=$(lsn)
w=$(wal_between "$a" "$b")
[ "$w" -lt $((fbytes / 10)) ] || fail "100 inserts and a checkpoint wrote $w bytes of WAL for a $fbytes-byte filter"
read -r written cwal disk < <(psql -F ' ' -c "SELECT checkpoint_write_bytes, checkpoint_wal_bytes, disk_bytes FROM cuckoo_filters WHERE name = 'ten_m'")
[ "$written" -gt 0 ] && [ "$written" -lt $((fbytes / 10)) ] || fail "the cut after 100 inserts wrote $written bytes of file for a $fbytes-byte filter"
[ "$cwal" -lt 65536 ] || fail "the cut after 100 inserts wrote $cwal bytes of WAL"
psql -c "CHECKPOINT" -c "CHECKPOINT" >/dev/null
crash_backend
check_ten_m() { # label, expected items
  local got
  got=$(psql -c "SELECT (SELECT state || ' ' || items FROM cuckoo_filters WHERE name = 'ten_m') || ' ' ||
                  (SELECT count(*) FROM generate_series(1, 2000000) g WHERE NOT cf_contains('ten_m', g)) || ' ' ||
                  (SELECT count(*) FROM generate_series(3000001, 3000100) g WHERE NOT cf_contains('ten_m', g)) || ' ' ||
                  (SELECT count(*) FROM generate_series(4000001, 4100000) g WHERE NOT cf_contains('ten_m', g) AND $2 > 2000100)")
  [ "$got" = "ready $2 0 0 0" ] || fail "$1: ten_m is '$got', expected 'ready $2 0 0 0'"
}
check_ten_m "crash after idle checkpoints" 2000100
ok "idle checkpoints wrote$idle bytes of WAL (one PASS record each); 100 inserts and a checkpoint: $w bytes of WAL, a $written-byte delta for a $fbytes-byte filter ($disk bytes on disk); a crash after idle checkpoints keeps all 2000100 keys"

# ---- 9. a crash soon after a clean restart ---------------------------------
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

# ---- 10. a crash in the middle of writing a cut ------------------------------
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

# ---- 11. damaged files -------------------------------------------------------
# A flipped byte and a truncation, each in the last file of a filter: detected
# (the filter is kept as needing a reload, the log says why), other filters
# unaffected, and cf_publish brings it back.
psql -c "SELECT cf_create('torn1', 10000)" -c "SELECT cf_create('torn2', 10000)" \
     -c "SELECT count(*) FROM generate_series(1, 5000) g WHERE cf_insert('torn1', g) AND cf_insert('torn2', g)" -c "CHECKPOINT" >/dev/null
pg_ctl_ -m fast -w stop
last_file() { # the newest file whose metadata names filter $1
  local f
  for f in $(ls -r "$CLUSTER_DIR"/data/cuckoo/*.base "$CLUSTER_DIR"/data/cuckoo/*.delta 2>/dev/null); do
    grep -q -a "$1" "$f" && { echo "$f"; return; }
  done
}
f1=$(last_file torn1); f2=$(last_file torn2)
[ -n "$f1" ] && [ -n "$f2" ] || fail "no files for torn1/torn2"
python3 - "$f1" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
PY
truncate -s -100 "$f2"
as_pg sh -c "echo garbage > '$CLUSTER_DIR/data/cuckoo/0000000000000001.0000000000000002.delta.tmp'"
pg_ctl_ -w start; wait_ready
for t in torn1 torn2; do
  [ "$(psql -c "SELECT state || ': ' || reason FROM cuckoo_filters WHERE name = '$t'")" = "needs reload: its files in the data directory are damaged" ] \
    || fail "$t: $(psql -c "SELECT state, reason FROM cuckoo_filters WHERE name = '$t'")"
  expect_error 55000 "SELECT cf_contains('$t', 1)"
done
grep -q 'the files of durable filter "torn1" (database [0-9]*) are damaged' "$CLUSTER_DIR/server.log" || fail "the log does not name torn1's damaged files"
compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null && fail "a stray temporary file was left"
check_ten_m "next to damaged files" 2100100
psql -c "SELECT cf_publish('torn1', cf_agg(g)) FROM generate_series(1, 5000) g" >/dev/null
restart
[ "$(psql -c "SELECT state FROM cuckoo_filters WHERE name = 'torn1'")|$(psql -c "SELECT count(*) FROM generate_series(1, 5000) g WHERE NOT cf_contains('torn1', g)")" = "ready|0" ] \
  || fail "cf_publish did not bring torn1 back for good"
psql -c "SELECT cf_drop('torn2')" >/dev/null
ok "a flipped byte and a truncated file are detected (needs reload, named in the log), a stray temporary file is removed, other filters are intact"


# ---- 11b. a cut that cannot be written holds the checkpoint back -------------
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

# ---- 12. a base backup copied while the files are being written -------------
# A backup taken with pg_backup_start/pg_backup_stop and copied by hand, the way
# a file-level copier can see the directory: the data directory first, then
# cuckoo/ file by file while the server goes on: cp's base copied at once, its
# deltas after a compaction removed them (so the copy holds a base of cp older
# than the backup's start, with no file after it), the other files at the end,
# while a cut is half written (its temporary file copied as it is), after a
# drop removed gone's files. Replay from the backup's start must make up for
# all of it (the compaction logged cp's new base).
AR=${CLUSTER_DIR}-archive BK=${CLUSTER_DIR}-bk BK_PORT=$((PGPORT + 4))
install -d -o postgres -g postgres "$AR" "$BK"
psql -c "ALTER SYSTEM SET archive_mode = on" -c "ALTER SYSTEM SET archive_command = 'cp %p $AR/%f'" >/dev/null
restart
# The filter a file belongs to (the name in its header).
# The name's length byte's top bit says a key type follows the name.
file_filter() { python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); print(d[101:101 + (d[100] & 0x3f)].decode())' "$1"; }
psql -c "SELECT cf_create('bk', 200000)" -c "SELECT count(*) FROM generate_series(1, 50000) g WHERE cf_insert('bk', g)" \
     -c "SELECT cf_create('cp', 2000000)" -c "SELECT count(*) FROM generate_series(1, 1000000) g WHERE cf_insert('cp', g)" \
     -c "SELECT cf_create('gone', 1000)" -c "SELECT cf_insert('gone', 1)" -c "CHECKPOINT" \
     -c "SELECT count(*) FROM generate_series(1000001, 1001000) g WHERE cf_insert('cp', g)" -c "CHECKPOINT" \
     -c "SELECT count(*) FROM generate_series(1001001, 1002000) g WHERE cf_insert('cp', g)" >/dev/null
coproc SESS { "$PGBIN/psql" -X -At -q -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres -d postgres 2>>"$BK/session.log"; }
echo "SELECT pg_backup_start('cuckoo durability test', true);" >&"${SESS[1]}"
read -r -t 120 -u "${SESS[0]}" backup_start || fail "pg_backup_start did not answer"
install -d -o postgres -g postgres "$BK/data"
tar -C "$CLUSTER_DIR/data" --exclude=./cuckoo --exclude=./pg_wal --exclude=./postmaster.pid --exclude=./postmaster.opts -cf - . | tar -C "$BK/data" -xf -
install -d -o postgres -g postgres -m 700 "$BK/data/pg_wal" "$BK/data/pg_wal/archive_status" "$BK/data/cuckoo"
listed=$(ls "$CLUSTER_DIR/data/cuckoo")
cp_files=$(for f in $listed; do if [ "$(file_filter "$CLUSTER_DIR/data/cuckoo/$f")" = cp ]; then echo "$f"; fi; done)
[ "$(grep -c 'base$' <<<"$cp_files")" = 1 ] && [ "$(grep -c 'delta$' <<<"$cp_files")" = 2 ] || fail "cp should have a base and two deltas when the backup starts: $cp_files"
cp_base=$(grep 'base$' <<<"$cp_files")
cp -p "$CLUSTER_DIR/data/cuckoo/$cp_base" "$BK/data/cuckoo/"
# During the backup: two rounds after which cp compacts (its old files go), a
# drop, inserts, then a cut that stops halfway while the rest is copied.
for round in 1 2; do
  psql -c "SELECT count(*) FROM generate_series(1900001 + $round * 100000, 2000000 + $round * 100000) g WHERE cf_insert('cp', g)" -c "CHECKPOINT" >/dev/null
done
psql -c "SELECT cf_drop('gone')" -c "CHECKPOINT" >/dev/null
psql -c "SELECT count(*) FROM generate_series(50001, 60000) g WHERE cf_insert('bk', g)" \
     -c "SELECT count(*) FROM generate_series(60001, 70000) g WHERE cf_insert('bk', g)" \
     -c "ALTER SYSTEM SET cuckoo.debug_cut_write_delay = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
psql -c "CHECKPOINT" >/dev/null 2>&1 & ckpt=$!
for _ in $(seq 1 600); do compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null && break; sleep 0.05; done
compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null || fail "no cut file was being written during the backup"
copied=1 missed=0
for f in $listed; do
  [ "$f" = "$cp_base" ] && continue
  if [ -f "$CLUSTER_DIR/data/cuckoo/$f" ]; then cp -p "$CLUSTER_DIR/data/cuckoo/$f" "$BK/data/cuckoo/"; copied=$((copied + 1)); else missed=$((missed + 1)); fi
done
cp -p "$CLUSTER_DIR"/data/cuckoo/*.tmp "$BK/data/cuckoo/"
[ ! -f "$CLUSTER_DIR/data/cuckoo/$cp_base" ] || fail "cp did not compact during the backup"
[ "$missed" -ge 3 ] || fail "fewer files went away during the backup than the compaction and the drop remove ($missed)"
psql -c "ALTER SYSTEM RESET cuckoo.debug_cut_write_delay" -c "SELECT pg_reload_conf()" >/dev/null
wait "$ckpt"
psql -c "SELECT count(*) FROM generate_series(70001, 80000) g WHERE cf_insert('bk', g)" \
     -c "SELECT count(*) FROM generate_series(3000001, 3010000) g WHERE cf_insert('cp', g)" >/dev/null
cp_keys="(SELECT count(*) FROM generate_series(1, 1002000) g WHERE NOT cf_contains('cp', g)) + (SELECT count(*) FROM generate_series(2000001, 2200000) g WHERE NOT cf_contains('cp', g)) + (SELECT count(*) FROM generate_series(3000001, 3010000) g WHERE NOT cf_contains('cp', g))"
bk_expect=$(psql -c "SELECT (SELECT items FROM cuckoo_filters WHERE name = 'bk') || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'cp') || ' ' || $cp_keys")
echo "SELECT replace(encode(convert_to(labelfile, 'UTF8'), 'base64'), E'\n', '') FROM pg_backup_stop(true);" >&"${SESS[1]}"
read -r -t 300 -u "${SESS[0]}" label || fail "pg_backup_stop did not answer"
echo '\q' >&"${SESS[1]}"; wait "$SESS_PID" 2>/dev/null || true
base64 -d <<<"$label" > "$BK/data/backup_label"; chown postgres:postgres "$BK/data/backup_label"
cat >> "$BK/data/postgresql.conf" <<CONF
port = $BK_PORT
unix_socket_directories = '$BK'
archive_mode = off
restore_command = 'cp $AR/%f %p'
CONF
recover "$BK" "$BK_PORT" "the backup"
bkpsql() { psql_on "$BK" "$BK_PORT" "$@"; }
got=$(bkpsql -c "SELECT (SELECT items FROM cuckoo_filters WHERE name = 'bk') || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'cp') || ' ' || $cp_keys")
[ "$got" = "$bk_expect" ] || fail "the backup's filters: '$got', expected '$bk_expect'"
[ "$(bkpsql -c "SELECT count(*) FROM generate_series(1, 80000) g WHERE NOT cf_contains('bk', g)")" = 0 ] || fail "the backup's bk lost keys"
[ "$(bkpsql -c "SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM cuckoo_filters WHERE name IN ('bk', 'cp', 'gone', 'ten_m')")" = "bk:ready,cp:ready,ten_m:ready" ] \
  || fail "the backup's filters are $(bkpsql -c "SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM cuckoo_filters")"
[ "$(bkpsql -c "SELECT count(*) FROM generate_series(1, 2000000) g WHERE NOT cf_contains('ten_m', g)")" = 0 ] || fail "the backup's ten_m lost keys"
as_pg "$PGBIN/pg_ctl" -D "$BK/data" -m fast -w restart >/dev/null
[ "$(bkpsql -c "SELECT count(*) FROM generate_series(1, 80000) g WHERE NOT cf_contains('bk', g)") $(bkpsql -c "SELECT $cp_keys")" = "0 0" ] || fail "the restored backup lost keys in a restart"
as_pg "$PGBIN/pg_ctl" -D "$BK/data" -m immediate -w stop >/dev/null
psql -c "ALTER SYSTEM RESET archive_mode" -c "ALTER SYSTEM RESET archive_command" >/dev/null
restart
ok "a backup copied while files were written and removed ($copied files copied, one of them a base of cp older than the backup's start, $missed gone before they were, one half written): every key after recovery (bk, cp: $got)"

# ---- 13. switchover ------------------------------------------------------------
# The primary stops cleanly, its standby replays the shutdown checkpoint,
# restarts (its restartpoint is that checkpoint) and is promoted; the old
# primary then follows the new one as a standby, and a base backup is taken
# from it. Each of them has every key.
SW=${CLUSTER_DIR}-sw SW_PORT=$((PGPORT + 2)) SWB=${CLUSTER_DIR}-swbk SWB_PORT=$((PGPORT + 3))
swpsql() { psql_on "$SW" "$SW_PORT" "$@"; }
swbpsql() { psql_on "$SWB" "$SWB_PORT" "$@"; }
install -d -o postgres -g postgres "$SW" "$SWB"
as_pg "$PGBIN/pg_basebackup" -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres -D "$SW/data" -R -X stream -c fast
cat >> "$SW/data/postgresql.conf" <<CONF
port = $SW_PORT
unix_socket_directories = '$SW'
CONF
as_pg "$PGBIN/pg_ctl" -D "$SW/data" -l "$SW/server.log" -w start >/dev/null
psql -c "SELECT cf_create('sw', 100000)" -c "SELECT count(*) FROM generate_series(1, 60000) g WHERE cf_insert('sw', g)" >/dev/null
pg_ctl_ -m fast -w stop
shutdown_ckpt=$(as_pg "$PGBIN/pg_controldata" -D "$CLUSTER_DIR/data" | sed -n 's/^Latest checkpoint location: *//p')
for _ in $(seq 1 600); do
  [ "$(swpsql -c "SELECT pg_last_wal_replay_lsn() >= '$shutdown_ckpt'")" = t ] && break
  sleep 0.1
done
[ "$(swpsql -c "SELECT pg_last_wal_replay_lsn() >= '$shutdown_ckpt'")" = t ] || fail "the standby did not replay the primary's shutdown checkpoint"
sw_check() { # label, psql function, expected sw keys
  local got
  got=$("$2" -c "SELECT coalesce((SELECT state || ' ' || items FROM cuckoo_filters WHERE name = 'sw'), 'missing') || ' ' ||
                   (SELECT count(*) FROM generate_series(1, $3) g WHERE NOT cf_contains('sw', g)) || ' ' ||
                   (SELECT count(*) FROM generate_series(1, 2000000) g WHERE NOT cf_contains('ten_m', g))")
  [ "$got" = "ready $3 0 0" ] || fail "$1: sw is '$got', expected 'ready $3 0 0'"
}
as_pg "$PGBIN/pg_ctl" -D "$SW/data" -m fast -w restart >/dev/null
sw_check "standby restarted after the primary's shutdown" swpsql 60000
as_pg "$PGBIN/pg_ctl" -D "$SW/data" -w promote >/dev/null
for _ in $(seq 1 100); do swpsql -c "SELECT cf_insert('sw', 60001)" >/dev/null 2>&1 && break; sleep 0.1; done
swpsql -c "SELECT count(*) FROM generate_series(60002, 70000) g WHERE cf_insert('sw', g)" -c "CHECKPOINT" >/dev/null
sw_check "promoted standby" swpsql 70000
# The old primary follows the new one.
as_pg touch "$CLUSTER_DIR/data/standby.signal"
as_pg sh -c "echo \"primary_conninfo = 'host=$SW port=$SW_PORT user=postgres'\" >> '$CLUSTER_DIR/data/postgresql.auto.conf'"
pg_ctl_ -w start
target=$(swpsql -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 600); do
  [ "$(psql -c "SELECT pg_last_wal_replay_lsn() >= '$target'" 2>/dev/null)" = t ] && break
  sleep 0.1
done
sw_check "old primary following the new one" psql 70000
restart
sw_check "old primary, now a standby, restarted" psql 70000
# A base backup of that standby, started on its own.
as_pg "$PGBIN/pg_basebackup" -h "$CLUSTER_DIR" -p "$PGPORT" -U postgres -D "$SWB/data" -X stream
as_pg sed -i '/primary_conninfo/d' "$SWB/data/postgresql.auto.conf"
rm -f "$SWB/data/standby.signal"
cat >> "$SWB/data/postgresql.conf" <<CONF
port = $SWB_PORT
unix_socket_directories = '$SWB'
CONF
as_pg "$PGBIN/pg_ctl" -D "$SWB/data" -l "$SWB/server.log" -w start >/dev/null
sw_check "base backup of the old primary as a standby" swbpsql 70000
as_pg "$PGBIN/pg_ctl" -D "$SWB/data" -m fast -w stop >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$SW/data" -m fast -w stop >/dev/null
ok "switchover: the standby restarted after the primary's shutdown checkpoint, promoted, the old primary following it, and a backup of that: every key"


# ---- 14. a server that ran 0.4.0 --------------------------------------------------
# 0.4.0 (built from this repository's history, run from a private tree) makes
# durable filters; the server then starts with this release's library after a
# clean shutdown (0.4.0's saved file) and after a crash (its live file and its
# WAL of image passes): every filter comes back, goes to the new files, and
# ALTER EXTENSION UPDATE follows.
old_pkg=$(bash tests/tools/old-build.sh 0.4.0 94ac4d7038371d5c93bb138a9f92c66fe4e060b7)
up_port=$((PGPORT + 5))
for how in clean crash; do
  old_bin=$(bash tests/tools/pgtree.sh "$old_pkg" "${CLUSTER_DIR}-tree040")
  U=${CLUSTER_DIR}-up-$how
  upsql() { psql_on "$U" "$up_port" "$@"; }
  PGBIN=$old_bin CLUSTER_DIR=$U PGPORT=$up_port tests/tools/cluster.sh start
  upsql -c "CREATE EXTENSION cuckoo" -c "CREATE ROLE reader" >/dev/null
  [ "$(upsql -c "SELECT cuckoo_library_version() || ' ' || extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "0.4.0 0.4.0" ] || fail "the private tree does not run 0.4.0"
  upsql -c "SELECT cf_create('u_fill', 100000)" -c "SELECT count(*) FROM generate_series(1, 50000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_delete('u_fill', g)" \
        -c "SELECT cf_publish('u_pub', cf_agg(g)) FROM generate_series(1, 30000) g" -c "SELECT cf_grant_lookup('u_pub', 'reader')" \
        -c "CHECKPOINT" -c "SELECT count(*) FROM generate_series(50001, 60000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT cf_create('u_vol', 100, durable => false)" >/dev/null
  rows="SELECT string_agg(concat_ws(',', name, items, state, lookup_grantee), ' ' ORDER BY name) FROM cuckoo_filters"
  keys="SELECT (SELECT count(*) FROM generate_series(1001, 60000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT count(*) FROM generate_series(1, 30000) g WHERE NOT cf_contains('u_pub', g))"
  before=$(upsql -c "$rows" | sed 's/ u_vol,0,ready//')
  if [ "$how" = clean ]; then
    # This release's files installed while 0.4.0's library still runs (it is
    # preloaded): the update refuses and changes nothing.
    tree_root=${old_bin%/usr/lib/postgresql/*}
    (cd target/package && find . -type f) | while read -r f; do
      install -m 755 "target/package/$f" "$tree_root/${f#./}.new" && mv -f "$tree_root/${f#./}.new" "$tree_root/${f#./}"
    done
    if out=$(upsql -c "ALTER EXTENSION cuckoo UPDATE" 2>&1); then fail "the update ran on a server still running 0.4.0's library"; fi
    grep -q "this session runs cuckoo library 0.4.0, the update needs" <<<"$out" || fail "the update's refusal: $out"
    [ "$(upsql -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = 0.4.0 ] || fail "the refused update changed the version"
    ok "ALTER EXTENSION UPDATE refuses while 0.4.0's library still runs: $(grep -o 'this session runs[^"]*' <<<"$out" | head -1)"
    as_pg "$old_bin/pg_ctl" -D "$U/data" -m fast -w stop >/dev/null
  else
    CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  fi
  [ -f "$U/data/cuckoo_filters.dat" ] || fail "0.4.0 left no cuckoo_filters.dat ($how)"
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  for _ in $(seq 1 100); do [ ! -f "$U/data/cuckoo_filters.dat" ] && break; sleep 0.1; done
  [ "$(upsql -c "SELECT cuckoo_library_version()")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "the updated server does not run this release's library"
  [ "$(upsql -c "$rows")" = "$before" ] || fail "after 0.4.0 ($how): $(upsql -c "$rows"), before: $before"
  [ "$(upsql -c "$keys")" = "0 0" ] || fail "after 0.4.0 ($how): keys missing ($(upsql -c "$keys"))"
  [ ! -f "$U/data/cuckoo_filters.dat" ] || fail "cuckoo_filters.dat is still there after the first cut ($how)"
  [ "$(ls "$U/data/cuckoo" | grep -c '\.base$')" = 2 ] || fail "not one base file per durable filter ($how): $(ls "$U/data/cuckoo")"
  upsql -c "ALTER EXTENSION cuckoo UPDATE" >/dev/null
  [ "$(upsql -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "ALTER EXTENSION UPDATE did not update"
  upsql -c "SELECT count(*) FROM generate_series(60001, 61000) g WHERE cf_insert('u_fill', g)" >/dev/null
  CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  [ "$(upsql -c "SELECT (SELECT count(*) FROM generate_series(1001, 61000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'u_fill')")" = "0 60000" ] \
    || fail "after the update and a crash ($how): $(upsql -c "$rows")"
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -m immediate -w stop >/dev/null
  ok "a server that ran 0.4.0 ($how stop) comes back with its durable filters ($before), moves them to files, updates, and survives a crash"
done

# ---- 15. a server that ran 0.5.0 --------------------------------------------------
# 0.5.0 (built from this repository's history, run from a private tree) keeps
# durable filters in files and WAL whose metadata record no key type. The
# server then starts with this release's library after a clean shutdown (its
# files) and after a crash (its files and the WAL since): every filter comes
# back recording no key type and answering exactly as 0.5.0 answered (a text
# probe of an integer filter hashes as text, as then), ALTER EXTENSION UPDATE
# follows, and a filter made afterwards records its first insert's key type.
old_pkg=$(bash tests/tools/old-build.sh 0.5.0 d5657c76aff0aac3e973983b16b74bc8b2b17fed)
up_port=$((PGPORT + 6))
for how in clean crash; do
  old_bin=$(bash tests/tools/pgtree.sh "$old_pkg" "${CLUSTER_DIR}-tree050")
  U=${CLUSTER_DIR}-up050-$how
  upsql() { psql_on "$U" "$up_port" "$@"; }
  PGBIN=$old_bin CLUSTER_DIR=$U PGPORT=$up_port tests/tools/cluster.sh start
  upsql -c "CREATE EXTENSION cuckoo" -c "CREATE ROLE reader" >/dev/null
  [ "$(upsql -c "SELECT cuckoo_library_version() || ' ' || extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "0.5.0 0.5.0" ] || fail "the private tree does not run 0.5.0"
  upsql -c "SELECT cf_create('u_fill', 100000)" -c "SELECT count(*) FROM generate_series(1, 50000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_delete('u_fill', g)" \
        -c "SELECT cf_publish('u_pub', cf_agg(g)) FROM generate_series(1, 30000) g" -c "SELECT cf_grant_lookup('u_pub', 'reader')" \
        -c "CHECKPOINT" -c "SELECT count(*) FROM generate_series(50001, 60000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT cf_insert('u_fill', 'a text key'::text)" -c "SELECT cf_create('u_vol', 100, durable => false)" >/dev/null
  rows="SELECT string_agg(concat_ws(',', name, items, state, lookup_grantee), ' ' ORDER BY name) FROM cuckoo_filters"
  keys="SELECT (SELECT count(*) FROM generate_series(1001, 60000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT count(*) FROM generate_series(1, 30000) g WHERE NOT cf_contains('u_pub', g))"
  # What 0.5.0 answers for text probes of the integer filter: hashed as text.
  text_probes="SELECT string_agg(cf_contains('u_fill', t)::text, ',' ORDER BY t) FROM unnest(ARRAY['a text key', '2000', '59999', 'absent']::text[]) t"
  before=$(upsql -c "$rows" | sed 's/ u_vol,0,ready//')
  text_before=$(upsql -c "$text_probes")
  if [ "$how" = clean ]; then
    as_pg "$old_bin/pg_ctl" -D "$U/data" -m fast -w stop >/dev/null
  else
    CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  fi
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  [ "$(upsql -c "SELECT cuckoo_library_version()")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "the server does not run this release's library after 0.5.0"
  [ "$(upsql -c "$rows")" = "$before" ] || fail "after 0.5.0 ($how): $(upsql -c "$rows"), before: $before"
  [ "$(upsql -c "$keys")" = "0 0" ] || fail "after 0.5.0 ($how): keys missing ($(upsql -c "$keys"))"
  [ "$(upsql -c "$text_probes")" = "$text_before" ] || fail "after 0.5.0 ($how): text probes answer $(upsql -c "$text_probes"), 0.5.0 answered $text_before"
  [ "$(upsql -c "SELECT (cf_info(cf_snapshot('u_fill')) ->> 'key_type') IS NULL AND (cf_info(cf_snapshot('u_pub')) ->> 'key_type') IS NULL")" = t ] \
    || fail "0.5.0's filters should record no key type ($how)"
  upsql -c "ALTER EXTENSION cuckoo UPDATE" >/dev/null
  [ "$(upsql -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "ALTER EXTENSION UPDATE did not update"
  upsql -c "SELECT count(*) FROM generate_series(60001, 61000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT cf_create('u_new', 1000)" -c "SELECT cf_insert('u_new', 7)" >/dev/null
  CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  [ "$(upsql -c "SELECT (SELECT count(*) FROM generate_series(1001, 61000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'u_fill')")" = "0 60001" ] \
    || fail "after the update and a crash ($how): $(upsql -c "$rows")"
  [ "$(upsql -c "SELECT string_agg(concat_ws(':', name, coalesce(key_type, 'none')), ' ' ORDER BY name) FROM cuckoo_filters")" = "u_fill:none u_new:integer u_pub:none" ] \
    || fail "key types after the update and a crash ($how): $(upsql -c "SELECT string_agg(concat_ws(':', name, key_type), ' ') FROM cuckoo_filters")"
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -m immediate -w stop >/dev/null
  ok "a server that ran 0.5.0 ($how stop) comes back with its durable filters ($before) answering as 0.5.0 did (text probes $text_before), updates, and a new filter takes its first insert's key type across a crash"
done

echo "durability tests passed"
