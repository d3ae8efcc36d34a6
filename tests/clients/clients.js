// The README's recipes through node-postgres, written as an application writes
// them (a parameter for the key, no cast), compared with the same question asked
// in typed SQL (see clients.py). node-postgres sends every parameter untyped and
// arrays as array literals; every recipe must answer right.
const crypto = require('crypto');
const { Client } = require('pg');

const SQLTYPE = { ints: 'bigint', strs: 'text', uuids: 'uuid' };
function key(kind, n) {
  if (kind === 'ints') return n;
  if (kind === 'strs') return `k${n}`;
  const h = crypto.createHash('md5').update(`u${n}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
const RECIPES = [
  ['named probe', "SELECT cf_contains('{t}', {p}) AS r", (k) => key(k, 42)],
  ['named probe, absent', "SELECT cf_contains('{t}', {p}) AS r", (k) => key(k, 5000)],
  ['value probe', "SELECT cf_contains(f, {p}) AS r FROM filters WHERE name = '{t}'", (k) => key(k, 42)],
  ['value probe, absent', "SELECT cf_contains(f, {p}) AS r FROM filters WHERE name = '{t}'", (k) => key(k, 5000)],
  ['named batch', "SELECT cf_contains_each('{t}', {p}) AS r", (k) => [key(k, 41), key(k, 5001), key(k, 43)]],
  ['value batch', "SELECT cf_contains_each(f, {p}) AS r FROM filters WHERE name = '{t}'", (k) => [key(k, 41), key(k, 5001)]],
];
const fill = (sql, kind, p) => sql.replaceAll('{t}', kind).replaceAll('{p}', p);
const typedParam = (kind, arg) => `$1::${SQLTYPE[kind]}${Array.isArray(arg) ? '[]' : ''}`;

(async () => {
  const opts = { host: '/tmp/cuckoo-clients', port: 5488, database: 'clients', user: 'postgres' };
  const c = new Client(opts);
  await c.connect();
  const results = [];
  const ask = async (sql, arg) => (await c.query(sql, [arg])).rows[0].r;
  for (const kind of Object.keys(SQLTYPE)) {
    for (const [name, sql, make] of RECIPES) {
      const arg = make(kind);
      const want = await ask(fill(sql, kind, typedParam(kind, arg)), arg);
      let verdict;
      try {
        const got = await ask(fill(sql, kind, '$1'), arg);
        verdict = JSON.stringify(got) === JSON.stringify(want) ? 'ok' : `WRONG: ${JSON.stringify(got)}, typed SQL says ${JSON.stringify(want)}`;
      } catch (e) {
        verdict = `FAIL error: ${e.message.split('\n')[0].slice(0, 80)}`;
      }
      results.push(['node-pg', kind, name, verdict]);
    }
    const fresh = key(kind, 7003);
    let verdict;
    try {
      const added = await ask(`SELECT cf_insert('${kind}', $1) AS r`, fresh);
      const found = await ask(`SELECT cf_contains('${kind}', ${typedParam(kind, fresh)}) AS r`, fresh);
      verdict = added && found ? 'ok' : `WRONG: inserted ${added}, then found ${found}`;
    } catch (e) {
      verdict = `FAIL error: ${e.message.split('\n')[0].slice(0, 80)}`;
    }
    results.push(['node-pg', kind, 'named insert', verdict]);
  }
  await c.end();
  let failed = 0;
  for (const [driver, kind, name, verdict] of results) {
    if (!verdict.startsWith('ok')) failed += 1;
    console.log(`clients: ${driver.padEnd(8)} ${kind.padEnd(6)} ${name.padEnd(22)} ${verdict}`);
  }
  console.log(`clients: node-postgres: ${results.length - failed} of ${results.length} as required`);
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(2); });
