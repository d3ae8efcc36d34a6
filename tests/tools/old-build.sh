#!/usr/bin/env bash
# Builds the package (what `cargo pgrx package` writes) of an earlier release
# from this repository's history, once: tests that need data an older release
# wrote run it from a private tree (tests/tools/pgtree.sh). Cached in
# target/old/VERSION/, built in target/old/target/.
#   tests/tools/old-build.sh VERSION COMMIT   prints the package directory
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
version=$1 commit=$2 out=target/old/$version
if [ ! -f "$out/pkg/.built" ]; then
  if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    # A shallow clone: fetch the history the old release is in.
    git fetch --quiet --unshallow >&2 || git fetch --quiet origin "$commit" >&2
  fi
  rm -rf "$out"
  mkdir -p "$out/src"
  git archive "$commit" | tar -x -C "$out/src"
  grep -q "^version = \"$version\"" "$out/src/Cargo.toml" || { echo "old-build: $commit is not version $version" >&2; exit 1; }
  echo "old-build: building cuckoo $version from $commit (once; cached in $out)" >&2
  # One target directory for every old release: what their builds share
  # (pgrx and the other dependencies, when the lock files agree) is built once.
  (cd "$out/src" && CARGO_TARGET_DIR="$(pwd)/../../target" cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$(pwd)/../pkg" >/dev/null)
  # Releases from 0.12.0 on keep their earlier install and update scripts in
  # sql/install/ and sql/upgrade/, which cargo-pgrx does not package.
  for d in install upgrade; do
    if [ -d "$out/src/sql/$d" ]; then
      cp "$out/src/sql/$d"/cuckoo--*.sql "$out/pkg$("$PG_CONFIG" --sharedir)/extension/"
    fi
  done
  touch "$out/pkg/.built"
fi
realpath "$out/pkg"
