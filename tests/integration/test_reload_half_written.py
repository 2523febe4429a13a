"""A config that must not apply: one with no frontend, and one caught while
it is being written.

A file with no [frontend] section is refused ("FILE: no [frontend NAME]
section: lb would listen on nothing") by lb -t, at start and by a reload,
which would otherwise close every listener: that is what a file cut short
after its [global] section looks like.

A file rewritten in place (truncated, then written in small chunks with
pauses, as a slow tool or `cat > file` does) while lb reloads: lb reads only
a version that has not changed for 50 ms and is the same before and after
it is read, so every reload applies the whole new file, or, when the writer
is still at work after 1 s, fails with "the file is still being written"
and the old config keeps serving. It never applies a part: no frontend
closes, no pool loses a server. A round whose writer itself paused 45 ms or
more (the machine stalled it) is beyond that promise and not judged; the
test needs most rounds judged."""

import os
import random
import threading
import time

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, fetch_name, free_port
from test_reload_traffic import (config_text, post_reload, reload_error, servers_of, start_lb,
                                 write_atomic)

NSERVERS = 8
# (bytes per write(2), pause between writes) for a file of about 1 KB
FAST = (32, 0.002)          # the whole file in about 80 ms
SLOW = (6, 0.010)           # about 1.8 s: longer than lb waits (1 s)
FAST_ROUNDS = 30
SLOW_ROUNDS = 6
STALL = 0.045               # a pause this long (lb's 50 ms less a margin for
                            # the clocks) is the machine's, not the writer's
QUIET_WORDS = "the file is still being written"


class SlowWriter(harness.Thread):
    """Rewrites path in place: open with O_TRUNC, then `chunk` bytes per
    write with `pause` between; sets `reached` after `trigger` writes.
    Records the time of the truncate and of each write."""

    def __init__(self, path, data, chunk, pause, trigger):
        super().__init__(self._write)
        self.path, self.data, self.trigger = path, data, trigger
        self.chunk, self.pause = chunk, pause
        self.reached = threading.Event()
        self.times = []
        self.write_error = None

    def _write(self):
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
            self.times.append(time.monotonic())
            try:
                for i, off in enumerate(range(0, len(self.data), self.chunk)):
                    if i == self.trigger:
                        self.reached.set()
                    os.write(fd, self.data[off:off + self.chunk])
                    self.times.append(time.monotonic())
                    time.sleep(self.pause)
            finally:
                os.close(fd)
        except OSError as e:
            self.write_error = e
        self.reached.set()

    def longest_gap(self):
        return max(b - a for a, b in zip(self.times, self.times[1:]))


class HalfWrittenTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.backends = [self.named(f"s{i + 1}") for i in range(NSERVERS)]
        self.admin_port = free_port()
        self.ports = {"fe1": free_port(), "fe2": free_port()}

    def version(self, weight):
        """The whole file: comments first (a long prefix with no
        frontend), two frontends, then a pool of NSERVERS servers, all of
        weight `weight` (a prefix may end anywhere in that list)."""
        pools = [("web", [(f"s{i + 1}", b, weight) for i, b in enumerate(self.backends)],
                  {})]
        head = "".join(f"; lb reload test: a file rewritten in place, line {i}\n"
                       for i in range(8))
        return head + config_text(self.admin_port,
                                  [(n, p, "web") for n, p in self.ports.items()],
                                  pools) + "\n"

    def assert_whole(self, lb, weight, where):
        """/stats shows the whole version of `weight`, and both frontends
        serve."""
        st = lb.admin.stats()
        self.assertEqual({f["name"]: f["listen"] for f in st["frontends"]},
                         {n: f"{HOST}:{p}" for n, p in self.ports.items()}, where)
        self.assertEqual({n: (s["address"], s["weight"]) for n, s in servers_of(st, "web").items()},
                         {f"s{i + 1}": (b.addr, weight) for i, b in enumerate(self.backends)},
                         where)
        for port in self.ports.values():
            self.assertIn(fetch_name(port), {f"s{i + 1}" for i in range(NSERVERS)}, where)

    def test_no_frontend_is_refused(self):
        text = config_text(self.admin_port, [("fe1", self.ports["fe1"], "web")],
                           [("web", [("s1", self.backends[0])], {})])
        lb = start_lb(self, text, self.admin_port, allowed_errors={"reload_failed"})
        # What a file cut short after [global] leaves, and the same with
        # the pools but no frontend.
        for cut in ("[global]\nworkers = 2\n",
                    config_text(self.admin_port, [], [("web", [("s1", self.backends[0])], {})])):
            with self.subTest(cut=cut[:30]):
                path = os.path.join(lb.dir, "cut.ini")
                with open(path, "w") as f:
                    f.write(cut)
                want = f"{path}: no [frontend NAME] section: lb would listen on nothing"
                self.assertEqual(harness.lb_test(path), (1, "", want + "\n"))
                code, out, err = harness.run_lb(["-c", path])
                self.assertEqual((code, err), (1, want + "\n"))
                write_atomic(lb.config_path, cut)
                want = want.replace(path, lb.config_path)
                self.assertEqual(post_reload(lb), (400, {"error": want}))
                st = lb.admin.stats()
                self.assertEqual(st["reloads"]["last_error"], want)
                self.assertEqual([f["name"] for f in st["frontends"]], ["fe1"])
                self.assertEqual(fetch_name(self.ports["fe1"]), "s1")

    def test_reload_racing_a_slow_writer(self):
        lb = start_lb(self, self.version(1), self.admin_port, allowed_errors={"reload_failed"})
        rng = random.Random()
        weight = 1
        applied = refused = stalled = 0
        rounds = [FAST] * FAST_ROUNDS + [SLOW] * SLOW_ROUNDS
        for i, (chunk, pause) in enumerate(rounds):
            new = 2 if weight == 1 else 1
            data = self.version(new).encode()
            nchunks = (len(data) + chunk - 1) // chunk
            # The slow ones are caught at their start: the rest of the
            # write outlasts lb's wait.
            trigger = 1 if (chunk, pause) == SLOW else rng.randrange(1, nchunks)
            w = SlowWriter(lb.config_path, data, chunk, pause, trigger)
            w.start()
            self.assertTrue(w.reached.wait(IO_TIMEOUT))
            err = reload_error(lb, use_signal=i % 2 == 1)
            ok = err is None
            w.join(timeout=30)
            self.assertIsNone(w.write_error)
            where = f"round {i} (pause {pause * 1000:.0f} ms, reload at write {trigger} " \
                    f"of {nchunks}): {'applied' if ok else err}"
            if w.longest_gap() >= STALL:
                stalled += 1
                # Not judged; back to a known state for the next round.
                write_atomic(lb.config_path, self.version(weight))
                self.assertEqual(post_reload(lb)[0], 200, where)
                self.assert_whole(lb, weight, where + " (restored)")
                continue
            if ok:
                applied += 1
                weight = new
            else:
                refused += 1
                self.assertIn(QUIET_WORDS, err or "", where)
                self.assertEqual((chunk, pause), SLOW, where)
                # The writer is done by now: the next round starts from
                # the file as the old config has it.
                write_atomic(lb.config_path, self.version(weight))
            self.assert_whole(lb, weight, where)
        print(f"\n{len(rounds)} reloads racing a writer: {applied} applied the whole file, "
              f"{refused} refused ({QUIET_WORDS}), {stalled} not judged (writer stalled)")
        self.assertGreaterEqual(applied + refused, len(rounds) * 2 // 3,
                                f"{stalled} of {len(rounds)} rounds stalled")
        self.assertGreaterEqual(refused, 1, "no slow writer outlasted the wait")
        # Every reload that applied had the whole pool.
        for ev in lb.events("reload"):
            self.assertEqual(ev.get("servers"), str(NSERVERS), ev)


if __name__ == "__main__":
    harness.main()
