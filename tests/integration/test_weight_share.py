"""What a server's share of its weight does to its traffic, through the real
lb to real backends (hc_backend.py), counted by the clients from each
answer's X-Port:

- warning (check_warn = 429, warn_weight = 25%): the server stays in
  rotation with a quarter of its share, shows "warning", and is back to
  its full share after rise passes of 200;
- slow start (slow_start = 4s): a server back from down takes a share that
  rises over the period, for roundrobin, leastconn and random; at lb's own
  start no server ramps."""

import threading
import time

import harness
from admin_client import find_server, start_lb
from harness import LbTestCase, http_via, wait_for

WAIT = 10.0
CHECK = {"check": "http", "check_interval": "200ms", "check_timeout": "150ms"}


def run_clients(port, n_threads, stop, counts, lock, slices=None):
    """Client threads sending one request per connection through port until
    stop is set (bounded by 60 s); counts[backend_port] += 1 per answer, or
    into slices[-1] when given (a list of dicts the caller appends to)."""
    def loop():
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            p = http_via(port, timeout=5)
            with lock:
                target = slices[-1] if slices is not None else counts
                target[p] = target.get(p, 0) + 1
    threads = [harness.Thread(loop) for _ in range(n_threads)]
    for t in threads:
        t.start()
    return threads


class WeightShareTest(LbTestCase):

    def test_warning_share(self):
        b = self.hc_backend(count=4)
        servers = [(f"s{i}", b.addr(p)) for i, p in enumerate(b.ports)]
        keys = dict(CHECK, check_warn="429", warn_weight="25%", rise=2, fall=2)
        lb = start_lb(self, [("rr", servers, dict(keys, balance="roundrobin")),
                             ("random", servers, dict(keys, balance="random"))],
                      log_level="debug")
        for pool in ("rr", "random"):
            for s, _ in servers:
                lb.admin.wait_server(pool, s, lambda x: x["last_check"] and
                                     x["health"] == "up", WAIT, "up")
        warm = b.ports[3]
        b.mode(warm, "429")
        for pool in ("rr", "random"):
            lb.wait_event("server_warning", pool=pool, server="s3")
            srv = find_server(lb.admin.stats(), pool, "s3")
            self.assertEqual((srv["health"], srv["state"], srv["share"],
                              srv["last_check"]["result"], srv["last_check"]["detail"]),
                             ("warning", "up", 0.25, "warning", "HTTP 429 Too Many Requests"),
                             srv)
        # 3.25 shares in all: the warning server's is 0.25 / 3.25 = 7.7%.
        # Round robin: it keeps 1 in 4 of its 130 turns (32.5), and the 97.5
        # it gives up are drawn by weight x share (7.5 of them back to it,
        # 2.6 standard deviation): +-11 at four. Random: all 520 are drawn.
        n = 520
        for pool, tolerance in (("rr", 11), ("random", 18)):
            counts = {}
            for _ in range(n):
                p = http_via(lb.fports[f"fe_{pool}"], timeout=5)
                counts[p] = counts.get(p, 0) + 1
            got = counts.get(warm, 0)
            want = n * 0.25 / 3.25
            print(f"measured: {pool}: the warning server got {got} of {n} connections "
                  f"(its share: {want:.0f}); the others {[counts.get(p, 0) for p in b.ports[:3]]}")
            self.assertNotIn(None, counts, counts)
            self.assertTrue(want - tolerance <= got <= want + tolerance,
                            f"{pool}: {got} of {n} to the warning server, want {want:.0f}")
        # 200 again: up after rise (2) passes, full share.
        t = time.time()
        b.mode(warm, "ok")
        for pool in ("rr", "random"):
            ev = lb.wait_event("server_warning_clear", pool=pool, server="s3")[0]
            self.assertGreater(harness.event_time(ev), t)
            srv = find_server(lb.admin.stats(), pool, "s3")
            self.assertEqual((srv["health"], srv["share"]), ("up", 1.0), srv)
        hist = [e for e in lb.events() if e.get("pool") == "rr" and e.get("server") == "s3"
                and e.get("event") in ("check", "server_warning_clear")
                and harness.event_time(e) > t]
        clear = next(i for i, e in enumerate(hist) if e["event"] == "server_warning_clear")
        self.assertEqual([e.get("result") for e in hist[clear - 2:clear]], ["passed", "passed"],
                         "the warning ended before rise passes")
        lb.assert_running()

    def test_slow_start(self):
        b = self.hc_backend(count=3, mode="slow:20")
        servers = [(f"s{i}", b.addr(p)) for i, p in enumerate(b.ports)]
        keys = dict(CHECK, rise=1, fall=1, slow_start="4s")
        pools = ("roundrobin", "leastconn", "random")
        lb = start_lb(self, [(a, servers, dict(keys, balance=a)) for a in pools],
                      log_level="debug")
        for pool in pools:
            for s, _ in servers:
                lb.admin.wait_server(pool, s, lambda x: x["last_check"] is not None, WAIT,
                                     "its first check")
        # Not at lb's own start: every server at its full share, no ramp.
        for pool in pools:
            for s, _ in servers:
                srv = find_server(lb.admin.stats(), pool, s)
                self.assertEqual((srv["share"], srv["slow_start"]), (1.0, None), srv)
        cold = b.ports[2]
        b.mode(cold, "500")
        for pool in pools:
            lb.wait_event("server_down", pool=pool, server="s2")
        stop = threading.Event()
        lock = threading.Lock()
        slices = {pool: [{}] for pool in pools}
        threads = []
        for pool in pools:
            threads += run_clients(lb.fports[f"fe_{pool}"], 8, stop, None, lock, slices[pool])
        self.addCleanup(stop.set)
        b.mode(cold, "slow:20")
        ups = [lb.wait_event("server_up", pool=pool, server="s2")[0] for pool in pools]
        t_up = max(harness.event_time(e) for e in ups)
        # Five slices of 1 s from the recovery: four within the ramp, one after.
        with lock:
            for pool in pools:
                slices[pool].append({})
        for k in range(5):
            wait_for(lambda: time.time() >= t_up + k + 1, WAIT, f"slice {k + 1}")
            with lock:
                for pool in pools:
                    slices[pool].append({})
            if k == 1:
                for pool in pools:
                    srv = find_server(lb.admin.stats(), pool, "s2")
                    self.assertTrue(srv["slow_start"] and 0.3 < srv["slow_start"]["progress"] < 0.8
                                    and srv["share"] < 0.8, srv)
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for pool in pools:
            shares = []
            for sl in slices[pool][1:6]:       # [0]: before the recovery
                total = sum(v for k, v in sl.items() if k is not None)
                shares.append(sl.get(cold, 0) / total if total else 0)
                self.assertNotIn(None, sl, f"{pool}: a client failed: {sl}")
            print(f"measured: {pool}: the recovered server's share of new connections per "
                  f"second of a 4 s slow start: " + ", ".join(f"{s:.0%}" for s in shares))
            self.assertLess(shares[0], 0.12, f"{pool}: {shares}")
            self.assertLess(shares[0], shares[2], f"{pool}: {shares}")
            self.assertLess(shares[2], shares[4] + 0.03, f"{pool}: {shares}")
            self.assertGreater(shares[4], 0.22, f"{pool}: {shares}")
            srv = find_server(lb.admin.stats(), pool, "s2")
            self.assertEqual((srv["share"], srv["slow_start"]), (1.0, None), srv)
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
