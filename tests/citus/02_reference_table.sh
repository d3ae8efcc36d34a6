# Citus 02 (sourced by run.sh; alone: bash tests/citus/run.sh 02):
#   pre-screening with a filter in a reference table answers as the
#   semi-join. (Makes the distributed table orders and the reference table
#   acc_filter.)
# Needs: 01 (table events).

# Pre-screen with a filter in a reference table: exact, as the semi-join.
q coord -c "CREATE TABLE orders (oid bigint, account bigint)" -c "SELECT create_distributed_table('orders', 'oid')" \
  -c "INSERT INTO orders SELECT g, g * 7 % ($ROWS) FROM generate_series(1, $ROWS) g" \
  -c "CREATE TABLE acc_filter (f cuckoofilter)" -c "SELECT create_reference_table('acc_filter')" \
  -c "INSERT INTO acc_filter SELECT cf_sharded_agg(account) FROM events" >/dev/null
exact=$(q coord -c "SELECT count(*) FROM orders WHERE account IN (SELECT account FROM events)")
screened=$(q coord -c "SELECT count(*) FROM orders o, acc_filter a WHERE cf_contains(a.f, o.account) AND o.account IN (SELECT account FROM events)")
[ "$exact" = "$screened" ] || fail "pre-screened semi-join: $screened rows, exact $exact"
ok "pre-screening orders with a filter in a reference table: $screened rows, as the exact semi-join"
