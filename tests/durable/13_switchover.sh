# Durability 13 (sourced by run.sh; alone: bash tests/durable/run.sh 13):
#   a clean switchover: the standby restarts from the primary's shutdown
#   checkpoint, is promoted, the old primary follows it, and a backup is
#   taken from that.
# Needs: 08 (filter ten_m).

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
