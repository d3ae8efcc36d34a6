# Durability 04 (sourced by run.sh; alone: bash tests/durable/run.sh 04):
#   a streaming hot standby made with pg_basebackup: filters created, filled,
#   published, deleted from, granted and dropped on the primary look the same
#   there (items, snapshots, every lookup); writes there fail with 25006;
#   after promotion it accepts writes and keeps its filters across a restart.
# Needs: 02 (the table acked and filter c).

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
