#!/usr/bin/env bash
# `make install` on a running server: the shared library is replaced by renaming
# a new file over it, so a backend that has the old one mapped (every backend:
# the library is preloaded) keeps running its code, and the server stays up.
# Expects the cluster of tests/tools/cluster.sh to be running and a built package in
# target/package (make install). With PG_CONFIG of a private installation
# tree (tests/tools/pgtree.sh), the library is replaced in that tree.
set -euo pipefail
cd "$(dirname "$0")/.."
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
DIR=${CLUSTER_DIR:-/tmp/cuckoo-cluster}
PORT=${PGPORT:-5497}
q() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -At "$@"; }
fail() { echo "reinstall: FAIL: $*" >&2; exit 1; }
lib="$("$PG_CONFIG" --pkglibdir)/cuckoo.so"
[ -f "$lib" ] || fail "$lib is not installed"
started=$(q -d postgres -c "SELECT pg_postmaster_start_time()")
q -d postgres -c "DROP DATABASE IF EXISTS reinstall" -c "CREATE DATABASE reinstall"
q -d reinstall -c "CREATE EXTENSION cuckoo"
out=$(mktemp /tmp/cuckoo-reinstall.XXXXXX)
trap 'rm -f "$out"' EXIT

# A session that uses the library, waits while the install runs, then uses it
# again (code it has not run before: a union and a snapshot).
q -d reinstall > "$out" 2>&1 <<'SQL' &
SELECT cf_count(cf_agg(g)) FROM generate_series(1, 1000) g;
SELECT pg_sleep(4);
SELECT cf_count(cf_union(cf_agg(g, 0.01, 200000), cf_agg(g + 100000, 0.01, 200000))) FROM generate_series(1, 100000) g;
SELECT count(*) FILTER (WHERE cf_contains(f, g)) FROM (SELECT cf_agg(g) AS f FROM generate_series(1, 50000) g) x, generate_series(1, 50000) g;
SQL
session=$!
sleep 1
before=$(stat -c %i "$lib")
# The tree's root: where the package's library path puts the tree's library.
staged=$(cd target/package && find . -name cuckoo.so -printf '/%P\n' | head -1)
[ -n "$staged" ] && [ "${lib%"$staged"}" != "$lib" ] || fail "target/package has no library for $lib"
INSTALL_ROOT="${lib%"$staged"}" bash tests/tools/install.sh --no-build >/dev/null
after=$(stat -c %i "$lib")
[ "$before" != "$after" ] || fail "the library was rewritten in place (inode $before unchanged)"
wait "$session" || fail "the session using the library failed: $(cat "$out")"
[ "$(tr '\n' ' ' < "$out")" = "1000  200000 50000 " ] || fail "the session's answers changed: $(cat "$out")"
[ "$(q -d postgres -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
grep -q "terminated by signal" "$DIR/server.log" && fail "a server process died: $(grep 'terminated by signal' "$DIR/server.log")"
q -d postgres -c "DROP DATABASE reinstall"
echo "reinstall: library replaced by rename (inode $before -> $after) under a running session; session and server unaffected"
