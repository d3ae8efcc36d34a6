# Citus 12 (sourced by run.sh; alone: bash tests/citus/run.sh 12):
#   a query whose pieces straddle a publish's commit fails (40001) instead
#   of answering partly from each publish; kept plans (prepared, on the
#   coordinator and on a worker) answer from the new publish after it.
# Needs: 09 (keys_a, keys_b, the role tenant).

# A query whose pieces straddle a publish's commit. One connection per
# node runs a node's pieces in turn. On w2, the piece of its first shard of
# orders waits at a gate (an advisory lock held on w2; the gate passes none
# of that shard's rows, so that piece looks nothing up); meanwhile the
# pieces on w1 answer from publish B, and A is published; then the gate
# opens, and w2's later pieces start after A committed there, each as
# consistent on its own as a piece can be: only the pin tells them from a
# query planned after A. A screen's count under a publish is that of the
# published value's own cf_contains (same buckets, same fingerprints).
by_value() { q coord -c "WITH f AS (SELECT cf_agg(account) AS v FROM keys_$1) SELECT count(*) FROM orders o, f WHERE cf_contains(f.v, o.account)"; }
count_a=$(by_value a); count_b=$(by_value b)
read -r gmin gmax < <(q coord -F ' ' -c "SELECT s.shardminvalue, s.shardmaxvalue FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'orders'::regclass AND n.nodeport = $(port_of w2) ORDER BY s.shardid LIMIT 1")
[ "$(q coord -c "SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'orders'::regclass AND n.nodeport = $(port_of w2)")" -gt 1 ] \
  || fail "w2 holds fewer than two shards of orders: the straddle scenario needs a piece after the gated one"
q coord -c "CREATE FUNCTION straddle_gate(id bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE COST 0.01 AS \$\$
BEGIN
  IF current_setting('port')::int = $(port_of w2) AND worker_hash(id) BETWEEN $gmin AND $gmax THEN
    PERFORM pg_advisory_xact_lock_shared(4242);
    RETURN false;
  END IF;
  RETURN true;
END\$\$" >/dev/null
[ "$(q w2 -c "SELECT count(*) FROM pg_proc WHERE proname = 'straddle_gate'")" = 1 ] || fail "straddle_gate() did not reach w2"
# A lookup written in the query, and one inside a PL/pgSQL function the
# query calls (which the planner cannot see: the query carries its pin).
q coord -c "CREATE FUNCTION screen_pl(k bigint) RETURNS boolean LANGUAGE plpgsql STABLE AS \$\$BEGIN RETURN cf_contains('pub', k); END\$\$" >/dev/null
gate_waits() { q w2 -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted"; }
straddle() {
  local lookup=$1 i out
  screen_straddled() {
    q coord -v VERBOSITY=verbose -c "SET citus.max_adaptive_executor_pool_size = 1" \
      -c "SELECT count(*) FROM orders o WHERE straddle_gate(o.oid) AND $lookup" 2>&1
  }
  [ "$(publish_b)" = 3 ] || fail "publishing B before the straddle did not reach 3 nodes"
  gated_b=$(screen_straddled)
  [ "$(screen_straddled)" = "$gated_b" ] || fail "the gated screen ($lookup) gives different counts under B"
  (q w2 -c "SELECT pg_advisory_lock(4242), pg_sleep(600)" >/dev/null 2>&1 &)
  for i in $(seq 300); do [ "$(q w2 -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted")" = 1 ] && break; sleep 0.1; done
  (screen_straddled >"$BASE/straddle.out" &)
  for i in $(seq 600); do [ "$(gate_waits)" -gt 0 ] && break; sleep 0.1; done
  [ "$(gate_waits)" -gt 0 ] || fail "no piece of the query ($lookup) reached the gate on w2: the scenario does not test a straddle"
  # (w1's pieces answer first, all of them, from B.)
  for i in $(seq 600); do [ "$(q w1 -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%straddle_gate(%' AND state = 'active' AND pid <> pg_backend_pid()")" = 0 ] && break; sleep 0.1; done
  [ "$(q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))")" = 3 ] || fail "publishing A during the straddled query did not reach 3 nodes"
  q w2 -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted AND mode = 'ExclusiveLock'" >/dev/null
  for i in $(seq 600); do [ "$(q coord -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%straddle_gate(o.oid) AND%' AND pid <> pg_backend_pid()")" = 0 ] && break; sleep 0.1; done
  out=$(cat "$BASE/straddle.out")
  gated_a=$(screen_straddled)
  [ "$gated_a" != "$gated_b" ] || fail "the gated screen ($lookup) gives the same count under A and B: the scenario could not tell a mix"
  case $out in
    *"ERROR:  40001: cuckoo filter \"pub\" was published again while this query ran"*) ;;
    *) fail "a query ($lookup) whose pieces straddled a publish of A over B gave '$out' (the gated screen gives $gated_b under B alone, $gated_a under A alone): expected 40001" ;;
  esac
}
straddle "cf_contains('pub', o.account)"
straddled_direct="$gated_b under B alone, $gated_a under A alone"
straddle "screen_pl(o.account)"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)")" = "$count_a" ] || fail "the screen under A does not give A's own count $count_a"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE screen_pl(o.account)")" = "$count_a" ] || fail "the screen through a function under A does not give A's own count $count_a"
# Kept plans: a prepared statement's generic plan, on the coordinator and on
# a worker (Citus plans there too), answers from the publish made by another
# session after it was planned.
for n in coord w1; do
  if [ $n = coord ]; then next=b; want="$count_a $count_a 3 $count_b"; else next=a; want="$count_b $count_b 3 $count_a"; fi
  got=$(q $n -c "SET plan_cache_mode = force_generic_plan" \
    -c "PREPARE kept AS SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)" -c "EXECUTE kept" -c "EXECUTE kept" \
    -c "\\! $PGBIN/psql -X -q -At -h $BASE/coord -p $(port_of coord) -U postgres -d postgres -c \"SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_$next))\"" \
    -c "EXECUTE kept" 2>&1)
  [ "$(echo $got)" = "$want" ] || fail "a kept plan on $n across a publish gave '$(echo $got)', expected '$want'"
done
# The carried pin is the first of a task's one-time quals (they keep their
# written order, and a function among them may look up with constant
# arguments).
q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM orders o WHERE screen_pl(600)" | grep -q "One-Time Filter: (cf_cluster_carry('[0-9]*'::bigint) AND screen_pl('600'::bigint))" \
  || fail "a task's one-time filter does not evaluate the carried pin first: $(q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM orders o WHERE screen_pl(600)" | grep -m1 'One-Time')"
q coord -c "DROP FUNCTION straddle_gate(bigint)" -c "DROP FUNCTION screen_pl(bigint)" >/dev/null
[ "$(publish_b)" = 3 ] || fail "publishing B after the straddle did not reach 3 nodes"
# Named notation is pinned too, whichever argument comes first (and a role's
# call of an unknown name in it is an error in its backend).
for call in "cf_contains(key => o.account, name => 'pub')" "cf_contains(name => 'pub', key => o.account)"; do
  q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM orders o WHERE $call" | grep -q "cf_cluster_pin('pub'::text" \
    || fail "the tasks of a query calling $call are not pinned"
  [ "$(q coord -c "SELECT count(*) FROM orders o WHERE $call")" = "$count_b" ] || fail "a screen calling $call does not give B's count"
done
got=$(qe coord -c "SET ROLE tenant" -c "SELECT cf_contains(key => 'abc'::text, name => 'nonexistent')") || true
[ "$got" = 42704 ] || fail "a by-name call of an unknown name in named notation: got '${got:-no error}'"
# A query in the transaction that publishes answers from that publish where
# every task sees it (Citus reads through the transaction's own connections),
# or fails saying so (no retry can help it); the rolled-back publish leaves
# the nodes that took the copy failing until a publish succeeds.
if out=$(q coord -v VERBOSITY=verbose -c "BEGIN" -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))" \
  -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)" -c "ROLLBACK" 2>&1); then
  [ "$(echo $out)" = "3 $count_a" ] || fail "a distributed lookup in the transaction that publishes A answered otherwise: $out"
else
  grep -q "55000: .*runs in the transaction that publishes it" <<<"$out" || fail "a distributed lookup in the publishing transaction: $out"
fi
[ "$(publish_b)" = 3 ] || fail "publishing B after a rolled-back publish did not reach 3 nodes"
# A publish waits for an ANALYZE of the record's table on a node before any
# node's copy changes: meanwhile every node answers from the previous publish.
(q w2 -c "BEGIN" -c "ANALYZE cuckoo_cluster_copies" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &)
for i in $(seq 300); do [ "$(q w2 -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")" = 1 ] && break; sleep 0.1; done
(q coord -c "SELECT cf_publish_cluster('pub', (SELECT cf_agg(account) FROM keys_a))" >"$BASE/waiting.out" 2>&1 &)
for i in $(seq 300); do [ "$(q w2 -c "SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareUpdateExclusiveLock'")" -gt 0 ] && break; sleep 0.1; done
[ "$(q w2 -c "SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareUpdateExclusiveLock'")" -gt 0 ] || fail "the publish did not wait behind the ANALYZE on w2: the scenario does not test it"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)")" = "$count_b" ] || fail "while a publish waited for a lock, a screen did not answer from the previous publish"
q w2 -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'" >/dev/null
for i in $(seq 300); do [ -s "$BASE/waiting.out" ] && break; sleep 0.1; done
[ "$(cat "$BASE/waiting.out")" = 3 ] || fail "the publish that waited for the ANALYZE: $(cat "$BASE/waiting.out")"
[ "$(q coord -c "SELECT count(*) FROM orders o WHERE cf_contains('pub', o.account)")" = "$count_a" ] || fail "after the publish that waited, a screen does not give A's count"
[ "$(publish_b)" = 3 ] || fail "publishing B again did not reach 3 nodes"
ok "a query whose pieces straddled a publish fails with 40001 (retry) instead of answering partly from each, the lookup written in the query (gated: $straddled_direct) or inside a PL/pgSQL function it calls; kept plans on the coordinator and on a worker answer from the publish another session made after they were planned; calls in named notation are pinned; a lookup in the publishing transaction fails saying so; a publish waiting behind an ANALYZE leaves every node answering from the previous one"
