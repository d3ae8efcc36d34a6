# Concurrency 01 (sourced by run.sh; alone: bash tests/concurrency/run.sh 01):
#   CUCKOO_CLIENTS (default 4) sessions insert, probe and delete on one
#   filter at once; each checks that every key it inserted and has not deleted
#   is found on every probe and that deleting it succeeds; counts agree at the
#   end. The stress filter has room for CUCKOO_STRESS_CAPACITY keys (default
#   100000) and the clients keep it about 90% full.

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
