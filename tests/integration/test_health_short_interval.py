"""A short check interval alone: check_interval = 200ms with no
check_timeout. The default timeout (1s) follows the shorter interval, as
HAProxy's "timeout check" does when unset ("inter" is then the whole
check's timeout), so lb accepts the file and its probes of a server that
accepts and never answers time out at 200 ms, not 1 s.

Detection bound (test_health_latency.py explains it): a hang is detected
within [(K-1)*I + T, K*I + T] of the fault, here I = T = 0.2 s and K =
fall = 3: [600, 800] ms. EARLY covers the measurement below that,
harness.HC_SLACK what load adds above it; the log counts the probes
(transition_streak), and the failed probes of a streak must start one
interval apart (their median gap), so a skipped slot fails the test
whatever the load. (With the timeout equal to the interval, the probe's
timeout and the next slot fall due together; lb ends the probe at that
slot, HC_TIMER_EARLY_MS at most before its time, rather than skip it.)
Each failed probe must say "timeout after 200 ms" and have taken that long
from its slot."""

import random
import statistics
import time

import harness
from harness import (LbTestCase, event_time, from_slot_ms, health_history, transition_streak,
                     wait_for)

I = 0.2
T = I                   # the default that follows the interval
K = 3
EARLY = 0.25            # below the contract: measurement only
LATE = harness.HC_SLACK  # above it: what load adds
N = 6                   # servers (trials)
# How much before its timeout (from its slot) lb may end a probe at the
# next slot: health/hc_int.h's HC_TIMER_EARLY_MS, and 2 ms for the ms
# rounding of the two clocks the log's figures come from.
EARLY_END_MS = 10 + 2


class HealthShortIntervalTest(LbTestCase):

    def test_default_timeout_follows_interval(self):
        b = self.hc_backend(count=N)
        members = [(f"s{j}", b.addr(port)) for j, port in enumerate(b.ports)]
        by_name = {f"s{j}": port for j, port in enumerate(b.ports)}
        lb = self.lb_pools([("web", members, {
            "check": "http", "check_interval": f"{int(I * 1000)}ms", "fall": K, "rise": 1})],
            log_level="debug")

        wait_for(lambda: all(len(v) >= 2 for v in b.times().values()), 10,
                 "two health requests on every port")
        self.assertFalse(lb.events("server_down"), "a server went down before any fault")

        # Each server hangs at its own random phase of the probe schedule.
        rng = random.Random()
        start = time.monotonic()
        plan = sorted((start + rng.uniform(0, I), name) for name in by_name)
        injected = {}
        for when, name in plan:
            delay = when - time.monotonic()
            if delay > 0:
                time.sleep(delay)       # scheduling the fault, not waiting for lb
            injected[name] = b.mode(by_name[name], "hang")
        lb.wait_event("server_down", timeout=K * I + T + LATE + 5.0, count=N)

        lo, hi = (K - 1) * I + T - EARLY, K * I + T + LATE
        latencies, gaps, problems = [], [], []
        for ev in lb.events("server_down"):
            name = ev["server"]
            lat = event_time(ev) - injected[name]
            latencies.append(lat)
            if not lo <= lat <= hi:
                problems.append(f"{name}: {lat * 1000:.0f} ms not in "
                                f"[{lo * 1000:.0f}, {hi * 1000:.0f}]")
            hist = health_history(lb, "web", name)
            down = [e for e in hist if e["event"] == "server_down"][0]
            streak = transition_streak(hist, down, K)
            if streak is not None:
                problems.append(f"{name}: {streak}")
            # The K failed probes of the streak: each timed out at T.
            failed = [e for e in hist[:hist.index(down)]
                      if e["event"] == "check" and e.get("result") == "failed"][-K:]
            starts = []
            for e in failed:
                self.assertEqual(e.get("detail"),
                                 f"timeout after {int(T * 1000)} ms waiting for the status line", e)
                # From its slot (the start's lag included), as the timeout counts.
                ms = from_slot_ms(e)
                if not T * 1000 - EARLY_END_MS <= ms <= (T + LATE) * 1000:
                    problems.append(f"{name}: a probe took {ms:.1f} ms from its slot, its "
                                    f"timeout is {int(T * 1000)} ms ({e})")
                starts.append(event_time(e) - float(e["duration_ms"]) / 1000)
            gaps += [b - a for a, b in zip(starts, starts[1:])]
        self.assertEqual(len(latencies), N, "one server_down per server")
        # One interval between the failed probes of a streak; a skipped slot
        # makes it two. A late slot only moves one start (the plan keeps its
        # phase), hence the median.
        self.assertLessEqual(statistics.median(gaps), 1.5 * I,
                             f"failed probes not one interval apart: {sorted(gaps)}")
        v = sorted(latencies)
        print(f"\nhang detection, check_interval {int(I * 1000)}ms (timeout {int(T * 1000)} ms "
              f"by default), fall {K}: min {v[0] * 1000:.0f} median "
              f"{statistics.median(v) * 1000:.0f} max {v[-1] * 1000:.0f} ms, median gap "
              f"between failed probes {statistics.median(gaps) * 1000:.0f} ms, bound "
              f"{lo * 1000:.0f}..{hi * 1000:.0f} ms{' (ASan build)' if harness.SANITIZED else ''}",
              flush=True)
        self.assertFalse(problems, "detection out of bounds or wrong probe:\n"
                         + "\n".join(problems))
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
