"""Nothing on the admin port waits behind a reload. POST /reload is answered
when its reload ends, warm-up included; meanwhile heartbeats, GET /ready
and GET /stats are answered at once. The reload is held open by a slow
warm-up: a blue/green switch whose new server's first probe takes 2 s (its
HTTP check answers after 2 s), so the reload keeps the old server serving
until that probe is back. Requests asked while a reload runs are answered
together by the one reload after it, each with that reload's outcome.
Real lb, real backends, real sockets."""

import json
import signal
import threading
import time

import harness
from harness import IO_TIMEOUT, LbTestCase, free_port, wait_for
from test_reload_traffic import config_text, start_lb, write_atomic

PROBE_MS = 2000
# The contract: answered within 50 ms while a reload waits, where the
# regression waited for the whole reload (2 s). On 2 shared cores the
# client itself is sometimes descheduled (a 114 ms /stats was seen once in
# the optimised build with two tests running at once, every other answer
# under 18 ms): at most 2% of the answers may pass 50 ms, none 500 ms.
ANSWER_BOUND = 0.05
OUTLIER_SHARE = 0.02
OUTLIER_BOUND = 0.5

class ReloadAsyncTest(LbTestCase):
    def text(self, servers):
        keys = {"check": "http", "check_port": self.hc.ports[0], "check_path": "/health",
                "check_interval": "3s", "check_timeout": "3s", "rise": 1, "fall": 1,
                "heartbeat_ttl": "30s"}
        return config_text(self.admin_port, [("fe", self.port, "p")], [("p", servers, keys)])

    def setUp(self):
        super().setUp()
        self.admin_port, self.port = free_port(), free_port()
        self.hc = self.hc_backend(count=1)

    def post_reload(self, lb, out):
        def run():
            r = lb.admin.post("/reload", timeout=IO_TIMEOUT)
            out.append((time.monotonic(), r))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def test_answers_while_a_reload_warms(self):
        lb = start_lb(self, self.text([("b1", self.named("b1"))]), self.admin_port)
        lb.admin.wait_server("p", "b1", lambda s: s["health"] == "up", IO_TIMEOUT, "b1 up")
        self.hc.mode(self.hc.ports[0], f"slow:{PROBE_MS}")
        write_atomic(lb.config_path, self.text([("g1", self.named("g1"))]))

        first, later = [], []
        t_asked = time.monotonic()
        threads = [self.post_reload(lb, first)]
        lb.wait_event("reload_warming", timeout=IO_TIMEOUT)
        # two more while it warms: one reload after it answers both
        threads += [self.post_reload(lb, later), self.post_reload(lb, later)]

        beat = json.dumps({"status": "pass"})
        samples = []                    # (started, kind, seconds)
        rounds = 0
        while not first and time.monotonic() - t_asked < IO_TIMEOUT and rounds < 1000:
            rounds += 1
            for kind in ("heartbeat", "ready", "stats"):
                t0 = time.monotonic()
                if kind == "heartbeat":
                    r = lb.admin.post("/pools/p/servers/g1/heartbeat", body=beat,
                                      headers={"Content-Type": "application/json"})
                    self.assertEqual(r.status, 200, str(r))
                else:
                    r = lb.admin.get(f"/{kind}")
                    self.assertIn(r.status, (200, 503), str(r))
                samples.append((t0, kind, r.elapsed))
            # paced (not a wait for anything): a client that takes both
            # cores would measure its own scheduling, not lb's answers
            time.sleep(0.01)
        for t in threads:
            t.join(IO_TIMEOUT)

        t_done, r = first[0]
        self.assertEqual((r.status, r.json()), (200, {"reloaded": True, "generation": 2}), str(r))
        # held open by the warm-up: the new server's 2 s probe
        self.assertGreater(t_done - t_asked, PROBE_MS / 1000 * 0.75, "the reload was not held")
        ev = lb.wait_event("reload", generation="2")[0]
        self.assertGreaterEqual(int(ev["warm_ms"]), PROBE_MS * 0.75, ev)
        # every request asked while the reload was open
        times = {kind: [sec for t0, k, sec in samples if k == kind and t0 < t_done]
                 for kind in ("heartbeat", "ready", "stats")}
        for kind, ts in times.items():
            self.assertGreater(len(ts), 0, f"{kind}: none asked during the reload")
            print(f"\n{kind}: {len(ts)} answers during the reload, max {max(ts) * 1000:.1f} ms, "
                  f"median {sorted(ts)[len(ts) // 2] * 1000:.1f} ms")
            self.assertLess(max(ts), OUTLIER_BOUND,
                            f"{kind} waited behind the reload: {max(ts) * 1000:.0f} ms")
            late = [t for t in ts if t >= ANSWER_BOUND]
            self.assertLessEqual(len(late), len(ts) * OUTLIER_SHARE,
                                 f"{kind}: {len(late)} of {len(ts)} answers over "
                                 f"{ANSWER_BOUND * 1000:.0f} ms")
        # the two asked meanwhile: one reload after it, both answered by it
        self.assertEqual([(r.status, r.json()) for _, r in later],
                         [(200, {"reloaded": True, "generation": 3})] * 2, [str(r) for _, r in later])
        self.assertEqual(len(lb.events("reload")), 2, lb.events("reload"))

    def raw_reload(self):
        s = harness.connect(self.admin_port)
        s.sendall(f"POST /reload HTTP/1.1\r\nHost: {harness.HOST}\r\n"
                  "Content-Length: 0\r\n\r\n".encode())
        return s

    def test_clients_gone_before_their_answer(self):
        # One client closes while its reload warms: its answer is written
        # to a closed connection. Another still waits when lb stops: its
        # request is freed at exit. The sanitized builds check that neither
        # is used after it is freed nor leaked (lb's exit status).
        lb = start_lb(self, self.text([("b1", self.named("b1"))]), self.admin_port)
        lb.admin.wait_server("p", "b1", lambda s: s["health"] == "up", IO_TIMEOUT, "b1 up")
        self.hc.mode(self.hc.ports[0], f"slow:{PROBE_MS}")
        write_atomic(lb.config_path, self.text([("g1", self.named("g1"))]))
        gone = self.raw_reload()
        lb.wait_event("reload_warming", timeout=IO_TIMEOUT)
        gone.close()
        lb.wait_event("reload", generation="2", timeout=IO_TIMEOUT)
        self.assertEqual(lb.admin.get("/healthz").status, 200)
        # a reload held again (a new server pending), and a client waiting
        self.hc.mode(self.hc.ports[0], f"slow:{PROBE_MS}")
        write_atomic(lb.config_path, self.text([("g2", self.named("g2"))]))
        waiting = self.raw_reload()
        lb.wait_event("reload_warming", timeout=IO_TIMEOUT, count=2)
        lb.stop(signal.SIGINT)          # exits 0 (checked at teardown)
        waiting.close()

    def read_answer(self, s):
        """What the server sent on s until it closed (IO_TIMEOUT bound)."""
        s.settimeout(IO_TIMEOUT)
        data = b""
        deadline = time.monotonic() + IO_TIMEOUT
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        return data

    def test_waiting_reloads_answered_at_stop(self):
        # Two POST /reload wait when SIGINT comes: the one whose reload
        # warms, and one asked meanwhile for the reload after it. Each gets
        # an HTTP answer saying lb is stopping before its connection closes
        # (the regression closed them with no answer: the answers reached
        # an admin port already stopped).
        lb = start_lb(self, self.text([("b1", self.named("b1"))]), self.admin_port)
        lb.admin.wait_server("p", "b1", lambda s: s["health"] == "up", IO_TIMEOUT, "b1 up")
        self.hc.mode(self.hc.ports[0], f"slow:{PROBE_MS}")
        write_atomic(lb.config_path, self.text([("g1", self.named("g1"))]))
        warming = self.raw_reload()
        lb.wait_event("reload_warming", timeout=IO_TIMEOUT)
        queued = self.raw_reload()
        # a request on another connection, answered after the admin port
        # read this one: main has its order (400 from the reload's answer)
        # or has ended its loop (503 from the admin port's own)
        wait_for(lambda: lb.admin.get("/healthz").status == 200, IO_TIMEOUT, "healthz")
        lb.stop(signal.SIGINT)          # exits 0 (checked at teardown)
        for name, s in (("warming", warming), ("queued", queued)):
            data = self.read_answer(s)
            head, _, body = data.partition(b"\r\n\r\n")
            self.assertRegex(head, rb"^HTTP/1\.1 (400|503) ", f"{name}: {data!r}")
            self.assertEqual(json.loads(body), {"error": "lb is stopping"}, f"{name}: {data!r}")

    def test_member_change_outlives_a_broken_file(self):
        # A member added while a reload warms is carried by the reload
        # after it, which reads the file: broken by then (a SIGHUP asked
        # for it). The add is not the file's to refuse: it is applied by a
        # members reload and answered 201; the regression answered 500 with
        # the file's error and still applied the add at the next reload.
        lb = start_lb(self, self.text([("b1", self.named("b1"))]), self.admin_port,
                      allowed_errors={"reload_failed"})
        lb.admin.wait_server("p", "b1", lambda s: s["health"] == "up", IO_TIMEOUT, "b1 up")
        self.hc.mode(self.hc.ports[0], f"slow:{PROBE_MS}")
        write_atomic(lb.config_path, self.text([("g1", self.named("g1"))]))
        first, added = [], []
        threads = [self.post_reload(lb, first)]
        lb.wait_event("reload_warming", timeout=IO_TIMEOUT)
        write_atomic(lb.config_path, "[global\n")
        lb.proc.send_signal(signal.SIGHUP)
        api1 = self.named("api1")

        def add():
            r = lb.admin.post("/pools/p/servers", timeout=IO_TIMEOUT,
                              body=json.dumps({"name": "api1", "address": api1.addr}),
                              headers={"Content-Type": "application/json"})
            added.append(r)
        threads.append(threading.Thread(target=add, daemon=True))
        threads[-1].start()
        for t in threads:
            t.join(IO_TIMEOUT)
        self.assertEqual(first[0][1].status, 200, str(first[0][1]))
        self.assertEqual(len(lb.events("reload_failed")), 1, lb.events("reload_failed"))
        r = added[0]
        self.assertEqual(r.status, 201, str(r))
        self.assertEqual(r.json()["name"], "api1", str(r))
        stats = lb.admin.get("/stats").json()
        names = [sv["name"] for pool in stats["pools"] if pool["name"] == "p"
                 for sv in pool["servers"]]
        self.assertIn("api1", names, stats)


if __name__ == "__main__":
    harness.main()
