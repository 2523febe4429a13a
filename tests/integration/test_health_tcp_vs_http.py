"""TCP against HTTP checks on a hung server (it accepts connections, the
kernel completes the handshakes, but it never answers): a TCP check still
passes, so the server stays in rotation; an HTTP check times out waiting for
the status line, so it goes out. Both pools share the same two servers in
one lb."""

import time

import harness
from harness import LbTestCase, event_time, health_history, http_via, transition_streak, wait_for

I = 0.3
T = 0.2
KEYS = {"check_interval": "300ms", "check_timeout": "200ms", "rise": 1, "fall": 2}


class HealthTcpVsHttpTest(LbTestCase):

    def test_hung_server(self):
        b = self.hc_backend(count=2)
        hung, good = b.ports
        servers = [("hung", b.addr(hung)), ("good", b.addr(good))]
        lb = self.lb_pools([("tcp", servers, dict(KEYS, check="tcp")),
                            ("http", servers, dict(KEYS, check="http"))],
                           log_level="debug")

        def passes(pool, server, after=0.0):
            return [e for e in lb.events("check", pool=pool, server=server, result="passed")
                    if event_time(e) > after]

        for pool in ("tcp", "http"):
            for s in ("hung", "good"):
                wait_for(lambda: len(passes(pool, s)) >= 2, 10, f"2 passes of {pool}/{s}")
        # TCP checks connect and close without a request.
        wait_for(lambda: b.info(hung)["empty"] >= 2, 10, "TCP checks seen by the server")
        # From here on. (A server's first probe decides alone: one answered
        # late at start, on a loaded machine, may have taken it out and the
        # next back in.)
        t_settled = time.time()

        def downs(pool, server=None):
            return [e for e in lb.events("server_down", pool=pool)
                    if event_time(e) > t_settled and server in (None, e["server"])]

        t_fault = b.mode(hung, "hang")
        wait_for(lambda: downs("http", "hung"), 10, "http/hung to go down")
        # From the history, which transition_streak reads.
        hist = health_history(lb, "http", "hung")
        down = next(e for e in hist
                    if e["event"] == "server_down" and event_time(e) > t_settled)
        self.assertIn("timeout", down.get("reason", "").lower(), down)
        self.assertEqual(down.get("failures"), "2", down)
        self.assertEqual(down.get("in_rotation"), "1/2", down)
        # With the 2nd failed probe (counted in the log), so between I + T
        # and 2I + T after the hang; load only makes it later.
        self.assertIsNone(transition_streak(hist, down, 2))
        latency = event_time(down) - t_fault
        self.assertTrue(I + T - 0.25 <= latency <= 2 * I + T + harness.HC_SLACK,
                        f"http pool: hung server down {latency * 1000:.0f} ms after the hang")
        # The TCP check keeps passing well after the HTTP one gave up.
        wait_for(lambda: len(passes("tcp", "hung", event_time(down))) >= 3, 10,
                 "3 more TCP passes of the hung server")
        self.assertFalse(downs("tcp"), "check = tcp took a server that accepts connections out")
        self.assertFalse(downs("http", "good"))

        # Clients: through the http pool only the good server; through the
        # tcp pool the hung one still gets its share (those clients hang).
        self.assertEqual({http_via(lb.ports["http"]) for _ in range(10)}, {good})
        before = b.info(hung)["other"]
        results = []

        def client():
            results.append(http_via(lb.ports["tcp"], timeout=1.0))
        threads = [harness.Thread(client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        self.assertIn(good, results)
        self.assertIn(None, results, "no client of the tcp pool reached the hung server")
        wait_for(lambda: b.info(hung)["other"] > before, 5,
                 "the hung server to see clients of the tcp pool")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
