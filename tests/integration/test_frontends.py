"""Start-up and routing: every frontend listens on its address and sends its
clients to its own pool; the start-up log says what lb runs with."""

import os

import harness
from harness import LbTestCase, fetch_name


class FrontendsTest(LbTestCase):

    def _two_frontends(self, workers):
        a1, b1 = self.named("a1"), self.named("b1")
        admin, pa, pb = harness.free_port(), harness.free_port(), harness.free_port()
        text = "\n".join([
            "[global]", f"workers = {workers}", "shutdown_timeout = 3s", "",
            "[admin]", f"listen = 127.0.0.1:{admin}", "",
            "[frontend fa]", f"listen = 127.0.0.1:{pa}", "pool = pa", "",
            "[frontend fb]", f"listen = 127.0.0.1:{pb}", "pool = pb", "",
            "[pool pa]", f"server = a1 {a1.addr}", "check = none", "",
            "[pool pb]", f"server = b1 {b1.addr}", "check = none", "",
        ])
        lb = self.start_lb(text)
        return lb, pa, pb, a1, b1

    def test_each_frontend_uses_its_pool(self):
        lb, pa, pb, a1, b1 = self._two_frontends(2)
        for _ in range(10):
            self.assertEqual(fetch_name(pa), "a1")
            self.assertEqual(fetch_name(pb), "b1")
        self.assertEqual((a1.accepted, b1.accepted), (10, 10))

    def test_startup_log(self):
        lb, pa, pb, a1, b1 = self._two_frontends(2)
        start = lb.events("start")
        self.assertEqual(len(start), 1, lb.log_tail())
        self.assertEqual(start[0].get("workers"), "2", start[0])
        self.assertEqual(start[0].get("config"), lb.config_path, start[0])
        self.assertTrue(start[0].get("version"), start[0])
        for name, port in (("fa", pa), ("fb", pb)):
            evs = lb.events("listen", frontend=name)
            self.assertTrue(evs, f"no event=listen for frontend {name}\n{lb.log_tail()}")
            self.assertEqual(evs[0].get("addr"), f"127.0.0.1:{port}", evs[0])
        self.assertEqual(len(lb.events("ready")), 1)
        # Order: start, then the listeners, then ready.
        names = [e["event"] for e in lb.events()]
        self.assertLess(names.index("start"), names.index("listen"), names)
        last_listen = len(names) - 1 - names[::-1].index("listen")
        self.assertLess(last_listen, names.index("ready"), names)

    def test_workers_zero_means_one_per_cpu(self):
        lb, pa, pb, a1, b1 = self._two_frontends(0)
        n = int(lb.events("start")[0].get("workers", "0"))
        cpus = {os.cpu_count(), len(os.sched_getaffinity(0))}
        self.assertIn(n, cpus, "workers = 0 should start one worker per CPU")
        self.assertEqual(fetch_name(pa), "a1")

    def test_single_worker(self):
        lb, pa, pb, a1, b1 = self._two_frontends(1)
        self.assertEqual(lb.events("start")[0].get("workers"), "1")
        for _ in range(5):
            self.assertEqual(fetch_name(pb), "b1")


if __name__ == "__main__":
    harness.main()
