# Shared by the Citus scenarios (tests/citus/NN_*.sh), sourced by
# tests/citus/run.sh before the cluster (cluster.sh) is set up. The scenarios
# run in order in one shell on one cluster: a scenario finds the tables,
# filters, roles and shell variables the earlier ones left, and names in its
# "Needs:" line the scenarios it takes them from.
fail() { echo "citus: FAIL: $*" >&2; exit 1; }
ok() { echo "citus: [${SECONDS}s] $*"; }
# The SQLSTATE of an error of psql on node $1 (arguments as q's), or nothing.
qe() { q "$@" -v VERBOSITY=verbose 2>&1 >/dev/null | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1; }
# Expects SQL on the coordinator to fail with SQLSTATE $1 ($2 says what it is).
expect_error() { local code=$1 what=$2; shift 2; local got; got=$(qe coord -c "$@") || true; [ "$got" = "$code" ] || fail "$what: expected SQLSTATE $code, got '${got:-no error}'"; }

# For the cluster copies of 09-14 (each check runs a pre-screened semi-join
# by the name 'pub' against keys_b and orders, made by 09 and 02, and one
# router query per shard).
pg_ctl_node() { as_pg "$PGBIN/pg_ctl" -D "$BASE/$1/data" -l "$BASE/$1/server.log" -w "${@:2}" >/dev/null; }
sqlstate_of() { sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' <<<"$1" | head -1; }
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
