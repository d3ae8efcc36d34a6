#!/usr/bin/env bash
# cf_sharded_agg on Citus (`make bench`, part citus): a coordinator and two
# workers on this machine (tests/citus/cluster.sh), a table distributed over 32
# shards, and cf_sharded_agg pushed down (each shard's partial state shipped to
# the coordinator and combined there) against cf_agg, whose rows Citus gathers
# to the coordinator (row-gather), in the same run, interleaved rounds, medians
# and ratios:
#
#   whole    SELECT cf_count(cf_sharded_agg(account)) FROM ev    (KEYS distinct, 2 rows each)
#   groups   ... GROUP BY grp, GROUPS groups on a non-distribution column
#   big      BIG distinct keys: the same, and through a materialized CTE (an
#            intermediate result, limited by citus.max_intermediate_result_size)
#   lookups  one cf_contains by name per statement (pgbench): a cluster copy,
#            an unlisted filter, and a database without citus
#
# and the characters shipped: each shard's partial state as text (what Citus
# sends), per key and against the shards' own finished filters. Goals (issue
# 21): groups at most the time of row-gather; big faster than row-gather and
# the CTE working at the default limit.
#
# Env: CITUS_BENCH_KEYS (1000000), CITUS_BENCH_GROUPS (10000),
#      CITUS_BENCH_BIG (34000000; 0 skips), CITUS_BENCH_ROUNDS (3),
#      CITUS_BENCH_LOOKUP_SECS (5),
#      CITUS_BENCH_DIR (/tmp/cuckoo-citus-bench), CITUS_BENCH_PORT (5475).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
KEYS=${CITUS_BENCH_KEYS:-1000000}
NGROUPS=${CITUS_BENCH_GROUPS:-10000}
BIG=${CITUS_BENCH_BIG:-34000000}
ROUNDS=${CITUS_BENCH_ROUNDS:-3}
BASE=${CITUS_BENCH_DIR:-/tmp/cuckoo-citus-bench}
PORT=${CITUS_BENCH_PORT:-5475}
fail() { echo "citus bench: FAIL: $*" >&2; exit 1; }
CITUS_CONF="shared_buffers = 256MB
work_mem = 256MB
max_wal_size = 8GB
synchronous_commit = off"
# (lib.sh first: its median is used here, its q is replaced by the cluster's.)
source tests/bench/lib.sh
source tests/citus/cluster.sh

# Seconds one statement takes, run on the coordinator.
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  q coord -c "$1" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
# Median seconds of each of two statements, interleaved, ROUNDS rounds:
# prints "a b".
pair() {
  local as=() bs=()
  for _ in $(seq "$ROUNDS"); do as+=("$(timed "$1")"); bs+=("$(timed "$2")"); done
  echo "$(echo "${as[@]}" | median) $(echo "${bs[@]}" | median)"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

q coord -c "SET citus.shard_count = 32" -c "CREATE TABLE ev (id bigint, account bigint, grp int)" -c "SELECT create_distributed_table('ev', 'id')" \
  -c "INSERT INTO ev SELECT g, g % $KEYS, g % $NGROUPS FROM generate_series(1, 2 * $KEYS) g" -c "VACUUM ANALYZE ev" >/dev/null
[ "$(q coord -c "SELECT md5(cf_sharded_agg(account)::text) FROM ev")" = "$(q coord -c "SELECT md5(cf_agg(account)::text) FROM ev")" ] \
  || fail "cf_sharded_agg differs from cf_agg"
read -r push gather < <(pair "SELECT cf_count(cf_sharded_agg(account)) FROM ev" "SELECT cf_count(cf_agg(account)) FROM ev")
echo "citus bench: whole, $KEYS keys: cf_sharded_agg pushed down ${push}s, cf_agg row-gather ${gather}s: $(ratio "$push" "$gather")x"
read -r push gather < <(pair "SELECT grp, cf_count(cf_sharded_agg(account)) FROM ev GROUP BY grp" "SELECT grp, cf_count(cf_agg(account)) FROM ev GROUP BY grp")
echo "citus bench: groups, $NGROUPS groups on a non-distribution column: cf_sharded_agg ${push}s, cf_agg row-gather ${gather}s: $(ratio "$push" "$gather")x (goal: >= 1)"

# What crosses the network: each shard's partial state as text.
make_state_of
read -r keys chars fbytes < <(q coord -F ' ' -c "SELECT sum(split_part(result, ':', 1)::bigint), sum(split_part(result, ':', 2)::bigint), sum(split_part(result, ':', 3)::bigint)
  FROM run_command_on_shards('ev', \$\$SELECT concat_ws(':', count(DISTINCT account), length(state_of(account)::text), pg_column_size(cf_agg(account))) FROM %s\$\$)")
whole=$(q coord -c "SELECT pg_column_size(cf_agg(account)) FROM ev")
echo "citus bench: shipped: $chars characters for $keys shard keys ($(awk -v c="$chars" -v k="$keys" 'BEGIN { printf "%.2f", c / k }') per key), $(ratio "$fbytes" "$chars")x the shards' own finished filters ($fbytes bytes), $(ratio "$whole" "$chars")x the final filter ($whole bytes)"

# Pre-screening orders (distributed on another column, a quarter of them
# members) against ev's accounts: the filter alone, from a reference table and
# as a cluster copy by name, against the exact semi-join.
q coord -c "SET citus.shard_count = 32" -c "CREATE TABLE orders (oid bigint, account bigint)" -c "SELECT create_distributed_table('orders', 'oid')" \
  -c "INSERT INTO orders SELECT g, g::bigint * 7919 % (4 * $KEYS) FROM generate_series(1, $KEYS) g" -c "VACUUM ANALYZE orders" \
  -c "CREATE TABLE acc_filter (f cuckoofilter)" -c "SELECT create_reference_table('acc_filter')" \
  -c "INSERT INTO acc_filter SELECT cf_sharded_agg(account) FROM ev" >/dev/null
q coord -c "SELECT cf_publish_cluster('acc', (SELECT f FROM acc_filter), false)" >/dev/null
exact=$(q coord -c "SELECT count(*) FROM orders WHERE account IN (SELECT account FROM ev)")
by_ref=$(q coord -c "SELECT count(*) FROM orders o, acc_filter a WHERE cf_contains(a.f, o.account)")
by_name=$(q coord -c "SELECT count(*) FROM orders WHERE cf_contains('acc', account)")
[ "$by_ref" -ge "$exact" ] && [ "$by_name" = "$by_ref" ] || fail "screens passed $by_ref and $by_name orders, members $exact"
t_exact=$(timed "SELECT count(*) FROM orders WHERE account IN (SELECT account FROM ev)")
read -r t_ref t_name < <(pair "SELECT count(*) FROM orders o, acc_filter a WHERE cf_contains(a.f, o.account)" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)")
echo "citus bench: pre-screen of $KEYS orders ($exact members): exact semi-join ${t_exact}s; the filter alone (passes $by_ref) from a reference table ${t_ref}s ($(ratio "$t_ref" "$t_exact")x faster), as a cluster copy by name ${t_name}s ($(ratio "$t_name" "$t_exact")x)"

# What checking a cluster copy costs a one-lookup statement (issue 30): on
# the coordinator, pgbench (1 client, LOOKUP_SECS seconds a run, ROUNDS
# interleaved runs, median statements per second) of cf_contains by name of
# the cluster copy 'acc' (each statement reads the node's listing and the
# cluster's record), of an unlisted filter of the same value (reads the
# listing), and of that filter in a database of the same server without the
# citus extension (reads nothing).
q coord -c "SELECT cf_publish('plain', (SELECT f FROM acc_filter), false)" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS nocitus" -c "CREATE DATABASE nocitus" >/dev/null
q coord -d nocitus -c "CREATE EXTENSION cuckoo" -c "SELECT cf_publish('plain', cf_agg(g::bigint), false) FROM generate_series(1, $KEYS) g" >/dev/null
lookup_tps() { # database filter
  printf '\\set k random(1, %s)\nSELECT cf_contains(%s, :k::bigint);\n' "$((4 * KEYS))" "'$2'" > "$BASE/lookup.sql"
  "$PGBIN/pgbench" -n -h "$BASE/coord" -p "$PORT" -U postgres -c 1 -T "${CITUS_BENCH_LOOKUP_SECS:-5}" -f "$BASE/lookup.sql" "$1" 2>/dev/null \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
copy_tps=() plain_tps=() bare_tps=()
for _ in $(seq "$ROUNDS"); do
  copy_tps+=("$(lookup_tps postgres acc)") plain_tps+=("$(lookup_tps postgres plain)") bare_tps+=("$(lookup_tps nocitus plain)")
done
t_copy=$(echo "${copy_tps[@]}" | median) t_plain=$(echo "${plain_tps[@]}" | median) t_bare=$(echo "${bare_tps[@]}" | median)
ms() { awk -v t="$1" 'BEGIN { printf "%.3f", 1000 / t }'; }
echo "citus bench: one-lookup statements on the coordinator: a cluster copy $(ms "$t_copy") ms, an unlisted filter $(ms "$t_plain") ms, the same in a database without citus $(ms "$t_bare") ms: the cluster copy's checks cost $(ratio "$t_copy" "$t_bare")x a lookup without Citus, $(ratio "$t_copy" "$t_plain")x an unlisted filter's"
# What pinning costs a distributed statement (issue 30): a router query of
# orders with a lookup of the cluster copy, the planner pinning it (it reads
# the latest publish from the node's replica of the record), against the
# same query with the pin written in it (the planner reads nothing). An
# index on oid keeps each statement to one row of one shard.
q coord -c "CREATE INDEX ON orders (oid)" >/dev/null
router_tps() { # name expression
  printf '\\set k random(1, %s)\nSELECT count(*) FROM orders WHERE oid = :k AND cf_contains(%s, account);\n' "$KEYS" "$1" > "$BASE/router.sql"
  "$PGBIN/pgbench" -n -h "$BASE/coord" -p "$PORT" -U postgres -c 1 -T "${CITUS_BENCH_LOOKUP_SECS:-5}" -f "$BASE/router.sql" postgres 2>/dev/null \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
pinned_tps=() hand_tps=()
for _ in $(seq "$ROUNDS"); do
  pinned_tps+=("$(router_tps "'acc'")") hand_tps+=("$(router_tps "cf_cluster_pin('acc', 9223372036854775806)")")
done
t_pinned=$(echo "${pinned_tps[@]}" | median) t_hand=$(echo "${hand_tps[@]}" | median)
echo "citus bench: router statements with a lookup of the cluster copy: pinned by the planner $(ms "$t_pinned") ms, pin written in the query $(ms "$t_hand") ms: the planner's read of the latest publish costs $(ratio "$t_pinned" "$t_hand")x"

if [ "$BIG" -gt 0 ]; then
  q coord -c "SET citus.shard_count = 32" -c "CREATE TABLE big (id bigint, account bigint)" -c "SELECT create_distributed_table('big', 'id')" \
    -c "INSERT INTO big SELECT g, g FROM generate_series(1, $BIG) g" -c "VACUUM ANALYZE big" >/dev/null
  limit=$(q coord -c "SHOW citus.max_intermediate_result_size")
  cte=$(q coord -c "WITH f AS MATERIALIZED (SELECT cf_sharded_agg(account) AS f FROM big) SELECT cf_count(f) FROM f" 2>&1) \
    || fail "the CTE over $BIG keys failed at citus.max_intermediate_result_size = $limit: $cte"
  [ "$cte" = "$BIG" ] || fail "the CTE over $BIG keys counted $cte"
  echo "citus bench: big: a materialized CTE of cf_sharded_agg over $BIG keys works at citus.max_intermediate_result_size = $limit"
  read -r push gather < <(ROUNDS=1 pair "SELECT cf_count(cf_sharded_agg(account)) FROM big" "SELECT cf_count(cf_agg(account)) FROM big")
  echo "citus bench: big, $BIG keys: cf_sharded_agg pushed down ${push}s, cf_agg row-gather ${gather}s: $(ratio "$push" "$gather")x (goal: > 1)"
fi
