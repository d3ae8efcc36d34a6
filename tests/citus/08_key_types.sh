# Citus 08 (sourced by run.sh; alone: bash tests/citus/run.sh 08):
# Key types on Citus (issue 30, item 5): cf_sharded_agg over distributed tables
# gives cf_agg's filter over the same rows byte for byte (md5 of the text
# form, so the recorded key type too), for keys of every kind and every
# query shape: the whole table, GROUP BY the distribution column and
# another, HAVING, CTEs, a repartition join (also one that joins nothing),
# DISTINCT (in the call and in a subquery), ORDER BY in the call, an empty
# table, a WHERE that matches nothing, mostly empty shards, NULL keys, groups
# and a table part whose keys are all NULL, windows; with fpp and capacity
# too. cf_agg over a distributed table runs as in PostgreSQL alone, on the
# coordinator (Citus gathers the rows: it cannot ship cf_agg's internal
# state) or on the workers (a GROUP BY the distribution column), so its
# filter is the reference; a window's reference is cf_agg over each
# partition's rows (GROUP BY), for cf_sharded_agg and for cf_agg itself. (A
# filter made on a worker records that node's OID for an enum or an
# extension's type, such as citext, as cf_agg there does.) Each shape is one
# query per side for all key types; a difference names the shape, the group
# and the key types.

# Key columns: name, type, value for row g (NULL for every tenth row, and for
# every row of the groups grp = 0 and id % 40 = 7).
kcols=(k_int8 k_int4 k_int2 k_num k_text k_vc k_ch k_name k_bytea k_date k_ts k_uuid k_inet k_mood k_arr k_ci k_qch)
ktypes=(bigint integer smallint numeric text "varchar(20)" "char(8)" name bytea date timestamptz uuid inet keys_mood "int[]" citext '"char"')
kvals=("g * 7919 % 5000" "g % 3001" "(g % 30000)::smallint" "g % 3000 / 7.0" "'t' || g % 4000" "'v' || g % 4000" "'c' || g % 2000"
  "('n' || g % 2000)::name" "decode(md5((g % 3000)::text), 'hex')" "date '2026-01-01' + g % 900"
  "timestamptz '2026-01-01 00:00+00' + g % 7000 * interval '1 minute'" "md5((g % 3000)::text)::uuid"
  "('10.0.' || g % 200 || '.' || g % 250)::inet" "(enum_range(NULL::keys_mood))[1 + g % 3]" "ARRAY[g % 300, g % 7]" "'Ci' || g % 500"
  "chr(65 + g % 26)::\"char\"")
krows=8000
coldefs="id bigint, grp int" sel="g % 400, g % 9"
for i in "${!kcols[@]}"; do
  coldefs+=", ${kcols[$i]} ${ktypes[$i]}"
  sel+=", CASE WHEN g % 10 = 0 OR g % 9 = 0 OR g % 40 = 7 THEN NULL ELSE ${kvals[$i]} END"
done
q coord -c "CREATE EXTENSION IF NOT EXISTS citext" -c "CREATE TYPE keys_mood AS ENUM ('sad', 'ok', 'happy')" \
  -c "SET citus.shard_count = 32" \
  -c "CREATE TABLE keys_d ($coldefs)" -c "SELECT create_distributed_table('keys_d', 'id')" \
  -c "CREATE TABLE keys_e ($coldefs)" -c "SELECT create_distributed_table('keys_e', 'id')" \
  -c "CREATE TABLE keys_j (jid int)" -c "SELECT create_distributed_table('keys_j', 'jid', shard_count => 4, colocate_with => 'none')" \
  -c "CREATE TABLE keys_jn (jid int)" -c "SELECT create_distributed_table('keys_jn', 'jid', colocate_with => 'keys_j')" \
  -c "INSERT INTO keys_d SELECT $sel FROM generate_series(1, $krows) g" \
  -c "INSERT INTO keys_j SELECT g FROM generate_series(1, 4) g" -c "INSERT INTO keys_jn SELECT g FROM generate_series(101, 104) g" >/dev/null

# The aggregates of one shape, for every key column: F is the aggregate, X
# the extra arguments, P a column prefix, W a window clause.
aggs() {
  local f=$1 extra=${2:-} prefix=${3:-} over=${4:-} out="" c
  for c in "${kcols[@]}"; do
    out+="${out:+ || '|' || }coalesce(md5(($f($prefix$c$extra)$over)::text), 'null')"
  done
  echo "$out"
}
# Each shape: a name, the aggregate checked, then the query with
# placeholders {AGGS} (the aggregates of every key column; {AGGS:fpp},
# {AGGS:fppcap}, {AGGS:ordered}, {AGGS:distinct}, {AGGS:t} (columns of alias
# t) and {AGGS:window} (over window w) call them otherwise) and {F} (the
# aggregate). keys_e is empty; keys_j and keys_jn are distributed otherwise
# (joined to keys_d by repartitioning it), keys_jn on no value of grp.
shapes=(
  "whole table|cf_sharded_agg|SELECT {AGGS} FROM keys_d"
  "whole table with fpp and capacity|cf_sharded_agg|SELECT {AGGS:fppcap} FROM keys_d"
  "GROUP BY the distribution column|cf_sharded_agg|SELECT id, {AGGS} FROM keys_d GROUP BY id ORDER BY id"
  "GROUP BY another column (group 0: all keys NULL)|cf_sharded_agg|SELECT grp, {AGGS} FROM keys_d GROUP BY grp ORDER BY grp"
  "HAVING|cf_sharded_agg|SELECT grp, {AGGS} FROM keys_d GROUP BY grp HAVING cf_count({F}(k_int4)) % 2 = 0 OR count(*) > 2300 ORDER BY grp"
  "a CTE|cf_sharded_agg|WITH a AS MATERIALIZED (SELECT * FROM keys_d WHERE id % 3 = 1) SELECT {AGGS} FROM a"
  "a CTE that aggregates|cf_sharded_agg|WITH a AS (SELECT grp, {AGGS} AS h FROM keys_d GROUP BY grp) SELECT grp, h FROM a ORDER BY grp"
  "a repartition join|cf_sharded_agg|SELECT {AGGS:t} FROM keys_d t JOIN keys_j j ON t.grp = j.jid"
  "a repartition join of no rows|cf_sharded_agg|SELECT {AGGS:t} FROM keys_d t JOIN keys_jn j ON t.grp = j.jid"
  "DISTINCT keys|cf_sharded_agg|SELECT {AGGS:distinct} FROM keys_d"
  "ORDER BY in the call, with fpp|cf_sharded_agg|SELECT {AGGS:ordered} FROM keys_d"
  "a DISTINCT subquery|cf_sharded_agg|SELECT {AGGS} FROM (SELECT DISTINCT * FROM keys_d WHERE grp < 3) s"
  "an empty table|cf_sharded_agg|SELECT {AGGS} FROM keys_e"
  "an empty table, with fpp and capacity|cf_sharded_agg|SELECT {AGGS:fppcap} FROM keys_e"
  "a WHERE that matches nothing|cf_sharded_agg|SELECT {AGGS} FROM keys_d WHERE id < 0"
  "a WHERE that matches nothing, with fpp|cf_sharded_agg|SELECT {AGGS:fpp} FROM keys_d WHERE id < 0"
  "mostly empty shards|cf_sharded_agg|SELECT {AGGS} FROM keys_d WHERE id < 5"
  "rows whose keys are all NULL|cf_sharded_agg|SELECT {AGGS} FROM keys_d WHERE grp = 0"
  "groups of the distribution column whose keys are all NULL|cf_sharded_agg|SELECT id, {AGGS} FROM keys_d WHERE id % 40 = 7 GROUP BY id ORDER BY id"
  "a window over the distribution column|cf_sharded_agg|SELECT DISTINCT id, {AGGS:window} FROM keys_d WINDOW w AS (PARTITION BY id) ORDER BY id"
  "a window over another column|cf_sharded_agg|SELECT DISTINCT grp, {AGGS:window} FROM keys_d WINDOW w AS (PARTITION BY grp) ORDER BY grp"
  "cf_agg in a window over the distribution column|cf_agg|SELECT DISTINCT id, {AGGS:window} FROM keys_d WINDOW w AS (PARTITION BY id) ORDER BY id"
  "cf_agg in a window over another column|cf_agg|SELECT DISTINCT grp, {AGGS:window} FROM keys_d WINDOW w AS (PARTITION BY grp) ORDER BY grp"
)
# The reference query: cf_agg over the same rows; a window's, the groups of
# its partitions.
reference_of() {
  case $1 in
    *"window over the distribution column") echo "SELECT id, {AGGS} FROM keys_d GROUP BY id ORDER BY id" ;;
    *"window over another column") echo "SELECT grp, {AGGS} FROM keys_d GROUP BY grp ORDER BY grp" ;;
    *) echo "$2" ;;
  esac
}
# The query with its placeholders filled in: $1 the query, $2 the aggregate.
expand() {
  local sql=$1 f=$2 p r
  for p in "{AGGS}|" "{AGGS:fpp}|, 0.05" "{AGGS:fppcap}|, 0.01, 5000" "{AGGS:ordered}|, 0.01 ORDER BY id DESC" "{AGGS:distinct}||DISTINCT " "{AGGS:t}||t." "{AGGS:window}|||OVER"; do
    IFS='|' read -r key extra prefix over <<<"$p"
    r=$(aggs "$f" "$extra" "$prefix" "${over:+ OVER w}")
    sql=${sql//$key/$r}
  done
  p="{F}" r=$f; sql=${sql//$p/$r}
  echo "$sql"
}
checked=0 bad=()
for s in "${shapes[@]}"; do
  IFS='|' read -r name agg tmpl <<<"$s"
  dist=$(expand "$tmpl" "$agg")
  ref=$(expand "$(reference_of "$name" "$tmpl")" cf_agg)
  t0=$(date +%s%N)
  want=$(q coord -c "SET citus.enable_repartition_joins = on" -c "$ref" 2>&1) || fail "cf_agg, $name: $want"
  [ -n "$want" ] || fail "cf_agg, $name: no rows (the shape checks nothing)"
  checked=$((checked + $(wc -l <<<"$want")))
  if ! got=$(q coord -c "SET citus.enable_repartition_joins = on" -c "$dist" 2>&1); then
    bad+=("$name: $agg failed: $(head -1 <<<"$got")")
  elif [ "$got" != "$want" ]; then
    # Name the first row (group) that differs and its key types that do.
    diff_at=$(paste -d '\n' <(echo "$got") <(echo "$want") | awk -v names="${kcols[*]}" '
      NR % 2 == 1 { g = $0; next }
      !found && g != $0 {
        split(names, n, " "); ng = split(g, a, "|"); nw = split($0, b, "|"); off = ng - length(n); keys = ""
        for (i = 1; i <= (ng > nw ? ng : nw); i++) if (a[i] != b[i]) keys = keys (keys ? " " : "") (i - off >= 1 ? n[i - off] : "(group)")
        print "row " int(NR / 2) (off > 0 ? " (group " b[1] ")" : "") ", keys " keys; found = 1
      }')
    bad+=("$name: $agg differs, ${diff_at:-a different number of rows ($(wc -l <<<"$got") vs $(wc -l <<<"$want"))}")
  fi
  [ -z "${KEYS_TIMING:-}" ] || echo "  $name: $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
done
[ ${#bad[@]} = 0 ] || fail "cf_sharded_agg (cf_agg in a window) differs from cf_agg over the same rows in ${#bad[@]} of ${#shapes[@]} query shapes:$(printf '\n  %s' "${bad[@]}")"
ok "key types (issue 30, item 5): cf_sharded_agg equals cf_agg over the same rows byte for byte for ${#kcols[@]} key types (${ktypes[*]}) in ${#shapes[@]} query shapes ($checked result rows of ${#kcols[@]} filters)"
