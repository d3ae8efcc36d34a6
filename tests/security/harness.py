"""A throwaway cluster for the security tests (tests/security), and calls made
as an unprivileged role that are timed, classified and checked for their
effect on the whole server.

The postmaster is started from a shell with `ulimit -v` (4 GiB by default), so
every server process is limited in address space: an allocation that a
backend cannot get must become an ERROR in that backend, never an abort that
takes the server through a crash restart.

Runs as the postgres user (run.sh drops to it) against the installed
extension; the cluster lives in its own temporary directory on a free port.

How a restart is seen. `pg_postmaster_start_time()` does NOT change when the
postmaster reinitializes after a backend crash (it is set once, when the
postmaster starts; checked on PostgreSQL 15: a backend killed by SIGABRT left
it unchanged). So a restart is also detected by: the checkpointer's PID (every
child is started anew after a crash), a non-durable named filter made at
start (gone after any crash, it lives in shared memory only), the loss of a
superuser connection kept open for the purpose, and the server log.
"""

import io
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pg8000.native
import pg8000.exceptions

PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
# Limits of every call made as the tenant.
STATEMENT_TIMEOUT = 3.0
# A call that has not ended this long after statement_timeout ignores cancel
# and timeout: a failure, and the harness ends the backend itself.
TIMEOUT_SLACK = 20.0
VMEM_KB = int(os.environ.get("SECURITY_ULIMIT_KB", 4 * 1024 * 1024))
HEAP_ADDRESS = re.compile(r"0x[0-9a-f]{6,}")
SEEDS_NAMED = re.compile(r"hash seeds differ \(0x[0-9a-f]+ and 0x[0-9a-f]+\)")
# What the postmaster logs when a server process died abnormally.
CRASH_LOG = re.compile(r"terminated by signal|was terminated by exception|terminating any other active server processes|\bPANIC:|all server processes terminated; reinitializing")
SENTINEL = "security_sentinel"


class Failure(AssertionError):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Outcome:
    """How one call ended: rows, or an error with its SQLSTATE; or the
    connection was lost (`lost`), or the call did not end in time (`hung`)."""

    def __init__(self, sql):
        self.sql = sql
        self.rows = None
        self.sqlstate = None
        self.severity = None
        self.message = self.detail = self.hint = None
        self.elapsed = 0.0
        self.lost = False
        self.hung = False
        self.exc = None

    @property
    def ok(self):
        return not self.lost and not self.hung and self.sqlstate is None

    @property
    def state(self):
        """A short name for histograms: the SQLSTATE, OK, LOST or HUNG."""
        if self.hung:
            return "HUNG"
        if self.lost:
            return "LOST"
        return self.sqlstate or "OK"

    def texts(self):
        return [t for t in (self.message, self.detail, self.hint) if t]

    def heap_address(self):
        """An error text that shows a memory address, or None. (The hash seeds
        a union names are the caller's data, not addresses.)"""
        for t in self.texts():
            if HEAP_ADDRESS.search(SEEDS_NAMED.sub("", t)):
                return t
        return None

    def describe(self):
        if self.hung:
            return f"no answer after {self.elapsed:.1f} s (ignores cancel/timeout)"
        if self.lost:
            return f"connection lost after {self.elapsed:.2f} s ({self.exc})"
        if self.sqlstate:
            d = f" DETAIL: {self.detail}" if self.detail else ""
            h = f" HINT: {self.hint}" if self.hint else ""
            return f"{self.severity or 'ERROR'} {self.sqlstate} in {self.elapsed:.2f} s: {self.message}{d}{h}"
        return f"OK in {self.elapsed:.2f} s"


class Conn:
    """A connection whose every call is timed and classified, never raises for
    what the server answers, and gives up `timeout + TIMEOUT_SLACK` seconds
    into a call (the socket's timeout)."""

    def __init__(self, cluster, user="tenant", database=None, timeout=STATEMENT_TIMEOUT, socket_timeout=None, log=None):
        """`timeout`: the session's statement_timeout in seconds (0: none; None:
        left as the role's); the socket gives up `socket_timeout` seconds into
        a call (default: the timeout plus TIMEOUT_SLACK; none without a
        timeout). `log`: a list every outcome is appended to."""
        self.cluster = cluster
        self.user = user
        self.database = database or cluster.db
        self.timeout = timeout
        if socket_timeout is None and timeout:
            socket_timeout = timeout + TIMEOUT_SLACK
        self.socket_timeout = socket_timeout
        self.log = log
        self.c = pg8000.native.Connection(user, host="127.0.0.1", port=cluster.port, database=self.database, timeout=socket_timeout)
        self.pid = self.c.run("SELECT pg_backend_pid()")[0][0]
        if timeout is not None:
            self.c.run(f"SET statement_timeout = '{int(timeout * 1000)}ms'")
        self.dead = False

    def call(self, sql, stream=None, **params):
        o = Outcome(sql)
        if self.dead:
            o.lost = True
            o.exc = "connection was already lost"
            return o
        t0 = time.monotonic()
        try:
            o.rows = self.c.run(sql, stream=stream, **params) if stream is not None else self.c.run(sql, **params)
        except pg8000.exceptions.DatabaseError as e:
            f = e.args[0] if e.args and isinstance(e.args[0], dict) else {}
            o.sqlstate = f.get("C", "?????")
            o.severity = f.get("S")
            o.message, o.detail, o.hint = f.get("M"), f.get("D"), f.get("H")
            if o.severity in ("FATAL", "PANIC"):
                self.dead = True
        except (pg8000.exceptions.InterfaceError, OSError, struct.error, EOFError) as e:
            o.lost = True
            o.exc = f"{type(e).__name__}: {e}"
            self.dead = True
        o.elapsed = time.monotonic() - t0
        if o.lost and self.socket_timeout and o.elapsed >= self.socket_timeout - 0.5:
            o.hung = True
        if self.log is not None:
            self.log.append(o)
        return o

    def run(self, sql, **params):
        """For setup: rows, or raises Failure."""
        o = self.call(sql, **params)
        if not o.ok:
            raise Failure(f"{self.user}: {sql[:200]}: {o.describe()}")
        return o.rows

    def one(self, sql, **params):
        return self.run(sql, **params)[0][0]

    def close(self):
        try:
            self.c.close()
        except Exception:
            pass
        self.dead = True


class Cluster:
    """initdb in a temporary directory, cuckoo preloaded, a free port, the
    postmaster started under `ulimit -v`; a database `secdb` (and `secdb2`),
    the roles `tenant` and `other` (LOGIN, nothing else), a superuser
    connection that watches for restarts."""

    def __init__(self, name="security", shared_memory="64MB", extra_conf=""):
        self.base = tempfile.mkdtemp(prefix=f"cuckoo-{name}-")
        os.chmod(self.base, 0o700)
        self.data = os.path.join(self.base, "data")
        self.log = os.path.join(self.base, "server.log")
        self.port = free_port()
        self.db = "secdb"
        self.shared_memory = shared_memory
        self.extra_conf = extra_conf
        self.monitor = None
        self.baseline = None
        self.log_offset = 0
        self.killed_pids = set()
        self.excluded = []
        self.pending_log = []
        self.restarts_caused = 0

    # ----- life ---------------------------------------------------------------

    def init(self):
        r = subprocess.run([os.path.join(PGBIN, "initdb"), "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure(f"initdb failed: {r.stderr}")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"""
port = {self.port}
listen_addresses = '127.0.0.1'
unix_socket_directories = '{self.base}'
shared_preload_libraries = 'cuckoo'
cuckoo.shared_memory = {self.shared_memory}
max_connections = 40
shared_buffers = 128MB
fsync = off
jit = off
restart_after_crash = on
max_wal_size = 2GB
log_line_prefix = '%m [%p] %b '
log_min_messages = warning
log_min_error_statement = panic
log_checkpoints = off
{self.extra_conf}
""")
        return self

    def start(self):
        cmd = f'ulimit -v {VMEM_KB} && exec "$0" -D "$1" -l "$2" -w -t 120 start'
        r = subprocess.run(["bash", "-c", cmd, os.path.join(PGBIN, "pg_ctl"), self.data, self.log], capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure(f"the server did not start: {r.stdout}{r.stderr}{self.log_tail()}")
        limit = self.address_space_limit()
        if limit != VMEM_KB * 1024:
            raise Failure(f"the postmaster's address space limit is {limit}, expected {VMEM_KB * 1024} (ulimit -v {VMEM_KB})")
        self.wait_ready()
        return self

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def address_space_limit(self):
        pid = self.postmaster_pid()
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max address space"):
                    v = line.split()[3]
                    return None if v == "unlimited" else int(v)
        return None

    def stop(self):
        self.close_monitor()
        if self.postmaster_pid():
            subprocess.run([os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"], capture_output=True, text=True)

    def cleanup(self):
        try:
            self.stop()
        finally:
            if os.environ.get("SECURITY_KEEP"):
                print(f"(kept {self.base})")
            else:
                shutil.rmtree(self.base, ignore_errors=True)

    def wait_ready(self, timeout=120):
        t0 = time.time()
        last = None
        while time.time() - t0 < timeout:
            try:
                c = pg8000.native.Connection("postgres", host="127.0.0.1", port=self.port, database="postgres", timeout=10)
                c.run("SELECT 1")
                c.close()
                return
            except Exception as e:
                last = e
                time.sleep(0.2)
        raise Failure(f"the server does not accept connections: {last}\n{self.log_tail()}")

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=30):
        return "".join(self.log_text().splitlines(True)[-n:])

    # ----- connections ----------------------------------------------------------

    def su(self, database=None, timeout=None, **kw):
        """A superuser connection (no statement timeout unless asked)."""
        return Conn(self, "postgres", database or self.db, timeout=timeout, **kw)

    def tenant(self, user="tenant", database=None, timeout=STATEMENT_TIMEOUT, **kw):
        return Conn(self, user, database or self.db, timeout=timeout, **kw)

    def setup(self):
        """The databases, roles and the restart watch."""
        c = self.su("postgres")
        for db in (self.db, self.db + "2"):
            c.run(f"CREATE DATABASE {db}")
        for role in ("tenant", "other"):
            c.run(f"CREATE ROLE {role} LOGIN")
            # The tenant's every call is under statement_timeout; a case that
            # needs longer sets it in its own session.
            c.run(f"ALTER ROLE {role} SET statement_timeout = '{int(STATEMENT_TIMEOUT * 1000)}ms'")
        c.close()
        for db in (self.db, self.db + "2"):
            c = self.su(db)
            c.run("CREATE EXTENSION cuckoo")
            # PostgreSQL 15: the public schema is not writable by default.
            c.run("GRANT CREATE ON SCHEMA public TO tenant, other")
            c.run(f"GRANT CREATE ON DATABASE {db} TO tenant, other")
            c.close()
        self.rebaseline()

    # ----- the restart watch ------------------------------------------------------

    def close_monitor(self):
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None

    def _monitor(self):
        if self.monitor is None or self.monitor.dead:
            self.monitor = Conn(self, "postgres", "postgres", timeout=None)
        return self.monitor

    def _state(self):
        m = self._monitor()
        start = m.one("SELECT pg_postmaster_start_time()::text")
        ckpt = m.one("SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
        return start, ckpt

    def rebaseline(self):
        """Takes the current server as the one that must not restart (after
        setup, or after the harness itself ended a hung backend)."""
        self.close_monitor()
        self.wait_ready()
        s = self.su()
        if not s.one(f"SELECT count(*) FROM cuckoo_filters WHERE name = '{SENTINEL}'"):
            s.run(f"SELECT cf_create('{SENTINEL}', 100, durable => false)")
            s.run(f"SELECT cf_insert('{SENTINEL}', 1::bigint)")
        s.close()
        self.baseline = self._state()
        self.log_offset = len(self.log_text().encode())

    def health(self):
        """What shows that the server restarted or a process died since the
        baseline: a list of sentences (empty: healthy). Re-baselines after a
        restart, so that each restart is reported once."""
        problems = []
        if self.monitor is not None and not self.monitor.dead and self.monitor.call("SELECT 1").lost:
            problems.append("the superuser watch connection was lost (the postmaster terminated every backend)")
            self.monitor = None
        try:
            start, ckpt = self._state()
        except Exception as e:
            problems.append(f"the server did not answer: {e}")
            self.monitor = None
            self.wait_ready()
            start, ckpt = self._state()
        s = self.su()
        sentinel = s.one(f"SELECT count(*) FROM cuckoo_filters WHERE name = '{SENTINEL}'")
        s.close()
        if self.baseline and start != self.baseline[0]:
            problems.append(f"pg_postmaster_start_time changed: {self.baseline[0]} -> {start}")
        if self.baseline and ckpt != self.baseline[1]:
            problems.append(f"the checkpointer was restarted (pid {self.baseline[1]} -> {ckpt}): the postmaster reinitialized after a crash")
        if not sentinel:
            problems.append(f"the non-durable filter {SENTINEL!r} made at start is gone: shared memory was reinitialized")
        problems += self.pending_log + self.new_log_crashes()
        self.pending_log = []
        if problems:
            self.rebaseline()
        return problems

    def _crash_lines(self, start, end):
        raw = self.log_text().encode()
        text = raw[start:end].decode(errors="replace")
        return [l.strip() for l in text.splitlines() if CRASH_LOG.search(l)], len(raw)

    def new_log_crashes(self):
        """Crash lines the server logged since the last look."""
        lines, size = self._crash_lines(self.log_offset, None)
        self.log_offset = size
        return ["server log: " + l for l in lines]

    def all_log_crashes(self):
        """Every crash line of the whole log, but for the restarts the harness
        caused itself by killing a backend that ignored its timeout."""
        raw = self.log_text().encode()
        keep, at = [], 0
        for a, b in self.excluded + [(len(raw), len(raw))]:
            keep += self._crash_lines(at, a)[0]
            at = b
        return keep

    def end_backend(self, pid, wait=5.0):
        """Ends a backend that ignored its statement timeout: cancel, then
        terminate, then (it still runs) SIGKILL, which this cluster's
        postmaster answers with a crash restart (not counted as a crash: the
        hang is the failure). Returns what it took."""
        m = self.su("postgres")
        try:
            for how in ("pg_cancel_backend", "pg_terminate_backend"):
                m.call(f"SELECT {how}({pid})")
                t0 = time.time()
                while time.time() - t0 < wait:
                    if not m.one(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}"):
                        return how
                    time.sleep(0.1)
        finally:
            m.close()
        # Whatever the server logged before the kill is still looked at.
        before = self.new_log_crashes()
        start = self.log_offset
        self.close_monitor()
        self.killed_pids.add(pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return "exited"
        time.sleep(1)
        self.wait_ready()
        self.rebaseline()
        self.excluded.append((start, self.log_offset))
        self.pending_log += before
        self.restarts_caused += 1
        return "SIGKILL (cancel and terminate had no effect)"

    def describe_build(self):
        """The library this cluster runs (the tests run against whatever is
        installed)."""
        so = os.path.join(subprocess.run([os.path.join(PGBIN, "pg_config"), "--pkglibdir"], capture_output=True, text=True).stdout.strip(), "cuckoo.so")
        s = self.su()
        v = s.one("SELECT cuckoo_library_version()")
        s.close()
        try:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(os.stat(so).st_mtime))
        except OSError:
            when = "?"
        return f"cuckoo {v} ({so}, installed {when})"

    def self_test(self):
        """Shows that the harness sees what it must: a backend that dies (here
        of SIGABRT, sent by the harness) is reported as a restart, and a call
        that never ends (a backend stopped with SIGSTOP) is reported as hung
        and ended. Raises Failure otherwise; the restarts it causes are left
        out of the final log check."""
        start = self.new_log_crashes() and self.log_offset or self.log_offset
        c = self.tenant()
        os.kill(c.pid, signal.SIGABRT)
        o = c.call("SELECT 1")
        if not o.lost:
            raise Failure(f"self-test: a call on a backend killed with SIGABRT did not lose its connection: {o.describe()}")
        time.sleep(1)
        problems = self.health()
        if not any("checkpointer" in p for p in problems) or not any("sentinel" in p or "is gone" in p for p in problems):
            raise Failure(f"self-test: a backend killed with SIGABRT was not seen as a restart: {problems}")
        seen = [p for p in problems]
        self.excluded.append((start, self.log_offset))
        c = Conn(self, "tenant", self.db, timeout=1, socket_timeout=3)
        os.kill(c.pid, signal.SIGSTOP)
        o = c.call("SELECT 1")
        if not o.hung:
            os.kill(c.pid, signal.SIGCONT)
            raise Failure(f"self-test: a call to a stopped backend was not seen as hung: {o.describe()}")
        how = self.end_backend(c.pid, wait=1)
        if not how.startswith("SIGKILL"):
            raise Failure(f"self-test: a stopped backend was ended by {how}")
        after = self.health()
        if after:
            raise Failure(f"self-test: after the harness ended a hung backend the server is not seen as healthy: {after}")
        return seen

    def backend_alive(self, pid):
        m = self.su("postgres")
        try:
            return bool(m.one(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}"))
        finally:
            m.close()


def cancel_after(cluster, pid, delay, how="pg_cancel_backend"):
    """Cancels (or terminates) backend `pid` from a superuser connection
    `delay` seconds from now, in a thread; returns the thread (its `.at` is
    the moment the signal was sent)."""
    def run():
        time.sleep(delay)
        try:
            c = cluster.su("postgres")
            t.at = time.monotonic()
            c.call(f"SELECT {how}({pid})")
            c.close()
        except Exception as e:
            t.error = e
    t = threading.Thread(target=run, daemon=True)
    t.at = None
    t.error = None
    t.start()
    return t


def copy_binary(rows):
    """A COPY ... (FORMAT binary) stream of rows of raw fields (bytes, or None
    for NULL): the receive functions get exactly these bytes."""
    out = io.BytesIO()
    out.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
    for r in rows:
        out.write(struct.pack(">h", len(r)))
        for f in r:
            if f is None:
                out.write(struct.pack(">i", -1))
            else:
                out.write(struct.pack(">i", len(f)) + f)
    out.write(struct.pack(">h", -1))
    out.seek(0)
    return out


def int4(v):
    return struct.pack(">i", v)


# ----- values made by hand ------------------------------------------------------

DEFAULT_SEED = 0x6375636B6F6F2131  # "cuckoo!1"


def v2_body(f, b, m, items, capacity, data, key=(0, 0), mapping=2, seed=DEFAULT_SEED):
    """A format-2 body (src/filter/dense.rs) with these bucket bytes."""
    enc = 2 if b == 4 else 1
    return b"CKOF" + bytes([2, 1, f, b, mapping, enc, key[0], 0]) + struct.pack("<IQQQQ", key[1], seed, m, items, capacity) + data


def full_growth_value(m, expansion=64, fpp=0.002):
    """A format-3 value of one table that grows (src/filter/multi.rs): m
    buckets of one 16-bit slot, every one holding fingerprint 1, so that the
    next insert must add a table `expansion` times its capacity."""
    t = v2_body(16, 1, m, m, m, b"\x01\x00" * m + b"\x00" * 7)
    return b"CKOF" + bytes([3, 1, 1, 0]) + struct.pack("<II", expansion, 0) + struct.pack("<d", fpp) + struct.pack("<Q", len(t)) + t


def sharded_bytea(hashes, kind=0, oid=0, fpp=0.0, capacity=0):
    """A cf_sharded_agg state in its bytea form (CFS2, src/sql/value/sharded.rs)."""
    return b"CFS2" + struct.pack("<dQQ", fpp, capacity, len(hashes)) + bytes([kind, 0, 0, 0]) + struct.pack("<I", oid) + b"".join(struct.pack("<Q", h) for h in hashes)


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def compact_with_key(compact, kind, oid):
    """A cf_sharded_state's compact form (no fpp, no capacity flags, a
    built-in key type) with its key type replaced by (kind, OID)."""
    assert compact[:3] == b"CS\x01" and compact[3] == 0, compact[:4]
    at = 5
    # skip the OID varint
    while compact[at] & 0x80:
        at += 1
    at += 1
    return compact[:4] + bytes([kind]) + varint(oid) + compact[at:]


# The state of issue 29: nine distinct hashes with one fingerprint and bucket
# (they never fit one filter); the final function retried 1% larger without
# end (96 s under a 5 s statement_timeout).
HANG_STATE = "cs1:Q1MBAAAACfCsaCQAAADA////PwAAAPj///8HAAAA/////wAAAOD///8fAAAA/P///wMAAID///9/AAAA8P///w8AAAD+////AQAAAA=="
HANG_HASHES = [0x1234567800000000 + n for n in range(9)]
