"""Throwaway clusters for the fault tests (tests/faults), driven by testgres:
nodes with cuckoo preloaded, streaming standbys, base backups restored to a
recovery target, crashes of every kind, the cuckoo/ directory taken away and
given back; and the check that every node holds what was acknowledged.

Runs as the postgres user (the server refuses root) against the installed
extension (`make install`), never against a running installation: every node
lives in its own temporary directory on its own port.
"""

import os
import re
import signal
import subprocess
import time

import logging

import pg8000.native
import testgres

logging.getLogger().setLevel(logging.ERROR)

PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
os.environ.setdefault("PG_BIN", PGBIN)
testgres.configure_testgres(cache_initdb=True, cache_pg_config=True)

BASE_CONF = """
shared_preload_libraries = 'cuckoo'
cuckoo.shared_memory = 32MB
fsync = off
synchronous_commit = on
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
wal_keep_size = 512MB
checkpoint_timeout = 1h
max_wal_size = 4GB
log_min_messages = warning
log_line_prefix = '%m [%p] %b '
restart_after_crash = on
log_statement = 'none'
"""


class Failure(AssertionError):
    pass


class Node:
    """One server: a testgres node plus a cached connection."""

    def __init__(self, name, tg=None):
        self.name = name
        self.tg = tg or testgres.get_new_node(name)
        self._conn = None

    # ----- life ---------------------------------------------------------------

    @classmethod
    def primary(cls, name="primary", extra=""):
        n = cls(name)
        n.tg.init(allow_streaming=True)
        n.tg.append_conf(BASE_CONF + extra)
        n.start()
        n.sql("CREATE EXTENSION IF NOT EXISTS cuckoo")
        return n

    @property
    def data(self):
        return self.tg.data_dir

    @property
    def port(self):
        return self.tg.port

    @property
    def cuckoo_dir(self):
        return os.path.join(self.data, "cuckoo")

    def start(self):
        if not self.try_start():
            raise Failure(f"{self.name} did not start: {self.log_tail()}")
        return self

    def start_nowait(self):
        """Starts the server without waiting for it to accept connections."""
        self.close()
        subprocess.run([os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-l", self.tg.pg_log_file, "-W", "start"], capture_output=True, text=True, check=True)
        time.sleep(1)
        self._sync_state()

    def try_start(self, timeout=120):
        """Starts the server; False if it does not come up."""
        self.close()
        r = subprocess.run([os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-l", self.tg.pg_log_file, "-w", "-t", str(timeout), "start"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return False
        self._sync_state()
        self.wait_ready()
        return True

    def stop(self, mode="fast", timeout=120):
        """pg_ctl stop; True if the server stopped."""
        self.close()
        r = subprocess.run([os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "-t", str(timeout), "stop"],
                           capture_output=True, text=True)
        self._sync_state()
        return r.returncode == 0

    def _sync_state(self):
        # testgres keeps the postmaster's pid to know whether the node runs.
        pids = self.server_pids()
        self.tg._manually_started_pm_pid = pids[0] if pids and self.running() else None

    def crash(self):
        """kill -9 of the postmaster and every server process."""
        self.close()
        pids = self.server_pids()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in range(200):
            if not any(_alive(p) for p in pids):
                break
            time.sleep(0.05)
        pidfile = os.path.join(self.data, "postmaster.pid")
        if os.path.exists(pidfile):
            os.unlink(pidfile)
        self._sync_state()

    def kill_backend(self):
        """kill -9 of one backend: the postmaster takes the server through crash recovery."""
        c = self.connect()
        pid = c.run("SELECT pg_backend_pid()")[0][0]
        self.close()
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.3)
        self.wait_ready()

    def server_pids(self):
        pidfile = os.path.join(self.data, "postmaster.pid")
        try:
            with open(pidfile) as f:
                pm = int(f.readline())
        except (OSError, ValueError):
            return []
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pm)], capture_output=True, text=True).stdout.split()
        return [pm] + [int(x) for x in out]

    def running(self):
        pidfile = os.path.join(self.data, "postmaster.pid")
        try:
            with open(pidfile) as f:
                return _alive(int(f.readline()))
        except (OSError, ValueError):
            return False

    def wait_ready(self, timeout=120):
        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                self.sql("SELECT 1")
                return
            except Exception:
                time.sleep(0.1)
        raise Failure(f"{self.name} did not accept connections: {self.log_tail()}")

    def log_tail(self, n=40):
        try:
            with open(self.tg.pg_log_file) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def log_text(self):
        try:
            with open(self.tg.pg_log_file) as f:
                return f.read()
        except OSError:
            return ""

    def cleanup(self):
        self.close()
        try:
            if self.running():
                self.stop("immediate")
            if os.path.isdir(self.cuckoo_dir):
                os.chmod(self.cuckoo_dir, 0o700)
        finally:
            import shutil
            shutil.rmtree(self.tg.base_dir, ignore_errors=True)
            self.tg._release_resources()

    # ----- SQL ----------------------------------------------------------------

    def close(self):
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def conn(self):
        if self._conn is None:
            self._conn = pg8000.native.Connection("postgres", host="127.0.0.1", port=self.port, database="postgres")
        return self._conn

    def sql(self, q, **params):
        try:
            return self.conn().run(q, **params)
        except (pg8000.exceptions.InterfaceError, OSError):
            self.close()
            raise

    def connect(self, user="postgres"):
        """A connection of its own (for a statement run from another thread)."""
        return pg8000.native.Connection(user, host="127.0.0.1", port=self.port, database="postgres")

    def background(self, q):
        """Runs `q` in a thread on a connection of its own; returns the thread
        (errors, such as the server crashing under it, are ignored)."""
        import threading

        def run():
            try:
                c = self.connect()
                try:
                    c.run(q)
                finally:
                    c.close()
            except Exception:
                pass
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def one(self, q, **params):
        return self.sql(q, **params)[0][0]

    def lsn(self):
        if self.in_recovery():
            return self.one("SELECT pg_last_wal_replay_lsn()::text")
        return self.one("SELECT pg_current_wal_insert_lsn()::text")

    def in_recovery(self):
        return self.one("SELECT pg_is_in_recovery()")

    def checkpoint(self):
        self.sql("CHECKPOINT")

    # ----- replication and backups ---------------------------------------------

    def standby(self, name="standby", slot=None):
        """A streaming hot standby made with pg_basebackup."""
        b = self.tg.backup(xlog_method="stream")
        tg = b.spawn_replica(name, slot=slot)
        n = Node(name, tg)
        n.tg.append_conf("hot_standby = on\n")
        n.start()
        return n

    def promote(self):
        self.close()
        subprocess.run([os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-w", "promote"], capture_output=True, text=True, check=True)
        self.wait_ready()
        self.wait_recovery_end("did not finish promotion")

    def wait_recovery_end(self, what="recovery did not end", timeout=120):
        """Waits until the server is out of recovery (a Failure saying `what` if not in `timeout` s)."""
        t0 = time.time()
        while self.in_recovery():
            if time.time() - t0 > timeout:
                raise Failure(f"{self.name}: {what}")
            time.sleep(0.1)

    def wait_replay(self, upstream, lsn=None, timeout=300):
        """Waits until this standby has replayed up to `lsn` (default: the upstream's flush position now)."""
        target = lsn or upstream.one("SELECT pg_current_wal_flush_lsn()::text" if not upstream.in_recovery() else "SELECT pg_last_wal_replay_lsn()::text")
        t0 = time.time()
        while True:
            got = self.one(f"SELECT coalesce(pg_last_wal_replay_lsn() >= '{target}'::pg_lsn, false)")
            if got:
                return
            if time.time() - t0 > timeout:
                raise Failure(f"{self.name} did not replay up to {target}: {self.log_tail()}")
            time.sleep(0.05)

    # ----- the directory -------------------------------------------------------

    def break_dir(self):
        """Makes cuckoo/ unwritable (as a full or read-only volume would)."""
        os.chmod(self.cuckoo_dir, 0o500)

    def mend_dir(self):
        os.chmod(self.cuckoo_dir, 0o700)

    def files(self):
        try:
            return sorted(os.listdir(self.cuckoo_dir))
        except FileNotFoundError:
            return []

    # ----- cuckoo ----------------------------------------------------------------

    def state(self, name):
        rows = self.sql("SELECT state, reason, items FROM cuckoo_filters WHERE name = :n", n=name)
        return rows[0] if rows else None

    def found(self, name, keys):
        """How many of `keys` (bigints) the filter says may be present."""
        if not keys:
            return 0
        return self.one("SELECT count(*) FILTER (WHERE x) FROM unnest(cf_contains(:n, CAST(:k AS bigint[]))) x", n=name, k=list(keys))


def pg_upgrade(old, new, extra=""):
    """Makes `new` (a Node not yet initialised) by pg_upgrade of the stopped
    node `old`, with BASE_CONF plus `extra`, and starts it."""
    import tempfile
    new.tg.init(allow_streaming=True)
    new.tg.append_conf(BASE_CONF + extra)
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o700)
        res = subprocess.run([os.path.join(PGBIN, "pg_upgrade"), "-b", PGBIN, "-B", PGBIN, "-d", old.data, "-D", new.data,
                              "-p", str(old.port), "-P", str(new.port), "-U", "postgres"], cwd=d, capture_output=True, text=True)
        if res.returncode != 0:
            raise Failure(f"pg_upgrade failed: {res.stdout[-2000:]} {res.stderr[-2000:]}")
    new.start()


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def wal_bytes(node, since):
    return int(node.one(f"SELECT pg_current_wal_insert_lsn() - '{since}'::pg_lsn"))


def lsn_ge(a, b):
    return _lsn(a) >= _lsn(b)


def _lsn(s):
    hi, lo = s.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def check_holds(node, name, keys, what=""):
    """The filter is ready and finds every key of `keys`, or it says it needs a reload."""
    st = node.state(name)
    if st is None:
        raise Failure(f"{node.name}{what}: filter {name!r} does not exist (expected {len(keys)} keys)")
    state, reason, items = st
    if state != "ready":
        return state, reason
    got = node.found(name, keys)
    if got != len(keys):
        raise Failure(f"{node.name}{what}: filter {name!r} is ready but finds {got} of {len(keys)} acknowledged keys")
    return state, reason


def expect_ready(node, name, keys, what=""):
    state, reason = check_holds(node, name, keys, what)
    if state != "ready":
        raise Failure(f"{node.name}{what}: filter {name!r} is {state!r} ({reason}), expected ready with {len(keys)} keys")


def grep_log(node, pattern):
    return re.findall(pattern, node.log_text())
