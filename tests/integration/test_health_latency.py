"""Removal latency: how long after a server fails lb logs server_down, for
a crash (connects refused) and a hang (connects accepted, no answer), with
check_interval I in {0.5 s, 1 s} and fall K in {1, 3}, check_timeout T =
0.4 s, rise 1, check = http. (T is most of the shorter interval so that a
backend answering late under load does not take a healthy server of a
fall = 1 cell down before its fault.)

All 8 cells run at once in one lb, one pool per cell, N servers per cell
(ports of one hc_backend). Once every server has been probed twice (the
period is exact from then on), each server's fault is injected at its own
random time within one interval, so faults land at random phases of the
probe schedule. Latency = ts of server_down - the backend's wall time of
the fault.

Bounds from the contract. The first probe that sees the fault starts within
(0, I] after it and the K-th such probe K-1 intervals later; a refused
connect fails at once, a hang fails when T runs out. So a crash is
detected within [(K-1)*I, K*I] and a hang within [(K-1)*I + T, K*I + T].
EARLY = 0.25 s below covers the measurement (a probe planned before the
fault but started a little late sees it, the ms-truncated ts); above, load
only adds delay (lb's health thread or main loop scheduled late), covered by
harness.HC_SLACK. That slack is up to an interval, so the bounds alone
cannot count probes: the log does. lb runs at log_level debug and every server_down
must come with exactly the K-th failed check of its streak, in log order
(transition_streak), so a probe too many or too few fails the test whatever
the load.

The table (cell, n, min/median/max in ms) is printed to stdout and, when
LB_HC_LATENCY_TABLE names a file, written there too."""

import os
import random
import statistics
import time

import harness
from harness import LbTestCase, event_time, health_history, transition_streak, wait_for

T = 0.4
EARLY = 0.25            # below the contract: measurement only
LATE = harness.HC_SLACK  # above it: what load adds
N = 6                   # servers (trials) per cell
CELLS = [(fault, i, k) for fault in ("crash", "hang") for i in (0.5, 1.0) for k in (1, 3)]


def cell_name(fault, i, k):
    return f"{fault}_i{int(i * 1000)}_k{k}"


def bounds(fault, i, k):
    lo, hi = (k - 1) * i, k * i
    if fault == "hang":
        lo, hi = lo + T, hi + T
    return lo - EARLY, hi + LATE


class HealthLatencyTest(LbTestCase):

    def test_removal_latency(self):
        b = self.hc_backend(count=len(CELLS) * N)
        ports = iter(b.ports)
        pools, servers = [], {}         # servers: (pool, name) -> (port, cell)
        for cell in CELLS:
            pool = cell_name(*cell)
            members = []
            for j in range(N):
                port = next(ports)
                members.append((f"s{j}", b.addr(port)))
                servers[(pool, f"s{j}")] = (port, cell)
            pools.append((pool, members, {
                "check": "http", "check_interval": f"{int(cell[1] * 1000)}ms",
                "check_timeout": f"{int(T * 1000)}ms", "fall": cell[2], "rise": 1,
                "frontend": False}))
        # One frontend is enough (the config needs one); no clients here.
        pools[0][2]["frontend"] = True
        lb = self.lb_pools(pools, log_level="debug")

        # Settle: every server probed twice (the 2nd probe may be early).
        wait_for(lambda: all(len(v) >= 2 for v in b.times().values()), 10,
                 "two health requests on every port")
        self.assertFalse(lb.events("server_down"), "a server went down before any fault")

        rng = random.Random()
        start = time.monotonic()
        plan = sorted((start + rng.uniform(0, cell[1]), key) for key, (_, cell)
                      in servers.items())
        injected = {}
        for when, key in plan:
            delay = when - time.monotonic()
            if delay > 0:
                time.sleep(delay)       # scheduling the fault, not waiting for lb
            port, (fault, _, _) = servers[key]
            injected[key] = b.crash(port) if fault == "crash" else b.mode(port, "hang")

        worst = max(k * i + T for _, i, k in CELLS) + LATE + 5.0
        lb.wait_event("server_down", timeout=worst, count=len(servers))

        latencies = {cell: [] for cell in CELLS}
        problems = []
        for ev in lb.events("server_down"):
            key = (ev["pool"], ev["server"])
            self.assertIn(key, servers, ev)
            port, cell = servers[key]
            lat = event_time(ev) - injected[key]
            latencies[cell].append(lat)
            lo, hi = bounds(*cell)
            if not lo <= lat <= hi:
                problems.append(f"{key[0]}/{key[1]}: {lat * 1000:.0f} ms not in "
                                f"[{lo * 1000:.0f}, {hi * 1000:.0f}] ({ev})")
            if cell[0] == "crash" and cell[2] == 1:
                # Connects are refused from the fault on; a probe in flight
                # at the fault has its connection closed or reset instead.
                self.assertRegex(ev.get("reason", "").lower(),
                                 "refused|reset|closed|broken pipe", ev)
            elif cell[0] == "crash":
                self.assertIn("refused", ev.get("reason", "").lower(), ev)
            else:
                self.assertIn("timeout", ev.get("reason", "").lower(), ev)
            self.assertEqual(ev.get("failures"), str(cell[2]), ev)
            hist = health_history(lb, *key)
            down = [e for e in hist if e["event"] == "server_down"][0]
            streak = transition_streak(hist, down, cell[2])
            if streak is not None:
                problems.append(f"{key[0]}/{key[1]}: {streak}")
        for cell in CELLS:
            self.assertEqual(len(latencies[cell]), N,
                             f"{cell_name(*cell)}: one server_down per server")

        rows = ["cell                 n   min_ms  median_ms  max_ms   bound_ms",
                "-------------------  --  ------  ---------  ------  -----------"]
        for cell in CELLS:
            v = sorted(latencies[cell])
            lo, hi = bounds(*cell)
            rows.append(f"{cell_name(*cell):<19}  {len(v):>2}  {v[0] * 1000:>6.0f}  "
                        f"{statistics.median(v) * 1000:>9.0f}  {v[-1] * 1000:>6.0f}  "
                        f"{lo * 1000:>4.0f}..{hi * 1000:<5.0f}")
        table = (f"Removal latency (ts of server_down - fault), T = {T * 1000:.0f} ms, rise 1, "
                 f"tolerance -{EARLY * 1000:.0f}/+{LATE * 1000:.0f} ms"
                 f"{' (ASan build)' if harness.SANITIZED else ''}\n"
                 + "\n".join(rows) + "\n")
        print("\n" + table, flush=True)
        out = os.environ.get("LB_HC_LATENCY_TABLE")
        if out:
            with open(out, "w") as f:
                f.write(table)
        self.assertFalse(problems, "latency out of bounds or wrong probe:\n"
                         + "\n".join(problems))
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
