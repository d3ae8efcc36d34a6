# Durability 04b (sourced by run.sh; alone: bash tests/durable/run.sh 04b):
#   point-in-time recovery from a base backup and archived WAL to an LSN
#   gives the filters as they were at that LSN.

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
