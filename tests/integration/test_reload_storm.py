"""SIGHUP storms: 50 signals in a burst, the file changing between them,
each signal caught by lb before the next is sent. Signals that arrive during
a reload coalesce into one more reload after it, so the burst makes a
handful of reloads, not 50: once the last signal is caught, at most the
reload under way and one more end. The file written last is the one that
ends up applied, no reload fails (each file is replaced atomically), clients
going through lb meanwhile never fail, and lb does not crash. A reload asked
for while lb shuts down is refused."""

import os
import signal
import threading
import time

import admin_client
import harness
from harness import IO_TIMEOUT, LbTestCase, fetch_name, free_port, wait_for
from test_reload_traffic import (config_text, post_reload, servers_of, sighup_fail, start_lb,
                                 write_atomic)

SIGNALS = 50
# Servers of a pool nobody uses, so that each reload takes a while (about
# 10 ms; the burst sends a signal every fraction of a millisecond) and most
# signals arrive during a reload.
BULK = 4000


def sighup_pending(pid):
    """True while a SIGHUP sent to process pid waits in its shared pending
    set, not yet taken by a thread (lb's main thread takes it: the others
    block it). A second SIGHUP sent meanwhile would merge with it in the
    kernel, so the burst waits for each to be taken: a lb that reloaded once
    per signal would see all 50."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("ShdPnd:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGHUP - 1)))
    raise AssertionError(f"no ShdPnd in /proc/{pid}/status")


class ReloadStormTest(LbTestCase):

    def test_sighup_storm_applies_the_last_file(self):
        web = {n: self.named(n) for n in ("web1", "web2", "web3")}
        admin_port, port = free_port(), free_port()
        bulk = [(f"x{i}", f"127.0.0.1:{20000 + i}") for i in range(BULK)]

        def text(i):
            """Version i: web1 has weight i, and web2 (even i) or web3
            (odd i) is the second server."""
            servers = [("web1", web["web1"], i),
                       ("web2", web["web2"]) if i % 2 == 0 else ("web3", web["web3"])]
            return config_text(admin_port, [("fe", port, "web")],
                               [("web", servers, {}), ("bulk", bulk, {})])

        lb = start_lb(self, text(1), admin_port)
        # Every version is written beforehand, beside the file, so that the
        # burst only has to rename(2) each over it (atomic, and fast: the
        # burst is over before a few reloads are).
        versions = {}
        for i in range(2, SIGNALS + 2):
            versions[i] = os.path.join(lb.dir, f".storm-{i}.ini")
            with open(versions[i], "w") as f:
                f.write(text(i))
        errors, answers = [], []
        stop = threading.Event()

        def clients():
            while not stop.is_set():
                try:
                    answers.append(fetch_name(port, timeout=5))
                except (AssertionError, OSError) as e:
                    errors.append(repr(e))
        t = harness.Thread(clients)
        t.start()
        self.addCleanup(t.join, 10)
        self.addCleanup(stop.set)

        t_first = time.time()           # wall clock, as lb's ts=
        t0 = time.monotonic()
        for i in range(2, SIGNALS + 2):
            os.replace(versions[i], lb.config_path)
            os.kill(lb.pid, signal.SIGHUP)
            deadline = time.monotonic() + IO_TIMEOUT
            while sighup_pending(lb.pid):
                self.assertLess(time.monotonic(), deadline, f"lb did not take SIGHUP #{i - 1}")
                time.sleep(0.0001)      # a signal is taken within microseconds
        t_last = time.time()            # every signal has been taken
        t_storm = time.monotonic() - t0
        last = SIGNALS + 1
        second = "web2" if last % 2 == 0 else "web3"
        want = {"web1": last, second: 1}
        seen = [None]

        def applied(st):
            seen[0] = {n: s["weight"] for n, s in servers_of(st, "web").items()}
            return seen[0] == want
        wait_for(lambda: applied(lb.admin.stats()), 30.0,
                 lambda: f"the last file (weights {want}) to be applied; pool web has "
                 f"{seen[0]}\n{lb.log_tail()}")
        t_applied = time.monotonic()

        def after_last():
            """The reloads that ended after the last signal was taken."""
            return [e for e in lb.events("reload") if harness.event_time(e) > t_last]

        def duration(e):
            return float(e["duration_ms"]) / 1000

        # Watched for a while after the last file is applied (5 reload
        # durations, at least 1 s): a reload still queued would end within
        # that.
        window = max(1.0, 5 * max(duration(e) for e in lb.events("reload")))
        while time.monotonic() < t_applied + window and len(after_last()) <= 2:
            time.sleep(0.05)            # watching for reloads that should not come
        late = after_last()
        stop.set()
        t.join(timeout=10)
        evs = lb.events("reload")
        during = [e for e in evs if harness.event_time(e) <= t_last]
        # The reloads that ended before the last signal was taken ran within
        # the burst, one after the other: no more of them than fit in it
        # (5 ms for the rounding of ts= and duration_ms=).
        shortest = min(duration(e) for e in evs)
        fit = int((t_last - t_first + 0.005) / shortest)
        print(f"\n{SIGNALS} SIGHUPs in {t_storm * 1000:.0f} ms, each taken before the next: "
              f"{len(evs)} reloads ({len(during)} ended during the burst, at most {fit} fit; "
              f"{len(late)} after it) of {shortest * 1000:.1f}.."
              f"{max(duration(e) for e in evs) * 1000:.1f} ms; {len(answers)} clients "
              f"meanwhile, {len(errors)} failed")
        # The test's own check (a burst takes tens of ms), with room for a
        # loaded machine: the signals must still come many per reload.
        self.assertLess(t_storm, 3.0, "the storm was not a storm")
        # Coalescing: whatever lb was doing when the last signal came (a
        # reload, or about to start one), at most two reloads end after it:
        # the one under way and one more that reads the last file. Without
        # coalescing, every signal taken during a reload queues one.
        self.assertLessEqual(len(late), 2,
                             f"{len(late)} reloads ended after the last SIGHUP was taken: "
                             f"the signals did not coalesce (first: {late[0]['ts']}, last: "
                             f"{late[-1]['ts']}; last signal taken by {t_last:.3f})"
                             if late else "")
        self.assertLessEqual(len(during), fit,
                             f"{len(during)} reloads of {shortest * 1000:.1f} ms or more ended "
                             f"within a burst of {(t_last - t_first) * 1000:.0f} ms")

        st = lb.admin.stats()
        r = st["reloads"]
        self.assertTrue(applied(st), f"pool web: {seen[0]}, expected {want}")
        self.assertEqual((r["failed"], r["last_error"]), (0, None), r)
        self.assertEqual(r["ok"], len(evs), "reloads.ok against the reload events")
        self.assertLessEqual(r["ok"], fit + 2, f"{r['ok']} reloads for a burst of {SIGNALS} "
                             "SIGHUPs")
        self.assertEqual(r["generation"], 1 + r["ok"])
        self.assertEqual({e.get("trigger") for e in evs}, {"SIGHUP"})
        self.assertEqual([e.get("generation") for e in evs],
                         [str(g) for g in range(2, 2 + r["ok"])])
        self.assertEqual(errors[:5], [], f"{len(errors)} clients failed during the storm")
        lb.assert_running()
        # It serves with the last file: web1 and the second server only.
        # Weights are last:1 and each of the 2 workers runs its own round
        # robin, so the second server comes once in `last + 1` picks per
        # worker: fetch enough for both workers to reach it.
        got = {fetch_name(port) for _ in range(4 * (last + 1) + 20)}
        self.assertEqual(got, {"web1", second})
        self.assertEqual(st["removed_servers"], [])

    def test_reload_refused_while_shutting_down(self):
        e = self.custom(admin_client.name_then_echo_backend("E"), name="E")
        admin_port, port, port2 = free_port(), free_port(), free_port()
        pools = [("web", [("E", e)], {})]
        lb = start_lb(self, config_text(admin_port, [("fe", port, "web")], pools,
                                        shutdown_timeout="20s"),
                      admin_port, allowed_errors={"reload_failed"})
        c = self.client(port)
        self.assertEqual(harness.read_line(c), b"E\n")
        # A file that would add a frontend.
        write_atomic(lb.config_path, config_text(admin_port, [("fe", port, "web"),
                                                              ("fe2", port2, "web")], pools,
                                                 shutdown_timeout="20s"))
        lb.send_signal(signal.SIGTERM)
        lb.wait_event("shutdown")
        wait_for(lambda: harness.is_refused(port), IO_TIMEOUT, "lb to stop listening")

        status, body = post_reload(lb)
        self.assertEqual(status, 400, f"POST /reload while shutting down: {status} {body}")
        self.assertIn("shutting down", body.get("error", ""), body)
        ev = sighup_fail(lb)
        self.assertEqual(ev.get("trigger"), "SIGHUP", ev)
        self.assertIn("shutting down", ev.get("error", ""), ev)
        st = lb.admin.stats()
        self.assertEqual((st["reloads"]["ok"], st["reloads"]["failed"],
                          st["reloads"]["generation"]), (0, 2, 1), st["reloads"])
        self.assertTrue(harness.is_refused(port2), "a reload applied during shutdown")
        self.assertTrue(harness.is_refused(port))
        # The open connection still works, and lb exits when it ends.
        self.assertEqual(harness.roundtrip(c, b"still here"), b"still here")
        lb.assert_running()
        c.close()
        self.assertEqual(lb.wait_exit(timeout=IO_TIMEOUT), 0)


if __name__ == "__main__":
    harness.main()
