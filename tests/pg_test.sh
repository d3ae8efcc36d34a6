#!/usr/bin/env bash
# Runs the #[pg_test]s. pgrx's test PostgreSQL refuses to run as root, so as root
# it is run as user postgres (pgrx uses sudo for that), in a directory postgres owns.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
if [ "$(id -u)" -eq 0 ]; then
  dir=/tmp/cuckoo-pgrx-test
  rm -rf "$dir"; install -d -o postgres -g postgres "$dir"
  export CARGO_PGRX_TEST_RUNAS=postgres CARGO_PGRX_TEST_PGDATA="$dir/data"
fi
cargo pgrx test pg15
