# Durability 05 (sourced by run.sh; alone: bash tests/durable/run.sh 05):
#   a region too small at restart: the filters that do not fit are listed in
#   the log and kept as 'needs reload' (probes raise 55000), the server runs,
#   and cf_publish brings them back.
# Needs: 01 (filter published, holding key 150).

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
