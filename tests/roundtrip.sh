#!/usr/bin/env bash
# Round trips of a table with a cuckoofilter column through pg_dump/pg_restore
# (custom format) and COPY ... (FORMAT binary), plus malformed binary input.
# Expects the cluster of tests/tools/cluster.sh to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DIR=${CLUSTER_DIR:-/tmp/cuckoo-cluster}
PORT=${PGPORT:-5497}
conn=(-h "$DIR" -p "$PORT" -U postgres)
q() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "${conn[@]}" -At "$@"; }
fail() { echo "roundtrip: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/cuckoo-roundtrip.XXXXXX); chmod 777 "$work"

q -d postgres -c "DROP DATABASE IF EXISTS rt_src" -c "DROP DATABASE IF EXISTS rt_dst" -c "CREATE DATABASE rt_src" -c "CREATE DATABASE rt_dst"
q -d rt_src <<'SQL'
CREATE EXTENSION cuckoo;
CREATE TABLE filters (id int PRIMARY KEY, f cuckoofilter);
INSERT INTO filters SELECT 1, cf_agg(g) FROM generate_series(1, 300000) g;          -- toasted, 1 MB
INSERT INTO filters SELECT 2, cf_agg(md5(g::text), 0.00001) FROM generate_series(1, 1000) g;
INSERT INTO filters VALUES (3, cf_empty(10, 0.01)), (4, NULL);
-- A value of several tables (format 3): the union of two filters of different shapes.
INSERT INTO filters SELECT 5, cf_union(cf_agg(g), cf_agg(-g, 0.01)) FROM generate_series(1, 50000) g;
SQL
fingerprint="SELECT string_agg(id || ':' || coalesce(md5(f::text), 'null') || ':' || coalesce(cf_count(f), -1), ',' ORDER BY id) FROM filters"
want=$(q -d rt_src -c "$fingerprint")

# pg_dump (custom format) -> pg_restore into another database.
"$PGBIN/pg_dump" "${conn[@]}" -Fc -f "$work/src.dump" rt_src
"$PGBIN/pg_restore" "${conn[@]}" -d rt_dst "$work/src.dump"
got=$(q -d rt_dst -c "$fingerprint")
[ "$got" = "$want" ] || fail "pg_dump/pg_restore changed the filters: $want vs $got"
members=$(q -d rt_dst -c "SELECT count(*) FROM filters, generate_series(1, 300000) g WHERE id = 1 AND cf_contains(f, g)")
[ "$members" = 300000 ] || fail "restored filter lost members ($members of 300000 found)"
multi=$(q -d rt_dst -c "SELECT cf_info(f) ->> 'format_version' || ' ' || (SELECT count(*) FROM generate_series(1, 50000) g WHERE NOT cf_contains(f, g) OR NOT cf_contains(f, -g)) FROM filters WHERE id = 5")
[ "$multi" = "3 0" ] || fail "the restored value of several tables: format and missing keys '$multi', expected '3 0'"
echo "roundtrip: pg_dump/pg_restore ok"

# COPY ... (FORMAT binary) out and back in.
q -d rt_src -c "\\copy filters TO '$work/filters.bin' (FORMAT binary)"
q -d rt_src -c "CREATE TABLE filters_copy (LIKE filters)" -c "\\copy filters_copy FROM '$work/filters.bin' (FORMAT binary)"
got=$(q -d rt_src -c "${fingerprint/FROM filters/FROM filters_copy}")
[ "$got" = "$want" ] || fail "binary COPY changed the filters"
# Text COPY too.
q -d rt_src -c "TRUNCATE filters_copy" -c "\\copy filters TO '$work/filters.txt'" -c "\\copy filters_copy FROM '$work/filters.txt'"
got=$(q -d rt_src -c "${fingerprint/FROM filters/FROM filters_copy}")
[ "$got" = "$want" ] || fail "text COPY changed the filters"
echo "roundtrip: COPY binary and text ok"

# Values written by 0.1.0 in binary COPY form (tests/pg_regress/data, made by
# 0.1.0 from the same rows as v1_values.tsv) load, and equal the text fixtures.
q -d rt_src -c "CREATE TABLE v1_text (id int, note text, f cuckoofilter)" -c "CREATE TABLE v1_bin (LIKE v1_text)" \
  -c "\\copy v1_text FROM 'tests/pg_regress/data/v1_values.tsv'" \
  -c "\\copy v1_bin FROM 'tests/pg_regress/data/v1_values.bin' (FORMAT binary)"
same=$(q -d rt_src -c "SELECT count(*) FROM v1_text t JOIN v1_bin b USING (id) WHERE t.f::text = b.f::text AND cf_info(b.f) ->> 'format_version' = '1'")
[ "$same" = 9 ] || fail "binary v1 fixtures differ from the text ones ($same of 9 equal)"
found=$(q -d rt_src -c "SELECT count(*) FROM v1_bin, generate_series(1, 1000) g WHERE id = 1 AND cf_contains(f, g)")
[ "$found" = 1000 ] || fail "binary v1 fixture 1 lost keys ($found of 1000)"
echo "roundtrip: 0.1.0 binary COPY fixtures ok"

# Malformed binary input: corrupt the filter field of row 3 in the binary file in
# several ways; each load must fail with 22P02 and leave the server up.
python3 - "$work" <<'PY'
import struct, sys
work = sys.argv[1]
data = open(f"{work}/filters.bin", "rb").read()
hdr_len = 11 + 4 + 4 + struct.unpack(">I", data[15:19])[0]
pos, rows = hdr_len, []
while True:
    (n,) = struct.unpack(">h", data[pos:pos + 2])
    if n == -1:
        break
    p, fields = pos + 2, []
    for _ in range(n):
        (l,) = struct.unpack(">i", data[p:p + 4])
        fields.append(data[p + 4:p + 4 + max(l, 0)] if l >= 0 else None)
        p += 4 + max(l, 0)
    rows.append(fields)
    pos = p
body = [r for r in rows if r[0] == struct.pack(">i", 3)][0][1]
# Row 3 is cf_empty(10, 0.01) in format 2 (a 48-byte header, see src/filter/dense.rs).
variants = {
    "truncated": body[:-8], "header-only": body[:48], "empty": b"", "extra-bytes": body + b"\0" * 8,
    "bad-magic": b"XKOF" + body[4:], "bad-version": body[:4] + b"\x09" + body[5:],
    "bad-fingerprint-bits": body[:6] + b"\x21" + body[7:], "bad-mapping": body[:8] + b"\x05" + body[9:],
    "bad-encoding": body[:9] + b"\x01" + body[10:], "reserved-set": body[:10] + b"\x01" + body[11:],
    "bucket-count-zero": body[:24] + struct.pack("<Q", 0) + body[32:],
    "bucket-count-huge": body[:24] + struct.pack("<Q", 1 << 40) + body[32:],
    "items-too-many": body[:32] + struct.pack("<Q", 10**6) + body[40:],
    "capacity-zero": body[:40] + struct.pack("<Q", 0) + body[48:],
    "padding-set": body[:-1] + b"\x01",
    "format-1-version-on-format-2-body": body[:4] + b"\x01" + body[5:],
}
for name, v in variants.items():
    out = data[:hdr_len] + struct.pack(">h", 2) + struct.pack(">i", 4) + struct.pack(">i", 3)
    out += struct.pack(">i", len(v)) + v + struct.pack(">h", -1)
    open(f"{work}/bad-{name}.bin", "wb").write(out)
PY
for f in "$work"/bad-*.bin; do
  err=$("$PGBIN/psql" -X -q "${conn[@]}" -d rt_src -v VERBOSITY=verbose \
        -c "\\copy filters_copy FROM '$f' (FORMAT binary)" 2>&1 || true)
  echo "$err" | grep -q "22P02" || fail "$(basename "$f"): expected SQLSTATE 22P02, got: $err"
done
[ "$(q -d rt_src -c 'SELECT 1')" = 1 ] || fail "server not answering after malformed binary input"
echo "roundtrip: malformed binary input rejected with 22P02 ($(ls "$work"/bad-*.bin | wc -l) variants)"
rm -rf "$work"
echo "roundtrip: 4 passed, 0 failed"
