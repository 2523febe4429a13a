"""More workers than CPUs: the workers then take turns on the CPUs, a loop
turn at a time, giving the CPU up after 1 ms (lb_worker_take_turns), and
everything the data path does must still hold: relaying on every worker, a
reload (each worker switches generation), the drain after SIGTERM and the
exit once the last connection ends. The turns' effect on latency is
measured by the benchmark (README, Performance), not asserted here."""

import concurrent.futures
import os
import signal
import time

import harness
from harness import LbTestCase, roundtrip, sha256

# One more worker than the CPUs this test (and so lb) may run on, whatever
# the machine.
WORKERS = len(os.sched_getaffinity(0)) + 1


class WorkersSharedTest(LbTestCase):

    def test_relay_reload_and_drain(self):
        echo = self.echo()
        lb = self.lb([("echo", echo)], workers=WORKERS, shutdown_timeout="30s")
        ev = lb.wait_event("workers_over_cpus")[0]
        self.assertEqual(ev.get("workers"), str(WORKERS), ev)

        # Enough concurrent transfers that every worker's socket gets some
        # (SO_REUSEPORT spreads them by hash), each checked byte for byte.
        payload = os.urandom(256 * 1024)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: harness.echo_transfer(lb.port, payload),
                                    range(8 * WORKERS)))
        for data, how in results:
            self.assertEqual((len(data), how), (len(payload), "eof"))
            self.assertEqual(sha256(data), sha256(payload))

        # A reload: every worker takes the new generation in its turn.
        s = self.client(lb.port)
        self.assertEqual(roundtrip(s, b"before\n"), b"before\n")
        lb.send_signal(signal.SIGHUP)
        lb.wait_event("reload", generation="2")
        self.assertEqual(roundtrip(s, b"after reload\n"), b"after reload\n")
        data, how = harness.echo_transfer(lb.port, payload)
        self.assertEqual(sha256(data), sha256(payload), "a new connection after the reload")

        # SIGTERM: the open connection goes on; lb exits 0 once it ends.
        lb.send_signal(signal.SIGTERM)
        lb.wait_event("shutdown")
        self.assertEqual(roundtrip(s, b"draining\n"), b"draining\n")
        self.assertTrue(lb.running(), "lb exited with a connection still open")
        t_close = time.monotonic()
        s.close()
        self.assertEqual(lb.wait_exit(timeout=10), 0)
        # Each worker ends its loop as soon as its last session is gone: a
        # worker that missed its exit would hold lb until shutdown_timeout.
        self.assertLess(time.monotonic() - t_close, 2.0, "exit after the last connection")
        self.assertFalse(lb.events("shutdown_timeout"))


if __name__ == "__main__":
    harness.main()
