# Shared by the concurrency scenarios (tests/concurrency/NN_*.sh), sourced by
# tests/concurrency/run.sh: the cluster (/tmp/cuckoo-concurrency, port 5492,
# a 16 MB region), psql on it, and background sessions.
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cuckoo-concurrency} PGPORT=${PGPORT:-5492}
export CLUSTER_CONF="cuckoo.shared_memory = 16MB"
CLIENTS=${CUCKOO_CLIENTS:-4}
CAPACITY=${CUCKOO_STRESS_CAPACITY:-100000}
psql() { tests/tools/cluster.sh psql -q -At "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# Background sessions: `start_session LABEL FILE SED` runs FILE, edited by the sed
# script SED, in its own psql; `wait_sessions` waits for them all and fails,
# showing the log, if one failed.
sessions=(); labels=()
start_session() {
  sed "$3" "$2" > "/tmp/cuckoo-$1.sql"
  psql -f "/tmp/cuckoo-$1.sql" > "/tmp/cuckoo-$1.log" 2>&1 &
  sessions+=($!); labels+=("$1")
}
wait_sessions() {
  for i in "${!sessions[@]}"; do
    wait "${sessions[$i]}" || { cat "/tmp/cuckoo-${labels[$i]}.log"; fail "session ${labels[$i]}"; }
  done
  sessions=(); labels=()
}
