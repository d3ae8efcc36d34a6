"""A seeded mutation fuzzer over every input of cuckoo that crosses the trust
boundary, sent by an unprivileged role (issue 29).

It starts from valid inputs made on the cluster: the serialized forms of
`cuckoofilter` values of several sizes, rates, key types and formats (format 1
from 0.1.0's fixtures, format 2, format 3 of unions and of a snapshot of a
filter that grew, a crafted value that grows); the compact forms of
`cf_sharded_state`; and the bytea states the 0.5.0-0.8.0 functions take. Each
iteration mutates one of them (bit flips, boundary bytes, truncation,
extension, duplicated chunks, length and count fields set to 0, 1, 2^31-1,
2^32-1, 2^63-1 at aligned offsets, LEB128 numbers spliced in) and sends it
through every input path of its kind:

    cuckoofilter       text (cf1:/cf2:/cf3:) and binary (COPY ... FORMAT binary)
    cf_sharded_state   text (cs1:) and binary (COPY)
    bytea states       cf_sharded_final, cf_sharded_combine, cf_sharded_trans

and, when accepted, through every reader: output (text, binary, and each read
back), cf_info, cf_count, probes of several key types, the planner's estimate,
cf_insert, cf_delete, cf_union with itself, cf_publish and the by-name calls on
the published filter; a state also through its final, combine and transition
functions and cf_sharded_agg. One iteration in twenty instead calls a function
with extreme sizing arguments (capacity, fpp, expansion, key counts).

Every call is one statement as the tenant under statement_timeout (3 s). The
SQLSTATEs are counted. A failure is: a backend that died or a server restart,
a lost connection, a call past statement_timeout + 20 s, an XX000, an error
text showing a memory address, or a value or state that input accepted and a
reader that must accept it refused. The fuzzer goes on after a failure
(reconnecting) and reports every class of failure with its smallest input.
Each iteration draws from its own generator (seed, iteration), so
`fuzz.py --seed N --iteration I` replays one iteration exactly.

    fuzz.py --seed 29 --count 3000
    fuzz.py --seed 29 --iteration 1234 [--verbose]
    fuzz.py --minutes 60            (new seeds until time is up)
"""

import argparse
import base64
import collections
import io
import os
import random
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (HANG_HASHES, HANG_STATE, STATEMENT_TIMEOUT, TIMEOUT_SLACK, Cluster, Failure, compact_with_key,  # noqa: E402
                     copy_binary, full_growth_value, int4, sharded_bytea)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LATE = 2.0  # a call ending this long after statement_timeout is reported (not a failure)
HEALTH_EVERY = 25
CHECKPOINT_EVERY = 250

BOUNDARY_BYTES = [0x00, 0xFF, 0x7F, 0x80, 0x01]
FIELD_VALUES = [0, 1, 2, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1]
VARINT_VALUES = [0, 1, 2**31 - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1, 2**57]

CAPACITIES = [0, -1, 1, 2, 1000, 1000000, 150000000, 1000000000, 2**31 - 1, 2**32 - 1, 2**32, 4000000000, 2**63 - 1, -2**63]
FPPS = [0.0, -1.0, 1.0, 0.999999, 1e-300, 5e-324, float("nan"), float("inf"), float("-inf"), 0.5, 0.1, 0.002, 1e-6, 1e-9, 1e-12, 2.0]
EXPANSIONS = [-1, 0, 1, 2, 4, 64, 65, 2**31 - 1]
COUNTS = [0, 1, 2, 100, 10000, 100000]


def f8(x):
    return f"'{x!r}'::float8" if x == x else "'NaN'::float8"


class Failures:
    """Failure classes, each with its count and smallest example."""

    def __init__(self, seed, outdir, quiet=False):
        self.seed = seed
        self.outdir = outdir
        self.quiet = quiet
        self.classes = {}
        self.order = []

    def add(self, kind, call, state, it, inp, sql, detail):
        key = (kind, call, state)
        size = len(inp.data) if inp is not None else 0
        c = self.classes.get(key)
        if c is None:
            c = self.classes[key] = {"count": 0, "size": None}
            self.order.append(key)
            if not self.quiet:
                    print(f"FAIL  seed {self.seed} iteration {it}: {kind}: {call} -> {state}: {detail}", flush=True)
        c["count"] += 1
        if c["size"] is None or size < c["size"]:
            c.update(size=size, it=it, seed=self.seed, input=inp, sql=sql, detail=detail)
            if inp is not None and self.outdir:
                name = f"{kind}-{call}-{state}".replace("/", "_").replace(" ", "_")
                with open(os.path.join(self.outdir, name + ".bin"), "wb") as f:
                    f.write(inp.data)

    def __bool__(self):
        return bool(self.classes)

    def report(self):
        for key in self.order:
            kind, call, state = key
            c = self.classes[key]
            inp = c["input"]
            print(f"  [{c['count']}x] {kind}: {call} -> {state}")
            print(f"      replay: tests/security/run.sh fuzz --seed {c['seed']} --iteration {c['it']} --verbose")
            print(f"      {c['detail']}")
            print(f"      sql: {c['sql'][:300]}")
            if inp is not None:
                print(f"      input ({inp.kind}, {len(inp.data)} bytes, from {inp.origin}, {inp.ops}): {inp.show(400)}")


class Input:
    def __init__(self, kind, data, origin, ops):
        self.kind = kind  # filter | state | bytea
        self.data = bytes(data)
        self.origin = origin
        self.ops = ops

    def show(self, n):
        if self.kind == "filter":
            t = self.text()
        elif self.kind == "state":
            t = "cs1:" + base64.b64encode(self.data).decode()
        else:
            t = "\\x" + self.data.hex()
        return t if len(t) <= n else t[:n] + f"... ({len(t)} characters)"

    def text(self, prefix=None):
        if prefix is None:
            prefix = {1: "cf1:", 3: "cf3:"}.get(self.data[4] if len(self.data) > 4 else 2, "cf2:")
        return prefix + base64.b64encode(self.data).decode()


KEY_KINDS = [0, 1, 2, 3, 4, 5, 255]
KEY_OIDS = [0, 1, 20, 25, 600, 16383, 16384, 99999, 2**32 - 1]


def key_type_at(b, kind):
    """Where the key type (kind byte, OID) of a serialized input is, as
    (kind offset, OID offset, OID is LEB128), or None."""
    if kind == "filter" and len(b) >= 16 and b[:4] == b"CKOF":
        if b[4] == 2:
            return 10, 12, False
        if b[4] == 3 and len(b) > 7:
            start = -(-(24 + 8 * b[6]) // 8) * 8
            if len(b) >= start + 16:
                return start + 10, start + 12, False
    elif kind == "bytea" and len(b) >= 36 and b[:4] == b"CFS2":
        return 28, 32, False
    elif kind == "state" and len(b) >= 6 and b[:3] == b"CS\x01":
        at = 4 + (8 if b[3] & 1 else 0)
        if b[3] & 2:
            while at < len(b) and b[at] & 0x80:
                at += 1
            at += 1
        if at + 1 < len(b):
            return at, at + 1, True
    return None


def mutate(rng, data, kind, type_oids=()):
    """1-3 mutations of `data`; returns (bytes, description)."""
    b = bytearray(data)
    ops = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        op = rng.choice(["flip", "flip", "byte", "byte", "small", "small", "truncate", "extend", "duplicate", "field", "field", "field", "varint", "keytype"])
        n = len(b)
        # Header bytes are where the lengths and counts are: most changes go there.
        def pos(align=1):
            hi = n if rng.random() < 0.3 or n < 64 else min(n, 64)
            if hi <= 0:
                return 0
            return (rng.randrange(hi) // align) * align
        if op == "flip" and n:
            p = pos()
            bit = rng.randrange(8)
            b[p] ^= 1 << bit
            ops.append(f"flip bit {bit} of byte {p}")
        elif op == "byte" and n:
            p = pos()
            v = rng.choice(BOUNDARY_BYTES)
            b[p] = v
            ops.append(f"byte {p} = {v:#x}")
        elif op == "keytype" and key_type_at(b, kind):
            # the key type a value or state names: kinds and OIDs that are
            # not types, have no hash function, or are types of this database
            at_kind, at_oid, leb = key_type_at(b, kind)
            k = rng.choice(KEY_KINDS)
            oid = rng.choice(KEY_OIDS + list(type_oids))
            b[at_kind] = k
            if leb:
                end = at_oid
                while end < len(b) and b[end] & 0x80:
                    end += 1
                enc = bytearray()
                x = oid
                while x >= 0x80:
                    enc.append((x & 0x7F) | 0x80)
                    x >>= 7
                enc.append(x)
                b[at_oid:end + 1] = enc
            else:
                b[at_oid:at_oid + 4] = oid.to_bytes(4, "little")
            ops.append(f"key type kind {k} OID {oid}")
        elif op == "small" and n:
            # kinds, versions, flags, counts of tables, slots, fingerprint bits
            p = pos()
            v = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 31, 32, 33, 63, 64, 65, 255])
            b[p] = v
            ops.append(f"byte {p} = {v}")
        elif op == "truncate" and n:
            p = rng.randrange(n) if rng.random() < 0.5 else max(0, n - rng.randint(1, 16))
            del b[p:]
            ops.append(f"truncate to {p}")
        elif op == "extend":
            k = rng.choice([1, 7, 8, 64, 1000])
            fill = rng.choice(["zero", "random", "ff"])
            add = bytes(k) if fill == "zero" else (b"\xff" * k if fill == "ff" else bytes(rng.randrange(256) for _ in range(k)))
            b += add
            ops.append(f"append {k} {fill} bytes")
        elif op == "duplicate" and n:
            a = rng.randrange(n)
            ln = min(n - a, rng.choice([1, 8, 48, 256, n]))
            at = rng.randrange(n + 1)
            b[at:at] = b[a:a + ln]
            ops.append(f"insert a copy of bytes {a}..{a + ln} at {at}")
        elif op == "field" and n >= 4:
            width = rng.choice([4, 8])
            p = pos(width)
            if p + width > n:
                p = max(0, ((n - width) // width) * width)
            v = rng.choice(FIELD_VALUES) & ((1 << (8 * width)) - 1)
            b[p:p + width] = v.to_bytes(width, "little")
            ops.append(f"{width}-byte field at {p} = {v}")
        elif op == "varint":
            p = pos()
            v = rng.choice(VARINT_VALUES)
            enc = bytearray()
            x = v
            while x >= 0x80:
                enc.append((x & 0x7F) | 0x80)
                x >>= 7
            enc.append(x)
            if rng.random() < 0.5:
                b[p:p + len(enc)] = enc
                ops.append(f"LEB128 {v} over byte {p}")
            else:
                b[p:p] = enc
                ops.append(f"LEB128 {v} inserted at {p}")
    return bytes(b), "; ".join(ops) or "unchanged"


class Fuzzer:
    def __init__(self, cluster, outdir, verbose=False):
        self.cl = cluster
        self.outdir = outdir
        self.verbose = verbose
        self.hist = collections.Counter()
        self.by_call = collections.defaultdict(collections.Counter)
        self.xx000 = collections.Counter()
        self.late = collections.Counter()
        self.time_by_call = collections.Counter()
        self.warnings = None
        self.calls = 0
        self.accepted = collections.Counter()
        self.conn = None
        self.inject = {}
        self.type_oids = []
        self.stored = False
        self.failures = None
        self.seed = None
        self.it = None
        self.inp = None

    # ----- the tenant's connection and calls ------------------------------------------

    def tenant(self):
        if self.conn is None or self.conn.dead:
            self.conn = self.cl.tenant()
        return self.conn

    def call(self, name, sql, must=False, stream=None, **params):
        """One statement as the tenant; classified; failures recorded. `must`:
        a reader of something input accepted, which must succeed."""
        c = self.tenant()
        if self.inject.get(self.it) and name != "cleanup":
            # --inject-faults: the harness itself kills or stops the backend,
            # to show that the fuzzer reports it and goes on.
            os.kill(c.pid, self.inject.pop(self.it))
        o = c.call(sql, stream=stream, **params)
        if o.ok and (sql.startswith("INSERT") or sql.startswith("COPY fz FROM") or sql.startswith("COPY fs FROM")):
            self.stored = True
        self.calls += 1
        self.hist[o.state] += 1
        self.by_call[name][o.state] += 1
        if self.verbose:
            print(f"    {name}: {o.describe()}")
        F = self.failures
        if o.hung:
            how = self.cl.end_backend(c.pid)
            F.add("call past statement_timeout + 20 s (ignores cancel/timeout)", name, "HUNG", self.it, self.inp, sql, f"{o.describe()}; ended by {how}")
            self.conn = None
        elif o.lost:
            problems = self.cl.health()
            if problems:
                F.add("backend crash / server restart", name, "LOST", self.it, self.inp, sql, f"{o.describe()}; " + "; ".join(problems))
            else:
                F.add("lost connection", name, "LOST", self.it, self.inp, sql, o.describe())
            self.conn = None
        else:
            if o.sqlstate == "XX000":
                self.xx000[(o.message or "")[:200]] += 1
                F.add("XX000 internal error", name, "XX000", self.it, self.inp, sql, o.describe())
            if any("pgrx_pg_sys::" in t or "panicking" in t for t in o.texts()):
                self.warnings.add("error text carries a Rust backtrace (RUST_BACKTRACE is set for the server)", "(any call)", o.state, self.it, self.inp, sql,
                                  (o.message or "") + " / DETAIL starts: " + (o.detail or "")[:120].replace("\n", " "))
            addr = o.heap_address()
            if addr:
                F.add("error text shows a memory address", name, o.state, self.it, self.inp, sql, addr)
            if must and not o.ok and o.sqlstate not in ("57014", "53200"):  # time and memory are limits, not refusals
                F.add("accepted by input, refused by a reader", name, o.state, self.it, self.inp, sql, o.describe())
            elif not must and o.sqlstate == "XX001":
                F.add("accepted by input, then called corrupted", name, o.state, self.it, self.inp, sql, o.describe())
            timeout = c.timeout or STATEMENT_TIMEOUT
            if o.elapsed > timeout + LATE:
                self.late[name] += 1
                self.warnings.add(f"ended {LATE:g}+ s after statement_timeout (not a failure)", name, o.state, self.it, self.inp, sql, o.describe())
        self.time_by_call[name] += o.elapsed
        return o

    # ----- seeds ---------------------------------------------------------------------------

    def make_seeds(self):
        su = self.cl.su()
        su.run("CREATE FUNCTION sec_state_bytes(cf_sharded_state, cf_sharded_state) RETURNS bytea"
               " AS '$libdir/cuckoo', 'cf_sharded_combine' LANGUAGE C IMMUTABLE")
        su.run("REVOKE ALL ON FUNCTION sec_state_bytes(cf_sharded_state, cf_sharded_state) FROM PUBLIC")
        su.run("CREATE AGGREGATE sec_state_agg(anyelement) (SFUNC = cf_sharded_state_trans, STYPE = cf_sharded_state)")
        su.run("CREATE AGGREGATE sec_state_agg(anyelement, float8, bigint) (SFUNC = cf_sharded_state_trans, STYPE = cf_sharded_state)")
        t = self.cl.tenant(timeout=60)
        t.run("CREATE TYPE fz_mood AS ENUM ('a', 'b', 'c', 'd')")
        t.run("CREATE TABLE fz (id int, v cuckoofilter)")
        t.run("CREATE TABLE fs (id int, s cf_sharded_state)")
        t.run("CREATE TABLE fz_keys (k bigint)")
        t.run("INSERT INTO fz_keys SELECT generate_series(1, 200)")
        filters = []

        def fval(label, expr):
            filters.append((label, bytes(t.one(f"SELECT cuckoofilter_send({expr})"))))
        for n in (1, 7, 100, 2000):
            for fpp in (0.5, 0.05, 0.002, 1e-5):
                if n == 2000 and fpp == 1e-5:
                    continue
                fval(f"cf_agg(bigint) n={n} fpp={fpp}", f"(SELECT cf_agg(g::bigint, {fpp}) FROM generate_series(1, {n}) g)")
        for label, expr in [
            ("cf_empty(100, 0.01)", "cf_empty(100, 0.01)"),
            ("cf_empty(1000, 0.002, bigint)", "cf_empty(1000, 0.002, 'bigint')"),
            ("cf_empty(50, 0.5, text)", "cf_empty(50, 0.5, 'text')"),
            ("cf_agg(text)", "(SELECT cf_agg('k' || g) FROM generate_series(1, 50) g)"),
            ("cf_agg(uuid)", "(SELECT cf_agg(md5(g::text)::uuid) FROM generate_series(1, 50) g)"),
            ("cf_agg(int4) capacity 3000", "(SELECT cf_agg(g::int4, 0.002, 3000) FROM generate_series(1, 100) g)"),
            ("cf_agg(numeric)", "(SELECT cf_agg(g::numeric / 3) FROM generate_series(1, 40) g)"),
            ("cf_agg(date)", "(SELECT cf_agg(date '2020-01-01' + g) FROM generate_series(1, 40) g)"),
            ("cf_agg(enum)", "(SELECT cf_agg(m) FROM unnest(enum_range(NULL::fz_mood)) m)"),
            ("cf_agg(int[] keys)", "(SELECT cf_agg(ARRAY[g, g + 1]) FROM generate_series(1, 30) g)"),
            ("union of 2 shapes", "(SELECT cf_union((SELECT cf_agg(g) FROM generate_series(1, 100) g), (SELECT cf_agg(g) FROM generate_series(1, 1000) g)))"),
            ("union of 3 shapes", "(SELECT cf_union(cf_union((SELECT cf_agg(g, 0.5) FROM generate_series(1, 10) g), (SELECT cf_agg(g) FROM generate_series(1, 300) g)), cf_empty(20, 0.1)))"),
        ]:
            fval(label, expr)
        t.run("SELECT cf_create('fz_seed_grow', 50, durable => false)")
        t.run("SELECT cf_insert('fz_seed_grow', ARRAY(SELECT generate_series(1, 600))::bigint[])")
        fval("snapshot of a filter that grew", "cf_snapshot('fz_seed_grow')")
        t.run("SELECT cf_drop('fz_seed_grow')")
        filters.append(("crafted full table that grows by 64", full_growth_value(100)))
        with open(os.path.join(REPO, "tests/pg_regress/data/v1_values.tsv")) as f:
            for line in f:
                n, label, text = line.rstrip("\n").split("\t")
                if len(text) < 2000:
                    filters.append((f"0.1.0 value: {label}", base64.b64decode(text[4:])))

        states = []

        def sval(label, expr):
            states.append((label, bytes(t.one(f"SELECT cf_sharded_state_send({expr})"))))
        sval("cf_sharded_key(bigint)", "cf_sharded_key(42::bigint)")
        sval("cf_sharded_key(text, fpp, capacity)", "cf_sharded_key('x'::text, 0.01, 1000)")
        for n in (1, 5, 100, 3000):
            sval(f"state of {n} bigint keys", f"(SELECT sec_state_agg(g::bigint) FROM generate_series(1, {n}) g)")
        sval("state with fpp and capacity", "(SELECT sec_state_agg(g::bigint, 0.01, 5000) FROM generate_series(1, 50) g)")
        sval("state of text keys", "(SELECT sec_state_agg('k' || g) FROM generate_series(1, 30) g)")
        sval("state of uuid keys", "(SELECT sec_state_agg(md5(g::text)::uuid) FROM generate_series(1, 30) g)")
        sval("state of enum keys (named type)", "(SELECT sec_state_agg(m) FROM unnest(enum_range(NULL::fz_mood)) m)")
        sval("state of issue 29 (9 colliding hashes)", f"'{HANG_STATE}'::cf_sharded_state")
        v1 = bytearray(compact_with_key(states[0][1], 0, 0))
        v1[3] = 4
        states.append(("0.5.0 state (flag v1)", bytes(v1)))

        byteas = []
        for label, expr in [("bytea of 1 key", "cf_sharded_key(42::bigint)"),
                            ("bytea of 100 keys", "(SELECT sec_state_agg(g::bigint) FROM generate_series(1, 100) g)"),
                            ("bytea with fpp and capacity", "(SELECT sec_state_agg(g::bigint, 0.01, 5000) FROM generate_series(1, 20) g)"),
                            ("bytea of text keys", "(SELECT sec_state_agg('k' || g) FROM generate_series(1, 10) g)")]:
            byteas.append((label, bytes(su.one(f"SELECT sec_state_bytes({expr}, NULL)"))))
        byteas.append(("bytea from cf_sharded_trans", bytes(t.one("SELECT cf_sharded_trans(cf_sharded_trans(NULL::bytea, 1::bigint), 2::bigint)"))))
        byteas.append(("bytea of issue 29 (9 colliding hashes)", sharded_bytea(HANG_HASHES)))
        byteas.append(("0.5.0 bytea (CFS1)", b"CFS1" + struct.pack("<dQQ", 0.0, 0, 2) + struct.pack("<QQ", 0x1111, 0x2222)))
        # Each seed must be accepted as it is.
        for label, data in filters:
            o = t.call("SELECT cf_count(CAST(:t AS cuckoofilter))", t=Input("filter", data, label, "").text())
            if not o.ok:
                raise Failure(f"seed {label} is not accepted: {o.describe()}")
        for label, data in states:
            o = t.call("SELECT CAST(:t AS cf_sharded_state) IS NULL", t="cs1:" + base64.b64encode(data).decode())
            if not o.ok:
                raise Failure(f"seed {label} is not accepted: {o.describe()}")
        # OIDs of types of this database, for the key type mutations: an
        # enum, a type without a hash function, a domain, a composite
        t.run("CREATE DOMAIN fz_dom AS bigint")
        t.run("CREATE TYPE fz_pair AS (a int, b int)")
        self.type_oids = [int(x) for x, in t.run("SELECT oid FROM pg_type WHERE typname IN ('fz_mood', 'fz_dom', 'fz_pair', 'point', 'json')")]
        su.close()
        t.close()
        self.seeds = {"filter": filters, "state": states, "bytea": byteas}
        return {k: len(v) for k, v in self.seeds.items()}

    # ----- one iteration ---------------------------------------------------------------------

    def iteration(self, seed, it):
        rng = random.Random(f"{seed}:{it}")
        self.seed, self.it, self.inp = seed, it, None
        if rng.random() < 0.05:
            self.sizing(rng)
            return
        kind = rng.choices(["filter", "state", "bytea"], weights=[45, 30, 25])[0]
        origin, data = rng.choice(self.seeds[kind])
        mutated, ops = mutate(rng, data, kind, self.type_oids)
        self.inp = inp = Input(kind, mutated, origin, ops)
        if self.verbose:
            print(f"iteration {it}: {kind} from {origin}: {ops}\n  {inp.show(300)}")
        getattr(self, "send_" + kind)(rng, inp)
        if self.stored:
            self.call("cleanup", "DELETE FROM fz")
            self.call("cleanup", "DELETE FROM fs")
            self.stored = False

    def send_filter(self, rng, inp):
        text = inp.text()
        if rng.random() < 0.1:
            text = inp.text(rng.choice(["cf1:", "cf2:", "cf3:", "cf4:", "CF2:", ""]))
        if rng.random() < 0.1:
            p = rng.randrange(len(text) + 1)
            text = text[:p] + rng.choice(["=", "\n", " ", "-", "_", "==", "A", "\u00e9"]) + text[p + rng.randint(0, 1):]
        ot = self.call("filter input text", "INSERT INTO fz VALUES (1, CAST(:t AS cuckoofilter))", t=text)
        ob = self.call("filter input binary", "COPY fz FROM STDIN (FORMAT binary)", stream=copy_binary([[int4(2), inp.data]]))
        self.accepted["filter text"] += ot.ok
        self.accepted["filter binary"] += ob.ok
        if ot.ok != ob.ok and text == inp.text():
            self.hist["(text and binary input disagree)"] += 1
        if ot.ok:
            self.call("planner estimate", "EXPLAIN SELECT count(*) FROM fz_keys WHERE cf_contains(CAST(:t AS cuckoofilter), k)", t=text)
        if ot.ok or ob.ok:
            self.read_value(rng, 1 if ot.ok else 2)

    def send_state(self, rng, inp):
        ot = self.call("state input text", "INSERT INTO fs VALUES (1, CAST(:t AS cf_sharded_state))", t="cs1:" + base64.b64encode(inp.data).decode())
        ob = self.call("state input binary", "COPY fs FROM STDIN (FORMAT binary)", stream=copy_binary([[int4(2), inp.data]]))
        self.accepted["state text"] += ot.ok
        self.accepted["state binary"] += ob.ok
        if ot.ok or ob.ok:
            self.read_state(rng, 1 if ot.ok else 2)

    def send_bytea(self, rng, inp):
        b = inp.data
        o = self.call("cf_sharded_final(bytea)", "INSERT INTO fz SELECT 1, cf_sharded_final(:b)", b=b)
        self.accepted["bytea final"] += o.ok
        self.call("cf_sharded_combine(bytea, bytea)", "SELECT cf_sharded_combine(:b, :b) IS NULL", b=b)
        self.call("cf_sharded_combine(bytea, NULL)", "SELECT cf_sharded_final(cf_sharded_combine(:b, NULL)) IS NULL", b=b)
        self.call("cf_sharded_trans(bytea, key)", "SELECT cf_sharded_trans(:b, 7::bigint) IS NULL", b=b)
        self.call("cf_sharded_trans(bytea, key) final", "SELECT cf_sharded_final(cf_sharded_trans(:b, 'x'::text, 0.01)) IS NULL", b=b)
        if o.ok:
            self.read_value(rng, 1)

    # ----- readers --------------------------------------------------------------------------------

    def read_value(self, rng, id):
        w = f"FROM fz WHERE id = {id}"
        info = self.call("cf_info", f"SELECT (cf_info(v) ->> 'bytes')::bigint {w}", must=True)
        # A large value (a mutated capacity can make one of hundreds of MB)
        # goes through the readers that must accept it and the riskiest
        # others only: each call on it may take the whole statement timeout.
        large = info.ok and info.rows and (info.rows[0][0] or 0) > 4 << 20
        # (lengths only: a large value's output would be timed on the client)
        must = [("value output text", f"SELECT length(v::text) {w}"),
                ("value output binary", f"SELECT length(cuckoofilter_send(v)) {w}"),
                ("value text read back", f"SELECT CAST(v::text AS cuckoofilter) IS NULL {w}"),
                ("cf_count", f"SELECT cf_count(v) {w}")]
        for name, sql in must:
            self.call(name, sql, must=True)
        # binary output read back through COPY
        out = io.BytesIO()
        o = self.call("value COPY TO binary", f"COPY (SELECT 9, v {w}) TO STDOUT (FORMAT binary)", must=True, stream=out)
        if o.ok:
            self.call("value binary read back", "COPY fz FROM STDIN (FORMAT binary)", must=True, stream=io.BytesIO(out.getvalue()))
        readers = [("cf_contains bigint", f"SELECT cf_contains(v, 42::bigint) {w}"),
                   ("cf_contains text", f"SELECT cf_contains(v, 'abc') {w}"),
                   ("cf_contains int4", f"SELECT cf_contains(v, 7) {w}"),
                   ("cf_contains array", f"SELECT cf_contains(v, ARRAY[1, 2, 3, NULL]::bigint[]) {w}"),
                   ("cf_contains_each", f"SELECT cf_contains_each(v, ARRAY['1', 'x']) {w}"),
                   ("cf_contains_key", f"SELECT cf_contains_key(v, ARRAY[1, 2]) {w}"),
                   ("cf_contains on rows", f"SELECT count(*) FROM fz_keys, (SELECT v {w}) f WHERE cf_contains(f.v, fz_keys.k)"),
                   ("cf_count key", f"SELECT cf_count(v, 42::bigint) {w}"),
                   ("cf_insert", f"SELECT cf_insert(v, 12345::bigint) IS NULL {w}"),
                   ("cf_insert many", f"SELECT cf_insert(v, ARRAY(SELECT generate_series(1, 300))::bigint[]) IS NULL {w}"),
                   ("cf_insert text", f"SELECT cf_insert(v, 'k1') IS NULL {w}"),
                   ("cf_delete", f"SELECT cf_delete(v, 1::bigint) IS NULL {w}"),
                   ("cf_union self", f"SELECT cf_union(v, v) IS NULL {w}"),
                   ("cf_union seed", f"SELECT cf_union(v, cf_empty(100, 0.01)) IS NULL {w}"),
                   ("cf_union_agg", f"SELECT cf_union_agg(v) IS NULL FROM fz, generate_series(1, 3) WHERE id = {id}")]
        if large:
            readers = [r for r in readers if r[0] in ("cf_contains bigint", "cf_insert", "cf_union self")]
        for name, sql in readers:
            self.call(name, sql)
        durable = rng.random() < 0.1
        p = self.call("cf_publish", f"SELECT cf_publish('fz_pub', v, {'true' if durable else 'false'}) {w}")
        if p.ok:
            named = [("named cf_contains", "SELECT cf_contains('fz_pub', 42::bigint)"),
                     ("named cf_contains array", "SELECT cf_contains('fz_pub', ARRAY[1, 2, 3]::bigint[])"),
                     ("named cf_insert", "SELECT cf_insert('fz_pub', 43::bigint)"),
                     ("named cf_insert many", "SELECT cf_insert('fz_pub', ARRAY(SELECT generate_series(1, 300))::bigint[])"),
                     ("named cf_delete", "SELECT cf_delete('fz_pub', 43::bigint)"),
                     ("named cf_snapshot", "SELECT cf_snapshot('fz_pub') IS NULL"),
                     ("cuckoo_filters", "SELECT * FROM cuckoo_filters WHERE name = 'fz_pub'")]
            if large:
                named = named[2:3] + named[5:6]
            for name, sql in named:
                self.call(name, sql)
            self.call("cf_drop", "SELECT cf_drop('fz_pub')")

    def read_state(self, rng, id):
        w = f"FROM fs WHERE id = {id}"
        for name, sql in [("state output text", f"SELECT length(s::text) {w}"),
                          ("state output binary", f"SELECT length(cf_sharded_state_send(s)) {w}"),
                          ("state text read back", f"SELECT CAST(s::text AS cf_sharded_state) IS NULL {w}")]:
            self.call(name, sql, must=True)
        out = io.BytesIO()
        o = self.call("state COPY TO binary", f"COPY (SELECT 9, s {w}) TO STDOUT (FORMAT binary)", must=True, stream=out)
        if o.ok:
            self.call("state binary read back", "COPY fs FROM STDIN (FORMAT binary)", must=True, stream=io.BytesIO(out.getvalue()))
        for name, sql in [("cf_sharded_state_combine", f"SELECT cf_sharded_state_combine(s, s) IS NULL {w}"),
                          ("cf_sharded_state_trans", f"SELECT cf_sharded_state_trans(s, 7::bigint) IS NULL {w}"),
                          ("cf_sharded_agg(state)", f"SELECT cf_sharded_agg(s) IS NULL FROM fs, generate_series(1, 2) WHERE id = {id}")]:
            self.call(name, sql)
        f = self.call("cf_sharded_state_final", f"INSERT INTO fz SELECT 3, cf_sharded_state_final(s) {w}")
        self.accepted["state final"] += f.ok
        if f.ok:
            self.read_value(rng, 3)

    # ----- sizing arguments ---------------------------------------------------------------------

    def sizing(self, rng):
        cap = rng.choice(CAPACITIES)
        fpp = rng.choice(FPPS)
        n = rng.choice(COUNTS)
        exp = rng.choice(EXPANSIONS)
        kt = rng.choice(["", ", 'bigint'", ", 'text'", ", 'point'", ", 'fz_mood'"])
        form = rng.randrange(10)
        if form == 0:
            name, sql = "sizing cf_empty", f"SELECT cf_empty({cap}, {f8(fpp)}{kt}) IS NULL"
        elif form == 1:
            name, sql = "sizing cf_agg(k, fpp, capacity)", f"SELECT cf_agg(g, {f8(fpp)}, {cap}) IS NULL FROM generate_series(1, {min(n, 10000)}) g"
        elif form == 2:
            name, sql = "sizing cf_agg(k, fpp)", f"SELECT cf_agg(g, {f8(fpp)}) IS NULL FROM generate_series(1, {n}) g"
        elif form == 3:
            name, sql = "sizing cf_sharded_agg", f"SELECT cf_sharded_agg(g, {f8(fpp)}, {cap}) IS NULL FROM generate_series(1, {min(n, 10000)}) g"
        elif form == 4:
            name, sql = "sizing cf_sharded_key", f"SELECT cf_sharded_state_final(cf_sharded_key(1::bigint, {f8(fpp)}, {cap})) IS NULL"
        elif form == 5:
            name, sql = "sizing cf_sharded_trans", f"SELECT cf_sharded_final(cf_sharded_trans(NULL::bytea, 1::bigint, {f8(fpp)}, {cap})) IS NULL"
        elif form == 6:
            name, sql = "sizing cf_insert(cf_empty, n keys)", f"SELECT cf_insert(cf_empty({cap}, {f8(fpp)}), ARRAY(SELECT generate_series(1, {n}))::bigint[]) IS NULL"
        elif form == 7:
            name, sql = "sizing cf_publish(cf_empty)", f"SELECT cf_publish('fz_size', cf_empty({cap}, {f8(fpp)}), false)"
        else:
            durable = rng.choice(["true", "false"])
            name, sql = "sizing cf_create", f"SELECT cf_create('fz_size', {cap}, {f8(fpp)}, {durable}, NULL, {exp})"
        if self.verbose:
            print(f"iteration {self.it}: {sql}")
        self.inp = None
        o = self.call(name, sql)
        if o.ok and form >= 7:
            self.call("sizing named insert", f"SELECT cf_insert('fz_size', ARRAY(SELECT generate_series(1, {min(n, 100000)}))::bigint[])")
            self.call("sizing named snapshot", "SELECT cf_snapshot('fz_size') IS NULL")
        if form >= 7:
            self.call("cf_drop", "SELECT cf_drop('fz_size')")

    # ----- running ------------------------------------------------------------------------------

    def run(self, seed, iterations, deadline=None):
        self.failures = self.failures or Failures(seed, self.outdir)
        self.warnings = self.warnings or Failures(seed, None, quiet=True)
        self.failures.seed = self.warnings.seed = seed
        t0 = time.monotonic()
        done = 0
        for it in iterations:
            if deadline and time.monotonic() > deadline:
                break
            self.iteration(seed, it)
            done += 1
            if done % HEALTH_EVERY == 0:
                problems = self.cl.health()
                if problems:
                    self.failures.add("server restart seen by the periodic check", f"iterations {it - HEALTH_EVERY + 1}..{it}", "RESTART", it, None, "", "; ".join(problems))
                    self.conn = None
            if done % CHECKPOINT_EVERY == 0:
                # the durability worker writes what durable publishes left
                su = self.cl.su()
                su.call("CHECKPOINT")
                su.close()
            if done % 500 == 0:
                print(f"   seed {seed}: {done} iterations, {self.calls} calls, {time.monotonic() - t0:.0f} s, {len(self.failures.classes)} failure classes", flush=True)
        problems = self.cl.health()
        if problems:
            self.failures.add("server restart seen by the periodic check", "the last iterations", "RESTART", self.it, None, "", "; ".join(problems))
        return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, action="append")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--iteration", type=int, action="append", help="replay only these iterations")
    ap.add_argument("--minutes", type=float, help="soak: new seeds until this time is up")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--inject-faults", action="store_true", help="harness check: SIGABRT the tenant's backend at iteration 10 and SIGSTOP it at 20")
    args = ap.parse_args()
    seeds = args.seed or ([int.from_bytes(os.urandom(4), "little")] if not args.minutes else [])
    outdir = tempfile.mkdtemp(prefix="cuckoo-security-fuzz-")
    os.chmod(outdir, 0o755)
    cl = Cluster("security-fuzz").init().start()
    fz = Fuzzer(cl, outdir, args.verbose)
    if args.inject_faults:
        import signal
        fz.inject = {10: signal.SIGABRT, 20: signal.SIGSTOP}
    t0 = time.monotonic()
    total = 0
    try:
        cl.setup()
        print(f"== fuzzer against {cl.describe_build()}", flush=True)
        print(f"   port {cl.port}, server processes limited to {cl.address_space_limit() // 1024} kB (ulimit -v), tenant under statement_timeout {STATEMENT_TIMEOUT:g} s,"
              f" a call past {STATEMENT_TIMEOUT + TIMEOUT_SLACK:g} s fails", flush=True)
        n = fz.make_seeds()
        print(f"   seed inputs: {n['filter']} cuckoofilter values, {n['state']} cf_sharded_state, {n['bytea']} bytea states", flush=True)
        if args.minutes:
            deadline = time.monotonic() + 60 * args.minutes
            while time.monotonic() < deadline:
                seed = int.from_bytes(os.urandom(4), "little")
                print(f"== seed {seed}", flush=True)
                total += fz.run(seed, range(2000), deadline)
        else:
            for seed in seeds:
                its = args.iteration or range(args.count)
                print(f"== seed {seed}: {len(its)} iterations", flush=True)
                total += fz.run(seed, its)
        crashes = cl.all_log_crashes()
    finally:
        if fz.conn:
            fz.conn.close()
        cl.cleanup()
    el = time.monotonic() - t0
    print(f"== {total} iterations, {fz.calls} calls in {el:.0f} s (seeds {' '.join(map(str, seeds)) if seeds else 'see above'})")
    print("   SQLSTATE histogram: " + ", ".join(f"{k} {v}" for k, v in fz.hist.most_common()))
    print("   accepted: " + ", ".join(f"{k} {v}" for k, v in sorted(fz.accepted.items())))
    print("   most time: " + ", ".join(f"{k} {v:.0f} s" for k, v in fz.time_by_call.most_common(6)))
    if fz.late:
        print(f"   calls that ended more than {LATE:g} s after statement_timeout (not failures): " + ", ".join(f"{k} {v}" for k, v in fz.late.most_common()))
    if fz.warnings:
        print("   notes (not failures):")
        fz.warnings.report()
    if fz.xx000:
        print("   XX000 messages:")
        for m, k in fz.xx000.most_common():
            print(f"     {k}x {m}")
    failed = bool(fz.failures) or bool(crashes)
    if crashes:
        print("FAIL  the server log shows processes that died:")
        for line in crashes[:20]:
            print("      " + line)
    if fz.failures:
        print(f"FAIL  {len(fz.failures.classes)} failure classes (examples in {outdir}):")
        fz.failures.report()
    if cl.restarts_caused:
        print(f"   (the harness ended {cl.restarts_caused} hung backend(s) with SIGKILL)")
    if not failed:
        print("PASS  no crash, restart, lost connection, hung call, XX000 or refused read")
        try:
            os.rmdir(outdir)
        except OSError:
            pass
    per_call = sorted(fz.by_call.items())
    print("   by call: " + "; ".join(f"{k}: " + " ".join(f"{s}={c}" for s, c in v.most_common()) for k, v in per_call))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
