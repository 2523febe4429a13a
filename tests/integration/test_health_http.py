"""HTTP health checks: a server whose check fails `fall` times in a row
leaves the rotation (clients go to the others) and comes back after `rise`
passes; check_expect decides which status codes pass; the request is
`GET check_path HTTP/1.1` with Host, Connection: close and User-Agent:
lb-health; broken answers (malformed or endless status line, close, reset)
fail without stalling the checker; a first probe that fails takes the server
down at once; until its first probe ends a server is in rotation; check =
none keeps every server up.

The servers are ports of one hc_backend.py process whose answers each test
switches at runtime. Intervals are short (300 ms) so that every test takes
a few seconds; every wait has a deadline."""

import statistics
import time

import harness
from harness import LbTestCase, event_time, health_history, http_via, transition_streak, wait_for

I = 0.3                 # check_interval in seconds
T = 0.25                # check_timeout
HTTP = {"check": "http", "check_interval": "300ms", "check_timeout": "250ms"}
WAIT = 10.0             # deadline for anything that takes a few intervals


def checks(lb, pool, server, result=None):
    return [e for e in lb.events("check", pool=pool, server=server)
            if result is None or e.get("result") == result]


def wait_checks(lb, pool, server, count, result=None, after=None, timeout=WAIT):
    """Waits for `count` check events of the server (with that result,
    logged after unix time `after`); returns them."""
    def found():
        evs = [e for e in checks(lb, pool, server, result)
               if after is None or event_time(e) > after]
        return evs if len(evs) >= count else None
    return wait_for(found, timeout,
                    lambda: f"{count} {result or ''} checks of {pool}/{server}\n{lb.log_tail()}")


def ports_reached(lb_port, n=30):
    """The backend ports that answered n sequential clients through lb."""
    return [http_via(lb_port) for _ in range(n)]


class HealthHttpTest(LbTestCase):

    def test_fall_then_rise(self):
        b = self.hc_backend(count=3)
        p0, p1, p2 = b.ports
        lb = self.lb_pools([("web", [("s0", b.addr(p0)), ("s1", b.addr(p1)),
                                     ("s2", b.addr(p2))],
                             dict(HTTP, rise=2, fall=3))], log_level="debug")
        for s in ("s0", "s1", "s2"):
            wait_checks(lb, "web", s, 2, "passed")
        self.assertEqual(set(ports_reached(lb.ports["web"])), {p0, p1, p2},
                         "clients before the fault")

        t_fault = b.mode(p0, "500")
        down = lb.wait_event("server_down", timeout=WAIT, server="s0")[0]
        self.assertEqual(down.get("level"), "warn", down)
        self.assertEqual((down.get("pool"), down.get("addr")), ("web", b.addr(p0)), down)
        self.assertIn("500", down.get("reason", ""), down)
        self.assertEqual(down.get("failures"), "3", down)
        self.assertEqual(down.get("in_rotation"), "2/3", down)
        self.assertTrue(down.get("detection_ms", "").isdigit(), down)
        hist = health_history(lb, "web", "s0")
        down = [e for e in hist if e["event"] == "server_down"][0]
        self.assertIsNone(transition_streak(hist, down, 3))
        for e in [e for e in hist if e["event"] == "check" and e["result"] == "failed"]:
            self.assertIn("500", e.get("detail", ""), e)
        # (transition_streak counted the probes; the bounds check the
        # schedule, with slack for load above them.)
        latency = event_time(down) - t_fault
        self.assertTrue(2 * I - 0.25 <= latency <= 3 * I + harness.HC_SLACK,
                        f"server_down {latency * 1000:.0f} ms after the fault; fall = 3 "
                        f"at {I * 1000:.0f} ms needs 2 to 3 intervals")

        before = b.info(p0)["other"]
        reached = ports_reached(lb.ports["web"])
        self.assertEqual(set(reached), {p1, p2}, "clients while s0 is down")
        self.assertEqual(b.info(p0)["other"], before, "s0 got client connections while down")

        b.mode(p0, "ok")
        up = lb.wait_event("server_up", timeout=WAIT, server="s0")[0]
        self.assertEqual(up.get("level"), "info", up)
        self.assertEqual(up.get("addr"), b.addr(p0), up)
        self.assertIn("200", up.get("reason", ""), up)
        self.assertEqual(up.get("successes"), "2", up)
        self.assertEqual(up.get("in_rotation"), "3/3", up)
        hist = health_history(lb, "web", "s0")
        up = [e for e in hist if e["event"] == "server_up"][0]
        self.assertIsNone(transition_streak(hist, up, 2),
                          "server_up must come with the 2nd consecutive pass")
        self.assertIn(p0, ports_reached(lb.ports["web"]), "clients after recovery")
        for s in ("s1", "s2"):
            self.assertFalse(lb.events("server_down", server=s), f"{s} went down")
        self.assertEqual(len(lb.events("server_down")), 1)
        self.assertEqual(len(lb.events("server_up")), 1)
        lb.assert_running()

    def test_expect_lists(self):
        # Each server answers one fixed status code from the start.
        lst = {"c200": "ok", "c204": "204", "c300": "300", "c399": "399",
               "c205": "205", "c400": "400", "c404": "404"}
        lst_up = {"c200", "c204", "c300", "c399"}
        five = {"e500": "500", "e200": "ok", "e501": "501"}
        five_up = {"e500"}
        b = self.hc_backend(count=len(lst) + len(five))
        port = dict(zip(list(lst) + list(five), b.ports))
        for name, mode in list(lst.items()) + list(five.items()):
            b.mode(port[name], mode)
        lb = self.lb_pools(
            [("lst", [(n, b.addr(port[n])) for n in lst],
              dict(HTTP, check_expect="200,204,300-399", rise=2, fall=3)),
             ("five", [(n, b.addr(port[n])) for n in five],
              dict(HTTP, check_expect=500, rise=2, fall=3))],
            log_level="debug")
        for pool, servers, up in (("lst", lst, lst_up), ("five", five, five_up)):
            for name in servers:
                code = "200" if servers[name] == "ok" else servers[name]
                if name in up:
                    evs = wait_checks(lb, pool, name, 3)
                    self.assertEqual({e["result"] for e in evs}, {"passed"},
                                     f"{pool}/{name} answering {code}: {evs}")
                    self.assertIn(code, evs[0].get("detail", ""), evs[0])
                else:
                    down = lb.wait_event("server_down", timeout=WAIT, pool=pool,
                                         server=name)[0]
                    self.assertIn(code, down.get("reason", ""), down)
                    self.assertEqual(down.get("failures"), "1", down)
                    evs = wait_checks(lb, pool, name, 3)
                    self.assertEqual({e["result"] for e in evs}, {"failed"},
                                     f"{pool}/{name} answering {code}")
        for pool, servers, up in (("lst", lst, lst_up), ("five", five, five_up)):
            for name in servers:
                if name in up:
                    self.assertFalse(lb.events("server_down", pool=pool, server=name),
                                     f"{pool}/{name} went down")
                self.assertFalse(lb.events("server_up", pool=pool, server=name),
                                 f"{pool}/{name}: no server was down long enough to rise")
        # Clients of pool "five" only reach the server answering 500.
        self.assertEqual(set(ports_reached(lb.ports["five"], 10)), {port["e500"]})

    def test_request_format(self):
        b = self.hc_backend(count=4)
        pa, pb, pc, pd = b.ports
        b.mode(pc, "500")       # pool cport checks pd instead: stays up
        lb = self.lb_pools([
            ("fmt", [("a", b.addr(pa))],
             dict(HTTP, check_path="/health/ready?probe=1", check_host="health.example.test")),
            ("dflt", [("b", b.addr(pb))], dict(HTTP)),
            ("cport", [("c", b.addr(pc))], dict(HTTP, check_port=pd)),
        ], log_level="debug")

        def heads(port, n=2):
            def got():
                h = b.info(port)["heads"]
                return h if len(h) >= n else None
            return wait_for(got, WAIT, f"{n} health requests on port {port}")

        def parse(head):
            lines = head.split("\r\n")
            hdrs = {}
            for line in lines[1:]:
                k, sep, v = line.partition(":")
                self.assertTrue(sep, f"header line without a colon: {line!r} in {head!r}")
                self.assertNotIn(k.strip().lower(), hdrs, f"repeated header in {head!r}")
                hdrs[k.strip().lower()] = v.strip()
            return lines[0], hdrs

        for head in heads(pa):
            line, hdrs = parse(head)
            self.assertEqual(line, "GET /health/ready?probe=1 HTTP/1.1", head)
            self.assertEqual(hdrs.get("host"), "health.example.test", head)
            self.assertEqual(hdrs.get("connection", "").lower(), "close", head)
            self.assertEqual(hdrs.get("user-agent"), "lb-health", head)
        for head in heads(pb):
            line, hdrs = parse(head)
            self.assertEqual(line, "GET / HTTP/1.1", head)
            self.assertIn(hdrs.get("host"), (b.addr(pb), harness.HOST),
                          f"default Host must be the server's address: {head!r}")
            self.assertEqual(hdrs.get("connection", "").lower(), "close", head)
            self.assertEqual(hdrs.get("user-agent"), "lb-health", head)
        heads(pd)
        wait_checks(lb, "cport", "c", 3, "passed")
        self.assertEqual(b.info(pc)["health"], 0, "check_port: the server's own port was probed")
        self.assertFalse(lb.events("server_down"), "no server should go down")

    def test_broken_answers(self):
        bad = {"mal": "malformed", "endless": "endless", "trickle": "trickle",
               "close": "close", "reset": "reset"}
        b = self.hc_backend(count=len(bad) + 2)
        port = dict(zip(list(bad) + ["good1", "good2"], b.ports))
        for name, mode in bad.items():
            b.mode(port[name], mode)
        names = list(port)
        lb = self.lb_pools([("web", [(n, b.addr(port[n])) for n in names],
                             dict(HTTP, rise=1, fall=3))], log_level="debug")
        for name in bad:
            down = lb.wait_event("server_down", timeout=WAIT, server=name)[0]
            self.assertEqual(down.get("failures"), "1", down)
        # lb keeps probing the broken servers, and the good ones on time.
        t0 = time.time()
        b.clear([port["good1"], port["good2"]])
        for name in bad:
            evs = wait_checks(lb, "web", name, 4, after=t0 - 0.05)
            for e in evs:
                self.assertEqual(e["result"], "failed", e)
                self.assertTrue(e.get("detail"), e)
                # A probe that did not stop at check_timeout (one reading on
                # as long as bytes come) would run until the server stops
                # sending, which these never do.
                self.assertLessEqual(float(e["duration_ms"]), (T + harness.HC_SLACK) * 1000,
                                     f"a probe ran past check_timeout: {e}")
        mal = checks(lb, "web", "mal")[-1]
        self.assertIn("malformed", mal["detail"].lower(), mal)
        # An endless line is cut at 255 bytes, however fast it comes.
        for e in checks(lb, "web", "endless"):
            self.assertEqual(e["detail"], "malformed status line: no line end in 255 bytes", e)
        # A status line trickling in byte by byte: check_timeout bounds the
        # whole probe, however often bytes arrive.
        for e in checks(lb, "web", "trickle"):
            self.assertIn("timeout", e["detail"].lower(), e)
            self.assertGreaterEqual(harness.from_slot_ms(e), T * 1000 - 20, e)
        for name in ("good1", "good2"):
            evs = wait_checks(lb, "web", name, 5)
            self.assertEqual({e["result"] for e in evs}, {"passed"}, name)
            self.assertFalse(lb.events("server_down", server=name), name)

        # The good servers' probes as they reached them (lb's check lines
        # also wait for its main loop), since the clear: one every interval.
        # A checker held up by the broken servers' probes (up to T each)
        # would stretch every gap; load delays a probe now and then, which
        # the median does not see.
        def probe_times(p, n=7):
            t = [mono for mono, _ in b.times(p)[p]]
            return t if len(t) >= n else None

        for name in ("good1", "good2"):
            times = wait_for(lambda: probe_times(port[name]), WAIT, f"7 probes of {name}")
            gaps = [round(b2 - a, 3) for a, b2 in zip(times, times[1:])]
            self.assertLess(abs(statistics.median(gaps) - I), 0.1,
                            f"{name}: not probed every interval (gaps {gaps})")
            self.assertLess(max(gaps), I + harness.HC_SLACK,
                            f"{name}: checks stalled (gaps {gaps})")
        self.assertFalse(lb.events("server_up"), "a broken server came back")
        # lb closes every probe: the endless answer does not pile up.
        wait_for(lambda: b.info(port["endless"])["open"] <= 1, 5,
                 "lb to close its endless probes")
        self.assertEqual(set(ports_reached(lb.ports["web"], 10)),
                         {port["good1"], port["good2"]})
        lb.assert_running()

    def test_first_probe_failure_is_down_at_once(self):
        # fall = 3 but a long interval: only the first probe can have run
        # when the server goes down.
        b = self.hc_backend(count=4)
        p500, pref, phang, pgood = b.ports
        b.mode(p500, "500")
        b.crash(pref)
        b.mode(phang, "hang")
        lb = self.lb_pools([("web", [("e500", b.addr(p500)), ("refused", b.addr(pref)),
                                     ("hung", b.addr(phang)), ("good", b.addr(pgood))],
                             {"check": "http", "check_interval": "2s",
                              "check_timeout": "500ms", "rise": 2, "fall": 3})],
                           log_level="debug")
        expect = {"e500": "500", "refused": "refused", "hung": "timeout"}
        for name, word in expect.items():
            down = lb.wait_event("server_down", timeout=WAIT, server=name)[0]
            self.assertEqual(down.get("failures"), "1", down)
            self.assertIn(word, down.get("reason", "").lower(), down)
            hist = health_history(lb, "web", name)
            down = [e for e in hist if e["event"] == "server_down"][0]
            self.assertIsNone(transition_streak(hist, down, 1))
            first = [e for e in hist if e["event"] == "check"][0]
            self.assertLess(event_time(down) - event_time(first), 0.2,
                            f"{name} did not go down with its first probe")
        downs = lb.events("server_down")
        self.assertEqual(len(downs), 3, downs)
        self.assertEqual(sorted(e["in_rotation"] for e in downs), ["1/4", "2/4", "3/4"])
        self.assertEqual(set(ports_reached(lb.ports["web"], 6)), {pgood})

    def test_in_rotation_until_first_probe_ends(self):
        # The server answers clients, but its checks go to a hung port
        # (check_port) and time out after 2 s: until then it is in rotation.
        b = self.hc_backend(count=2)
        srv, hung = b.ports
        b.mode(hung, "hang")
        lb = self.lb_pools([("web", [("x", b.addr(srv))],
                             {"check": "http", "check_port": hung, "check_interval": "2s",
                              "check_timeout": "2s", "fall": 3})],
                           log_level="debug", allowed_errors={"no_server"})
        answered = []
        for _ in range(5):
            got = http_via(lb.ports["web"])
            answered.append((time.time(), got))
        down = lb.wait_event("server_down", timeout=WAIT, server="x")[0]
        self.assertIn("timeout", down.get("reason", "").lower(), down)
        self.assertEqual(down.get("failures"), "1", down)
        t_down = event_time(down)
        early = [got for t, got in answered if t < t_down - 0.05]
        self.assertGreaterEqual(len(early), 3, f"lb too slow to test this: {answered}, "
                                f"down at {down['ts']}")
        self.assertEqual(set(early), {srv}, "a server whose first probe runs is in rotation")
        before = b.info(srv)["other"]
        self.assertIsNone(http_via(lb.ports["web"], timeout=5), "x is down: no server left")
        self.assertEqual(b.info(srv)["other"], before)

    def test_check_none_always_up(self):
        # Pool "none" has no checks; pool "ctl" checks a server answering 500
        # like none's: when ctl's server is down and probed again and again,
        # none's would have been too.
        b = self.hc_backend(count=4)
        n500, nref, ngood, c500 = b.ports
        b.mode(n500, "500")
        b.mode(c500, "500")
        b.crash(nref)
        lb = self.lb_pools([
            ("none", [("n500", b.addr(n500)), ("nref", b.addr(nref)),
                      ("ngood", b.addr(ngood))], {"check": "none"}),
            ("ctl", [("c500", b.addr(c500))], dict(HTTP, fall=1)),
        ], log_level="debug")
        lb.wait_event("server_down", timeout=WAIT, pool="ctl", server="c500")
        wait_checks(lb, "ctl", "c500", 5, "failed")
        self.assertFalse(lb.events("check", pool="none"), "check = none probed")
        self.assertFalse(lb.events("server_down", pool="none"))
        self.assertEqual(b.info(n500)["health"], 0)
        self.assertEqual(b.info(ngood)["health"], 0)
        self.assertEqual(b.info(ngood)["empty"], 0, "check = none made TCP probes")
        reached = set(ports_reached(lb.ports["none"], 12))
        self.assertIn(n500, reached, "check = none: the 500 server left the rotation")
        self.assertIn(ngood, reached)


if __name__ == "__main__":
    harness.main()
