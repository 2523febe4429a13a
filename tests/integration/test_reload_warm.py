"""A reload that replaces every server of a pool (a blue/green switch)
keeps the pool serving while the new servers' first probes run.

New servers start pending (out until their first probe passes) and removed
servers leave; without a warm-up the pool has nobody to serve for a probe's
time. Here the health endpoint takes 300 ms to answer (every server's check
goes to one slow HTTP port, check_port), so the refusal window before the
warm-up was 300 ms+; with it, clients that arrive meanwhile go to the
leaving (blue) servers until a green one passes, then only to green, and
blue drains. When the green servers' first probes fail, the warm-up ends
with them and blue leaves anyway: the warm-up delays the switch, it does
not keep servers the config removed."""

import threading
import time

import harness
from harness import IO_TIMEOUT, LbTestCase, free_port, wait_for
from test_reload_traffic import config_text, sighup_reload, start_lb, write_atomic

PROBE_MS = 300


class ReloadWarmTest(LbTestCase):

    def text(self, servers, check_port):
        keys = {"check": "http", "check_port": check_port, "check_path": "/health",
                "check_interval": "2s", "check_timeout": "1s", "rise": 1, "fall": 1}
        return config_text(self.admin_port, [("fe", self.port, "p")], [("p", servers, keys)])

    def clients(self, stop, results, n=4):
        """n client threads fetching names in a loop: results gets each
        answer ("" for a client lb closed unanswered) with its time."""
        def loop():
            while not stop.is_set() and len(results) < 20000:
                try:
                    name = harness.fetch_name(self.port, timeout=IO_TIMEOUT)
                except (OSError, AssertionError):
                    name = ""
                results.append((time.monotonic(), name))
        threads = [harness.Thread(loop) for _ in range(n)]
        for t in threads:
            t.start()
        return threads

    def setUp(self):
        self.admin_port, self.port = free_port(), free_port()
        self.hc = self.hc_backend(count=2)
        self.hc.mode(self.hc.ports[0], f"slow:{PROBE_MS}")

    def test_blue_green_switch_refuses_no_client(self):
        blue = [("b1", self.named("b1")), ("b2", self.named("b2"))]
        green = [("g1", self.named("g1")), ("g2", self.named("g2"))]
        check_port = self.hc.ports[0]
        lb = start_lb(self, self.text(blue, check_port), self.admin_port)
        for name, _ in blue:
            lb.admin.wait_server("p", name, lambda s: s["health"] == "up", IO_TIMEOUT,
                                 f"{name} up")
        stop, results = threading.Event(), []
        threads = self.clients(stop, results)
        wait_for(lambda: len(results) > 50, IO_TIMEOUT, "traffic through blue")
        write_atomic(lb.config_path, self.text(green, check_port))
        t_reload = time.monotonic()
        ev = sighup_reload(lb, "2")
        wait_for(lambda: any(n in ("g1", "g2") for t, n in results[-20:]), IO_TIMEOUT,
                 "traffic through green")
        t_green = time.monotonic()
        wait_for(lambda: len(results) > 0 and results[-1][0] > t_green + 0.3, IO_TIMEOUT,
                 "more traffic")
        stop.set()
        for t in threads:
            t.join(IO_TIMEOUT)
        refused = [t for t, n in results if n == ""]
        self.assertEqual(len(refused), 0, f"{len(refused)} of {len(results)} clients refused")
        names = {n for _, n in results}
        self.assertEqual(names, {"b1", "b2", "g1", "g2"}, names)
        # blue served until the switch, green after it: no blue answer
        # started after the first green one (each client is sequential).
        first_green = min(t for t, n in results if n.startswith("g"))
        late_blue = [t - first_green for t, n in results
                     if n.startswith("b") and t > first_green + 0.2]
        self.assertEqual(late_blue, [], "blue still served well after the switch")
        warm = lb.events("reload_warming")
        self.assertEqual(len(warm), 1, warm)
        self.assertEqual(warm[0].get("held"), "2", warm[0])
        self.assertGreaterEqual(int(ev["warm_ms"]), PROBE_MS - 50, ev)
        self.assertLess(int(ev["warm_ms"]), PROBE_MS + 1500, ev)
        removed = lb.wait_event("server_removed", count=2)
        self.assertEqual({e["server"] for e in removed}, {"b1", "b2"})
        self.assertGreaterEqual(harness.event_time(removed[0]) + 0.05,
                                harness.event_time(warm[0]) + PROBE_MS / 1000 - 0.05)
        self.assertLess(t_green - t_reload, IO_TIMEOUT)

    def test_failing_green_ends_the_warm_up(self):
        blue = [("b1", self.named("b1"))]
        green = [("g1", self.named("g1"))]
        lb = start_lb(self, self.text(blue, self.hc.ports[1]), self.admin_port,
                      allowed_errors=("no_server",))
        lb.admin.wait_server("p", "b1", lambda s: s["health"] == "up", IO_TIMEOUT, "b1 up")
        # green's checks go to a port that answers 503 after 300 ms
        self.hc.mode(self.hc.ports[0], "503")
        write_atomic(lb.config_path, self.text(green, self.hc.ports[0]))
        ev = sighup_reload(lb, "2")
        self.assertLess(int(ev["warm_ms"]), 1000, ev)
        lb.wait_event("server_removed", server="b1")
        got = harness.request(self.port)[0]
        self.assertEqual(got, b"", "a client was served with green down and blue removed")


if __name__ == "__main__":
    harness.main()
