# Durability 08 (sourced by run.sh; alone: bash tests/durable/run.sh 08):
#   idle checkpoints write no cuckoo WAL but their PASS record; 100 inserts
#   into a 21 MB filter cost a checkpoint a small delta file and a few
#   records; a crash right after idle checkpoints keeps every key (all from
#   the files and the WAL). (Makes the main cluster anew, with pg_walinspect.)

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
check_ten_m "crash after idle checkpoints" 2000100
ok "idle checkpoints wrote$idle bytes of WAL (one PASS record each); 100 inserts and a checkpoint: $w bytes of WAL, a $written-byte delta for a $fbytes-byte filter ($disk bytes on disk); a crash after idle checkpoints keeps all 2000100 keys"
