"""A concurrent write torture of a filter bound to a table column (issue 33):
writers insert, update, delete and upsert rows with random savepoints,
rollbacks and prepared transactions, and apply queued deletes; readers hold
REPEATABLE READ snapshots across their rounds, on the primary and on a hot
standby, while cf_rebuild refills the filter again and again alongside the
writers (it does not block them). Every reader checks, under its own snapshot, that every key it can
see is in the filter (no false negative) and that the pre-screen keeps a
semi-join's answer. Then the same checks after a crash of the primary, on
the standby after it replayed everything, and in a database restored from
pg_dump, and in a cluster made by pg_upgrade, once its binding is rebuilt.
Deletes waiting in the queue (shared memory) when the primary crashes or
restarts, or when the standby is promoted, are lost with it: each is counted in
dropped_deletes, on the primary and the standby alike.
With --partitioned, the bound table is hash-partitioned (the binding follows
its partitions) and writers also delete from partitions directly.

A fixed amount of work (seeded): the test asserts what must hold, never how
much fits in a time.

    python3 bound.py [--seed N] [--rounds N]     (as the postgres user; see run.sh)
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from cluster import PGBIN, Failure, Node, pg_upgrade  # noqa: E402

import pg8000.native  # noqa: E402

KEYS = 3000
MISSING = "SELECT count(*) FROM bt WHERE k IS NOT NULL AND NOT cf_contains('bt_k', k)"
# While a rebuild has not committed, the filter is being filled and the
# binding's probe answers "maybe": readers ask it, and count the checks made
# against a filter it trusts (cf_bound_ready under the same snapshot).
BOUND_MISSING = ("SELECT cf_bound_ready('bt_k'), count(*) FROM bt "
                 "WHERE k IS NOT NULL AND NOT cf_bound_contains('bt_k', k)")
# The pre-screen written out, and the query as written (planned with hash
# and merge joins off, so that the planner adds the pre-screen itself where
# few keys are present: probe_sparse), against the query planned without
# pre-screens (cuckoo.auto_prescreen off): semi-joins and anti-joins.
PAIRS = [
    (f"SELECT count(*) FROM {probe} p WHERE {screen} "
     f"{op} {neg}EXISTS (SELECT 1 FROM bt WHERE bt.k = p.k)",
     f"SELECT count(*) FROM {probe} p WHERE {neg}EXISTS (SELECT 1 FROM bt WHERE bt.k = p.k)")
    for probe in ("probe", "probe_sparse")
    for screen, op, neg in (("cf_bound_contains('bt_k', p.k)", "AND", ""),
                            ("NOT cf_bound_contains('bt_k', p.k)", "OR", "NOT "))
]
AS_PLANNED = "SET enable_hashjoin = off; SET enable_mergejoin = off"
AS_BEFORE = "RESET enable_hashjoin; RESET enable_mergejoin"


def screened_vs_plain(c, plans=False):
    """The differences between the pre-screened counts and the plain ones,
    as text (empty when they agree), the first plain count, and (plans) for
    each query as planned whether the pre-screen was in its plan."""
    bad, first, auto_used = [], None, []
    for screened, query in PAIRS:
        a = c.run(screened)[0][0]
        for q in AS_PLANNED.split("; "):
            c.run(q)
        auto = c.run(query)[0][0]
        if plans:
            auto_used.append(any("cf_bound_contains" in r[0] for r in c.run("EXPLAIN " + query)))
        for q in AS_BEFORE.split("; "):
            c.run(q)
        c.run("SET cuckoo.auto_prescreen = off")
        b = c.run(query)[0][0]
        c.run("RESET cuckoo.auto_prescreen")
        first = b if first is None else first
        if not a == auto == b:
            bad.append(f"{query}: written pre-screen {a}, as planned {auto}, plain {b}")
    return "; ".join(bad), first, auto_used


PARTS = 4


def setup(n, partitioned=False):
    if partitioned:
        # Bound through the partitioned table: its row triggers are the
        # partitions' clones; writers also delete from partitions directly.
        n.sql("CREATE TABLE bt (id bigserial PRIMARY KEY, k int, note text) PARTITION BY HASH (id)")
        for i in range(PARTS):
            n.sql(f"CREATE TABLE bt_p{i} PARTITION OF bt FOR VALUES WITH (MODULUS {PARTS}, REMAINDER {i})")
    else:
        n.sql("CREATE TABLE bt (id bigserial PRIMARY KEY, k int, note text)")
    n.sql(f"INSERT INTO bt (k, note) SELECT g % {KEYS}, 'seed' FROM generate_series(1, 5000) g")
    n.sql("CREATE INDEX ON bt (k)")
    n.sql(f"CREATE TABLE probe AS SELECT g AS k FROM generate_series(-50, {KEYS + 50}) g")
    # About one key in 37 present.
    n.sql(f"CREATE TABLE probe_sparse AS SELECT g * 37 AS k FROM generate_series(-{KEYS}, {KEYS}) g")
    n.sql("ANALYZE probe, probe_sparse")
    n.sql("SELECT cf_bind('bt_k', 'bt', 'k')")


def writer(port, seed, rounds, errors, stats, partitioned=False):
    rng = random.Random(seed)
    c = pg8000.native.Connection("postgres", host="127.0.0.1", port=port, database="postgres")
    try:
        for r in range(rounds):
            prepared = rng.random() < 0.1
            c.run("BEGIN")
            for _ in range(rng.randint(1, 6)):
                op = rng.random()
                sp = rng.random() < 0.2
                if sp:
                    c.run("SAVEPOINT s")
                k = rng.randrange(KEYS)
                if op < 0.35:
                    c.run("INSERT INTO bt (k, note) SELECT :k + g, 'w' FROM generate_series(0, :n) g", k=k, n=rng.randint(0, 3))
                elif op < 0.55 and partitioned and rng.random() < 0.5:
                    t = f"bt_p{rng.randrange(PARTS)}"
                    c.run(f"DELETE FROM {t} WHERE id IN (SELECT id FROM {t} WHERE k BETWEEN :a AND :b LIMIT 3)", a=k, b=k + 20)
                elif op < 0.55:
                    c.run("DELETE FROM bt WHERE id IN (SELECT id FROM bt WHERE k BETWEEN :a AND :b LIMIT 3)", a=k, b=k + 20)
                elif op < 0.75:
                    c.run("UPDATE bt SET k = :n WHERE id IN (SELECT id FROM bt WHERE k = :k LIMIT 2)", k=k, n=rng.randrange(KEYS))
                elif op < 0.85:
                    c.run("UPDATE bt SET note = 'touched' WHERE k = :k", k=k)
                else:
                    # Ids of their own, above the sequence's.
                    c.run("INSERT INTO bt (id, k, note) VALUES (:id, :k, 'up') ON CONFLICT (id) DO UPDATE SET k = excluded.k",
                          id=1_000_000 + rng.randint(1, 300), k=k)
                if sp and rng.random() < 0.5:
                    c.run("ROLLBACK TO SAVEPOINT s")
            end = rng.random()
            if prepared:
                gid = f"bt_{seed}_{r}"
                c.run(f"PREPARE TRANSACTION '{gid}'")
                c.run(f"{'COMMIT' if end < 0.7 else 'ROLLBACK'} PREPARED '{gid}'")
            elif end < 0.75:
                c.run("COMMIT")
            else:
                c.run("ROLLBACK")
            if rng.random() < 0.2:
                stats["applied"] += c.run("SELECT cf_apply_deletes('bt_k')")[0][0]
    except Exception as e:  # noqa: BLE001
        errors.append(f"writer {seed}: {e}")
    finally:
        c.close()


def rebuilder(port, seed, writers, errors, stats):
    """cf_rebuild, again and again until the writers are done (at least
    twice), each in a transaction that sometimes lingers before it commits."""
    rng = random.Random(seed)
    c = pg8000.native.Connection("postgres", host="127.0.0.1", port=port, database="postgres")
    try:
        while stats["rebuilds"] < 2 or any(t.is_alive() for t in writers):
            c.run("BEGIN")
            c.run("SELECT cf_rebuild('bt_k')")
            if rng.random() < 0.3:
                c.run("SELECT pg_sleep(0.05)")
            c.run("COMMIT")
            stats["rebuilds"] += 1
    except Exception as e:  # noqa: BLE001
        errors.append(f"rebuilder: {e}")
    finally:
        c.close()


def reader(port, seed, rounds, errors, stats, standby=False):
    rng = random.Random(seed)
    c = pg8000.native.Connection("postgres", host="127.0.0.1", port=port, database="postgres")
    try:
        r = 0
        while r < rounds:
            try:
                c.run("BEGIN ISOLATION LEVEL REPEATABLE READ")
                for _ in range(rng.randint(2, 5)):
                    ready, missing = c.run(BOUND_MISSING)[0]
                    if missing != 0:
                        errors.append(f"{'standby ' if standby else ''}reader {seed}: {missing} visible rows whose key the filter lacks")
                    stats["trusted"] += 1 if ready else 0
                    bad, _, _ = screened_vs_plain(c)
                    if bad:
                        errors.append(f"reader {seed}: {bad}")
                    stats["checks"] += 1
                    # Hold the snapshot while writers go on.
                    c.run("SELECT pg_sleep(0.05)")
                c.run("COMMIT")
                r += 1
            except (pg8000.exceptions.DatabaseError, pg8000.exceptions.InterfaceError, OSError) as e:
                # A standby may cancel a query whose snapshot conflicts with a
                # replayed delete (as it does for pruned heap pages), or end
                # the session if it is idle in its transaction then: retried.
                lost = not isinstance(e, pg8000.exceptions.DatabaseError)
                if standby and (lost or "conflict with recovery" in str(e)):
                    stats["conflicts"] += 1
                    try:
                        c.run("ROLLBACK")
                    except Exception:  # noqa: BLE001
                        try:
                            c.close()
                        except Exception:  # noqa: BLE001
                            pass
                        c = pg8000.native.Connection("postgres", host="127.0.0.1", port=port, database="postgres")
                    continue
                raise
    except Exception as e:  # noqa: BLE001
        errors.append(f"{'standby ' if standby else ''}reader {seed}: {e}")
    finally:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


QUEUE_COUNTS = "SELECT pending_deletes, dropped_deletes FROM cuckoo_filters WHERE name = 'bt_k'"


def wait_for(n, q, want, what):
    """Polls `q` on node `n` until it returns `want` (a liveness check:
    nothing is asserted of the time it takes)."""
    deadline = time.monotonic() + 600
    while (got := tuple(n.sql(q)[0])) != want:
        if time.monotonic() > deadline:
            raise Failure(f"{what}: {got}, expected {want}")
        time.sleep(0.2)


def queued_then_lost(p, s, lo, hi, lose, what):
    """Deletes the rows of keys lo..hi on primary `p` while a REPEATABLE READ
    snapshot keeps their deletes waiting in the queue (shared memory), then
    `lose()` loses the queue (a crash, a promotion); returns the node that
    is primary after. The lost deletes' keys stay in the filter (false
    positives), counted in dropped_deletes, and the standby (through the
    WAL) agrees before and after."""
    p.one("SELECT cf_apply_deletes('bt_k')")
    pending0, dropped0 = p.sql(QUEUE_COUNTS)[0]
    holder = pg8000.native.Connection("postgres", host="127.0.0.1", port=p.port, database="postgres")
    holder.run("BEGIN ISOLATION LEVEL REPEATABLE READ")
    holder.run("SELECT count(*) FROM bt")
    n = p.one(f"WITH d AS (DELETE FROM bt WHERE k BETWEEN {lo} AND {hi} RETURNING 1) SELECT count(*) FROM d")
    p.one("SELECT cf_apply_deletes('bt_k')")
    if n == 0 or tuple(p.sql(QUEUE_COUNTS)[0]) != (pending0 + n, dropped0):
        raise Failure(f"{what}: {n} rows deleted under a held snapshot, then (pending, dropped) "
                      f"{tuple(p.sql(QUEUE_COUNTS)[0])}, expected {(pending0 + n, dropped0)}")
    s.wait_replay(p)
    wait_for(s, QUEUE_COUNTS, (pending0 + n, dropped0), f"{what}: the standby's account before")
    primary = lose()
    try:
        holder.close()
    except Exception:
        pass
    want = (0, dropped0 + pending0 + n)
    wait_for(primary, QUEUE_COUNTS, want, f"{what}: (pending, dropped) after")
    if primary is p:
        wait_for(s, QUEUE_COUNTS, want, f"{what}: the standby's account after")
    print(f"bound: {what}: {pending0 + n} queued deletes lost with the queue, counted in dropped_deletes "
          f"({dropped0} -> {dropped0 + pending0 + n}){'' if primary is not p else ', on the standby too'}")
    return primary


def check(n, what, db="postgres"):
    c = pg8000.native.Connection("postgres", host="127.0.0.1", port=n.port, database=db)
    try:
        missing = c.run(MISSING)[0][0]
        bad, a, auto_used = screened_vs_plain(c, plans=True)
    finally:
        c.close()
    if missing != 0 or bad:
        raise Failure(f"{what}: {missing} rows whose key the filter lacks; {bad}")
    print(f"bound: {what}: every visible key is in the filter; pre-screened semi- and anti-joins = plain ({a} rows);"
          f" {sum(auto_used)} of {len(PAIRS)} planned with the pre-screen")
    return auto_used


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=120)
    ap.add_argument("--partitioned", action="store_true", help="bind a partitioned table")
    args = ap.parse_args(argv)
    nodes = []
    try:
        p = Node.primary("bound_primary", extra="max_prepared_transactions = 20\nmax_standby_streaming_delay = 1s\n")
        nodes.append(p)
        setup(p, args.partitioned)
        if args.partitioned:
            print(f"bound: the bound table is partitioned ({PARTS} hash partitions)")
        # The base backup's own checkpoint then has nothing left to write.
        p.checkpoint()
        s = p.standby("bound_standby")
        nodes.append(s)
        s.wait_replay(p)
        errors, stats = [], {"applied": 0, "checks": 0, "conflicts": 0, "trusted": 0, "rebuilds": 0}
        threads = [threading.Thread(target=writer, args=(p.port, args.seed * 100 + i, args.rounds, errors, stats, args.partitioned))
                   for i in range(3)]
        threads += [threading.Thread(target=rebuilder, args=(p.port, args.seed * 100 + 30, list(threads), errors, stats))]
        threads += [threading.Thread(target=reader, args=(p.port, args.seed * 100 + 10 + i, args.rounds // 4, errors, stats)) for i in range(2)]
        threads += [threading.Thread(target=reader, args=(s.port, args.seed * 100 + 20, args.rounds // 4, errors, stats, True))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise Failure("; ".join(errors[:5]))
        applied = p.one("SELECT cf_apply_deletes('bt_k')")
        print(f"bound: {3 * args.rounds} write transactions, {stats['rebuilds']} cf_rebuild alongside them, "
              f"{stats['checks']} snapshot checks ({stats['trusted']} against a filter the probe trusted), "
              f"{stats['applied'] + applied} deletes applied, {stats['conflicts']} standby conflicts retried")
        # Where one key in 37 is present, the planner pre-screens both the
        # semi-join and the anti-join itself (the regress test checks where
        # it must not).
        used = check(p, "primary after the workload")
        if not all(u for (screened, query), u in zip(PAIRS, used) if "probe_sparse" in query):
            raise Failure(f"the planner did not pre-screen every query of probe_sparse: {used}")
        s.wait_replay(p)
        check(s, "standby after replay")
        # A crash of the primary: the filter comes back from the WAL.
        p.crash()
        p.start()
        check(p, "primary after a crash")
        p.sql("INSERT INTO bt (k, note) SELECT g, 'after' FROM generate_series(1, 100) g")
        p.sql("DELETE FROM bt WHERE k < 50")
        check(p, "primary writing after the crash")
        s.wait_replay(p)
        check(s, "standby after the primary's crash")
        # Deletes waiting in the queue when the primary crashes.
        queued_then_lost(p, s, 2000, 2099, lambda: (p.crash(), p.start()) and p, "a crash")
        queued_then_lost(p, s, 2200, 2299, lambda: (p.stop(), p.start()) and p, "a clean restart")
        check(p, "primary after a crash lost queued deletes")
        s.wait_replay(p)
        check(s, "standby after the primary's crash lost queued deletes")
        # A cf_rebuild cut by a crash before it commits: the filter it made
        # and filled is not the one the catalog names, so no probe trusts it
        # after recovery, on the primary or the standby (every key a maybe)
        # until a rebuild commits. (The rebuild a probe asks for in the
        # background is off here, so that the states checked stay.)
        p.sql("ALTER SYSTEM SET cuckoo.auto_rebuild = off")
        p.sql("SELECT pg_reload_conf()")
        c = pg8000.native.Connection("postgres", host="127.0.0.1", port=p.port, database="postgres")
        c.run("BEGIN")
        c.run("SELECT cf_rebuild('bt_k')")
        # Its WAL on disk (else the crash loses the rebuild whole, and the
        # old filter is back, as right as before).
        p.sql("SELECT pg_switch_wal()")
        s.wait_replay(p)
        p.crash()
        try:
            c.close()
        except Exception:
            pass
        p.start()
        s.wait_replay(p)
        for n, where in ((p, "primary"), (s, "standby")):
            state = n.one("SELECT state FROM cuckoo_filters WHERE name = 'bt_k'")
            all_maybe = n.one("SELECT bool_and(cf_bound_contains('bt_k', k)) FROM probe")
            if state != "needs rebuild" or not all_maybe:
                raise Failure(f"{where} after a crash cut a cf_rebuild: state {state}, every probe maybe: {all_maybe}")
            check(n, f"{where} after a crash cut a cf_rebuild (every probe a maybe until a rebuild)")
        p.sql("SELECT cf_rebuild('bt_k')")
        s.wait_replay(p)
        for n, where in ((p, "primary"), (s, "standby")):
            state = n.one("SELECT state FROM cuckoo_filters WHERE name = 'bt_k'")
            screens = n.one("SELECT NOT bool_and(cf_bound_contains('bt_k', k)) FROM probe")
            if state != "ready" or not screens:
                raise Failure(f"{where} after the rebuild committed: state {state}, screens: {screens}")
            check(n, f"{where} after the rebuild committed")
        p.sql("ALTER SYSTEM RESET cuckoo.auto_rebuild")
        p.sql("SELECT pg_reload_conf()")
        # pg_dump and a restore into a new database: the binding comes back
        # (its filter is not in the dump), needing a rebuild, which its first
        # use asks for in the background.
        with tempfile.TemporaryDirectory() as d:
            dump = os.path.join(d, "bt.dump")
            subprocess.run([os.path.join(PGBIN, "pg_dump"), "-h", "127.0.0.1", "-p", str(p.port), "-Fc", "-f", dump, "postgres"], check=True)
            p.sql("CREATE DATABASE restored")
            subprocess.run([os.path.join(PGBIN, "pg_restore"), "-h", "127.0.0.1", "-p", str(p.port), "-d", "restored", dump], check=True)
            # A parallel restore too.
            p.sql("CREATE DATABASE restored_j")
            subprocess.run([os.path.join(PGBIN, "pg_restore"), "-h", "127.0.0.1", "-p", str(p.port), "-j", "2", "-d", "restored_j", dump], check=True)
        for db in ("restored", "restored_j"):
            c = pg8000.native.Connection("postgres", host="127.0.0.1", port=p.port, database=db)
            try:
                if c.run("SELECT count(*) FROM cuckoo_bindings")[0][0] != 1:
                    raise Failure(f"{db}: the restore lost the binding")
                state = c.run("SELECT state FROM cuckoo_filters WHERE name = 'bt_k'")[0][0]
                if state != "needs rebuild":
                    raise Failure(f"{db}: state {state} before the binding's first use, expected needs rebuild")
                c.run("SELECT count(*) FROM probe WHERE cf_bound_contains('bt_k', k)")
                # Waited for, however long it takes (a liveness check).
                deadline = time.monotonic() + 600
                while c.run("SELECT state FROM cuckoo_filters WHERE name = 'bt_k'")[0][0] != "ready":
                    if time.monotonic() > deadline:
                        raise Failure(f"{db}: the rebuild its first use asked for did not happen")
                    time.sleep(0.2)
            finally:
                c.close()
            check(p, f"database {db} by pg_restore, rebuilt in the background on first use", db=db)
        c = pg8000.native.Connection("postgres", host="127.0.0.1", port=p.port, database="restored")
        try:
            c.run("INSERT INTO bt (k, note) VALUES (424242, 'restored')")
            c.run("DELETE FROM bt WHERE k < 100")
            c.run("SELECT cf_rebuild('bt_k')")
        finally:
            c.close()
        check(p, "database restored from pg_dump, written, then after cf_rebuild", db="restored")
        # pg_upgrade into a new cluster: the binding and its triggers come
        # through, the filter (shared memory and cuckoo/) does not: it needs
        # a rebuild, its pre-screen answering maybe meanwhile. Its first use
        # (a probe) asks for the rebuild, which a background worker makes.
        # Deletes waiting in the primary's queue when its standby is
        # promoted: the new primary never held them.
        queued_then_lost(p, s, 2100, 2199, lambda: s.promote() or s, "a promotion")
        check(s, "promoted standby after it lost the primary's queued deletes")
        s.stop()
        p.stop()
        new = Node("bound_upgraded")
        nodes.append(new)
        pg_upgrade(p, new, "max_prepared_transactions = 20\n")
        state = new.one("SELECT state FROM cuckoo_filters WHERE name = 'bt_k'")
        all_maybe = new.one("SELECT bool_and(cf_bound_contains('bt_k', k)) FROM probe")
        if state != "needs rebuild" or not all_maybe:
            raise Failure(f"after pg_upgrade: state {state}, every probe maybe: {all_maybe}")
        # Waited for, however long it takes (a liveness check: nothing is
        # asserted of the time).
        deadline = time.monotonic() + 600
        while new.one("SELECT state FROM cuckoo_filters WHERE name = 'bt_k'") != "ready":
            if time.monotonic() > deadline:
                raise Failure("after pg_upgrade, the rebuild its first probe asked for did not happen")
            time.sleep(0.2)
        check(new, "cluster made by pg_upgrade, rebuilt in the background on first use")
        new.sql("INSERT INTO bt (k, note) VALUES (434343, 'upgraded')")
        new.sql("SELECT cf_rebuild('bt_k')")
        check(new, "cluster made by pg_upgrade, written, then after cf_rebuild")
        return 0
    except Failure as e:
        print(f"bound: FAIL: {e}")
        for n in nodes:
            print(f"--- {n.name} log:\n{n.log_tail(30)}")
        return 1
    finally:
        for n in nodes:
            n.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
