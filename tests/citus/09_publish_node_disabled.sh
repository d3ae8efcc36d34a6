# Citus 09 (sourced by run.sh; alone: bash tests/citus/run.sh 09):
#   cluster copies whatever happens to nodes (09-14, issue 30): a query by the
#   name of a cluster copy answers from the copy the cluster last published on
#   every node it touches, or fails with an error that names the node and
#   says how to catch it up; never from a mix. Here: a node drained and
#   disabled while a publish runs, then activated and given shards again: its
#   queries fail until cf_sync_cluster. (Makes the roles squatter and tenant
#   and the reference tables keys_a and keys_b that 10-14 use.)
# Needs: 02 (table orders).

# Roles are propagated to the workers by Citus.
q coord -c "CREATE ROLE squatter LOGIN" -c "CREATE ROLE tenant LOGIN" >/dev/null
# The published set: keys_b's accounts; a query screened by filter 'pub'
# passes every order whose account is in it (exact: the semi-join).
q coord -c "CREATE TABLE keys_a (account bigint)" -c "SELECT create_reference_table('keys_a')" \
  -c "CREATE TABLE keys_b (account bigint)" -c "SELECT create_reference_table('keys_b')" \
  -c "INSERT INTO keys_a SELECT g * 2 FROM generate_series(1, $ROWS / 4) g" \
  -c "INSERT INTO keys_b SELECT g * 2 + 1 FROM generate_series(1, $ROWS / 4) g" >/dev/null
exact_b=$(q coord -c "SELECT count(*) FROM orders o WHERE o.account IN (SELECT account FROM keys_b)")

# A node disabled during a publish.
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
