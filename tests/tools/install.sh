#!/usr/bin/env bash
# `make install`: builds the extension into a package directory, then installs
# each file by writing a new file next to the old one and renaming it over it (as
# PGXS's install does). A running server keeps the old shared library mapped and
# unchanged: rewriting a loaded library in place (what `cargo pgrx install` 0.18
# does) can crash the backends that have it mapped.
#   tests/tools/install.sh            build and install
#   tests/tools/install.sh --no-build install the last build again
#   tests/tools/install.sh --package  build the package directory only
#                                     (target/package: every file an
#                                     installation needs, for packagers)
# INSTALL_ROOT installs into a private installation tree of tests/tools/pgtree.sh
# instead (its root directory), leaving the system's untouched.
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
stage=target/package
if [ "${1:-}" != --no-build ]; then
  rm -rf "$stage"
  cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$stage" >/dev/null
  # The install scripts of earlier versions (sql/install/cuckoo--0.1.0.sql), so
  # that CREATE EXTENSION cuckoo VERSION '0.1.0' and its update path keep
  # working, and the update scripts (sql/upgrade/cuckoo--A--B.sql): cargo-pgrx
  # 0.18 packages neither, it copies only update scripts at the top of sql/.
  cp sql/install/cuckoo--*.sql sql/upgrade/cuckoo--*--*.sql "$stage$("$PG_CONFIG" --sharedir)/extension/"
fi
if [ "${1:-}" = --package ]; then
  echo "package: $(find "$stage" -type f | wc -l) files in $stage"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
installed=0
while IFS= read -r -d '' f; do
  dest="${INSTALL_ROOT:-}/${f#"$stage"/}"
  mode=644
  [[ "$dest" == *.so ]] && mode=755
  $SUDO install -d "$(dirname "$dest")"
  tmp="$(dirname "$dest")/.$(basename "$dest").new.$$"
  $SUDO install -m "$mode" "$f" "$tmp"
  $SUDO mv -f "$tmp" "$dest"
  installed=$((installed + 1))
done < <(find "$stage" -type f -print0)
[ "$installed" -gt 0 ] || { echo "install: nothing was built into $stage" >&2; exit 1; }
echo "install: $installed files installed from $stage ($(find "$stage" -name '*.so' -printf '%P\n'))"
