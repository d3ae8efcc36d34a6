# Durability 06 (sourced by run.sh; alone: bash tests/durable/run.sh 06):
#   a corrupt WAL record (valid CRC, bad contents) is not applied: a warning
#   names it, its filter needs a reload, and the server starts.

psql -c "CHECKPOINT"
start_lsn=$(psql -c "SELECT pg_current_wal_lsn()")
psql -c "SELECT cf_create('corrupt_me', 1000)" -c "SELECT cf_insert('corrupt_me', 5::bigint)" >/dev/null
end_lsn=$(psql -c "SELECT pg_current_wal_lsn()")
segment=$(psql -c "SELECT pg_walfile_name('$start_lsn')")
pg_ctl_ -m immediate -w stop
python3 - "$CLUSTER_DIR/data/pg_wal/$segment" "$start_lsn" "$end_lsn" <<'PY'
import struct, sys
path, start, end = sys.argv[1], sys.argv[2], sys.argv[3]
lsn = lambda s: (int(s.split('/')[0], 16) << 32) | int(s.split('/')[1], 16)
seg = 16 << 20
def crc32c(data, crc=0xFFFFFFFF):
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc
buf = bytearray(open(path, 'rb').read())
pos = lsn(start) % seg
found = False
while pos < lsn(end) % seg:
    if pos % 8192 == 0:
        pos += 40 if pos % seg == 0 else 24      # page header (long on the first page)
        continue
    tot, xid, prev, info, rmid = struct.unpack_from('<IIQBB', buf, pos)
    if tot == 0:
        break
    if rmid == 128 and info & 0xF0 == 0xE0 and (pos % 8192) + tot <= 8192:
        body = pos + 24 + 2                         # XLR_BLOCK_ID_DATA_SHORT, length
        buf[body + 8] = 0                           # KEY_TYPE's kind: none
        rec = bytes(buf[pos:pos + tot])
        crc = crc32c(rec[24:]); crc = crc32c(rec[:20], crc) ^ 0xFFFFFFFF
        struct.pack_into('<I', buf, pos + 20, crc)
        found = True
        break
    pos += (tot + 7) & ~7
if not found:
    sys.exit("no KEY_TYPE record found on one page")
open(path, 'wb').write(buf)
PY
pg_ctl_ -w start || fail "the server did not start past a corrupt cuckoo record"
grep -q 'cuckoo: cannot replay the WAL record ending at .*: KEY_TYPE record has a bad key type; durable filter "corrupt_me"' "$CLUSTER_DIR/server.log" \
  || fail "no clear message for the corrupt record"
[ "$(psql -c "SELECT state FROM cuckoo_filters WHERE name = 'corrupt_me'")" = "needs reload" ] || fail "the filter of the corrupt record does not say it needs a reload"
expect_error 55000 "SELECT cf_contains('corrupt_me', 5::bigint)"
ok "a corrupt record is not applied, its filter needs a reload, the server starts: $(grep -o 'cuckoo: cannot replay[^;]*' "$CLUSTER_DIR/server.log" | tail -1)"
