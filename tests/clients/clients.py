#!/usr/bin/env python3
"""The README's recipes through psycopg 3 and asyncpg, written as an application
writes them (a parameter for the key, no cast), against the filters that
tests/clients/run.sh made: named filters and stored values over bigint, text and
uuid keys. Every answer is compared with the same question asked in typed SQL.

What must hold: psycopg answers every recipe right; asyncpg (which makes the
server infer each parameter's type and then insists on it) answers right for
string keys, and for other keys answers right or raises an error. No driver may
ever give a wrong answer."""
import asyncio
import hashlib
import sys
import uuid

import asyncpg
import psycopg

HOST, PORT, DB = "/tmp/cuckoo-clients", 5488, "clients"
SQLTYPE = {"ints": "bigint", "strs": "text", "uuids": "uuid"}


def key(kind, n):
    if kind == "ints":
        return n
    if kind == "strs":
        return f"k{n}"
    return uuid.UUID(hashlib.md5(f"u{n}".encode()).hexdigest())


# (recipe, SQL with {p} for the parameter and {t} for the filter, argument maker)
RECIPES = [
    ("named probe", "SELECT cf_contains('{t}', {p})", lambda k: key(k, 42)),
    ("named probe, absent", "SELECT cf_contains('{t}', {p})", lambda k: key(k, 5000)),
    ("value probe", "SELECT cf_contains(f, {p}) FROM filters WHERE name = '{t}'", lambda k: key(k, 42)),
    ("value probe, absent", "SELECT cf_contains(f, {p}) FROM filters WHERE name = '{t}'", lambda k: key(k, 5000)),
    ("named batch", "SELECT cf_contains_each('{t}', {p})", lambda k: [key(k, 41), key(k, 5001), key(k, 43)]),
    ("value batch", "SELECT cf_contains_each(f, {p}) FROM filters WHERE name = '{t}'", lambda k: [key(k, 41), key(k, 5001)]),
]


def typed(sql, kind, arg, mark):
    """The same statement with the parameter cast to the filter's key type."""
    t = SQLTYPE[kind] + ("[]" if isinstance(arg, list) else "")
    return sql.format(t=kind, p=f"{mark}::{t}")


def expected(conn, sql, kind, arg):
    return conn.execute(typed(sql, kind, arg, "%s"), (arg,)).fetchone()[0]


def short(e):
    return f"error: {type(e).__name__}: {str(e).splitlines()[0][:80]}"


def judge(driver, kind, got, want):
    if not isinstance(got, str) or not got.startswith("error"):
        return "ok" if got == want else f"WRONG: {got!r}, typed SQL says {want!r}"
    if driver == "asyncpg" and kind != "strs":
        return "ok (refused: " + got[7:60] + ")"
    return "FAIL " + got


def main():
    results = []
    with psycopg.connect(host=HOST, port=PORT, dbname=DB, user="postgres", autocommit=True) as check:
        with psycopg.connect(host=HOST, port=PORT, dbname=DB, user="postgres", autocommit=True) as c:
            for kind in SQLTYPE:
                for name, sql, make in RECIPES:
                    arg = make(kind)
                    want = expected(check, sql, kind, arg)
                    try:
                        got = c.execute(sql.format(t=kind, p="%s"), (arg,)).fetchone()[0]
                    except Exception as e:  # noqa: BLE001 - every error is reported
                        got = short(e)
                    results.append(("psycopg", kind, name, judge("psycopg", kind, got, want)))
                # An insert as written, then a typed probe of the same key.
                new = key(kind, 7001)
                try:
                    added = c.execute(f"SELECT cf_insert('{kind}', %s)", (new,)).fetchone()[0]
                    found = expected(check, "SELECT cf_contains('{t}', {p})", kind, new)
                    verdict = "ok" if added and found else f"WRONG: inserted {added}, then found {found}"
                except Exception as e:  # noqa: BLE001
                    verdict = judge("psycopg", kind, short(e), None)
                results.append(("psycopg", kind, "named insert", verdict))

        async def run_asyncpg():
            c = await asyncpg.connect(host=HOST, port=PORT, database=DB, user="postgres")
            for kind in SQLTYPE:
                for name, sql, make in RECIPES:
                    arg = make(kind)
                    want = expected(check, sql, kind, arg)
                    try:
                        got = await c.fetchval(sql.format(t=kind, p="$1"), arg)
                        got = list(got) if isinstance(got, (list, tuple)) else got
                    except Exception as e:  # noqa: BLE001
                        got = short(e)
                    results.append(("asyncpg", kind, name, judge("asyncpg", kind, got, want)))
                new = key(kind, 7002)
                try:
                    added = await c.fetchval(f"SELECT cf_insert('{kind}', $1)", new)
                    found = expected(check, "SELECT cf_contains('{t}', {p})", kind, new)
                    verdict = "ok" if added and found else f"WRONG: inserted {added}, then found {found}"
                except Exception as e:  # noqa: BLE001
                    verdict = judge("asyncpg", kind, short(e), None)
                results.append(("asyncpg", kind, "named insert", verdict))
            await c.close()

        asyncio.run(run_asyncpg())
    failed = 0
    for driver, kind, name, verdict in results:
        bad = not verdict.startswith("ok")
        failed += bad
        print(f"clients: {driver:8} {kind:6} {name:22} {verdict}")
    print(f"clients: python drivers: {len(results) - failed} of {len(results)} as required")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
