# Citus 11 (sourced by run.sh; alone: bash tests/citus/run.sh 11):
#   a node added after the publish: fails until cf_sync_cluster.
# Needs: 09 (keys_a, keys_b, the role tenant, filter pub published).

# A node added after the publish.
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
