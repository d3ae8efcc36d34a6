# Durability 03b (sourced by run.sh; alone: bash tests/durable/run.sh 03b):
#   a filter made for 1,000 keys takes 2M from two sessions while a standby
#   replays it: every key everywhere, a postmaster kill loses nothing, the
#   rate and the bytes are those asked for.

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
