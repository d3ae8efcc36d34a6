# Citus 05 (sourced by run.sh; alone: bash tests/citus/run.sh 05):
#   node-local filters (cf_node_local), right for co-located keys: each node's
#   filter holds its own shards' keys, a co-located table pre-screened by name
#   answers as the semi-join; probed from a table distributed otherwise they
#   miss member rows (the documented limit).
# Needs: 02 (table orders).

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
