"""[global] state_file: what lb knows of its servers survives a restart.

- at exit (and after each reload of the file) every server's health and
  operator state is written, whole (a temporary file renamed over it);
- at the next start a server of the config found there (same pool, name
  and address) starts in its saved state: one an operator disabled stays
  disabled from the first connection on, one that was down stays down (no
  "first probe decides" transition), its streaks carried on;
- a file that is corrupt, foreign or older than 600 s is logged
  (event=state_ignored, with the line and the reason) and ignored: the
  start goes on as without it."""

import os
import signal
import time

import harness
from admin_client import find_server, start_lb
from harness import LbTestCase, wait_for

WAIT = 10.0
CHECK = {"check": "tcp", "check_interval": "200ms", "check_timeout": "150ms", "rise": 2,
         "fall": 2, "min_servers": 0}


class StateFileTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.dir = harness.make_tmpdir()
        self.path = os.path.join(self.dir, "lb.state")

    def start(self, servers, **kw):
        return start_lb(self, [("web", servers, CHECK)], state_file=self.path, **kw)

    def test_restart_keeps_health_and_operator_state(self):
        a, b, c = self.named("a"), self.named("b"), self.refused()
        servers = [("a", a.port), ("b", b.port), ("c", c.port)]
        lb = self.start(servers)
        lb.wait_event("server_down", server="c")
        self.assertEqual(lb.admin.action("web", "b", "disable").status, 200)
        # a reload of the file writes it too
        lb.send_signal(signal.SIGHUP)
        lb.wait_event("state_saved")
        lb.stop()
        ev = lb.events("state_saved")[-1]
        self.assertEqual(ev["servers"], "3")
        self.assertFalse(os.path.exists(self.path + ".tmp"))
        with open(self.path) as f:
            lines = f.read().splitlines()
        self.assertRegex(lines[0], r"^lb-state 1 \d+\.\d{3}$")
        self.assertIn(f"server web b 127.0.0.1:{b.port} health=up", "\n".join(lines))
        self.assertRegex("\n".join(lines), rf"server web c 127\.0\.0\.1:{c.port} health=down "
                         r"successes=0 failures=\d+ admin=none down_ms=\d+")

        # The next start: b disabled and c down from the first moment.
        lb2 = self.start(servers)
        ev = lb2.wait_event("state_loaded")[0]
        self.assertEqual((ev["saved"], ev["applied"]), ("3", "3"))
        st = lb2.admin.stats()
        got = {s: (find_server(st, "web", s)["state"], find_server(st, "web", s)["admin"])
               for s in ("a", "b", "c")}
        self.assertEqual(got, {"a": ("up", "none"), "b": ("disabled", "disable"),
                               "c": ("down", "none")})
        names = [harness.fetch_name(lb2.fports["fe_web"]) for _ in range(20)]
        self.assertEqual(set(names), {"a"}, "a disabled or down server got a connection")
        # c was down already: no transition, no "first probe decides"
        wait_for(lambda: find_server(lb2.admin.stats(), "web", "c")["checks_total"] >= 3, WAIT,
                 "3 probes of c")
        self.assertEqual(lb2.events("server_down"), [])
        self.assertEqual(lb2.events("server_enable"), [])
        lb2.assert_running()

    def test_bad_files_are_ignored(self):
        a = self.named("a")
        now = time.time()
        cases = [
            (b"garbage\n", "line 1: not an lb state file (lb-state 1 TIME)"),
            (f"lb-state 1 {now - 700:.3f}\n".encode(), "written 700 s ago, more than 600 s"),
            (f"lb-state 1 {now:.3f}\nserver web a 127.0.0.1:{a.port} health=sick successes=0 "
             f"failures=0 admin=none down_ms=0\n".encode(),
             "line 2: health= must be up, down or warning"),
            (f"lb-state 1 {now:.3f}\nserver web a 127.0.0.1:{a.port}".encode(),
             "line 2: too long or not ended"),
            (b"", "empty"),
        ]
        for content, reason in cases:
            with self.subTest(reason=reason):
                with open(self.path, "wb") as f:
                    f.write(content)
                lb = self.start([("a", a.port)])
                ev = lb.wait_event("state_ignored")[0]
                if reason.startswith("written 700 s"):
                    # the age is rounded when lb reads the file, which a
                    # loaded machine may do seconds after the earlier cases
                    self.assertRegex(ev["reason"], r"^written 70[0-9] s ago, more than 600 s$")
                else:
                    self.assertEqual(ev["reason"], reason, ev)
                self.assertEqual(harness.fetch_name(lb.fports["fe_web"]), "a")
                lb.stop()
        # A saved server whose address changed is another server: not applied.
        with open(self.path, "w") as f:
            f.write(f"lb-state 1 {time.time():.3f}\nserver web a 127.0.0.1:1 health=down "
                    "successes=0 failures=9 admin=disable down_ms=5\n")
        lb = self.start([("a", a.port)])
        ev = lb.wait_event("state_loaded")[0]
        self.assertEqual((ev["saved"], ev["applied"]), ("1", "0"))
        self.assertEqual(find_server(lb.admin.stats(), "web", "a")["admin"], "none")
        # No file at all: said once, at info.
        lb.stop()
        os.unlink(self.path)
        lb = self.start([("a", a.port)])
        lb.wait_event("state_none")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
