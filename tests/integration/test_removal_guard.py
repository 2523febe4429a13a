"""The minimum-pool guard (min_servers): health checks never take a pool
below its floor. A failing server that would take it below stays in
rotation with guarded: true (pool guard_active: true, event=guard_hold
logged once); the servers that went down first leave first, so the held
ones are those whose failure began last. A recovery elsewhere, or the held
server's own, releases it (event=guard_release), and a still-failing held
server leaves as soon as the floor allows. Operator actions are not held
back, but they count: the floor is about servers in rotation. min_servers =
0 lets every server go; the default is 1.

The servers are ports of one hc_backend.py process; "crash" closes a
port's listener (connects refused), "revive" listens again. Checks are HTTP
every 200 ms with rise 1 and fall 3, so each step takes a fraction of a
second; fall 3 and a timeout as long as the interval keep a healthy server
up when the backend answers a probe late (a flapping server would be held or
taken out, and every count of events here would be off). Every wait has a
deadline."""

import harness
from admin_client import Admin, find_pool, make_admin_config
from harness import LbTestCase, http_via, wait_for

HTTP = {"check": "http", "check_interval": "200ms", "check_timeout": "200ms",
        "rise": 1, "fall": 3, "retries": 3}
WAIT = 10.0
POOL = "web"
NAMES = ("s0", "s1", "s2", "s3")


class GuardTest(LbTestCase):

    def start(self, min_servers, names=NAMES, allowed_errors=()):
        """hc_backend with one port per name, lb with pool "web" over them
        (min_servers=None leaves the key out: the default). Waits until
        every server passed a check."""
        self.b = self.hc_backend(count=len(names))
        self.port = dict(zip(names, self.b.ports))
        keys = dict(HTTP, min_servers=min_servers)
        text, admin_port, fports = make_admin_config(
            [(POOL, [(n, self.b.addr(self.port[n])) for n in names], keys)],
            log_level="debug")
        self.lbi = self.start_lb(text, allowed_errors=allowed_errors)
        self.admin = Admin(admin_port)
        self.fport = fports[f"fe_{POOL}"]
        for n in names:
            self.admin.wait_server(POOL, n, lambda s: s["last_check"] is not None
                                   and s["last_check"]["result"] == "passed",
                                   WAIT, "a first passed check")
        return self.lbi

    def pool(self):
        return find_pool(self.admin.stats(), POOL)

    def servers(self):
        return {s["name"]: s for s in self.pool()["servers"]}

    def wait_pool(self, cond, what):
        last = [None]

        def probe():
            last[0] = self.pool()
            return last[0] if cond(last[0]) else None
        return wait_for(probe, WAIT, lambda: f"{what}; last pool {last[0]}")

    def wait_checks_after(self, names, count):
        """Waits until each server has `count` more checks than now (the
        verdicts of a few more probe rounds have been applied)."""
        base = {n: s["checks_total"] for n, s in self.servers().items() if n in names}
        self.wait_pool(lambda p: all(s["checks_total"] >= base[s["name"]] + count
                                     for s in p["servers"] if s["name"] in base),
                       f"{count} more checks of {names}")

    def crash(self, name):
        self.b.crash(self.port[name])

    def revive(self, name):
        self.b.revive(self.port[name])

    def assert_clients_answered(self, n=20, expect=None):
        """n sequential clients all get an HTTP answer (retries hide the
        refused servers); expect: the set of ports allowed to answer."""
        got = [http_via(self.fport) for _ in range(n)]
        self.assertNotIn(None, got, f"a client got no answer: {got}")
        if expect is not None:
            self.assertEqual(set(got) - set(expect), set(), f"answers from {got}")

    def check_pool(self, in_rotation, guarded, down, floor):
        """Asserts the whole pool: which servers are guarded, which are
        down, guard_active, min_servers, in_rotation."""
        p = self.pool()
        srv = {s["name"]: s for s in p["servers"]}
        self.assertEqual(p["min_servers"], floor, p)
        self.assertEqual(p["in_rotation"], in_rotation, p)
        self.assertEqual(p["guard_active"], bool(guarded), p)
        self.assertEqual({n for n, s in srv.items() if s["guarded"]}, set(guarded), p)
        for n in guarded:
            self.assertEqual((srv[n]["state"], srv[n]["health"]), ("up", "down"), srv[n])
        self.assertEqual({n for n, s in srv.items() if s["state"] == "down"}, set(down), p)
        ups = sum(1 for s in srv.values() if s["state"] == "up")
        self.assertEqual(ups, in_rotation, p)
        return p

    def check_hold_logged(self, lb, name, in_rotation, floor):
        evs = lb.events("guard_hold", server=name)
        self.assertEqual(len(evs), 1, f"guard_hold for {name}: {evs}")
        ev = evs[0]
        self.assertEqual(ev.get("level"), "warn", ev)
        self.assertEqual((ev.get("pool"), ev.get("in_rotation"), ev.get("min_servers")),
                         (POOL, str(in_rotation), str(floor)), ev)
        self.assertFalse(lb.events("server_down", server=name),
                         f"{name} is held but server_down was logged")

    # ------------------------------------------------------------------ tests

    def test_percent_floor_holds_last_failed(self):
        lb = self.start("50%")
        self.check_pool(4, [], [], 2)
        self.crash("s0")
        lb.wait_event("server_down", server="s0")
        self.crash("s1")
        lb.wait_event("server_down", server="s1")
        self.crash("s2")
        lb.wait_event("guard_hold", server="s2")
        self.check_pool(2, ["s2"], ["s0", "s1"], 2)
        # A few more failed probes of the held server: held, logged once.
        self.wait_checks_after(["s2"], 3)
        self.check_pool(2, ["s2"], ["s0", "s1"], 2)
        self.check_hold_logged(lb, "s2", 2, 2)
        self.assertEqual(len(lb.events("guard_hold")), 1, lb.events("guard_hold"))
        self.assertEqual(len(lb.events("server_down")), 2)
        self.assert_clients_answered(expect=[self.port["s3"]])

        # s0 recovers: the floor holds without s2, which leaves at once.
        self.revive("s0")
        lb.wait_event("server_up", server="s0")
        rel = lb.wait_event("guard_release", server="s2")[0]
        self.assertEqual(rel.get("health"), "down", rel)
        down = lb.wait_event("server_down", server="s2")[0]
        self.assertIn("guard", down.get("reason", ""), down)
        self.check_pool(2, [], ["s1", "s2"], 2)

        self.revive("s1")
        self.revive("s2")
        self.wait_pool(lambda p: p["in_rotation"] == 4, "all 4 back in rotation")
        self.check_pool(4, [], [], 2)
        self.assert_clients_answered(n=12)
        self.assertEqual(len(lb.events("guard_hold")), 1)

    def test_count_floor_holds_last_failed(self):
        lb = self.start(3)
        self.crash("s0")
        lb.wait_event("server_down", server="s0")
        self.crash("s1")
        lb.wait_event("guard_hold", server="s1")
        self.check_pool(3, ["s1"], ["s0"], 3)
        self.crash("s2")
        lb.wait_event("guard_hold", server="s2")
        self.check_pool(3, ["s1", "s2"], ["s0"], 3)
        self.wait_checks_after(["s1", "s2"], 3)
        self.check_pool(3, ["s1", "s2"], ["s0"], 3)
        self.check_hold_logged(lb, "s1", 3, 3)
        self.check_hold_logged(lb, "s2", 3, 3)
        self.assert_clients_answered(expect=[self.port["s3"]])

        # The held s2 recovers: released, stays in rotation (no flip).
        self.revive("s2")
        rel = lb.wait_event("guard_release", server="s2")[0]
        self.assertEqual(rel.get("health"), "up", rel)
        self.check_pool(3, ["s1"], ["s0"], 3)
        self.assertFalse(lb.events("server_down", server="s2"))
        self.revive("s1")
        lb.wait_event("guard_release", server="s1")
        self.revive("s0")
        lb.wait_event("server_up", server="s0")
        self.check_pool(4, [], [], 3)
        self.assertEqual([e["server"] for e in lb.events("server_down")], ["s0"])

    def test_operator_actions_count_but_are_not_held(self):
        lb = self.start(2)
        for n in ("s0", "s1"):
            r = self.admin.action(POOL, n, "disable")
            self.assertEqual(r.status, 200, r)
        self.wait_pool(lambda p: p["in_rotation"] == 2, "both disabled servers out")
        srv = self.servers()
        self.assertEqual((srv["s0"]["state"], srv["s1"]["state"]), ("disabled", "disabled"))
        self.assertFalse(lb.events("guard_hold"), "an operator action was held back")
        self.assertFalse(self.pool()["guard_active"])

        self.crash("s2")
        lb.wait_event("guard_hold", server="s2")
        self.check_pool(2, ["s2"], [], 2)
        self.wait_checks_after(["s2"], 3)
        self.check_pool(2, ["s2"], [], 2)
        self.check_hold_logged(lb, "s2", 2, 2)
        self.assert_clients_answered(expect=[self.port["s3"]])

        # Enabling one disabled server (healthy) lets the held one go.
        r = self.admin.action(POOL, "s0", "enable")
        self.assertEqual(r.status, 200, r)
        lb.wait_event("guard_release", server="s2")
        lb.wait_event("server_down", server="s2")
        self.check_pool(2, [], ["s2"], 2)

    def test_zero_lets_every_server_go(self):
        lb = self.start(0)
        for n in NAMES:
            self.crash(n)
        for n in NAMES:
            lb.wait_event("server_down", server=n)
        self.check_pool(0, [], list(NAMES), 0)
        self.wait_checks_after(list(NAMES), 2)
        self.check_pool(0, [], list(NAMES), 0)
        self.assertFalse(lb.events("guard_hold"))

    def test_default_floor_is_one(self):
        lb = self.start(None, names=("s0", "s1"))
        self.crash("s0")
        lb.wait_event("server_down", server="s0")
        self.crash("s1")
        lb.wait_event("guard_hold", server="s1")
        self.check_pool(1, ["s1"], ["s0"], 1)


if __name__ == "__main__":
    harness.main()
