# Durability 01 (sourced by run.sh; alone: bash tests/durable/run.sh 01):
#   clean restart: durable filters (filled, published, with deletes and a
#   grant) come back exactly; non-durable ones are gone.

psql -c "SELECT cf_create('filled', 200000)" \
     -c "SELECT count(*) FROM generate_series(1, 100000) g WHERE cf_insert('filled', g)" \
     -c "SELECT count(*) FROM generate_series(1, 20000) g WHERE cf_delete('filled', g)" \
     -c "SELECT cf_publish('published', cf_agg(g)) FROM generate_series(1, 50000) g" \
     -c "SELECT cf_grant_lookup('published', 'reader')" \
     -c "SELECT cf_create('volatile', 1000, durable => false)" \
     -c "SELECT cf_insert('volatile', 1)" >/dev/null
before=$(psql -c "$view")
snaps_before=$(psql -c "$snaps")
restart
[ "$(psql -c "$view")" = "$before" ] || fail "filters after a restart: $(psql -c "$view"), before: $before"
[ "$(psql -c "$snaps")" = "$snaps_before" ] || fail "snapshots differ after a restart"
[ "$(psql -c "SELECT count(*) FROM generate_series(20001, 100000) g WHERE NOT cf_contains('filled', g)")" = 0 ] || fail "keys lost in a restart"
[ "$(psql -c "SELECT count(*) FROM cuckoo_filters WHERE name = 'volatile'")" = 0 ] || fail "a non-durable filter survived a restart"
ok "clean restart keeps durable filters exactly ($before)"
