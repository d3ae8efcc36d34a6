# Citus 03 (sourced by run.sh; alone: bash tests/citus/run.sh 03):
#   by-name calls in distributed queries are never silently partial: they
#   fail (42704, 55000) when the filter is only the coordinator's, or each
#   node's own.
# Needs: 02 (tables events and orders).

# Named filters. A by-name call in a query on a distributed table runs on the
# workers: with no filter there, or one that is only that node's own, it fails
# (42704, 55000) instead of answering from part of the keys.
q coord -c "SELECT cf_create('acc', $ROWS, durable => false)" >/dev/null
expect_error 42704 "a by-name lookup of a filter only the coordinator has" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)"
expect_error 42704 "by-name inserts from a distributed query, filter only on the coordinator" "SELECT count(*) FROM events WHERE cf_insert('acc', account)"
q coord -c "SELECT count(*) FROM run_command_on_workers(\$\$SELECT cf_create('acc', $ROWS, durable => false)\$\$)" >/dev/null
expect_error 55000 "by-name inserts from a distributed query into each node's own filter" "SELECT count(*) FROM events WHERE cf_insert('acc', account)"
expect_error 55000 "a by-name lookup of each node's own filter" "SELECT count(*) FROM orders WHERE cf_contains('acc', account)"
for n in w1 w2; do [ "$(q $n -c "SELECT items FROM cuckoo_filters WHERE name = 'acc'")" = 0 ] || fail "a refused distributed insert changed the filter on $n"; done
ok "by-name calls in distributed queries fail (42704 without a filter on the worker, 55000 with one that is only the node's own): nothing partial"
