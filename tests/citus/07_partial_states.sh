# Citus 07 (sourced by run.sh; alone: bash tests/citus/run.sh 07):
#   the partial states shipped: one key under 100 characters, and each
#   shard's within the Rice code's bound (figures printed).
# Needs: 01 (table events).

# The partial states Citus ships: their text form, each distinct key once,
# Rice-coded: about (64 - log2 n + 1.5) / 6 characters per key, no rounding.
one=$(q coord -c "SELECT length(cf_sharded_state_trans(NULL, 1::bigint)::text)")
[ "$one" -lt 100 ] || fail "the partial state of one key is $one characters"
make_state_of
sizes=$(q coord -c "SELECT string_agg(result, ' ') FROM run_command_on_shards('events', \$\$SELECT concat_ws(':', count(DISTINCT account), length(state_of(account)::text), pg_column_size(cf_agg(account))) FROM %s\$\$)")
total_state=0 total_filter=0 total_keys=0
for s in $sizes; do
  IFS=: read -r n chars fbytes <<<"$s"
  bound=$(awk -v n="$n" 'BEGIN { printf "%d", n * (64 - log(n) / log(2) + 2) / 6 + 40 }')
  [ "$chars" -le "$bound" ] || fail "a shard's partial state of $n keys is $chars characters, over $bound"
  total_state=$((total_state + chars)) total_filter=$((total_filter + fbytes)) total_keys=$((total_keys + n))
done
ok "partial states: one key $one characters; $(wc -w <<<"$sizes") shards, $total_keys keys: $total_state characters shipped ($(awk -v a=$total_state -v k=$total_keys 'BEGIN { printf "%.2f", a / k }') per key), $(awk -v a=$total_state -v b=$total_filter 'BEGIN { printf "%.2f", a / b }')x the shards' own finished filters ($total_filter bytes)"
