# Citus 10 (sourced by run.sh; alone: bash tests/citus/run.sh 10):
#   the coordinator killed during a publish, at a node between taking its
#   copy and listing it, and after every node took its copy but before the
#   publish was recorded: errors, then a publish again is exact.
# Needs: 09 (keys_a, keys_b).

# The coordinator killed during a publish. At a node: after its copy is
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
