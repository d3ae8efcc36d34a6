#!/usr/bin/env bash
# cuckoo on a real Citus cluster (`make test-citus`, part of `make test`):
# builds Citus 13.2.2 if it is not installed (build-citus.sh of the shared
# tools, which installs its build dependencies), starts a coordinator and two
# workers on local ports with shared_preload_libraries = 'citus,cuckoo' (spelled '$libdir/citus,cuckoo' on two of the nodes),
# distributes tables over 32 shards and checks:
#   - cf_sharded_agg is pushed down (worker_partial_agg) and gives cf_agg's
#     filter byte for byte: whole table, GROUP BY, with fpp and capacity, and
#     for keys of every kind (numeric, date, timestamptz, an enum, arrays,
#     inet, varchar, bytea, text, smallint), none failing on the workers;
#   - the partial states shipped: one key under 100 characters, and each
#     shard's within the Rice code's bound (figures printed);
#   - pre-screening with a filter in a reference table answers as the
#     semi-join;
#   - by-name calls in distributed queries are never silently partial: they
#     fail (42704, 55000) unless the filter is a cluster copy
#     (cf_publish_cluster: identical on every node, lookups only) or declared
#     node-local (cf_node_local), which is right for co-located keys.
# Against the installed cuckoo (run `make install` first). Ports CITUS_PORT
# (default 5470) and the two after it; CITUS_KEEP=1 leaves the cluster running.
set -euo pipefail
cd "$(dirname "$0")/.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
BASE=${CITUS_DIR:-/tmp/cuckoo-citus}
PORT=${CITUS_PORT:-5470}
ROWS=${CITUS_ROWS:-200000}
fail() { echo "citus: FAIL: $*" >&2; exit 1; }
ok() { echo "citus: [${SECONDS}s] $*"; }
source tests/citus_cluster.sh
ok "coordinator and 2 workers up ($(q coord -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), cuckoo $(q coord -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'"))"

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

# Pre-screen with a filter in a reference table: exact, as the semi-join.
q coord -c "CREATE TABLE orders (oid bigint, account bigint)" -c "SELECT create_distributed_table('orders', 'oid')" \
  -c "INSERT INTO orders SELECT g, g * 7 % ($ROWS) FROM generate_series(1, $ROWS) g" \
  -c "CREATE TABLE acc_filter (f cuckoofilter)" -c "SELECT create_reference_table('acc_filter')" \
  -c "INSERT INTO acc_filter SELECT cf_sharded_agg(account) FROM events" >/dev/null
exact=$(q coord -c "SELECT count(*) FROM orders WHERE account IN (SELECT account FROM events)")
screened=$(q coord -c "SELECT count(*) FROM orders o, acc_filter a WHERE cf_contains(a.f, o.account) AND o.account IN (SELECT account FROM events)")
[ "$exact" = "$screened" ] || fail "pre-screened semi-join: $screened rows, exact $exact"
ok "pre-screening orders with a filter in a reference table: $screened rows, as the exact semi-join"

# Named filters. A by-name call in a query on a distributed table runs on the
# workers: with no filter there, or one that is only that node's own, it fails
# (42704, 55000) instead of answering from part of the keys.
qe() { q "$@" -v VERBOSITY=verbose 2>&1 >/dev/null | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1; }
expect_error() { local code=$1 what=$2; shift 2; local got; got=$(qe coord -c "$@") || true; [ "$got" = "$code" ] || fail "$what: expected SQLSTATE $code, got '${got:-no error}'"; }
q coord -c "SELECT cf_create('acc', $ROWS, durable => false)" >/dev/null
expect_error 42704 "a by-name lookup of a filter only the coordinator has" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)"
expect_error 42704 "by-name inserts from a distributed query, filter only on the coordinator" "SELECT count(*) FROM events WHERE cf_insert('acc', account)"
q coord -c "SELECT count(*) FROM run_command_on_workers(\$\$SELECT cf_create('acc', $ROWS, durable => false)\$\$)" >/dev/null
expect_error 55000 "by-name inserts from a distributed query into each node's own filter" "SELECT count(*) FROM events WHERE cf_insert('acc', account)"
expect_error 55000 "a by-name lookup of each node's own filter" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)"
for n in w1 w2; do [ "$(q $n -c "SELECT items FROM cuckoo_filters WHERE name = 'acc'")" = 0 ] || fail "a refused distributed insert changed the filter on $n"; done
ok "by-name calls in distributed queries fail (42704 without a filter on the worker, 55000 with one that is only the node's own): nothing partial"

# One value published to every node: identical copies, lookups from
# distributed queries answer for all keys; changes go through the cluster.
q coord -c "SELECT cf_drop(n) FROM (VALUES ('acc')) v(n)" >/dev/null
q coord -c "SELECT count(*) FROM run_command_on_workers(\$\$SELECT cf_drop('acc')\$\$)" >/dev/null
reached=$(q coord -c "SELECT cf_publish_cluster('acc', (SELECT cf_sharded_agg(account) FROM events))")
[ "$reached" = 3 ] || fail "cf_publish_cluster published to $reached nodes, not 3"
want=$(q coord -c "SELECT md5(cf_sharded_agg(account)::text) FROM events")
for n in coord w1 w2; do
  [ "$(q $n -c "SELECT md5(cf_snapshot('acc')::text)")" = "$want" ] || fail "the copy of 'acc' on $n differs from the value published"
  [ "$(q $n -c "SELECT scope FROM cuckoo_cluster_filters WHERE name = 'acc'")" = cluster ] || fail "'acc' is not listed as a cluster copy on $n"
done
missed=$(q coord -c "SELECT count(*) FROM orders WHERE account IN (SELECT account FROM events) AND NOT cf_contains('acc', account)")
[ "$missed" = 0 ] || fail "the cluster copy missed $missed member rows in a distributed query"
by_name=$(q coord -c "SELECT count(*) FROM orders WHERE cf_contains('acc', account)")
by_value=$(q coord -c "SELECT count(*) FROM orders o, acc_filter a WHERE cf_contains(a.f, o.account)")
[ "$by_name" = "$by_value" ] || fail "the cluster copy passes $by_name rows, the same value in a reference table $by_value"
expect_error 55000 "by-name inserts into a cluster copy from a distributed query" "SELECT count(*) FROM events WHERE cf_insert('acc', account + 1)"
expect_error 55000 "a by-name insert into a cluster copy on the coordinator" "SELECT cf_insert('acc', -1)"
expect_error 55000 "cf_publish over a cluster copy on one node" "SELECT cf_publish('acc', cf_agg(1))"
[ "$(q w1 -c "SELECT md5(cf_snapshot('acc')::text)")" = "$want" ] || fail "a refused change altered the cluster copy on w1"
q w1 -c "SELECT cf_drop('acc')" >/dev/null
expect_error 42704 "a lookup of a cluster copy dropped on one worker" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)"
[ "$(qe w1 -c "SELECT cf_create('acc', 10)")" = 55000 ] || fail "cf_create under the name of a cluster copy was not refused"
[ "$(q coord -c "SELECT cf_publish_cluster('acc', (SELECT cf_sharded_agg(account) FROM events))")" = 3 ] || fail "publishing again did not reach 3 nodes"
[ "$(q coord -c "SELECT count(*) FROM orders WHERE cf_contains('acc', account)")" = "$by_name" ] || fail "the copy published again answers differently"
[ "$(q coord -c "SELECT cf_drop_cluster('acc')")" = 3 ] || fail "cf_drop_cluster did not drop the filter on 3 nodes"
expect_error 42704 "a lookup after cf_drop_cluster" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)"
ok "cf_publish_cluster: identical copies on 3 nodes, a distributed lookup passes $by_name orders (as the value; 0 member rows missed); changes to a copy are refused, a dropped copy fails (42704), cf_drop_cluster drops all"

# Node-local filters where they are right: each node's filter holds the keys
# of its own shards, probed from a table co-located with them.
q coord -c "CREATE TABLE accounts (account bigint PRIMARY KEY)" -c "SELECT create_distributed_table('accounts', 'account')" \
  -c "CREATE TABLE logins (account bigint, at int)" -c "SELECT create_distributed_table('logins', 'account', colocate_with => 'accounts')" \
  -c "INSERT INTO accounts SELECT g * 3 FROM generate_series(1, $ROWS / 4) g" \
  -c "INSERT INTO logins SELECT g, g FROM generate_series(1, $ROWS) g" >/dev/null
q coord -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_create('acc_local', $ROWS, durable => false)\$\$)" >/dev/null
[ "$(q coord -c "SELECT cf_node_local('acc_local')")" = 3 ] || fail "cf_node_local did not reach 3 nodes"
stored=$(q coord -c "SELECT count(*) FILTER (WHERE cf_insert('acc_local', account)) FROM accounts")
[ "$stored" = $((ROWS / 4)) ] || fail "node-local inserts stored $stored keys, not $((ROWS / 4))"
w_items=$(( $(q w1 -c "SELECT items FROM cuckoo_filters WHERE name = 'acc_local'") + $(q w2 -c "SELECT items FROM cuckoo_filters WHERE name = 'acc_local'") ))
[ "$w_items" = $((ROWS / 4)) ] || fail "the workers' node-local filters hold $w_items keys, not $((ROWS / 4))"
missed=$(q coord -c "SELECT count(*) FROM logins l WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.account = l.account) AND NOT cf_contains('acc_local', l.account)")
[ "$missed" = 0 ] || fail "node-local filters missed $missed co-located member rows"
exact=$(q coord -c "SELECT count(*) FROM logins l WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.account = l.account)")
screened=$(q coord -c "SELECT count(*) FROM logins l WHERE cf_contains('acc_local', l.account) AND EXISTS (SELECT 1 FROM accounts a WHERE a.account = l.account)")
[ "$exact" = "$screened" ] || fail "pre-screening with node-local filters gave $screened rows, exact $exact"
# Probed from a table distributed otherwise, the same filters hold only the
# node's share of the keys: what cf_node_local's caller vouches never happens.
partial=$(q coord -c "SELECT count(*) FROM orders WHERE account IN (SELECT account FROM accounts) AND NOT cf_contains('acc_local', account)")
[ "$partial" -gt 0 ] || fail "node-local filters probed from a non-co-located table missed nothing: the test does not show the limit it documents"
[ "$(q coord -c "SELECT cf_node_local('acc_local', false)")" = 3 ] || fail "cf_node_local(false) did not reach 3 nodes"
expect_error 55000 "a lookup after cf_node_local(false)" "SELECT count(*) FROM logins WHERE cf_contains('acc_local', account)"
ok "node-local filters (cf_node_local) on co-located keys: $screened of $exact logins, as the exact semi-join; probed from orders (not co-located) they miss $partial member rows, as documented"

# Every key type cf_agg takes: cf_sharded_agg over a distributed table is
# pushed down and gives cf_agg's filter (cf_agg's rows gathered to the
# coordinator) byte for byte. Types without a cf_sharded_agg of their own go
# through cf_sharded_key (cuckoo's planner hook); none fails on the workers.
q coord -c "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')" \
  -c "CREATE TABLE typed (id bigint, n numeric, d date, ts timestamptz, m mood, a int[], ip inet, v varchar(20), b bytea, t text, s smallint, ma mood[])" \
  -c "SELECT create_distributed_table('typed', 'id')" \
  -c "INSERT INTO typed SELECT g, g % 5000 / 7.0, date '2026-01-01' + g % 900, timestamptz '2026-01-01 00:00+00' + g % 7000 * interval '1 minute',
        (enum_range(NULL::mood))[1 + g % 3], ARRAY[g % 300, g % 7], ('10.0.' || g % 200 || '.' || g % 250)::inet, 'v' || g % 4000,
        decode(md5((g % 3000)::text), 'hex'), 'k' || g, (g % 30000)::smallint,
        ARRAY[(enum_range(NULL::mood))[1 + g % 3], (enum_range(NULL::mood))[1 + g / 3 % 3]] FROM generate_series(1, $ROWS / 4) g" >/dev/null
for col in n d ts m a ip v b t s; do
  plan=$(q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_sharded_agg($col) FROM typed")
  grep -q "worker_partial_agg" <<<"$plan" || fail "cf_sharded_agg of typed.$col was not pushed down"
  got=$(q coord -c "SELECT md5(cf_sharded_agg($col)::text) FROM typed" 2>&1) || fail "cf_sharded_agg of typed.$col failed: $got"
  [ "$got" = "$(q coord -c "SELECT md5(cf_agg($col)::text) FROM typed")" ] || fail "cf_sharded_agg of typed.$col differs from cf_agg"
done
# An enum's array hashes by OIDs, which differ from node to node: refused,
# with the reason, never a filter that is not cf_agg's.
err=$(q coord -c "SELECT cf_sharded_agg(ma) FROM typed" 2>&1 >/dev/null || true)
grep -q "whose hashes may differ from node to node" <<<"$err" || fail "cf_sharded_agg over an enum's array did not fail with the reason: $err"
for args in "n, 0.01" "m, 0.001, 100000" "ts, 0.05"; do
  [ "$(q coord -c "SELECT md5(cf_sharded_agg($args)::text) FROM typed")" = "$(q coord -c "SELECT md5(cf_agg($args)::text) FROM typed")" ] \
    || fail "cf_sharded_agg($args) differs from cf_agg"
done
[ "$(q coord -c "SELECT md5(string_agg(s || ':' || md5(f::text), ',' ORDER BY s)) FROM (SELECT s % 10 AS s, cf_sharded_agg(n) f FROM typed GROUP BY s % 10) x")" \
  = "$(q coord -c "SELECT md5(string_agg(s || ':' || md5(f::text), ',' ORDER BY s)) FROM (SELECT s % 10 AS s, cf_agg(n) f FROM typed GROUP BY s % 10) x")" ] \
  || fail "cf_sharded_agg(numeric) GROUP BY differs from cf_agg"
for form in "DISTINCT n" "n ORDER BY id"; do
  [ "$(q coord -c "SELECT md5(cf_sharded_agg($form)::text) FROM typed")" = "$(q coord -c "SELECT md5(cf_agg(n)::text) FROM typed")" ] \
    || fail "cf_sharded_agg($form) differs from cf_agg"
done
# An error of Citus's planner passes through cuckoo's hook as it is.
err=$(q coord -c "SELECT (SELECT 1 FROM typed LIMIT 1), cf_sharded_agg(n) FROM typed" 2>&1 >/dev/null || true)
grep -q "cannot push down subquery" <<<"$err" && ! grep -qi "panic\|backtrace\|rust" <<<"$err" \
  || fail "an error of Citus's planner came through cuckoo's planner hook as: $err"
missed=$(q coord -c "WITH f AS (SELECT cf_sharded_agg(ts) AS f FROM typed) SELECT count(*) FROM typed, f WHERE NOT cf_contains(f.f, typed.ts)")
[ "$missed" = 0 ] || fail "the timestamptz filter missed $missed of its keys"
ok "cf_sharded_agg of numeric, date, timestamptz, an enum, int[], inet, varchar, bytea, text and smallint: pushed down, each equal to cf_agg (an enum's array refused, with the reason); with fpp and capacity, GROUP BY, DISTINCT and ORDER BY; Citus's planner errors pass through the hook unchanged"

# The partial states Citus ships: their text form, each distinct key once,
# Rice-coded: about (64 - log2 n + 1.5) / 6 characters per key, no rounding.
one=$(q coord -c "SELECT length(cf_sharded_state_trans(NULL, 1::bigint)::text)")
[ "$one" -lt 100 ] || fail "the partial state of one key is $one characters"
make_state_of
sizes=$(q coord -c "SELECT string_agg(result, ' ') FROM run_command_on_shards('events', \$\$SELECT concat_ws(':', count(DISTINCT account), length(state_of(account)::text), pg_column_size(cf_agg(account))) FROM %s\$\$)")
total_state=0 total_filter=0 total_keys=0
for s in $sizes; do
  IFS=: read -r n chars fbytes <<<"$s"
  bound=$(awk -v n="$n" 'BEGIN { printf "%d", n * (64 - log(n) / log(2) + 2) / 6 + 40 }')
  [ "$chars" -le "$bound" ] || fail "a shard's partial state of $n keys is $chars characters, over $bound"
  total_state=$((total_state + chars)) total_filter=$((total_filter + fbytes)) total_keys=$((total_keys + n))
done
ok "partial states: one key $one characters; $(wc -w <<<"$sizes") shards, $total_keys keys: $total_state characters shipped ($(awk -v a=$total_state -v k=$total_keys 'BEGIN { printf "%.2f", a / k }') per key), $(awk -v a=$total_state -v b=$total_filter 'BEGIN { printf "%.2f", a / b }')x the shards' own finished filters ($total_filter bytes)"
source tests/citus_keys.sh
source tests/citus_publish.sh
ok "done"
