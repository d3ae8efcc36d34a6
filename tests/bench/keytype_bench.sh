#!/usr/bin/env bash
# The cost of a probe whose key type matches the filter's: this release (whose
# filters record their key type, and whose probes check it) against 0.5.0
# (built once from this repository's history by tests/tools/old-build.sh and run from
# a private tree by tests/tools/pgtree.sh), in the same run, each in its own cluster.
#
# Per cluster: 2M bigint probe keys (a quarter of them present), a stored value
# of 1M bigint keys and a named filter of the same keys. Each round times, in
# both clusters in turn, the scan alone (count(*)), the scan with a value probe
# (cf_contains((SELECT f FROM values), k)) and with a named probe
# (cf_contains('keys', k)); a probe's per-row cost is its time less the scan's.
# Prints the medians over rounds and the ratios (this release / 0.5.0): the
# goal is within 5% (a ratio of at most 1.05). Absolute times are noise.
# Env: KEYTYPE_BENCH_ROUNDS (7).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ROUNDS=${KEYTYPE_BENCH_ROUNDS:-7}
source tests/bench/lib.sh
pair_init keytype 0.5.0 d5657c76aff0aac3e973983b16b74bc8b2b17fed 5489 5490
for v in old new; do
  pair_start "$v" "max_parallel_workers_per_gather = 0"
  q "$v" >/dev/null <<'SQL'
CREATE EXTENSION cuckoo;
CREATE TABLE probes AS SELECT (g::bigint * 7919 % 4000000) AS k FROM generate_series(1, 2000000) g;
CREATE TABLE vals AS SELECT cf_agg(g::bigint) AS f FROM generate_series(1, 1000000) g;
SELECT cf_publish('keys', f, false) FROM vals;
VACUUM ANALYZE probes;
CREATE FUNCTION ms(query text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t timestamptz; n bigint;
BEGIN
  t := clock_timestamp();
  EXECUTE query INTO n;
  RETURN extract(epoch FROM clock_timestamp() - t) * 1000;
END $$;
SQL
  echo "keytype bench: $v: $(q "$v" -c "SELECT cuckoo_library_version()")" >&2
done
declare -A T
for ((r = 0; r < ROUNDS; r++)); do
  for v in old new; do
    row=$(q "$v" -c "SELECT ms('SELECT count(*) FROM probes'),
                            ms('SELECT count(*) FROM probes WHERE cf_contains((SELECT f FROM vals), k)'),
                            ms('SELECT count(*) FROM probes WHERE cf_contains(''keys'', k)')")
    T[$v]+="$row"$'\n'
  done
done
python3 - "${T[old]}" "${T[new]}" <<'PY'
import statistics, sys
def cols(text):
    rows = [list(map(float, l.split("|"))) for l in text.strip().split("\n")]
    return [statistics.median(r[i] for r in rows) for i in range(3)], [statistics.median(r[i] - r[0] for r in rows) for i in (1, 2)]
(old_t, old_p), (new_t, new_p) = cols(sys.argv[1]), cols(sys.argv[2])
n = 2_000_000
print(f"keytype: 2M bigint probes, medians of {len(sys.argv[1].strip().splitlines())} rounds (ms); probe cost = time less the scan's")
print(f"  scan alone:     0.5.0 {old_t[0]:8.1f}   this release {new_t[0]:8.1f}")
for name, i in (("value probe", 0), ("named probe", 1)):
    print(f"  {name}:    0.5.0 {old_p[i]:8.1f} ({1e6 * old_p[i] / n:5.1f} ns/row)   this release {new_p[i]:8.1f} ({1e6 * new_p[i] / n:5.1f} ns/row)"
          f"   ratio {new_p[i] / old_p[i]:.3f} (goal <= 1.05)")
PY
