"""The admin API's members: POST /pools/{pool}/servers adds a server,
DELETE /pools/{pool}/servers/{server} drains and removes it, POST
.../weight reweighs one; with and without the token, and bad requests
answered with their codes. Real lb, real backends, real sockets."""

import json
import socket

import admin_client
import harness
from admin_client import Admin
from harness import HOST, free_port, wait_for

TOKEN = "s3cret-token"


def config(admin_port, port, servers, token=TOKEN, extra=()):
    lines = ["[global]", "workers = 2", "shutdown_timeout = 3s", "",
             "[admin]", f"listen = {HOST}:{admin_port}"]
    if token:
        lines.append(f"token = {token}")
    lines += ["", "[frontend web]", f"listen = {HOST}:{port}", "pool = web", "",
              "[pool web]"]
    lines += [f"server = {n} {a}" for n, a in servers]
    lines += ["check = tcp", "check_interval = 200ms", "check_timeout = 150ms", "rise = 1",
              "fall = 1", "min_servers = 0", "observe_errors = 0", "drain_timeout = 30s"]
    lines += list(extra)
    return "\n".join(lines) + "\n"


def servers_of(st):
    return {s["name"]: s for p in st["pools"] if p["name"] == "web" for s in p["servers"]}


class MembersApiTest(harness.LbTestCase):
    def setUp(self):
        super().setUp()
        self.admin_port, self.port = free_port(), free_port()
        self.admin = Admin(self.admin_port, token=TOKEN)
        self.a = self.named("A", hold=True)
        self.text = config(self.admin_port, self.port, [("web1", self.a.addr)])
        self.lb = self.start_lb(self.text)

    def post_json(self, path, body, auth=True):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.admin.post(path, auth=auth, body=data,
                               headers={"Content-Type": "application/json"})

    def delete(self, path, auth=True):
        h = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
        return self.admin.request("DELETE", path, headers=h)

    def who(self):
        with harness.connect(self.port) as s:
            return harness.read_line(s).decode().strip()

    def test_add_reweigh_delete(self):
        b = self.named("B", hold=True)
        r = self.post_json("/pools/web/servers", {"name": "web9", "address": b.addr, "weight": 3})
        self.assertEqual(r.status, 201, str(r))
        body = r.json()
        self.assertEqual((body["name"], body["address"], body["weight"], body["source"]),
                         ("web9", b.addr, 3, "api"))
        # probed before it joins rotation: up in the answer only if its first
        # probe came first (the answer waits for every worker to switch, a
        # loopback probe may be quicker)
        self.assertTrue(body["state"] != "up" or body["last_check"] is not None, body)
        self.admin.wait_stats(lambda st: servers_of(st).get("web9", {}).get("state") == "up",
                              5.0, "web9 up after its probe")
        self.assertEqual(set(servers_of(self.admin.stats())), {"web1", "web9"})

        # weight 3:1 -> 1:1 from the next pick
        r = self.post_json("/pools/web/servers/web9/weight", {"weight": 1})
        self.assertEqual((r.status, r.json()["weight"]), (200, 1), str(r))
        names = [self.who() for _ in range(8)]
        self.assertEqual(names.count("A"), names.count("B"), names)
        # a weight for a server of the file too
        r = self.post_json("/pools/web/servers/web1/weight", {"weight": 3})
        self.assertEqual((r.status, r.json()["weight"], r.json()["source"]), (200, 3, "config"))
        names = [self.who() for _ in range(8)]
        self.assertEqual((names.count("A"), names.count("B")), (6, 2), names)
        # weight 0: in the pool, no new connection (drained)
        # (the weight is an input of its own: the operator's admin stays none)
        r = self.post_json("/pools/web/servers/web1/weight", {"weight": 0})
        self.assertEqual((r.status, r.json()["admin"], r.json()["state"], r.json()["weight"]),
                         (200, "none", "draining", 0), str(r))
        self.assertEqual({self.who() for _ in range(6)}, {"B"})
        r = self.post_json("/pools/web/servers/web1/weight", {"weight": 1})
        self.assertEqual((r.status, r.json()["admin"], r.json()["state"], r.json()["weight"]),
                         (200, "none", "up", 1), str(r))
        self.assertEqual({self.who() for _ in range(6)}, {"A", "B"})

        # an open connection to web9 drains through its delete
        held = None
        for _ in range(10):
            s = self.client(self.port)
            if harness.read_line(s) == b"B\n":
                held = s
                break
        self.assertIsNotNone(held)
        r = self.delete("/pools/web/servers/web9")
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(r.json(), {"deleted": "web9", "active_connections": 1,
                                    "drain_timeout_ms": 30000})
        st = self.admin.stats()
        self.assertEqual(set(servers_of(st)), {"web1"})
        removed = [x["server"] for x in st["removed_servers"]]
        self.assertEqual([(x["name"], x["state"]) for x in removed], [("web9", "draining")])
        self.assertEqual({self.who() for _ in range(6)}, {"A"})
        held.settimeout(0.2)
        with self.assertRaises(socket.timeout, msg="the drained connection was cut"):
            held.recv(1)
        held.close()
        self.admin.wait_stats(lambda st: not st["removed_servers"], 5.0,
                              "web9 gone once its connection closed")
        self.assertEqual(self.delete("/pools/web/servers/web9").status, 404)

    def test_api_servers_survive_a_reload(self):
        b = self.named("B")
        r = self.post_json("/pools/web/servers", {"name": "web9", "address": b.addr})
        self.assertEqual(r.status, 201, str(r))
        self.admin.wait_stats(lambda st: servers_of(st).get("web9", {}).get("state") == "up",
                              5.0, "web9 up")
        total = servers_of(self.admin.stats())["web9"]["checks_total"]
        r = self.admin.post("/reload")
        self.assertEqual(r.status, 200, str(r))
        srv = servers_of(self.admin.stats())
        self.assertEqual((srv["web9"]["source"], srv["web9"]["state"]), ("api", "up"))
        self.assertGreaterEqual(srv["web9"]["checks_total"], total)   # the same server
        # a file line with web9's address now: the file's server wins, the
        # API's is left out
        with open(self.lb.config_path, "w") as f:
            f.write(config(self.admin_port, self.port,
                           [("web1", self.a.addr), ("file9", b.addr)]))
        r = self.admin.post("/reload")
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(set(servers_of(self.admin.stats())), {"web1", "file9"})

    def test_refusals(self):
        b = self.named("B")
        good = {"name": "web9", "address": b.addr}
        cases = [
            # (method, path, body, auth, status, error substring)
            ("POST", "/pools/web/servers", good, False, 401, "unauthorized"),
            ("DELETE", "/pools/web/servers/web1", None, False, 401, "unauthorized"),
            ("POST", "/pools/web/servers/web1/weight", {"weight": 2}, False, 401, "unauthorized"),
            ("POST", "/pools/nope/servers", good, True, 404, "no such pool"),
            ("POST", "/pools/web/servers", "not json", True, 400, "not a JSON object"),
            ("POST", "/pools/web/servers", {"name": "web9"}, True, 400, "needs"),
            ("POST", "/pools/web/servers", {"name": "web9", "address": "10.0.0.1"}, True, 400,
             "has no port"),
            ("POST", "/pools/web/servers", {"name": "web/9", "address": b.addr}, True, 400,
             "is invalid"),
            ("POST", "/pools/web/servers", {"name": "web9", "address": b.addr, "weight": 0},
             True, 400, "out of range"),
            ("POST", "/pools/web/servers", {"name": "web1", "address": b.addr}, True, 409,
             "name"),
            ("POST", "/pools/web/servers", {"name": "web9", "address": self.a.addr}, True, 409,
             "address"),
            ("DELETE", "/pools/web/servers/web1", None, True, 409, "config file"),
            ("DELETE", "/pools/web/servers/nope", None, True, 404, "no such server"),
            ("POST", "/pools/web/servers/web1/weight", {"weight": 257}, True, 400, "0 to 256"),
            ("POST", "/pools/web/servers/web1/weight", {"w": 1}, True, 400, "unknown field"),
            ("PUT", "/pools/web/servers", good, True, 405, "use POST"),
        ]
        for method, path, body, auth, status, error in cases:
            with self.subTest(f"{method} {path} {str(body)[:40]}"):
                if method == "DELETE":
                    r = self.delete(path, auth=auth)
                elif method == "PUT":
                    r = self.admin.request("PUT", path, body=json.dumps(body))
                else:
                    r = self.post_json(path, body, auth=auth)
                self.assertEqual(r.status, status, str(r))
                self.assertEqual(r.media_type()[0], "application/json", str(r))
                self.assertIn(error, r.json()["error"], str(r))
        # 1 MB of body: a 413, or closed before it could be read (lb stops
        # reading at its 1 KiB limit and closes; the send may then fail)
        big = (f"POST /pools/web/servers HTTP/1.1\r\nHost: {HOST}\r\n"
               f"Authorization: Bearer {TOKEN}\r\nContent-Length: {1 << 20}\r\n\r\n"
               ).encode() + b"x" * (1 << 20)
        raw, how = admin_client.raw_exchange(self.admin_port, big)
        self.assertNotEqual(how, "timeout", f"1 MB body: connection left open, got {raw[:200]!r}")
        if raw:
            self.assertEqual(admin_client.status_of(raw), 413, raw[:300])
            self.assertIn(b'"error":"request body too large"', raw)
        # nothing changed, and lb still serves
        self.assertEqual(set(servers_of(self.admin.stats())), {"web1"})
        self.assertEqual(self.who(), "A")


if __name__ == "__main__":
    harness.main()
