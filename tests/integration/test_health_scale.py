"""Checks at scale: 200 servers in one pool on one health thread, check =
http every 1 s (timeout 1 s, fall 1). When 20 of them hang, those 20 are out
within 2 s (the next probe starts within 1 s, times out 1 s later; plus
harness.HC_SLACK for load), while the 180 others stay up and keep being
probed once a second: hung probes waiting for their timeout must not delay
anyone else's schedule.

The servers are 200 ports of one hc_backend process, which records the
monotonic time of every health request it receives; the intervals between
consecutive requests to each healthy port over about 4 s show the
schedule: their median is the interval, and no healthy probe comes 3/4 of
an interval late (a lost slot would be a whole interval). A checker that
waited for the hung probes would hold the others for up to their 1 s
timeout each, 20 of them a round."""

import random
import statistics
import time

import harness
from harness import LbTestCase, event_time, wait_for

SERVERS = 200
HUNG = 20
INTERVAL = 1.0
TIMEOUT = 1.0
WINDOW = 4.0


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


class HealthScaleTest(LbTestCase):

    def test_200_servers_20_hung(self):
        b = self.hc_backend(count=SERVERS)
        names = {p: f"s{i:03d}" for i, p in enumerate(b.ports)}
        hung = set(random.Random().sample(b.ports, HUNG))
        healthy = [p for p in b.ports if p not in hung]
        lb = self.lb_pools([("big", [(names[p], b.addr(p)) for p in b.ports],
                             {"check": "http", "check_interval": "1s",
                              "check_timeout": "1s", "fall": 1, "rise": 2})],
                           log_level="info", health_threads=1, workers=1)

        # Settle: two requests per port (the 2nd probe may come early).
        wait_for(lambda: all(len(v) >= 2 for v in b.times().values()), 10,
                 "two health requests on every port")
        self.assertFalse(lb.events("server_down"), "a server went down before the hang")
        window_start = time.monotonic()
        t_hang = b.mode(sorted(hung), "hang")

        downs = lb.wait_event("server_down", timeout=10, count=HUNG)
        self.assertEqual({e["server"] for e in downs}, {names[p] for p in hung},
                         "the servers that went down")
        slow = []
        limit = INTERVAL + TIMEOUT + harness.HC_SLACK
        for e in downs:
            self.assertIn("timeout", e.get("reason", "").lower(), e)
            self.assertEqual(e.get("failures"), "1", e)
            lat = event_time(e) - t_hang
            if lat > limit:
                slow.append(f"{e['server']}: {lat * 1000:.0f} ms")
        self.assertFalse(slow, f"hung servers out later than {limit:.2f} s after the hang: "
                         + ", ".join(slow))
        self.assertEqual(sorted(int(e["in_rotation"].split("/")[0]) for e in downs),
                         list(range(SERVERS - HUNG, SERVERS)))

        # The healthy ones: probed every second over the window.
        def window_done():
            t = b.times(healthy)
            return t if all(v[-1][0] >= window_start + WINDOW for v in t.values()) else None
        times = wait_for(window_done, WINDOW + 10, "a 4 s window of requests on every port")
        intervals = []
        per_port_max = {}
        for port, v in times.items():
            mono = [m for m, _ in v if m >= window_start]
            self.assertGreaterEqual(len(mono), int(WINDOW) - 1, f"port {port}: {len(mono)} requests")
            gaps = [b2 - a for a, b2 in zip(mono, mono[1:])]
            intervals += gaps
            per_port_max[port] = max(gaps)
        med = statistics.median(intervals)
        print(f"\n{len(healthy)} healthy servers, {len(intervals)} intervals between "
              f"health requests: min {min(intervals) * 1000:.0f} ms, median "
              f"{med * 1000:.0f} ms, p99 {pct(intervals, 0.99) * 1000:.0f} ms, max "
              f"{max(intervals) * 1000:.0f} ms; hung out after "
              f"{min(event_time(e) for e in downs) - t_hang:.2f}.."
              f"{max(event_time(e) for e in downs) - t_hang:.2f} s", flush=True)
        self.assertLess(abs(med - INTERVAL), 0.15, f"median interval {med:.3f} s")
        worst = max(per_port_max, key=per_port_max.get)
        self.assertLess(per_port_max[worst], INTERVAL * 1.75,
                        f"port {worst} ({names[worst]}) waited {per_port_max[worst]:.3f} s")
        self.assertEqual(len(lb.events("server_down")), HUNG,
                         "a healthy server went down")
        self.assertFalse(lb.events("server_up"))
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
