# Citus 01 (sourced by run.sh; alone: bash tests/citus/run.sh 01):
#   cf_sharded_agg is pushed down (worker_partial_agg) and gives cf_agg's
#   filter byte for byte: whole table, GROUP BY the distribution column and
#   another. (Makes the table events, distributed over 32 shards.)

q coord -c "SET citus.shard_count = 32" \
  -c "CREATE TABLE events (id bigint, account bigint, day int, amount numeric, seen date)" \
  -c "SELECT create_distributed_table('events', 'id')" \
  -c "INSERT INTO events SELECT g, g % ($ROWS / 2), g % 7, g % 1000, date '2026-01-01' + (g % 365) FROM generate_series(1, $ROWS) g" >/dev/null
local_events="SELECT g::bigint AS id, (g % ($ROWS / 2))::bigint AS account, g % 7 AS day FROM generate_series(1, $ROWS) g"

# Pushdown: worker_partial_agg on the shards, the same bytes as cf_agg.
plan=$(q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_sharded_agg(account) FROM events")
grep -q "worker_partial_agg" <<<"$plan" || fail "cf_sharded_agg was not pushed down: $plan"
[ "$(q coord -c "SELECT md5(cf_sharded_agg(account)::text) FROM events")" = "$(q coord -c "SELECT md5(cf_agg(account)::text) FROM ($local_events) e")" ] \
  || fail "cf_sharded_agg over the distributed table differs from cf_agg over the same rows"
for col in id day; do
  [ "$(q coord -c "SELECT md5(string_agg($col || ':' || md5(f::text), ',' ORDER BY $col)) FROM (SELECT $col, cf_sharded_agg(account) f FROM events GROUP BY $col) s")" \
    = "$(q coord -c "SELECT md5(string_agg($col || ':' || md5(f::text), ',' ORDER BY $col)) FROM (SELECT $col, cf_agg(account) f FROM ($local_events) e GROUP BY $col) s")" ] \
    || fail "cf_sharded_agg GROUP BY $col differs from cf_agg"
done
ok "cf_sharded_agg is pushed down (worker_partial_agg) and equals cf_agg byte for byte: whole table, GROUP BY the distribution column and another"
