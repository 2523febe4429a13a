"""Heartbeats (heartbeat_ttl): a server's own reports on its health, a
second input that can only lower it. Against real backends (hc_backend.py)
and the real admin port:

- a backend whose request threads hang but which keeps heartbeating "pass"
  is taken out by its HTTP probe, and the heartbeats never bring it back;
- a healthy backend whose heartbeats stop is out within the TTL plus the
  100 ms tick; a heartbeat brings it back;
- "fail" takes a server out at once with its note, "warn" makes it warning
  at warn_weight, "pass" restores it;
- the route's refusals: 404, 409 (a pool without heartbeat_ttl), 400, and
  401 without a token (the heartbeat_token opens heartbeats only);
- 1,000 heartbeat-only servers (check = none) reporting every 500 ms for
  6 s over pipelined connections: no TTL missed, every report counted."""

import json
import threading
import time

import harness
from admin_client import Pipeline, find_server, start_lb
from harness import HC_SLACK, TIMER_TICK, LbTestCase, event_time, wait_for

WAIT = 10.0
TICK = 0.1                  # lb's heartbeat tick (server.c, LB_TICK_MS)


def beat_path(pool, server):
    return f"/pools/{pool}/servers/{server}/heartbeat"


class Beater:
    """Heartbeats a set of servers every period, on one pipelined
    connection, until stopped; counts what it sent."""

    def __init__(self, port, items, period, token=None):
        self.items = items
        self.period = period
        self.pipe = Pipeline(port, token=token)
        self.stop_ev = threading.Event()
        self.sent = 0
        self.bad = []
        self.last = 0.0
        self.thread = harness.Thread(self._run)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + 60        # bounded, whatever the test does
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            t = time.monotonic()
            for status, body in self.pipe.post_many(self.items):
                if status != 200:
                    self.bad.append((status, body))
            self.sent += len(self.items)
            self.last = time.time()
            self.stop_ev.wait(max(0.0, self.period - (time.monotonic() - t)))

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=10)
        self.pipe.close()
        return self.last


class HeartbeatTest(LbTestCase):

    def test_hung_backend_keeps_heartbeating(self):
        """The trap of heartbeats: the request path hangs, the heartbeat
        thread does not. The probe decides."""
        b = self.hc_backend(count=2)
        hung, good = b.ports
        lb = start_lb(self, [("web", [("hung", b.addr(hung)), ("good", b.addr(good))],
                              {"check": "http", "check_interval": "300ms",
                               "check_timeout": "200ms", "rise": 1, "fall": 2,
                               "heartbeat_ttl": "2s"})], log_level="debug")
        beater = Beater(lb.admin_port, [(beat_path("web", s), b"") for s in ("hung", "good")],
                        0.2)
        self.addCleanup(beater.stop)
        lb.admin.wait_server("web", "hung", lambda s: s["heartbeat"]["total"] >= 2 and
                             s["health"] == "up", WAIT, "up, heartbeating")
        settled = time.time()
        b.mode(hung, "hang")
        ev = wait_for(lambda: [e for e in lb.events("server_down", server="hung")
                               if event_time(e) > settled], WAIT, "the hung server to go down")[0]
        self.assertTrue(ev["reason"].startswith("timeout after 200 ms"), ev)
        # Heartbeats keep coming: 2 s more, twice its TTL; it stays out.
        sent = beater.sent
        wait_for(lambda: beater.sent >= sent + 20, WAIT, "20 more heartbeats")
        srv = lb.admin.wait_server("web", "hung", lambda s: s["heartbeat"]["total"] >= sent + 10,
                                   WAIT, "the heartbeats counted")
        self.assertEqual((srv["state"], srv["health"]), ("down", "down"), srv)
        self.assertFalse([e for e in lb.events("server_up", server="hung")
                          if event_time(e) > settled], "a heartbeat brought back a hung server")
        self.assertEqual(beater.bad, [])
        lb.assert_running()

    def test_ttl_and_reports(self):
        b = self.hc_backend(count=2)
        ttl = 1.0
        lb = start_lb(self, [("web", [("a", b.addr(b.ports[0])), ("b", b.addr(b.ports[1]))],
                              {"check": "http", "check_interval": "300ms",
                               "check_timeout": "200ms", "rise": 1, "fall": 2,
                               "heartbeat_ttl": "1s", "warn_weight": "20%"})])
        beater = Beater(lb.admin_port, [(beat_path("web", "a"), b"")], 0.2)
        self.addCleanup(beater.stop)
        # b never heartbeats: out one TTL after start (the grace lb gives).
        ev = lb.wait_event("server_down", server="b")[0]
        self.assertRegex(ev["reason"], r"^heartbeat expired 1\.\d s ago$")
        # a, heartbeating: up; then its heartbeats stop.
        wait_for(lambda: beater.sent >= 10, WAIT, "10 heartbeats of a")
        last = beater.stop()
        ev = wait_for(lambda: [e for e in lb.events("server_down", server="a")], WAIT,
                      "a to go down once its heartbeats stop")[0]
        latency = event_time(ev) - last
        print(f"measured: heartbeats stopped -> out {latency * 1000:.0f} ms (TTL 1000 ms)")
        self.assertTrue(ttl - TIMER_TICK - 0.01 <= latency <= ttl + TICK + HC_SLACK,
                        f"out {latency * 1000:.0f} ms after the last heartbeat, TTL 1 s")
        self.assertRegex(ev["reason"], r"^heartbeat expired 1\.\d s ago$")
        # One heartbeat brings it back (its probe passes).
        r = lb.admin.post(beat_path("web", "a"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"status": "pass", "health": "up", "in_rotation": True,
                                    "heartbeat_ttl_ms": 1000})
        ev = lb.wait_event("server_up", server="a")[0]
        self.assertEqual(ev["reason"], "heartbeat: pass")
        # warn: warning at warn_weight; fail: out at once, with the note.
        r = lb.admin.post(beat_path("web", "a"), body=b'{"status":"warn","note":"queue 900"}')
        self.assertEqual(r.json()["health"], "warning", r)
        ev = lb.wait_event("server_warning", server="a")[0]
        self.assertEqual(ev["reason"], "queue 900")
        srv = find_server(lb.admin.stats(), "web", "a")
        self.assertEqual((srv["health"], srv["share"], srv["heartbeat"]["status"],
                          srv["heartbeat"]["note"]), ("warning", 0.2, "warn", "queue 900"), srv)
        r = lb.admin.post(beat_path("web", "a"), body=b'{"status":"fail","note":"disk full"}')
        self.assertEqual((r.json()["health"], r.json()["in_rotation"]), ("down", False), r)
        ev = lb.wait_event("server_down", count=2, server="a")[1]
        self.assertEqual(ev["reason"], "heartbeat fail: disk full")
        r = lb.admin.post(beat_path("web", "a"))
        self.assertEqual((r.json()["health"], r.json()["in_rotation"]), ("up", True), r)
        srv = find_server(lb.admin.stats(), "web", "a")
        self.assertEqual((srv["health"], srv["share"]), ("up", 1.0), srv)
        lb.assert_running()

    def test_refusals_and_tokens(self):
        lb = start_lb(self, [("hb", [("s", "127.0.0.1:1")], {"heartbeat_ttl": "5s"}),
                             ("plain", [("s", "127.0.0.1:2")], {})],
                      token="op-secret", heartbeat_token="hb-secret")
        a = lb.admin

        def post(path, token, body=b""):
            h = {"Authorization": f"Bearer {token}"} if token else {}
            return a.post(path, auth=False, headers=h, body=body)
        for token, want in ((None, 401), ("wrong", 401), ("hb-secret", 200),
                            ("op-secret", 200)):
            r = post(beat_path("hb", "s"), token)
            self.assertEqual(r.status, want, (token, r))
        # the heartbeat_token opens nothing else
        self.assertEqual(post("/pools/hb/servers/s/disable", "hb-secret").status, 401)
        r = post(beat_path("hb", "nope"), "hb-secret")
        self.assertEqual((r.status, r.json()), (404, {"error": "no such server in this pool"}))
        r = post(beat_path("nope", "s"), "hb-secret")
        self.assertEqual((r.status, r.json()), (404, {"error": "no such pool"}))
        r = post(beat_path("plain", "s"), "hb-secret")
        self.assertEqual((r.status, r.json()), (409, {"error": "heartbeats are off in this pool: "
                                                               "set heartbeat_ttl"}))
        r = post(beat_path("hb", "s"), "hb-secret", b'{"status":"alive"}')
        self.assertEqual((r.status, r.json()), (400, {"error": "status: use pass, warn or fail"}))
        srv = find_server(a.stats(), "hb", "s")
        self.assertEqual(srv["heartbeat"]["total"], 2, srv)     # the two accepted
        self.assertIsNone(find_server(a.stats(), "plain", "s")["heartbeat"])
        lb.assert_running()

    def test_thousand_servers(self):
        """check = none with heartbeat_ttl: heartbeat-only servers (the
        Nacos ephemeral-instance model). 1,000 report every 500 ms over
        four pipelined connections for 6 s; TTL 2 s: none may expire."""
        n, period, run = 1000, 0.5, 6.0
        servers = [(f"s{i}", f"127.0.0.{1 + i // 250}:{10000 + i}") for i in range(n)]
        lb = start_lb(self, [("hb", servers, {"heartbeat_ttl": "2s"})])
        beaters = [Beater(lb.admin_port, [(beat_path("hb", s), b"") for s, _ in servers[k::4]],
                          period) for k in range(4)]
        for bt in beaters:
            self.addCleanup(bt.stop)
        t0 = time.monotonic()
        wait_for(lambda: time.monotonic() - t0 >= run, run + 5, f"{run} s of heartbeats")
        sent = sum(bt.stop() and bt.sent for bt in beaters)
        for bt in beaters:
            self.assertEqual(bt.bad, [])
        pool = [p for p in lb.admin.stats()["pools"] if p["name"] == "hb"][0]
        counted = sum(s["heartbeat"]["total"] for s in pool["servers"])
        print(f"measured: {sent} heartbeats of {n} servers in {run:.0f} s "
              f"({sent / run:.0f}/s), {counted} counted")
        self.assertEqual(counted, sent)
        self.assertGreaterEqual(sent, n * (run / period) * 0.8, "the beaters fell behind")
        self.assertEqual(lb.events("server_down"), [], "a heartbeat-only server expired")
        self.assertEqual(pool["in_rotation"], n)
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
