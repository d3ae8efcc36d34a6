# Durability 14 (sourced by run.sh; alone: bash tests/durable/run.sh 14):
#   a server that ran 0.4.0, started with this release after a clean stop
#   and after a crash, then ALTER EXTENSION UPDATE. (0.4.0 is built once into
#   target/old/ by tests/tools/old-build.sh; this release's files are taken
#   from target/package, which make install leaves.)

# 0.4.0 (built from this repository's history, run from a private tree) makes
# durable filters; the server then starts with this release's library after a
# clean shutdown (0.4.0's saved file) and after a crash (its live file and its
# WAL of image passes): every filter comes back, goes to the new files, and
# ALTER EXTENSION UPDATE follows.
old_pkg=$(bash tests/tools/old-build.sh 0.4.0 94ac4d7038371d5c93bb138a9f92c66fe4e060b7)
up_port=$((PGPORT + 5))
for how in clean crash; do
  old_bin=$(bash tests/tools/pgtree.sh "$old_pkg" "${CLUSTER_DIR}-tree040")
  U=${CLUSTER_DIR}-up-$how
  upsql() { psql_on "$U" "$up_port" "$@"; }
  PGBIN=$old_bin CLUSTER_DIR=$U PGPORT=$up_port tests/tools/cluster.sh start
  upsql -c "CREATE EXTENSION cuckoo" -c "CREATE ROLE reader" >/dev/null
  [ "$(upsql -c "SELECT cuckoo_library_version() || ' ' || extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "0.4.0 0.4.0" ] || fail "the private tree does not run 0.4.0"
  upsql -c "SELECT cf_create('u_fill', 100000)" -c "SELECT count(*) FROM generate_series(1, 50000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_delete('u_fill', g)" \
        -c "SELECT cf_publish('u_pub', cf_agg(g)) FROM generate_series(1, 30000) g" -c "SELECT cf_grant_lookup('u_pub', 'reader')" \
        -c "CHECKPOINT" -c "SELECT count(*) FROM generate_series(50001, 60000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT cf_create('u_vol', 100, durable => false)" >/dev/null
  rows="SELECT string_agg(concat_ws(',', name, items, state, lookup_grantee), ' ' ORDER BY name) FROM cuckoo_filters"
  keys="SELECT (SELECT count(*) FROM generate_series(1001, 60000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT count(*) FROM generate_series(1, 30000) g WHERE NOT cf_contains('u_pub', g))"
  before=$(upsql -c "$rows" | sed 's/ u_vol,0,ready//')
  if [ "$how" = clean ]; then
    # This release's files installed while 0.4.0's library still runs (it is
    # preloaded): the update refuses and changes nothing.
    tree_root=${old_bin%/usr/lib/postgresql/*}
    (cd target/package && find . -type f) | while read -r f; do
      install -m 755 "target/package/$f" "$tree_root/${f#./}.new" && mv -f "$tree_root/${f#./}.new" "$tree_root/${f#./}"
    done
    if out=$(upsql -c "ALTER EXTENSION cuckoo UPDATE" 2>&1); then fail "the update ran on a server still running 0.4.0's library"; fi
    grep -q "this session runs cuckoo library 0.4.0, the update needs" <<<"$out" || fail "the update's refusal: $out"
    [ "$(upsql -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = 0.4.0 ] || fail "the refused update changed the version"
    ok "ALTER EXTENSION UPDATE refuses while 0.4.0's library still runs: $(grep -o 'this session runs[^"]*' <<<"$out" | head -1)"
    as_pg "$old_bin/pg_ctl" -D "$U/data" -m fast -w stop >/dev/null
  else
    CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  fi
  [ -f "$U/data/cuckoo_filters.dat" ] || fail "0.4.0 left no cuckoo_filters.dat ($how)"
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  for _ in $(seq 1 100); do [ ! -f "$U/data/cuckoo_filters.dat" ] && break; sleep 0.1; done
  [ "$(upsql -c "SELECT cuckoo_library_version()")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "the updated server does not run this release's library"
  [ "$(upsql -c "$rows")" = "$before" ] || fail "after 0.4.0 ($how): $(upsql -c "$rows"), before: $before"
  [ "$(upsql -c "$keys")" = "0 0" ] || fail "after 0.4.0 ($how): keys missing ($(upsql -c "$keys"))"
  [ ! -f "$U/data/cuckoo_filters.dat" ] || fail "cuckoo_filters.dat is still there after the first cut ($how)"
  [ "$(ls "$U/data/cuckoo" | grep -c '\.base$')" = 2 ] || fail "not one base file per durable filter ($how): $(ls "$U/data/cuckoo")"
  upsql -c "ALTER EXTENSION cuckoo UPDATE" >/dev/null
  [ "$(upsql -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "ALTER EXTENSION UPDATE did not update"
  upsql -c "SELECT count(*) FROM generate_series(60001, 61000) g WHERE cf_insert('u_fill', g)" >/dev/null
  CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  [ "$(upsql -c "SELECT (SELECT count(*) FROM generate_series(1001, 61000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'u_fill')")" = "0 60000" ] \
    || fail "after the update and a crash ($how): $(upsql -c "$rows")"
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -m immediate -w stop >/dev/null
  ok "a server that ran 0.4.0 ($how stop) comes back with its durable filters ($before), moves them to files, updates, and survives a crash"
done
