# Durability 11 (sourced by run.sh; alone: bash tests/durable/run.sh 11):
#   damaged files (a flipped byte, a truncation, a stray temporary file).
# Needs: 08 10 (filter ten_m, with the keys 10 adds).

# A flipped byte and a truncation, each in the last file of a filter: detected
# (the filter is kept as needing a reload, the log says why), other filters
# unaffected, and cf_publish brings it back.
psql -c "SELECT cf_create('torn1', 10000)" -c "SELECT cf_create('torn2', 10000)" \
     -c "SELECT count(*) FROM generate_series(1, 5000) g WHERE cf_insert('torn1', g) AND cf_insert('torn2', g)" -c "CHECKPOINT" >/dev/null
pg_ctl_ -m fast -w stop
last_file() { # the newest file whose metadata names filter $1
  local f
  for f in $(ls -r "$CLUSTER_DIR"/data/cuckoo/*.base "$CLUSTER_DIR"/data/cuckoo/*.delta 2>/dev/null); do
    grep -q -a "$1" "$f" && { echo "$f"; return; }
  done
}
f1=$(last_file torn1); f2=$(last_file torn2)
[ -n "$f1" ] && [ -n "$f2" ] || fail "no files for torn1/torn2"
python3 - "$f1" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
PY
truncate -s -100 "$f2"
as_pg sh -c "echo garbage > '$CLUSTER_DIR/data/cuckoo/0000000000000001.0000000000000002.delta.tmp'"
pg_ctl_ -w start; wait_ready
for t in torn1 torn2; do
  [ "$(psql -c "SELECT state || ': ' || reason FROM cuckoo_filters WHERE name = '$t'")" = "needs reload: its files in the data directory are damaged" ] \
    || fail "$t: $(psql -c "SELECT state, reason FROM cuckoo_filters WHERE name = '$t'")"
  expect_error 55000 "SELECT cf_contains('$t', 1)"
done
grep -q 'the files of durable filter "torn1" (database [0-9]*) are damaged' "$CLUSTER_DIR/server.log" || fail "the log does not name torn1's damaged files"
compgen -G "$CLUSTER_DIR/data/cuckoo/*.tmp" >/dev/null && fail "a stray temporary file was left"
check_ten_m "next to damaged files" 2100100
psql -c "SELECT cf_publish('torn1', cf_agg(g)) FROM generate_series(1, 5000) g" >/dev/null
restart
[ "$(psql -c "SELECT state FROM cuckoo_filters WHERE name = 'torn1'")|$(psql -c "SELECT count(*) FROM generate_series(1, 5000) g WHERE NOT cf_contains('torn1', g)")" = "ready|0" ] \
  || fail "cf_publish did not bring torn1 back for good"
psql -c "SELECT cf_drop('torn2')" >/dev/null
ok "a flipped byte and a truncated file are detected (needs reload, named in the log), a stray temporary file is removed, other filters are intact"
