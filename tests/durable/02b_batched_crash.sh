# Durability 02b (sourced by run.sh; alone: bash tests/durable/run.sh 02b):
#   batched inserts, deletes and inserts-if-new, then a crash: the same
#   counts, answers and items.

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
