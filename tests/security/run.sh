#!/usr/bin/env bash
# Security tests of issue 29 (what one unprivileged role sends costs only that
# role), on a throwaway cluster whose server processes are limited to 4 GiB of
# address space (ulimit -v), as the postgres user, against the installed
# extension:
#   cases.py   each case of the issue as a fixed test (PASS/FAIL, SQLSTATE, time);
#   fuzz.py    a seeded mutation fuzzer over every input that crosses the trust
#              boundary (text and binary cuckoofilter and cf_sharded_state, the
#              bytea states, sizing arguments), failing on crashes, restarts,
#              calls past their timeout and XX000.
#   run.sh                          cases, then the fuzzer (fixed seed and count)
#   run.sh cases [name-prefix...]   fixed cases only
#   run.sh fuzz --seed N --count M  the fuzzer (a failure prints its seed)
#   run.sh soak                     the fuzzer with new seeds for SOAK_MINUTES (default 60)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${FAULTS_VENV:-target/faults-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import testgres, hypothesis, pg8000" 2>/dev/null; then
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check testgres==1.17.1 hypothesis==6.170.17
fi
chmod -R a+rX "$VENV" tests/security
# RUST_BACKTRACE (set on some build machines) would make every ERROR raised
# in cuckoo capture a backtrace into its DETAIL (0.1 s each); a server started
# by an init system does not have it.
run() {
  if [ "$(id -un)" = postgres ]; then env -u RUST_BACKTRACE PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" -u "$@"
  else runuser -u postgres -- env -u RUST_BACKTRACE PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" -u "$@"; fi
}
# The seed and count `make test-security` runs: the same inputs every time.
SEED=${SECURITY_SEED:-29}
COUNT=${SECURITY_COUNT:-2000}
case "${1:-all}" in
  cases) shift; run tests/security/cases.py "$@" ;;
  fuzz) shift; run tests/security/fuzz.py "$@" ;;
  soak) run tests/security/fuzz.py --minutes "${SOAK_MINUTES:-60}" ;;
  all)
    status=0
    run tests/security/cases.py || status=1
    run tests/security/fuzz.py --seed "$SEED" --count "$COUNT" || status=1
    exit $status ;;
  *) echo "usage: $0 [all|cases [name...]|fuzz --seed N --count M|soak]" >&2; exit 2 ;;
esac
