#!/usr/bin/env python3
"""SQL benchmarks for cuckoofilter values, each against a reference measured in
the same run, interleaved, median of several repetitions. Prints ratios.

  probe:  count(*) ... WHERE cf_contains(f, k) over N rows, against the same scan
          with a builtin of similar cost (hashint8(k) & 1 = 0); and a filter of N
          items against one of 1k items.
  build:  cf_agg(k) against hll_add_agg(hll_hash_bigint(k)) on the same rows,
          serial, and cf_agg serial against 2 parallel workers.
  space:  bits per item and measured false-positive rate against the reference
          cuckoo filter's 12.6 bits/item at 0.18%.

BENCH_ROWS (default 10M) and BENCH_REPS (default 5) scale it.
"""
import os
import re
import statistics
import subprocess
import sys

ROWS = int(os.environ.get("BENCH_ROWS", 10_000_000))
REPS = int(os.environ.get("BENCH_REPS", 5))
DIR = os.environ.get("CLUSTER_DIR", "/tmp/cuckoo-bench")
PORT = os.environ.get("PGPORT", "5494")
PSQL = ["/usr/lib/postgresql/15/bin/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
        "-h", DIR, "-p", PORT, "-U", "postgres", "-d", "bench"]


def psql(sql, settings=""):
    args = PSQL + (["-c", settings] if settings else []) + ["-c", "\\timing on", "-c", sql]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    ms = [float(m) for m in re.findall(r"Time: ([0-9.]+) ms", out)]
    rows = [l for l in out.splitlines() if l and not l.startswith("Time:")]
    return ms[-1] if ms else None, rows


def timed(queries, settings=""):
    """Runs each query REPS times, interleaved; returns the median ms per name."""
    times = {name: [] for name in queries}
    answers = {}
    for _ in range(REPS):
        for name, sql in queries.items():
            ms, rows = psql(sql, settings)
            times[name].append(ms)
            answers[name] = rows
    return {n: statistics.median(t) for n, t in times.items()}, answers


def setup():
    subprocess.run(["/usr/lib/postgresql/15/bin/psql", "-X", "-q", "-h", DIR, "-p", PORT, "-U", "postgres",
                    "-d", "postgres", "-c", "DROP DATABASE IF EXISTS bench", "-c", "CREATE DATABASE bench"],
                   check=True, capture_output=True)
    for sql in ["CREATE EXTENSION cuckoo", "CREATE EXTENSION hll",
                f"CREATE TABLE t AS SELECT g::bigint AS k FROM generate_series(1, {ROWS}) g",
                "VACUUM ANALYZE t",
                "CREATE TABLE filters AS SELECT 'large' AS name, cf_agg(k) AS f FROM t",
                "INSERT INTO filters SELECT 'small', cf_agg(k) FROM t WHERE k <= 1000"]:
        psql(sql)


SERIAL = "SET max_parallel_workers_per_gather = 0;"
PARALLEL = "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET min_parallel_table_scan_size = 0;"


def probe():
    q = {
        "builtin": "SELECT count(*) FROM t WHERE hashint8(k) & 1 = 0",
        "small": "SELECT count(*) FROM t WHERE cf_contains((SELECT f FROM filters WHERE name = 'small'), k)",
        "large": "SELECT count(*) FROM t WHERE cf_contains((SELECT f FROM filters WHERE name = 'large'), k)",
    }
    ms, ans = timed(q, SERIAL)
    assert ans["large"] == [str(ROWS)], ans["large"]  # no false negatives
    print(f"probe, {ROWS} rows, serial scan (median of {REPS}):")
    for n in q:
        print(f"  {n:8s} {ms[n]:9.1f} ms  ({ms[n] * 1e6 / ROWS:6.1f} ns/row)")
    print(f"  cf_contains 1k-item filter / builtin:      {ms['small'] / ms['builtin']:.2f}x  (goal <= 1.30)")
    print(f"  cf_contains {ROWS // 10**6}M-item filter / builtin:     {ms['large'] / ms['builtin']:.2f}x")
    print(f"  {ROWS // 10**6}M-item filter / 1k-item filter:          {ms['large'] / ms['small']:.2f}x  (goal <= 1.20)")


def build():
    q = {
        "hll": "SELECT hll_cardinality(hll_add_agg(hll_hash_bigint(k))) FROM t",
        "cf_agg": "SELECT cf_count(cf_agg(k)) FROM t",
    }
    ms, ans = timed(q, SERIAL)
    assert ans["cf_agg"] == [str(ROWS)], ans["cf_agg"]
    par, pans = timed({"cf_agg_parallel": q["cf_agg"], "hll_parallel": q["hll"]}, PARALLEL)
    assert pans["cf_agg_parallel"] == [str(ROWS)]
    print(f"build, {ROWS} rows (median of {REPS}):")
    print(f"  hll_add_agg serial   {ms['hll']:9.1f} ms")
    print(f"  cf_agg serial        {ms['cf_agg']:9.1f} ms")
    print(f"  hll_add_agg 2 workers{par['hll_parallel']:9.1f} ms")
    print(f"  cf_agg 2 workers     {par['cf_agg_parallel']:9.1f} ms")
    print(f"  cf_agg rate / hll rate, serial:             {ms['hll'] / ms['cf_agg']:.2f}x  (goal >= 0.80)")
    print(f"  cf_agg rate / hll rate, 2 workers:          {par['hll_parallel'] / par['cf_agg_parallel']:.2f}x")
    print(f"  cf_agg 2 workers / serial (speed-up):       {ms['cf_agg'] / par['cf_agg_parallel']:.2f}x")


def space():
    print("space and false-positive rate (default fpp 0.2%; reference: 12.6 bits/item at 0.18%):")
    # n chosen to fill a power-of-two table to ~95%, and the benchmark's own size.
    probes = 2_000_000
    for n in (int(0.95 * 4 * 2**18), ROWS):
        _, rows = psql(f"""
            WITH f AS (SELECT cf_agg(k) f FROM t WHERE k <= {n})
            SELECT (cf_info(f) ->> 'bits_per_item')::float8, (cf_info(f) ->> 'load_factor')::float8,
                   (SELECT count(*) FROM generate_series({ROWS} + 1, {ROWS} + {probes}) g WHERE cf_contains(f, g))::float8 / {probes}
            FROM f""")
        bits, load, fpp = map(float, rows[-1].split("|"))
        print(f"  {n:>9} items: load {load:.3f}, {bits:5.2f} bits/item ({bits / 12.6:.2f}x reference), "
              f"measured fpp {100 * fpp:.3f}% over {probes} absent keys ({fpp / 0.0018:.2f}x reference)")


if __name__ == "__main__":
    which = sys.argv[1:] or ["probe", "build", "space"]
    setup()
    for w in which:
        globals()[w]()
