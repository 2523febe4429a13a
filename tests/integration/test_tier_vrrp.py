"""An active/standby pair of lb nodes with keepalived (VRRP), in network
namespaces made here (tier.py): nodes a (master, priority 150) and b
(priority 100) on one bridge, each with its own backend and lb, and
keepalived run from deploy/keepalived/keepalived.conf (its interface,
addresses and priority replaced), tracking GET /ready; a client node c
connecting to the virtual address every 10 ms.

- SIGTERM of the master's lb (withdraw_delay = 3s): /ready turns 503, the
  address moves to b, and no new connection is refused or times out: the
  master serves what still reaches it. One caught by the move itself,
  accepted by a and its next packet sent to b, is reset by b (it knows
  nothing of it): at most one, in the move's moment;
- SIGKILL of the master's lb: connections fail until keepalived's next
  look at /ready; the time until b serves is measured;
- the master's only backend fails: its lb is not ready (the pool has no
  server in rotation) and the address moves to b.
Skipped, with the reason, without root, `ip` or keepalived."""

import itertools
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
WAIT = 15.0
WHY_NOT = tier.missing()
RUNS = itertools.count(1)


def keepalived_conf(iface, priority, name):
    with open(os.path.join(harness.SOURCE_DIR, "deploy", "keepalived", "keepalived.conf")) as f:
        text = f.read()
    for old, new in (("interface eth0", f"interface {iface}"),
                     ("priority 150", f"priority {priority}"),
                     ("router_id lb-a", f"router_id lb-{name}"),
                     ("10.0.0.100/24", f"{VIP}/24")):
        assert old in text, old
        text = text.replace(old, new)
    return text


@harness.skip_if(WHY_NOT is not None, WHY_NOT or "")
class VrrpTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.tier = tier.Tier()
        cls.dir = harness.make_tmpdir()
        try:
            cls.ns = {"a": cls.tier.node("a", 11), "b": cls.tier.node("b", 12),
                      "c": cls.tier.node("c", 20)}
            for n in ("a", "b"):
                ns = cls.ns[n]
                # the virtual address on lo too, ARP only for an interface's
                # own (deploy/keepalived/keepalived.conf says why)
                tier.sh("ip", "-n", ns, "addr", "add", f"{VIP}/32", "dev", "lo")
                tier.sh("ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
        except BaseException:
            cls.tier.delete()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.tier.delete()

    def setUp(self):
        super().setUp()
        self.run_id = next(RUNS)            # the files of this case
        self.lbs, self.kas, self.backends = {}, {}, {}
        for n, prio in (("a", 150), ("b", 100)):
            self.backends[n] = self.tier.run(self.ns[n], [sys.executable, tier.__file__,
                                                          "backend", n, "9001"])
            self.start_lb(n)
            conf = os.path.join(self.dir, f"keepalived-{n}-{self.run_id}.conf")
            with open(conf, "w") as f:
                f.write(keepalived_conf(f"{n}0", prio, n))
            self.kas[n] = self.tier.run(
                self.ns[n], ["keepalived", "-n", "-l", "-D", "-P", "-f", conf,
                             "-p", os.path.join(self.dir, f"ka-{n}-{self.run_id}.pid"),
                             "-r", os.path.join(self.dir, f"ka-{n}-{self.run_id}.vrrp.pid")],
                os.path.join(self.dir, f"keepalived-{n}-{self.run_id}.log"))
        self.addCleanup(self.stop_all)
        wait_for(lambda: self.tier.has_addr(self.ns["a"], "a0", VIP), WAIT,
                 "a to hold the virtual address")
        wait_for(lambda: [r for _, r in self.client(0.05)][-1:] == ["a"], WAIT,
                 "the virtual address to answer from a")

    def start_lb(self, n):
        conf = os.path.join(self.dir, f"lb-{n}-{self.run_id}.ini")
        with open(conf, "w") as f:
            f.write("\n".join([
                "[global]", "workers = 1", "withdraw_delay = 3s", "shutdown_timeout = 5s", "",
                "[admin]", "listen = 127.0.0.1:9900", "",
                "[frontend web]", f"listen = 0.0.0.0:{PORT}", "pool = web", "",
                "[pool web]", "server = be 127.0.0.1:9001", "check = http",
                "check_interval = 200ms", "check_timeout = 150ms", "rise = 1", "fall = 1",
                "min_servers = 0", ""]))
        self.lbs[n] = self.tier.run_lb(self.ns[n], conf, self.lb_log(n), harness.LB_BIN, WAIT)

    def lb_log(self, n):
        return os.path.join(self.dir, f"lb-{n}-{self.run_id}.log")

    def stop_all(self):
        for p in self.kas.values():
            self.tier.stop(p)
        for p in self.lbs.values():
            self.tier.stop(p, signal.SIGINT)        # SIGINT: no withdraw_delay
        for p in self.backends.values():
            self.tier.stop(p)
        for n in ("a", "b"):
            self.assertIsNone(tier.sanitizer_report(self.lb_log(n), harness.SANITIZER_MARKERS),
                              f"lb on {n}: a sanitizer report")

    def client(self, secs):
        """Runs the client on c for secs; [(time, result)]."""
        p = self.tier.run(self.ns["c"], [sys.executable, tier.__file__, "client", VIP,
                                         str(PORT), str(secs)], stdout=subprocess.PIPE)
        out, _ = p.communicate(timeout=secs + 30)
        return tier.client_results(out.decode())

    def failover(self, fault, secs=4.0):
        """Starts the client, makes the fault 1 s in; returns (rows, t_fault)."""
        p = self.tier.run(self.ns["c"], [sys.executable, tier.__file__, "client", VIP,
                                         str(PORT), str(secs)], stdout=subprocess.PIPE)
        time.sleep(1.0)
        t_fault = time.time()
        fault()
        out, _ = p.communicate(timeout=secs + 30)
        return tier.client_results(out.decode()), t_fault

    def summary(self, what, rows, t_fault):
        first_b = next((t for t, r in rows if r == "b" and t >= t_fault), None)
        failed = [(round(t - t_fault, 3), r) for t, r in rows if r.startswith("ERR")]
        print(f"measured: {what}: b serves {((first_b or 0) - t_fault) * 1000:.0f} ms after "
              f"the fault; {len(failed)} of {len(rows)} connections failed "
              f"(from {failed[0][0] if failed else '-'} s to {failed[-1][0] if failed else '-'} s)",
              file=sys.stderr)
        self.assertIsNotNone(first_b, f"{what}: b never served; {rows[-3:]}")
        return first_b - t_fault, failed

    def test_sigterm_of_the_master_drops_nothing(self):
        rows, t = self.failover(lambda: self.lbs["a"].send_signal(signal.SIGTERM))
        moved, failed = self.summary("SIGTERM of the master's lb", rows, t)
        self.assertLessEqual(len(failed), 1, failed)
        for ft, r in failed:
            self.assertEqual(r, "ERR:ConnectionResetError", failed)
            self.assertTrue(moved - 0.2 <= ft <= moved, f"a failure outside the move: {failed}")
        self.assertLess(moved, 3.0, "the address moved after withdraw_delay")
        self.assertEqual(self.lbs["a"].wait(timeout=WAIT), 0)
        self.assertEqual(rows[-1][1], "b")

    def test_sigkill_of_the_master(self):
        rows, t = self.failover(lambda: self.lbs["a"].send_signal(signal.SIGKILL))
        moved, failed = self.summary("SIGKILL of the master's lb", rows, t)
        # keepalived looks at /ready once a second (its shortest interval)
        self.assertLess(moved, 2.5, f"b served {moved:.2f} s after the master's lb died")
        self.assertTrue(all(ft <= moved + 0.1 for ft, _ in failed), failed)
        self.assertEqual(rows[-1][1], "b")

    def test_master_without_servers_withdraws(self):
        rows, t = self.failover(lambda: self.backends["a"].send_signal(signal.SIGKILL))
        moved, failed = self.summary("the master's only backend died", rows, t)
        self.assertLess(moved, 3.0)
        self.assertEqual(rows[-1][1], "b")
        self.assertTrue(self.lbs["a"].poll() is None, "the master's lb stopped")


if __name__ == "__main__":
    harness.main()
