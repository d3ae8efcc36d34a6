#!/usr/bin/env bash
# Runs the #[pg_test]s against a private PostgreSQL installation tree
# (tests/tools/pgtree.sh; in /tmp, so that user postgres can run the server from it
# wherever this checkout is): `cargo pgrx test` is given the tree's
# pg_config through a private PGRX_HOME, so the debug build with the test-only
# functions is installed into the tree and the test server runs from it. The
# system's installation, and any server running from it, is never touched
# (tests/isolation.sh proves it).
# pgrx's test PostgreSQL refuses to run as root, so as root it is run as user
# postgres (pgrx uses sudo for that), in a directory postgres owns.
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export PG_CONFIG
# These would point pgrx at another pg_config than the tree's.
unset PGRX_PG_CONFIG_PATH PGRX_PG_CONFIG_AS_ENV
tree=${CUCKOO_PG_TEST_TREE:-/tmp/cuckoo-pg-test-tree}
trap 'rm -rf "$tree"' EXIT
bin=$(bash tests/tools/pgtree.sh - "$tree")
export PGRX_HOME=$PWD/target/pg_test/pgrx-home
mkdir -p "$PGRX_HOME"
printf '[configs]\npg15 = "%s"\n' "$bin/pg_config" > "$PGRX_HOME/config.toml"
if [ "$(id -u)" -eq 0 ]; then
  dir=/tmp/cuckoo-pgrx-test
  rm -rf "$dir"; install -d -o postgres -g postgres "$dir"
  export CARGO_PGRX_TEST_RUNAS=postgres CARGO_PGRX_TEST_PGDATA="$dir/data"
fi
cargo pgrx test pg15 "$@"
# The build went into the tree (cargo pgrx test installs where pg_config says).
installed=$(find "$tree" -name 'cuckoo*' -newer "$PGRX_HOME/config.toml" -type f | wc -l)
[ "$installed" -gt 0 ] || { echo "pg_test: nothing was installed into $tree" >&2; exit 1; }
