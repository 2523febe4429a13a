"""Detection from live traffic (observe_errors): every observe_errors
consecutive failed connects of client traffic to a server trigger an
immediate out-of-schedule probe (event=observe_probe, counted in the
server's observed_probes); that probe decides. With check_interval = 5s and
fall = 1, a server whose listener closes leaves the rotation well within
an interval of the first refused client connect (DETECT_LIMIT, 1.5 s; it
takes milliseconds, the limit is slack for load) instead of up to 5 s
later, and retries hide the failures from clients. The control, with
observe_errors = 0, shows that the scheduled checks alone do not see the
crash within the same time.

The servers are ports of one hc_backend.py process; "crash" closes a
port's listener so that connects are refused."""

import time

import harness
from admin_client import Admin, find_server, make_admin_config
from harness import LbTestCase, event_time, http_via

POOL = "web"
NAMES = ("s0", "s1", "s2")
INTERVAL = 5.0
KEYS = {"check": "http", "check_interval": "5s", "check_timeout": "1s",
        "rise": 1, "fall": 1, "retries": 2}
WAIT = 10.0
DETECT_LIMIT = 1.5      # observe_errors = 1: out of rotation within this
CONTROL_WINDOW = DETECT_LIMIT   # observe_errors = 0: still in rotation after this


class ObserveTest(LbTestCase):

    def start(self, observe_errors):
        self.b = self.hc_backend(count=len(NAMES))
        self.port = dict(zip(NAMES, self.b.ports))
        keys = dict(KEYS, observe_errors=observe_errors)
        text, admin_port, fports = make_admin_config(
            [(POOL, [(n, self.b.addr(self.port[n])) for n in NAMES], keys)],
            log_level="debug")
        self.lbi = self.start_lb(text)
        self.admin = Admin(admin_port)
        self.fport = fports[f"fe_{POOL}"]
        # lb is ready and the first probe round passed.
        for n in NAMES:
            self.admin.wait_server(POOL, n, lambda s: s["last_check"] is not None
                                   and s["last_check"]["result"] == "passed",
                                   WAIT, "a first passed check")
        # lb probes every server at start, then a second time at a random
        # point of the first interval, then every interval: once s0's second
        # probe has passed, its next scheduled probe is a whole interval away.
        st = self.admin.wait_server(POOL, "s0", lambda s: s["checks_total"] >= 2
                                    and s["last_check"]["result"] == "passed",
                                    INTERVAL + WAIT, "a second passed check")
        self.next_scheduled = st["last_check"]["at"] + INTERVAL - 0.1
        return self.lbi

    def srv(self, name):
        return find_server(self.admin.stats(), POOL, name)

    def test_refused_connects_trigger_a_probe(self):
        lb = self.start(observe_errors=1)
        limit = self.next_scheduled
        self.b.crash(self.port["s0"])

        t0 = time.time()
        answers = []
        down = None
        while time.time() - t0 < 3.0:
            answers.append(http_via(self.fport))
            evs = lb.events("server_down", server="s0")
            if evs:
                down = evs[0]
                seen = time.time() - t0
                break
        self.assertIsNotNone(down, f"s0 not out within 3 s; {len(answers)} clients sent")
        took = event_time(down) - t0
        print(f"\nobserve detection: {max(took, 0) * 1000:.0f} ms after the first client "
              f"connect by the log's ts (ms resolution), seen in the log by the test "
              f"{seen * 1000:.0f} ms after it; {len(answers)} clients until then")
        self.assertLess(event_time(down), limit,
                        "the scheduled probe came first: nothing tested")
        self.assertNotIn(None, answers, "a client connection failed despite retries")
        self.assertNotIn(self.port["s0"], answers)
        self.assertLessEqual(took, DETECT_LIMIT,
                             f"s0 out {took:.3f}s after the first client connect")
        self.assertIn("refused", down.get("reason", "").lower(), down)
        self.assertEqual(down.get("failures"), "1", down)

        obs = lb.events("observe_probe", server="s0")
        self.assertGreaterEqual(len(obs), 1)
        self.assertEqual(obs[0].get("pool"), POOL, obs[0])
        self.assertEqual(obs[0].get("live_failures"), "1", obs[0])
        self.assertLessEqual(event_time(obs[0]), event_time(down), obs[0])
        st = self.srv("s0")
        self.assertEqual(st["state"], "down", st)
        self.assertGreaterEqual(st["observed_probes"], 1, st)
        self.assertGreaterEqual(st["connect_failures"], 1, st)
        for n in ("s1", "s2"):
            self.assertEqual(self.srv(n)["observed_probes"], 0, n)
        # Clients go on being served by the others.
        more = [http_via(self.fport) for _ in range(6)]
        self.assertEqual(set(more), {self.port["s1"], self.port["s2"]})

    def test_control_without_observe(self):
        lb = self.start(observe_errors=0)
        limit = self.next_scheduled
        self.b.crash(self.port["s0"])

        t0 = time.time()
        answers = []
        while time.time() - t0 < CONTROL_WINDOW:
            answers.append(http_via(self.fport))
        t1 = time.time()
        self.assertLess(t1, limit, "the scheduled probe may have run: nothing tested")
        st = self.srv("s0")
        self.assertNotIn(None, answers, "a client connection failed despite retries")
        self.assertGreaterEqual(st["connect_failures"], 1,
                                f"no client connect reached s0 in {len(answers)} clients")
        self.assertEqual(st["state"], "up", st)
        self.assertEqual(st["observed_probes"], 0, st)
        self.assertFalse(lb.events("server_down"))
        self.assertFalse(lb.events("observe_probe"))
        print(f"\ncontrol (observe_errors = 0): s0 still up {(t1 - t0) * 1000:.0f} ms after "
              f"the first client connect, {st['connect_failures']} refused connects")


if __name__ == "__main__":
    harness.main()
