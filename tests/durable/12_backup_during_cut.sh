# Durability 12 (sourced by run.sh; alone: bash tests/durable/run.sh 12):
#   a base backup copied by hand while a cut is half written, after a
#   compaction and a drop removed files it then lacks.
# Needs: 08 (filter ten_m).

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
