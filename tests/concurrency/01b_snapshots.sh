# Concurrency 01b (sourced by run.sh; alone: bash tests/concurrency/run.sh 01b):
#   snapshots and registry changes under concurrent writers: 3 sessions shift
#   copies of always-stored keys between buckets and move fingerprints while a
#   fourth takes snapshots, each required to hold every always-stored key, and
#   publishes, drops and creates other filters in between.

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
