# Concurrency 03 (sourced by run.sh; alone: bash tests/concurrency/run.sh 03):
#   creating filters until the region is full gives 53200 with the sizes,
#   leaves existing filters intact, and dropped space is reused.

echo "== exhaustion and reuse"
n=0
while out=$(psql -c "SELECT cf_create('fill$n', 1000000)" 2>&1); do n=$((n + 1)); [ $n -lt 100 ] || fail "region never filled"; done
grep -Eq 'not enough cuckoo shared memory for filter "fill[0-9]+": requested [0-9]+ bytes, [0-9]+ bytes free' <<<"$out" || fail "unexpected error: $out"
err=$(psql -v VERBOSITY=verbose -c "\set VERBOSITY verbose" -c "SELECT cf_create('fill$n', 1000000)" 2>&1 || true)
grep -q "53200" <<<"$err" || fail "exhaustion SQLSTATE: $err"
echo "$n filters of 1M keys fit; the next: $(grep -o 'requested.*' <<<"$out")"
psql -c "SELECT cf_insert('fill0', 7)" >/dev/null
[ "$(psql -c "SELECT cf_contains('fill0', 7)")" = t ] || fail "existing filter damaged by the failed create"
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_drop('fill$i')" >/dev/null; done
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_create('again$i', 1000000)" >/dev/null || fail "dropped space not reused ($i)"; done
echo "after dropping all $n, $n new ones fit again"
for i in $(seq 0 $((n - 1))); do psql -c "SELECT cf_drop('again$i')" >/dev/null; done
[ "$(psql -c "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
# (An if, not "grep && fail": the last command of a sourced scenario is its
# status, and a grep that finds nothing must not stop the run.)
if grep -E "PANIC|server process .* was terminated by signal" "$CLUSTER_DIR/server.log"; then fail "crash in the server log"; fi
