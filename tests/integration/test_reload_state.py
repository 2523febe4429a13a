"""Reload and what the health checks know: a server the reload keeps (same
pool, name and address) keeps its health state, its streaks and its
counters; a server that is down stays down across the reload, with no
server_up in between and no second detection. A server the reload adds is
probed at once and gets no client before its first passing probe (it is
"pending" until then), and joins after that one probe whatever rise says.
Changed check settings (path, interval, rise, fall) apply from the next
probe.

The backends are an hc_backend.py process: HTTP on several ports, each
answering health checks and client requests in a mode the test switches
(ok, 500, slow:MS, crashed), and counting client requests apart from checks
(User-Agent: lb-health)."""

import re
import statistics
import time

import harness
from harness import (IO_TIMEOUT, LbTestCase, event_time, free_port, health_history,
                     http_via, transition_streak, wait_for)
from test_reload_traffic import (config_text, post_reload, servers_of, sighup_reload,
                                 start_lb, write_atomic)

COUNTERS = ("total_connections", "bytes_in", "bytes_out", "connect_failures")


def head_path(head):
    """The path of a request head "GET /x HTTP/1.1..."."""
    m = re.match(r"GET (\S+) HTTP/1\.[01]", head)
    return m.group(1) if m else None


class ReloadStateTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.admin_port, self.port = free_port(), free_port()

    def text(self, servers, log_level="info", **keys):
        return config_text(self.admin_port, [("fe", self.port, "web")],
                           [("web", servers, keys)], log_level=log_level)

    def srv(self, lb, name):
        return servers_of(lb.admin.stats(), "web")[name]

    def test_health_state_and_counters_kept(self):
        hc = self.hc_backend(count=4)
        p_up, p_500, p_ref, p_extra = hc.ports
        hc.mode(p_500, 500)
        hc.crash(p_ref)
        # fall 3 and a timeout as long as the interval: up1 must stay up
        # throughout, also when the backend answers one probe late.
        keys = {"check": "http", "check_interval": "400ms", "check_timeout": "400ms",
                "rise": 2, "fall": 3}
        servers = [("up1", hc.addr(p_up)), ("dn500", hc.addr(p_500)),
                   ("dnref", hc.addr(p_ref))]
        lb = start_lb(self, self.text(servers, **keys), self.admin_port)

        for name in ("dn500", "dnref"):
            lb.admin.wait_server("web", name, lambda s: s["health"] == "down"
                                 and s["consecutive_failures"] >= 3, IO_TIMEOUT,
                                 "down after 3 failed checks")
        lb.admin.wait_server("web", "up1", lambda s: s["health"] == "up"
                             and s["consecutive_successes"] >= 3, IO_TIMEOUT,
                             "up after 3 passed checks")
        for i in range(10):
            self.assertEqual(http_via(self.port), p_up, f"client {i + 1}")
        wait_for(lambda: self.srv(lb, "up1")["active_connections"] == 0, IO_TIMEOUT,
                 "the clients to end in lb")
        before = servers_of(lb.admin.stats(), "web")
        self.assertEqual(before["up1"]["total_connections"], 10, before["up1"])
        self.assertGreater(before["up1"]["bytes_out"], 0)

        # The reload changes the weight of up1 and adds a server: the three
        # old servers are kept.
        write_atomic(lb.config_path, self.text(
            [("up1", hc.addr(p_up), 2)] + servers[1:] + [("extra", hc.addr(p_extra))],
            **keys))
        ev = sighup_reload(lb, 2)
        self.assertEqual((ev.get("added"), ev.get("removed")), ("1", "0"), ev)
        after = servers_of(lb.admin.stats(), "web")
        for name in ("dn500", "dnref"):
            b, a = before[name], after[name]
            self.assertEqual((a["health"], a["state"]), ("down", "down"), f"{name}: {a}")
            self.assertGreaterEqual(a["consecutive_failures"], b["consecutive_failures"],
                                    f"{name}: consecutive_failures reset: {b} -> {a}")
            self.assertEqual(a["consecutive_successes"], 0, a)
            self.assertGreaterEqual(a["checks_total"], b["checks_total"],
                                    f"{name}: checks_total reset")
            self.assertIsNotNone(a["last_check"], a)
            self.assertEqual(a["last_check"]["result"], "failed", a)
            for k in COUNTERS:
                self.assertEqual(a[k], b[k], f"{name}.{k}")
        b, a = before["up1"], after["up1"]
        self.assertEqual((a["health"], a["state"], a["weight"]), ("up", "up", 2), a)
        for k in COUNTERS:
            self.assertEqual(a[k], b[k], f"up1.{k} changed across the reload: {b} -> {a}")
        self.assertGreaterEqual(a["checks_total"], b["checks_total"], "up1.checks_total reset")
        self.assertGreaterEqual(a["consecutive_successes"], b["consecutive_successes"],
                                "up1.consecutive_successes reset")
        self.assertEqual(a["last_change"], b["last_change"], "up1 changed state")

        # Later: still down, more failures counted, and clients never sent
        # to the down servers.
        lb.admin.wait_server("web", "dn500", lambda s: s["checks_total"]
                             >= after["dn500"]["checks_total"] + 3, IO_TIMEOUT,
                             "3 more checks")
        lb.admin.wait_server("web", "extra", lambda s: s["state"] == "up", IO_TIMEOUT,
                             "the added server up")
        got = {http_via(self.port) for _ in range(12)}
        self.assertEqual(got, {p_up, p_extra}, "clients after the reload")
        last = servers_of(lb.admin.stats(), "web")
        for name in ("dn500", "dnref"):
            self.assertEqual((last[name]["health"], last[name]["state"]), ("down", "down"))
            self.assertGreater(last[name]["consecutive_failures"],
                               before[name]["consecutive_failures"], name)
            self.assertEqual(lb.events("server_up", server=name), [],
                             f"{name} came up although it never passed")
            self.assertEqual(len(lb.events("server_down", server=name)), 1,
                             f"{name} was detected down again after the reload")
        self.assertEqual(hc.info(p_500)["other"], 0, "a client reached the 500 server")
        self.assertEqual(lb.events("server_down", server="up1"), [])
        self.assertEqual(last["up1"]["total_connections"], 10 + 12 - last["extra"]["total_connections"])

    def test_new_server_waits_for_its_first_probe(self):
        hc = self.hc_backend(count=2)
        p_old, p_new = hc.ports
        # Probes every 4 s, rise 3: a new server must join after its first
        # pass, not after rise passes. Its answer takes `slow`, which keeps
        # it pending for seconds: the reload, the clients and the stats have
        # ample time to see that.
        slow = 2.0
        keys = {"check": "http", "check_interval": "4s", "check_timeout": "3s",
                "rise": 3, "fall": 1}
        lb = start_lb(self, self.text([("old", hc.addr(p_old))], log_level="debug", **keys),
                      self.admin_port)
        lb.admin.wait_server("web", "old", lambda s: s["last_check"] is not None
                             and s["last_check"]["result"] == "passed", IO_TIMEOUT,
                             "a passed check")
        hc.mode(p_new, f"slow:{int(slow * 1000)}")
        write_atomic(lb.config_path, self.text([("old", hc.addr(p_old)), ("new", hc.addr(p_new))],
                                               log_level="debug", **keys))
        sighup_reload(lb, 2)
        t_done = time.monotonic()
        st = self.srv(lb, "new")
        self.assertEqual((st["health"], st["state"], st["active_connections"]),
                         ("pending", "down", 0), st)
        # It is probed at once (not at some point of its interval).
        first = wait_for(lambda: hc.times(p_new)[p_new], IO_TIMEOUT,
                         "a probe of the new server")[0]
        self.assertLess(first[0] - t_done, 1.0,
                        f"first probe {first[0] - t_done:.3f}s after the reload")

        # Clients while the first probe is under way (until half of its
        # slow answer): none reaches new.
        got = []
        while time.monotonic() < first[0] + slow / 2 and len(got) < 2000:
            got.append(http_via(self.port))
        st = self.srv(lb, "new")
        self.assertEqual(st["health"], "pending",
                         f"the slow first probe was over too soon to test anything: {st}")
        self.assertEqual(set(got), {p_old}, f"clients during the first probe: {got}")
        self.assertEqual(hc.info(p_new)["other"], 0, "a client reached the pending server")

        up = lb.wait_event("server_up", server="new", timeout=slow + IO_TIMEOUT)[0]
        hc.mode(p_new, "ok")
        # Up with its first check, a pass, whatever rise says ...
        hist = health_history(lb, "web", "new")
        up = [e for e in hist if e["event"] == "server_up"][0]
        checks = [e for e in hist if e["event"] == "check"]
        self.assertEqual(checks[0]["result"], "passed", checks[0])
        self.assertIsNone(transition_streak(hist, up, 1),
                          "server_up must come with the first probe")
        # ... as soon as that probe's answer came: the answer takes `slow`
        # after the request reached the server (backend's wall time); a
        # later probe cannot start before this one ended, nor pass sooner
        # than `slow` after that.
        took = event_time(up) - first[1]
        print(f"\nnew server: {len(got)} clients during its first probe, none to it; "
              f"server_up {took * 1000:.0f} ms after the probe reached it")
        self.assertTrue(slow - 0.01 <= took <= slow * 1.5,
                        f"server_up {took:.3f}s after the first probe reached the server: "
                        "expected right after its (slow) answer")
        st = self.srv(lb, "new")
        self.assertEqual((st["health"], st["state"]), ("up", "up"), st)
        got = [http_via(self.port) for _ in range(10)]
        self.assertIn(p_new, got, "the new server gets no clients once up")
        self.assertEqual(set(got), {p_old, p_new})

    def test_check_path_and_interval_apply_to_next_probe(self):
        hc = self.hc_backend(count=1)
        p = hc.ports[0]
        keys = {"check": "http", "check_path": "/old", "check_interval": "1s",
                "check_timeout": "500ms", "rise": 1, "fall": 1}
        lb = start_lb(self, self.text([("s", hc.addr(p))], **keys), self.admin_port)
        wait_for(lambda: hc.info(p)["health"] >= 2, IO_TIMEOUT, "two probes")
        self.assertEqual({head_path(h) for h in hc.info(p)["heads"]}, {"/old"})

        keys.update(check_path="/new", check_interval="200ms", check_timeout="150ms")
        write_atomic(lb.config_path, self.text([("s", hc.addr(p))], **keys))
        hc.clear(p)
        t_reload = time.monotonic()
        status, body = post_reload(lb)
        t_done = time.monotonic()
        self.assertEqual((status, body), (200, {"reloaded": True, "generation": 2}))

        def probes():
            info = hc.info(p)
            times = hc.times(p)[p]
            return list(zip([t for t, _ in times], info["heads"]))
        wait_for(lambda: len(probes()) >= 10, 10.0, "10 probes after the reload")
        seen = probes()
        # A probe that started before the reload ended may be an old one
        # (lb's health thread takes the new settings just after the reload
        # returns, and the backend notes a request when it gets to it); every
        # one after it is new. The old interval is 1 s: old probes go on
        # every second if the new settings do not apply.
        paths = [head_path(h) for _, h in seen]
        self.assertNotIn("/old", paths[paths.index("/new"):] if "/new" in paths else paths,
                         f"an old probe after a new one: {paths}")
        late_old = [(round(t - t_done, 3), head_path(h)) for t, h in seen
                    if head_path(h) != "/new" and t > t_done + 0.5]
        self.assertEqual(late_old, [], "probes after the reload with the old path "
                         "(seconds after it, path)")
        news = [t for t, h in seen if head_path(h) == "/new"]
        self.assertLess(news[0] - t_reload, 1.0 + harness.HC_SLACK,
                        "the first probe with the new path "
                        f"came {news[0] - t_reload:.3f}s after the reload")
        gaps = [b - a for a, b in zip(news, news[1:])]
        print(f"\ncheck_path /old -> /new, interval 1s -> 200ms: first /new probe "
              f"{(news[0] - t_reload) * 1000:.0f} ms after the reload, then gaps "
              + ", ".join(f"{g * 1000:.0f}" for g in gaps) + " ms")
        # The new interval from the next probe on: the median gap is 200 ms
        # (not the old 1 s); one late probe (load) makes one long and one
        # short gap, which the median does not see.
        self.assertGreaterEqual(len(gaps), 7, gaps)
        self.assertLess(abs(statistics.median(gaps[1:]) - 0.2), 0.05,
                        f"probe gaps after the reload: {gaps}")

    def test_rise_and_fall_apply_to_next_probe(self):
        hc = self.hc_backend(count=1)
        p = hc.ports[0]
        interval = 0.15
        keys = {"check": "http", "check_interval": "150ms", "check_timeout": "100ms",
                "rise": 1, "fall": 4}
        lb = start_lb(self, self.text([("s", hc.addr(p))], log_level="debug", **keys),
                      self.admin_port)
        lb.admin.wait_server("web", "s", lambda s: s["health"] == "up", IO_TIMEOUT, "up")

        keys.update(rise=3, fall=1)
        write_atomic(lb.config_path, self.text([("s", hc.addr(p))], log_level="debug", **keys))
        self.assertEqual(post_reload(lb)[0], 200)
        hc.mode(p, 500)
        lb.wait_event("server_down", server="s")
        hist = health_history(lb, "web", "s")
        down = [e for e in hist if e["event"] == "server_down"][0]
        self.assertEqual(down.get("failures"), "1", down)
        self.assertIsNone(transition_streak(hist, down, 1),
                          "fall = 1 after the reload (was 4)")

        hc.mode(p, "ok")
        lb.wait_event("server_up", server="s")
        hist = health_history(lb, "web", "s")
        up = [e for e in hist if e["event"] == "server_up"][0]
        self.assertEqual(up.get("successes"), "3", up)
        self.assertIsNone(transition_streak(hist, up, 3),
                          "rise = 3 after the reload (was 1)")


if __name__ == "__main__":
    harness.main()
