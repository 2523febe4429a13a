"""Connect retries: a refused backend connect is retried on another server
(up to `retries`) so the client never notices; when every attempt fails the
client connection is closed and event=no_server is logged."""

from collections import Counter

import harness
from harness import LbTestCase, fetch_name, request


class RetryTest(LbTestCase):

    def test_refused_server_is_skipped(self):
        dead = self.refused()
        b2, b3 = self.named("web2"), self.named("web3")
        lb = self.lb([("web1", dead), ("web2", b2), ("web3", b3)], retries=2)
        replies = Counter()
        for i in range(100):
            data, how = request(lb.port)
            self.assertIn(data, (b"web2\n", b"web3\n"),
                          f"connection {i + 1}: client got {data!r} ({how})")
            self.assertEqual(how, "eof", f"connection {i + 1}")
            replies[data] += 1
        self.assertEqual(sum(replies.values()), 100)
        self.assertEqual(b2.accepted + b3.accepted, 100)
        self.assertGreater(b2.accepted, 0)
        self.assertGreater(b3.accepted, 0)

        evs = lb.wait_event("connect_failed", server="web1")
        ev = evs[0]
        self.assertEqual(ev.get("level"), "warn", ev)
        self.assertEqual(ev.get("frontend"), "fe", ev)
        self.assertEqual(ev.get("pool"), "p", ev)
        self.assertEqual(ev.get("addr"), dead.addr, ev)
        self.assertIn("refused", ev.get("error", "").lower(), ev)
        self.assertTrue(ev.get("attempt", "").isdigit(), f"attempt=N missing: {ev}")
        # With 3 servers in round robin, web1 is first in line about a third
        # of the time (or second, after a live server: never tried then).
        self.assertGreaterEqual(len(evs), 10, "connect_failed events for 100 connections")
        self.assertFalse(lb.events("no_server"), "a client was left without a server")

    def test_all_refused_closes_client(self):
        dead = [self.refused() for _ in range(3)]
        lb = self.lb([(f"web{i + 1}", d) for i, d in enumerate(dead)], retries=2,
                     allowed_errors={"no_server"})
        for i in range(3):
            data, how = request(lb.port, timeout=10)
            self.assertEqual(data, b"", f"connection {i + 1}: got data")
            self.assertIn(how, ("eof", "reset"),
                          f"connection {i + 1}: client connection left open")
        evs = lb.wait_event("no_server", count=3)
        ev = evs[0]
        self.assertEqual(ev.get("level"), "error", ev)
        self.assertEqual((ev.get("frontend"), ev.get("pool")), ("fe", "p"), ev)
        self.assertTrue(ev.get("client", "").startswith("127.0.0.1:"), ev)
        self.assertIn("reason", ev)
        # retries = 2: three attempts for each client, all refused.
        fails = lb.wait_event("connect_failed", count=9)
        self.assertEqual({e.get("server") for e in fails}, {"web1", "web2", "web3"})
        # lb is still serving after that.
        lb.assert_running()
        self.assertFalse(harness.is_refused(lb.port), "lb stopped listening")

    def test_no_retries_lets_clients_fail(self):
        # retries = 0 and one refused server out of two: about half of the
        # clients hit it and are closed. Proves that retries are what saved
        # them in test_refused_server_is_skipped.
        dead = self.refused()
        live = self.named("web2")
        lb = self.lb([("web1", dead), ("web2", live)], retries=0, workers=1,
                     allowed_errors={"no_server"})
        ok = failed = 0
        for i in range(20):
            data, how = request(lb.port, timeout=10)
            if data == b"web2\n":
                ok += 1
            else:
                self.assertEqual(data, b"", f"connection {i + 1}: unexpected reply")
                self.assertIn(how, ("eof", "reset"), f"connection {i + 1} left open")
                failed += 1
        self.assertGreater(failed, 0, "no client failed although retries = 0")
        self.assertGreater(ok, 0, "no client succeeded")
        evs = lb.wait_event("connect_failed", count=failed, server="web1")
        self.assertEqual(len(evs), failed, "one connect_failed per failed client")
        self.assertEqual(live.accepted, ok)

    def test_retry_reaches_server_listed_after_failures(self):
        # Two refused servers in front of one live server, retries = 2:
        # every client gets through, whatever the cursor's starting point.
        d1, d2 = self.refused(), self.refused()
        live = self.named("web3")
        lb = self.lb([("web1", d1), ("web2", d2), ("web3", live)], retries=2)
        for i in range(30):
            self.assertEqual(fetch_name(lb.port), "web3", f"connection {i + 1}")
        self.assertEqual(live.accepted, 30)


if __name__ == "__main__":
    harness.main()
