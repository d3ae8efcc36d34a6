# Durability 15 (sourced by run.sh; alone: bash tests/durable/run.sh 15):
#   a server that ran 0.5.0, started with this release after a clean stop
#   and after a crash: its filters answer as 0.5.0 did, then ALTER EXTENSION
#   UPDATE, and a filter made afterwards takes its first insert's key type.

# 0.5.0 (built from this repository's history, run from a private tree) keeps
# durable filters in files and WAL whose metadata record no key type. The
# server then starts with this release's library after a clean shutdown (its
# files) and after a crash (its files and the WAL since): every filter comes
# back recording no key type and answering exactly as 0.5.0 answered (a text
# probe of an integer filter hashes as text, as then), ALTER EXTENSION UPDATE
# follows, and a filter made afterwards records its first insert's key type.
old_pkg=$(bash tests/tools/old-build.sh 0.5.0 d5657c76aff0aac3e973983b16b74bc8b2b17fed)
up_port=$((PGPORT + 6))
for how in clean crash; do
  old_bin=$(bash tests/tools/pgtree.sh "$old_pkg" "${CLUSTER_DIR}-tree050")
  U=${CLUSTER_DIR}-up050-$how
  upsql() { psql_on "$U" "$up_port" "$@"; }
  PGBIN=$old_bin CLUSTER_DIR=$U PGPORT=$up_port tests/tools/cluster.sh start
  upsql -c "CREATE EXTENSION cuckoo" -c "CREATE ROLE reader" >/dev/null
  [ "$(upsql -c "SELECT cuckoo_library_version() || ' ' || extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "0.5.0 0.5.0" ] || fail "the private tree does not run 0.5.0"
  upsql -c "SELECT cf_create('u_fill', 100000)" -c "SELECT count(*) FROM generate_series(1, 50000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT count(*) FROM generate_series(1, 1000) g WHERE cf_delete('u_fill', g)" \
        -c "SELECT cf_publish('u_pub', cf_agg(g)) FROM generate_series(1, 30000) g" -c "SELECT cf_grant_lookup('u_pub', 'reader')" \
        -c "CHECKPOINT" -c "SELECT count(*) FROM generate_series(50001, 60000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT cf_insert('u_fill', 'a text key'::text)" -c "SELECT cf_create('u_vol', 100, durable => false)" >/dev/null
  rows="SELECT string_agg(concat_ws(',', name, items, state, lookup_grantee), ' ' ORDER BY name) FROM cuckoo_filters"
  keys="SELECT (SELECT count(*) FROM generate_series(1001, 60000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT count(*) FROM generate_series(1, 30000) g WHERE NOT cf_contains('u_pub', g))"
  # What 0.5.0 answers for text probes of the integer filter: hashed as text.
  text_probes="SELECT string_agg(cf_contains('u_fill', t)::text, ',' ORDER BY t) FROM unnest(ARRAY['a text key', '2000', '59999', 'absent']::text[]) t"
  before=$(upsql -c "$rows" | sed 's/ u_vol,0,ready//')
  text_before=$(upsql -c "$text_probes")
  if [ "$how" = clean ]; then
    as_pg "$old_bin/pg_ctl" -D "$U/data" -m fast -w stop >/dev/null
  else
    CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  fi
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  [ "$(upsql -c "SELECT cuckoo_library_version()")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "the server does not run this release's library after 0.5.0"
  [ "$(upsql -c "$rows")" = "$before" ] || fail "after 0.5.0 ($how): $(upsql -c "$rows"), before: $before"
  [ "$(upsql -c "$keys")" = "0 0" ] || fail "after 0.5.0 ($how): keys missing ($(upsql -c "$keys"))"
  [ "$(upsql -c "$text_probes")" = "$text_before" ] || fail "after 0.5.0 ($how): text probes answer $(upsql -c "$text_probes"), 0.5.0 answered $text_before"
  [ "$(upsql -c "SELECT (cf_info(cf_snapshot('u_fill')) ->> 'key_type') IS NULL AND (cf_info(cf_snapshot('u_pub')) ->> 'key_type') IS NULL")" = t ] \
    || fail "0.5.0's filters should record no key type ($how)"
  upsql -c "ALTER EXTENSION cuckoo UPDATE" >/dev/null
  [ "$(upsql -c "SELECT extversion FROM pg_extension WHERE extname = 'cuckoo'")" = "$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "ALTER EXTENSION UPDATE did not update"
  upsql -c "SELECT count(*) FROM generate_series(60001, 61000) g WHERE cf_insert('u_fill', g)" \
        -c "SELECT cf_create('u_new', 1000)" -c "SELECT cf_insert('u_new', 7)" >/dev/null
  CLUSTER_DIR=$U PGPORT=$up_port kill_postmaster
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -l "$U/server.log" -w start >/dev/null
  [ "$(upsql -c "SELECT (SELECT count(*) FROM generate_series(1001, 61000) g WHERE NOT cf_contains('u_fill', g)) || ' ' || (SELECT items FROM cuckoo_filters WHERE name = 'u_fill')")" = "0 60001" ] \
    || fail "after the update and a crash ($how): $(upsql -c "$rows")"
  [ "$(upsql -c "SELECT string_agg(concat_ws(':', name, coalesce(key_type, 'none')), ' ' ORDER BY name) FROM cuckoo_filters")" = "u_fill:none u_new:integer u_pub:none" ] \
    || fail "key types after the update and a crash ($how): $(upsql -c "SELECT string_agg(concat_ws(':', name, key_type), ' ') FROM cuckoo_filters")"
  as_pg "$PGBIN/pg_ctl" -D "$U/data" -m immediate -w stop >/dev/null
  ok "a server that ran 0.5.0 ($how stop) comes back with its durable filters ($before) answering as 0.5.0 did (text probes $text_before), updates, and a new filter takes its first insert's key type across a crash"
done
