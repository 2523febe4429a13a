"""Admin port, GET /metrics: Prometheus text exposition format 0.0.4
(Content-Type text/plain; version=0.0.4), parsed line by line with a strict
grammar: every family has # HELP and # TYPE before its samples, every
sample belongs to a declared family, counters end in _total, histogram
buckets are cumulative and end in le="+Inf" equal to _count. The families
of the contract are there with their types and labels, agree with /stats,
and move as traffic flows and as health checks run (exact counts where the
test controls them)."""

import os
import re
import time

import harness
from harness import LbTestCase, read_line
import admin_client
from admin_client import (find_pool, find_server, name_then_echo_backend, parse_metrics,
                          sized_exchange, sized_reply_backend)

WAIT = 10.0
HTTP_FAST = {"check": "http", "check_interval": "200ms", "check_timeout": "200ms"}
# Pool "api" of the agreement test: a1 must stay up (and at 0 consecutive
# failures) throughout, also when the backend answers a probe late.
HTTP_STEADY = {"check": "http", "check_interval": "500ms", "check_timeout": "500ms",
               "fall": 3}

# family -> (type, label keys of each sample; for histograms the keys
# besides le)
FAMILIES = {
    "lb_info": ("gauge", None),
    "lb_uptime_seconds": ("gauge", set()),
    "lb_active_connections": ("gauge", set()),
    "lb_max_connections": ("gauge", set()),
    "lb_frontend_active_connections": ("gauge", {"frontend"}),
    "lb_frontend_connections_total": ("counter", {"frontend"}),
    "lb_pool_servers": ("gauge", {"pool"}),
    "lb_pool_in_rotation": ("gauge", {"pool"}),
    "lb_server_up": ("gauge", {"pool", "server"}),
    "lb_server_active_connections": ("gauge", {"pool", "server"}),
    "lb_server_connections_total": ("counter", {"pool", "server"}),
    "lb_server_bytes_in_total": ("counter", {"pool", "server"}),
    "lb_server_bytes_out_total": ("counter", {"pool", "server"}),
    "lb_server_connect_failures_total": ("counter", {"pool", "server"}),
    "lb_server_checks_total": ("counter", {"pool", "server"}),
    "lb_server_consecutive_failures": ("gauge", {"pool", "server"}),
    "lb_check_duration_seconds": ("histogram", {"pool"}),
    "lb_check_lag_seconds": ("histogram", set()),
    "lb_detection_seconds": ("histogram", {"direction"}),
    "lb_reloads_total": ("counter", {"result"}),
    "lb_server_state": ("gauge", {"pool", "server", "state"}),
    "lb_frontend_retries_total": ("counter", {"frontend"}),
    "lb_frontend_no_server_total": ("counter", {"frontend"}),
    "lb_frontend_accept_failures_total": ("counter", {"frontend"}),
    "lb_max_connections_reached_total": ("counter", set()),
    "lb_pool_connect_seconds": ("histogram", {"pool"}),
    "lb_pool_session_duration_seconds": ("histogram", {"pool"}),
    "process_open_fds": ("gauge", set()),
    "process_max_fds": ("gauge", set()),
    "process_resident_memory_bytes": ("gauge", set()),
    "process_cpu_seconds_total": ("counter", set()),
    "process_start_time_seconds": ("gauge", set()),
}
STATES = ("up", "draining", "down", "disabled", "warning")

SERVER_FAMILIES = [f for f, (t, keys) in FAMILIES.items() if keys == {"pool", "server"}]

# lb_uptime_seconds is printed with 3 decimals (+-0.5 ms) and read against
# the test's own wall clock, as lb's is: 2 ms covers the rounding.
UPTIME_TOL = 0.002


class AdminMetricsTest(LbTestCase):

    def test_parser_rejects_bad_expositions(self):
        # The checks below are only as good as the parser: it must refuse
        # each of these.
        head = "# HELP x_total X.\n# TYPE x_total counter\n"
        hist = "# HELP h H.\n# TYPE h histogram\n"
        good_hist = ('h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n')
        parse_metrics(head + "x_total 1\n" + hist + good_hist)     # accepted
        bad = {
            "undeclared": head + "y_total 1\n",
            "no TYPE": "# HELP x_total X.\nx_total 1\n",
            "TYPE after sample": "# HELP x_total X.\nx_total 1\n# TYPE x_total counter\n",
            "counter without _total": "# HELP x X.\n# TYPE x counter\nx 1\n",
            "bad value": head + "x_total one\n",
            "bad label escape": head + 'x_total{a="\\q"} 1\n',
            "unquoted label": head + "x_total{a=b} 1\n",
            "no space": head + 'x_total{a="1"}1\n',
            "trailing junk": head + "x_total 1 2 3\n",
            "space in name": head + "x total 1\n",
            "duplicate": head + 'x_total{a="1"} 1\nx_total{a="1"} 2\n',
            "not grouped": head + "x_total 1\n" + hist + good_hist + "x_total{a=\"2\"} 1\n",
            "+Inf != count": hist + 'h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\n'
                             'h_sum 3\nh_count 3\n',
            "not cumulative": hist + 'h_bucket{le="1"} 3\nh_bucket{le="2"} 2\n'
                              'h_bucket{le="+Inf"} 3\nh_sum 3\nh_count 3\n',
            "no +Inf": hist + 'h_bucket{le="1"} 1\nh_sum 3\nh_count 1\n',
            "le not increasing": hist + 'h_bucket{le="2"} 1\nh_bucket{le="1"} 1\n'
                                 'h_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
            "no newline at end": head + "x_total 1",
        }
        for what, text in bad.items():
            with self.subTest(what):
                with self.assertRaises(AssertionError):
                    parse_metrics(text)

    def assertUptime(self, uptime, t_start, t_ready, t_ask, t_answer):
        """lb_uptime_seconds counts from a moment between t_start (before
        lb was started) and t_ready (after it logged event=ready) to one
        between t_ask and t_answer (the scrape): no more, no less, whatever
        the load (it delays the moments, and the bounds move with them)."""
        lo, hi = t_ask - t_ready, t_answer - t_start
        self.assertGreaterEqual(uptime, lo - UPTIME_TOL,
                                f"lb_uptime_seconds {uptime}: lb has run {lo:.3f}..{hi:.3f} s")
        self.assertLessEqual(uptime, hi + UPTIME_TOL,
                             f"lb_uptime_seconds {uptime}: lb has run {lo:.3f}..{hi:.3f} s")

    def check_families(self, m, frontends, pools):
        """pools: {pool: [server, ...]}."""
        for fam, (typ, keys) in FAMILIES.items():
            self.assertIn(fam, m.families, f"family {fam} missing")
            self.assertEqual(m.families[fam]["type"], typ, f"TYPE of {fam}")
            self.assertTrue(m.families[fam]["help"], f"empty HELP of {fam}")
            samples = m.families[fam]["samples"]
            self.assertTrue(samples, f"{fam} has no samples")
            if keys is not None:
                for name, labels, v in samples:
                    got = set(labels) - ({"le"} if typ == "histogram" else set())
                    self.assertEqual(got, keys, f"labels of {name}{labels}")
        # One sample per frontend, pool and server.
        for fam in ("lb_frontend_active_connections", "lb_frontend_connections_total"):
            self.assertEqual(sorted(lab["frontend"] for lab, _ in m.samples(fam)),
                             sorted(frontends), fam)
        for fam in ("lb_pool_servers", "lb_pool_in_rotation"):
            self.assertEqual(sorted(lab["pool"] for lab, _ in m.samples(fam)), sorted(pools), fam)
        want = sorted((p, s) for p, servers in pools.items() for s in servers)
        for fam in SERVER_FAMILIES:
            self.assertEqual(sorted((lab["pool"], lab["server"]) for lab, _ in m.samples(fam)),
                             want, fam)
        self.assertEqual(sorted(lab["direction"] for lab, _ in
                                m.samples("lb_detection_seconds_count")), ["down", "up"])
        self.assertEqual(sorted(lab["result"] for lab, _ in m.samples("lb_reloads_total")),
                         ["failed", "ok"])
        info = m.samples("lb_info")
        self.assertEqual([v for _, v in info], [1.0], info)

    def test_format_families_and_agreement_with_stats(self):
        e1, e2 = self.echo("e1"), self.echo("e2")
        hc = self.hc_backend(count=2)
        pools = {"web-1.a": ["s_1.b-c", "s2"], "api": ["a1", "a2"]}
        t_start = time.time()       # lb's clock starts after this...
        lb = admin_client.start_lb(self, [
            ("web-1.a", [("s_1.b-c", e1), ("s2", e2.addr, 3)], {}),
            ("api", [("a1", hc.addr(hc.ports[0])), ("a2", hc.addr(hc.ports[1]))],
             HTTP_STEADY),
        ], frontends=[("fe.web", "web-1.a"), ("fe-api", "api"), ("fe2", "api")],
            max_connections=555)
        t_ready = time.time()       # ...and before lb logged event=ready
        t1a = time.time()
        r = lb.admin.get("/metrics")
        t1b = time.time()
        self.assertEqual(r.status, 200, str(r))
        mtype, params = r.media_type()
        self.assertEqual(mtype, "text/plain", str(r))
        self.assertEqual(params.get("version"), "0.0.4", str(r))
        self.assertIn(params.get("charset", "utf-8"), ("utf-8",), str(r))
        m = parse_metrics(r.text())
        self.check_families(m, ["fe.web", "fe-api", "fe2"], pools)
        self.assertEqual(m.value("lb_max_connections"), 555)
        self.assertEqual(m.value("lb_active_connections"), 0)
        up1 = m.value("lb_uptime_seconds")
        self.assertUptime(up1, t_start, t_ready, t1a, t1b)
        for p, servers in pools.items():
            self.assertEqual(m.value("lb_pool_servers", pool=p), len(servers))
        self.assertGreaterEqual(len(m.samples("lb_check_duration_seconds_count", pool="api")), 1)

        # a2 fails its checks from now on; once /stats shows it, both agree.
        hc.mode(hc.ports[1], "500")
        lb.admin.wait_server("api", "a2", lambda s: s["state"] == "down", WAIT, "a2 down")
        lb.admin.wait_server("api", "a1", lambda s: s["checks_total"] >= 3, WAIT, "3 checks")
        t2a = time.time()
        m = lb.admin.metrics()
        t2b = time.time()
        st = lb.admin.stats()
        self.check_families(m, ["fe.web", "fe-api", "fe2"], pools)
        # Uptime again, a second or more later (a2 needs 3 failed checks
        # 500 ms apart to go down): it grew by the time between the scrapes.
        up2 = m.value("lb_uptime_seconds")
        self.assertUptime(up2, t_start, t_ready, t2a, t2b)
        grown = up2 - up1
        self.assertGreaterEqual(grown, t2a - t1b - UPTIME_TOL,
                                f"lb_uptime_seconds went from {up1} to {up2} in "
                                f"{t2a - t1b:.3f}..{t2b - t1a:.3f} s")
        self.assertLessEqual(grown, t2b - t1a + UPTIME_TOL,
                             f"lb_uptime_seconds went from {up1} to {up2} in "
                             f"{t2a - t1b:.3f}..{t2b - t1a:.3f} s")
        self.assertGreater(t2a - t1b, 0.5, "the scrapes should be a second or so apart")
        for p, servers in pools.items():
            pool = find_pool(st, p)
            self.assertEqual(m.value("lb_pool_in_rotation", pool=p), pool["in_rotation"], p)
            for s in servers:
                srv = find_server(st, p, s)
                up = m.value("lb_server_up", pool=p, server=s)
                self.assertEqual(up, 1 if srv["state"] == "up" else 0, f"{p}/{s}: {srv}")
                for fam, key in (("lb_server_connections_total", "total_connections"),
                                 ("lb_server_bytes_in_total", "bytes_in"),
                                 ("lb_server_bytes_out_total", "bytes_out"),
                                 ("lb_server_connect_failures_total", "connect_failures"),
                                 ("lb_server_active_connections", "active_connections")):
                    self.assertEqual(m.value(fam, pool=p, server=s), srv[key], f"{fam} {p}/{s}")
                # checks run on: the later /stats has at least as many
                self.assertLessEqual(m.value("lb_server_checks_total", pool=p, server=s),
                                     srv["checks_total"], f"{p}/{s}")
        self.assertEqual(m.value("lb_server_up", pool="api", server="a2"), 0)
        self.assertEqual(m.value("lb_pool_in_rotation", pool="api"), 1)
        self.assertGreaterEqual(m.value("lb_server_consecutive_failures", pool="api",
                                        server="a2"), 1)
        self.assertEqual(m.value("lb_server_consecutive_failures", pool="api", server="a1"), 0)
        self.assertEqual(m.value("lb_server_checks_total", pool="web-1.a", server="s2"), 0,
                         "check = none: no probes")
        self.assertGreaterEqual(m.value("lb_detection_seconds_count", direction="down"), 1)

    def test_traffic_moves_counters(self):
        names = ("w1", "w2")
        backs = {n: self.custom(sized_reply_backend(n), name=n) for n in names}
        dead = self.refused()
        lb = admin_client.start_lb(self, [
            ("p", [(n, backs[n]) for n in names], {}),
            ("q", [("dead", dead), ("q1", self.custom(name_then_echo_backend("q1"), "q1"))],
             {"retries": 1}),
        ])
        m0 = lb.admin.metrics()
        self.assertEqual(m0.value("lb_frontend_connections_total", frontend="fe_p"), 0)
        sent = dict.fromkeys(names, 0)
        got = dict.fromkeys(names, 0)
        conns = dict.fromkeys(names, 0)
        for i in range(60):
            name, nbytes = sized_exchange(lb.fports["fe_p"], b"m" * (i * 101 % 3000), names)
            sent[name] += i * 101 % 3000
            got[name] += nbytes
            conns[name] += 1

        def settled(m):
            return (m.value("lb_frontend_connections_total", frontend="fe_p") == 60
                    and m.value("lb_active_connections") == 0
                    and all(m.value("lb_server_connections_total", pool="p", server=n) == conns[n]
                            and m.value("lb_server_bytes_out_total", pool="p", server=n) == sent[n]
                            and m.value("lb_server_bytes_in_total", pool="p", server=n) == got[n]
                            for n in names))
        lb.admin.wait_metrics(settled, WAIT, f"counters of 60 connections: {conns} "
                              f"bytes_out {sent} bytes_in {got}")

        # Connections held open: the gauges rise and fall back to 0.
        held = []
        for _ in range(4):
            s = self.client(lb.fports["fe_q"])
            self.assertEqual(read_line(s), b"q1\n")
            held.append(s)

        def active(n):
            return lambda m: (m.value("lb_active_connections") == n
                              and m.value("lb_frontend_active_connections", frontend="fe_q") == n
                              and m.value("lb_server_active_connections", pool="q",
                                          server="q1") == n)
        lb.admin.wait_metrics(active(4), WAIT, "4 active connections")
        for s in held:
            s.close()
        m = lb.admin.wait_metrics(active(0), WAIT, "0 active connections")
        self.assertEqual(m.value("lb_frontend_connections_total", frontend="fe_q"), 4)
        self.assertEqual(m.value("lb_frontend_connections_total", frontend="fe_p"), 60)
        # Every refused connect to "dead" is one connect failure, as logged.
        fails = len(lb.events("connect_failed", server="dead"))
        self.assertGreaterEqual(fails, 1, "round robin over 2 servers never tried dead")
        self.assertEqual(m.value("lb_server_connect_failures_total", pool="q", server="dead"),
                         fails)
        self.assertEqual(m.value("lb_server_connections_total", pool="q", server="dead"), 0)
        self.assertEqual(m.value("lb_server_connect_failures_total", pool="q", server="q1"), 0)

    def server_state(self, m, pool, server, **labels):
        """The one state of lb_server_state that is 1 (and that it is one-hot)."""
        got = {lab["state"]: v for lab, v in m.samples("lb_server_state", pool=pool,
                                                        server=server, **labels)}
        self.assertEqual(sorted(got), sorted(STATES), got)
        ones = [k for k, v in got.items() if v == 1]
        self.assertEqual((len(ones), sum(got.values())), (1, 1), got)
        return ones[0]

    def test_state_series_counters_and_process(self):
        """lb_server_state tells maintenance from failure; the counters of
        retries, no_server closes and the histograms of connect time and
        session duration move with traffic; process_* is the process's."""
        hc = self.hc_backend(count=2)
        p0, p1 = hc.ports
        e1, e2, dead = self.echo("e1"), self.echo("e2"), self.refused()
        lb = admin_client.start_lb(self, [
            ("web", [("s0", hc.addr(p0)), ("s1", hc.addr(p1))],
             dict(HTTP_FAST, rise=1, fall=1, check_warn="429", warn_weight="50%")),
            ("tcp", [("e1", e1), ("e2", e2)], {}),
            ("dead", [("x", dead)], {"retries": 2}),
        ], allowed_errors=("no_server",))
        m = lb.admin.wait_metrics(lambda m: m.value("lb_server_up", pool="web", server="s1") == 1,
                                  WAIT, "s1 up")
        self.assertEqual(self.server_state(m, "web", "s0"), "up")
        hc.mode(p1, "500")
        r = lb.admin.action("tcp", "e2", "disable")
        self.assertEqual(r.status, 200, str(r))
        r = lb.admin.action("tcp", "e1", "drain")
        m = lb.admin.wait_metrics(lambda m: m.value("lb_server_up", pool="web", server="s1") == 0,
                                  WAIT, "s1 down")
        self.assertEqual(self.server_state(m, "web", "s1"), "down")         # pages
        self.assertEqual(self.server_state(m, "tcp", "e2"), "disabled")     # does not
        self.assertEqual(self.server_state(m, "tcp", "e1"), "draining")
        hc.mode(p0, "429")
        m = lb.admin.wait_metrics(lambda m: self.server_state(m, "web", "s0") == "warning",
                                  WAIT, "s0 warning")
        self.assertEqual(m.value("lb_server_up", pool="web", server="s0"), 1)

        # a pool whose only server refuses: 1 + retries attempts, then closed
        port = lb.fports["fe_dead"]
        for _ in range(3):
            self.assertEqual(harness.request(port)[0], b"")
        m = lb.admin.wait_metrics(
            lambda m: m.value("lb_frontend_no_server_total", frontend="fe_dead") == 3, WAIT,
            "3 closed without a server")
        self.assertEqual(m.value("lb_frontend_retries_total", frontend="fe_dead"), 6)
        self.assertEqual(m.value("lb_frontend_no_server_total", frontend="fe_web"), 0)
        self.assertEqual(m.value("lb_pool_connect_seconds_count", pool="dead"), 0)
        self.assertEqual(m.value("lb_pool_session_duration_seconds_count", pool="dead"), 3)
        # served connections: a connect time and a duration each
        lb.admin.action("tcp", "e1", "enable")
        for _ in range(4):
            with harness.connect(lb.fports["fe_tcp"]) as c:
                self.assertEqual(harness.roundtrip(c, b"x"), b"x")
        m = lb.admin.wait_metrics(
            lambda m: m.value("lb_pool_session_duration_seconds_count", pool="tcp") == 4, WAIT,
            "4 sessions ended")
        self.assertEqual(m.value("lb_pool_connect_seconds_count", pool="tcp"), 4)
        self.assertLess(m.value("lb_pool_connect_seconds_sum", pool="tcp"), 0.5)
        self.assertEqual(m.value("lb_pool_connect_seconds_bucket", pool="tcp", le="+Inf"), 4)

        fds = len(os.listdir(f"/proc/{lb.pid}/fd"))
        self.assertLessEqual(abs(m.value("process_open_fds") - fds), 4, fds)
        soft = int(open(f"/proc/{lb.pid}/limits").read().split("Max open files")[1].split()[0])
        self.assertEqual(m.value("process_max_fds"), soft)
        rss = lb.rss_kb() * 1024
        self.assertLess(abs(m.value("process_resident_memory_bytes") - rss), rss * 0.5)
        self.assertGreater(m.value("process_cpu_seconds_total"), 0)
        self.assertLess(abs(m.value("process_start_time_seconds") - (time.time() -
                        m.value("lb_uptime_seconds"))), 1.0)

    def test_removed_servers_stay_while_draining(self):
        """A server a reload removed stays in the server families, marked
        removed="true", while its connections drain: the sums agree with
        lb_active_connections."""
        e1, e2 = self.echo("e1"), self.echo("e2")
        lb = admin_client.start_lb(self, [("web", [("a", e1), ("b", e2)],
                                           {"balance": "leastconn", "drain_timeout": "30s"})])
        held = [harness.connect(lb.fports["fe_web"]) for _ in range(2)]
        for c in held:
            self.addCleanup(c.close)
            self.assertEqual(harness.roundtrip(c, b"x"), b"x")
        text = open(lb.config_path).read()
        with open(lb.config_path, "w") as f:
            f.write(re.sub(r"(?m)^server = b .*$\n", "", text))
        self.assertEqual(lb.admin.post("/reload").status, 200)
        m = lb.admin.metrics()
        self.assertEqual(m.value("lb_server_active_connections", pool="web", server="b",
                                 removed="true"), 1)
        self.assertEqual(self.server_state(m, "web", "b", removed="true"), "draining")
        total = sum(v for _, v in m.samples("lb_server_active_connections"))
        self.assertEqual(total, m.value("lb_active_connections"))
        self.assertEqual(total, 2)

    def test_health_histograms_move(self):
        hc = self.hc_backend(count=2)
        p0, p1 = hc.ports
        lb = admin_client.start_lb(self, [
            ("web", [("s0", hc.addr(p0)), ("s1", hc.addr(p1))],
             dict(HTTP_FAST, rise=2, fall=2))])
        m1 = lb.admin.wait_metrics(
            lambda m: all(m.value("lb_server_checks_total", pool="web", server=s) >= 2
                          for s in ("s0", "s1")), WAIT, "2 checks per server")
        c1 = m1.value("lb_check_duration_seconds_count", pool="web")
        self.assertGreaterEqual(c1, 4)
        self.assertGreater(m1.value("lb_check_duration_seconds_sum", pool="web"), 0)
        self.assertGreaterEqual(m1.value("lb_check_lag_seconds_count"), 4)
        down0 = m1.value("lb_detection_seconds_count", direction="down")
        up0 = m1.value("lb_detection_seconds_count", direction="up")
        self.assertEqual((down0, up0), (0, 0), "the first verdicts are no detections")

        hc.crash(p0)
        m2 = lb.admin.wait_metrics(
            lambda m: (m.value("lb_server_up", pool="web", server="s0") == 0
                       and m.value("lb_server_consecutive_failures", pool="web",
                                   server="s0") >= 3), WAIT, "s0 down, 3 failures")
        self.assertEqual(m2.value("lb_detection_seconds_count", direction="down"), down0 + 1)
        # fall = 2: detected at the 2nd failed probe, about an interval
        # after the first
        self.assertGreater(m2.value("lb_detection_seconds_sum", direction="down"), 0.1)
        self.assertEqual(m2.value("lb_pool_in_rotation", pool="web"), 1)
        self.assertEqual(m2.value("lb_server_up", pool="web", server="s1"), 1)
        self.assertGreater(m2.value("lb_check_duration_seconds_count", pool="web"), c1)
        self.assertGreater(m2.value("lb_server_checks_total", pool="web", server="s0"),
                           m1.value("lb_server_checks_total", pool="web", server="s0"))

        hc.revive(p0)
        m3 = lb.admin.wait_metrics(
            lambda m: m.value("lb_server_up", pool="web", server="s0") == 1, WAIT, "s0 up")
        self.assertEqual(m3.value("lb_detection_seconds_count", direction="up"), up0 + 1)
        self.assertEqual(m3.value("lb_detection_seconds_count", direction="down"), down0 + 1)
        self.assertEqual(m3.value("lb_server_consecutive_failures", pool="web", server="s0"), 0)
        self.assertEqual(m3.value("lb_pool_in_rotation", pool="web"), 2)
        self.assertGreater(m3.value("lb_detection_seconds_sum", direction="up"), 0.1)


if __name__ == "__main__":
    harness.main()
