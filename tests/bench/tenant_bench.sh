#!/usr/bin/env bash
# What issue 29's guards cost (0.11.0: interrupt checks in every loop a call's
# input sizes, fallible allocations, key types checked when a value is made,
# the caps per role and per database passed to every named insert): this
# release against 0.10.0 (built once from this repository's history by
# tests/tools/old-build.sh, run from a private tree), in the same run, each in its
# own cluster. Per round, in both clusters in turn:
#   build   cf_agg of 2M distinct bigint keys (sort, bulk build, encode)
#   insert  200k one-key cf_insert calls into a named filter that grows
#           (made anew each round, not durable)
#   text    the text output of a 118 MB value (base64, now in chunks)
# and, in this release only, insert again with every cap set (far above use),
# which makes each insert pass the caps down and growth scan the registry.
# Prints medians and ratios (this release / 0.10.0). Absolute times are noise.
# Env: TENANT_BENCH_ROUNDS (5).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ROUNDS=${TENANT_BENCH_ROUNDS:-5}
source tests/bench/lib.sh
pair_init tenant 0.10.0 e9d7b3a7fdfe9ca78a01570c9d987b68c037f3f8 5487 5488
for v in old new; do
  pair_start "$v" "max_parallel_workers_per_gather = 0"
  q "$v" >/dev/null <<'SQL'
CREATE EXTENSION cuckoo;
CREATE TABLE k2m AS SELECT g::bigint AS k FROM generate_series(1, 2000000) g;
CREATE TABLE k200k AS SELECT g::bigint AS k FROM generate_series(1, 200000) g;
CREATE TABLE big AS SELECT cf_empty(100000000, 0.01) AS f;
VACUUM ANALYZE k2m, k200k;
CREATE FUNCTION ms(query text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t timestamptz; n bigint;
BEGIN
  t := clock_timestamp();
  EXECUTE query INTO n;
  RETURN extract(epoch FROM clock_timestamp() - t) * 1000;
END $$;
CREATE FUNCTION inserts() RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE r float8;
BEGIN
  PERFORM cf_drop('n');
  PERFORM cf_create('n', 10000, 0.01, false);
  r := ms('SELECT count(*) FROM k200k WHERE cf_insert(''n'', k)');
  PERFORM cf_drop('n');
  RETURN r;
END $$;
SQL
  echo "tenant bench: $v: $(q "$v" -c "SELECT cuckoo_library_version()"), value of $(q "$v" -c "SELECT pg_column_size(f) FROM big") bytes" >&2
done
caps="SET cuckoo.max_filters_per_role = 1000; SET cuckoo.max_bytes_per_role = '1GB'; SET cuckoo.max_filters_per_database = 1000; SET cuckoo.max_bytes_per_database = '1GB';"
declare -A T
for ((r = 0; r < ROUNDS; r++)); do
  for v in old new; do
    row=$(q "$v" -c "SELECT ms('SELECT cf_count(cf_agg(k)) FROM k2m'), inserts(), ms('SELECT length(f::text) FROM big')")
    T[$v]+="$row"$'\n'
  done
  T[capped]+="$(q new -c "$caps" -c "SELECT inserts()")"$'\n'
done
python3 - "${T[old]}" "${T[new]}" "${T[capped]}" <<'PY'
import statistics, sys
def cols(text, n):
    rows = [list(map(float, l.split("|"))) for l in text.strip().split("\n")]
    return [statistics.median(r[i] for r in rows) for i in range(n)]
old, new, capped = cols(sys.argv[1], 3), cols(sys.argv[2], 3), cols(sys.argv[3], 1)[0]
rounds = len(sys.argv[1].strip().splitlines())
print(f"tenant: issue 29's guards, medians of {rounds} rounds (ms), this release / 0.10.0")
for name, i in (("cf_agg of 2M keys", 0), ("200k named inserts", 1), ("text of a 118 MB value", 2)):
    print(f"  {name:24s} 0.10.0 {old[i]:9.1f}   this release {new[i]:9.1f}   ratio {new[i] / old[i]:.3f}")
print(f"  {'200k inserts, caps set':24s} {'':16s}this release {capped:9.1f}   ratio to uncapped {capped / new[1]:.3f}")
PY
