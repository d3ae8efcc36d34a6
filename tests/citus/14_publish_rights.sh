# Citus 14 (sourced by run.sh; alone: bash tests/citus/run.sh 14):
#   rights per name in the listing and the cluster's record.
# Needs: 13 (filters shared and theirs; filter pub published as keys_b, which 09 leaves).

# Rights per name: the listing and the cluster's record are written only
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
