# Picks the scenario files of a suite that keeps one scenario per file, for
# its run.sh (sourced): files NN_*.sh in the suite's directory (01, 02b, ...),
# run in the order of their names, in one shell, each finding what the earlier
# ones left; a scenario's "Needs: ID ... (what it takes)" line names the
# scenarios it takes something from.
#   scenarios_select DIR          every scenario of DIR
#   scenarios_select DIR ID...    those, after the scenarios they need (the ids
#                                 before any "(" in their "Needs:" lines, and
#                                 theirs), each once
# leaves the files, in order, in the array scenario_files.
# The runner sources each file under set -e: a file's last command must
# succeed (source returns its status), so a file does not end in "cond && fail".
scenarios_select() {
  local dir=$1 id
  shift
  scenario_ids=()
  if [ $# -eq 0 ]; then
    mapfile -t scenario_files < <(printf '%s\n' "$dir"/[0-9]*.sh | LC_ALL=C sort)
    return
  fi
  for id in "$@"; do scenarios_want "$dir" "$id"; done
  mapfile -t scenario_files < <(for id in "${scenario_ids[@]}"; do scenarios_file "$dir" "$id"; done | LC_ALL=C sort)
}
# The file of scenario $2 (01, 04b, ...) in directory $1.
scenarios_file() {
  local f
  for f in "$1/$2"_*.sh; do [ -f "$f" ] && { echo "$f"; return; }; done
  echo "no scenario $2 in $1" >&2
  return 1
}
# Adds scenario $2 of directory $1 to scenario_ids, after those it needs.
scenarios_want() {
  local file dep have
  file=$(scenarios_file "$1" "$2") || exit 2
  for dep in $(sed -n 's/^# Needs: \([^(]*\).*/\1/p' "$file"); do scenarios_want "$1" "$dep"; done
  for have in "${scenario_ids[@]}"; do [ "$have" = "$2" ] && return; done
  scenario_ids+=("$2")
}
# In a runner's EXIT trap, with the exit status $1: names the scenario that
# failed (label $2: "durability", "citus", ...), if one was running.
scenarios_report() {
  [ "$1" = 0 ] || [ -z "${scenario:-}" ] || echo "$2: scenario $scenario failed" >&2
}
