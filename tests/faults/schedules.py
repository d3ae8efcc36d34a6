"""A randomized, seeded fault-schedule tester for durable named filters, with
a model of what was acknowledged (hypothesis's stateful testing drives it;
testgres the clusters).

Each example starts a primary (archiving its WAL) and a streaming hot
standby, then runs a random schedule of: creates, inserts (one key and
batched), inserts-if-new, deletes, publishes and drops; checkpoints and
compactions; crashes of the primary (kill -9 of the postmaster, of a
backend, an immediate stop, and a stop at a named point inside a cut, a
compaction or a pass); standby restarts (fast and immediate) and failovers;
base backups from the primary and from the standby restored to a recovery
target (the first consistent point, or the end of the archive), then crashed
once after new writes; and the primary's or the standby's cuckoo/ made
unwritable and given back. After each step every node is checked against
the model: every acknowledged key is found unless the filter says it needs
a reload, never `ready` with a key missing; the primary's filters are ready.
At the end the directories are given back, and once the standby has caught
up with a checkpoint every filter must be ready there too.

    python3 schedules.py --seed N [--examples K] [--steps S]
    python3 schedules.py --minutes M        (soak: new seeds until time is up)
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import traceback

import hypothesis.core
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

sys.path.insert(0, os.path.dirname(__file__))
from cluster import Failure, Node, lsn_ge  # noqa: E402

CRASH_POINTS = ["cut-logged", "compaction-contents", "pass-logged", "coverage-written"]
LOG_DIR = os.environ.get("FAULTS_LOG_DIR", "/tmp/cuckoo-faults-logs")
LOG = []


def say(msg):
    LOG.append(msg)
    if os.environ.get("FAULTS_VERBOSE"):
        print("   ", msg, flush=True)


class FilterModel:
    def __init__(self, name, fixed):
        self.name = name
        self.fixed = fixed
        self.keys = {}          # key -> ack LSN (text) of its insert or publish
        self.deleted = set()    # keys a delete was sent for: never checked again
        self.version_lsn = None  # ack LSN of the create or publish that made these contents
        self.lost = False       # a node said it needs a reload where the design allows it
        self.nearly_full = False  # the primary refused a new key (full): replay,
                                  # filling its tables in another order, may not
                                  # store one the primary stored, and says so

    def must_have(self, upto=None):
        if upto is not None and (self.version_lsn is None or not lsn_ge(upto, self.version_lsn)):
            return None
        return [k for k, at in self.keys.items() if k not in self.deleted and (upto is None or lsn_ge(upto, at))]


class Schedule(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.nodes = []
        self.filters = {}
        self.next_key = 1
        self.next_name = 0
        self.p = None
        self.s = None
        self.p_broken = False
        self.p_closed = False   # broken and restarted since: durable changes stay closed
        self.s_broken = False
        # The primary crashed while its cuckoo/ could not be written: until it
        # writes again, a node that restarts from (or a backup that starts at)
        # its end-of-recovery checkpoint may say its filters need a reload.
        self.gap_window = False
        # The standby restarted while its cuckoo/ could not be written.
        self.s_gapped = False
        self.archive = None

    # ----- set-up and teardown ---------------------------------------------------

    @initialize()
    def start_cluster(self):
        LOG.clear()
        self.archive = tempfile.mkdtemp(prefix="cuckoo-archive-")
        os.chmod(self.archive, 0o700)
        self.p = self.track(Node.primary("sp", extra=f"archive_mode = on\narchive_command = 'cp %p {self.archive}/%f'\n"))
        self.s = self.track(self.p.standby("ss"))
        say("cluster started")
        self.create(2000, False)
        self.create(20000, True)
        for f in list(self.filters.values()):
            self.insert_into(f, 1000, True)

    def track(self, n):
        self.nodes.append(n)
        return n

    def teardown(self):
        # The logs of the last example's nodes stay in LOG_DIR (a failure
        # prints their tails).
        shutil.rmtree(LOG_DIR, ignore_errors=True)
        os.makedirs(LOG_DIR, exist_ok=True)
        for n in self.nodes:
            try:
                with open(os.path.join(LOG_DIR, f"{n.name}.log"), "w") as f:
                    f.write(n.log_text())
            except OSError:
                pass
            try:
                n.cleanup()
            except Exception as e:
                print(f"cleanup of {n.name}: {e}")
        self.nodes = []
        if self.archive:
            shutil.rmtree(self.archive, ignore_errors=True)

    # ----- helpers ---------------------------------------------------------------

    def keys(self, n):
        k = list(range(self.next_key, self.next_key + n))
        self.next_key += n
        return k

    def writable(self):
        return not self.p_closed

    def live(self):
        return [f for f in self.filters.values() if not f.lost]

    def ack(self):
        return self.p.lsn()

    # ----- the schedule: one step at a time, weighted --------------------------------

    ACTIONS = (["insert"] * 4 + ["insert_new"] * 2 + ["delete"] * 2 + ["create", "publish", "drop"] + ["checkpoint"] * 2
               + ["compaction", "crash", "crash", "standby", "failover", "backup", "break", "mend"])

    @rule(data=st.data())
    def step(self, data):
        action = data.draw(st.sampled_from(self.ACTIONS), label="action")
        d = lambda s_, label: data.draw(s_, label=label)  # noqa: E731
        writable = self.writable()
        live = self.live()
        if action == "insert" and writable and live:
            self.insert_into(d(st.sampled_from(live), "filter"), d(st.sampled_from([1, 5, 200, 3000]), "n"), d(st.booleans(), "batched"))
        elif action == "insert_new" and writable and live:
            self.insert_new(d(st.sampled_from(live), "filter"), d(st.sampled_from([1, 50, 1000]), "n"))
        elif action == "delete" and writable and any(f.must_have() for f in live):
            self.delete(d(st.sampled_from([f for f in live if f.must_have()]), "filter"), d(st.sampled_from([1, 20, 500]), "n"))
        elif action == "create" and writable and len(self.filters) < 6:
            self.create(d(st.sampled_from([200, 2000, 20000]), "capacity"), d(st.booleans(), "fixed"))
        elif action == "publish" and writable:
            self.publish(d(st.sampled_from(sorted(self.filters) + ["new"]), "name"), d(st.sampled_from([10, 5000]), "n"))
        elif action == "drop" and writable and self.filters:
            self.drop(d(st.sampled_from(sorted(self.filters)), "name"))
        elif action == "checkpoint":
            self.checkpoint()
        elif action == "compaction":
            self.compaction()
        elif action == "crash":
            self.crash_primary(d(st.sampled_from(["kill9", "immediate", "backend", "point"]), "kind"), d(st.sampled_from(CRASH_POINTS), "point"))
        elif action == "standby":
            self.restart_standby(d(st.sampled_from(["fast", "immediate", "kill9"]), "mode"))
        elif action == "failover" and not self.p_broken and not self.s_broken:
            self.failover()
        elif action == "backup":
            source = d(st.sampled_from(["primary", "standby"]), "source")
            target = d(st.sampled_from(["immediate", "end"]), "target")
            # (A backup of the primary starts with a checkpoint, which waits
            # while its cuckoo/ cannot be written; and pg_basebackup copies
            # the directory's mode, which here stands for a full disk.)
            if not (self.s_broken if source == "standby" else self.p_broken):
                self.backup(source, target)
        elif action == "break":
            self.break_dir(d(st.sampled_from(["primary", "standby"]), "which"))
        elif action == "mend":
            self.mend_dir(d(st.sampled_from(["primary", "standby"]), "which"))

    # ----- writes ------------------------------------------------------------------

    def create(self, cap, fixed):
        name = f"f{self.next_name}"
        self.next_name += 1
        self.p.sql(f"SELECT cf_create('{name}', {cap}, expansion => {0 if fixed else 2})")
        f = FilterModel(name, fixed)
        f.version_lsn = self.ack()
        self.filters[name] = f
        say(f"create {name} capacity {cap} {'fixed' if fixed else 'growing'}")

    def insert_into(self, f, n, batched):
        keys = self.keys(n)
        if batched or n > 5:
            got = self.p.one("SELECT cf_insert(:f, CAST(:k AS bigint[]))", f=f.name, k=keys)
        else:
            got = [self.p.one("SELECT cf_insert(:f, CAST(:k AS bigint))", f=f.name, k=k) for k in keys]
        at = self.ack()
        for k, ok in zip(keys, got):
            if ok:
                f.keys[k] = at
        if not all(got):
            f.nearly_full = True
        say(f"insert {n} into {f.name}: {sum(1 for x in got if x)} stored")

    def insert_new(self, f, n):
        old = [k for k in f.must_have()[:n // 2]]
        new = self.keys(n - len(old))
        keys = old + new
        got = self.p.one("SELECT cf_insert_new(:f, CAST(:k AS bigint[]))", f=f.name, k=keys)
        at = self.ack()
        for k, ok in zip(keys, got):
            if ok:
                f.keys[k] = at
        if not all(got[len(old):]):
            f.nearly_full = True
        say(f"insert_new {len(keys)} into {f.name}: {sum(1 for x in got if x)} new")

    def delete(self, f, n):
        keys = f.must_have()[:n]
        f.deleted.update(keys)
        self.p.one("SELECT cf_delete(:f, CAST(:k AS bigint[]))", f=f.name, k=keys)
        say(f"delete {len(keys)} from {f.name}")

    def publish(self, name, n):
        if name == "new":
            name = f"f{self.next_name}"
            self.next_name += 1
        keys = self.keys(n)
        self.p.sql("SELECT cf_publish(:f, (SELECT cf_agg(k) FROM unnest(CAST(:k AS bigint[])) k))", f=name, k=keys)
        f = FilterModel(name, True)
        f.version_lsn = self.ack()
        f.keys = {k: f.version_lsn for k in keys}
        self.filters[name] = f
        say(f"publish {n} keys as {name}")

    def drop(self, name):
        del self.filters[name]
        self.p.sql(f"SELECT cf_drop('{name}')")
        say(f"drop {name}")

    # ----- checkpoints and compactions ------------------------------------------------

    def checkpoint_now(self):
        if self.p_broken:
            # It waits for the directory: let it wait in the background.
            self.p.background("CHECKPOINT")
            time.sleep(0.5)
        else:
            self.p.checkpoint()

    def checkpoint(self):
        self.checkpoint_now()
        say("checkpoint")

    def compaction(self):
        self.set_guc(self.p, "cuckoo.debug_compact", "on")
        self.checkpoint_now()
        self.set_guc(self.p, "cuckoo.debug_compact", None)
        say("compaction")

    def set_guc(self, n, name, value):
        if value is None:
            n.sql(f"ALTER SYSTEM RESET {name}")
        else:
            n.sql(f"ALTER SYSTEM SET {name} = '{value}'")
        n.sql("SELECT pg_reload_conf()")

    # ----- faults --------------------------------------------------------------------------

    def crash_primary(self, kind, point):
        if kind == "kill9":
            self.p.crash()
            self.p.start()
        elif kind == "immediate":
            self.p.stop("immediate")
            self.p.start()
        elif kind == "backend":
            self.p.kill_backend()
        else:
            self.set_guc(self.p, "cuckoo.debug_crash_point", point)
            if point == "compaction-contents":
                self.set_guc(self.p, "cuckoo.debug_compact", "on")
            before = len(self.p.log_text())
            self.p.background("CHECKPOINT")
            t0 = time.time()
            while "debug crash point" not in self.p.log_text()[before:] and time.time() - t0 < 20:
                time.sleep(0.1)
            time.sleep(0.5)
            self.p.wait_ready()
            self.set_guc(self.p, "cuckoo.debug_crash_point", None)
            self.set_guc(self.p, "cuckoo.debug_compact", None)
            marker = os.path.join(self.p.data, "cuckoo_debug_crashed")
            if os.path.exists(marker):
                os.unlink(marker)
                kind = f"at {point}"
            else:
                kind = f"at {point} (not reached)"
        if self.p_broken:
            self.p_closed = True
            self.gap_window = True
        say(f"crash primary: {kind}")

    def restart_standby(self, mode):
        if self.s_broken:
            # Restarted while it could not write its files: its filters need
            # a reload until the primary logs them again (a compaction).
            self.s_gapped = True
        if mode == "kill9":
            self.s.crash()
        else:
            self.s.stop(mode)
        self.s.start()
        say(f"restart standby ({mode})")

    def failover(self):
        # The standby has every acknowledged change; the primary dies.
        self.s.wait_replay(self.p)
        self.p.crash()
        self.s.promote()
        old = self.p
        self.p, self.s = self.s, None
        old.cleanup()
        self.nodes.remove(old)
        self.s = self.track(self.p.standby(f"ss{self.next_name}"))
        self.next_name += 1
        self.s_broken = self.s_gapped = False
        self.p_broken = self.p_closed = False
        say("failover")

    def backup(self, source, target):
        src = self.p if source == "primary" else self.s
        lenient = self.gap_window
        if source == "standby":
            # A checkpoint's PASS, replayed, lets the standby confirm its files
            # (after its cuckoo/ was unwritable, until then it is unsure).
            if self.p_broken:
                lenient = True
            else:
                self.p.checkpoint()
            self.s.wait_replay(self.p)
            lenient = lenient or self.s_gapped
        b = src.tg.backup(xlog_method="stream")
        r = self.track(Node(f"sr{self.next_name}", b.spawn_primary(f"sr{self.next_name}")))
        self.next_name += 1
        # A copy of the standby carries its standby.signal: this copy recovers
        # and ends instead of following the primary.
        for f in ("standby.signal", "recovery.signal"):
            if os.path.exists(os.path.join(r.data, f)):
                os.unlink(os.path.join(r.data, f))
        conf = f"archive_mode = off\nprimary_conninfo = ''\nrestore_command = 'cp {self.archive}/%f %p'\n"
        if target == "immediate":
            conf += "recovery_target = 'immediate'\nrecovery_target_action = 'promote'\n"
        open(os.path.join(r.data, "recovery.signal"), "w").close()
        r.tg.append_conf(conf)
        # The archive holds the WAL past the copy's end (recovery to its first
        # consistent point needs a record after it).
        self.p.sql("SELECT pg_logical_emit_message(false, 'faults', 'past the copy')")
        seg = self.p.one("SELECT pg_walfile_name(pg_switch_wal())")
        t0 = time.time()
        while not os.path.exists(os.path.join(self.archive, seg)) and time.time() - t0 < 60:
            time.sleep(0.1)
        r.start()
        r.wait_recovery_end()
        # Recovery ended where the new timeline begins: what was acknowledged
        # before that point must be there.
        end = switch_point(r)
        snapshot = {name: f.must_have(end) for name, f in self.filters.items() if not f.lost}
        self.check_node(r, {n: k for n, k in snapshot.items() if k is not None}, strict=not lenient, what=f" (backup of the {source}, target {target}, ended at {end})")
        # New writes on the new timeline, then a crash.
        fresh = self.keys(200)
        tname = next((n for n, k in snapshot.items() if k is not None and r.state(n) and r.state(n)[0] == "ready"), None)
        if tname:
            got = r.one("SELECT cf_insert(:f, CAST(:k AS bigint[]))", f=tname, k=fresh)
            stored = [k for k, ok in zip(fresh, got) if ok]
            r.crash()
            r.start()
            self.check_node(r, {tname: stored}, strict=not lenient, what=f" (backup of the {source}) after writes and a crash")
        r.cleanup()
        self.nodes.remove(r)
        say(f"backup of the {source} to {target}")

    def break_dir(self, which):
        n = self.p if which == "primary" else self.s
        if os.path.isdir(n.cuckoo_dir):
            n.break_dir()
            if which == "primary":
                self.p_broken = True
            else:
                self.s_broken = True
            say(f"cuckoo/ of the {which} unwritable")

    def mend_dir(self, which):
        n = self.p if which == "primary" else self.s
        if os.path.isdir(n.cuckoo_dir):
            n.mend_dir()
        if which == "primary":
            self.p_broken = self.p_closed = False
            # Its first pass (now possible) logs what the standbys may lack.
            self.p.checkpoint()
            self.gap_window = False
        else:
            self.s_broken = False
        say(f"cuckoo/ of the {which} writable")

    # ----- checks ------------------------------------------------------------------------

    def check_node(self, n, expected, strict, what=""):
        """`expected`: filter name -> keys that must be there. `strict`: the
        filter must be ready (else: ready with them, or needing a reload)."""
        for name, keys in expected.items():
            st_ = n.state(name)
            if st_ is None:
                raise Failure(f"{n.name}{what}: filter {name} is missing ({len(keys)} keys acknowledged)")
            state, reason, _ = st_
            if state != "ready":
                f = self.filters.get(name)
                if f is not None and f.nearly_full and reason and "too full" in reason:
                    # Documented (docs/durability.md, Replay): not a lost key.
                    f.lost = True
                    say(f"{n.name}: {name} needs a reload: {reason}")
                    continue
                if strict:
                    raise Failure(f"{n.name}{what}: filter {name} is {state} ({reason})")
                say(f"{n.name}: {name} needs a reload: {reason}")
                continue
            found = n.found(name, keys)
            if found != len(keys):
                raise Failure(f"{n.name}{what}: filter {name} is ready but finds {found} of {len(keys)} acknowledged keys")

    @invariant()
    def every_node_holds_what_was_acknowledged(self):
        if self.p is None:
            return
        expected = {f.name: f.must_have() for f in self.filters.values()}
        # The primary: every filter ready, unless a failover made it from a
        # standby that could not know it whole (then it says so).
        for name, keys in expected.items():
            st_ = self.p.state(name)
            if st_ is not None and st_[0] != "ready":
                if st_[1] and ("restarted from a checkpoint" in st_[1] or "too full" in st_[1] and self.filters[name].nearly_full):
                    self.filters[name].lost = True
                    say(f"primary: {name} needs a reload after a failover: {st_[1]}")
                    continue
                if self.p_closed:
                    continue
        self.check_node(self.p, {n: k for n, k in expected.items() if not self.filters[n].lost}, strict=not self.p_closed)
        if self.s is not None:
            self.s.wait_replay(self.p)
            self.check_node(self.s, {n: k for n, k in expected.items() if not self.filters[n].lost}, strict=False, what=" (standby)")

    def finish(self):
        """Directories back, a checkpoint, the standby caught up: all ready there."""
        if self.p_broken or self.p_closed:
            self.p.mend_dir()
            self.p_broken = self.p_closed = False
        if self.s_broken:
            self.s.mend_dir()
            self.s_broken = False
        time.sleep(2)
        self.p.checkpoint()
        self.s.wait_replay(self.p)
        expected = {f.name: f.must_have() for f in self.live()}
        self.check_node(self.p, expected, strict=True, what=" (at the end)")
        self.check_node(self.s, expected, strict=not self.s_gapped, what=" (standby, at the end)")


def switch_point(n):
    """Where the newest timeline of node `n` began (the end of its recovery)."""
    wal = os.path.join(n.data, "pg_wal")
    newest = max(f for f in os.listdir(wal) if f.endswith(".history"))
    lines = [ln for ln in open(os.path.join(wal, newest)) if ln.strip() and not ln.startswith("#")]
    return lines[-1].split()[1]


def run(seed, examples, steps):
    class Checked(Schedule):
        def teardown(self):
            try:
                if self.p is not None and self.s is not None:
                    self.finish()
            finally:
                super().teardown()

    s = settings(max_examples=examples, stateful_step_count=steps, deadline=None, phases=[Phase.generate],
                 database=None, suppress_health_check=list(HealthCheck), print_blob=True, report_multiple_bugs=False)
    t0 = time.time()
    try:
        # The seed decides every schedule: a failure is reproduced by it.
        hypothesis.core.global_force_seed = seed
        run_state_machine_as_test(Checked, settings=s)
    except Exception:
        print(f"faults: schedule seed {seed}: FAIL after {time.time() - t0:.0f} s; steps of the failing example:", flush=True)
        for line in LOG:
            print("   ", line)
        traceback.print_exc()
        for name in sorted(os.listdir(LOG_DIR)) if os.path.isdir(LOG_DIR) else []:
            with open(os.path.join(LOG_DIR, name)) as f:
                tail = f.readlines()[-30:]
            print(f"--- {name} (last lines; whole in {LOG_DIR}) ---")
            print("".join(tail), end="")
        return False
    print(f"faults: schedule seed {seed}: {examples} example(s) of up to {steps} steps ok ({time.time() - t0:.0f} s)", flush=True)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, action="append")
    ap.add_argument("--examples", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--minutes", type=float, default=0)
    a = ap.parse_args()
    ok = True
    if a.minutes:
        end = time.time() + a.minutes * 60
        rnd = random.Random()
        runs = 0
        while time.time() < end:
            sd = rnd.randrange(1 << 31)
            # (Each seed's first example is hypothesis's simplest one: the
            # others are the random schedules.)
            ok &= run(sd, max(a.examples, 4), a.steps)
            runs += 1
        print(f"faults: soak: {runs} schedules in {a.minutes} minutes, {'all ok' if ok else 'FAILURES above'}")
    for sd in a.seed or []:
        ok &= run(sd, a.examples, a.steps)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
