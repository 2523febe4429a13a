"""Per-server max_connections and the pool's queue.

A server option max_connections=N caps the connections lb keeps open to
it; when every server in rotation is at its cap, new clients wait in the
pool's queue (pool keys queue_max, queue_timeout), oldest first across
workers, and each slot that frees goes to the oldest waiter. A waiter that
waits queue_timeout is closed with event=queue_timeout; one that finds
queue_max waiting is closed at once (event=no_server reason="queue full").
A server coming back into rotation serves the queue at once.

The backend here holds each connection until its client closes and reports
the first line each client sends, so the order of service is visible."""

import select
import socket
import threading
import time

import admin_client
import harness
from harness import IO_TIMEOUT, LbTestCase, TIMER_TICK, read_line


class QueueTest(LbTestCase):

    def holding_backend(self, name):
        """Reports each client's first line, then holds the connection
        until the client closes it. b.max_open: the most connections lb
        had open to it at once, seen at each accept (one whose close has
        arrived but whose thread did not read it yet is not open)."""
        lock, conns = threading.Lock(), set()

        def is_closed_by_peer(c):
            try:
                return select.select([c], [], [], 0)[0] and \
                    c.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
            except OSError:
                return True

        def handler(backend, conn):
            with lock:
                open_now = 1 + sum(1 for c in conns if not is_closed_by_peer(c))
                backend.max_open = max(backend.max_open, open_now)
                conns.add(conn)
            try:
                line = read_line(conn)
                backend.report(line.strip().decode())
                conn.sendall(f"{name}\n".encode())
                harness.drain_until_eof(conn)
            finally:
                with lock:
                    conns.discard(conn)
        b = self.custom(handler, name=name)
        b.max_open = 0
        return b

    def start(self, servers, keys=None, allowed_errors=()):
        keys = dict(keys or {})
        lb = admin_client.start_lb(self, [("p", servers, keys)], workers=2,
                                   allowed_errors=allowed_errors)
        self.port = lb.fports["fe_p"]
        return lb

    def open(self, tag):
        c = self.client(self.port)
        c.sendall(f"{tag}\n".encode())
        return c

    def wait_depth(self, lb, depth):
        return lb.admin.wait_stats(
            lambda st: admin_client.find_pool(st, "p")["queue"]["depth"] == depth,
            IO_TIMEOUT, f"queue depth {depth}")

    def test_slots_go_to_the_oldest_waiter(self):
        b = self.holding_backend("s")
        lb = self.start([("s", b, "max_connections=1")], {"queue_timeout": "30s"})
        first = self.open("c0")
        self.assertEqual(b.next_report(), "c0")
        waiting = []
        for i in range(1, 6):
            waiting.append(self.open(f"c{i}"))
            self.wait_depth(lb, i)      # in this order, whichever worker
        first.close()
        order = []
        for c in waiting:
            order.append(b.next_report())
            c.close()
        self.assertEqual(order, [f"c{i}" for i in range(1, 6)])
        self.assertEqual(b.max_open, 1, "the backend had more than its cap open")
        st = lb.admin.stats()
        q = admin_client.find_pool(st, "p")["queue"]
        self.assertEqual((q["depth"], q["queued_total"], q["timeouts_total"]), (0, 5, 0), q)
        self.assertEqual(admin_client.find_server(st, "p", "s")["max_connections"], 1)
        self.assertEqual(admin_client.stats_problems(st), [])
        m = lb.admin.metrics()
        self.assertEqual(m.value("lb_pool_queued_total", pool="p"), 5)
        self.assertEqual(m.value("lb_pool_queue_depth", pool="p"), 0)
        self.assertEqual(m.value("lb_pool_queue_wait_seconds_count", pool="p"), 5)
        self.assertEqual(m.value("lb_server_max_connections", pool="p", server="s"), 1)

    def test_queue_timeout_closes_the_client(self):
        b = self.holding_backend("s")
        lb = self.start([("s", b, "max_connections=1")], {"queue_timeout": "300ms"},
                        allowed_errors=("queue_timeout",))
        holder = self.open("holder")
        self.assertEqual(b.next_report(), "holder")
        t0 = time.monotonic()
        c = self.open("late")
        got, how = harness.recv_until_eof(c, timeout=IO_TIMEOUT)
        waited = time.monotonic() - t0
        self.assertEqual(got, b"", how)
        self.assertGreaterEqual(waited, 0.3 - TIMER_TICK)
        self.assertLess(waited, 0.3 + 0.5, "closed long after queue_timeout")
        ev = lb.wait_event("queue_timeout")[0]
        self.assertEqual((ev.get("level"), ev.get("pool")), ("error", "p"), ev)
        self.assertGreaterEqual(int(ev["waited_ms"]), 300 - 1, ev)
        q = admin_client.find_pool(lb.admin.stats(), "p")["queue"]
        self.assertEqual((q["depth"], q["timeouts_total"], q["queued_total"]), (0, 1, 1), q)
        self.assertEqual(b.accepted, 1, "the timed-out client reached the server")
        holder.close()

    def test_queue_max_refuses_at_once(self):
        b = self.holding_backend("s")
        lb = self.start([("s", b, "max_connections=1")],
                        {"queue_max": 2, "queue_timeout": "30s"},
                        allowed_errors=("no_server",))
        held = [self.open("c0")]
        self.assertEqual(b.next_report(), "c0")
        held += [self.open("c1"), self.open("c2")]
        self.wait_depth(lb, 2)
        t0 = time.monotonic()
        got, how = harness.recv_until_eof(self.open("c3"), timeout=IO_TIMEOUT)
        self.assertEqual(got, b"", how)
        self.assertLess(time.monotonic() - t0, 1.0, "a refused client was kept waiting")
        ev = lb.wait_event("no_server")[0]
        self.assertEqual((ev.get("reason"), ev.get("queue_max")), ("queue full", "2"), ev)
        q = admin_client.find_pool(lb.admin.stats(), "p")["queue"]
        self.assertEqual((q["depth"], q["full_total"]), (2, 1), q)
        for c in held:
            c.close()

    def test_server_back_in_rotation_serves_the_queue(self):
        a, b = self.holding_backend("a"), self.holding_backend("b")
        lb = self.start([("a", a, "max_connections=1"), ("b", b, "max_connections=1")],
                        {"queue_timeout": "30s"})
        self.assertEqual(lb.admin.action("p", "b", "disable").status, 200)
        holder = self.open("holder")
        self.assertEqual(a.next_report(), "holder")
        waiter = self.open("waiter")
        self.wait_depth(lb, 1)
        self.assertEqual(lb.admin.action("p", "b", "enable").status, 200)
        # served by b while a's only slot is still taken
        self.assertEqual(b.next_report(timeout=2.0), "waiter")
        self.assertEqual(harness.read_line(waiter), b"b\n")
        self.wait_depth(lb, 0)
        holder.close()
        waiter.close()

    def test_shutdown_closes_queued_clients(self):
        b = self.holding_backend("s")
        lb = self.start([("s", b, "max_connections=1")], {"queue_timeout": "30s"})
        holder = self.open("holder")
        self.assertEqual(b.next_report(), "holder")
        waiters = [self.open(f"w{i}") for i in range(3)]
        self.wait_depth(lb, 3)
        lb.send_signal(15)
        for c in waiters:
            got, how = harness.recv_until_eof(c, timeout=IO_TIMEOUT)
            self.assertNotIn(b"s\n", got)
        lb.wait_exit()
        holder.close()


if __name__ == "__main__":
    harness.main()
