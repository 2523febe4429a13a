"""GET /ready and withdraw_delay: the signal a routing layer in front of lb
(a BGP speaker's health check, keepalived's vrrp_script, a readiness probe)
needs, and the graceful leave it buys.

- 200 "ready" while every pool a frontend uses has a server in rotation; a
  pool held by its guard counts; a pool no frontend uses does not matter;
  503 with the reasons otherwise;
- SIGTERM with withdraw_delay: /ready is 503 at once, lb goes on accepting
  and serving new connections for withdraw_delay (event=withdraw), then
  stops listening and drains: an open connection finishes;
- SIGINT stops at once; a second SIGTERM ends the withdrawal."""

import signal
import socket
import threading
import time

import harness
from admin_client import Admin, start_lb
from harness import HOST, LbTestCase, event_time, wait_for

WAIT = 10.0
# "At once": the listener closes in the turn of lb's main loop that takes
# the signal (SIGINT, or the second SIGTERM, sent once event=withdraw is
# logged): measured 10-12 ms (SIGINT) and 21-26 ms (two SIGTERMs) in the
# optimised and ASan builds, most of it the poll of wait_for. The bound is
# a busy machine's slack; the withdrawal it must cut short is 30 s.
STOP_SOON = 0.5
CHECK = {"check": "tcp", "check_interval": "100ms", "check_timeout": "100ms", "rise": 1,
         "fall": 1}


def refused(port):
    """True once nothing listens on port. A connection caught in the queue
    of a listener as it closes is reset: not yet refused, look again."""
    try:
        socket.create_connection((HOST, port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False


class ReadyTest(LbTestCase):

    def test_ready_follows_the_pools(self):
        web, dead = self.echo("web"), self.refused()
        lb = start_lb(self, [("web", [("a", web.port)], CHECK),
                             ("guarded", [("x", dead.port)], dict(CHECK, min_servers=1)),
                             ("empty", [("y", dead.port)], dict(CHECK, min_servers=0)),
                             ("unused", [("z", dead.port)], dict(CHECK, min_servers=0))],
                      frontends=[("fe_web", "web"), ("fe_g", "guarded")])
        r = wait_for(lambda: (lambda r: r if r.status == 200 else None)(lb.admin.get("/ready")),
                     WAIT, "ready")
        self.assertEqual((r.body, r.header("Content-Type")), (b"ready\n", "text/plain; charset=utf-8"))
        # the guard holds x in rotation: ready; unused's server is down: no matter
        lb.wait_event("guard_hold", pool="guarded")
        self.assertEqual(lb.admin.get("/ready").status, 200)
        self.assertEqual(lb.admin.get("/ready", headers={"Host": HOST}).status, 200)
        # a frontend's pool with nothing in rotation: 503 with the reason
        lb.stop()
        lb2 = start_lb(self, [("web", [("a", web.port)], CHECK),
                              ("empty", [("y", dead.port)], dict(CHECK, min_servers=0))])
        lb2.wait_event("server_down", pool="empty")
        r = lb2.admin.get("/ready")
        self.assertEqual((r.status, r.json()),
                         (503, {"ready": False, "reasons": ["pool empty: no server in rotation"]}))
        self.assertEqual(lb2.admin.post("/ready").status, 405)

    def test_sigterm_withdraws_then_drains(self):
        web = self.echo("web")
        delay = 1.0
        lb = start_lb(self, [("web", [("a", web.port)], {})], withdraw_delay="1s",
                      shutdown_timeout="5s")
        port = lb.fports["fe_web"]
        self.assertEqual(lb.admin.get("/ready").status, 200)
        held = harness.connect(port)                    # open across the whole leave
        self.assertEqual(harness.roundtrip(held, b"before"), b"before")
        results, stop = [], threading.Event()

        def clients():
            while not stop.is_set():
                t = time.time()
                try:
                    s = harness.connect(port, timeout=2)
                    ok = harness.roundtrip(s, b"x") == b"x"
                    s.close()
                except OSError:
                    ok = False
                results.append((t, ok))
        th = harness.Thread(clients)
        th.start()
        self.addCleanup(stop.set)
        time.sleep(0.2)
        t_term = time.time()
        lb.send_signal(signal.SIGTERM)
        r = wait_for(lambda: (lambda r: r if r.status == 503 else None)(lb.admin.get("/ready")),
                     WAIT, "/ready to say 503")
        t_503 = time.time()
        self.assertIn("stopping: a SIGTERM came (withdraw_delay, then the drain)",
                      r.json()["reasons"])
        ev = lb.wait_event("withdraw")[0]
        self.assertEqual(ev["withdraw_delay_ms"], "1000")
        # Listening until withdraw_delay has passed, not after.
        # A SYN that comes while lb closes its listener is dropped and
        # refused at its retransmission, 1 s later: the probe's start counts.
        probes = []
        wait_for(lambda: probes.append(time.time()) or refused(port), WAIT,
                 "the listener to close")
        t_closed = probes[-1]
        stop.set()
        th.join(timeout=10)
        during = [ok for t, ok in results if t_term <= t < t_term + delay - 0.1]
        print(f"measured: /ready 503 {(t_503 - t_term) * 1000:.0f} ms after SIGTERM; "
              f"{len(during)} new connections served during the {delay:.0f} s withdrawal, "
              f"{during.count(False)} failed; listener closed after "
              f"{(t_closed - t_term) * 1000:.0f} ms")
        self.assertLess(t_503 - t_term, 0.5)
        self.assertGreater(len(during), 20)
        self.assertEqual(during.count(False), 0, "a new connection failed while withdrawing")
        self.assertTrue(delay - harness.TIMER_TICK - 0.01 <= t_closed - t_term <= delay + 1.0,
                        f"listener closed {t_closed - t_term:.2f} s after SIGTERM")
        shutdown = lb.wait_event("shutdown")[0]
        self.assertGreaterEqual(event_time(shutdown) - event_time(ev), delay - 0.01)
        # The open connection still works, then finishes; lb exits.
        self.assertEqual(harness.roundtrip(held, b"after"), b"after")
        held.close()
        self.assertEqual(lb.wait_exit(), 0)

    def test_sigint_and_second_sigterm_stop_at_once(self):
        web = self.echo("web")
        for first, second in ((signal.SIGINT, None), (signal.SIGTERM, signal.SIGTERM)):
            with self.subTest(first=first, second=second):
                lb = start_lb(self, [("web", [("a", web.port)], {})], withdraw_delay="30s")
                port = lb.fports["fe_web"]
                t = time.time()
                lb.send_signal(first)
                if second is not None:
                    lb.wait_event("withdraw")
                    lb.send_signal(second)
                # A SYN dropped while the listener closes is refused at its
                # retransmission, 1 s later: the refused probe's start counts.
                probes = []
                wait_for(lambda: probes.append(time.time()) or refused(port), WAIT,
                         "the listener to close")
                took = probes[-1] - t
                print(f"measured: {first.name}{'+' + second.name if second else ''}: "
                      f"listener closed {took:.3f} s after the first signal")
                self.assertLess(took, STOP_SOON, "the withdrawal (30 s) was not cut short")
                self.assertEqual(lb.wait_exit(), 0)
                self.assertEqual(bool(lb.events("withdraw")), second is not None)


if __name__ == "__main__":
    harness.main()
