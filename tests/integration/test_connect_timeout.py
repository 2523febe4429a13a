"""connect_timeout: a backend whose handshake never completes (its SYNs are
dropped) is given up after connect_timeout, and the next server is tried.

Timing is judged as the suite does: the lower bound is the contract's
(connect_timeout, less the tick of lb's timer clock, harness.TIMER_TICK; load
cannot make lb give up earlier), the upper bound gets SLACK for a loaded
machine, small enough that a binary that ignored the setting and waited the
default 1 s fails."""

import time

import harness
from harness import LbTestCase, connect, recv_until_eof

TIMEOUT = 0.3           # connect_timeout = 300ms
EARLIEST = TIMEOUT - harness.TIMER_TICK
# Below the 1 s default (0.3 + 0.4 < 1.0) also in the ASan build, where
# harness.HC_SLACK would not be: this path does no work that ASan slows much.
SLACK = 0.4


def timed_request(port):
    """One client connection through lb: returns (data, how, seconds from
    before the connect to EOF, the client's "127.0.0.1:PORT" as lb logs
    it)."""
    t0 = time.monotonic()
    s = connect(port, timeout=10)
    try:
        client = "%s:%d" % s.getsockname()
        data, how = recv_until_eof(s, timeout=10)
    finally:
        s.close()
    return data, how, time.monotonic() - t0, client


class ConnectTimeoutTest(LbTestCase):

    def test_blackholed_server_is_skipped_after_timeout(self):
        black = self.blackhole()
        live = self.named("live")
        lb = self.lb([("black", black), ("live", live)], connect_timeout="300ms",
                     retries=2, workers=1)
        elapsed = {}
        for i in range(6):
            data, how, dt, client = timed_request(lb.port)
            self.assertEqual((data, how), (b"live\n", "eof"),
                             f"connection {i + 1} after {dt:.2f}s")
            elapsed[client] = dt
        self.assertEqual(live.accepted, 6)

        # One worker, round robin over two servers of weight 1: exactly every
        # other connection tries "black" first, waits for the timeout and is
        # retried on "live".
        evs = lb.wait_event("connect_failed", count=3, server="black")
        self.assertEqual(len(evs), 3, [e.get("client") for e in evs])
        for ev in evs:
            self.assertEqual(ev.get("addr"), black.addr, ev)
            self.assertEqual(ev.get("error"), "timeout after 300 ms", ev)
            self.assertEqual(ev.get("attempt"), "1", ev)
        timed_out = {ev["client"] for ev in evs}
        self.assertLessEqual(timed_out, set(elapsed), (timed_out, elapsed))
        for client, dt in elapsed.items():
            if client in timed_out:
                self.assertGreaterEqual(dt, EARLIEST,
                                        f"{client} was given up on black after {dt:.3f}s, "
                                        f"before connect_timeout = 300ms")
                self.assertLess(dt, TIMEOUT + SLACK,
                                f"{client} took {dt:.3f}s through a blackholed server "
                                f"with connect_timeout = 300ms")

    def test_timeout_with_no_other_server_closes_client(self):
        black = self.blackhole()
        lb = self.lb([("black", black)], connect_timeout="300ms", retries=0,
                     allowed_errors={"no_server"})
        data, how, dt, client = timed_request(lb.port)
        self.assertEqual(data, b"")
        self.assertIn(how, ("eof", "reset"), f"client still open after {dt:.2f}s")
        self.assertGreaterEqual(dt, EARLIEST, f"lb gave up after {dt:.3f}s, before "
                                "connect_timeout = 300ms")
        self.assertLess(dt, TIMEOUT + SLACK, f"lb gave up after {dt:.3f}s with "
                        "connect_timeout = 300ms")
        ev = lb.wait_event("connect_failed", server="black")[0]
        self.assertEqual((ev.get("client"), ev.get("error")), (client, "timeout after 300 ms"), ev)
        lb.wait_event("no_server", pool="p")


if __name__ == "__main__":
    harness.main()
