"""idle_timeout: lb closes a connection with no traffic either way for that
long, and traffic in either single direction keeps it open."""

import select
import time

import harness
from harness import LbTestCase, recv_until_eof, wait_for

TICK = 0.3          # traffic interval, well under idle_timeout = 1s
ACTIVE_FOR = 2.4    # how long the traffic goes on (> 2 x idle_timeout)
# idle_timeout = 1s: not closed before MIN_CLOSE and closed before
# MAX_CLOSE after the last traffic the client saw. lb's timer runs on the
# precise monotonic clock, from its own last read or write, which comes a
# little before the client's (its write reaches the client after it): the
# lower bound allows a tick and 0.1 s for that. The upper bound is twice the
# timeout: measured 1.00-1.01 s in the optimised and ASan builds, and a
# timer taken twice, or one from the first byte instead of the last, fails.
MIN_CLOSE = 0.9
MAX_CLOSE = 2.0


def sink(backend, conn):
    """Reads and discards until EOF, never writes."""
    harness.drain_until_eof(conn)


def ticker(backend, conn):
    """Writes a tick every TICK seconds for ACTIVE_FOR, then goes quiet and
    waits for EOF."""
    n = int(ACTIVE_FOR / TICK)
    for _ in range(n):
        conn.sendall(b"tick\n")
        time.sleep(TICK)      # pacing the traffic, not waiting for anything
    harness.drain_until_eof(conn)


class IdleTimeoutTest(LbTestCase):

    def _wait_closed(self, s, since, what):
        data, how = recv_until_eof(s, timeout=MAX_CLOSE + 2)
        dt = time.monotonic() - since
        print(f"measured: {what} closed {dt:.3f} s after the last traffic")
        self.assertIn(how, ("eof", "reset"), f"{what}: still open {dt:.2f}s after the last traffic")
        self.assertGreaterEqual(dt, MIN_CLOSE, f"{what}: closed only {dt:.2f}s after the last traffic")
        self.assertLessEqual(dt, MAX_CLOSE, f"{what}: closed {dt:.2f}s after the last traffic")
        return data

    def test_idle_connection_is_closed(self):
        echo = self.echo()
        lb = self.lb([("echo", echo)], idle_timeout="1s")
        s = self.client(lb.port)
        self.assertEqual(harness.roundtrip(s, b"ping\n"), b"ping\n")
        t0 = time.monotonic()
        self.assertEqual(self._wait_closed(s, t0, "idle connection"), b"")
        # lb closed its backend side too.
        wait_for(lambda: echo.active == 0, 5, "lb to close the backend connection")

    def test_idle_connection_never_used(self):
        echo = self.echo()
        lb = self.lb([("echo", echo)], idle_timeout="1s")
        t0 = time.monotonic()
        s = self.client(lb.port)
        self.assertEqual(self._wait_closed(s, t0, "unused connection"), b"")

    def test_traffic_keeps_connection_open(self):
        # Three connections at once: traffic both ways, client->server only,
        # server->client only. Each must stay open while traffic flows and
        # close about idle_timeout after it stops.
        echo, sk, tk = self.echo(), self.custom(sink, "sink"), self.custom(ticker, "ticker")
        # One pool per kind of traffic, one frontend each.
        admin = harness.free_port()
        ports = {"both": harness.free_port(), "up": harness.free_port(), "down": harness.free_port()}
        targets = {"both": echo, "up": sk, "down": tk}
        lines = ["[global]", "workers = 2", "shutdown_timeout = 3s", "",
                 "[admin]", f"listen = 127.0.0.1:{admin}", ""]
        for k in ports:
            lines += [f"[frontend {k}]", f"listen = 127.0.0.1:{ports[k]}", f"pool = {k}", "",
                      f"[pool {k}]", f"server = {k}1 {targets[k].addr}",
                      "idle_timeout = 1s", "check = none", ""]
        self.start_lb("\n".join(lines))

        results = {}

        def both():
            s = harness.connect(ports["both"])
            try:
                t0 = time.monotonic()
                last = t0
                while time.monotonic() - t0 < ACTIVE_FOR:
                    if harness.roundtrip(s, b"tick\n", timeout=5) != b"tick\n":
                        return "bad echo"
                    last = time.monotonic()
                    time.sleep(TICK)        # pacing
                return ("ok", s, last)
            except AssertionError as e:
                return f"closed during traffic after {time.monotonic() - t0:.2f}s: {e}"

        def up():
            s = harness.connect(ports["up"])
            t0 = time.monotonic()
            last = t0
            while time.monotonic() - t0 < ACTIVE_FOR:
                if harness.is_readable(s):      # the sink never writes: EOF/RST
                    return f"closed during client->server traffic after {time.monotonic() - t0:.2f}s"
                try:
                    s.sendall(b"tick\n")
                except OSError as e:
                    return f"send failed after {time.monotonic() - t0:.2f}s: {e!r}"
                last = time.monotonic()
                time.sleep(TICK)            # pacing
            return ("ok", s, last)

        def down():
            s = harness.connect(ports["down"])
            t0 = time.monotonic()
            n = int(ACTIVE_FOR / TICK)
            try:
                harness.recv_exact(s, 5 * n, timeout=ACTIVE_FOR + 5)
            except AssertionError as e:
                return f"closed during server->client traffic after {time.monotonic() - t0:.2f}s: {e}"
            return ("ok", s, time.monotonic())

        def run(name, fn):
            try:
                results[name] = fn()
            except Exception as e:
                results[name] = repr(e)

        threads = [harness.Thread(run, k, f)
                   for k, f in (("both", both), ("up", up), ("down", down))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=ACTIVE_FOR + 15)
        socks = [r[1] for r in results.values() if isinstance(r, tuple)]
        for s in socks:
            self.addCleanup(s.close)
        for k in ("both", "up", "down"):
            r = results.get(k)
            self.assertIsInstance(r, tuple, f"{k}: {r}")
        # Traffic stopped: each closes about idle_timeout after its own last
        # traffic. Watch the three at once so each close time is exact.
        pending = {k: results[k] for k in ("both", "up", "down")}
        closed_after = {}
        deadline = time.monotonic() + MAX_CLOSE + 3
        while pending and time.monotonic() < deadline:
            ready, _, _ = select.select([r[1] for r in pending.values()], [], [], 0.05)
            now = time.monotonic()
            for k, (_, s, last) in list(pending.items()):
                if s in ready:
                    try:
                        d = s.recv(65536)
                    except ConnectionResetError:
                        d = b""
                    self.assertEqual(d, b"", f"{k}: data instead of a close")
                    closed_after[k] = now - last
                    del pending[k]
        self.assertFalse(pending, f"still open {MAX_CLOSE + 3}s after the traffic stopped: "
                                  f"{sorted(pending)} (closed: {closed_after})")
        print("measured: closed after the last traffic: " +
              ", ".join(f"{k} {dt:.3f} s" for k, dt in sorted(closed_after.items())))
        for k, dt in closed_after.items():
            self.assertGreaterEqual(dt, MIN_CLOSE, f"{k}: closed {dt:.2f}s after the last traffic")
            self.assertLessEqual(dt, MAX_CLOSE, f"{k}: closed {dt:.2f}s after the last traffic")
        wait_for(lambda: echo.active + sk.active + tk.active == 0, 5,
                 "lb to close the backend connections")


if __name__ == "__main__":
    harness.main()
