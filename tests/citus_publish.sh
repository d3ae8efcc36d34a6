# Cluster copies whatever happens to nodes and to the coordinator (issue 30):
# a query by the name of a cluster copy answers from the copy the cluster last
# published on every node it touches, or fails with an error that names the
# node and says how to catch it up; never from a mix. Sourced by
# tests/citus.sh on its cluster (functions q, qe, ok, fail, start_node,
# port_of; variables BASE, PGBIN, ROWS; tables events, orders).
#   1. a node drained and disabled while a publish runs, then activated and
#      given shards again: its queries fail until cf_sync_cluster;
#   2. the coordinator killed during a publish, at a node between taking its
#      copy and listing it, and after every node took its copy but before the
#      publish was recorded: errors, then a publish again is exact;
#   3. a node added after the publish: fails until cf_sync_cluster;
#   4. a name claimed first on every node by a role: the publisher takes every
#      copy over; a role may not publish over a name it may not change;
#   5. rights per name in the listing and the cluster's record;
#   6. a query whose pieces straddle a publish's commit fails (40001) instead
#      of answering partly from each publish; kept plans (prepared, on the
#      coordinator and on a worker) answer from the new publish after it.

pg_ctl_node() { as_pg "$PGBIN/pg_ctl" -D "$BASE/$1/data" -l "$BASE/$1/server.log" -w "${@:2}" >/dev/null; }
sqlstate_of() { sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' <<<"$1" | head -1; }
# Roles are propagated to the workers by Citus.
q coord -c "CREATE ROLE squatter LOGIN" -c "CREATE ROLE tenant LOGIN" >/dev/null
# The published set: keys_b's accounts; a query screened by filter 'pub'
# passes every order whose account is in it (exact: the semi-join).
q coord -c "CREATE TABLE keys_a (account bigint)" -c "SELECT create_reference_table('keys_a')" \
  -c "CREATE TABLE keys_b (account bigint)" -c "SELECT create_reference_table('keys_b')" \
  -c "INSERT INTO keys_a SELECT g * 2 FROM generate_series(1, $ROWS / 4) g" \
  -c "INSERT INTO keys_b SELECT g * 2 + 1 FROM generate_series(1, $ROWS / 4) g" >/dev/null
exact_b=$(q coord -c "SELECT count(*) FROM orders o WHERE o.account IN (SELECT account FROM keys_b)")
# Either the screened count equals the exact one, or the query failed with
# 55000/42704 naming a node: prints "exact", or the error's SQLSTATE and text.
screen_b() {
  local out
  if out=$(q coord -v VERBOSITY=verbose -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account) AND o.account IN (SELECT account FROM keys_b)" 2>&1); then
    [ "$out" = "$exact_b" ] || fail "$1: the pre-screened semi-join gave $out rows, the exact one $exact_b (a silent wrong answer)"
    echo exact
  else
    echo "$(sqlstate_of "$out") $(grep -m1 '^ERROR' <<<"$out")"
  fi
}
# Router queries that touch one node each (one order per shard), by name.
router_all() {
  local ids id out bad=""
  ids=$(q coord -c "SELECT string_agg(min_id::text, ' ') FROM (SELECT min(oid) AS min_id FROM orders GROUP BY get_shard_id_for_distribution_column('orders', oid)) s")
  for id in $ids; do
    if out=$(q coord -c "SELECT count(*) FROM orders o WHERE o.oid = $id AND o.account IN (SELECT account FROM keys_b) AND NOT cf_contains('pub', o.account)" 2>&1); then
      [ "$out" = 0 ] || bad="$bad $id"
    fi
  done
  [ -z "$bad" ] || fail "$1: router queries by orders.oid$bad answered from a copy that misses published keys"
}
expect_refusal() {
  local what=$1 got
  got=$(screen_b "$what")
  case $got in
    "55000 "*|"42704 "*) ;;
    *) fail "$what: expected the pre-screened query to fail (55000 or 42704), got: $got" ;;
  esac
  grep -q "$2" <<<"$got" || fail "$what: the error does not say '$2': $got"
  router_all "$what"
}
# The statement (after a SET ROLE) fails for want of rights: 42501 here, or
# 38000 from cf_on_all_nodes with a node's "permission denied".
refused() {
  local what=$1 node=$2 out code
  out=$(q "$node" -v VERBOSITY=verbose -c "$3" -c "$4" 2>&1) && fail "$what: not refused"
  code=$(sqlstate_of "$out")
  case $code in
    42501) ;;
    38000) grep -q "permission denied" <<<"$out" || fail "$what: failed on a node, but not for want of rights: $out" ;;
    *) fail "$what: expected 42501, got: $out" ;;
  esac
}
publish_b() { q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_b))" 2>&1; }

# 1. A node disabled during a publish.
[ "$(q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))")" = 3 ] || fail "publishing A did not reach 3 nodes"
q coord -c "SELECT citus_drain_node('$BASE/w2', $(port_of w2), shard_transfer_mode := 'block_writes')" >/dev/null 2>&1 || fail "citus_drain_node of w2 failed"
q coord -c "SELECT citus_disable_node('$BASE/w2', $(port_of w2), synchronous := true)" >/dev/null
out=$(publish_b)
grep -q "^2$" <<<"$out" || fail "publishing B with w2 disabled: $out"
grep -q "was not copied to inactive Citus node(s) $BASE/w2" <<<"$out" || fail "publishing B with w2 disabled did not warn about w2: $out"
q coord -c "SELECT citus_activate_node('$BASE/w2', $(port_of w2))" \
  -c "SELECT citus_set_node_property('$BASE/w2', $(port_of w2), 'shouldhaveshards', true)" >/dev/null
q coord -c "SELECT citus_rebalance_start(shard_transfer_mode := 'block_writes')" -c "SELECT citus_rebalance_wait()" >/dev/null 2>&1 || fail "rebalancing onto w2 failed"
[ "$(q coord -c "SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) WHERE n.nodeport = $(port_of w2) AND p.shardid IN (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'orders'::regclass)")" -gt 0 ] \
  || fail "the rebalance gave w2 no shard of orders: the scenario does not test what it says"
expect_refusal "w2 re-activated after missing a publish" "$BASE/w2:$(port_of w2).*cf_sync_cluster\|not the cluster's copy"
[ "$(q coord -c "SELECT cf_sync_cluster('pub')")" = 1 ] || fail "cf_sync_cluster did not copy to exactly one node (w2)"
[ "$(screen_b "after cf_sync_cluster")" = exact ] || fail "after cf_sync_cluster the pre-screened query still fails"
router_all "after cf_sync_cluster"
[ "$(q coord -c "SELECT cf_sync_cluster('pub')")" = 0 ] || fail "a second cf_sync_cluster copied again"
# A copy made again at the recorded publish, of another value (by its owner,
# calling the node's function directly): its digest is not the record's.
v=$(q coord -c "SELECT version FROM cuckoo_cluster_copies WHERE name = 'pub'")
q w1 -c "SELECT cf_cluster_copy('pub', $v, (SELECT cf_agg(account) FROM keys_a), true)" >/dev/null
expect_refusal "a copy of another value listed at the recorded publish" "digest differs"
[ "$(q coord -c "SELECT cf_sync_cluster('pub')")" = 1 ] || fail "cf_sync_cluster did not replace the copy whose digest differs"
[ "$(screen_b "after cf_sync_cluster replaced a copy of another value")" = exact ] || fail "after cf_sync_cluster the pre-screened query still fails"
ok "a worker drained and disabled during a publish, then activated and rebalanced: its queries fail (55000, naming it and cf_sync_cluster), never answer from the old copy; cf_sync_cluster gives it the copy ($exact_b orders, as the exact semi-join)"

# 2. The coordinator killed during a publish. At a node: after its copy is
# published, before it is listed (its transaction then aborts).
stop_point() { q "$1" -c "ALTER SYSTEM SET cuckoo.debug_stop_publish = '$2'" -c "SELECT pg_reload_conf()" >/dev/null; }
kill_coordinator_during_publish() {
  local where=$1 point=$2 i n
  stop_point "$where" "$point"
  (publish_b >"$BASE/publish.out" 2>&1 &)
  for i in $(seq 300); do
    n=$(q "$where" -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%cf_cluster_%' AND wait_event IS DISTINCT FROM 'ClientRead' AND state = 'active' AND pid <> pg_backend_pid()")
    grep -q "waits at ${point%%:*}" "$BASE/$where/server.log" 2>/dev/null && [ "$n" -gt 0 ] && break
    sleep 0.1
  done
  grep -q "waits at ${point%%:*}" "$BASE/$where/server.log" || fail "the publish never reached the stop point $point on $where"
  pg_ctl_node coord -m immediate stop
  q "$where" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%cf_cluster_%' AND pid <> pg_backend_pid()" >/dev/null
  stop_point "$where" ""
  pg_ctl_node coord start
}
q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))" >/dev/null
kill_coordinator_during_publish w2 node:pub
versions=$(for n in coord w1 w2; do q $n -c "SELECT version FROM cuckoo_cluster_filters WHERE name = 'pub'"; done | sort -u | wc -l)
[ "$versions" -gt 1 ] || fail "after the coordinator was killed mid-publish the nodes list one version: the scenario does not test a mix"
expect_refusal "the coordinator killed while w2 took its copy" "not the cluster's copy\|not the cluster copy listed"
[ "$(publish_b)" = 3 ] || fail "publishing again after the crash did not reach 3 nodes"
[ "$(screen_b "published again after the crash")" = exact ] || fail "after publishing again the pre-screened query still fails"
router_all "published again after the crash"
# On the coordinator: every node took its copy, the publish is not recorded.
q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))" >/dev/null
stop_point coord record:pub
(publish_b >"$BASE/publish.out" 2>&1 &)
for i in $(seq 300); do grep -q "waits at record" "$BASE/coord/server.log" && break; sleep 0.1; done
grep -q "waits at record" "$BASE/coord/server.log" || fail "the publish never reached the record stop point"
pg_ctl_node coord -m immediate stop
pg_ctl_node coord start
stop_point coord ""
expect_refusal "the coordinator killed before recording a publish every node took" "not the cluster's copy"
[ "$(publish_b)" = 3 ] || fail "publishing again after the second crash did not reach 3 nodes"
[ "$(screen_b "published again after the second crash")" = exact ] || fail "after publishing again the pre-screened query still fails"
ok "the coordinator killed mid-publish (a node between its copy and its listing; every node copied, nothing recorded): every query by the name fails (55000), none answers from a mix; publishing again is exact"

# 3. A node added after the publish.
start_node w3
q coord -c "SELECT citus_add_node('$BASE/w3', $(port_of w3))" >/dev/null
q coord -c "SELECT citus_rebalance_start(shard_transfer_mode := 'block_writes')" -c "SELECT citus_rebalance_wait()" >/dev/null 2>&1 || fail "rebalancing onto w3 failed"
expect_refusal "w3 added after the publish" "$BASE/w3:$(port_of w3) has no copy"
# Another role plants its own filter under the name on the new node, listed
# at the recorded publish (or node-local): it answers nothing.
v=$(q coord -c "SELECT version FROM cuckoo_cluster_copies WHERE name = 'pub'")
q w3 -c "SET ROLE tenant" -c "SELECT cf_publish('pub', (SELECT cf_agg(g::bigint) FROM generate_series(1, 1000) g), false)" \
  -c "SELECT cf_cluster_list('pub', 'cluster', $v)" -c "SELECT cf_grant_lookup('pub', 'public')" >/dev/null
expect_refusal "another role's filter listed as the cluster copy on w3" "digest differs"
got=$(qe w3 -c "SET ROLE tenant" -c "SELECT cf_cluster_list('pub', 'node', NULL)") || true
[ "$got" = 55000 ] || fail "another role declared its filter node-local under a name the cluster records: got '${got:-no error}'"
[ "$(q coord -c "SELECT cf_sync_cluster('pub')")" = 1 ] || fail "cf_sync_cluster did not copy to exactly one node (w3)"
[ "$(q w3 -c "SELECT owner FROM cuckoo_filters WHERE name = 'pub'")" = postgres ] || fail "cf_sync_cluster left another role's filter on w3"
[ "$(screen_b "after cf_sync_cluster to w3")" = exact ] || fail "after cf_sync_cluster to w3 the pre-screened query still fails"
router_all "after cf_sync_cluster to w3"
q coord -c "SELECT citus_drain_node('$BASE/w3', $(port_of w3), shard_transfer_mode := 'block_writes')" >/dev/null 2>&1 || fail "draining w3 failed"
q coord -c "SELECT citus_remove_node('$BASE/w3', $(port_of w3))" >/dev/null
pg_ctl_node w3 -m fast stop
ok "a worker added and given shards after the publish: its queries fail (42704, naming it and cf_sync_cluster) until cf_sync_cluster copies to it; then exact"

# 6. A query whose pieces straddle a publish's commit. One connection per
# node runs a node's pieces in turn. On w2, the piece of its first shard of
# orders waits at a gate (an advisory lock held on w2; the gate passes none
# of that shard's rows, so that piece looks nothing up); meanwhile the
# pieces on w1 answer from publish B, and A is published; then the gate
# opens, and w2's later pieces start after A committed there, each as
# consistent on its own as a piece can be: only the pin tells them from a
# query planned after A. A screen's count under a publish is that of the
# published value's own cf_contains (same buckets, same fingerprints).
by_value() { q coord -c "WITH f AS (SELECT cf_agg(account) AS v FROM keys_$1) SELECT count(*) FROM orders o, f WHERE cf_contains(f.v, o.account)"; }
count_a=$(by_value a); count_b=$(by_value b)
read -r gmin gmax < <(q coord -F ' ' -c "SELECT s.shardminvalue, s.shardmaxvalue FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'orders'::regclass AND n.nodeport = $(port_of w2) ORDER BY s.shardid LIMIT 1")
[ "$(q coord -c "SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'orders'::regclass AND n.nodeport = $(port_of w2)")" -gt 1 ] \
  || fail "w2 holds fewer than two shards of orders: the straddle scenario needs a piece after the gated one"
q coord -c "CREATE FUNCTION straddle_gate(id bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE COST 0.01 AS \$\$
BEGIN
  IF current_setting('port')::int = $(port_of w2) AND worker_hash(id) BETWEEN $gmin AND $gmax THEN
    PERFORM pg_advisory_xact_lock_shared(4242);
    RETURN false;
  END IF;
  RETURN true;
END\$\$" >/dev/null
[ "$(q w2 -c "SELECT count(*) FROM pg_proc WHERE proname = 'straddle_gate'")" = 1 ] || fail "straddle_gate() did not reach w2"
# A lookup written in the query, and one inside a PL/pgSQL function the
# query calls (which the planner cannot see: the query carries its pin).
q coord -c "CREATE FUNCTION screen_pl(k bigint) RETURNS boolean LANGUAGE plpgsql STABLE AS \$\$BEGIN RETURN cf_contains('pub', k); END\$\$" >/dev/null
gate_waits() { q w2 -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted"; }
straddle() {
  local lookup=$1 i out
  screen_straddled() {
    q coord -v VERBOSITY=verbose -c "SET citus.max_adaptive_executor_pool_size = 1" \
      -c "SELECT count(*) FROM orders o WHERE straddle_gate(o.oid) AND $lookup" 2>&1
  }
  [ "$(publish_b)" = 3 ] || fail "publishing B before the straddle did not reach 3 nodes"
  gated_b=$(screen_straddled)
  [ "$(screen_straddled)" = "$gated_b" ] || fail "the gated screen ($lookup) gives different counts under B"
  (q w2 -c "SELECT pg_advisory_lock(4242), pg_sleep(600)" >/dev/null 2>&1 &)
  for i in $(seq 300); do [ "$(q w2 -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted")" = 1 ] && break; sleep 0.1; done
  (screen_straddled >"$BASE/straddle.out" &)
  for i in $(seq 600); do [ "$(gate_waits)" -gt 0 ] && break; sleep 0.1; done
  [ "$(gate_waits)" -gt 0 ] || fail "no piece of the query ($lookup) reached the gate on w2: the scenario does not test a straddle"
  # (w1's pieces answer first, all of them, from B.)
  for i in $(seq 600); do [ "$(q w1 -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%straddle_gate(%' AND state = 'active' AND pid <> pg_backend_pid()")" = 0 ] && break; sleep 0.1; done
  [ "$(q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))")" = 3 ] || fail "publishing A during the straddled query did not reach 3 nodes"
  q w2 -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted AND mode = 'ExclusiveLock'" >/dev/null
  for i in $(seq 600); do [ "$(q coord -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%straddle_gate(o.oid) AND%' AND pid <> pg_backend_pid()")" = 0 ] && break; sleep 0.1; done
  out=$(cat "$BASE/straddle.out")
  gated_a=$(screen_straddled)
  [ "$gated_a" != "$gated_b" ] || fail "the gated screen ($lookup) gives the same count under A and B: the scenario could not tell a mix"
  case $out in
    *"ERROR:  40001: cuckoo filter \"pub\" was published again while this query ran"*) ;;
    *) fail "a query ($lookup) whose pieces straddled a publish of A over B gave '$out' (the gated screen gives $gated_b under B alone, $gated_a under A alone): expected 40001" ;;
  esac
}
straddle "cf_contains('pub', o.account)"
straddled_direct="$gated_b under B alone, $gated_a under A alone"
straddle "screen_pl(o.account)"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)")" = "$count_a" ] || fail "the screen under A does not give A's own count $count_a"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE screen_pl(o.account)")" = "$count_a" ] || fail "the screen through a function under A does not give A's own count $count_a"
# Kept plans: a prepared statement's generic plan, on the coordinator and on
# a worker (Citus plans there too), answers from the publish made by another
# session after it was planned.
for n in coord w1; do
  if [ $n = coord ]; then next=b; want="$count_a $count_a 3 $count_b"; else next=a; want="$count_b $count_b 3 $count_a"; fi
  got=$(q $n -c "SET plan_cache_mode = force_generic_plan" \
    -c "PREPARE kept AS SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)" -c "EXECUTE kept" -c "EXECUTE kept" \
    -c "\\! $PGBIN/psql -X -q -At -h $BASE/coord -p $(port_of coord) -U postgres -d postgres -c \"SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_$next))\"" \
    -c "EXECUTE kept" 2>&1)
  [ "$(echo $got)" = "$want" ] || fail "a kept plan on $n across a publish gave '$(echo $got)', expected '$want'"
done
# The carried pin is the first of a task's one-time quals (they keep their
# written order, and a function among them may look up with constant
# arguments).
q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM orders o WHERE screen_pl(600)" | grep -q "One-Time Filter: (cf_cluster_carry('[0-9]*'::bigint) AND screen_pl('600'::bigint))" \
  || fail "a task's one-time filter does not evaluate the carried pin first: $(q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM orders o WHERE screen_pl(600)" | grep -m1 'One-Time')"
q coord -c "DROP FUNCTION straddle_gate(bigint)" -c "DROP FUNCTION screen_pl(bigint)" >/dev/null
[ "$(publish_b)" = 3 ] || fail "publishing B after the straddle did not reach 3 nodes"
# Named notation is pinned too, whichever argument comes first (and a role's
# call of an unknown name in it is an error in its backend).
for call in "cf_contains(key => o.account, name => 'pub')" "cf_contains(name => 'pub', key => o.account)"; do
  q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM orders o WHERE $call" | grep -q "cf_cluster_pin('pub'::text" \
    || fail "the tasks of a query calling $call are not pinned"
  [ "$(q coord -c "SELECT count(*) FROM orders o WHERE $call")" = "$count_b" ] || fail "a screen calling $call does not give B's count"
done
got=$(qe coord -c "SET ROLE tenant" -c "SELECT cf_contains(key => 'abc'::text, name => 'nonexistent')") || true
[ "$got" = 42704 ] || fail "a by-name call of an unknown name in named notation: got '${got:-no error}'"
# A query in the transaction that publishes answers from that publish where
# every task sees it (Citus reads through the transaction's own connections),
# or fails saying so (no retry can help it); the rolled-back publish leaves
# the nodes that took the copy failing until a publish succeeds.
if out=$(q coord -v VERBOSITY=verbose -c "BEGIN" -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))" \
  -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)" -c "ROLLBACK" 2>&1); then
  [ "$(echo $out)" = "3 $count_a" ] || fail "a distributed lookup in the transaction that publishes A answered otherwise: $out"
else
  grep -q "55000: .*runs in the transaction that publishes it" <<<"$out" || fail "a distributed lookup in the publishing transaction: $out"
fi
[ "$(publish_b)" = 3 ] || fail "publishing B after a rolled-back publish did not reach 3 nodes"
# A publish waits for an ANALYZE of the record's table on a node before any
# node's copy changes: meanwhile every node answers from the previous publish.
(q w2 -c "BEGIN" -c "ANALYZE cuckoo_cluster_copies" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &)
for i in $(seq 300); do [ "$(q w2 -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")" = 1 ] && break; sleep 0.1; done
(q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))" >"$BASE/waiting.out" 2>&1 &)
for i in $(seq 300); do [ "$(q w2 -c "SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareUpdateExclusiveLock'")" -gt 0 ] && break; sleep 0.1; done
[ "$(q w2 -c "SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareUpdateExclusiveLock'")" -gt 0 ] || fail "the publish did not wait behind the ANALYZE on w2: the scenario does not test it"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)")" = "$count_b" ] || fail "while a publish waited for a lock, a screen did not answer from the previous publish"
q w2 -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'" >/dev/null
for i in $(seq 300); do [ -s "$BASE/waiting.out" ] && break; sleep 0.1; done
[ "$(cat "$BASE/waiting.out")" = 3 ] || fail "the publish that waited for the ANALYZE: $(cat "$BASE/waiting.out")"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)")" = "$count_a" ] || fail "after the publish that waited, a screen does not give A's count"
[ "$(publish_b)" = 3 ] || fail "publishing B again did not reach 3 nodes"
ok "a query whose pieces straddled a publish fails with 40001 (retry) instead of answering partly from each, the lookup written in the query (gated: $straddled_direct) or inside a PL/pgSQL function it calls; kept plans on the coordinator and on a worker answer from the publish another session made after they were planned; calls in named notation are pinned; a lookup in the publishing transaction fails saying so; a publish waiting behind an ANALYZE leaves every node answering from the previous one"

# 4. A name claimed first.
q coord -c "GRANT SELECT ON orders, events, keys_a, keys_b TO squatter, tenant" >/dev/null
q coord -c "SET ROLE squatter" -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_create('shared', 1000, durable => false)\$\$)" >/dev/null
[ "$(q coord -c "SELECT cf_publish_cluster('shared', (SELECT cf_agg(account) FROM keys_b))")" = 3 ] || fail "the administrator's publish over a claimed name did not reach 3 nodes"
for n in coord w1 w2; do
  [ "$(q $n -c "SELECT owner || ':' || coalesce(lookup_grantee, '-') FROM cuckoo_filters WHERE name = 'shared'")" = "postgres:-" ] \
    || fail "on $n the claimed name's copy is not the publisher's, without grant"
done
for stmt in "SELECT cf_snapshot('shared')" "SELECT cf_drop('shared')" "SELECT cf_grant_lookup('shared', 'public')" "SELECT cf_contains('shared', 1::bigint)"; do
  refused "the role that claimed 'shared' first running '$stmt' on the published copy" w1 "SET ROLE squatter" "$stmt"
done
refused "another role publishing over the administrator's cluster copy" coord "SET ROLE squatter" "SELECT cf_publish_cluster('shared', cf_agg(1::bigint))"
# A role may not publish over a name another role owns on any node: refused
# before any node's copy changes.
for n in coord w2; do q $n -c "SET ROLE squatter" -c "SELECT cf_create('theirs', 1000, durable => false)" >/dev/null; done
refused "a role publishing over another role's filter" coord "SET ROLE tenant" "SELECT cf_publish_cluster('theirs', cf_agg(7::bigint))"
for n in coord w1 w2; do
  [ "$(q $n -c "SELECT count(*) FROM cuckoo_filters WHERE name = 'theirs' AND owner = 'tenant'")" = 0 ] || fail "a refused publish changed 'theirs' on $n"
done
[ "$(q w1 -c "SELECT count(*) FROM cuckoo_filters WHERE name = 'theirs'")" = 0 ] || fail "a refused publish created 'theirs' on w1 (where it did not exist)"
ok "a name claimed first on every node: the administrator's publish makes every copy its own, without grants (the claimant gets 42501 for snapshot, drop, grant and lookup); other roles may not publish over it or over a filter another role owns on any node (42501, nothing copied)"

# 5. Rights per name: the listing and the cluster's record are written only
# through functions that check the caller's right on that name.
q coord -c "SET ROLE tenant" -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_create('tenant_own', 1000, durable => false)\$\$)" >/dev/null
[ "$(q coord -c "SET ROLE tenant" -c "SELECT cf_node_local('tenant_own')")" = 3 ] || fail "a role could not declare its own filter node-local"
for stmt in "SELECT cf_node_local('pub')" "SELECT cf_drop_cluster('pub')" \
            "SELECT cf_cluster_record('pub', 1, 'x', true)" "SELECT cf_cluster_forget('pub')" "SELECT cf_sync_cluster('pub')" \
            "DELETE FROM cuckoo_cluster_filters WHERE name = 'pub'" "UPDATE cuckoo_cluster_filters SET scope = 'node', digest = NULL, version = NULL, copy = NULL WHERE name = 'pub'" \
            "DELETE FROM cuckoo_cluster_copies WHERE name = 'pub'" "SELECT digest FROM cuckoo_cluster_copies" "SELECT digest FROM cuckoo_cluster_filters" \
            "BEGIN; LOCK TABLE cuckoo_cluster_filters IN SHARE UPDATE EXCLUSIVE MODE; COMMIT"; do
  refused "a role without rights on 'pub' running '$stmt'" coord "SET ROLE tenant" "$stmt"
done
# Nothing can be recorded that the coordinator does not hold.
got=$(qe coord -c "SET ROLE tenant" -c "SELECT cf_cluster_record('future', 1, 'x', true)") || true
[ "$got" = 55000 ] || fail "a role recorded a publish of a name nobody published: got '${got:-no error}'"
refused "a role unlisting another role's cluster copy on a worker" w1 "SET ROLE tenant" "SELECT cf_cluster_unlist('pub', NULL)"
refused "a role listing another role's filter as node-local on a worker" w1 "SET ROLE tenant" "SELECT cf_cluster_list('pub', 'node', NULL)"
[ "$(q coord -c "SET ROLE tenant" -c "SELECT cf_node_local('tenant_own', false)")" = 3 ] || fail "a role could not withdraw its own node-local declaration"
[ "$(screen_b "after the refused changes")" = exact ] || fail "the refused changes altered the cluster copy"
# A role granted lookups on every node's copy screens in a distributed query
# (each task reads the cluster's record as that role).
q coord -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_grant_lookup('pub', 'tenant')\$\$)" >/dev/null
got=$(q coord -c "SET ROLE tenant" -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account) AND o.account IN (SELECT account FROM keys_b)" 2>&1) \
  || fail "a role granted lookups on the cluster copy could not screen with it: $got"
[ "$got" = "$exact_b" ] || fail "a role granted lookups screened $got orders, the exact semi-join $exact_b"
# Lookups in parallel workers (a shard scan a worker runs in parallel, or a
# local query) check the copy without a distributed query and without a
# transaction id, which parallel workers may not have.
parallel() { q w1 -c "SET application_name = '$1'" -c "SET parallel_setup_cost = 0" -c "SET parallel_tuple_cost = 0" \
  -c "SET min_parallel_table_scan_size = 0" -c "SET max_parallel_workers_per_gather = 2" -c "$2" 2>&1; }
q w1 -c "CREATE TABLE par_keys AS SELECT g::bigint AS account FROM generate_series(1, 200000) g" >/dev/null
parallel psql "EXPLAIN SELECT count(*) FROM par_keys WHERE cf_contains('pub', account)" | grep -q "Workers Planned" \
  || fail "the parallel lookup check got no parallel plan: it does not test what it says"
serial=$(q w1 -c "SELECT count(*) FROM par_keys WHERE cf_contains('pub', account)")
for app in "citus_internal gpid=10000000099" psql; do
  got=$(parallel "$app" "SELECT count(*) FROM par_keys WHERE cf_contains('pub', account)")
  [ "$got" = "$serial" ] || fail "a parallel scan looking up the cluster copy (application_name $app) gave: $got (serially $serial)"
done
q w1 -c "DROP TABLE par_keys" >/dev/null
# The owner publishing again keeps every node's grant.
[ "$(publish_b)" = 3 ] || fail "publishing again as the owner did not reach 3 nodes"
[ "$(q w2 -c "SELECT lookup_grantee FROM cuckoo_filters WHERE name = 'pub'")" = tenant ] || fail "the owner's publish dropped the lookup grant on w2"
# A role renamed keeps its rights; a new role of its old name has none.
q coord -c "SET ROLE tenant" -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_drop('tpub')\$\$)" >/dev/null 2>&1 || true
[ "$(q coord -c "SET ROLE tenant" -c "SELECT cf_publish_cluster('tpub', cf_agg(5::bigint))")" = 3 ] || fail "a role could not publish its own name"
q coord -c "ALTER ROLE tenant RENAME TO tenant_renamed" -c "CREATE ROLE tenant LOGIN" >/dev/null
refused "a new role under a renamed role's old name removing its cluster copy" coord "SET ROLE tenant" "SELECT cf_drop_cluster('tpub')"
[ "$(q coord -c "SET ROLE tenant_renamed" -c "SELECT cf_drop_cluster('tpub')")" = 3 ] || fail "a renamed role could not remove its own cluster copy"
q coord -c "DROP ROLE tenant" -c "ALTER ROLE tenant_renamed RENAME TO tenant" >/dev/null
# A worker restarted: its durable copy is the same filter (its generation
# comes from the WAL it replayed), still the recorded publish.
pg_ctl_node w1 -m immediate stop
pg_ctl_node w1 start
[ "$(screen_b "after w1 restarted")" = exact ] || fail "after w1 restarted (a crash) its durable cluster copy is not taken as the recorded publish"
[ "$(q coord -c "SELECT cf_drop_cluster('pub')")" = 3 ] || fail "cf_drop_cluster of 'pub' did not drop 3 copies"
got=$(qe coord -c "SELECT count(*) FROM orders WHERE cf_contains('pub', account)") || true
[ "$got" = 42704 ] || fail "a lookup after cf_drop_cluster: got '${got:-no error}'"
q coord -c "SELECT cf_drop_cluster('shared')" -c "SET ROLE squatter" -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_drop('theirs')\$\$)" >/dev/null
q coord -c "SET ROLE tenant" -c "SELECT count(*) FROM run_command_on_all_nodes(\$\$SELECT cf_drop('tenant_own')\$\$)" >/dev/null
ok "rights per name: a role lists and withdraws its own filters, and is refused (42501) listing, unlisting, publishing, syncing, recording or removing another role's names, on the coordinator and on a worker; the tables take no direct writes; a role granted lookups screens in distributed queries (the owner's publish keeps grants); rights follow a renamed role, not its old name; digests are not public; parallel workers check copies too; a worker's durable copy survives its crash"
