"""Connect retries: a refused backend connect is retried on another server
(up to `retries`) so the client never notices; once every server was tried,
the one tried longest ago is tried again after a short jittered pause, up
to `retries` more attempts in all; when every attempt fails the client
connection is closed and event=no_server is logged."""

import socket
from collections import Counter

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, fetch_name, free_port, request, wait_for


def rr_connect_failures(weights, dead, n, start, retries):
    """How many connects to the `dead` servers n clients in a row make
    through one worker's round robin (README: nginx's smooth weighted round
    robin; a retry picks among the servers its client has not tried, whose
    current weights stay frozen meanwhile; the worker's scan starts at
    server `start`)."""
    cw = [0] * len(weights)
    fails = 0
    for _ in range(n):
        tried = []
        while len(tried) <= retries:
            best, total = -1, 0
            for k in range(len(weights)):
                i = (start + k) % len(weights)
                if i in tried:
                    continue
                cw[i] += weights[i]
                total += weights[i]
                if best < 0 or cw[i] > cw[best]:
                    best = i
            cw[best] -= total
            tried.append(best)
            if best not in dead:
                break
            fails += 1
    return fails


def rr_failure_range(weights, dead, n, workers, retries):
    """(least, most) connect failures for n sequential clients spread over
    `workers` workers in any way the kernel may hash them (SO_REUSEPORT),
    whatever server each worker's scan starts at: each worker runs its own
    deterministic round robin on the clients it gets, in order."""
    per = [[rr_connect_failures(weights, dead, k, start, retries) for k in range(n + 1)]
           for start in range(len(weights))]
    # best[k] / worst[k]: over all the ways k clients split among the workers
    lo = [min(f[k] for f in per) for k in range(n + 1)]
    hi = [max(f[k] for f in per) for k in range(n + 1)]
    best, worst = lo, hi
    for _ in range(workers - 1):
        best = [min(best[k - j] + lo[j] for j in range(k + 1)) for k in range(n + 1)]
        worst = [max(worst[k - j] + hi[j] for j in range(k + 1)) for k in range(n + 1)]
    return best[n], worst[n]


class RetryTest(LbTestCase):

    def test_refused_server_is_skipped(self):
        dead = self.refused()
        b2, b3 = self.named("web2"), self.named("web3")
        lb = self.lb([("web1", dead), ("web2", b2), ("web3", b3)], retries=2, workers=2)
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

        # Each connect_failed is logged before its client's retry, so all
        # of them are in the log once the last client had its answer.
        lo, hi = rr_failure_range([1, 1, 1], {0}, 100, workers=2, retries=2)
        evs = lb.wait_event("connect_failed", count=lo, server="web1")
        self.assertEqual(len(lb.events("connect_failed")), len(evs),
                         "connect failures on live servers")
        ev = evs[0]
        self.assertEqual(ev.get("level"), "warn", ev)
        self.assertEqual(ev.get("frontend"), "fe", ev)
        self.assertEqual(ev.get("pool"), "p", ev)
        self.assertEqual(ev.get("addr"), dead.addr, ev)
        self.assertIn("refused", ev.get("error", "").lower(), ev)
        # With 3 servers of weight 1 in round robin, web1 is first in line
        # for every third client of each worker (second in line it never
        # is: the first pick, a live server, answers). The exact count
        # depends only on how the kernel split the 100 clients between the
        # 2 workers: 33 or 34 for any split.
        self.assertEqual((lo, hi), (33, 34))
        self.assertTrue(lo <= len(evs) <= hi,
                        f"{len(evs)} connect failures on web1 for 100 clients, expected "
                        f"{lo}..{hi}")
        self.assertEqual({e.get("attempt") for e in evs}, {"1"},
                         "web1 tried after another server")
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

    def test_retries_go_beyond_the_pool_size(self):
        # Two refused servers, retries = 4: five attempts per client,
        # alternating (the server tried longest ago goes next), with a
        # pause before each repeat of 50-150% of 25, 50, 100 ms.
        a, b = self.refused(), self.refused()
        lb = self.lb([("a", a), ("b", b)], retries=4, workers=1,
                     allowed_errors={"no_server"})
        clients = 6
        for i in range(clients):
            data, how = request(lb.port, timeout=10)
            self.assertEqual(data, b"", f"connection {i + 1}: got data")
        nos = lb.wait_event("no_server", count=clients)
        self.assertEqual({e.get("reason") for e in nos}, {"5 connect attempts failed"})
        fails = lb.wait_event("connect_failed", count=5 * clients)
        by_client = {}
        for e in fails:
            by_client.setdefault(e["client"], []).append(e)
        gaps = []
        for client, evs in by_client.items():
            self.assertEqual([e["attempt"] for e in evs], ["1", "2", "3", "4", "5"], client)
            names = [e["server"] for e in evs]
            self.assertIn(names, (list("ababa"), list("babab")), client)
            t = [harness.event_time(e) for e in evs]
            gaps.append([round((t[k + 1] - t[k]) * 1000) for k in range(4)])
        for g in gaps:
            # Each repeat waits at least half its base (the log's clock has
            # 1 ms steps).
            self.assertGreaterEqual(g[1], 12 - 1, gaps)
            self.assertGreaterEqual(g[2], 25 - 1, gaps)
            self.assertGreaterEqual(g[3], 50 - 1, gaps)
        self.assertGreater(len({tuple(g[1:]) for g in gaps}), 1,
                           f"the pauses are not jittered: {gaps}")

    def test_one_server_pool_is_retried_until_it_answers(self):
        # A pool of one server that refuses, then comes up while the
        # client's retries go on: the client is served by a later attempt.
        port = free_port()
        lb = self.lb([("only", f"{HOST}:{port}")], retries=8, workers=1)
        c = self.client(lb.port)
        c.sendall(b"hi\n")
        lb.wait_event("connect_failed", server="only", attempt="1")
        srv = socket.socket()
        self.addCleanup(srv.close)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((HOST, port))
        srv.listen(8)

        def serve():
            conn, _ = srv.accept()
            with conn:
                conn.sendall(b"late\n")
        t = harness.Thread(serve)
        t.start()
        got, how = harness.recv_until_eof(c, timeout=IO_TIMEOUT)
        self.assertEqual(got, b"late\n", how)
        t.join(IO_TIMEOUT)
        self.assertFalse(lb.events("no_server"))


if __name__ == "__main__":
    harness.main()
