# Durability 02c (sourced by run.sh; alone: bash tests/durable/run.sh 02c):
#   publishes with grants and drop/create pairs racing checkpoints, then a
#   crash: the last committed publish and grant, and the last create, survive.

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
