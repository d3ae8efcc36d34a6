# Concurrency 03c (sourced by run.sh; alone: bash tests/concurrency/run.sh 03c):
#   3 sessions offer the same 200,000 keys to cf_insert_new at once in
#   different orders, one key per call, on a filter of one table, on a filter
#   that grows during the race, and in arrays of 10,000, then 50,000 keys on a
#   durable filter: the trues add up to at most the keys (fewer only by false
#   positives) and to items, every key is found.

echo "== insert if new: concurrent sessions offering the same keys"
# Three sessions offer the same keys 1..N to cf_insert_new at once: one in
# ascending order, one descending, one shuffled (position i gives key
# i * 7919 mod N + 1, a permutation since the prime 7919 does not divide N).
# Each key is new exactly once, so the trues of all sessions together are at
# most N (fewer by the new keys a false positive refused, which must stay few),
# equal items, and every key is found. In a filter of one table no pair ever
# holds two copies of a fingerprint (an insert-if-new of a colliding key is
# refused), so there every key's cf_count is exactly 1: a key added twice by a
# lost race counts 2, which false positives cannot hide as they can in the sum.
# Filters 1-3 are not durable; the fourth is, so that the WAL path (an INSERT
# record before each add, a REFUSED record after a lost race) runs concurrently.
# The sessions start together: each counts itself in on a sequence (not
# transactional) and waits for the other two, however long they take to connect.
cat > /tmp/cuckoo-dedup-ready.sql <<'SQL'
DO $$ BEGIN
  PERFORM nextval(':NAME_ready');
  FOR w IN 1..600000 LOOP
    EXIT WHEN (SELECT last_value FROM :NAME_ready) >= 3;
    PERFORM pg_sleep(0.001);
  END LOOP;
  IF (SELECT last_value FROM :NAME_ready) < 3 THEN RAISE EXCEPTION 'the other sessions never started'; END IF;
END $$;
SQL
cat > /tmp/cuckoo-dedup-one.sql <<'SQL'
SELECT count(*) FILTER (WHERE r), count(r)
  FROM (SELECT cf_insert_new(':NAME', :KEY) AS r FROM generate_series(0::bigint, :N - 1) i) s;
SQL
cat > /tmp/cuckoo-dedup-batch.sql <<'SQL'
SELECT count(*) FILTER (WHERE r), count(r)
  FROM generate_series(0::bigint, (:N - 1) / :BATCH) c,
       LATERAL unnest(cf_insert_new(':NAME', ARRAY(
         SELECT :KEY FROM generate_series(c * :BATCH, least(c * :BATCH + :BATCH - 1, :N - 1)) i))) r;
SQL
DEDUP_ORDERS=("i + 1" ":N - i" "i * 7919 % :N + 1")
# dedup_race NAME N BATCH: the race on filter NAME (already created) over keys
# 1..N, one call per key (BATCH 0) or BATCH keys per call, and its checks.
dedup_race() {
  local name=$1 n=$2 batch=$3 s trues answered sum=0 per=() items missing multi t0=$SECONDS
  psql -c "CREATE SEQUENCE ${name}_ready" >/dev/null
  for s in 0 1 2; do
    cat /tmp/cuckoo-dedup-ready.sql "/tmp/cuckoo-dedup-$([ "$batch" = 0 ] && echo one || echo batch).sql" > "/tmp/cuckoo-dedup-$s.sql"
    start_session "dedup-$name-$s" "/tmp/cuckoo-dedup-$s.sql" \
      "s/:KEY/${DEDUP_ORDERS[$s]}/g; s/:NAME/$name/g; s/:N/$n/g; s/:BATCH/$batch/g"
  done
  wait_sessions
  for s in 0 1 2; do
    IFS='|' read -r trues answered < "/tmp/cuckoo-dedup-$name-$s.log"
    [ "$answered" = "$n" ] || fail "$name: session $s answered $answered of $n keys: $(cat "/tmp/cuckoo-dedup-$name-$s.log")"
    per+=("$trues"); sum=$((sum + trues))
  done
  read -r items tables <<<"$(psql -F' ' -c "SELECT items, tables FROM cuckoo_filters WHERE name = '$name'")"
  echo "$name: trues per session (ascending, descending, shuffled) ${per[*]}, sum $sum of $n keys; items $items;" \
    "$((n - sum)) new keys refused as false positives; $tables table(s); $((SECONDS - t0)) s"
  [ "$sum" -le "$n" ] || fail "$name: $sum trues for $n keys: some key was new more than once"
  [ "$sum" -ge $((n - n / 200)) ] || fail "$name: only $sum trues for $n new keys"
  [ "$items" = "$sum" ] || fail "$name: items $items, but $sum calls returned true"
  missing=$(psql -c "SELECT count(*) FROM generate_series(1::bigint, $n) k WHERE NOT cf_contains('$name', k)")
  [ "$missing" = 0 ] || fail "$name: $missing keys not found"
  multi=$(psql -c "SELECT count(*) FROM generate_series(1::bigint, $n) k WHERE cf_count('$name', k) <> 1")
  if [ "$tables" = 1 ]; then
    [ "$multi" = 0 ] || fail "$name: $multi keys have a cf_count other than 1 (a key stored twice?): $(psql -c "SELECT cf_count('$name', k), count(*) FROM generate_series(1::bigint, $n) k GROUP BY 1 ORDER BY 1")"
  else
    echo "$name: $multi keys with a cf_count other than 1 (copies of their fingerprints in other tables)"
  fi
  psql -c "SELECT cf_drop('$name')" -c "DROP SEQUENCE ${name}_ready" >/dev/null
}
DEDUP_KEYS=${CUCKOO_DEDUP_KEYS:-200000}
psql -c "SELECT cf_create('dedup', $DEDUP_KEYS * 5 / 4, durable => false)" >/dev/null
dedup_race dedup "$DEDUP_KEYS" 0
# A filter made for 1,000 keys: the chain adds tables while the sessions race.
psql -c "SELECT cf_create('dedup_grow', 1000, durable => false, expansion => 2)" >/dev/null
dedup_race dedup_grow "$DEDUP_KEYS" 0   # sets tables
[ "$tables" -ge 6 ] || fail "dedup_grow: only $tables tables"
# Arrays of 10,000 keys per call.
psql -c "SELECT cf_create('dedup_batch', $DEDUP_KEYS * 5 / 4, durable => false)" >/dev/null
dedup_race dedup_batch "$DEDUP_KEYS" 10000
DEDUP_DURABLE_KEYS=${CUCKOO_DEDUP_DURABLE_KEYS:-50000}
psql -c "SELECT cf_create('dedup_durable', $DEDUP_DURABLE_KEYS * 5 / 4, durable => true)" >/dev/null
dedup_race dedup_durable "$DEDUP_DURABLE_KEYS" 0
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
