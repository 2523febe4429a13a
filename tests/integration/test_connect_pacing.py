"""A burst of clients reaches servers that accept at their own pace.

5,000 clients connect at once; lb relays them to 2 servers that listen with
a backlog of 128 and accept steadily, 4,000 a second each (0.6 s of
accepting in all; burst.py's backend). Every client must be served, its
request answered by a server, within 2 s of the burst.

What it guards: lb's connect pacing (README, "Connect pacing"). Without it,
lb opened every server side at once, the servers' accept queues overflowed
and dropped SYNs, the kernel re-sent them in one wave 1 s later, the wave
turned the servers to SYN cookies, and the handshakes those completed on
lb's side (counted as open) were dropped by the servers: those clients'
bytes waited for retransmissions that found room seconds later, or never.
"""

import threading
import time

import burst
import harness
from admin_client import Admin, find_server
from harness import HOST, LbTestCase, free_port

CLIENTS = 3000
BACKLOG = 128
ACCEPTS_PER_S = 20000           # each server: as fast as it goes
WITHIN_S = 2.0                  # the contract


class ConnectPacingTest(LbTestCase):

    def test_every_client_reaches_a_server_within_2s(self):
        servers = [burst.BurstBackend(f"s{i}", backlog=BACKLOG, rate=ACCEPTS_PER_S)
                   for i in range(2)]
        for s in servers:
            self.addCleanup(s.stop)
        port, admin = free_port(), free_port()
        lines = "\n".join(f"server = {s.name} {s.addr}" for s in servers)
        lb = self.start_lb(f"""[global]
workers = 2
max_connections = {CLIENTS + 100}

[admin]
listen = {HOST}:{admin}

[frontend fe]
listen = {HOST}:{port}
pool = p

[pool p]
{lines}
connect_timeout = 1s
retries = 2
check = none
""", port=port)
        out = burst.burst(port, CLIENTS, spread_s=0.0, deadline_s=10.0)
        figures = [s.stop() for s in servers]
        print(f"measured: {out}; servers {figures}")
        self.assertEqual(out["served"], CLIENTS, out)
        self.assertLessEqual(out["served_p100_s"], WITHIN_S, out)
        # Each server accepted exactly the connections it served: none that
        # lb gave up on after the server took it.
        self.assertEqual([f["accepted"] for f in figures], [f["served"] for f in figures])
        lb.assert_running()


def closed_request(port):
    """One client through lb: (data, how, seconds to EOF)."""
    t0 = time.monotonic()
    s = harness.connect(port, timeout=10)
    try:
        data, how = harness.recv_until_eof(s, timeout=10)
    finally:
        s.close()
    return data, how, time.monotonic() - t0


def run_clients(port, n):
    """n clients at once, each in its own thread; returns their results.

    The threads connect together (a barrier): started one by one on a busy
    machine, the first connects would time out before the last are made,
    and those would find the window free instead of full."""
    out = [None] * n
    together = threading.Barrier(n)

    def one(i):
        together.wait(timeout=10)
        out[i] = closed_request(port)
    threads = [harness.start_thread(one, i, name=f"client{i}") for i in range(n)]
    return threads, out


class PaceWaitersTest(LbTestCase):
    """The sessions that wait for their turn (the window is full: a server
    whose SYNs are dropped never answers) are not dialled yet: running out
    of connect_timeout there is not the server's failure, and a server that
    leaves rotation meanwhile is not dialled at all."""

    def test_timeout_while_waiting_is_not_the_servers_failure(self):
        black = self.blackhole()
        n = 16                  # the window starts at 4: 12 at least wait
        admin_port = free_port()
        text, port = harness.make_config([("black", black)], admin_port=admin_port,
                                         workers=1, connect_timeout="400ms", retries=0)
        lb = self.start_lb(text, port=port, allowed_errors={"no_server"})
        threads, out = run_clients(port, n)
        for t in threads:
            t.join()
        for data, how, dt in out:
            self.assertEqual(data, b"", out)
            self.assertIn(how, ("eof", "reset"), out)
        evs = lb.wait_event("connect_failed", count=n, server="black")
        waited = [e for e in evs if "waiting for its turn" in e.get("error", "")]
        dialled = [e for e in evs if e not in waited]
        self.assertGreaterEqual(len(waited), n - 8, evs)
        st = find_server(Admin(admin_port).stats(), "p", "black")
        # Only the connects whose SYN went out count against the server.
        self.assertEqual(st["connect_failures"], len(dialled), (st, len(waited)))

    def test_waiters_of_a_drained_server_go_to_another(self):
        black = self.blackhole()
        live = self.named("live")
        n = 20                  # round robin: 10 to black, 6 of them waiting
        admin_port = free_port()
        text, port = harness.make_config([("black", black), ("live", live)],
                                         admin_port=admin_port, workers=1,
                                         connect_timeout="3s", retries=2)
        self.start_lb(text, port=port)
        admin = Admin(admin_port)
        threads, out = run_clients(port, n)
        admin.wait_server("p", "black", lambda s: s["active_connections"] == n // 2,
                          10.0, "every client routed to black holding its slot")
        t0 = time.monotonic()
        r = admin.action("p", "black", "drain")
        self.assertEqual(r.status, 200, r)
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        self.assertEqual([o[0] for o in out], [b"live\n"] * n, out)
        # Unfixed, the waiters dialled black when their turn came (never:
        # the window stays full) and went to live at connect_timeout, 3 s.
        self.assertLess(took, 1.5, out)
        st = find_server(admin.stats(), "p", "black")
        self.assertEqual(st["connect_failures"], 0, st)


if __name__ == "__main__":
    harness.main()
