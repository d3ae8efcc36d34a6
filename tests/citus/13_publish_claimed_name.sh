# Citus 13 (sourced by run.sh; alone: bash tests/citus/run.sh 13):
#   a name claimed first on every node by a role: the publisher takes every
#   copy over; a role may not publish over a name it may not change.
# Needs: 09 (keys_a, keys_b, the roles squatter and tenant).

# A name claimed first.
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
