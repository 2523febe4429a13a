"""Churn through etcd under load: 50 changes a minute to the keys of a pool
for 3 minutes (a server added, one removed, a weight changed, a key
pointed at another server, in turn), while clients open 200 new
connections a second through lb: not one connection may fail, and the pool
ends as etcd says. Against a real etcd and real backends.

It runs in the optimised build only (tests/run.sh): 3 minutes of wall
time that the ASan build would double without finding more (the etcd
source's memory is the other etcd tests' and the fuzzer's)."""

import json
import threading
import time

import harness
from admin_client import Admin
from harness import HOST, free_port, wait_for
from test_discover_etcd import Etcd, etcd_config, servers_of

DURATION = 180.0            # s of churn
CHANGE_EVERY = 60.0 / 50    # 50 changes a minute
RATE = 200                  # new connections a second, in all
CLIENTS = 4                 # threads sharing the rate
NAMES = [f"s{i}" for i in range(12)]
MIN_KEYS = 3                # the churn never takes the pool below this


class Clients:
    """CLIENTS threads, each opening RATE / CLIENTS connections a second
    (paced, not bursting) until stop(): each reads its server's name and
    EOF. Counts the good ones and keeps the failures."""

    def __init__(self, tc, port):
        self.port, self.ok, self.failed = port, 0, []
        self.lock, self.done = threading.Lock(), threading.Event()
        self.threads = [tc.start_thread(self.run, name=f"client{i}") for i in range(CLIENTS)]

    def run(self):
        every = CLIENTS / RATE
        deadline = time.monotonic() + DURATION + 60            # a bound, whatever happens
        due = time.monotonic()
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                harness.fetch_name(self.port, timeout=5.0)
                with self.lock:
                    self.ok += 1
            except (OSError, AssertionError) as e:
                with self.lock:
                    self.failed.append((time.time(), repr(e)))
            due += every
            pause = due - time.monotonic()
            if pause > 0:
                self.done.wait(pause)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()


class EtcdChurnTest(harness.LbTestCase):

    def test_churn_under_load(self):
        etcd = Etcd(harness.make_tmpdir())
        etcd.start()
        self.addCleanup(etcd.stop)
        prefix = "/services/churn/"
        backends = {n: self.named(n) for n in NAMES}
        keys = {n: backends[n].addr for n in NAMES[:6]}         # what etcd holds
        for n, a in keys.items():
            etcd.put(prefix + n, a)
        admin_port, port = free_port(), free_port()
        lb = self.start_lb(etcd_config(etcd, admin_port, port, prefix))
        admin = Admin(admin_port)

        def pool_is(want):
            return set(servers_of(admin.stats())) == set(want)
        wait_for(lambda: pool_is(keys), 10.0, "the first six")
        admin.wait_stats(lambda st: all(s["state"] == "up" for s in servers_of(st).values()),
                         10.0, "the first six up")

        clients = Clients(self, port)
        self.addCleanup(clients.stop)
        changes, kinds = 0, ["add", "remove", "weight", "move"]
        t_end = time.monotonic() + DURATION
        next_at = time.monotonic()
        while time.monotonic() < t_end:
            kind = kinds[changes % len(kinds)]
            used = set(keys.values())               # one server per address
            spare = [n for n in NAMES if n not in keys and backends[n].addr not in used]
            if kind == "add" and spare:
                n = spare[changes % len(spare)]
                keys[n] = backends[n].addr
                etcd.put(prefix + n, keys[n])
            elif kind == "remove" and len(keys) > MIN_KEYS:
                n = sorted(keys)[changes % len(keys)]
                del keys[n]
                etcd.delete(prefix + n)
            elif kind == "move" and spare:
                # the key keeps its name, its server moves: a server with a
                # new address (the old one drains, the new one is probed)
                n = sorted(keys)[changes % len(keys)]
                keys[n] = backends[spare[0]].addr
                etcd.put(prefix + n, keys[n])
            else:
                n = sorted(keys)[changes % len(keys)]
                etcd.put(prefix + n, json.dumps({"address": keys[n],
                                                 "weight": 1 + changes % 5}))
            changes += 1
            next_at += CHANGE_EVERY
            time.sleep(max(0.0, next_at - time.monotonic()))
        clients.stop()

        wait_for(lambda: {n: s["address"] for n, s in servers_of(admin.stats()).items()} == keys,
                 10.0, f"the pool to end as etcd says: {keys}")
        followed = len(lb.events("discover", pool="web"))
        print(f"\nchurn: {changes} changes in {DURATION:.0f} s, {clients.ok} connections, "
              f"{len(clients.failed)} failed; {followed} discover events; "
              f"{len(lb.events('reload'))} reloads")
        self.assertEqual(clients.failed, [])
        self.assertGreaterEqual(changes, DURATION / CHANGE_EVERY - 1)
        # paced at RATE: most of it, whatever a loaded machine takes from it
        self.assertGreaterEqual(clients.ok, RATE * DURATION * 0.8)
        self.assertGreaterEqual(followed, changes * 0.9,
                                "each change is a discover event (two may share one)")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
