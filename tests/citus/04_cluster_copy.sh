# Citus 04 (sourced by run.sh; alone: bash tests/citus/run.sh 04):
#   a cluster copy (cf_publish_cluster): identical on every node, lookups from
#   distributed queries answer for all keys, changes to a copy are refused, a
#   copy dropped on one node fails, cf_drop_cluster drops all.
# Needs: 03 (the filters acc it drops; acc_filter of 02).

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
