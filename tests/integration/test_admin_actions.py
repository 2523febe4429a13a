"""Admin port, operator actions: POST /pools/P/servers/S/disable|drain|enable
answer 200 with the server's new JSON (the object of /stats); disable and
drain take the server out of rotation at once, drain lets open connections
finish (state draining, then disabled); enable hands the server back to the
health checks (in rotation only when its checks pass); the operator's
choice holds whatever the checks say meanwhile. Error answers: 404 for an
unknown pool or server, 405 with Allow for a wrong method, 400 for a bad
path, POST /reload answered, all JSON; with a token, a POST without it or
with a wrong one is 401 and changes nothing. Log events admin_listen,
server_disable/drain/enable, admin_exposed."""

import harness
from harness import LbTestCase, fetch_name, http_via, read_line
import admin_client
from admin_client import find_pool, find_server, name_then_echo_backend, server_problems

WAIT = 10.0
HTTP_FAST = {"check": "http", "check_interval": "200ms", "check_timeout": "200ms"}
VOLATILE = {"last_check", "last_change", "checks_total", "consecutive_successes",
            "consecutive_failures", "last_detection_ms"}


class AdminActionsTest(LbTestCase):

    def assertJsonError(self, r, status, what):
        self.assertEqual(r.status, status, f"{what}: {r}")
        self.assertEqual(r.media_type()[0], "application/json", f"{what}: {r}")
        body = r.json()
        self.assertIsInstance(body, dict, f"{what}: {r}")
        self.assertIsInstance(body.get("error"), str, f"{what}: {r}")
        self.assertTrue(body["error"], f"{what}: empty error: {r}")

    def assertServerAnswer(self, r, lb, pool, name, state, admin):
        """r is the 200 answer of an action on pool/name: the server's JSON,
        the same object /stats shows right after."""
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(r.media_type()[0], "application/json", str(r))
        srv = r.json()
        self.assertEqual(server_problems(srv), [], f"action answer: {srv}")
        self.assertEqual((srv["name"], srv["state"], srv["admin"]), (name, state, admin), srv)
        now = find_server(lb.admin.stats(), pool, name)
        self.assertEqual(set(srv), set(now), "the answer's keys differ from /stats'")
        self.assertEqual({k: v for k, v in srv.items() if k not in VOLATILE},
                         {k: v for k, v in now.items() if k not in VOLATILE},
                         "the answer differs from /stats")
        return srv

    def names_reached(self, port, n):
        return [fetch_name(port) for _ in range(n)]

    def test_disable_and_enable(self):
        names = ("web1", "web2", "web3")
        backs = {n: self.named(n) for n in names}
        lb = admin_client.start_lb(self, [("web", [(n, backs[n]) for n in names], {})])
        port = lb.fports["fe_web"]
        self.assertEqual(set(self.names_reached(port, 9)), set(names))
        self.assertEqual(lb.events("admin_listen")[0].get("auth"), "none")
        self.assertEqual(lb.events("admin_listen")[0].get("addr"),
                         f"{harness.HOST}:{lb.admin_port}")

        lb.admin.wait_idle("web", "web1")
        r = lb.admin.action("web", "web1", "disable")
        self.assertServerAnswer(r, lb, "web", "web1", "disabled", "disable")
        before = backs["web1"].accepted
        reached = self.names_reached(port, 30)      # at once: no wait
        self.assertNotIn("web1", reached, "a client reached a disabled server")
        self.assertEqual(backs["web1"].accepted, before)
        self.assertEqual(set(reached), {"web2", "web3"})
        st = lb.admin.stats()
        self.assertEqual(find_pool(st, "web")["in_rotation"], 2)
        self.assertEqual(find_server(st, "web", "web1")["state"], "disabled")
        lb.wait_event("server_disable", pool="web", server="web1")

        # Idempotent: a second disable answers the same.
        r = lb.admin.action("web", "web1", "disable")
        self.assertServerAnswer(r, lb, "web", "web1", "disabled", "disable")

        r = lb.admin.action("web", "web1", "enable")
        self.assertServerAnswer(r, lb, "web", "web1", "up", "none")
        self.assertIn("web1", self.names_reached(port, 9), "enabled server gets no clients")
        self.assertEqual(find_pool(lb.admin.stats(), "web")["in_rotation"], 3)
        lb.wait_event("server_enable", pool="web", server="web1")
        self.assertEqual(len(lb.events("server_disable", pool="web", server="web1")), 1)

        # Every server disabled: clients get nothing, no server is reached.
        for n in names:
            self.assertEqual(lb.admin.action("web", n, "disable").status, 200)
        lb.allowed_errors.add("no_server")
        accepted = {n: backs[n].accepted for n in names}
        data, how = harness.request(port, timeout=5)
        self.assertEqual(data, b"", f"a client got an answer with all servers disabled ({how})")
        self.assertEqual({n: backs[n].accepted for n in names}, accepted)
        self.assertEqual(find_pool(lb.admin.stats(), "web")["in_rotation"], 0)

    def test_drain_lets_open_connections_finish(self):
        names = ("d1", "d2")
        backs = {n: self.custom(name_then_echo_backend(n), name=n) for n in names}
        lb = admin_client.start_lb(self, [("web", [(n, backs[n]) for n in names], {})])
        port = lb.fports["fe_web"]
        # Open connections until one lands on d1; keep it.
        held = None
        others = []
        for _ in range(10):
            s = self.client(port)
            if read_line(s) == b"d1\n":
                held = s
                break
            others.append(s)
        self.assertIsNotNone(held, "no connection reached d1")
        for s in others:
            s.close()
        lb.admin.wait_server("web", "d1", lambda s: s["active_connections"] == 1, WAIT,
                             "one connection open on d1")

        r = lb.admin.action("web", "d1", "drain")
        self.assertServerAnswer(r, lb, "web", "d1", "draining", "drain")
        lb.wait_event("server_drain", pool="web", server="d1")
        for _ in range(10):
            s = self.client(port)
            self.assertEqual(read_line(s), b"d2\n", "a new client reached a draining server")
            s.close()
        # The open connection still works while its server drains.
        self.assertEqual(harness.roundtrip(held, b"still here\n"), b"still here\n")
        srv = find_server(lb.admin.stats(), "web", "d1")
        self.assertEqual((srv["state"], srv["active_connections"]), ("draining", 1), srv)
        held.close()
        srv = lb.admin.wait_server("web", "d1", lambda s: s["active_connections"] == 0, WAIT,
                                   "the drained connection to end")
        # drained stays draining (HAProxy's DRAIN), apart from disabled
        self.assertEqual((srv["state"], srv["admin"], srv["active_connections"]),
                         ("draining", "drain", 0), srv)

        r = lb.admin.action("web", "d1", "enable")
        self.assertServerAnswer(r, lb, "web", "d1", "up", "none")
        got = set()
        for _ in range(6):
            s = self.client(port)
            got.add(read_line(s))
            s.close()
        self.assertEqual(got, {b"d1\n", b"d2\n"})

    def test_disable_with_open_connection(self):
        # Whether disable lets open connections finish is not the contract's
        # business; the state is: disabled from the answer on, the state the
        # action leads to, even while its connection is being closed.
        backs = {n: self.custom(name_then_echo_backend(n), name=n) for n in ("x1", "x2")}
        lb = admin_client.start_lb(self, [("web", [(n, b) for n, b in backs.items()], {})])
        port = lb.fports["fe_web"]
        held = [self.client(port) for _ in range(2)]
        on = {read_line(s).strip().decode(): s for s in held}
        self.assertEqual(set(on), {"x1", "x2"})
        lb.admin.wait_server("web", "x1", lambda s: s["active_connections"] == 1, WAIT, "open")
        r = lb.admin.action("web", "x1", "disable")
        self.assertEqual(r.status, 200, str(r))
        srv = r.json()
        self.assertEqual(server_problems(srv), [], srv)
        self.assertEqual(srv["admin"], "disable", srv)
        self.assertEqual(srv["state"], "disabled", srv)
        for _ in range(4):
            s = self.client(port)
            self.assertEqual(read_line(s), b"x2\n", "a new client reached a disabled server")
            s.close()
        on["x1"].close()
        srv = lb.admin.wait_server("web", "x1", lambda s: s["active_connections"] == 0, WAIT,
                                   "its connection closed")
        self.assertEqual(srv["state"], "disabled", srv)
        self.assertEqual((srv["active_connections"], srv["admin"]), (0, "disable"), srv)
        # The four short clients are gone; the held one stays.
        x2 = lb.admin.wait_server("web", "x2", lambda s: s["active_connections"] <= 1, WAIT,
                                  "only the held connection open")
        self.assertEqual((x2["state"], x2["active_connections"]), ("up", 1), x2)

    def test_enable_returns_to_health_control(self):
        hc = self.hc_backend(count=2)
        p0, p1 = hc.ports
        lb = admin_client.start_lb(self, [
            ("web", [("s0", hc.addr(p0)), ("s1", hc.addr(p1))],
             dict(HTTP_FAST, rise=2, fall=2))])
        port = lb.fports["fe_web"]
        for s in ("s0", "s1"):
            lb.admin.wait_server("web", s, lambda x: x["health"] == "up", WAIT, "health up")

        r = lb.admin.action("web", "s0", "disable")
        self.assertServerAnswer(r, lb, "web", "s0", "disabled", "disable")
        self.assertEqual(set(http_via(port) for _ in range(6)), {p1})
        # The checks go on while disabled: s0 fails, then recovers; it stays
        # out all along.
        hc.mode(p0, "500")
        srv = lb.admin.wait_server("web", "s0", lambda s: s["health"] == "down", WAIT,
                                   "health down while disabled")
        self.assertEqual((srv["state"], srv["admin"]), ("disabled", "disable"), srv)
        self.assertEqual(srv["last_check"]["result"], "failed", srv)

        # enable while the checks fail: back under their control, so out.
        r = lb.admin.action("web", "s0", "enable")
        self.assertServerAnswer(r, lb, "web", "s0", "down", "none")
        self.assertEqual(set(http_via(port) for _ in range(6)), {p1},
                         "an enabled server whose checks fail got clients")
        self.assertEqual(find_pool(lb.admin.stats(), "web")["in_rotation"], 1)

        # Checks pass again: in rotation without any operator action.
        hc.mode(p0, "ok")
        lb.admin.wait_server("web", "s0", lambda s: s["state"] == "up", WAIT,
                             "up once the checks pass")
        self.assertEqual(set(http_via(port) for _ in range(6)), {p0, p1})

        # Disabled while healthy, enabled while healthy: up at once.
        lb.admin.wait_idle("web", "s1")
        r = lb.admin.action("web", "s1", "drain")
        self.assertServerAnswer(r, lb, "web", "s1", "draining", "drain")
        self.assertEqual(set(http_via(port) for _ in range(6)), {p0})
        r = lb.admin.action("web", "s1", "enable")
        self.assertServerAnswer(r, lb, "web", "s1", "up", "none")
        self.assertEqual(set(http_via(port) for _ in range(6)), {p0, p1})

    def test_error_answers(self):
        names = ("web1", "web2")
        backs = {n: self.named(n) for n in names}
        lb = admin_client.start_lb(self, [("web", [(n, backs[n]) for n in names], {}),
                                          ("api", [("api1", self.named("api1"))], {})])
        a = lb.admin
        for path in ("/pools/nope/servers/web1/disable", "/pools/web/servers/nope/disable",
                     "/pools/web/servers/api1/drain", "/pools/api/servers/web1/enable",
                     "/pools/WEB/servers/web1/disable"):
            self.assertJsonError(a.post(path), 404, f"POST {path}")
        for path in ("/pools/web/servers/web1/disable", "/pools/web/servers/web1/enable",
                     "/pools/web/servers/web1/drain"):
            for method in ("GET", "PUT", "DELETE"):
                r = a.request(method, path)
                self.assertJsonError(r, 405, f"{method} {path}")
                allow = r.header("Allow")
                self.assertIsNotNone(allow, f"{method} {path}: 405 without Allow: {r}")
                self.assertIn("POST", [m.strip() for m in allow.split(",")], str(r))
        r = a.post("/pools/web/servers/web1")      # DELETE removes a server
        self.assertJsonError(r, 405, "POST /pools/web/servers/web1")
        self.assertEqual(r.header("Allow"), "DELETE")
        for path in ("/pools/web/servers//disable",
                     "/pools/web/servers/web1/explode", "/pools/web/servers/web1/disable/x",
                     "/pools/web/servers/web1/disable/x/y", "/pools//servers/web1/disable",
                     "/pools/web/hosts/web1/disable", "/pools/web/servers", "/pools/web",
                     "/pools", "/pools/web/servers/web1/DISABLE"):
            self.assertJsonError(a.post(path), 400, f"POST {path}")
        self.assertJsonError(a.get("/no-such-page"), 404, "GET /no-such-page")
        # None of that touched a server.
        st = a.stats()
        for p, servers in (("web", names), ("api", ("api1",))):
            self.assertEqual(find_pool(st, p)["in_rotation"], len(servers))
            for n in servers:
                self.assertEqual((find_server(st, p, n)["state"],
                                  find_server(st, p, n)["admin"]), ("up", "none"))
        for ev in ("server_disable", "server_drain", "server_enable"):
            self.assertFalse(lb.events(ev), f"{ev} logged for a refused request")
        self.assertEqual(set(fetch_name(lb.fports["fe_web"]) for _ in range(4)), set(names))
        # A body on an action is harmless.
        a.wait_idle("web", "web2")
        r = a.post("/pools/web/servers/web2/disable", body=b"{}",
                   headers={"Content-Type": "application/json"})
        self.assertServerAnswer(r, lb, "web", "web2", "disabled", "disable")

    def test_other_methods_on_action_path(self):
        # Standard methods other than POST are as wrong on an action path as
        # GET: 405 with Allow and a JSON error. A method nobody knows may be
        # 501 (RFC 9110), but it is an error all the same: JSON. Nothing
        # changes either way.
        self.maxDiff = None
        lb = admin_client.start_lb(self, [("web", [("web1", self.named("web1"))], {})])
        seen = {}
        for method, codes in (("OPTIONS", ("405",)), ("TRACE", ("405",)), ("PATCH", ("405",)),
                              ("BREW", ("405", "501"))):
            raw, how = admin_client.raw_exchange(
                lb.admin_port, f"{method} /pools/web/servers/web1/disable HTTP/1.1\r\n"
                f"Host: {harness.HOST}\r\nConnection: close\r\n\r\n".encode(), timeout=5)
            head, _, body = raw.partition(b"\r\n\r\n")
            lines = head.decode(errors="replace").split("\r\n")
            hdrs = {k.strip().lower(): v.strip() for k, _, v in
                    (line.partition(":") for line in lines[1:])}
            code = lines[0][9:12]
            ok = (code in codes and hdrs.get("content-type") == "application/json"
                  and body.startswith(b'{"error"')
                  and (code != "405" or "POST" in hdrs.get("allow", "")))
            if not ok:
                seen[method] = (lines[0], hdrs.get("allow"), hdrs.get("content-type"),
                                body[:40], how)
        srv = find_server(lb.admin.stats(), "web", "web1")
        self.assertEqual((srv["state"], srv["admin"]), ("up", "none"), srv)
        self.assertEqual(seen, {}, "wrong methods not answered 405 + Allow + JSON error "
                         "(status, Allow, Content-Type, body, end)")

    def test_token(self):
        token = "s3cr3t-T0ken_with.various+chars/="
        names = ("web1", "web2")
        backs = {n: self.named(n) for n in names}
        lb = admin_client.start_lb(self, [("web", [(n, backs[n]) for n in names], {})],
                                   token=token)
        a = lb.admin
        ev = lb.events("admin_listen")
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual((ev[0].get("addr"), ev[0].get("auth")),
                         (f"{harness.HOST}:{lb.admin_port}", "token"), ev)
        self.assertNotIn(token, lb.log(), "the token is in the log")
        self.assertFalse(lb.events("admin_exposed"), "loopback admin port flagged exposed")

        path = "/pools/web/servers/web1/disable"
        bad_auth = [None, "", "Bearer", "Bearer ", f"Bearer {token}x", f"Bearer {token[:-1]}",
                    f"Bearer x{token}", f"Basic {token}", token, f"Bearer {token} x",
                    "Bearer " + token.upper(), f"Token {token}"]
        for auth in bad_auth:
            headers = {} if auth is None else {"Authorization": auth}
            r = a.post(path, auth=False, headers=headers)
            self.assertJsonError(r, 401, f"POST with Authorization {auth!r}")
        # Nothing changed.
        srv = find_server(a.stats(), "web", "web1")
        self.assertEqual((srv["state"], srv["admin"]), ("up", "none"), srv)
        self.assertFalse(lb.events("server_disable"))
        self.assertEqual(set(fetch_name(lb.fports["fe_web"]) for _ in range(4)), set(names))

        # GETs need no token.
        for path_get, mtype in (("/stats", "application/json"), ("/metrics", "text/plain"),
                                ("/healthz", "text/plain"), ("/", "text/html")):
            r = a.get(path_get)
            self.assertEqual(r.status, 200, f"GET {path_get} without token: {r}")
            self.assertEqual(r.media_type()[0], mtype, f"GET {path_get}: {r}")

        a.wait_idle("web", "web1")
        r = a.post(path)        # with "Authorization: Bearer <token>"
        self.assertServerAnswer(r, lb, "web", "web1", "disabled", "disable")
        self.assertNotIn("web1", set(fetch_name(lb.fports["fe_web"]) for _ in range(6)))
        r = a.post("/pools/web/servers/web1/enable")
        self.assertServerAnswer(r, lb, "web", "web1", "up", "none")
        self.assertJsonError(a.post("/pools/web/servers/nope/drain"), 404, "unknown server")
        self.assertEqual(len(lb.events("server_disable", pool="web", server="web1")), 1)
        self.assertEqual(len(lb.events("server_enable", pool="web", server="web1")), 1)
        self.assertNotIn(token, lb.log(), "the token is in the log")

    def test_reload_answers(self):
        # POST /reload is SIGHUP: 200 with the new generation, behind the
        # token like every POST (the reload tests cover what it does).
        e = self.echo()
        lb = admin_client.start_lb(self, [("p", [("s", e)], {})])
        r = lb.admin.post("/reload")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"reloaded": True, "generation": 2})
        lb2 = admin_client.start_lb(self, [("p", [("s", e)], {})], token="t0k")
        self.assertJsonError(lb2.admin.post("/reload", auth=False), 401,
                             "POST /reload without the token")
        self.assertEqual(lb2.admin.post("/reload").status, 200)

    # The admin_exposed warning (a non-loopback admin address without a
    # token) is not tested here: tests listen on 127.0.0.1 only.


if __name__ == "__main__":
    harness.main()
