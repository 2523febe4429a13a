"""Removal by draining: a server taken out of rotation (POST .../drain, or a
failing health check) gets no new connections from the next accept on,
while its open connections go on until they end by themselves or until
drain_timeout runs out; then lb closes both sides and counts them in the
server's drained_by_timeout. /stats shows the server `draining` while it
has connections open, then `disabled` (operator) or `down` (health). A
server that recovers while draining goes back to `up` and keeps its
connections. SIGTERM closes the listeners and lets connections through
different servers finish.

The backends are StreamBackend threads: they answer lb's HTTP health checks
with a status the test switches, and treat any other connection as a client
that gets "NAME\\n" and then an echo. A Stream is a long-lived client that
sends a chunk every 100 ms and reads its echo back, from its own thread,
and records when and how the connection ended.

test_removal_disable.py imports StreamBackend, Stream and the helpers
below."""

import select
import signal
import threading
import time

import admin_client
import harness
from admin_client import find_pool, find_server, stats_problems
from harness import IO_TIMEOUT, LbTestCase, event_time, wait_for

# fall 2: one check answered late by a backend thread on a loaded machine
# must not take a server out in the middle of a test.
HTTP = {"check": "http", "check_interval": "300ms", "check_timeout": "250ms",
        "rise": 1, "fall": 2}
WAIT = 10.0             # deadline for anything that takes a few intervals
PERIOD = 0.1            # a Stream's round trip period
CHUNK = 1024


# ---------------------------------------------------------------- backend

class StreamBackend(harness.Backend):
    """A server that tells lb's health checks from client traffic.

    A connection whose first line starts with "GET " is a health check: it
    gets `status` (200 unless the test sets another) and is closed. Any
    other first line is a client: it gets "NAME\\n", then an echo of every
    byte until it closes. `clients` counts client connections (ever),
    `open_clients` those still open; health checks count in neither."""

    def __init__(self, name):
        self.status = 200
        self._count_lock = threading.Lock()
        self._clients = 0
        self._open_clients = 0

        def handler(backend, conn):
            buf = b""
            while b"\n" not in buf:
                d = conn.recv(65536)
                if not d:
                    return              # a TCP check, or a client gone at once
                buf += d
            line, _, rest = buf.partition(b"\n")
            if line.startswith(b"GET "):
                while b"\r\n\r\n" not in buf:
                    d = conn.recv(65536)
                    if not d:
                        return
                    buf += d
                code = backend.status
                conn.sendall(f"HTTP/1.1 {code} X\r\nContent-Length: 0\r\n"
                             f"Connection: close\r\n\r\n".encode())
                return
            with backend._count_lock:
                backend._clients += 1
                backend._open_clients += 1
            try:
                conn.sendall(f"{name}\n".encode() + rest)
                while True:
                    d = conn.recv(65536)
                    if not d:
                        break
                    conn.sendall(d)
            finally:
                with backend._count_lock:
                    backend._open_clients -= 1
        super().__init__(handler, name=name)

    @property
    def clients(self):
        with self._count_lock:
            return self._clients

    @property
    def open_clients(self):
        with self._count_lock:
            return self._open_clients


# ----------------------------------------------------------------- client

def who(port, timeout=IO_TIMEOUT):
    """One short client through lb: returns the name of the server that
    answered, or "" when lb closed the connection without an answer."""
    s = harness.connect(port, timeout=timeout)
    try:
        s.sendall(b"WHO\n")
        return harness.read_line(s).decode().strip()
    finally:
        s.close()


class Stream:
    """A long-lived client connection through lb to a StreamBackend. Its
    thread sends a CHUNK every PERIOD and reads the echo back; between
    round trips it watches the socket, so an EOF or a reset from lb is seen
    within ~20 ms. rounds: monotonic times of completed round trips.
    ended: None while open, else (monotonic, wall, how) of the moment the
    connection was found closed by the other side (how is "eof", "reset"
    or "timeout"). close() stops the thread and closes the client side."""

    def __init__(self, sock, server):
        self.sock = sock
        self.server = server
        self.rounds = []
        self.ended = None
        self.problem = None         # wrong echo or unexpected bytes
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = harness.Thread(self._run, name=f"stream-{server}")
        self._thread.start()

    def _end(self, how):
        with self._lock:
            self.ended = (time.monotonic(), time.time(), how)

    def _run(self):
        seq = 0
        next_t = time.monotonic()
        while not self._stop.is_set():
            payload = (b"%08d" % seq) * (CHUNK // 8)
            seq += 1
            try:
                self.sock.sendall(payload)
                got = b""
                deadline = time.monotonic() + IO_TIMEOUT
                while len(got) < len(payload):
                    if time.monotonic() > deadline:
                        self._end("timeout")
                        return
                    r, _, _ = select.select([self.sock], [], [], 0.02)
                    if self._stop.is_set():
                        return
                    if not r:
                        continue
                    d = self.sock.recv(len(payload) - len(got))
                    if not d:
                        self._end("eof")
                        return
                    got += d
            except (ConnectionResetError, BrokenPipeError):
                self._end("reset")
                return
            if got != payload:
                self.problem = f"echo mismatch in round {seq}"
                self._end("eof")
                return
            with self._lock:
                self.rounds.append(time.monotonic())
            next_t += PERIOD
            while not self._stop.is_set():
                remaining = next_t - time.monotonic()
                if remaining <= 0:
                    break
                r, _, _ = select.select([self.sock], [], [], min(remaining, 0.02))
                if r and not self._stop.is_set():
                    try:
                        d = self.sock.recv(65536)
                    except ConnectionResetError:
                        self._end("reset")
                        return
                    if not d:
                        self._end("eof")
                        return
                    self.problem = f"unexpected bytes between round trips: {d[:40]!r}"
                    self._end("eof")
                    return

    def rounds_after(self, t):
        with self._lock:
            return sum(1 for x in self.rounds if x > t)

    def is_open(self):
        with self._lock:
            return self.ended is None

    def wait_rounds_after(self, t, n, timeout=WAIT):
        """Waits until n round trips completed after monotonic time t; fails
        when the connection ends first."""
        def ok():
            if not self.is_open():
                raise AssertionError(f"stream to {self.server} ended ({self.ended[2]}) "
                                     f"after {self.rounds_after(t)} of {n} round trips "
                                     f"(problem: {self.problem})")
            return self.rounds_after(t) >= n
        wait_for(ok, timeout, f"{n} round trips of the stream to {self.server}")

    def wait_end(self, timeout=WAIT):
        """Waits until the other side closed the connection; returns
        self.ended."""
        wait_for(lambda: not self.is_open(), timeout,
                 f"lb to close the stream to {self.server}")
        return self.ended

    def close(self):
        """The client closes (idempotent)."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.sock.close()
        except OSError:
            pass


def open_stream(tc, port, server, tries=40):
    """Opens client connections through lb until one reaches `server`
    (the others are closed at once), starts a Stream on it and checks that
    it flows. The Stream is closed at teardown."""
    seen = []
    for _ in range(tries):
        s = harness.connect(port)
        s.sendall(b"HELLO\n")
        name = harness.read_line(s).decode().strip()
        if name == server:
            st = Stream(s, server)
            tc.addCleanup(st.close)
            st.wait_rounds_after(0, 3)
            return st
        seen.append(name)
        s.close()
    raise AssertionError(f"no connection reached {server} in {tries} tries: {seen}")


# ----------------------------------------------------------------- test base

class RemovalTestCase(LbTestCase):
    """Starts StreamBackends and lb (admin_client.start_lb: min_servers = 0,
    observe_errors = 0 unless keys say otherwise) with the pool "web"."""

    POOL = "web"

    def start(self, names=("A", "B", "C"), log_level="debug", shutdown_timeout="3s",
              **keys):
        """keys: pool keys over HTTP (checks every 300 ms, rise 1, fall 2)."""
        self.backends = {n: self.backend(StreamBackend(n)) for n in names}
        pool_keys = dict(HTTP)
        pool_keys.update(keys)
        lb = admin_client.start_lb(
            self, [(self.POOL, [(n, b) for n, b in self.backends.items()], pool_keys)],
            log_level=log_level, shutdown_timeout=shutdown_timeout)
        lb.port = lb.fports[f"fe_{self.POOL}"]
        self.lbi = lb
        if pool_keys.get("check") != "none":
            for n in names:
                lb.admin.wait_server(self.POOL, n,
                                     lambda s: s["last_check"] is not None
                                     and s["last_check"]["result"] == "passed",
                                     WAIT, "a first passed check")
        return lb

    def srv(self, name):
        return find_server(self.lbi.admin.stats(), self.POOL, name)

    def action(self, server, what):
        r = self.lbi.admin.action(self.POOL, server, what)
        self.assertEqual(r.status, 200, f"POST {what} {server}: {r}")
        return r

    def wait_state(self, server, state, timeout=WAIT):
        return self.lbi.admin.wait_server(self.POOL, server,
                                          lambda s: s["state"] == state, timeout,
                                          f"state {state}")

    def wait_drained(self, server, timeout=WAIT):
        """An operator's drain is over: no connection open. Its state stays
        draining (HAProxy's DRAIN) until enable, apart from disabled."""
        st = self.lbi.admin.wait_server(self.POOL, server,
                                        lambda s: s["active_connections"] == 0, timeout,
                                        "its last connection to end")
        self.assertEqual((st["state"], st["admin"]), ("draining", "drain"), st)
        return st

    def assert_consistent(self):
        """The /stats document holds together (admin_client's schema)."""
        problems = stats_problems(self.lbi.admin.stats())
        self.assertEqual(problems, [], "inconsistent /stats")


# ------------------------------------------------------------------ tests

class DrainTest(RemovalTestCase):

    def test_drain_keeps_connection_until_timeout(self):
        lb = self.start(drain_timeout="2s")
        a = self.backends["A"]
        stream = open_stream(self, lb.port, "A")
        self.assertEqual(self.srv("A")["active_connections"], 1)

        t_drain = time.monotonic()
        self.action("A", "drain")
        st = self.srv("A")
        self.assertEqual((st["state"], st["admin"], st["active_connections"]),
                         ("draining", "drain", 1), st)
        self.assertEqual(find_pool(lb.admin.stats(), self.POOL)["in_rotation"], 2)
        down = lb.wait_event("server_maintenance", server="A")[0]
        self.assertEqual((down.get("reason"), down.get("level")), ("operator: drain", "info"), down)
        self.assert_consistent()

        # New connections: none reaches A, all 50 are counted at B and C.
        before = {n: b.clients for n, b in self.backends.items()}
        names = [who(lb.port) for _ in range(50)]
        self.assertEqual(set(names) - {"B", "C"}, set(), f"new connections reached {names}")
        self.assertEqual(a.clients, before["A"], "A accepted a client while draining")
        got = sum(self.backends[n].clients - before[n] for n in ("B", "C"))
        self.assertEqual(got, 50, "client connections counted at B and C")

        # The old connection keeps transferring for at least ~1 s.
        stream.wait_rounds_after(t_drain + 1.0, 1, timeout=WAIT)
        self.assertGreaterEqual(stream.rounds_after(t_drain), 8,
                                "round trips in the first second of the drain")
        self.assertEqual(self.srv("A")["state"], "draining")

        # ... until drain_timeout: lb closes it.
        t_end, _, how = stream.wait_end(timeout=WAIT)
        took = t_end - t_drain
        print(f"\ndrain_timeout = 2s: lb closed the draining connection "
              f"{took * 1000:.0f} ms after the drain ({how})")
        self.assertIsNone(stream.problem)
        self.assertIn(how, ("eof", "reset"))
        self.assertTrue(1.8 <= took <= 3.0,
                        f"connection closed {took:.3f}s after the drain, expected 1.8-3.0s")
        st = self.wait_drained("A")
        self.assertEqual((st["drained_by_timeout"], st["active_connections"]), (1, 0), st)
        wait_for(lambda: a.open_clients == 0, WAIT, "lb to close A's side too")
        for n in ("B", "C"):
            self.assertEqual(self.srv(n)["drained_by_timeout"], 0, n)
        self.assert_consistent()

    def test_client_ends_first(self):
        # drain_timeout left at its default (30 s).
        lb = self.start()
        stream = open_stream(self, lb.port, "A")
        t_drain = time.monotonic()
        self.action("A", "drain")
        self.assertEqual(self.srv("A")["state"], "draining")
        stream.wait_rounds_after(t_drain, 5)
        self.assertEqual(self.srv("A")["state"], "draining")

        t_close = time.monotonic()
        stream.close()
        st = self.wait_drained("A")
        took = time.monotonic() - t_close
        print(f"\nclient closed: its last connection's end seen in /stats after "
              f"{took * 1000:.0f} ms")
        self.assertEqual((st["drained_by_timeout"], st["active_connections"]), (0, 0), st)
        self.assertIsNone(stream.problem)
        self.assertIsNone(stream.ended, "lb closed the stream before the client did")
        self.assert_consistent()

    def test_health_down_drains_then_down(self):
        lb = self.start(drain_timeout="2s")
        a = self.backends["A"]
        stream = open_stream(self, lb.port, "A")
        a.status = 500
        down = lb.wait_event("server_down", server="A")[0]
        t_down = event_time(down)
        self.assertIn("500", down.get("reason", ""), down)
        st = self.srv("A")
        self.assertEqual((st["state"], st["health"], st["admin"]),
                         ("draining", "down", "none"), st)
        self.assertNotIn("A", {who(lb.port) for _ in range(6)})
        self.assert_consistent()
        # The connection keeps flowing while A drains.
        stream.wait_rounds_after(time.monotonic(), 5)
        self.assertEqual(self.srv("A")["state"], "draining")

        _, wall_end, how = stream.wait_end()
        took = wall_end - t_down
        print(f"\nhealth down, drain_timeout = 2s: lb closed the connection "
              f"{took * 1000:.0f} ms after server_down ({how})")
        self.assertIn(how, ("eof", "reset"))
        self.assertTrue(1.8 <= took <= 3.0,
                        f"closed {took:.3f}s after server_down, expected 1.8-3.0s")
        st = self.wait_state("A", "down", timeout=WAIT)
        self.assertEqual(st["drained_by_timeout"], 1, st)
        # Checks go on for a server that is down.
        at = st["last_check"]["at"]
        lb.admin.wait_server(self.POOL, "A", lambda s: s["last_check"]["at"] > at,
                             WAIT, "a newer check")
        self.assert_consistent()

    def test_recovers_while_draining(self):
        # drain_timeout 3 s: the server recovers well before it, and the
        # connection must outlive the cancelled deadline.
        lb = self.start(drain_timeout="3s")
        a = self.backends["A"]
        stream = open_stream(self, lb.port, "A")
        a.status = 500
        down = lb.wait_event("server_down", server="A")[0]
        t_down_mono = time.monotonic() - (time.time() - event_time(down))
        self.assertEqual(self.srv("A")["state"], "draining")

        a.status = 200
        up = lb.wait_event("server_up", server="A")[0]
        self.assertLess(event_time(up) - event_time(down), 2.5,
                        "recovery too slow to test a cancelled drain")
        st = self.srv("A")
        self.assertEqual((st["state"], st["active_connections"], st["health"]),
                         ("up", 1, "up"), st)
        # Past the drain deadline the connection is still open and flowing.
        stream.wait_rounds_after(t_down_mono + 3.5, 1, timeout=WAIT)
        self.assertTrue(stream.is_open())
        self.assertIsNone(stream.problem)
        st = self.srv("A")
        self.assertEqual((st["state"], st["drained_by_timeout"], st["active_connections"]),
                         ("up", 0, 1), st)
        # And A takes new connections again.
        self.assertIn("A", {who(lb.port) for _ in range(9)})
        self.assert_consistent()

    def test_sigterm_lets_connections_finish(self):
        lb = self.start(shutdown_timeout="10s")
        sa = open_stream(self, lb.port, "A")
        sb = open_stream(self, lb.port, "B")
        lb.send_signal(signal.SIGTERM)
        wait_for(lambda: harness.is_refused(lb.port), WAIT, "lb to close its listener")
        t = time.monotonic()
        sa.wait_rounds_after(t, 5)
        sb.wait_rounds_after(t, 5)
        lb.assert_running()
        sa.close()
        self.assertTrue(lb.running(), "lb exited with a connection still open")
        t_close = time.monotonic()
        sb.close()
        status = lb.wait_exit(timeout=5)
        print(f"\nSIGTERM: lb exited {(time.monotonic() - t_close) * 1000:.0f} ms "
              f"after the last client closed")
        self.assertEqual(status, 0)


if __name__ == "__main__":
    harness.main()
