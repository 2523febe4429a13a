"""Removal by disabling: POST .../disable takes a server out of rotation and
closes its open connections at once (counted in drained_by_timeout), also
when it was already draining; health checks go on while it is disabled;
POST .../enable puts it back under health-check control: in rotation when
its checks pass, not before. drain_timeout = 0 closes a server's connections
at once when a health check or an operator drain takes it out.

Backends and clients are those of test_removal_drain.py (StreamBackend,
Stream)."""

import time

import harness
from harness import event_time, wait_for
from test_removal_drain import WAIT, RemovalTestCase, open_stream, who

PROMPT = 1.0            # "at once": the client sees the close within this


class DisableTest(RemovalTestCase):

    def assert_closed_at_once(self, server, action, streams, what):
        """POSTs action on server; every stream must be closed by lb (EOF or
        reset) within PROMPT of the POST. Prints the time."""
        t0 = time.monotonic()
        self.action(server, action)
        ends = [s.wait_end(timeout=WAIT) for s in streams]
        took = max(e[0] for e in ends) - t0
        print(f"\n{what} {took * 1000:.0f} ms after the POST "
              f"({', '.join(e[2] for e in ends)})")
        for e in ends:
            self.assertIn(e[2], ("eof", "reset"))
        self.assertLess(took, PROMPT, f"{action} must close {server}'s connections at once")

    def test_disable_closes_at_once_then_enable(self):
        lb = self.start()                   # drain_timeout: default 30 s
        a = self.backends["A"]
        s1 = open_stream(self, lb.port, "A")
        s2 = open_stream(self, lb.port, "A")
        sb = open_stream(self, lb.port, "B")
        # open_stream's attempts that reached B or C instead are closed by the
        # client; lb counts them out a moment later.
        lb.admin.wait_server(self.POOL, "A", lambda s: s["active_connections"] == 2, WAIT,
                             "A's two streams and nothing else open")

        self.assert_closed_at_once("A", "disable", (s1, s2),
                                   "disable: both connections to A closed")
        st = self.wait_state("A", "disabled", timeout=WAIT)
        self.assertEqual((st["drained_by_timeout"], st["active_connections"], st["admin"]),
                         (2, 0, "disable"), st)
        wait_for(lambda: a.open_clients == 0, WAIT, "lb to close A's side too")
        # maintenance, at info: what pages on server_down must not page
        down = lb.wait_event("server_maintenance", server="A")[0]
        self.assertEqual((down.get("reason"), down.get("level")), ("operator: disable", "info"), down)
        self.assertEqual(lb.events("server_down", server="A"), [])
        self.assertEqual(len(lb.wait_event("server_disable", server="A")), 1)
        # B's connection is untouched.
        sb.wait_rounds_after(time.monotonic(), 3)
        self.assertEqual(self.srv("B")["drained_by_timeout"], 0)
        # No new connection reaches A.
        before = a.clients
        self.assertEqual(set(who(lb.port) for _ in range(12)), {"B", "C"})
        self.assertEqual(a.clients, before)
        # Checks go on while disabled.
        at = st["last_check"]["at"]
        st = lb.admin.wait_server(self.POOL, "A", lambda s: s["last_check"]["at"] > at,
                                  WAIT, "a newer check while disabled")
        self.assertEqual((st["state"], st["health"]), ("disabled", "up"), st)
        self.assert_consistent()

        self.action("A", "enable")
        st = self.wait_state("A", "up", timeout=WAIT)
        self.assertEqual(st["admin"], "none", st)
        up = lb.wait_event("server_up", server="A")[0]
        self.assertEqual(up.get("reason"), "operator: enable", up)
        self.assertIn("A", {who(lb.port) for _ in range(9)}, "new connections after enable")
        self.assert_consistent()

    def test_enable_waits_for_checks(self):
        lb = self.start()
        a = self.backends["A"]
        self.action("A", "disable")
        self.wait_state("A", "disabled", timeout=WAIT)
        # A fails its checks while disabled: the health field follows.
        a.status = 500
        st = lb.admin.wait_server(self.POOL, "A", lambda s: s["health"] == "down", WAIT,
                                  "health down while disabled")
        self.assertEqual(st["state"], "disabled", st)

        # Enabled while failing: under health control, so still out.
        self.action("A", "enable")
        lb.wait_event("server_enable", server="A")
        st = self.srv("A")
        self.assertEqual((st["state"], st["admin"]), ("down", "none"), st)
        at = st["last_check"]["at"]
        st = lb.admin.wait_server(self.POOL, "A", lambda s: s["last_check"]["at"] > at,
                                  WAIT, "a failed check after enable")
        self.assertEqual(st["state"], "down", st)
        before = a.clients
        self.assertNotIn("A", {who(lb.port) for _ in range(9)})
        self.assertEqual(a.clients, before, "A got a client while enabled but failing")
        self.assertFalse(lb.events("server_up", server="A"))

        # Its checks pass: back in rotation.
        a.status = 200
        up = lb.wait_event("server_up", server="A")[0]
        self.assertNotIn("operator", up.get("reason", ""), up)
        self.assertEqual(self.srv("A")["state"], "up")
        self.assertIn("A", {who(lb.port) for _ in range(9)})
        self.assert_consistent()

    def test_disable_while_draining_closes_at_once(self):
        lb = self.start()                   # drain_timeout: default 30 s
        stream = open_stream(self, lb.port, "A")
        self.action("A", "drain")
        self.assertEqual(self.srv("A")["state"], "draining")
        stream.wait_rounds_after(time.monotonic(), 5)

        self.assert_closed_at_once("A", "disable", (stream,),
                                   "drain then disable: connection closed")
        st = self.wait_state("A", "disabled", timeout=WAIT)
        self.assertEqual((st["drained_by_timeout"], st["admin"]), (1, "disable"), st)
        self.assert_consistent()

    def test_drain_timeout_zero_closes_at_once(self):
        lb = self.start(drain_timeout=0)
        a = self.backends["A"]
        sa = open_stream(self, lb.port, "A")
        sb = open_stream(self, lb.port, "B")
        for n in ("A", "B"):
            lb.admin.wait_server(self.POOL, n, lambda s: s["active_connections"] == 1, WAIT,
                                 "its stream and nothing else open")

        # A health verdict.
        a.status = 500
        down = lb.wait_event("server_down", server="A")[0]
        _, wall_end, how = sa.wait_end(timeout=WAIT)
        took = wall_end - event_time(down)
        print(f"\ndrain_timeout = 0, health down: connection closed {took * 1000:.0f} ms "
              f"after server_down ({how})")
        self.assertIn(how, ("eof", "reset"))
        self.assertLess(took, PROMPT)
        st = self.wait_state("A", "down", timeout=WAIT)
        self.assertEqual(st["drained_by_timeout"], 1, st)

        # An operator drain.
        self.assert_closed_at_once("B", "drain", (sb,),
                                   "drain_timeout = 0, POST drain: connection closed")
        st = self.wait_drained("B")
        self.assertEqual(st["drained_by_timeout"], 1, st)
        self.assertEqual(set(who(lb.port) for _ in range(6)), {"C"})
        self.assert_consistent()


if __name__ == "__main__":
    harness.main()
