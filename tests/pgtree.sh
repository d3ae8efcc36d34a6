#!/usr/bin/env bash
# A private PostgreSQL installation tree: the system's server binaries copied
# (a copy, not a link, so that the server finds its libraries and shared files
# next to itself), everything else linked, and the cuckoo files of a package
# directory (what `cargo pgrx package` builds) in place of the system's.
# Nothing outside the tree is touched, and a server started from it loads
# that cuckoo, whatever the system has installed.
#   tests/pgtree.sh PACKAGE_DIR TREE_DIR   prints the tree's bin directory
set -euo pipefail
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
pkg=$(realpath "$1") root=$2
bindir=$("$PG_CONFIG" --bindir) pkglibdir=$("$PG_CONFIG" --pkglibdir) sharedir=$("$PG_CONFIG" --sharedir)
rm -rf "$root"
mkdir -p "$root$bindir" "$root$pkglibdir" "$root$sharedir/extension"
cp -a "$bindir"/. "$root$bindir/"
for f in "$pkglibdir"/*; do
  case "$(basename "$f")" in cuckoo.so) ;; *) ln -s "$f" "$root$pkglibdir/" ;; esac
done
for f in "$sharedir"/*; do
  [ "$(basename "$f")" = extension ] || ln -s "$f" "$root$sharedir/"
done
for f in "$sharedir"/extension/*; do
  case "$(basename "$f")" in cuckoo.control|cuckoo--*) ;; *) ln -s "$f" "$root$sharedir/extension/" ;; esac
done
cp "$pkg$pkglibdir/cuckoo.so" "$root$pkglibdir/"
cp "$pkg$sharedir"/extension/cuckoo* "$root$sharedir/extension/"
chmod -R a+rX "$root"
echo "$root$bindir"
