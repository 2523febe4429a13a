"""Outlier detection from live traffic (pool key outlier, first_byte_timeout)
against real servers: the ports of one hc_backend.py process, each switched
at run time to answer, hang (accept, read, never answer), reset (RST
without an answer), answer slowly, or refuse connects.

The contract: errors of client traffic are counted per server by kind
(connect_refused, connect_timeout, reset before the server's first byte,
no_first_byte: the client sent data and the server nothing for
first_byte_timeout); errors:N of them within window eject the server for
eject, doubled on each repeat up to 10x; an ejected server is out of
rotation (its connections drain) with the reason "outlier: 3 no first byte
in 2 s", and only its time brings it back, not a passing probe; at most
max_eject of the pool is ejected at once, and min_servers' guard holds the
least-bad server when every one is ejected. Each ejection is logged
(outlier_eject), counted (lb_server_ejections_total{pool,server,kind}) and
shown in /stats ("outlier").

The TCP check every server has here passes for a hung, reset or slow server
(the kernel completes the handshake): only the live traffic sees them.

test_removal_windows measures, for a crash, a hang and a slow server, how
long after the fault the server leaves rotation by its HTTP probe alone
(lb A) and by live traffic alone (lb B), both in front of the same servers
in one run, and prints the table the README quotes."""

import socket
import threading
import time

import harness
from admin_client import find_pool, find_server, start_lb
from harness import HOST, LbTestCase, event_time, wait_for

POOL = "web"
NAMES = ("s0", "s1", "s2", "s3")
FBT_MS = 200                    # first_byte_timeout
ERRORS = 3                      # errors:N
EJECT_MS = 1000                 # eject: the first ejection
WINDOW = "2s"
CLIENTS = 8                     # concurrent clients of the load
CLIENT_TIMEOUT = 0.6            # a client gives up on a silent server after this
# The tick that ends an ejection runs every 100 ms; with a neighbour test
# and the sanitizers, main may run it a little later.
TICK_SLACK_MS = 250
# Ejected within first_byte_timeout x N of live traffic (the contract),
# plus what a loaded machine adds to the worker's timer and main's mailbox.
HANG_LIMIT_MS = FBT_MS * ERRORS + 300
# The probe of lb A in test_removal_windows: I, K, T; its window.
PROBE_I_MS, PROBE_K, PROBE_T_MS = 1000, 2, 500
WAIT = 10.0


def outlier_keys(max_eject="50%", errors=ERRORS, eject_ms=EJECT_MS):
    return {"check": "tcp", "check_interval": "300ms", "check_timeout": "200ms",
            "rise": 1, "fall": 1,
            "outlier": f"errors:{errors}, window:{WINDOW}, eject:{eject_ms}ms, "
                       f"max_eject:{max_eject}",
            "first_byte_timeout": f"{FBT_MS}ms"}


class Load:
    """CLIENTS threads, each sending one HTTP request at a time through lb
    and waiting at most CLIENT_TIMEOUT for its answer, until stop() (or
    `seconds`, a bound). Counts answers by backend port, and the requests
    that got none, with the time each was sent."""

    def __init__(self, tc, port, seconds=30.0):
        self.port = port
        self.answers = {}
        self.failed = 0
        self.failed_sent = []       # time.time() of each request that got nothing
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.deadline = time.monotonic() + seconds
        self.threads = [tc.start_thread(self.run, name=f"load{i}") for i in range(CLIENTS)]

    def run(self):
        while not self.done.is_set() and time.monotonic() < self.deadline:
            sent = time.time()
            got = harness.http_via(self.port, timeout=CLIENT_TIMEOUT)
            with self.lock:
                if got is None:
                    self.failed += 1
                    self.failed_sent.append(sent)
                else:
                    self.answers[got] = self.answers.get(got, 0) + 1

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()


class OutlierTest(LbTestCase):

    def start(self, names=NAMES, **keys):
        self.b = self.hc_backend(count=len(names))
        self.port = dict(zip(names, self.b.ports))
        lb = start_lb(self, [(POOL, [(n, self.b.addr(self.port[n])) for n in names],
                              keys or outlier_keys())])
        self.lbi = lb
        self.fport = lb.fports[f"fe_{POOL}"]
        for n in names:
            lb.admin.wait_server(POOL, n, lambda s: s["state"] == "up", WAIT, "up")
        return lb

    def srv(self, name):
        return find_server(self.lbi.admin.stats(), POOL, name)

    def metric(self, name, **labels):
        text = self.lbi.admin.get("/metrics").body.decode()
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line
                                                   for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no {name}{{{want}}} in /metrics")

    def test_hung_server_ejected_and_doubled(self):
        """A server that accepts and never answers while clients send: out
        within first_byte_timeout x N, whatever its passing TCP probe says,
        back when its eject time is over (not earlier), out again for twice
        as long."""
        lb = self.start()
        t0 = self.b.mode(self.port["s0"], "hang")
        load = Load(self, self.fport)
        self.addCleanup(load.stop)
        ev = lb.wait_event("outlier_eject", timeout=WAIT, server="s0")[0]
        took_ms = (event_time(ev) - t0) * 1000
        print(f"\nhung server ejected {took_ms:.0f} ms after the hang "
              f"(first_byte_timeout {FBT_MS} ms x errors {ERRORS} = {FBT_MS * ERRORS} ms)")
        self.assertLessEqual(took_ms, HANG_LIMIT_MS, ev)
        self.assertEqual(ev["reason"], f"outlier: {ERRORS} no first byte in 2 s", ev)
        self.assertEqual(ev["kind"], "no_first_byte", ev)
        self.assertEqual(ev["eject_ms"], str(EJECT_MS), ev)
        down = lb.wait_event("server_down", server="s0")[0]
        self.assertEqual(down["reason"], ev["reason"], down)

        # Out, while its TCP probe passes on: a probe does not bring it back.
        st = self.srv("s0")
        self.assertFalse(st["state"] == "up", st)
        self.assertTrue(st["outlier"]["ejected"], st)
        self.assertEqual(st["outlier"]["reason"], ev["reason"], st)
        self.assertLessEqual(st["outlier"]["back_in_s"], EJECT_MS / 1000, st)
        self.assertEqual(st["outlier"]["ejections"]["no_first_byte"], 1, st)
        self.assertGreaterEqual(st["outlier"]["errors"]["no_first_byte"], ERRORS, st)
        self.assertEqual(st["health"], "up", st)
        checks = st["checks_total"]
        lb.admin.wait_server(POOL, "s0", lambda s: s["checks_total"] >= checks + 2
                             and s["last_check"]["result"] == "passed", WAIT,
                             "two more passed probes")
        self.assertFalse([e for e in lb.events("server_up", server="s0")
                          if e.get("reason") != "outlier: eject time over"],
                         "a passing probe brought it back before its time")
        self.assertEqual(self.metric("lb_server_ejections_total", pool=POOL, server="s0",
                                     kind="no_first_byte"), 1)
        self.assertEqual(self.metric("lb_server_ejected", pool=POOL, server="s0"), 1)

        # Back when the time is over, and out again at once for 2x.
        back = lb.wait_event("outlier_return", timeout=WAIT, server="s0")[0]
        out_ms = int(back["ejected_ms"])
        self.assertGreaterEqual(out_ms, EJECT_MS, back)
        self.assertLessEqual(out_ms, EJECT_MS + TICK_SLACK_MS, back)
        ev2 = lb.wait_event("outlier_eject", timeout=WAIT, count=2, server="s0")
        ev2 = lb.events("outlier_eject", server="s0")[1]
        self.assertEqual(ev2["eject_ms"], str(2 * EJECT_MS), ev2)
        back2 = lb.wait_event("outlier_return", timeout=WAIT, count=2, server="s0")
        back2 = lb.events("outlier_return", server="s0")[1]
        out2_ms = int(back2["ejected_ms"])
        self.assertGreaterEqual(out2_ms, 2 * EJECT_MS, back2)
        self.assertLessEqual(out2_ms, 2 * EJECT_MS + TICK_SLACK_MS, back2)
        print(f"out {out_ms} ms, then {out2_ms} ms (eject {EJECT_MS} ms, doubled)")
        load.stop()
        # While it was out, no client was sent to it: none of the requests
        # sent in that time went unanswered. 50 ms at each end: for the
        # decision to reach the workers, and for a request sent just before
        # the return to be accepted just after it (under TSan).
        lost = [t for t in load.failed_sent
                if event_time(ev) + 0.05 <= t < event_time(back) - 0.05]
        self.assertFalse(lost, f"{len(lost)} requests sent while s0 was ejected got no answer")
        self.assertEqual(len(set(load.answers)), 3, load.answers)

    def test_reset_and_refused_kinds(self):
        """A server that resets before its first byte, and one that refuses
        connects: each ejected with its own kind (no probe: it would take the
        refusing one out first)."""
        lb = self.start(**dict(outlier_keys(), check="none"))
        self.b.mode(self.port["s0"], "reset")
        self.b.crash(self.port["s1"])
        load = Load(self, self.fport)
        self.addCleanup(load.stop)
        ev0 = lb.wait_event("outlier_eject", timeout=WAIT, server="s0")[0]
        ev1 = lb.wait_event("outlier_eject", timeout=WAIT, server="s1")[0]
        load.stop()
        self.assertEqual(ev0["kind"], "reset", ev0)
        self.assertEqual(ev0["reason"], f"outlier: {ERRORS} resets before the first byte in 2 s",
                         ev0)
        self.assertEqual(ev1["kind"], "connect_refused", ev1)
        self.assertEqual(self.metric("lb_server_ejections_total", pool=POOL, server="s1",
                                     kind="connect_refused"), 1)
        self.assertGreaterEqual(self.metric("lb_server_live_errors_total", pool=POOL,
                                            server="s0", kind="reset"), ERRORS)
        self.assertEqual(self.metric("lb_server_ejections_total", pool=POOL, server="s2",
                                     kind="reset"), 0)

    def test_max_eject_caps(self):
        """Three of four servers hang, max_eject:50%: two are ejected, the
        third is refused (logged once, counted) and stays in rotation."""
        lb = self.start(**outlier_keys(max_eject="50%", eject_ms=30000))
        for n in ("s0", "s1", "s2"):
            self.b.mode(self.port[n], "hang")
        load = Load(self, self.fport)
        self.addCleanup(load.stop)
        refused = lb.wait_event("outlier_eject_refused", timeout=WAIT)[0]
        self.assertEqual(refused["ejected"], "2/4", refused)
        self.assertEqual(refused["max_eject"], "50%", refused)
        load.stop()
        ejected = {e["server"] for e in lb.events("outlier_eject")}
        self.assertEqual(len(ejected), 2, ejected)
        self.assertNotIn("s3", ejected)
        left = ({"s0", "s1", "s2"} - ejected).pop()
        self.assertEqual(refused["server"], left, refused)
        st = self.srv(left)
        self.assertEqual(st["state"], "up", st)
        self.assertFalse(st["outlier"]["ejected"], st)
        self.assertGreaterEqual(st["outlier"]["refused_by_max_eject"], 1, st)
        self.assertEqual(len(lb.events("outlier_eject_refused", server=left)), 1)
        self.assertEqual(find_pool(lb.admin.stats(), POOL)["in_rotation"], 2)

    def test_guard_holds_every_ejected(self):
        """Both servers come to reset every client, s0 first, max_eject:100%,
        min_servers = 1: both are ejected, and the guard holds the later
        failure, s1, in rotation (as it holds failing probes)."""
        keys = dict(outlier_keys(max_eject="100%", eject_ms=30000), min_servers=1)
        lb = self.start(names=("s0", "s1"), **keys)
        load = Load(self, self.fport)
        self.addCleanup(load.stop)
        self.b.mode(self.port["s0"], "reset")
        lb.wait_event("outlier_eject", timeout=WAIT, server="s0")
        self.assertFalse(lb.events("guard_hold"))
        self.b.mode(self.port["s1"], "reset")
        lb.wait_event("outlier_eject", timeout=WAIT, server="s1")
        hold = lb.wait_event("guard_hold", timeout=WAIT)[0]
        load.stop()
        self.assertEqual(hold["server"], "s1", hold)
        pool = find_pool(lb.admin.stats(), POOL)
        self.assertEqual(pool["in_rotation"], 1, pool)
        self.assertTrue(pool["guard_active"], pool)
        held = self.srv("s1")
        self.assertTrue(held["guarded"] and held["outlier"]["ejected"], held)
        self.assertEqual(held["state"], "up", held)
        self.assertNotEqual(self.srv("s0")["state"], "up")


class RemovalWindowsTest(LbTestCase):
    """One table: crash, hang, slow; the probe's removal against live
    traffic's, two lbs in front of the same servers at once."""

    def measure(self, fault):
        b = self.hc_backend(count=2)
        servers = [("s0", b.addr(b.ports[0])), ("s1", b.addr(b.ports[1]))]
        probe = {"check": "http", "check_interval": f"{PROBE_I_MS}ms",
                 "check_timeout": f"{PROBE_T_MS}ms", "rise": 1, "fall": PROBE_K,
                 }
        lb_a = start_lb(self, [(POOL, servers, probe)])
        lb_b = start_lb(self, [(POOL, servers, dict(outlier_keys(), check="none"))])
        for lb in (lb_a, lb_b):
            lb.admin.wait_server(POOL, "s0", lambda s: s["state"] == "up", WAIT, "up")
        # A second probe of s0 passed: its next one is a whole interval
        # away, so the fault's removal by probe spans the full window.
        lb_a.admin.wait_server(POOL, "s0", lambda s: s["checks_total"] >= 2, WAIT,
                               "a second probe")
        if fault == "crash":
            t0 = b.crash(b.ports[0])
        else:
            t0 = b.mode(b.ports[0], "hang" if fault == "hang" else "slow:1500")
        loads = [Load(self, lb.fports[f"fe_{POOL}"]) for lb in (lb_a, lb_b)]
        for load in loads:
            self.addCleanup(load.stop)
        out = []
        for lb, event in ((lb_a, "server_down"), (lb_b, "outlier_eject")):
            ev = lb.wait_event(event, timeout=WAIT, server="s0")[0]
            out.append(((event_time(ev) - t0) * 1000, ev.get("reason")))
        for load in loads:
            load.stop()
        return out

    def test_removal_windows(self):
        window = ((PROBE_K - 1) * PROBE_I_MS, PROBE_K * PROBE_I_MS + PROBE_T_MS)
        rows = []
        for fault in ("crash", "hang", "slow"):
            (probe_ms, probe_why), (live_ms, live_why) = self.measure(fault)
            rows.append((fault, probe_ms, live_ms, live_why))
            self.assertGreaterEqual(probe_ms, window[0] - 50, (fault, probe_why))
            self.assertLessEqual(probe_ms, window[1] + harness.HC_SLACK * 1000,
                                 (fault, probe_why))
            limit = 300 if fault == "crash" else HANG_LIMIT_MS
            self.assertLessEqual(live_ms, limit, (fault, live_why))
            self.assertLess(live_ms, probe_ms, fault)
        print(f"\nremoval after the fault, ms (probe: http, I={PROBE_I_MS} ms, K={PROBE_K}, "
              f"T={PROBE_T_MS} ms, window {window[0]}..{window[1]}; live: errors:{ERRORS}, "
              f"first_byte_timeout {FBT_MS} ms, {CLIENTS} clients)")
        for fault, probe_ms, live_ms, why in rows:
            print(f"  {fault:6s} probe {probe_ms:6.0f}   live {live_ms:6.0f}   ({why})")


if __name__ == "__main__":
    harness.main()
