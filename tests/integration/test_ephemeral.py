"""Ephemeral servers (Nacos' model): an instance registers itself through
the admin API with "ephemeral": true, keeps itself in the pool with
heartbeats, is out of rotation heartbeat_ttl after its last one and deleted
(drained, then gone) ephemeral_delete_after after it. A heartbeat with an
address registers an instance the pool does not have (201), as Nacos'
clients do after a registry restart. They survive reloads and lb -x (their
heartbeat clocks restart), and are not written to the state file; the
guard keeps a pool from losing its last ones. Real lb, real backends, real
sockets."""

import json
import os
import signal
import threading
import time

import harness
from admin_client import Admin, find_pool, find_server, make_admin_config
from harness import HC_SLACK, HOST, TIMER_TICK, LbTestCase, event_time, wait_for

WAIT = 10.0
TICK = 0.1                  # the heartbeat tick and the delete sweep (100 ms)
BEAT_EVERY = 1.0            # the instances' heartbeat period
TTL, DELETE_AFTER = 2.5, 4.0
POOL_KEYS = {"check": "tcp", "check_interval": "200ms", "check_timeout": "150ms", "rise": 1,
             "fall": 1, "min_servers": 0, "heartbeat_ttl": f"{int(TTL * 1000)}ms",
             "ephemeral_delete_after": f"{int(DELETE_AFTER * 1000)}ms", "drain_timeout": "30s"}
JSON = {"Content-Type": "application/json"}


def beat_path(server, pool="web"):
    return f"/pools/{pool}/servers/{server}/heartbeat"


class Beater:
    """Heartbeats one server every BEAT_EVERY, a new connection each (an
    lb -x hands the admin port over between two), until stop(); the time
    of the last heartbeat answered 200, and what else came back."""

    def __init__(self, port, server, body=b""):
        self.admin = Admin(port)
        self.path, self.body = beat_path(server), body
        self.stop_ev = threading.Event()
        self.last, self.last_sent, self.bad = 0.0, 0.0, []
        self.thread = harness.Thread(self._run)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + 60            # bounded, whatever the test does
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            try:
                sent = time.time()
                r = self.admin.post(self.path, body=self.body)
                if r.status == 200:
                    self.last, self.last_sent = time.time(), sent
                else:
                    self.bad.append((r.status, r.text()))
            except OSError as e:
                self.bad.append((0, str(e)))
            self.stop_ev.wait(BEAT_EVERY)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=10)
        return self.last


class EphemeralTest(LbTestCase):

    def start(self, keys=POOL_KEYS, servers=(), **kw):
        text, self.admin_port, fports = make_admin_config([("web", list(servers), dict(keys))],
                                                          **kw)
        self.lb = self.start_lb(text)
        self.admin = Admin(self.admin_port)
        self.fport = fports["fe_web"]
        return self.lb

    def register(self, name, addr, ephemeral=True, **extra):
        return self.admin.post("/pools/web/servers", headers=JSON, body=json.dumps(
            dict({"name": name, "address": addr, "ephemeral": ephemeral}, **extra)))

    def srv(self, name):
        return find_server(self.admin.stats(), "web", name)

    def test_lifecycle(self):
        """Registered, in rotation while it heartbeats; silent: out at the
        TTL, deleted at ephemeral_delete_after with its connection still
        served; a heartbeat with its address brings it back."""
        e1 = self.echo("e1")
        lb = self.start()
        r = self.register("e1", e1.addr)
        self.assertEqual(r.status, 201, str(r))
        self.assertTrue(r.json()["ephemeral"], r.json())
        beater = Beater(self.admin_port, "e1")
        self.addCleanup(beater.stop)
        s = self.admin.wait_server("web", "e1", lambda s: s["state"] == "up", WAIT, "e1 up")
        self.assertEqual((s["source"], s["ephemeral"]), ("api", True), s)
        self.assertTrue(DELETE_AFTER - BEAT_EVERY - 0.5 <= s["delete_in_s"] <= DELETE_AFTER, s)
        self.assertEqual(find_pool(self.admin.stats(), "web")["in_rotation"], 1)

        # A connection through it, open across what follows.
        conn = harness.connect(self.fport)
        self.addCleanup(conn.close)
        conn.sendall(b"before\n")
        self.assertEqual(harness.read_line(conn), b"before\n")

        last = beater.stop()
        self.assertEqual(beater.bad, [])
        down = lb.wait_event("server_down", timeout=WAIT, server="e1")[0]
        out = event_time(down) - last
        self.assertRegex(down["reason"], r"^heartbeat expired")
        gone = lb.wait_event("ephemeral_delete", timeout=WAIT, server="e1")[0]
        deleted = event_time(gone) - last
        print(f"\nmeasured: last heartbeat -> out {out * 1000:.0f} ms (heartbeat_ttl "
              f"{TTL * 1000:.0f}), -> deleted {deleted * 1000:.0f} ms (ephemeral_delete_after "
              f"{DELETE_AFTER * 1000:.0f})")
        # lb took the heartbeat between its sending and its answer: the
        # lower bounds count from the sending (a loaded machine answers late)
        early = last - beater.last_sent
        self.assertTrue(TTL - TIMER_TICK - 0.01 <= out + early and out <= TTL + TICK + HC_SLACK,
                        (out, early))
        self.assertTrue(DELETE_AFTER - TIMER_TICK - 0.01 <= deleted + early
                        and deleted <= DELETE_AFTER + TICK + HC_SLACK, (deleted, early))
        self.assertGreaterEqual(int(gone["silent_ms"]), DELETE_AFTER * 1000, gone)
        # Gone from the pool once the members reload ends; its connection
        # drains on.
        self.admin.wait_stats(lambda st: find_pool(st, "web")["servers_total"] == 0, WAIT,
                              "e1 out of the pool")
        conn.sendall(b"after\n")
        self.assertEqual(harness.read_line(conn), b"after\n")
        conn.close()
        # Unknown to the pool now: a plain heartbeat is 404, one with its
        # address registers it again (201), ephemeral.
        r = self.admin.post(beat_path("e1"))
        self.assertEqual((r.status, r.json()["error"]), (404, "no such server in this pool"), str(r))
        r = self.admin.post(beat_path("e1"), headers=JSON,
                            body=json.dumps({"address": e1.addr, "weight": 2}))
        self.assertEqual(r.status, 201, str(r))
        self.assertEqual((r.json()["name"], r.json()["weight"], r.json()["ephemeral"]),
                         ("e1", 2, True), r.json())
        self.admin.wait_server("web", "e1", lambda s: s["state"] == "up", WAIT, "e1 back")
        # A second heartbeat with the address is a heartbeat.
        r = self.admin.post(beat_path("e1"), headers=JSON, body=json.dumps({"address": e1.addr}))
        self.assertEqual(r.status, 200, str(r))
        # One from another address under its name (an instance that came
        # back elsewhere) must not keep the old address alive.
        e2 = self.echo("e2")
        moved = json.dumps({"address": e2.addr})
        r = self.admin.post(beat_path("e1"), headers=JSON, body=moved)
        self.assertEqual((r.status, r.json()["error"]),
                         (409, f"the server e1 has address {e1.addr}: another address replaces "
                               "it once its heartbeats stop for heartbeat_ttl, or DELETE it"),
                         str(r))
        # Once the old address is silent for heartbeat_ttl, the new one
        # replaces it (a pod back with a new IP): 201, the old one drains.
        lb.wait_event("server_down", timeout=WAIT, count=2, server="e1")
        r = self.admin.post(beat_path("e1"), headers=JSON, body=moved)
        self.assertEqual((r.status, r.json()["address"], r.json()["ephemeral"]),
                         (201, e2.addr, True), str(r))
        self.admin.wait_server("web", "e1", lambda s: s["state"] == "up", WAIT,
                               "e1 up at its new address")
        before = e2.accepted
        with harness.connect(self.fport) as c:
            c.sendall(b"moved\n")
            self.assertEqual(harness.read_line(c), b"moved\n")
        self.assertEqual(e2.accepted, before + 1, "the client reached the new address")

    def test_refusals(self):
        """Ephemeral needs the pool's heartbeat_ttl (409), and bodies that
        say something else are 400 with what is wrong."""
        b = self.named("b")
        keys = {k: v for k, v in POOL_KEYS.items()
                if k not in ("heartbeat_ttl", "ephemeral_delete_after")}
        self.start(keys, servers=[("b", b.port)])
        for r in (self.register("e1", b.addr),
                  self.admin.post(beat_path("e1"), headers=JSON,
                                  body=json.dumps({"address": b.addr}))):
            self.assertEqual((r.status, r.json()["error"]),
                             (409, "ephemeral servers need the pool's heartbeat_ttl"), str(r))
        r = self.register("e1", b.addr, ephemeral="yes")
        self.assertEqual((r.status, r.json()["error"]),
                         (400, "a flag field is not true or false"), str(r))
        r = self.admin.post(beat_path("b"), headers=JSON, body=json.dumps({"weight": 3}))
        self.assertEqual((r.status, r.json()["error"]),
                         (400, "weight goes with address (to register the server)"), str(r))
        r = self.register("e2", b.addr, ephemeral=False)
        self.assertEqual(r.status, 409, str(r))                 # its address is b's
        self.assertEqual(self.srv("b")["ephemeral"], False)

    def test_the_guard_keeps_the_last(self):
        """Every instance goes silent at once (a partition between them and
        lb is likelier than the loss of them all): with min_servers = 1 the
        guard holds one in rotation, and while it holds one no instance of
        the pool is deleted (a floor that is a share of the pool would
        shrink with each deletion). Once one heartbeats again the guard lets
        go, and the silent one is deleted."""
        es = [self.echo(f"e{i}") for i in range(2)]
        lb = self.start(dict(POOL_KEYS, min_servers=1))
        for i, e in enumerate(es):
            self.assertEqual(self.register(f"e{i}", e.addr).status, 201)
        beaters = [Beater(self.admin_port, f"e{i}") for i in range(2)]
        for b in beaters:
            self.addCleanup(b.stop)
        self.admin.wait_stats(lambda st: find_pool(st, "web")["in_rotation"] == 2, WAIT,
                              "both in rotation")
        for b in beaters:
            b.stop()
        held = lb.wait_event("ephemeral_delete_held", timeout=WAIT, count=2)
        self.assertEqual({e["server"] for e in held}, {"e0", "e1"})
        st = self.admin.stats()
        self.assertEqual(find_pool(st, "web")["servers_total"], 2, st)
        kept = [s for s in find_pool(st, "web")["servers"] if s["guarded"]]
        self.assertEqual(len(kept), 1, st)
        self.assertEqual((kept[0]["state"], kept[0]["delete_in_s"]), ("up", 0), kept[0])
        with harness.connect(self.fport) as c:
            c.sendall(b"x\n")
            self.assertEqual(harness.read_line(c), b"x\n")
        self.assertEqual(lb.events("ephemeral_delete"), [])
        # The other one heartbeats again: in rotation once its probe passes,
        # the guard lets go, and the held one is deleted at the next sweep.
        other = ({"e0", "e1"} - {kept[0]["name"]}).pop()
        back = Beater(self.admin_port, other)
        self.addCleanup(back.stop)
        gone = lb.wait_event("ephemeral_delete", timeout=WAIT)[0]
        self.assertEqual(gone["server"], kept[0]["name"], gone)
        self.admin.wait_stats(lambda st: [s["name"] for s in find_pool(st, "web")["servers"]]
                              == [other], WAIT, f"{other} alone")
        self.assertEqual(len(lb.events("ephemeral_delete_held")), 2)

    def test_reload_takeover_and_state_file(self):
        """An ephemeral server outlives a reload and lb -x with no change of
        state; the new process restarts its heartbeat clock; the state
        file does not hold it."""
        e1, f = self.echo("e1"), self.named("f")
        tmp = harness.make_tmpdir()
        sock, state = os.path.join(tmp, "lb.sock"), os.path.join(tmp, "lb.state")
        keys = dict(POOL_KEYS)
        text, admin_port, fports = make_admin_config(
            [("web", [("f", f.port)], keys)], control_socket=sock, state_file=state,
            shutdown_timeout="5s")
        old = self.start_lb(text)
        self.admin, self.admin_port = Admin(admin_port), admin_port
        self.assertEqual(self.register("e1", e1.addr).status, 201)
        beater = Beater(admin_port, "e1")
        self.addCleanup(beater.stop)
        self.admin.wait_server("web", "e1", lambda s: s["state"] == "up", WAIT, "e1 up")
        beat_f = Beater(admin_port, "f")
        self.addCleanup(beat_f.stop)

        os.kill(old.pid, signal.SIGHUP)
        old.wait_event("reload", timeout=WAIT, count=1)
        s = self.srv("e1")
        self.assertEqual((s["state"], s["ephemeral"]), ("up", True), s)

        last = beater.stop()
        new = self.start_lb(text, args=["-x"])
        went = event_time(new.wait_event("takeover", timeout=WAIT, role="new")[0])
        old.wait_exit()
        s = self.srv("e1")
        self.assertEqual((s["state"], s["ephemeral"], s["source"]), ("up", True, "api"), s)
        down = new.wait_event("server_down", timeout=WAIT, server="e1")[0]
        # its clock restarted at the takeover: a whole TTL from then, not
        # from its last heartbeat to the old process
        self.assertGreaterEqual(event_time(down) - went, TTL - TIMER_TICK - 0.01,
                                f"out {event_time(down) - last:.2f} s after its last heartbeat")
        self.assertEqual(new.events("server_up", server="e1"), [])
        beat_f.stop()
        new.stop()
        with open(state) as fh:
            saved = [line.split()[1:3] for line in fh if line.startswith("server ")]
        self.assertEqual(saved, [["web", "f"]])


if __name__ == "__main__":
    harness.main()
