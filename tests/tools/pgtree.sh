#!/usr/bin/env bash
# A private PostgreSQL installation tree: the system's server binaries copied
# (a copy, not a link: the server and pg_config find their libraries and shared
# files next to themselves, so the tree's pg_config reports the tree's
# directories), everything else linked, and the cuckoo files of a package
# directory (what `cargo pgrx package` builds) in place of the system's.
# Nothing outside the tree is touched: a server started from it loads the
# tree's cuckoo, and whatever is installed into the tree's directories (for
# example by `cargo pgrx test`, given the tree's pg_config) lands in the tree.
#   tests/tools/pgtree.sh PACKAGE_DIR TREE_DIR   prints the tree's bin directory
#   tests/tools/pgtree.sh - TREE_DIR             the same tree without any cuckoo files
set -euo pipefail
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
pkg=$1 root=$2
[ "$pkg" = - ] || pkg=$(realpath "$pkg")
bindir=$("$PG_CONFIG" --bindir) pkglibdir=$("$PG_CONFIG" --pkglibdir) sharedir=$("$PG_CONFIG" --sharedir)
includedir=$("$PG_CONFIG" --includedir)
rm -rf "$root"
mkdir -p "$root$bindir" "$root$pkglibdir" "$root$sharedir/extension" "$(dirname "$root$includedir")"
cp -a "$bindir"/. "$root$bindir/"
# Headers, read only (the tree's pg_config reports them under the tree).
ln -s "$includedir" "$root$includedir"
for f in "$pkglibdir"/*; do
  case "$(basename "$f")" in cuckoo.so) ;; *) ln -s "$f" "$root$pkglibdir/" ;; esac
done
for f in "$sharedir"/*; do
  [ "$(basename "$f")" = extension ] || ln -s "$f" "$root$sharedir/"
done
for f in "$sharedir"/extension/*; do
  case "$(basename "$f")" in cuckoo.control|cuckoo--*) ;; *) ln -s "$f" "$root$sharedir/extension/" ;; esac
done
if [ "$pkg" != - ]; then
  cp "$pkg$pkglibdir/cuckoo.so" "$root$pkglibdir/"
  cp "$pkg$sharedir"/extension/cuckoo* "$root$sharedir/extension/"
fi
chmod -R a+rX "$root"
# The tree's pg_config must report the tree, or installing into it would not.
[ "$("$root$bindir/pg_config" --pkglibdir)" = "$root$pkglibdir" ] \
  || { echo "pgtree: $root$bindir/pg_config does not report the tree" >&2; exit 1; }
echo "$root$bindir"
