"""A reload that adds the first checked pool starts the health module while
workers already serve, and fail connects that ask it for probes
(observe_errors). The module is shown to the workers only once it is built
and running: no client is lost, the first failed connect after the reload
asks for a probe, and the ThreadSanitizer build sees no race between the
reload creating the module and the workers reading it (the old code
assigned a plain pointer there)."""

import threading
import time

import harness
from harness import IO_TIMEOUT, LbTestCase, free_port, wait_for
from test_reload_traffic import config_text, sighup_reload, start_lb, write_atomic

CLIENTS_MAX = 400
DURATION_MAX = 20.0


class ReloadFirstCheckTest(LbTestCase):

    def text(self, good, bad, check):
        keys = {"check": check, "observe_errors": 1, "retries": 1,
                "check_interval": "5s", "fall": 3}
        return config_text(self.admin_port, [("fe", self.port, "p")],
                           [("p", [("good", good), ("bad", bad)], keys)])

    def test_first_checked_pool_added_under_failing_traffic(self):
        self.admin_port, self.port = free_port(), free_port()
        good, bad = self.named("good"), self.refused()
        lb = start_lb(self, self.text(good, bad, "none"), self.admin_port)
        stop = threading.Event()
        answers, lost = [], []

        def clients():
            t_end = time.monotonic() + DURATION_MAX
            while not stop.is_set() and len(answers) + len(lost) < CLIENTS_MAX \
                    and time.monotonic() < t_end:
                try:
                    answers.append(harness.fetch_name(self.port))
                except OSError as e:
                    lost.append(repr(e))
        t = harness.Thread(clients)
        t.start()
        try:
            # traffic with refused connects on both sides of the reload
            wait_for(lambda: len(lb.events("connect_failed", server="bad")) >= 20,
                     IO_TIMEOUT, "failed connects before the reload")
            write_atomic(lb.config_path, self.text(good, bad, "tcp"))
            sighup_reload(lb, "2")
            lb.wait_event("health_start")
            lb.wait_event("observe_probe", server="bad")
        finally:
            stop.set()
            t.join()
        print(f"\n{len(answers)} clients answered, {len(lost)} lost")
        self.assertEqual(lost, [])
        self.assertEqual(set(answers), {"good"})


if __name__ == "__main__":
    harness.main()
