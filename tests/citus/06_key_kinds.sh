# Citus 06 (sourced by run.sh; alone: bash tests/citus/run.sh 06):
#   cf_sharded_agg for keys of every kind (numeric, date, timestamptz, an
#   enum, arrays, inet, varchar, bytea, text, smallint): pushed down, equal to
#   cf_agg, none failing on the workers; an enum's array refused with the
#   reason; Citus's planner errors pass through cuckoo's hook unchanged.

# Every key type cf_agg takes: cf_sharded_agg over a distributed table is
# pushed down and gives cf_agg's filter (cf_agg's rows gathered to the
# coordinator) byte for byte. Types without a cf_sharded_agg of their own go
# through cf_sharded_key (cuckoo's planner hook); none fails on the workers.
q coord -c "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')" \
  -c "CREATE TABLE typed (id bigint, n numeric, d date, ts timestamptz, m mood, a int[], ip inet, v varchar(20), b bytea, t text, s smallint, ma mood[])" \
  -c "SELECT create_distributed_table('typed', 'id')" \
  -c "INSERT INTO typed SELECT g, g % 5000 / 7.0, date '2026-01-01' + g % 900, timestamptz '2026-01-01 00:00+00' + g % 7000 * interval '1 minute',
        (enum_range(NULL::mood))[1 + g % 3], ARRAY[g % 300, g % 7], ('10.0.' || g % 200 || '.' || g % 250)::inet, 'v' || g % 4000,
        decode(md5((g % 3000)::text), 'hex'), 'k' || g, (g % 30000)::smallint,
        ARRAY[(enum_range(NULL::mood))[1 + g % 3], (enum_range(NULL::mood))[1 + g / 3 % 3]] FROM generate_series(1, $ROWS / 4) g" >/dev/null
for col in n d ts m a ip v b t s; do
  plan=$(q coord -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT cf_sharded_agg($col) FROM typed")
  grep -q "worker_partial_agg" <<<"$plan" || fail "cf_sharded_agg of typed.$col was not pushed down"
  got=$(q coord -c "SELECT md5(cf_sharded_agg($col)::text) FROM typed" 2>&1) || fail "cf_sharded_agg of typed.$col failed: $got"
  [ "$got" = "$(q coord -c "SELECT md5(cf_agg($col)::text) FROM typed")" ] || fail "cf_sharded_agg of typed.$col differs from cf_agg"
done
# An enum's array hashes by OIDs, which differ from node to node: refused,
# with the reason, never a filter that is not cf_agg's.
err=$(q coord -c "SELECT cf_sharded_agg(ma) FROM typed" 2>&1 >/dev/null || true)
grep -q "whose hashes may differ from node to node" <<<"$err" || fail "cf_sharded_agg over an enum's array did not fail with the reason: $err"
for args in "n, 0.01" "m, 0.001, 100000" "ts, 0.05"; do
  [ "$(q coord -c "SELECT md5(cf_sharded_agg($args)::text) FROM typed")" = "$(q coord -c "SELECT md5(cf_agg($args)::text) FROM typed")" ] \
    || fail "cf_sharded_agg($args) differs from cf_agg"
done
[ "$(q coord -c "SELECT md5(string_agg(s || ':' || md5(f::text), ',' ORDER BY s)) FROM (SELECT s % 10 AS s, cf_sharded_agg(n) f FROM typed GROUP BY s % 10) x")" \
  = "$(q coord -c "SELECT md5(string_agg(s || ':' || md5(f::text), ',' ORDER BY s)) FROM (SELECT s % 10 AS s, cf_agg(n) f FROM typed GROUP BY s % 10) x")" ] \
  || fail "cf_sharded_agg(numeric) GROUP BY differs from cf_agg"
for form in "DISTINCT n" "n ORDER BY id"; do
  [ "$(q coord -c "SELECT md5(cf_sharded_agg($form)::text) FROM typed")" = "$(q coord -c "SELECT md5(cf_agg(n)::text) FROM typed")" ] \
    || fail "cf_sharded_agg($form) differs from cf_agg"
done
# An error of Citus's planner passes through cuckoo's hook as it is.
err=$(q coord -c "SELECT (SELECT 1 FROM typed LIMIT 1), cf_sharded_agg(n) FROM typed" 2>&1 >/dev/null || true)
grep -q "cannot push down subquery" <<<"$err" && ! grep -qi "panic\|backtrace\|rust" <<<"$err" \
  || fail "an error of Citus's planner came through cuckoo's planner hook as: $err"
missed=$(q coord -c "WITH f AS (SELECT cf_sharded_agg(ts) AS f FROM typed) SELECT count(*) FROM typed, f WHERE NOT cf_contains(f.f, typed.ts)")
[ "$missed" = 0 ] || fail "the timestamptz filter missed $missed of its keys"
ok "cf_sharded_agg of numeric, date, timestamptz, an enum, int[], inet, varchar, bytea, text and smallint: pushed down, each equal to cf_agg (an enum's array refused, with the reason); with fpp and capacity, GROUP BY, DISTINCT and ORDER BY; Citus's planner errors pass through the hook unchanged"
