"""harness.py - shared helpers for lb's integration tests.

Every test file starts the real lb binary (LB_BIN) against real backends that
run as threads of the test process, all on 127.0.0.1, and drives lb through
real sockets and signals. Nothing is mocked.

Habits (STYLE.md section 10):
  - the harness picks ports: backends bind port 0 and keep their socket; lb's
    ports come from free_port(), which probes ports outside the kernel's
    ephemeral range so that no outgoing connection can take them meanwhile;
  - waiting is polling with a deadline (wait_for), never a fixed sleep;
  - every process and socket a test starts is stopped at teardown, also on
    failure (unittest cleanups), and teardown fails when lb died by a signal,
    did not exit on SIGTERM, printed a sanitizer report or logged an error
    event the test did not expect;
  - a test's threads (client loops, load, backends) are harness Threads
    (start_thread): what one raises fails its test, at join() or at the end
    of the test, which joins every Thread the test started; an exception in
    any other thread of the process fails the running test too;
  - a skip is a pass on a developer's machine and a failure in CI (CI=true),
    unless the test gives a reason CI accepts: skip_if(cond, reason,
    ci_accepts=True) on a class or self.skip(reason, ci_accepts=True) in a
    test. CI accepts only what no CI machine can change (a sanitized build is
    not packaged); a missing tool, root or a DNS quirk is CI's to fix, and
    its skip fails there. The last line of a run is "N passed, N failed,
    N skipped".

Run a file directly:  LB_BIN=build/lb LB_SOURCE_DIR=. python3 tests/integration/test_relay.py
Run one test:         ... python3 tests/integration/test_relay.py RelayTest.test_integrity
"""

import atexit
import datetime
import hashlib
import json
import os
import queue
import random
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest

HOST = "127.0.0.1"
CI = os.environ.get("CI", "").lower() == "true"
LB_BIN = os.environ.get("LB_BIN", "")
LB_BIN = os.path.abspath(LB_BIN) if LB_BIN else ""     # lb runs in its temp dir
SOURCE_DIR = os.environ.get("LB_SOURCE_DIR", "")

# Deadlines are generous because the suite also runs against an ASan/UBSan
# build on a busy 2-core CI machine; they cost nothing when things work.
READY_TIMEOUT = 20.0
EXIT_TIMEOUT = 20.0
IO_TIMEOUT = 10.0

SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "AddressSanitizer:",
    "LeakSanitizer",
    "runtime error:",
    "ThreadSanitizer",
)


def _binary_is_sanitized(path):
    """True when LB_BIN was built with ASan (its memory use is not
    comparable: freed blocks sit in a quarantine)."""
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


SANITIZED = _binary_is_sanitized(LB_BIN) if LB_BIN else False

# ASan keeps freed blocks in a quarantine (256 MB by default) to catch a use
# after free, so an ASan lb's RSS climbs to the quarantine's size and
# wanders as it cycles (test_reload_scale: about 260 MB, by 20 MB), which
# hides any growth. Started with this environment (Lb's env=), an ASan lb
# has a 1 MB quarantine (a use soon after a free is still caught) and an RSS
# nearly as steady as the optimised build's (with 8 MB, the short soak's
# grew by the quarantine filling after its warm-up), so a test can judge
# its growth in every build. None (nothing added) for the other builds.
STEADY_RSS_ENV = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1"} \
    if SANITIZED else None


# ----------------------------------------------------------------- waiting

def wait_for(cond, timeout, what, interval=0.01):
    """Polls cond() until it returns a truthy value, which is returned.
    Raises AssertionError naming `what` (a string, or a callable returning
    one, evaluated at failure time to describe the state) when timeout
    seconds pass first. Bounded in time; the poll interval backs off to
    100 ms."""
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        value = cond()
        if value:
            return value
        now = time.monotonic()
        if now >= deadline:
            desc = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {desc}")
        time.sleep(min(delay, deadline - now))
        delay = min(delay * 2, 0.1)


# ----------------------------------------------------------------- threads

_threads = []                   # the Threads started since the running test began
_stray_errors = []              # exceptions of other threads (threading.excepthook)
_threads_lock = threading.Lock()


class Thread(threading.Thread):
    """A daemon thread of a test whose failure is not lost: what its target
    raises is kept in .error, and join() raises it as an AssertionError with
    the thread's traceback (once). join() also fails when the thread is still
    running at its timeout (every loop of a test is bounded in time). The
    end of an LbTestCase test joins every Thread started during it, after
    the test's own cleanups have stopped its loops and closed its sockets."""

    def __init__(self, target, *args, name=None, **kwargs):
        super().__init__(target=target, args=args, kwargs=kwargs, name=name, daemon=True)
        self.error = None
        self._reported = False
        with _threads_lock:
            _threads.append(self)

    def run(self):
        try:
            super().run()
        except BaseException:
            self.error = traceback.format_exc()

    def join(self, timeout=EXIT_TIMEOUT):
        super().join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} still running {timeout:.1f}s after join")
        self.raise_error()

    def wait(self, timeout):
        """Waits up to timeout for the thread to end, without judging it;
        True when it has ended."""
        threading.Thread.join(self, timeout)
        return not self.is_alive()

    def raise_error(self):
        if self.error is not None and not self._reported:
            self._reported = True
            raise AssertionError(f"thread {self.name} failed:\n{self.error}")


def spawn_logged(args, log_path, **kw):
    """A server process of a test, its output appended to log_path, in a
    session of its own (signals go to its whole group), stopped at exit
    if the test did not."""
    log = open(log_path, "ab")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True, **kw)
    log.close()
    _all_procs.append(proc)
    return proc


def start_thread(target, *args, name=None, **kwargs):
    """Starts target(*args, **kwargs) in a Thread (see there); returns it."""
    t = Thread(target, *args, name=name or getattr(target, "__name__", None), **kwargs)
    t.start()
    return t


_print_thread_exception = threading.excepthook


def _excepthook(hook_args):
    """A thread that is not a Thread (a library's) fails the running test;
    its traceback is printed as Python does, also outside a test."""
    _print_thread_exception(hook_args)
    with _threads_lock:
        _stray_errors.append(
            f"thread {hook_args.thread.name if hook_args.thread else '?'}:\n" + "".join(
                traceback.format_exception(hook_args.exc_type, hook_args.exc_value,
                                           hook_args.exc_traceback)))


threading.excepthook = _excepthook


def _check_threads(timeout=EXIT_TIMEOUT):
    """Joins the Threads started since the test began (within one shared
    deadline) and raises for the first failure: a thread that raised, one
    still running, or an exception in another thread."""
    with _threads_lock:
        threads = list(_threads)
        stray = list(_stray_errors)
        del _threads[:]
        del _stray_errors[:]
    deadline = time.monotonic() + timeout
    problems = []
    for t in threads:
        t_left = max(0.0, deadline - time.monotonic())
        if not t.wait(t_left):
            problems.append(f"thread {t.name} still running at the end of the test")
        elif t.error is not None and not t._reported:
            t._reported = True
            problems.append(f"thread {t.name} failed:\n{t.error}")
    problems += stray
    if problems:
        raise AssertionError("\n".join(problems))


# ------------------------------------------------------------------- ports

_used_ports = set()
_ports_lock = threading.Lock()
_rng = random.Random()          # seeded from os.urandom: differs per process


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on, for lb to bind.

    Picked at random outside the ephemeral range, so that no connect() of any
    process (lb's own upstream connections included) can be given it as a
    local port before lb binds it, and parallel test processes rarely pick
    the same one. Probed without SO_REUSEADDR, so a port in TIME_WAIT is
    skipped too."""
    lo, hi = _ephemeral_range()
    if lo > 12000:
        span = (10000, lo - 1)
    elif hi < 63000:
        span = (hi + 1, 65535)
    else:
        span = None
    for _ in range(500):
        if span is None:
            s = socket.socket()
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            s.close()
        else:
            port = _rng.randint(*span)
            s = socket.socket()
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            finally:
                s.close()
        with _ports_lock:
            if port in _used_ports:
                continue
            _used_ports.add(port)
        return port
    raise RuntimeError("free_port: no free port found in 500 tries")


class RefusedPort:
    """A port where a connect is refused: a socket bound to it but not
    listening. Keeping the socket (without SO_REUSEADDR) reserves the port, so
    nothing else can start listening there during the test."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.port = self.sock.getsockname()[1]
        self.addr = f"{HOST}:{self.port}"

    def stop(self):
        self.sock.close()


class Blackhole:
    """A port where a connect never completes (SYNs are dropped).

    Linux drops a SYN when the listener's accept queue is full. A listener
    with listen(0) holds one established connection, so one filler client
    that is never accepted fills it, and a second one keeps retrying its SYN.
    The constructor checks that a probe connect really times out."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.addr = f"{HOST}:{self.port}"
        self.fillers = []
        first = socket.create_connection((HOST, self.port), timeout=5)
        self.fillers.append(first)
        second = socket.socket()
        second.setblocking(False)
        second.connect_ex((HOST, self.port))
        self.fillers.append(second)
        probe = socket.socket()
        probe.settimeout(0.5)
        try:
            probe.connect((HOST, self.port))
        except (socket.timeout, TimeoutError):
            pass
        else:
            raise AssertionError(
                "Blackhole: a connect to a full listen(0) queue completed; this "
                "kernel does not drop SYNs on accept-queue overflow")
        finally:
            probe.close()

    def stop(self):
        for s in self.fillers:
            s.close()
        self.sock.close()


# ---------------------------------------------------------------- backends

_held_ports = []


def _hold_port(port):
    """Keeps a closed backend's port bound, not listening, for the rest of
    the test process: a connect is refused there as at any closed port, and
    the kernel gives the port to no other bind(0). Without it, another test
    running beside this one could get the port for a backend of its own,
    which this test's lb, still checking the closed one, would then reach
    (a CI run saw that lb's probes arrive as empty requests). SO_REUSEADDR,
    so that a backend started again on the same port may bind it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((HOST, port))
    except OSError:
        s.close()
        return
    _held_ports.append(s)


class Backend:
    """The one test server of the harness: a TCP server on 127.0.0.1 (port
    picked by the kernel, or `port`; SO_REUSEPORT set when `reuseport`) that
    runs handler(backend, conn) in a thread per accepted connection; the
    behaviour is the handler (NamedBackend, EchoBackend and the tests' own
    subclasses only pass one in).

    accept() blocks (no polling delay: a connect is accepted at once);
    close_listener() shuts the listener, which wakes it, so new connects are
    refused while the accepted connections go on being served; stop() does
    that, then shuts the connections and joins their handlers.

    Counts connections thread-safely: accepted (ever), active (handler still
    running), ended(conn_id) (the handler of the conn_id-th accepted
    connection returned). A handler reports findings with backend.report(x)
    (read with backend.reports, a queue.Queue). Exceptions other than socket
    errors are kept in backend.errors: LbTestCase.backend fails the test on
    them at teardown. The socket is closed when the handler returns."""

    def __init__(self, handler, name="backend", backlog=128, conn_timeout=30.0, port=0,
                 reuseport=False):
        self.name = name
        self.handler = handler
        self.conn_timeout = conn_timeout
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuseport:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.sock.bind((HOST, port))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.addr = f"{HOST}:{self.port}"
        self.reports = queue.Queue()
        self.errors = []
        self._lock = threading.Lock()
        self._accepted = 0
        self._active = 0
        self._ended = set()
        self._conns = set()
        self._threads = []
        self._stopping = threading.Event()
        self._listener_closed = False
        self._acceptor = start_thread(self._accept_loop, name=f"{name}-accept")

    @property
    def accepted(self):
        with self._lock:
            return self._accepted

    @property
    def active(self):
        with self._lock:
            return self._active

    def ended(self, conn_id):
        with self._lock:
            return conn_id in self._ended

    def report(self, item):
        self.reports.put(item)

    def next_report(self, timeout=IO_TIMEOUT):
        try:
            return self.reports.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"backend {self.name}: no report within {timeout}s")

    def _accept_loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                break           # shut down by close_listener()
            if self._stopping.is_set():
                conn.close()
                break
            conn.settimeout(self.conn_timeout)
            with self._lock:
                self._accepted += 1
                self._active += 1
                conn_id = self._accepted
                self._conns.add(conn)
            t = start_thread(self._serve, conn, conn_id, name=f"{self.name}-conn")
            with self._lock:
                self._threads.append(t)
        self.sock.close()       # here, by the only thread that uses it

    def _serve(self, conn, conn_id):
        try:
            self.handler(self, conn)
        except (OSError, socket.timeout):
            pass                     # resets and timeouts are the tests' business
        except Exception:
            self.errors.append(traceback.format_exc())
        finally:
            with self._lock:
                self._active -= 1
                self._ended.add(conn_id)
                self._conns.discard(conn)
            conn.close()

    def close_listener(self):
        """From now on connects are refused; accepted connections go on."""
        with self._lock:
            if self._listener_closed:
                return
            self._listener_closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)    # wakes accept() with EINVAL
        except OSError:
            pass
        self._acceptor.join(timeout=5)
        _hold_port(self.port)

    def stop(self):
        self._stopping.set()
        self.close_listener()
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)   # wakes a handler blocked in recv
            except OSError:
                pass
        # A handler still running is judged at the end of the test
        # (_check_threads), with the other threads; no need to fail here.
        deadline = time.monotonic() + 5
        for t in threads:
            t.wait(max(0.0, deadline - time.monotonic()))


def recv_head(conn, limit=65536):
    """Reads from conn until the end of an HTTP head (an empty line);
    returns what was read, or None when the peer closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > limit:
            raise AssertionError(f"recv_head: no end of head in {limit} bytes")
        d = conn.recv(65536)
        if not d:
            return None
        data += d
    return data


def read_line(conn, limit=65536):
    """Reads up to and including b"\\n" (or EOF); returns the bytes."""
    buf = b""
    while b"\n" not in buf and len(buf) < limit:
        d = conn.recv(4096)
        if not d:
            break
        buf += d
    return buf


def drain_until_eof(conn):
    """Reads and counts bytes until EOF; returns (count, data) where data is
    kept only up to 1 MB."""
    total = 0
    kept = []
    while True:
        d = conn.recv(65536)
        if not d:
            return total, b"".join(kept)
        total += len(d)
        if total <= 1 << 20:
            kept.append(d)


class NamedBackend(Backend):
    """Replies "NAME\\n" to each connection. read_request: first reads a line
    (or EOF) from the client. hold: after replying, keeps the connection open
    until the client side closes (for leastconn and max_connections);
    otherwise closes at once."""

    def __init__(self, name, read_request=False, hold=False):
        def handler(backend, conn):
            if read_request:
                read_line(conn)
            conn.sendall(f"{name}\n".encode())
            if hold:
                drain_until_eof(conn)
        super().__init__(handler, name=name)


class EchoBackend(Backend):
    """Echoes every byte. On EOF from the client it has already written all
    it read, so it shuts its write side down (FIN) and reports
    ("eof", bytes_echoed)."""

    def __init__(self, name="echo"):
        def handler(backend, conn):
            total = 0
            while True:
                d = conn.recv(65536)
                if not d:
                    break
                conn.sendall(d)
                total += len(d)
            conn.shutdown(socket.SHUT_WR)
            backend.report(("eof", total))
        super().__init__(handler, name=name)


# ------------------------------------------------------------------ client

def connect(port, timeout=IO_TIMEOUT, source=None):
    """A client socket connected to 127.0.0.1:port (optionally from source,
    another 127.x.y.z address), with timeout set for later I/O."""
    src = (source, 0) if source else None
    return socket.create_connection((HOST, port), timeout=timeout, source_address=src)


def recv_until_eof(sock, timeout=IO_TIMEOUT, limit=64 << 20):
    """Reads until EOF. Returns (data, how): how is "eof" (orderly FIN),
    "reset" (RST) or "timeout" (deadline passed with the connection still
    open). Raises when more than limit bytes arrive."""
    deadline = time.monotonic() + timeout
    chunks = []
    total = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), "timeout"
        sock.settimeout(remaining)
        try:
            d = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            return b"".join(chunks), "timeout"
        except (ConnectionResetError, BrokenPipeError):
            return b"".join(chunks), "reset"
        if not d:
            return b"".join(chunks), "eof"
        chunks.append(d)
        total += len(d)
        if total > limit:
            raise AssertionError(f"recv_until_eof: more than {limit} bytes")


def recv_exact(sock, n, timeout=IO_TIMEOUT):
    """Reads exactly n bytes; raises AssertionError on EOF, reset or
    timeout."""
    deadline = time.monotonic() + timeout
    buf = bytearray()
    while len(buf) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"recv_exact: got {len(buf)} of {n} bytes in {timeout}s")
        sock.settimeout(remaining)
        try:
            d = sock.recv(n - len(buf))
        except (socket.timeout, TimeoutError):
            continue
        except ConnectionResetError:
            raise AssertionError(f"recv_exact: reset after {len(buf)} of {n} bytes")
        if not d:
            raise AssertionError(f"recv_exact: EOF after {len(buf)} of {n} bytes")
        buf += d
    return bytes(buf)


def request(port, payload=None, timeout=IO_TIMEOUT, source=None):
    """One client connection: connect, send payload (if any), read until
    EOF. Returns (data, how) as recv_until_eof; connect errors raise."""
    s = connect(port, timeout=timeout, source=source)
    try:
        if payload:
            s.sendall(payload)
        return recv_until_eof(s, timeout=timeout)
    finally:
        s.close()


def fetch_name(port, timeout=IO_TIMEOUT, source=None):
    """Connects through lb to a NamedBackend and returns the name it
    replied; raises AssertionError when the reply is not "NAME\\n" + EOF."""
    data, how = request(port, timeout=timeout, source=source)
    if how != "eof" or not data.endswith(b"\n") or data.count(b"\n") != 1:
        raise AssertionError(f"expected a name line then EOF, got {data!r} ({how})")
    return data[:-1].decode()


def is_refused(port, timeout=2.0):
    """True when a connect to port is refused right now."""
    try:
        s = socket.create_connection((HOST, port), timeout=timeout)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    s.close()
    return False


def is_readable(sock, timeout=0.0):
    r, _, _ = select.select([sock], [], [], timeout)
    return bool(r)


def roundtrip(sock, payload, timeout=IO_TIMEOUT):
    """Sends payload and reads back as many bytes (an echo round trip)."""
    sock.sendall(payload)
    return recv_exact(sock, len(payload), timeout=timeout)


def echo_transfer(port, payload, timeout=60.0, chunk=256 * 1024):
    """Sends payload through lb to an echo server from a sender thread,
    half-closes, and reads everything back until EOF in the caller.
    Returns (received, how)."""
    s = connect(port, timeout=timeout)
    err = []

    def sender():
        try:
            view = memoryview(payload)
            for off in range(0, len(payload), chunk):
                s.sendall(view[off:off + chunk])
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            err.append(e)

    t = start_thread(sender)
    try:
        data, how = recv_until_eof(s, timeout=timeout, limit=len(payload) + (1 << 20))
    finally:
        t.join(timeout=timeout)
        s.close()
    if err:
        how = f"{how} (sender failed: {err[0]!r})"
    return data, how


def vm_rss_kb(pid):
    """Resident set size of a process, in kB, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------- lb

_LOG_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)')


def parse_log_line(line):
    """Turns 'ts=.. level=info event=x key="a b"' into a dict (quoted values
    unquoted). Lines that are not key=value give {}."""
    out = {}
    for key, value in _LOG_PAIR.findall(line):
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = re.sub(r'\\(.)', r'\1', value[1:-1])
        out[key] = value
    return out


_tmpdirs = []
_all_lbs = []
_current_lbs = []       # lb instances of the running test (for failure dumps)
_all_procs = []         # helper processes (hc_backend), killed at exit


def make_tmpdir():
    d = tempfile.mkdtemp(prefix="lb-it-")
    _tmpdirs.append(d)
    return d


def run_lb(args, timeout=EXIT_TIMEOUT, cwd=None):
    """Runs LB_BIN with args to completion. Returns (code, stdout, stderr) as
    text. Fails when lb hangs past timeout or prints a sanitizer report."""
    try:
        p = subprocess.run([LB_BIN] + list(args), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"lb {' '.join(args)} did not finish in {timeout}s")
    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    for marker in SANITIZER_MARKERS:
        if marker in err:
            raise AssertionError(f"lb {' '.join(args)}: sanitizer report:\n{err}")
    if p.returncode < 0:
        raise AssertionError(f"lb {' '.join(args)} died by signal "
                             f"{signal.Signals(-p.returncode).name}:\n{err}")
    return p.returncode, out, err


def lb_test(config_path, cwd=None):
    """`lb -t -c FILE`: returns (code, stdout, stderr)."""
    return run_lb(["-t", "-c", config_path], cwd=cwd)


def _server_addr(target):
    if isinstance(target, int):
        return f"{HOST}:{target}"
    if isinstance(target, str):
        return target
    return target.addr


def make_config(servers, port=None, admin_port=None, balance="roundrobin",
                workers=2, max_connections=10000, log_level="info",
                shutdown_timeout="3s", connect_timeout="1s",
                idle_timeout="5m", retries=2, frontend="fe", pool="p"):
    """Config text with one frontend and one pool. servers: list of
    (name, target) or (name, target, weight); a target is a backend-like
    object with .addr, an "host:port" string or a port number.
    Returns (text, frontend_port)."""
    port = port or free_port()
    admin_port = admin_port or free_port()
    lines = [
        "[global]",
        f"workers = {workers}",
        f"max_connections = {max_connections}",
        f"log_level = {log_level}",
        f"shutdown_timeout = {shutdown_timeout}",
        "",
        "[admin]",
        f"listen = {HOST}:{admin_port}",
        "",
        f"[frontend {frontend}]",
        f"listen = {HOST}:{port}",
        f"pool = {pool}",
        "",
        f"[pool {pool}]",
        f"balance = {balance}",
    ]
    for s in servers:
        name, target = s[0], s[1]
        weight = f" weight={s[2]}" if len(s) > 2 else ""
        lines.append(f"server = {name} {_server_addr(target)}{weight}")
    lines += [
        f"connect_timeout = {connect_timeout}",
        f"idle_timeout = {idle_timeout}",
        f"retries = {retries}",
        "check = none",
        "",
    ]
    return "\n".join(lines), port


class Lb:
    """One lb daemon: config written to a fresh temp dir, started with
    `lb -c FILE`, stderr (the log) and stdout to files in that dir.

    close() is the teardown: stops lb (SIGTERM, SIGKILL after a deadline)
    unless it already exited, then check()s it. allowed_errors names the
    level=error events this test provokes on purpose."""

    def __init__(self, config_text, port=None, allowed_errors=(), args=(), env=None):
        self.args = list(args)          # after -c FILE (-x: a hand-over)
        self.env = env                  # added to the environment; a value
                                        # may be fn(stderr_path) -> str
        self.dir = make_tmpdir()
        self.config_path = os.path.join(self.dir, "lb.ini")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.port = port
        self.allowed_errors = set(allowed_errors)
        self.stderr_path = os.path.join(self.dir, "lb.stderr")
        self.stdout_path = os.path.join(self.dir, "lb.stdout")
        self.proc = None
        self.killed = False
        self.expect_status = 0          # checked by close()
        self.nofile = None              # RLIMIT_NOFILE (soft and hard) for lb
        self._closed = False
        _all_lbs.append(self)
        _current_lbs.append(self)

    # -- process
    @property
    def pid(self):
        return self.proc.pid

    def start(self, wait_ready=True, timeout=READY_TIMEOUT):
        # lb raises its soft limit to the hard one: a test that wants lb to
        # run out of descriptors sets both.
        limit = None if self.nofile is None else (
            lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile)))
        with open(self.stderr_path, "wb") as err, open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(
                [LB_BIN, "-c", self.config_path] + self.args, stdin=subprocess.DEVNULL,
                env=None if self.env is None else dict(os.environ, **{
                    k: v(self.stderr_path) if callable(v) else v for k, v in self.env.items()}),
                stdout=out, stderr=err, cwd=self.dir, start_new_session=True,
                preexec_fn=limit)
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=READY_TIMEOUT):
        def ready():
            if self.events("ready"):
                return True
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"lb exited with status {self.proc.returncode} before "
                    f"event=ready\n{self.log_tail()}")
            return False
        wait_for(ready, timeout, "lb to log event=ready")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def assert_running(self):
        if not self.running():
            raise AssertionError(f"lb exited unexpectedly with status "
                                 f"{self.proc.returncode}\n{self.log_tail()}")

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=EXIT_TIMEOUT):
        """Waits for lb to exit on its own; returns its status. Kills it
        and fails if it is still running after timeout."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.killed = True
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"lb still running {timeout}s later; "
                                 f"killed it\n{self.log_tail()}")

    def stop(self, sig=signal.SIGTERM, timeout=EXIT_TIMEOUT):
        """Sends sig (if lb runs) and waits; SIGKILL after timeout (then
        check() fails). Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def check(self, expect_status=0):
        """Fails when lb did not exit with expect_status, died by a signal,
        needed SIGKILL, printed a sanitizer report or logged an unexpected
        level=error event."""
        problems = []
        rc = self.proc.returncode if self.proc else None
        if self.killed:
            problems.append(f"lb did not exit within {EXIT_TIMEOUT}s of "
                            "SIGTERM and was killed")
        elif rc is None:
            problems.append("lb is still running")
        elif rc < 0:
            problems.append(f"lb died by signal {signal.Signals(-rc).name}")
        elif expect_status is not None and rc != expect_status:
            problems.append(f"lb exited with status {rc}, expected {expect_status}")
        text = self.log()
        for marker in SANITIZER_MARKERS:
            if marker in text:
                problems.append(f"sanitizer report in lb's stderr ({marker!r})")
                break
        unexpected = [ev for ev in self.events()
                      if ev.get("level") == "error" and ev.get("event") not in self.allowed_errors]
        for ev in unexpected[:3]:
            problems.append(f"unexpected error event: {ev.get('event')} {ev}")
        if len(unexpected) > 3:
            problems.append(f"... and {len(unexpected) - 3} more unexpected error events")
        if problems:
            raise AssertionError("; ".join(problems) + "\n" + self.log_tail(60))

    def close(self):
        """Teardown: stop (if running) and check. Idempotent."""
        if self._closed or self.proc is None:
            return
        self._closed = True
        self.stop()
        self.check(self.expect_status)

    # -- log
    def log(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        lines = self.log().splitlines()
        return (f"--- lb stderr ({self.stderr_path}), last {min(n, len(lines))} "
                f"of {len(lines)} lines ---\n" + "\n".join(lines[-n:]))

    def events(self, name=None, **match):
        """Parsed log lines that have an event= key, optionally only event
        `name` whose keys equal every match (values compared as strings)."""
        out = []
        for line in self.log().splitlines():
            ev = parse_log_line(line)
            if "event" not in ev:
                continue
            if name is not None and ev["event"] != name:
                continue
            if all(ev.get(k) == str(v) for k, v in match.items()):
                out.append(ev)
        return out

    def wait_event(self, name, timeout=IO_TIMEOUT, count=1, **match):
        """Waits until `count` events `name` matching match are logged;
        returns the list of them."""
        def found():
            evs = self.events(name, **match)
            return evs if len(evs) >= count else None
        desc = " ".join([f"event={name}"] + [f"{k}={v}" for k, v in match.items()])
        return wait_for(found, timeout,
                        lambda: f"{count} x '{desc}' in lb's log\n{self.log_tail()}")

    def rss_kb(self):
        return vm_rss_kb(self.pid)

    def fd_count(self):
        """lb's open descriptors now (/proc/PID/fd)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))


# ----------------------------------------------------- health-check helpers

HC_BACKEND = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hc_backend.py")


class HcBackend:
    """hc_backend.py run as its own process: many HTTP(S) ports in one
    process, each answering in a mode switched at runtime (see that file's
    docstring). Methods talk to its control port and fail the test on an
    error reply. stop() ends it by pid (SIGTERM, SIGKILL after a deadline)
    and fails when it crashed or printed a traceback."""

    def __init__(self, count=1, tls_count=0, cert=None, key=None, mode="ok",
                 timeout=READY_TIMEOUT):
        self.dir = make_tmpdir()
        self.stderr_path = os.path.join(self.dir, "hc_backend.stderr")
        args = [sys.executable, HC_BACKEND, "--count", str(count), "--mode", mode]
        if tls_count:
            args += ["--tls-count", str(tls_count), "--cert", cert, "--key", key]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err,
                                         start_new_session=True)
        _all_procs.append(self.proc)
        self.killed = False
        self._stopped = False
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None:
                self.stop(check=False)
                raise AssertionError(f"hc_backend did not start:\n{self.stderr()}")
            r, _, _ = select.select([self.proc.stdout], [], [], remaining)
            if r:
                d = os.read(self.proc.stdout.fileno(), 4096)
                if not d:
                    continue
                line += d
        info = json.loads(line.decode())
        self.ports = info["ports"]
        self.tls_ports = info["tls_ports"]
        self.control_port = info["control"]
        self._lock = threading.Lock()
        self._ctl = socket.create_connection((HOST, self.control_port), timeout=IO_TIMEOUT)
        self._ctl_buf = b""

    @property
    def pid(self):
        return self.proc.pid

    @staticmethod
    def addr(port):
        return f"{HOST}:{port}"

    def cmd(self, *argv, timeout=IO_TIMEOUT):
        """Sends one control command, returns the parsed JSON reply."""
        line = " ".join(str(a) for a in argv)
        with self._lock:
            self._ctl.settimeout(timeout)
            self._ctl.sendall(line.encode() + b"\n")
            while b"\n" not in self._ctl_buf:
                try:
                    d = self._ctl.recv(1 << 20)
                except (socket.timeout, TimeoutError):
                    raise AssertionError(f"hc_backend: no reply to {line!r} in {timeout}s")
                if not d:
                    raise AssertionError(f"hc_backend closed its control port on "
                                         f"{line!r}\n{self.stderr()}")
                self._ctl_buf += d
            reply, self._ctl_buf = self._ctl_buf.split(b"\n", 1)
        out = json.loads(reply.decode())
        if not out.get("ok"):
            raise AssertionError(f"hc_backend: {line!r} failed: {out.get('error')}")
        return out

    @staticmethod
    def _spec(ports):
        if isinstance(ports, (int, str)):
            return str(ports)
        return ",".join(str(p) for p in ports)

    def mode(self, ports, mode):
        """Switches the mode; returns the backend's wall time of the switch."""
        return self.cmd("mode", self._spec(ports), mode)["wall"]

    def crash(self, ports):
        """Closes the listener(s): connects are refused from now on. Returns
        the backend's wall time right after the close."""
        return self.cmd("crash", self._spec(ports))["wall"]

    def revive(self, ports):
        return self.cmd("revive", self._spec(ports))["wall"]

    def times(self, ports="all"):
        """{port: [(mono, wall), ...]} of the health requests seen."""
        t = self.cmd("times", self._spec(ports))["times"]
        return {int(k): [tuple(x) for x in v] for k, v in t.items()}

    def info(self, port):
        return self.cmd("info", port)["info"]

    def clear(self, ports="all"):
        self.cmd("clear", self._spec(ports))

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, check=True):
        if self._stopped:
            return
        self._stopped = True
        try:
            self._ctl.close()
        except (AttributeError, OSError):
            pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.proc.kill()
                self.proc.wait(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        if check:
            err = self.stderr()
            if self.killed or self.proc.returncode != 0 or "Traceback" in err:
                raise AssertionError(f"hc_backend ended badly (status "
                                     f"{self.proc.returncode}, killed={self.killed}):\n{err}")


def http_via(port, timeout=IO_TIMEOUT, path="/who"):
    """One client request through lb to an hc_backend: returns the backend
    port that answered (from its X-Port header), or None when the
    connection ended without an HTTP answer (closed, reset or timeout)."""
    try:
        s = connect(port, timeout=timeout)
    except OSError:
        return None
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: lb-test\r\n\r\n".encode())
        data, how = recv_until_eof(s, timeout=timeout)
    except OSError:
        return None
    finally:
        s.close()
    m = re.search(rb"\r\nX-Port: (\d+)\r\n", data)
    return int(m.group(1)) if m else None


def event_time(ev):
    """An event's ts= as unix seconds (float; lb writes milliseconds)."""
    ts = datetime.datetime.strptime(ev["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return ts.replace(tzinfo=datetime.timezone.utc).timestamp()


def from_slot_ms(ev):
    """How long a check event's probe ran from its slot: a probe that
    starts late (lag_ms) still times out check_timeout after its slot, so
    a timed-out probe's duration_ms alone may be short by its lag."""
    return float(ev["duration_ms"]) + float(ev.get("lag_ms", 0))


HEALTH_EVENTS = ("check", "server_down", "server_up")

# Slack for the upper bound of a health-check timing (a detection latency,
# a probe duration, the gap between probes), added to what the contract
# allows. Load only makes these later: a health thread or lb's main loop
# scheduled late, a backend answering late. A busy 2-core machine shows a
# few hundred ms of that now and then, more under ASan. Where a test must
# tell one probe from the next, the probe count is checked another way
# (log order: transition_streak; or backend probe times), not by this bound.
# Lower bounds need no such slack: load cannot make anything earlier.
HC_SLACK = 0.75 if SANITIZED else 0.5

# lb's own timers (connect_timeout, shutdown_timeout, ...) keep their
# deadlines on the precise monotonic clock (main's loop runs on it; the
# workers' sessions wait out an early firing: lb_session_arm). The allowance
# of one kernel tick stays for
# the tests' own clock reads and the log's millisecond timestamps; it is the
# only allowance a lower bound from the contract gets for these timers.
try:
    TIMER_TICK = time.clock_getres(getattr(time, "CLOCK_MONOTONIC_COARSE", 6))
except OSError:
    TIMER_TICK = 0.01


def health_history(lb, pool, server):
    """The check, server_down and server_up events of one server, in log
    order."""
    return [ev for ev in lb.events()
            if ev.get("event") in HEALTH_EVENTS
            and ev.get("pool") == pool and ev.get("server") == server]


def transition_streak(history, transition, n):
    """Checks that `transition` (an event from history: server_down or
    server_up) was caused by exactly the n-th probe of a streak of
    consecutive failed (server_down) or passed (server_up) checks, not by an
    earlier one nor a later one. Returns None when it was, else a message.

    lb writes a probe's check line and then the transition it causes, in one
    step of its main loop (lb_server_apply_check), so the cause is the check
    right before the transition in log order. Timestamps are not used: a
    stalled main loop applies several results at once, and load can delay a
    step but not change which probe caused it; the tests bound latencies
    themselves."""
    want = "failed" if transition["event"] == "server_down" else "passed"
    idx = next(i for i, ev in enumerate(history) if ev is transition)
    start = idx
    while (start > 0 and history[start - 1]["event"] == "check"
           and history[start - 1].get("result") == want):
        start -= 1
    cause = idx - start
    if cause == n:
        return None
    streak = [e["ts"] for e in history[start:idx]]
    return (f"{transition['event']} at {transition['ts']} came with {want} check "
            f"#{cause} of its streak, expected #{n}; the streak before it: "
            + (", ".join(streak) or "none"))


def make_pools_config(pools, workers=2, log_level="info", health_threads=None,
                      max_connections=10000, shutdown_timeout="3s", admin_port=None):
    """Config text with several pools. pools: list of (pool_name, servers,
    keys) where servers is a list of (name, target) and keys a dict of pool
    keys (check, check_interval, rise, ...). Unless keys says
    frontend=False, each pool gets a frontend fe_<pool> on a free port.
    The removal keys that are not under test are neutralized: min_servers =
    0 (no guard keeps a failing server in) and observe_errors = 0 (only the
    checks take servers out). Returns (text, {pool_name: frontend_port})."""
    admin_port = admin_port or free_port()
    lines = ["[global]", f"workers = {workers}",
             f"max_connections = {max_connections}", f"log_level = {log_level}",
             f"shutdown_timeout = {shutdown_timeout}", ""]
    if health_threads is not None:
        lines += ["[health]", f"threads = {health_threads}", ""]
    lines += ["[admin]", f"listen = {HOST}:{admin_port}", ""]
    fports = {}
    for name, servers, keys in pools:
        keys = dict(keys)
        if keys.pop("frontend", True):
            fports[name] = free_port()
            lines += [f"[frontend fe_{name}]", f"listen = {HOST}:{fports[name]}",
                      f"pool = {name}", ""]
    lines += pool_lines([(name, servers, {k: v for k, v in keys.items() if k != "frontend"})
                         for name, servers, keys in pools])
    return "\n".join(lines), fports


def line_of(lines, text):
    """1-based line number of the config line that starts with text."""
    for i, l in enumerate(lines):
        if l.startswith(text):
            return i + 1
    raise KeyError(text)


def pool_lines(pools, defaults=None):
    """The [pool] sections of a config: pools is [(name, [(server, backend
    or port[, weight or "option=N ..."])], {key: value})]. The defaults keep the guard and
    live-traffic probes out of the way unless a test sets them; a value of
    None leaves a key out."""
    lines = []
    for name, servers, keys in pools:
        merged = {"connect_timeout": "1s", "retries": 2, "min_servers": 0,
                  "observe_errors": 0}
        merged.update(defaults or {})
        merged.update(keys)
        lines.append(f"[pool {name}]")
        for s in servers:
            opts = ""
            if len(s) > 2:
                opts = f" {s[2]}" if isinstance(s[2], str) else f" weight={s[2]}"
            lines.append(f"server = {s[0]} {_server_addr(s[1])}{opts}")
        for k, v in merged.items():
            if v is not None:
                lines.append(f"{k} = {v}")
        lines.append("")
    return lines


# ------------------------------------------------------------------ tests

class LbTestCase(unittest.TestCase):
    """Base class: helpers that start things and register their teardown.
    Cleanups run in reverse order, so clients close before lb stops and lb
    stops before the backends it talks to."""

    def setUp(self):
        if not LB_BIN or not os.access(LB_BIN, os.X_OK):
            self.fail(f"LB_BIN={LB_BIN!r} is not an executable lb binary")
        del _current_lbs[:]
        # First in, so run last: after the test's cleanups stopped its
        # loops, closed its sockets and stopped lb and the backends.
        with _threads_lock:
            del _threads[:]
            del _stray_errors[:]
        self.addCleanup(_check_threads)

    def skip(self, reason, ci_accepts=False):
        """Skips the test (see skip_if for ci_accepts)."""
        if ci_accepts:
            _ci_accepted.add(reason)
        raise unittest.SkipTest(reason)

    def start_thread(self, target, *args, name=None, **kwargs):
        """start_thread (module level): a Thread joined, and judged, at the
        end of this test."""
        return start_thread(target, *args, name=name, **kwargs)

    def backend(self, b):
        self.addCleanup(self._check_backend, b)
        self.addCleanup(b.stop)
        return b

    def _check_backend(self, b):
        if getattr(b, "errors", None):
            raise AssertionError(f"backend {b.name} handler raised:\n" + "\n".join(b.errors))

    def named(self, name, **kw):
        return self.backend(NamedBackend(name, **kw))

    def echo(self, name="echo"):
        return self.backend(EchoBackend(name))

    def custom(self, handler, name="custom"):
        return self.backend(Backend(handler, name=name))

    def refused(self):
        return self.backend(RefusedPort())

    def blackhole(self):
        return self.backend(Blackhole())

    def hc_backend(self, **kw):
        """Starts an HcBackend (see there); stopped and checked at teardown."""
        b = HcBackend(**kw)
        self.addCleanup(b.stop)
        return b

    def lb_pools(self, pools, allowed_errors=(), **opts):
        """Starts lb with make_pools_config(pools, **opts); lb.ports maps
        each pool to its frontend port."""
        text, ports = make_pools_config(pools, **opts)
        lb = self.start_lb(text, allowed_errors=allowed_errors)
        lb.ports = ports
        return lb

    def start_lb(self, config_text, port=None, allowed_errors=(), wait_ready=True, nofile=None,
                 args=(), env=None):
        lb = Lb(config_text, port=port, allowed_errors=allowed_errors, args=args, env=env)
        lb.nofile = nofile
        self.addCleanup(lb.close)
        lb.start(wait_ready=wait_ready)
        return lb

    def lb(self, servers, allowed_errors=(), **opts):
        """Starts lb with make_config(servers, **opts); lb.port is the
        frontend port."""
        text, port = make_config(servers, **opts)
        return self.start_lb(text, port=port, allowed_errors=allowed_errors)

    def client(self, port, **kw):
        s = connect(port, **kw)
        self.addCleanup(s.close)
        return s


_ci_accepted = set()            # the skip reasons CI accepts


def skip_if(condition, reason, ci_accepts=False):
    """unittest.skipIf, for a class or a test. In CI (CI=true) the skip
    fails the test unless ci_accepts: give it only for a reason that no CI
    machine could change (the build under test, not the machine's tools or
    privileges). A plain unittest skip is one CI does not accept."""
    if condition and ci_accepts:
        _ci_accepted.add(reason)
    return unittest.skipIf(condition, reason)


class _Result(unittest.TextTestResult):
    """Prints the log of every lb of a failed test right after it fails.
    In CI a skip whose reason CI does not accept is a failure."""

    def addSkip(self, test, reason):
        if CI and reason not in _ci_accepted:
            self.failures.append((test, f"skipped in CI (CI=true): {reason}\n"
                                        "a skip in CI fails unless its reason is one CI "
                                        "accepts (harness.skip_if, ci_accepts=True)"))
            if self.showAll:
                self.stream.writeln(f"FAIL: skipped in CI: {reason}")
            self.stream.flush()
            return
        super().addSkip(test, reason)

    def _dump(self):
        for lb in list(_current_lbs):
            self.stream.writeln(lb.log_tail(80))
        self.stream.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._dump()

    def addError(self, test, err):
        super().addError(test, err)
        self._dump()

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._dump()


def _kill_leftovers():
    for lb in _all_lbs:
        if lb.proc is not None and lb.proc.poll() is None:
            lb.proc.kill()
    for p in _all_procs:
        if p.poll() is None:
            p.kill()


def main():
    """Runs the calling file's tests; exit status 0 only when all passed.
    Temp dirs are removed when everything passed and kept otherwise."""
    atexit.register(_kill_leftovers)
    # ctest or a user may stop us with SIGTERM: still kill our lb processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if not LB_BIN or not os.access(LB_BIN, os.X_OK):
        print(f"LB_BIN={LB_BIN!r} is not an executable lb binary", file=sys.stderr)
        sys.exit(1)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result)
    prog = unittest.main(module="__main__", testRunner=runner, exit=False)
    r = prog.result
    ok = r.wasSuccessful() and r.testsRun > 0
    # Per test (a test with failed subtests counts once), from unittest's
    # lists: a skip CI refused is among the failures.
    failed = {_test_id(t) for t, _ in r.failures + r.errors}
    failed |= {_test_id(t) for t in r.unexpectedSuccesses}
    skipped = {_test_id(t) for t, _ in r.skipped} - failed
    passed = max(0, r.testsRun - len(failed) - len(skipped))
    _kill_leftovers()
    if ok:
        for d in _tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
    else:
        print("lb temp dirs kept: " + " ".join(_tmpdirs), file=sys.stderr, flush=True)
    # The last line, which CI reads.
    print(f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped", flush=True)
    sys.exit(0 if ok else 1)


def _test_id(test):
    return getattr(test, "test_case", test).id()


def sha256(data):
    return hashlib.sha256(data).hexdigest()
