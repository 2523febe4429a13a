"""The mysql, pgsql and redis checks against the real servers of Debian's
packages (MariaDB 10.11, PostgreSQL 15, Redis 7), each started once for this
file on 127.0.0.1 with a temporary data directory (db_servers.py), and
against fake servers that send garbage, a truncated packet or an endless
one.

The fault table of the README, for databases: a crash (SIGKILL) takes a
server out through every check; a hang (SIGSTOP: the kernel still completes
the handshake) only through the protocol check, while a `check = tcp` pool
on the same server keeps it in rotation. With interval I, fall K and timeout
T the server leaves between (K-1)*I and K*I+T after the fault. Run by hand,
each case prints the latencies it measured ("measured: ...")."""

import sys
import time

import harness
from harness import HC_SLACK, TIMER_TICK, LbTestCase, event_time, wait_for
import db_servers
from db_servers import MariaDb, Postgres, Redis

I, T, K = 0.3, 0.2, 2
KEYS = {"check_interval": "300ms", "check_timeout": "200ms", "rise": 1, "fall": K}
WAIT = 10.0


def checks(lb, pool, result=None, after=0.0):
    return [e for e in lb.events("check", pool=pool)
            if event_time(e) > after and result in (None, e.get("result"))]


def changes(lb, event, pool, after):
    return [e for e in lb.events(event, pool=pool) if event_time(e) > after]


def measured(what, seconds):
    print(f"measured: {what} {seconds * 1000:.0f} ms", file=sys.stderr)


class DbChecksTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.servers = []
        try:
            cls.mariadb = cls._keep(MariaDb())
            cls.postgres = cls._keep(Postgres())
            cls.redis = cls._keep(Redis())
            cls.replica = cls._keep(Redis(replica_of=cls.redis.port))
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _keep(cls, server):
        cls.servers.append(server)
        return server

    @classmethod
    def tearDownClass(cls):
        for s in reversed(cls.servers):
            s.stop()

    def wait_detail(self, lb, pool, result, detail, after=0.0):
        """Waits for a check of pool with that result and detail (a str: the
        whole detail; a tuple: its start and its end)."""
        def matches(d):
            if isinstance(detail, tuple):
                return d.startswith(detail[0]) and d.endswith(detail[1])
            return d == detail

        def found():
            for e in checks(lb, pool, result, after):
                if matches(e.get("detail", "")):
                    return e
            return None
        try:
            return wait_for(found, WAIT, f"pool {pool}: a check {result} with {detail!r}")
        except AssertionError:
            seen = [(e.get("result"), e.get("detail")) for e in checks(lb, pool)][-5:]
            raise AssertionError(f"pool {pool}: no check {result} with {detail!r}; "
                                 f"the last ones: {seen}") from None

    def fault_table(self, server, pools):
        """pools: {name: (check keys, detail of a pass, reason of the hang's
        removal)}; a tcp pool on the same server is added. Hangs, then
        crashes, the server; asserts the windows; restarts it."""
        lb = self.lb_pools([(name, [("s", server.addr)], dict(KEYS, **keys))
                            for name, (keys, _, _) in pools.items()] +
                           [("tcp", [("s", server.addr)], dict(KEYS, check="tcp"))],
                           log_level="debug")
        for name, (_, detail, _) in pools.items():
            self.wait_detail(lb, name, "passed", detail)
        wait_for(lambda: len(checks(lb, "tcp", "passed")) >= 2, WAIT, "2 tcp passes")
        settled = time.time()

        t_hang = server.hang()
        try:
            for name in pools:
                wait_for(lambda: changes(lb, "server_down", name, settled), WAIT,
                         f"{name} to take the hung server out")
                down = changes(lb, "server_down", name, settled)[0]
                self.assertEqual(down["reason"], pools[name][2], down)
                latency = event_time(down) - t_hang
                measured(f"{server.name} hang -> out of {name}", latency)
                # The K-th probe to time out; its start is at most I after the
                # hang, so the change comes between (K-1)*I + T and K*I + T.
                self.assertTrue((K - 1) * I + T - TIMER_TICK - 0.01 <= latency
                                <= K * I + T + HC_SLACK,
                                f"{name}: out {latency * 1000:.0f} ms after the hang")
            last_down = max(event_time(changes(lb, "server_down", n, settled)[0]) for n in pools)
            # The kernel still completes the handshake: the tcp check passes.
            wait_for(lambda: len(checks(lb, "tcp", "passed", last_down)) >= 3, WAIT,
                     "3 more tcp passes of the hung server")
            self.assertFalse(changes(lb, "server_down", "tcp", settled),
                             "check = tcp took a hung server out")
        finally:
            server.resume()
        for name in pools:
            wait_for(lambda: changes(lb, "server_up", name, settled), WAIT,
                     f"{name} to take the server back after SIGCONT")
        settled = time.time()

        t_kill = time.time()
        server.kill()
        try:
            for name in list(pools) + ["tcp"]:
                wait_for(lambda: changes(lb, "server_down", name, settled), WAIT,
                         f"{name} to take the crashed server out")
                down = changes(lb, "server_down", name, settled)[0]
                self.assertEqual(down["reason"], "connect: connection refused", down)
                latency = event_time(down) - t_kill
                measured(f"{server.name} crash -> out of {name}", latency)
                # Refused at once: the K-th failed probe comes between (K-1)*I
                # and K*I after the crash.
                self.assertTrue((K - 1) * I - TIMER_TICK - 0.01 <= latency
                                <= K * I + T + HC_SLACK,
                                f"{name}: out {latency * 1000:.0f} ms after the crash")
        finally:
            server.start()
        lb.assert_running()

    # ------------------------------------------------------- the fault table

    def test_mariadb_faults(self):
        self.fault_table(self.mariadb, {
            "login": ({"check": "mysql", "check_user": "lb_check"}, ("MySQL 10.", ", login ok"),
                      "timeout after 200 ms waiting for the MySQL greeting"),
            "greeting": ({"check": "mysql"}, ("MySQL 10.", "MariaDB-0+deb12u1"),
                         "timeout after 200 ms waiting for the MySQL greeting")})

    def test_postgres_faults(self):
        self.fault_table(self.postgres, {
            "login": ({"check": "pgsql", "check_user": "postgres"}, "PostgreSQL login ok",
                      "timeout after 200 ms waiting for the PostgreSQL answer to the startup "
                      "message"),
            "ssl": ({"check": "pgsql"}, "PostgreSQL answered the SSLRequest (N)",
                    "timeout after 200 ms waiting for the PostgreSQL answer to the SSLRequest")})

    def test_redis_faults(self):
        self.fault_table(self.redis, {
            "ping": ({"check": "redis"}, "Redis PONG",
                     "timeout after 200 ms waiting for the Redis PONG")})


if __name__ == "__main__":
    harness.main()
