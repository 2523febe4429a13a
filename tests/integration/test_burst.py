"""A burst of new connections loses no client.

5,000 clients open their connections within 0.1 s; lb (2 workers, 1 s
connect timeout, retries = 2) relays them to 2 servers whose listen backlog
is 128 and which accept at a steady pace (burst.py). Their accept queues
overflow and the kernel drops SYNs: a connect then waits for the kernel's
SYN retransmission, 1 s later. Every client must still be served.

What it guards: a connect timeout that cuts a connect just before its SYN
is re-sent (lb's SYN grace), retries that stop once each server was tried
once (redispatch), and, with max_connections=100 per server, the queue
that keeps the excess in lb instead of the servers' overflowing backlogs. Before both, lb lost 2,600-3,800 of the 5,000
clients here; HAProxy 2.6 (retries 2, option redispatch) 0-80.
"""

import admin_client
import burst
import harness
from harness import HOST, LbTestCase, free_port

CLIENTS = 5000
SPREAD_S = 0.1
BACKLOG = 128
ACCEPTS_PER_S = 20000


class BurstTest(LbTestCase):

    def backends(self, n=2, **kw):
        bs = [burst.BurstBackend(f"b{i}", backlog=BACKLOG, rate=ACCEPTS_PER_S, **kw)
              for i in range(n)]
        for b in bs:
            self.addCleanup(b.stop)
        return bs

    def config(self, backends, server_opts="", pool_keys=""):
        port, admin = free_port(), free_port()
        servers = "\n".join(f"server = {b.name} {b.addr} {server_opts}" for b in backends)
        text = f"""[global]
workers = 0
max_connections = 6000

[admin]
listen = {HOST}:{admin}

[frontend fe]
listen = {HOST}:{port}
pool = p

[pool p]
{servers}
connect_timeout = 1s
retries = 2
check = none
{pool_keys}
"""
        self.admin_port = admin
        return text, port

    def assertAllServed(self, out, backends):
        self.assertEqual(out["served"], CLIENTS, out)
        figures = [b.stop() for b in backends]
        self.assertEqual(sum(f["served"] for f in figures), CLIENTS, figures)
        for b, f in zip(backends, figures):
            self.assertGreater(f["served"], CLIENTS // 4, (b.name, figures))
        return figures

    def test_burst_loses_no_client(self):
        bs = self.backends()
        text, port = self.config(bs)
        lb = self.start_lb(text, port=port)
        out = burst.burst(port, CLIENTS, spread_s=SPREAD_S)
        print(f"burst: {out}")
        self.assertAllServed(out, bs)
        self.assertFalse(lb.events("no_server"))

    def test_burst_with_server_caps(self):
        # max_connections=100 per server: the excess waits in lb's queue
        # instead of overflowing the servers' backlogs, and no server ever
        # holds more than its cap open.
        bs = self.backends(hold_ms=20)
        text, port = self.config(bs, server_opts="max_connections=100",
                                 pool_keys="queue_timeout = 30s")
        lb = self.start_lb(text, port=port)
        out = burst.burst(port, CLIENTS, spread_s=SPREAD_S)
        q = admin_client.find_pool(admin_client.Admin(self.admin_port).stats(), "p")["queue"]
        print(f"burst with caps: {out}; queue {q}")
        figures = self.assertAllServed(out, bs)
        print(f"servers: {figures}")
        # The contract, not a speed: never more than the cap open at a
        # server (max_open counts what the backend accepted and had not
        # closed, a subset of lb's slots), and the queue was used. How close
        # to the cap the servers came depends on how fast lb is: 100 in the
        # optimised build, 44-68 under ASan and TSan, where lb's slots are
        # taken by connects still in the servers' accept queues.
        for b, f in zip(bs, figures):
            self.assertLessEqual(f["max_open"], 100, (b.name, figures))
        # The servers take 2 x 100 / 20 ms = 10,000 clients a second at the
        # most, the burst brings 50,000 a second: whatever lb's speed, most
        # clients find every slot taken, and without the queue they would be
        # refused (no_server) or pile into the servers' backlogs (max_open).
        self.assertGreater(q["queued_total"], 0, q)
        self.assertEqual((q["depth"], q["timeouts_total"], q["full_total"]), (0, 0, 0), q)
        self.assertFalse(lb.events("connect_failed"))
        self.assertFalse(lb.events("no_server"))


if __name__ == "__main__":
    harness.main()
