# Shared by the benchmark scripts (sourced).
# The median of the numbers on standard input, separated by spaces or lines.
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# ---- an earlier release beside this one --------------------------------------
# Two clusters in one run: "old" (an earlier release, built once from this
# repository's history by tests/tools/old-build.sh and run from a private tree by
# tests/tools/pgtree.sh) and "new" (the installed extension), each in its own
# directory under $work, stopped and removed at exit. Callers set PGBIN.
#   pair_init NAME VERSION COMMIT OLD_PORT NEW_PORT
#   pair_start V [EXTRA_CONF]   initdb, settings, start (V: old or new)
#   dir V; q V PSQL_ARGS...; lsn V; diff_lsn V FROM TO; ratio A B
as_pg() { runuser -u postgres -- "$@"; }
pair_init() { # name version commit old_port new_port
  work=$(mktemp -d "/tmp/cuckoo-$1-bench.XXXXXX")
  chmod 755 "$work"
  local old_pkg old_bin
  old_pkg=$(bash tests/tools/old-build.sh "$2" "$3")
  old_bin=$(bash tests/tools/pgtree.sh "$old_pkg" "$work/tree${2//./}")
  declare -gA BIN=([old]=$old_bin [new]=$PGBIN) PORT=([old]=$4 [new]=$5)
  trap pair_cleanup EXIT
}
dir() { echo "$work/$1"; }
q() { local v=$1; shift; "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$(dir "$v")" -p "${PORT[$v]}" -U postgres "$@"; }
pair_cleanup() {
  for v in old new; do
    # (A bench may have left cuckoo/ unwritable.)
    [ -d "$(dir "$v")/data/cuckoo" ] && chmod 700 "$(dir "$v")/data/cuckoo"
    [ -d "$(dir "$v")/data" ] && as_pg "${BIN[$v]}/pg_ctl" -D "$(dir "$v")/data" -m immediate -w stop >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
pair_start() { # version [extra settings]
  local v=$1 d
  d=$(dir "$v")
  install -d -o postgres -g postgres "$d"
  as_pg "${BIN[$v]}/initdb" -D "$d/data" -A trust -U postgres >/dev/null
  cat >> "$d/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cuckoo'
port = ${PORT[$v]}
listen_addresses = ''
unix_socket_directories = '$d'
shared_buffers = 256MB
jit = off
${2:-}
CONF
  as_pg "${BIN[$v]}/pg_ctl" -D "$d/data" -l "$d/server.log" -w start >/dev/null
}
lsn() { q "$1" -c "SELECT pg_current_wal_insert_lsn()"; }
diff_lsn() { q "$1" -c "SELECT pg_wal_lsn_diff('$3', '$2')::bigint"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.3g", a / b }'; }
