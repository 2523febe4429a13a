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
        keys = {"check": "http", "check_interval": "200ms", "check_timeout": "150ms",
                "rise": 2, "fall": 1}
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
        # Probes every 2 s, rise 3: a new server must join after its first
        # pass (at ~0.8 s, the answer is slow), not after rise passes (4 s).
        keys = {"check": "http", "check_interval": "2s", "check_timeout": "1s",
                "rise": 3, "fall": 1}
        lb = start_lb(self, self.text([("old", hc.addr(p_old))], **keys), self.admin_port)
        lb.admin.wait_server("web", "old", lambda s: s["last_check"] is not None
                             and s["last_check"]["result"] == "passed", IO_TIMEOUT,
                             "a passed check")
        hc.mode(p_new, "slow:800")
        write_atomic(lb.config_path, self.text([("old", hc.addr(p_old)),
                                                ("new", hc.addr(p_new))], **keys))
        t_reload = time.monotonic()
        sighup_reload(lb, 2)
        t_done = time.monotonic()
        st = self.srv(lb, "new")
        self.assertEqual((st["health"], st["state"], st["active_connections"]),
                         ("pending", "down", 0), st)

        # Clients while the first probe is under way: none reaches new.
        got = []
        while time.monotonic() < t_reload + 0.6 and len(got) < 2000:
            got.append(http_via(self.port))
        st = self.srv(lb, "new")
        self.assertEqual(st["health"], "pending",
                         f"the slow first probe was over too soon to test anything: {st}")
        self.assertEqual(set(got), {p_old}, f"clients during the first probe: {got}")
        self.assertEqual(hc.info(p_new)["other"], 0, "a client reached the pending server")
        # It was probed at once.
        first = hc.times(p_new)[p_new]
        self.assertTrue(first, "no probe of the new server yet")
        self.assertLess(first[0][0] - t_done, 0.5,
                        f"first probe {first[0][0] - t_done:.3f}s after the reload")

        up = lb.wait_event("server_up", server="new", timeout=5)[0]
        hc.mode(p_new, "ok")
        reload_ev = lb.events("reload", generation=2)[0]
        took = event_time(up) - event_time(reload_ev)
        print(f"\nnew server: {len(got)} clients during its first probe, none to it; "
              f"server_up {took * 1000:.0f} ms after the reload")
        self.assertTrue(0.7 <= took <= 1.5, f"server_up {took:.3f}s after the reload: "
                        "expected right after the first (slow) probe")
        st = self.srv(lb, "new")
        self.assertEqual((st["health"], st["state"], st["checks_total"]), ("up", "up", 1), st)
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
        wait_for(lambda: len(probes()) >= 6, 5.0, "6 probes after the reload")
        seen = probes()
        # A probe that started before the reload ended may be an old one;
        # every one after it is new.
        late_old = [(round(t - t_done, 3), head_path(h)) for t, h in seen
                    if head_path(h) != "/new" and t > t_done + 0.05]
        self.assertEqual(late_old, [], "probes after the reload with the old path "
                         "(seconds after it, path)")
        news = [t for t, h in seen if head_path(h) == "/new"]
        self.assertLess(news[0] - t_reload, 1.5, "the first probe with the new path "
                        f"came {news[0] - t_reload:.3f}s after the reload")
        gaps = [b - a for a, b in zip(news, news[1:])]
        print(f"\ncheck_path /old -> /new, interval 1s -> 200ms: first /new probe "
              f"{(news[0] - t_reload) * 1000:.0f} ms after the reload, then gaps "
              + ", ".join(f"{g * 1000:.0f}" for g in gaps) + " ms")
        self.assertTrue(all(0.1 <= g <= 0.45 for g in gaps[1:]),
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
        self.assertIsNone(transition_streak(hist, down, 1, interval),
                          "fall = 1 after the reload (was 4)")

        hc.mode(p, "ok")
        lb.wait_event("server_up", server="s")
        hist = health_history(lb, "web", "s")
        up = [e for e in hist if e["event"] == "server_up"][0]
        self.assertEqual(up.get("successes"), "3", up)
        self.assertIsNone(transition_streak(hist, up, 3, interval),
                          "rise = 3 after the reload (was 1)")


if __name__ == "__main__":
    harness.main()
