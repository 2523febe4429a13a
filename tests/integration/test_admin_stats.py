"""Admin port, GET /stats (and /healthz): the JSON document of the contract
with every field and type; the figures match what the clients did (exact
connection and byte counts per server and per frontend, bytes_in from the
server and bytes_out to it); active_connections rises while connections
are held and returns to 0; a backend that crashes goes down with a failed
last_check that says refused and a growing consecutive_failures, and comes
back up after a restart; check details from the network, quotes and
backslashes included, still give valid JSON."""

import time

import harness
from harness import LbTestCase, read_line
import admin_client
from admin_client import (find_frontend, find_pool, find_server, name_then_echo_backend,
                          sized_exchange, sized_reply_backend, stats_problems)

WAIT = 10.0
HTTP_FAST = {"check": "http", "check_interval": "200ms", "check_timeout": "200ms"}


def status_line_backend(status_line):
    """An HTTP server that answers every request with status_line (bytes,
    sent as they are) and closes."""
    def handler(backend, conn):
        buf = b""
        while b"\r\n\r\n" not in buf and len(buf) < 65536:
            d = conn.recv(4096)
            if not d:
                return
            buf += d
        conn.sendall(status_line + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    return handler


class AdminStatsTest(LbTestCase):

    def assertStatsValid(self, st):
        problems = stats_problems(st)
        self.assertEqual(problems, [], f"/stats breaks the contract: {st}")

    def test_document(self):
        t_start = time.time()
        e1 = self.echo("e1")
        e2 = self.echo("e2")
        hc = self.hc_backend(count=2)
        hc.mode(hc.ports[1], "hang")        # its first probe ends after 5 s
        lb = admin_client.start_lb(self, [
            ("web-1.a", [("s_1.b-c", e1), ("s2", e2.addr, 3)], {"balance": "leastconn"}),
            ("api", [("a1", hc.addr(hc.ports[0]))], dict(HTTP_FAST)),
            ("slow", [("h1", hc.addr(hc.ports[1]))],
             {"check": "http", "check_interval": "10s", "check_timeout": "5s"}),
        ], frontends=[("fe.web", "web-1.a"), ("fe-api", "api"), ("fe_slow", "slow")],
            max_connections=777)
        r = lb.admin.get("/stats")
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(r.media_type()[0], "application/json", str(r))
        st = r.json()
        self.assertStatsValid(st)
        self.assertTrue(st["version"], st)
        self.assertLess(st["uptime_s"], time.time() - t_start + 1, st)
        self.assertEqual({k: st["reloads"].get(k) for k in ("ok", "failed", "last_error")},
                         {"ok": 0, "failed": 0, "last_error": None}, st["reloads"])
        self.assertEqual(st["connections"], {"active": 0, "max": 777})

        self.assertEqual(sorted(f["name"] for f in st["frontends"]),
                         ["fe-api", "fe.web", "fe_slow"])
        for fe, port in lb.fports.items():
            f = find_frontend(st, fe)
            self.assertEqual(f["listen"], f"{harness.HOST}:{port}", f)
            self.assertEqual((f["active_connections"], f["total_connections"]), (0, 0), f)

        self.assertEqual(sorted(p["name"] for p in st["pools"]), ["api", "slow", "web-1.a"])
        web = find_pool(st, "web-1.a")
        self.assertEqual(web["balance"], "leastconn", web)
        self.assertEqual((web["servers_total"], web["in_rotation"]), (2, 2), web)
        self.assertEqual(web["guard_active"], False, web)
        self.assertEqual([s["name"] for s in web["servers"]], ["s_1.b-c", "s2"],
                         "servers in config order")
        s1, s2 = web["servers"]
        self.assertEqual((s1["address"], s1["weight"]), (e1.addr, 1), s1)
        self.assertEqual((s2["address"], s2["weight"]), (e2.addr, 3), s2)
        for s in (s1, s2):
            self.assertEqual(s["state"], "up", s)
            self.assertIsNone(s["last_check"], f"check = none: no check ever ran: {s}")
            self.assertEqual(s["consecutive_failures"], 0, s)
            for k in ("active_connections", "total_connections", "bytes_in",
                      "bytes_out", "connect_failures"):
                self.assertEqual(s[k], 0, f"{k} of an unused server: {s}")
            self.assertTrue(t_start - 1 <= s["last_change"] <= time.time() + 1,
                            f"last_change is not a recent unix time: {s}")

        # A checked server whose first probe has not ended: no last_check
        # yet, and in rotation meanwhile.
        h1 = find_server(st, "slow", "h1")
        self.assertIsNone(h1["last_check"], f"before the first check ended: {h1}")
        self.assertEqual((h1["state"], h1["checks_total"]), ("up", 0), h1)
        self.assertEqual(find_pool(st, "slow")["check"], "http")

        # The checked pool: after its first checks, last_check is filled in.
        a1 = lb.admin.wait_server("api", "a1",
                                  lambda s: s["last_check"] and s["consecutive_successes"] >= 2,
                                  WAIT, "two passed checks")
        lc = a1["last_check"]
        self.assertEqual(lc["result"], "passed", a1)
        self.assertIn("200", lc["detail"], a1)
        self.assertLess(lc["duration_ms"], 1000, a1)
        self.assertTrue(t_start - 1 <= lc["at"] <= time.time() + 1,
                        f"last_check.at is not a recent unix time: {a1}")
        self.assertEqual((a1["state"], a1["health"]), ("up", "up"), a1)
        self.assertEqual(a1["consecutive_failures"], 0, a1)
        self.assertGreaterEqual(a1["checks_total"], 2, a1)
        st2 = lb.admin.stats()
        self.assertStatsValid(st2)
        self.assertGreater(st2["uptime_s"], st["uptime_s"], "uptime_s does not advance")
        self.assertGreaterEqual(st2["health"]["checks_total"], 2, st2["health"])
        h1 = find_server(st2, "slow", "h1")
        self.assertIsNone(h1["last_check"], f"before the first check ended: {h1}")

    def test_one_pool_and_one_server(self):
        """GET /pools/P and GET /pools/P/servers/S: what /stats shows of
        them, without the token (reads, as /stats); 404 for what is not
        there."""
        e1, e2 = self.echo("e1"), self.echo("e2")
        lb = admin_client.start_lb(self, [("web", [("w1", e1), ("w2", e2)], {}),
                                          ("api", [("a1", e1)], {})], token="s3cret")
        a = admin_client.Admin(lb.admin_port)          # no token
        pool = a.get("/pools/web")
        self.assertEqual((pool.status, pool.media_type()[0]), (200, "application/json"), str(pool))
        self.assertEqual(pool.json(), find_pool(a.stats(), "web"))
        self.assertEqual(a.get("/pools/web/servers").json()["name"], "web")
        srv = a.get("/pools/web/servers/w2")
        self.assertEqual(srv.status, 200, str(srv))
        self.assertEqual(srv.json(), find_server(a.stats(), "web", "w2"))
        self.assertEqual(admin_client.server_problems(srv.json()), [])
        for path, why in (("/pools/nope", "no such pool"),
                          ("/pools/nope/servers/w1", "no such pool"),
                          ("/pools/api/servers/w1", "no such server in this pool")):
            r = a.get(path)
            self.assertEqual((r.status, r.json()), (404, {"error": why}), path)

    def test_healthz(self):
        e = self.echo()
        lb = admin_client.start_lb(self, [("p", [("s", e)], {})])
        r = lb.admin.get("/healthz")
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(r.media_type()[0], "text/plain", str(r))
        self.assertEqual(r.text().strip(), "ok", str(r))
        r = lb.admin.get("/no-such-page")
        self.assertEqual(r.status, 404, str(r))
        self.assertEqual(r.media_type()[0], "application/json", str(r))
        self.assertIsInstance(r.json().get("error"), str, str(r))

    def test_counters_match_traffic(self):
        names = ("w1", "w2", "w3")
        backs = {n: self.custom(sized_reply_backend(n), name=n) for n in names}
        lb = admin_client.start_lb(self, [("p", [(n, backs[n]) for n in names], {})],
                                   frontends=[("fa", "p"), ("fb", "p")])
        sent = dict.fromkeys(names, 0)
        got = dict.fromkeys(names, 0)
        conns = dict.fromkeys(names, 0)
        plan = [("fa", 120), ("fb", 80)]
        i = 0
        for fe, n in plan:
            for _ in range(n):
                payload = bytes([i % 251]) * ((i * 37) % 1500)
                name, nbytes = sized_exchange(lb.fports[fe], payload, names)
                sent[name] += len(payload)
                got[name] += nbytes
                conns[name] += 1
                i += 1
        for n in names:
            self.assertGreater(conns[n], 0, f"{n} got no connection: {conns}")

        def settled(st):
            return (all(find_server(st, "p", n)["total_connections"] == conns[n]
                        and find_server(st, "p", n)["bytes_out"] == sent[n]
                        and find_server(st, "p", n)["bytes_in"] == got[n]
                        and find_server(st, "p", n)["active_connections"] == 0
                        for n in names)
                    and all(find_frontend(st, fe)["active_connections"] == 0 for fe, _ in plan)
                    and st["connections"]["active"] == 0)
        want = {n: dict(total_connections=conns[n], bytes_out=sent[n], bytes_in=got[n])
                for n in names}
        st = lb.admin.wait_stats(settled, WAIT, f"server counters {want}")
        self.assertStatsValid(st)
        for n in names:
            srv = find_server(st, "p", n)
            self.assertEqual(srv["connect_failures"], 0, srv)
            self.assertEqual(backs[n].accepted, conns[n], f"{n}: backend side")
        for fe, n in plan:
            f = find_frontend(st, fe)
            self.assertEqual((f["total_connections"], f["active_connections"]), (n, 0), f)

    def test_active_connections(self):
        names = ("h1", "h2")
        backs = {n: self.custom(name_then_echo_backend(n), name=n) for n in names}
        lb = admin_client.start_lb(self, [("p", [(n, backs[n]) for n in names], {})])
        port = lb.fports["fe_p"]
        held = []
        for _ in range(6):
            s = self.client(port)
            line = read_line(s).decode().strip()
            self.assertIn(line, names)
            held.append((s, line))

        def expect(conns):
            per = {n: sum(1 for s, x in conns if x == n) for n in names}

            def ok(st):
                return (find_frontend(st, "fe_p")["active_connections"] == len(conns)
                        and st["connections"]["active"] == len(conns)
                        and all(find_server(st, "p", n)["active_connections"] == per[n]
                                for n in names))
            return lb.admin.wait_stats(ok, WAIT, f"{len(conns)} active connections {per}")

        st = expect(held)
        self.assertStatsValid(st)
        self.assertEqual(find_frontend(st, "fe_p")["total_connections"], 6)
        for n in names:
            self.assertEqual(find_server(st, "p", n)["state"], "up")
        # The held connections still carry data.
        for s, _ in held:
            self.assertEqual(harness.roundtrip(s, b"ping\n"), b"ping\n")
        for s, _ in held[:3]:
            s.close()
        expect(held[3:])
        for s, _ in held[3:]:
            s.close()
        st = expect([])
        self.assertEqual(find_frontend(st, "fe_p")["total_connections"], 6)
        self.assertEqual(sum(find_server(st, "p", n)["total_connections"] for n in names), 6)

    def test_backend_crash_and_restart(self):
        hc = self.hc_backend(count=2)
        p0, p1 = hc.ports
        lb = admin_client.start_lb(self, [
            ("web", [("s0", hc.addr(p0)), ("s1", hc.addr(p1))],
             dict(HTTP_FAST, rise=2, fall=2))])
        for s in ("s0", "s1"):
            lb.admin.wait_server("web", s, lambda x: x["state"] == "up" and x["last_check"]
                                 and x["last_check"]["result"] == "passed", WAIT, "up")
        before = find_server(lb.admin.stats(), "web", "s0")
        t_crash = hc.crash(p0)

        seen = [before["consecutive_failures"]]

        def down_long(s):
            seen.append(s["consecutive_failures"])
            return s["state"] == "down" and s["consecutive_failures"] >= 4
        down = lb.admin.wait_server("web", "s0", down_long, WAIT,
                                    "state down with 4 consecutive failures")
        self.assertEqual(seen, sorted(seen), f"consecutive_failures went back: {seen}")
        self.assertGreaterEqual(len(set(seen)), 2, f"consecutive_failures never moved: {seen}")
        lc = down["last_check"]
        self.assertEqual(lc["result"], "failed", down)
        self.assertIn("refused", lc["detail"].lower(), down)
        self.assertGreater(lc["at"], t_crash - 0.5, down)
        self.assertEqual(down["health"], "down", down)
        self.assertEqual(down["consecutive_successes"], 0, down)
        self.assertGreater(down["last_change"], before["last_change"], down)
        self.assertGreater(down["last_change"], t_crash - 0.5, down)
        self.assertGreater(down["checks_total"], before["checks_total"], down)
        st = lb.admin.stats()
        self.assertStatsValid(st)
        self.assertEqual(find_pool(st, "web")["in_rotation"], 1)
        self.assertEqual(find_server(st, "web", "s1")["state"], "up")
        self.assertGreaterEqual(st["health"]["detections_down"], 1, st["health"])

        t_revive = hc.revive(p0)
        up = lb.admin.wait_server("web", "s0", lambda s: s["state"] == "up", WAIT,
                                  "state up after the restart")
        self.assertEqual(up["last_check"]["result"], "passed", up)
        self.assertIn("200", up["last_check"]["detail"], up)
        self.assertEqual(up["consecutive_failures"], 0, up)
        self.assertGreaterEqual(up["consecutive_successes"], 2, up)
        self.assertGreater(up["last_change"], max(down["last_change"], t_revive - 0.5), up)
        st = lb.admin.stats()
        self.assertEqual(find_pool(st, "web")["in_rotation"], 2)
        self.assertGreaterEqual(st["health"]["detections_up"], 1, st["health"])
        self.assertFalse(lb.events("server_down", server="s1"))

    def test_check_detail_is_escaped(self):
        lines = {
            "quote": b'HTTP/1.1 500 Bad "quote" \\ back',
            "ctl": b"HTTP/1.1 503 tab\there\x01ctl\x7f caf\xe9 \xff\xfe end",
            "json": b'HTTP/1.1 502 {"error":"x\\u0000"}</script>',
        }
        backs = {n: self.custom(status_line_backend(line), name=n) for n, line in lines.items()}
        lb = admin_client.start_lb(self, [
            ("web", [(n, backs[n]) for n in lines], dict(HTTP_FAST, fall=1))])
        for n in lines:
            lb.admin.wait_server("web", n, lambda s: s["last_check"] is not None
                                 and s["state"] == "down", WAIT, "a failed check")
        r = lb.admin.get("/stats")
        st = r.json()               # strict: UTF-8, well-formed
        self.assertStatsValid(st)
        quote = find_server(st, "web", "quote")["last_check"]
        self.assertEqual(quote["result"], "failed", quote)
        self.assertIn('Bad "quote" \\ back', quote["detail"], quote)
        self.assertIn("500", quote["detail"], quote)
        ctl = find_server(st, "web", "ctl")["last_check"]
        self.assertEqual(ctl["result"], "failed", ctl)
        self.assertIn("503", ctl["detail"], ctl)
        self.assertIn("end", ctl["detail"], ctl)
        js = find_server(st, "web", "json")["last_check"]
        self.assertIn('{"error":"x\\u0000"}</script>', js["detail"], js)
        # The action answer escapes the same way.
        r = lb.admin.action("web", "quote", "disable")
        self.assertEqual(r.status, 200, str(r))
        self.assertIn('Bad "quote" \\ back', r.json()["last_check"]["detail"])


if __name__ == "__main__":
    harness.main()
