"""Active-active lb nodes behind a BGP router with ECMP, in network
namespaces made here (tier.py), with Debian's BIRD 2 and the files of
deploy/bgp/ (their addresses replaced):

  client c (10.78.0.2-9) -- router r -- bridge -- lb nodes a, b -- backends
                          (BIRD, ECMP,           (BIRD + lb-bgp-ready,  be1-be3
                           hash on ports)          VIP on lo)           10.77.0.31-33

Each node announces the service address while its /ready answers 200; the
router installs one route with a next hop per ready node and hashes each
flow (ports included) to one of them.

- new connections spread over both nodes;
- with balance = source, both nodes pick the same backend for the same
  client address (the rendezvous hash depends on server names only);
- SIGTERM of a's lb (withdraw_delay = 3s): no new connection fails, a is
  withdrawn and ends its connections, then exits;
- SIGKILL of a's lb: connections fail only until lb-bgp-ready's next poll
  withdraws a; the time until every new connection succeeds is measured;
- a node whose pool has no server in rotation withdraws itself.
Skipped, with the reason, without root, `ip`, curl or BIRD."""

import collections
import itertools
import json
import os
import signal
import subprocess
import sys
import time

import harness
from harness import LbTestCase, wait_for
import tier

VIP = f"{tier.SUBNET}.100"
PORT = 8080
WAIT = 20.0
CLIENTS = [f"10.78.0.{i}" for i in range(2, 10)]
BACKENDS = {"be1": f"{tier.SUBNET}.31", "be2": f"{tier.SUBNET}.32", "be3": f"{tier.SUBNET}.33"}
NODES = {"a": 11, "b": 12}
WHY_NOT = tier.missing(("ip", "curl", "bird", "birdc"))
RUNS = itertools.count(1)


def deploy_file(name, node_host=None):
    """A file of deploy/bgp with the test's addresses: 10.0.0.0/24 is the
    bridge's subnet, the node's own address is .node_host."""
    with open(os.path.join(harness.SOURCE_DIR, "deploy", "bgp", name)) as f:
        text = f.read()
    if node_host is not None:               # the node's own address: .11 in the file
        assert "10.0.0.11 " in text
        text = text.replace("10.0.0.11", f"10.0.0.{node_host}")
    assert "10.0.0." in text
    return "log stderr all;\n" + text.replace("10.0.0.", f"{tier.SUBNET}.")


@harness.skip_if(WHY_NOT is not None, WHY_NOT or "")
class BgpTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.tier = tier.Tier()
        cls.dir = harness.make_tmpdir()
        cls.birds = []
        try:
            cls.setup_network()
            cls.router_bird()
        except BaseException:
            cls.tier.delete()
            raise

    @classmethod
    def setup_network(cls):
        t, sh = cls.tier, tier.sh
        cls.ns = {"r": t.node("r", 1), "be": t.node("be", 31)}
        for n, host in NODES.items():
            cls.ns[n] = t.node(n, host)
        cls.ns["c"] = t._netns("c")
        t.link("r", cls.ns["r"], "10.78.0.1/24", "c", cls.ns["c"], f"{CLIENTS[0]}/24")
        for addr in CLIENTS[1:]:
            sh("ip", "-n", cls.ns["c"], "addr", "add", f"{addr}/24", "dev", "cr0")
        sh("ip", "-n", cls.ns["c"], "route", "add", "default", "via", "10.78.0.1")
        for addr in list(BACKENDS.values())[1:]:
            sh("ip", "-n", cls.ns["be"], "addr", "add", f"{addr}/24", "dev", "be0")
        sh("ip", "netns", "exec", cls.ns["r"], "sysctl", "-qw", "net.ipv4.ip_forward=1",
           "net.ipv4.fib_multipath_hash_policy=1", "net.ipv4.conf.all.send_redirects=0",
           "net.ipv4.conf.r0.send_redirects=0")
        for n in NODES:
            sh("ip", "-n", cls.ns[n], "addr", "add", f"{VIP}/32", "dev", "lo")
            sh("ip", "-n", cls.ns[n], "route", "add", "10.78.0.0/24", "via", f"{tier.SUBNET}.1")
            # answer ARP for an interface's own addresses only: the VIP on
            # lo is not the bridge's to find
            sh("ip", "netns", "exec", cls.ns[n], "sysctl", "-qw",
               "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
        for name, addr in BACKENDS.items():
            t.run(cls.ns["be"], [sys.executable, tier.__file__, "backend", name, "9001", addr])

    @classmethod
    def bird(cls, n, text):
        conf = os.path.join(cls.dir, f"bird-{n}.conf")
        with open(conf, "w") as f:
            f.write(text)
        sock = os.path.join(cls.dir, f"bird-{n}.ctl")
        p = cls.tier.run(cls.ns[n], ["bird", "-f", "-c", conf, "-s", sock,
                                     "-P", os.path.join(cls.dir, f"bird-{n}.pid")],
                         os.path.join(cls.dir, f"bird-{n}.log"))
        def up():
            if p.poll() is not None:
                with open(os.path.join(cls.dir, f"bird-{n}.log"), errors="replace") as f:
                    raise AssertionError(f"bird on {n} exited: {f.read()[-500:]}")
            return subprocess.run(["ip", "netns", "exec", cls.ns[n], "birdc", "-s", sock,
                                   "show", "status"], capture_output=True).returncode == 0
        wait_for(up, WAIT, f"bird on {n} to answer")
        return p, sock

    @classmethod
    def router_bird(cls):
        """The router's BIRD, and each node's: their sessions stay up for
        the whole class; each case starts its own lbs and lb-bgp-ready."""
        cls.bird("r", deploy_file("bird-router.conf"))
        cls.node_birds = {n: cls.bird(n, deploy_file("bird.conf", host))
                          for n, host in NODES.items()}

    @classmethod
    def tearDownClass(cls):
        cls.tier.delete()

    def setUp(self):
        super().setUp()
        self.run_id = next(RUNS)
        self.lbs, self.readys = {}, {}
        self.addCleanup(self.stop_all)
        for n in NODES:
            self.start_lb(n)
            self.readys[n] = self.tier.run(
                self.ns[n], [os.path.join(harness.SOURCE_DIR, "deploy", "bgp", "lb-bgp-ready"),
                             "http://127.0.0.1:9900/ready", "lb_vip", "0.2"],
                self.ready_log(n), env=dict(os.environ, BIRD_SOCKET=self.node_birds[n][1]))
        wait_for(lambda: self.next_hops() == {"a", "b"}, WAIT,
                 lambda: f"the router's route to both nodes: {self.route()}")

    def start_lb(self, n, balance="roundrobin"):
        conf = os.path.join(self.dir, f"lb-{n}-{self.run_id}.ini")
        with open(conf, "w") as f:
            f.write("\n".join(
                ["[global]", "workers = 1", "withdraw_delay = 3s", "shutdown_timeout = 5s", "",
                 "[admin]", "listen = 127.0.0.1:9900", "",
                 "[frontend web]", f"listen = 0.0.0.0:{PORT}", "pool = web", "",
                 "[pool web]", f"balance = {balance}"] +
                [f"server = {name} {addr}:9001" for name, addr in BACKENDS.items()] +
                ["check = http", "check_interval = 200ms", "check_timeout = 150ms", "rise = 1",
                 "fall = 1", "min_servers = 0", ""]))
        self.lbs[n] = self.tier.run_lb(self.ns[n], conf, self.lb_log(n), harness.LB_BIN, WAIT)

    def lb_log(self, n):
        return os.path.join(self.dir, f"lb-{n}-{self.run_id}.log")

    def ready_log(self, n):
        return os.path.join(self.dir, f"ready-{n}-{self.run_id}.log")

    def stop_all(self):
        for p in self.readys.values():
            self.tier.stop(p)
        for p in self.lbs.values():
            self.tier.stop(p, signal.SIGINT)        # SIGINT: no withdraw_delay
        for n, (_, sock) in self.node_birds.items():   # what a stopped script left
            tier.sh("ip", "netns", "exec", self.ns[n], "birdc", "-s", sock, "disable", "lb_vip")
        for n in NODES:
            self.assertIsNone(tier.sanitizer_report(self.lb_log(n), harness.SANITIZER_MARKERS),
                              f"lb on {n}: a sanitizer report")
        # the router forgets the nodes before the next case starts them
        wait_for(lambda: self.next_hops() == set(), WAIT, "the router to drop both nodes")

    # -- looking
    def route(self):
        return tier.sh("ip", "-n", self.ns["r"], "route", "show", f"{VIP}/32")

    def next_hops(self):
        hops = {f"{tier.SUBNET}.{h}": n for n, h in NODES.items()}
        return {hops[w] for w in self.route().split() if w in hops}

    def stats(self, n):
        out = tier.sh("ip", "netns", "exec", self.ns[n], "curl", "-sf", "--max-time", "2",
                      "http://127.0.0.1:9900/stats")
        return json.loads(out)

    def served(self, n):
        return sum(f["total_connections"] for f in self.stats(n)["frontends"])

    def client(self, secs, addr=VIP, source=None):
        args = [sys.executable, tier.__file__, "client", addr, str(PORT), str(secs)]
        p = self.tier.run(self.ns["c"], args + ([source] if source else []),
                          stdout=subprocess.PIPE)
        out, _ = p.communicate(timeout=secs + 30)
        return tier.client_results(out.decode())

    def during(self, fault, secs=4.0, at=1.0):
        """The client for secs, the fault at `at` s; returns (rows, t_fault)."""
        p = self.tier.run(self.ns["c"], [sys.executable, tier.__file__, "client", VIP,
                                         str(PORT), str(secs)], stdout=subprocess.PIPE)
        time.sleep(at)
        t_fault = time.time()
        fault()
        out, _ = p.communicate(timeout=secs + 30)
        return tier.client_results(out.decode()), t_fault

    def withdrawn_at(self, n):
        """When lb-bgp-ready on n last disabled the route (unix time)."""
        with open(self.ready_log(n)) as f:
            rows = [line.split() for line in f if " disable " in line]
        return float(rows[-1][0]) if rows else None

    # -- the cases
    def test_connections_spread_over_the_nodes(self):
        before = {n: self.served(n) for n in NODES}
        rows = self.client(2.0)
        self.assertEqual([r for _, r in rows if r.startswith("ERR")], [])
        got = {n: self.served(n) - before[n] for n in NODES}
        total = sum(got.values())
        print(f"measured: spread over the nodes: {got} of {total}", file=sys.stderr)
        self.assertEqual(total, len(rows))
        for n in NODES:
            self.assertGreater(got[n], total * 0.25, f"ECMP sent {got} (hash on the ports)")

    def test_balance_source_picks_the_same_backend_on_every_node(self):
        for n in NODES:
            self.tier.stop(self.lbs[n], signal.SIGINT)
            self.start_lb(n, balance="source")
        wait_for(lambda: self.next_hops() == {"a", "b"}, WAIT, "both nodes announced again")
        picked = {}
        for src in CLIENTS:
            names = set()
            for n, host in NODES.items():      # each node straight, then the VIP
                names |= {r for _, r in self.client(0.1, f"{tier.SUBNET}.{host}", src)}
            names |= {r for _, r in self.client(0.3, VIP, src)}
            self.assertEqual(len(names), 1, f"client {src} got {names}")
            picked[src] = names.pop()
        print(f"measured: balance = source: {picked}", file=sys.stderr)
        self.assertTrue(all(v in BACKENDS for v in picked.values()), picked)
        self.assertGreater(len(set(picked.values())), 1, f"one backend for all: {picked}")

    def test_sigterm_of_a_node_fails_no_connection(self):
        rows, t = self.during(lambda: self.lbs["a"].send_signal(signal.SIGTERM))
        failed = [(round(ft - t, 3), r) for ft, r in rows if r.startswith("ERR")]
        gone = self.withdrawn_at("a")
        print(f"measured: SIGTERM of a's lb: withdrawn {(gone - t) * 1000:.0f} ms after; "
              f"{len(failed)} of {len(rows)} connections failed", file=sys.stderr)
        self.assertEqual(failed, [])
        self.assertLess(gone - t, 1.0, "lb-bgp-ready withdrew a late")
        self.assertEqual(self.next_hops(), {"b"})
        self.assertEqual(self.lbs["a"].wait(timeout=WAIT), 0)
        with open(self.lb_log("a")) as f:
            self.assertIn("event=withdraw ", f.read())

    def test_sigkill_of_a_node(self):
        rows, t = self.during(lambda: self.lbs["a"].send_signal(signal.SIGKILL))
        failed = [ft for ft, r in rows if r.startswith("ERR")]
        recovered = (max(failed) - t) if failed else 0.0
        gone = self.withdrawn_at("a")
        print(f"measured: SIGKILL of a's lb: withdrawn {(gone - t) * 1000:.0f} ms after; "
              f"{len(failed)} of {len(rows)} connections failed, the last "
              f"{recovered * 1000:.0f} ms after", file=sys.stderr)
        # only connections hashed to a, only until the next poll (0.2 s)
        # and the BGP update
        self.assertLess(gone - t, 0.8)
        self.assertLess(recovered, gone - t + 0.3, f"failures after the withdrawal: {failed}")
        self.assertLess(len(failed), len(rows) / 2)
        self.assertEqual(self.next_hops(), {"b"})
        self.assertTrue(all(r in BACKENDS for ft, r in rows if ft > gone + 0.3), rows[-5:])

    def test_a_node_without_servers_withdraws_itself(self):
        # a loses its backends (a route that drops them, on a only)
        tier.sh("ip", "-n", self.ns["a"], "route", "add", "blackhole", f"{tier.SUBNET}.28/30")
        tier.sh("ip", "-n", self.ns["a"], "route", "add", "blackhole", f"{tier.SUBNET}.32/31")
        self.addCleanup(tier.sh, "ip", "-n", self.ns["a"], "route", "flush", "type", "blackhole")
        wait_for(lambda: self.next_hops() == {"b"}, WAIT, "a to withdraw")
        self.assertTrue(self.lbs["a"].poll() is None, "a's lb stopped")
        rows = self.client(1.0)
        self.assertEqual([r for _, r in rows if r.startswith("ERR")], [])


if __name__ == "__main__":
    harness.main()
