#!/usr/bin/env bash
# Named filters under concurrency, cancellation and exhaustion, against the
# installed extension in a throwaway cluster with a small region (16 MB):
#   1. stress: CUCKOO_CLIENTS (default 4) sessions insert, probe and delete on one
#      filter at once; each checks that every key it inserted and has not deleted
#      is found on every probe and that deleting it succeeds; counts agree at the end;
#   2. cancellation: statement_timeout, pg_cancel_backend and pg_terminate_backend
#      interrupt a bulk insert that keeps a sliding window of keys (so it never
#      fills the filter); the server never restarts, the counts are exact and
#      every live key is found;
#   3. exhaustion: creating filters until the region is full gives 53200 with the
#      sizes, leaves existing filters intact, and dropped space is reused;
#   3b. growth: 4 sessions insert into a filter made for 1,000 keys while a
#      fifth snapshots it (tables are added under both): every key found, every
#      snapshot holds every key inserted before it began; then a filter grows
#      until the region has no room: inserts report false, failed_inserts
#      counts them, every stored key stays found;
#   3c. insert if new: 3 sessions offer the same 200,000 keys to cf_insert_new
#      at once in different orders, one key per call, on a filter of one table,
#      on a filter that grows during the race, and in arrays of 10,000, then
#      50,000 keys on a durable filter: the trues add up to at most the keys
#      (fewer only by false positives) and to items, every key is found;
#   4. without shared_preload_libraries the functions explain what to do.
# The stress filter has room for CUCKOO_STRESS_CAPACITY keys (default 100000) and
# the clients keep it about 90% full.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-concurrency} PGPORT=${PGPORT:-5492}
export CLUSTER_CONF="cuckoo.shared_memory = 16MB"
CLIENTS=${CUCKOO_CLIENTS:-4}
CAPACITY=${CUCKOO_STRESS_CAPACITY:-100000}
tests/tools/cluster.sh stop 2>/dev/null; rm -rf "$CLUSTER_DIR"
trap 'tests/tools/cluster.sh stop' EXIT
tests/tools/cluster.sh start
psql() { tests/tools/cluster.sh psql -q -At "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# Background sessions: `start_session LABEL FILE SED` runs FILE, edited by the sed
# script SED, in its own psql; `wait_sessions` waits for them all and fails,
# showing the log, if one failed.
sessions=(); labels=()
start_session() {
  sed "$3" "$2" > "/tmp/cuckoo-$1.sql"
  psql -f "/tmp/cuckoo-$1.sql" > "/tmp/cuckoo-$1.log" 2>&1 &
  sessions+=($!); labels+=("$1")
}
wait_sessions() {
  for i in "${!sessions[@]}"; do
    wait "${sessions[$i]}" || { cat "/tmp/cuckoo-${labels[$i]}.log"; fail "session ${labels[$i]}"; }
  done
  sessions=(); labels=()
}
psql -c "CREATE EXTENSION cuckoo"
started=$(psql -c "SELECT pg_postmaster_start_time()")

# The clients together keep 90% of the slots filled, so that inserts move
# fingerprints (kicks) while others probe and delete.
psql -c "SELECT cf_create('stress', $CAPACITY, expansion => 0)" >/dev/null
slots=$(psql -c "SELECT (i->>'buckets')::bigint * (i->>'bucket_size')::int FROM cf_info(cf_snapshot('stress')) i")
KEYS=$((slots * 9 / 10 / CLIENTS))
echo "== stress: $CLIENTS clients, each keeping $KEYS live keys, on one filter of $slots slots"
cat > /tmp/cuckoo-stress.sql <<'SQL'
-- One client: fills its own key range, then churns (insert a new key, delete the
-- oldest, probe live keys), checking every answer about its own live keys.
DO $$
DECLARE
  base bigint := :CLIENT::bigint * 1000000000;
  n int := :KEYS;
  lo bigint := 1;          -- oldest live key offset
  hi bigint := 0;          -- newest live key offset
  k bigint;
BEGIN
  PERFORM setseed(:CLIENT / 100.0);
  FOR i IN 1..n LOOP
    hi := hi + 1;
    IF NOT cf_insert('stress', base + hi) THEN RAISE EXCEPTION 'insert of % refused', base + hi; END IF;
    k := base + lo + floor(random() * (hi - lo + 1))::bigint;
    IF NOT cf_contains('stress', k) THEN RAISE EXCEPTION 'false negative: live key % not found', k; END IF;
  END LOOP;
  FOR i IN 1..n LOOP
    hi := hi + 1;
    IF NOT cf_insert('stress', base + hi) THEN RAISE EXCEPTION 'insert of % refused', base + hi; END IF;
    IF NOT cf_delete('stress', base + lo) THEN RAISE EXCEPTION 'delete of live key % found nothing', base + lo; END IF;
    lo := lo + 1;
    FOR j IN 1..3 LOOP
      k := base + lo + floor(random() * (hi - lo + 1))::bigint;
      IF NOT cf_contains('stress', k) THEN RAISE EXCEPTION 'false negative: live key % not found', k; END IF;
    END LOOP;
  END LOOP;
  -- Every live key, once more, while the other clients are still running.
  FOR o IN lo..hi LOOP
    IF NOT cf_contains('stress', base + o) THEN RAISE EXCEPTION 'false negative: live key % not found', base + o; END IF;
  END LOOP;
END $$;
SQL
for c in $(seq 1 "$CLIENTS"); do
  start_session "stress-$c" /tmp/cuckoo-stress.sql "s/:CLIENT/$c/g; s/:KEYS/$KEYS/g"
done
wait_sessions
# Each client leaves KEYS live keys: offsets KEYS+1 .. 2*KEYS.
expected=$((CLIENTS * KEYS))
row=$(psql -F' ' -c "SELECT items, inserts, deletes, failed_inserts, kicks, lookup_retries, round(load_factor::numeric, 3) FROM cuckoo_filters WHERE name = 'stress'")
read -r items inserts deletes failed kicks retries load <<<"$row"
echo "items=$items inserts=$inserts deletes=$deletes failed=$failed kicks=$kicks lookup_retries=$retries peak_load~$load"
[ "$items" = "$expected" ] || fail "items $items, expected $expected"
[ "$inserts" = $((2 * expected)) ] || fail "inserts $inserts"
[ "$deletes" = "$expected" ] || fail "deletes $deletes"
[ "$failed" = 0 ] || fail "failed inserts $failed"
[ "$kicks" -gt 0 ] || fail "no fingerprint was moved: the stress did not exercise migration"
missing=$(psql -c "SELECT count(*) FROM generate_series(1, $CLIENTS) c, generate_series($KEYS + 1, 2 * $KEYS) o WHERE NOT cf_contains('stress', c * 1000000000::bigint + o)")
[ "$missing" = 0 ] || fail "$missing live keys missing at the end"
snap=$(psql -c "SELECT cf_count(cf_snapshot('stress'))")
[ "$snap" = "$expected" ] || fail "snapshot count $snap"
psql -c "SELECT cf_drop('stress')" >/dev/null

echo "== snapshots and registry changes under concurrent writers"
# Keys 1..ALWAYS stay stored throughout while 3 writers insert a second copy of
# them and delete one again (shifting copies between the two buckets of a pair),
# and insert and delete other keys at about 75% load (moving fingerprints). A
# fourth session snapshots the filter over and over, requires every always-stored
# key in every snapshot, and meanwhile publishes, drops and re-creates other
# filters, so that retired space is reclaimed while others are inside operations.
psql -c "SELECT cf_create('shift', 8000, expansion => 0)" >/dev/null
ALWAYS=$(psql -c "SELECT (i->>'buckets')::bigint * (i->>'bucket_size')::int * 3 / 4 FROM cf_info(cf_snapshot('shift')) i")
psql -c "SELECT count(*) FROM generate_series(1, $ALWAYS) k WHERE NOT cf_insert('shift', k)" | grep -qx 0 || fail "could not fill shift"
cat > /tmp/cuckoo-shift-writer.sql <<SQL
DO \$\$
DECLARE k bigint; other bigint;
BEGIN
  FOR i IN 1..:ITERATIONS LOOP
    k := 1 + floor(random() * $ALWAYS)::bigint;
    IF NOT cf_insert('shift', k) THEN RAISE EXCEPTION 'second copy of % refused', k; END IF;
    IF NOT cf_delete('shift', k) THEN RAISE EXCEPTION 'delete of stored key % found nothing', k; END IF;
    other := 1000000000::bigint * :WRITER + i;
    IF cf_insert('shift', other) THEN PERFORM cf_delete('shift', other); END IF;
    IF NOT cf_contains('shift', k) THEN RAISE EXCEPTION 'false negative: % not found', k; END IF;
  END LOOP;
END \$\$;
SQL
cat > /tmp/cuckoo-shift-snapshots.sql <<SQL
DO \$\$
DECLARE missing bigint; s cuckoofilter;
BEGIN
  FOR i IN 1..:SNAPSHOTS LOOP
    s := cf_snapshot('shift');
    SELECT count(*) INTO missing FROM generate_series(1, $ALWAYS) k WHERE NOT cf_contains(s, k);
    IF missing > 0 THEN RAISE EXCEPTION 'snapshot % misses % keys stored throughout', i, missing; END IF;
    PERFORM cf_publish('side', cf_agg(g)) FROM generate_series(1, 1000 + i) g;
    PERFORM cf_drop('side2');
    PERFORM cf_create('side2', 50000 + i);
  END LOOP;
END \$\$;
SQL
for w in 1 2 3; do
  start_session "shift-writer-$w" /tmp/cuckoo-shift-writer.sql "s/:ITERATIONS/${CUCKOO_SHIFT_ITERATIONS:-20000}/; s/:WRITER/$w/"
done
start_session shift-snapshotter /tmp/cuckoo-shift-snapshots.sql "s/:SNAPSHOTS/${CUCKOO_SHIFT_SNAPSHOTS:-60}/"
wait_sessions
row=$(psql -F' ' -c "SELECT items, kicks, lookups FROM cuckoo_filters WHERE name = 'shift'")
read -r items kicks lookups <<<"$row"
[ "$items" = "$ALWAYS" ] || fail "shift: items $items, expected $ALWAYS"
[ "$(psql -c "SELECT count(*) FROM generate_series(1, $ALWAYS) k WHERE NOT cf_contains('shift', k)")" = 0 ] || fail "shift: keys missing at the end"
echo "$ALWAYS keys stored throughout were in every snapshot; $kicks fingerprints moved; count exact at the end"
psql -c "SELECT cf_drop('shift'), cf_drop('side'), cf_drop('side2')" >/dev/null

echo "== cancellation"
# One backend inserts keys 1, 2, 3, ... in order and, once WINDOW keys are live,
# deletes key g - WINDOW after inserting key g, so that at most WINDOW + 1 keys are
# ever stored and the filter can never fill, however fast the machine. The
# counters then say exactly which keys are live: 1..inserts were inserted and
# 1..deletes deleted, so deletes+1 .. inserts must all be found.
BULK_CAPACITY=3000000
WINDOW=1500000
BULK_QUERY="SELECT count(*) FROM (SELECT generate_series(1, 1000000000) AS g) s
  WHERE CASE WHEN cf_insert('bulk', g) THEN g <= $WINDOW OR cf_delete('bulk', g - $WINDOW) ELSE false END"
psql -c "SELECT cf_create('bulk', $BULK_CAPACITY)" >/dev/null
psql -c "SELECT cf_create('bystander', 1000)" -c "SELECT count(*) FROM generate_series(1, 500) g WHERE cf_insert('bystander', g)" >/dev/null
check_bulk() {
  local n d items failed missing
  read -r n d items failed <<<"$(psql -F' ' -c "SELECT inserts, deletes, items, failed_inserts FROM cuckoo_filters WHERE name = 'bulk'")"
  [ "$failed" = 0 ] || fail "$1: $failed inserts refused (the window must keep the filter from filling)"
  [ "$n" -gt 0 ] || fail "$1: nothing was inserted before the interruption"
  [ "$items" = $((n - d)) ] || fail "$1: inserts $n, deletes $d, but items $items"
  missing=$(psql -c "SELECT count(*) FROM generate_series($d + 1, $n) g WHERE NOT cf_contains('bulk', g)")
  [ "$missing" = 0 ] || fail "$1: $missing of $((n - d)) live keys missing"
  [ "$(psql -c "SELECT count(*) FROM generate_series(1, 500) g WHERE cf_contains('bystander', g)")" = 500 ] || fail "$1: bystander damaged"
  echo "$1: $n keys inserted and $d deleted before the interruption; all $((n - d)) live keys found, count exact"
}
out=$(psql -c "SET statement_timeout = '300ms'" -c "$BULK_QUERY" 2>&1 || true)
grep -q "canceling statement due to statement timeout" <<<"$out" || fail "statement_timeout did not cancel: $out"
check_bulk statement_timeout
# Interrupts a bulk insert from another session with pg_cancel_backend or
# pg_terminate_backend, then checks the filter.
interrupt_bulk() {
  psql -c "SELECT cf_drop('bulk')" -c "SELECT cf_create('bulk', $BULK_CAPACITY)" >/dev/null
  psql -c "$BULK_QUERY" > /tmp/cuckoo-cancel.log 2>&1 &
  local victim=$! tries=0
  # Interrupt once the window slides (keys are being deleted as well as
  # inserted), however long that takes on this machine.
  until [ "$(psql -c "SELECT deletes > 1000 FROM cuckoo_filters WHERE name = 'bulk'")" = t ]; do
    tries=$((tries + 1)); [ $tries -lt 3000 ] || fail "$1: the bulk insert never got going"
    sleep 0.1
  done
  psql -c "SELECT $1(pid) FROM pg_stat_activity WHERE query LIKE '%cf_insert(''bulk''%' AND pid <> pg_backend_pid()" >/dev/null
  wait "$victim" && fail "$1: the bulk insert was not interrupted"
  grep -q "$2" /tmp/cuckoo-cancel.log || fail "$1: unexpected: $(cat /tmp/cuckoo-cancel.log)"
  check_bulk "$1"
}
interrupt_bulk pg_cancel_backend "canceling statement due to user request"
interrupt_bulk pg_terminate_backend "terminating connection due to administrator command"
# Cancel a publish of a large filter mid-statement (while cf_agg builds it; the
# copy under the registry lock holds interrupts): nothing may be left locked or
# half-made, and the drops below must succeed.
out=$(psql -c "SET statement_timeout = '50ms'" -c "SELECT cf_publish('pub', cf_agg(g)) FROM generate_series(1, 3000000) g" 2>&1 || true)
grep -q "statement timeout" <<<"$out" || fail "publish was not cancelled: $out"
psql -c "SELECT cf_drop('bulk'), cf_drop('bystander'), cf_drop('pub')" >/dev/null
[ "$(psql -c "SELECT count(*) FROM cuckoo_filters")" = 0 ] || fail "filters left over"
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"

echo "== exhaustion and reuse"
n=0
while out=$(psql -c "SELECT cf_create('fill$n', 1000000)" 2>&1); do n=$((n + 1)); [ $n -lt 100 ] || fail "region never filled"; done
grep -Eq 'not enough cuckoo shared memory for filter "fill[0-9]+": requested [0-9]+ bytes, [0-9]+ bytes free' <<<"$out" || fail "unexpected error: $out"
err=$(psql -v VERBOSITY=verbose -c "\set VERBOSITY verbose" -c "SELECT cf_create('fill$n', 1000000)" 2>&1 || true)
grep -q "53200" <<<"$err" || fail "exhaustion SQLSTATE: $err"
echo "$n filters of 1M keys fit; the next: $(grep -o 'requested.*' <<<"$out")"
psql -c "SELECT cf_insert('fill0', 7)" >/dev/null
[ "$(psql -c "SELECT cf_contains('fill0', 7)")" = t ] || fail "existing filter damaged by the failed create"
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_drop('fill$i')" >/dev/null; done
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_create('again$i', 1000000)" >/dev/null || fail "dropped space not reused ($i)"; done
echo "after dropping all $n, $n new ones fit again"
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_drop('again$i')" >/dev/null; done
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
grep -E "PANIC|server process .* was terminated by signal" "$CLUSTER_DIR/server.log" && fail "crash in the server log"

echo "== growth under concurrency"
# Each client publishes how far it got with setval (not transactional: the
# snapshotter sees it at once).
psql -c "SELECT cf_create('grow', 1000)" -c "CREATE SEQUENCE grow_1" -c "CREATE SEQUENCE grow_2" -c "CREATE SEQUENCE grow_3" -c "CREATE SEQUENCE grow_4" >/dev/null
cat > /tmp/cuckoo-grow.sql <<'SQL'
DO $$
DECLARE
  base bigint := :CLIENT::bigint * 1000000000;
  k bigint;
BEGIN
  PERFORM setseed(:CLIENT / 100.0);
  FOR i IN 1..:KEYS LOOP
    IF NOT cf_insert('grow', base + i) THEN RAISE EXCEPTION 'insert of % refused by a filter that grows', base + i; END IF;
    k := base + 1 + floor(random() * i)::bigint;
    IF NOT cf_contains('grow', k) THEN RAISE EXCEPTION 'false negative: % not found', k; END IF;
    IF i % 100 = 0 THEN
      PERFORM setval('grow_:CLIENT', i);
    END IF;
  END LOOP;
END $$;
SQL
cat > /tmp/cuckoo-grow-snap.sql <<'SQL'
DO $$
DECLARE s cuckoofilter; missing bigint; upto bigint[];
BEGIN
  FOR n IN 1..:SNAPSHOTS LOOP
    -- Keys recorded as stored before the snapshot began must all be in it.
    SELECT array_agg(CASE WHEN is_called THEN last_value ELSE 0 END ORDER BY c) INTO upto
      FROM (SELECT 1 AS c, * FROM grow_1 UNION ALL SELECT 2, * FROM grow_2 UNION ALL SELECT 3, * FROM grow_3 UNION ALL SELECT 4, * FROM grow_4) q;
    s := cf_snapshot('grow');
    SELECT count(*) INTO missing FROM generate_series(1, 4) c, generate_series(1, upto[c]) g WHERE NOT cf_contains(s, c * 1000000000::bigint + g);
    IF missing > 0 THEN RAISE EXCEPTION 'snapshot % misses % keys stored before it', n, missing; END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SQL
GROW_KEYS=${CUCKOO_GROW_KEYS:-40000}
for c in 1 2 3 4; do
  start_session "grow-$c" /tmp/cuckoo-grow.sql "s/:CLIENT/$c/g; s/:KEYS/$GROW_KEYS/g"
done
start_session grow-snap /tmp/cuckoo-grow-snap.sql "s/:SNAPSHOTS/${CUCKOO_GROW_SNAPSHOTS:-40}/"
wait_sessions
row=$(psql -F' ' -c "SELECT items, failed_inserts, tables FROM cuckoo_filters WHERE name = 'grow'")
read -r items failed tables <<<"$row"
[ "$items" = $((4 * GROW_KEYS)) ] || fail "grow: items $items, expected $((4 * GROW_KEYS))"
[ "$failed" = 0 ] || fail "grow: $failed inserts refused"
[ "$tables" -ge 6 ] || fail "grow: only $tables tables"
[ "$(psql -c "SELECT count(*) FROM generate_series(1, 4) c, generate_series(1, $GROW_KEYS) g WHERE NOT cf_contains('grow', c * 1000000000::bigint + g)")" = 0 ] || fail "grow: keys missing"
[ "$(psql -c "SELECT cf_count(cf_snapshot('grow'))")" = "$items" ] || fail "grow: snapshot count"
echo "4 sessions stored $items keys in a filter made for 1,000 ($tables tables) while snapshots were taken: every key found"
psql -c "SELECT cf_drop('grow')" -c "DROP SEQUENCE grow_1, grow_2, grow_3, grow_4" >/dev/null
# A filter that grows until the region has no room for its next table: keys
# 1, 2, 3, ... until 1,000 inserts were refused (the refused ones recorded).
psql -c "SELECT cf_create('hog', 1000, durable => false)" -c "CREATE TABLE hog_refused (k bigint)" -c "CREATE SEQUENCE hog_tried" >/dev/null
psql -c "DO \$\$ DECLARE g bigint := 0; refused int := 0; BEGIN
  WHILE refused < 1000 LOOP
    g := g + 1;
    IF NOT cf_insert('hog', g) THEN INSERT INTO hog_refused VALUES (g); refused := refused + 1; END IF;
  END LOOP;
  PERFORM setval('hog_tried', g);
END \$\$" >/dev/null
row=$(psql -F' ' -c "SELECT (SELECT last_value FROM hog_tried), items, failed_inserts, tables FROM cuckoo_filters WHERE name = 'hog'")
read -r tried items failed tables <<<"$row"
stored=$((tried - 1000))
[ "$failed" = 1000 ] || fail "hog: failed_inserts $failed, 1000 were refused"
[ "$items" = "$stored" ] || fail "hog: items $items, stored $stored"
[ "$(psql -c "SELECT count(*) FROM generate_series(1, $tried) g WHERE NOT cf_contains('hog', g) AND g NOT IN (SELECT k FROM hog_refused)")" = 0 ] \
  || fail "hog lost stored keys when the region filled"
free=$(psql -c "SELECT free_bytes FROM cuckoo_region")
echo "a filter that grows filled the region: $stored keys stored in $tables tables, then 1,000 inserts refused (false, counted), every stored key found; $free bytes left"
psql -c "SELECT cf_drop('hog')" -c "DROP TABLE hog_refused" -c "DROP SEQUENCE hog_tried" >/dev/null
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"

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

echo "== without shared_preload_libraries"
tests/tools/cluster.sh stop; rm -rf "$CLUSTER_DIR"
CLUSTER_CONF="shared_preload_libraries = ''" tests/tools/cluster.sh start
psql -c "CREATE EXTENSION cuckoo"
err=$(psql -c "SELECT cf_create('x', 10)" 2>&1 || true)
grep -q "cuckoo must be loaded via shared_preload_libraries" <<<"$err" || fail "unexpected: $err"
[ "$(psql -c "SELECT cf_contains(cf_agg(g), 5) FROM generate_series(1, 10) g")" = t ] || fail "values must work without preloading"
echo "ok: $err"
echo "concurrency tests passed"
