"""Reload and open connections: a server that a reload removes keeps its
running transfer until it ends by itself or its old pool's drain_timeout
runs out (then lb closes it); /stats lists it under removed_servers exactly
while it still has connections. A frontend that a reload removes refuses new
connects at once while its open connection keeps working; a frontend it adds
listens at once; a frontend it keeps never refuses a connect, and follows
its new pool from the next accept."""

import socket
import threading
import time

import admin_client
import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, free_port, wait_for
from test_reload_traffic import config_text, sighup_reload, start_lb, write_atomic

CHUNK = 8192
PERIOD = 0.05           # one chunk every 50 ms: 20 chunks a second


def chunk(i):
    return (b"%07d\n" % i) * (CHUNK // 8)


def expected_stream(label, n):
    return f"{label}\n".encode() + b"".join(chunk(i) for i in range(n))


def stream_backend(label):
    """A harness.Backend handler: reads "STREAM <n>\\n", answers
    "<label>\\n", then n chunks of CHUNK bytes, one every PERIOD (the pace
    of the transfer), then closes. Reports ("done", n) when all went out."""
    def handler(backend, conn):
        line = harness.read_line(conn)
        n = int(line.split()[1])
        conn.sendall(f"{label}\n".encode())
        next_t = time.monotonic()
        for i in range(n):
            next_t += PERIOD
            time.sleep(max(0.0, next_t - time.monotonic()))    # the stream's pace
            conn.sendall(chunk(i))
        backend.report(("done", n))
    return handler


class StreamClient:
    """Asks for an n-chunk stream through lb and reads it to the end from
    its own thread, then closes its side as a client does. first: monotonic
    time the label arrived; ended: (monotonic, how) when the connection
    ended; data: what arrived."""

    def __init__(self, port, n):
        self.n = n
        self.sock = harness.connect(port, timeout=30)
        self.sock.sendall(b"STREAM %d\n" % n)
        self.data = b""
        self.first = None
        self.ended = None
        self.lock = threading.Lock()
        self.thread = harness.Thread(self._run)
        self.thread.start()

    def _run(self):
        how = "eof"
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    break
                with self.lock:
                    if self.first is None:
                        self.first = time.monotonic()
                    self.data += d
        except (ConnectionResetError, BrokenPipeError):
            how = "reset"
        except OSError as e:
            how = f"error {e!r}"
        with self.lock:
            self.ended = (time.monotonic(), how)
        self.sock.close()

    def received(self):
        with self.lock:
            return len(self.data)

    def label(self):
        with self.lock:
            return self.data.split(b"\n", 1)[0].decode() if b"\n" in self.data else None

    def wait_bytes(self, n, timeout=IO_TIMEOUT):
        wait_for(lambda: self.received() >= n or self.ended, timeout,
                 f"{n} bytes of the stream")
        if self.received() < n:
            raise AssertionError(f"stream ended ({self.ended}) after {self.received()} bytes")

    def wait_end(self, timeout):
        wait_for(lambda: self.ended, timeout, "the stream to end")
        self.thread.join(timeout=5)
        return self.ended

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=5)


def who_echo(port, timeout=IO_TIMEOUT):
    """One client of a name_then_echo backend: returns the name line."""
    s = harness.connect(port, timeout=timeout)
    try:
        return harness.read_line(s).decode().strip()
    finally:
        s.close()


class ReloadDrainTest(LbTestCase):

    def start_stream_lb(self, drain_timeout):
        self.a = self.custom(stream_backend("A"), name="A")
        self.b = self.custom(stream_backend("B"), name="B")
        self.admin_port, self.port = free_port(), free_port()
        lb = start_lb(self, self.text([("A", self.a)], drain_timeout), self.admin_port)
        return lb

    def text(self, servers, drain_timeout):
        return config_text(self.admin_port, [("fe", self.port, "web")],
                           [("web", servers, {"drain_timeout": drain_timeout})])

    def removed(self, lb):
        return lb.admin.stats()["removed_servers"]

    def test_removed_server_finishes_its_transfer(self):
        # drain_timeout 10 s in the old pool; the new file says 100ms, which
        # must not apply to a server the old config had. The stream runs
        # long enough to outlast a reload on a slow machine.
        lb = self.start_stream_lb("10s")
        stream = StreamClient(self.port, 48)         # ~2.4 s
        self.addCleanup(stream.close)
        stream.wait_bytes(2 + 2 * CHUNK)
        self.assertEqual(stream.label(), "A")
        self.assertEqual(self.removed(lb), [])

        write_atomic(lb.config_path, self.text([("B", self.b)], "100ms"))
        t_reload = time.monotonic()
        ev = sighup_reload(lb, 2)
        self.assertEqual((ev.get("added"), ev.get("removed")), ("1", "1"), ev)
        rm = lb.wait_event("server_removed", server="A")[0]
        self.assertEqual((rm.get("pool"), rm.get("active"), rm.get("drain_timeout_ms")),
                         ("web", "1", "10000"), rm)

        # While the transfer runs: A is listed under removed_servers, with
        # its connection, and is no longer in the pool.
        st = lb.admin.stats()
        self.assertIsNone(stream.ended, "the stream ended at the reload")
        rs = st["removed_servers"]
        self.assertEqual(len(rs), 1, rs)
        self.assertEqual(rs[0]["pool"], "web", rs)
        srv = rs[0]["server"]
        self.assertEqual((srv["name"], srv["address"], srv["active_connections"], srv["state"]),
                         ("A", self.a.addr, 1, "draining"), srv)
        self.assertEqual(admin_client.server_problems(srv, "removed_servers[0].server"), [])
        self.assertEqual([s["name"] for s in admin_client.find_pool(st, "web")["servers"]],
                         ["B"])
        # New connections go to B only.
        for _ in range(5):
            s = StreamClient(self.port, 1)
            self.assertEqual(s.wait_end(IO_TIMEOUT)[1], "eof")
            self.assertEqual(s.data, expected_stream("B", 1))
            s.close()
        self.assertEqual(self.a.accepted, 1, "A got a new connection after its removal")

        # The transfer ends by itself, complete, within drain_timeout.
        t_end, how = stream.wait_end(timeout=10)
        took = t_end - t_reload
        print(f"\nremoved server, drain_timeout 10s: its ~2.4 s stream ended "
              f"{took * 1000:.0f} ms after the reload ({how}, {stream.received()} bytes)")
        self.assertEqual(how, "eof")
        self.assertEqual(len(stream.data), len(expected_stream("A", 48)),
                         "the removed server's transfer was cut")
        self.assertEqual(stream.data, expected_stream("A", 48))
        self.assertEqual(self.a.next_report(), ("done", 48))
        # ... and A leaves removed_servers with its last connection (well
        # before its drain_timeout could have closed anything).
        lb.admin.wait_stats(lambda st: st["removed_servers"] == [], IO_TIMEOUT,
                            "A to leave removed_servers")

    def test_removed_server_cut_at_drain_timeout(self):
        # drain_timeout 1 s in the old pool, 30 s in the new file; the
        # stream would run 5 s.
        lb = self.start_stream_lb("1s")
        stream = StreamClient(self.port, 100)
        self.addCleanup(stream.close)
        stream.wait_bytes(2 + 2 * CHUNK)
        write_atomic(lb.config_path, self.text([("B", self.b)], "30s"))
        t_reload = time.monotonic()
        sighup_reload(lb, 2)
        rm = lb.wait_event("server_removed", server="A")[0]
        self.assertEqual((rm.get("active"), rm.get("drain_timeout_ms")), ("1", "1000"), rm)
        self.assertEqual([r["server"]["name"] for r in self.removed(lb)], ["A"])

        t_end, how = stream.wait_end(timeout=10)
        took = t_end - t_reload
        print(f"\nremoved server, drain_timeout 1s: lb closed its 5 s stream "
              f"{took * 1000:.0f} ms after the reload ({how}, "
              f"{stream.received()} of {len(expected_stream('A', 100))} bytes)")
        self.assertIn(how, ("eof", "reset"))
        self.assertLess(stream.received(), len(expected_stream("A", 100)))
        # At about drain_timeout: not the new file's 30 s, not the stream's
        # own 5 s end (the upper bound leaves room for a slow reload).
        self.assertTrue(0.9 <= took <= 3.0,
                        f"closed {took:.3f}s after the reload, expected about 1s")
        # What did arrive is an unbroken prefix of the stream.
        self.assertEqual(stream.data, expected_stream("A", 100)[:len(stream.data)])
        lb.admin.wait_stats(lambda st: st["removed_servers"] == [], IO_TIMEOUT,
                            "A to leave removed_servers")
        wait_for(lambda: self.a.active == 0, 5.0, "lb to close A's side")

    def test_kept_server_keeps_its_connection(self):
        # drain_timeout 1 s: a kept server must not be drained at all, so
        # its 3 s stream outlives the drain_timeout after the reload.
        lb = self.start_stream_lb("1s")
        stream = StreamClient(self.port, 60)
        self.addCleanup(stream.close)
        stream.wait_bytes(2 + 2 * CHUNK)
        write_atomic(lb.config_path, self.text([("A", self.a, 3), ("B", self.b)], "1s"))
        t_reload = time.monotonic()
        ev = sighup_reload(lb, 2)
        self.assertEqual((ev.get("added"), ev.get("removed")), ("1", "0"), ev)
        st = lb.admin.stats()
        a = admin_client.find_server(st, "web", "A")
        self.assertEqual((a["state"], a["weight"], a["active_connections"]), ("up", 3, 1), a)
        self.assertEqual(st["removed_servers"], [])
        self.assertEqual(lb.events("server_removed"), [])
        t_end, how = stream.wait_end(timeout=10)
        self.assertEqual(how, "eof")
        self.assertEqual(stream.data, expected_stream("A", 60), "the kept server's transfer")
        self.assertGreater(t_end - t_reload, 1.2, "the stream ended early")
        a = lb.admin.wait_server("web", "A", lambda s: s["active_connections"] == 0, IO_TIMEOUT,
                                 "the connection to end in lb")
        self.assertEqual((a["total_connections"], a["drained_by_timeout"]), (1, 0), a)
        self.assertEqual(a["bytes_in"] + a["bytes_out"], len("STREAM 60\n") + len(stream.data),
                         f"bytes counted on the kept server: {a}")

    def test_connection_outlives_its_generations(self):
        # A connection through a frontend and a pool that the next reload
        # removes entirely, then four more reloads while it runs: what it
        # points at must stay alive (ASan watches) until it ends by itself.
        a = self.custom(stream_backend("A"), name="A")
        b = self.custom(stream_backend("B"), name="B")
        admin_port, p_old, p_keep = free_port(), free_port(), free_port()

        def text(i):
            fes = [("fe_keep", p_keep, "web")]
            pools = [("web", [("B", b, 1 + i)], {})]
            if i == 0:
                fes.append(("fe_old", p_old, "old"))
                pools.append(("old", [("A", a)], {"drain_timeout": "5s"}))
            return config_text(admin_port, fes, pools)

        lb = start_lb(self, text(0), admin_port)
        stream = StreamClient(p_old, 40)            # ~2 s
        self.addCleanup(stream.close)
        stream.wait_bytes(2 + CHUNK)
        for i in range(1, 6):
            write_atomic(lb.config_path, text(i))
            sighup_reload(lb, i + 1)
            rs = lb.admin.stats()["removed_servers"]
            if stream.ended is None:
                self.assertEqual([(r["pool"], r["server"]["name"]) for r in rs], [("old", "A")],
                                 f"removed_servers after reload {i}")
        self.assertTrue(harness.is_refused(p_old))
        t_end, how = stream.wait_end(timeout=10)
        self.assertEqual(how, "eof")
        self.assertEqual(stream.data, expected_stream("A", 40))
        lb.admin.wait_stats(lambda st: st["removed_servers"] == [], IO_TIMEOUT,
                            "A to leave removed_servers")
        s = StreamClient(p_keep, 2)
        self.assertEqual(s.wait_end(IO_TIMEOUT)[1], "eof")
        self.assertEqual(s.data, expected_stream("B", 2))
        s.close()
        lb.assert_running()

    def test_frontends_removed_added_kept(self):
        e = self.custom(admin_client.name_then_echo_backend("E"), name="E")
        admin_port = free_port()
        p_keep, p_old, p_new = free_port(), free_port(), free_port()
        pools = [("web", [("E", e)], {})]
        lb = start_lb(self, config_text(admin_port, [("fe_keep", p_keep, "web"),
                                                     ("fe_old", p_old, "web")], pools),
                      admin_port)
        self.assertTrue(harness.is_refused(p_new))
        old = self.client(p_old)
        self.assertEqual(harness.read_line(old), b"E\n")
        self.assertEqual(harness.roundtrip(old, b"before"), b"before")

        write_atomic(lb.config_path, config_text(admin_port, [("fe_keep", p_keep, "web"),
                                                              ("fe_new", p_new, "web")], pools))
        sighup_reload(lb, 2)
        # At once, no waiting: the removed frontend refuses, the new one
        # serves, the kept one serves.
        self.assertTrue(harness.is_refused(p_old), "removed frontend still accepts")
        self.assertEqual(who_echo(p_new), "E", "added frontend")
        self.assertEqual(who_echo(p_keep), "E", "kept frontend")
        # The connection through the removed frontend goes on.
        for i in range(5):
            msg = b"after %d" % i
            self.assertEqual(harness.roundtrip(old, msg), msg)
        st = lb.admin.stats()
        self.assertEqual(sorted(f["name"] for f in st["frontends"]), ["fe_keep", "fe_new"])
        self.assertTrue(harness.is_refused(p_old))
        old.close()
        wait_for(lambda: e.active == 0, 5.0, "the old connection to close at E")
        self.assertTrue(harness.is_refused(p_old))

    def test_kept_frontend_never_refuses(self):
        e = self.custom(admin_client.name_then_echo_backend("E"), name="E")
        f = self.custom(admin_client.name_then_echo_backend("F"), name="F")
        admin_port, p_keep, p_x, p_y = free_port(), free_port(), free_port(), free_port()

        def text(i):
            # Even: fe_keep -> pool one (E), plus fe_x. Odd: fe_keep ->
            # pool two (F), plus fe_y. Both pools are always there.
            fes = [("fe_keep", p_keep, "one" if i % 2 == 0 else "two"),
                   ("fe_x", p_x, "one") if i % 2 == 0 else ("fe_y", p_y, "two")]
            return config_text(admin_port, fes, [("one", [("E", e)], {}),
                                                 ("two", [("F", f)], {})])

        lb = start_lb(self, text(0), admin_port)
        records = []            # (t_connect, t_done, name or error), from 3 threads
        lock = threading.Lock()
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    s = socket.create_connection((HOST, p_keep), timeout=5)
                except ConnectionRefusedError:
                    r = "REFUSED"
                except OSError as ex:
                    r = f"connect error {ex!r}"
                else:
                    try:
                        r = harness.read_line(s).decode().strip() or "EOF before the name"
                    except OSError as ex:
                        r = f"io error {ex!r}"
                    finally:
                        s.close()
                with lock:
                    records.append((t0, time.monotonic(), r))
                stop.wait(0.002)            # a connect every few ms (pacing)

        threads = [harness.Thread(loop) for _ in range(3)]
        for t in threads:
            t.start()
            self.addCleanup(t.join, 10)
        self.addCleanup(stop.set)

        def after(t0):
            with lock:
                return [r for r in records if r[0] > t0]

        wait_for(lambda: len(after(0)) >= 20, IO_TIMEOUT, "the client loop to run")
        marks = [(0.0, "E")]
        for i in range(1, 11):
            write_atomic(lb.config_path, text(i))
            t_sig = time.monotonic()
            sighup_reload(lb, i + 1)
            t_after = time.monotonic()
            want = "E" if i % 2 == 0 else "F"
            marks.append((t_sig, None))         # in flight during the reload
            marks.append((t_after, want))
            # the new frontend of this generation listens, the other is gone
            p_on, p_off = (p_x, p_y) if i % 2 == 0 else (p_y, p_x)
            self.assertEqual(who_echo(p_on), want)
            self.assertTrue(harness.is_refused(p_off), f"reload {i}: removed frontend")
            # traffic between reloads, in count rather than a rate floor
            wait_for(lambda: len(after(t_after)) >= 20, IO_TIMEOUT,
                     "client connections after the reload")
        stop.set()
        for t in threads:
            t.join(timeout=10)

        with lock:
            recs = list(records)
        refused = [r for r in recs if r[2] == "REFUSED"]
        errors = [r for r in recs if r[2] not in ("E", "F", "REFUSED")]
        print(f"\nkept frontend: {len(recs)} connects during 10 reloads, "
              f"{len(refused)} refused, {len(errors)} other errors")
        self.assertEqual(refused, [], "the kept frontend refused connects")
        self.assertEqual(errors, [], "clients of the kept frontend failed")
        # Every connection made between two reloads (from its connect to its
        # answer) went to the pool of the generation of the time. (lb picks
        # at accept, which may come after the next reload for a connection
        # that started just before it.)
        wrong = []
        for t0, t1, r in recs:
            mark = max((m for m in marks if m[0] < t0), key=lambda m: m[0])
            later = [m[0] for m in marks if m[0] >= t0]
            if mark[1] is not None and (not later or t1 < min(later)) and r != mark[1]:
                wrong.append((round(t0 - mark[0], 3), r, mark[1]))
        self.assertEqual(wrong, [], "connections that did not follow the frontend's new pool "
                         "(seconds after the reload, got, expected)")


if __name__ == "__main__":
    harness.main()
