# Concurrency 03b (sourced by run.sh; alone: bash tests/concurrency/run.sh 03b):
#   4 sessions insert into a filter made for 1,000 keys while a fifth
#   snapshots it (tables are added under both): every key found, every
#   snapshot holds every key inserted before it began; then a filter grows
#   until the region has no room: inserts report false, failed_inserts
#   counts them, every stored key stays found.

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
