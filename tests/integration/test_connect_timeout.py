"""connect_timeout: a backend whose handshake never completes (its SYNs are
dropped) is given up after connect_timeout, and the next server is tried."""

import time

import harness
from harness import LbTestCase, request


class ConnectTimeoutTest(LbTestCase):

    def test_blackholed_server_is_skipped_after_timeout(self):
        black = self.blackhole()
        live = self.named("live")
        lb = self.lb([("black", black), ("live", live)], connect_timeout="300ms",
                     retries=2, workers=1)
        elapsed = []
        for i in range(6):
            t0 = time.monotonic()
            data, how = request(lb.port, timeout=10)
            dt = time.monotonic() - t0
            self.assertEqual((data, how), (b"live\n", "eof"),
                             f"connection {i + 1} after {dt:.2f}s")
            # Without a connect timeout the kernel would retry the SYN for
            # about two minutes.
            self.assertLess(dt, 5.0, f"connection {i + 1} took {dt:.2f}s")
            elapsed.append(dt)
        # Round robin over two servers: about half of the connections tried
        # "black" first and waited for the timeout.
        slow = [dt for dt in elapsed if dt >= 0.25]
        self.assertTrue(slow, f"no connection waited for the 300 ms timeout: {elapsed}")
        self.assertEqual(live.accepted, 6)

        evs = lb.wait_event("connect_failed", server="black")
        ev = evs[0]
        self.assertEqual(ev.get("addr"), black.addr, ev)
        self.assertIn("time", ev.get("error", "").lower(),
                      f"connect_failed should name a timeout: {ev}")

    def test_timeout_with_no_other_server_closes_client(self):
        black = self.blackhole()
        lb = self.lb([("black", black)], connect_timeout="300ms", retries=0,
                     allowed_errors={"no_server"})
        t0 = time.monotonic()
        data, how = request(lb.port, timeout=10)
        dt = time.monotonic() - t0
        self.assertEqual(data, b"")
        self.assertIn(how, ("eof", "reset"), f"client still open after {dt:.2f}s")
        self.assertGreaterEqual(dt, 0.25, "lb gave up before connect_timeout")
        self.assertLess(dt, 5.0, "lb waited far longer than connect_timeout = 300ms")
        ev = lb.wait_event("connect_failed", server="black")[0]
        self.assertIn("time", ev.get("error", "").lower(), ev)
        lb.wait_event("no_server", pool="p")


if __name__ == "__main__":
    harness.main()
