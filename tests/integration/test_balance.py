"""Balancing algorithms, seen from the backends: roundrobin follows the
weights exactly, leastconn fills the server with the fewest active
connections, source pins a client address to one server, random reaches
every server."""

import socket
from collections import Counter

import harness
from harness import LbTestCase, fetch_name, wait_for


class BalanceTest(LbTestCase):

    def test_roundrobin_weights_exact(self):
        # One worker: the smooth weighted round robin cursor is per worker,
        # so only one cursor gives an exact split over sequential connections.
        b1, b2, b3 = self.named("web1"), self.named("web2"), self.named("web3")
        lb = self.lb([("web1", b1, 3), ("web2", b2, 1), ("web3", b3, 1)],
                     balance="roundrobin", workers=1)
        replies = Counter(fetch_name(lb.port) for _ in range(50))
        self.assertEqual(replies, Counter(web1=30, web2=10, web3=10),
                         "replies seen by the clients")
        wait_for(lambda: b1.accepted + b2.accepted + b3.accepted == 50, 5,
                 "the backends to count 50 connections")
        self.assertEqual((b1.accepted, b2.accepted, b3.accepted), (30, 10, 10),
                         "connections accepted by web1, web2, web3")

    def test_roundrobin_weights_two_workers(self):
        # Each worker has its own cursor, so the split is only close to the
        # weights; every server must still get its share.
        b1, b2, b3 = self.named("web1"), self.named("web2"), self.named("web3")
        lb = self.lb([("web1", b1, 3), ("web2", b2, 1), ("web3", b3, 1)],
                     balance="roundrobin", workers=2)
        replies = Counter(fetch_name(lb.port) for _ in range(50))
        self.assertEqual(sum(replies.values()), 50)
        for name in ("web1", "web2", "web3"):
            self.assertGreater(replies[name], 0, f"{name} got no connection: {replies}")
        self.assertGreater(replies["web1"], replies["web2"], f"weights ignored: {replies}")
        self.assertGreater(replies["web1"], replies["web3"], f"weights ignored: {replies}")
        self.assertTrue(24 <= replies["web1"] <= 36, f"web1 far from 30/50: {replies}")

    def _open_held(self, port, backends):
        """Opens a connection that a hold-backend keeps open; returns
        (socket, server name). Waits until the backends count it, so the
        next pick sees this connection as active."""
        before = sum(b.accepted for b in backends)
        s = self.client(port)
        name = harness.read_line(s).decode().strip()
        self.assertTrue(name, "no name from the backend")
        wait_for(lambda: sum(b.accepted for b in backends) == before + 1, 5,
                 "the backend to accept the connection")
        return s, name

    def _close_held(self, s, backend):
        """Closes a held connection and waits until lb has ended the session
        (the client sees lb's EOF after the backend closed its side)."""
        active = backend.active
        s.shutdown(socket.SHUT_WR)
        data, how = harness.recv_until_eof(s, timeout=5)
        self.assertEqual((data, how), (b"", "eof"), "closing a held connection")
        s.close()
        wait_for(lambda: backend.active == active - 1, 5,
                 f"backend {backend.name} to see the close")

    def test_leastconn_fills_least_loaded(self):
        # One worker so that lb has ended a session before the client sees
        # EOF and opens the next one (no race on the active count).
        names = ("web1", "web2", "web3")
        backends = {n: self.named(n, hold=True) for n in names}
        lb = self.lb([(n, backends[n]) for n in names], balance="leastconn", workers=1)
        bl = list(backends.values())

        held = {n: [] for n in names}
        for i in range(6):
            s, name = self._open_held(lb.port, bl)
            held[name].append(s)
        self.assertEqual({n: len(v) for n, v in held.items()},
                         {"web1": 2, "web2": 2, "web3": 2},
                         "6 held connections over 3 servers")

        # Free both slots of one server: the next two connections must both
        # go there (round robin would spread them over two servers).
        for s in held["web3"]:
            self._close_held(s, backends["web3"])
        held["web3"] = []
        for i in range(2):
            s, name = self._open_held(lb.port, bl)
            self.assertEqual(name, "web3",
                             f"connection {i + 1} after freeing web3 went to {name}")
            held["web3"].append(s)

        # Several rounds: free one connection of a changing server, the next
        # connection must go to exactly that server.
        for victim in ("web1", "web2", "web1", "web3"):
            self._close_held(held[victim].pop(), backends[victim])
            s, name = self._open_held(lb.port, bl)
            self.assertEqual(name, victim, f"after freeing a slot on {victim}")
            held[name].append(s)

    def test_source_pins_client_address(self):
        names = ("web1", "web2", "web3")
        backends = [self.named(n) for n in names]
        lb = self.lb([(n, b) for n, b in zip(names, backends)], balance="source")

        same = Counter(fetch_name(lb.port) for _ in range(30))
        self.assertEqual(len(same), 1,
                         f"30 connections from 127.0.0.1 spread over {same}")

        # Different client addresses (Linux routes all of 127/8 to lo) spread
        # over the servers, and each address sticks to its server.
        seen = {}
        for i in range(2, 32):
            src = f"127.0.0.{i}"
            first = fetch_name(lb.port, source=src)
            again = [fetch_name(lb.port, source=src) for _ in range(2)]
            self.assertEqual(again, [first, first], f"client {src} moved between servers")
            seen[src] = first
        spread = Counter(seen.values())
        self.assertGreaterEqual(len(spread), 2,
                                f"30 client addresses all hashed to one server: {spread}")

    def test_random_reaches_every_server(self):
        names = ("web1", "web2", "web3")
        backends = [self.named(n) for n in names]
        lb = self.lb([(n, b) for n, b in zip(names, backends)], balance="random")
        replies = Counter(fetch_name(lb.port) for _ in range(200))
        self.assertEqual(sum(replies.values()), 200)
        for n in names:
            # Expected ~67 each; 5 is far in the tail of any sane random pick.
            self.assertGreaterEqual(replies[n], 5, f"{n} got almost no traffic: {replies}")
        self.assertEqual([b.accepted for b in backends],
                         [replies[n] for n in names], "backend counts vs replies")


if __name__ == "__main__":
    harness.main()
