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

import socket
import sys
import threading
import time

import harness
from harness import HC_SLACK, TIMER_TICK, LbTestCase, event_time, wait_for
import db_servers
from admin_client import Admin
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


    # ------------------------------------------------------------ MariaDB

    def test_mariadb_too_many_connections(self):
        """max_connections logged-in sessions: a login is refused with 1040
        (the greeting still comes: MariaDB keeps one more connection for an
        administrator, and decides at the login). One more connection,
        unauthenticated, takes that slot: from then on the greeting itself
        is an ERR 1040, which the greeting-only check sees too."""
        db = self.mariadb
        lb = self.lb_pools([("login", [("s", db.addr)], dict(KEYS, check="mysql",
                                                             check_user="lb_check")),
                            ("greeting", [("s", db.addr)], dict(KEYS, check="mysql"))],
                           log_level="debug")
        self.wait_detail(lb, "login", "passed", ("MySQL 10.", ", login ok"))
        held = []
        try:
            for _ in range(db.MAX_CONNECTIONS):
                s = db_servers.mysql_session(db.port)
                self.assertIsNotNone(s, "a test session was refused")
                held.append(s)
            t = time.time()
            self.wait_detail(lb, "login", "failed", "MySQL 1040 Too many connections", t)
            held.append(socket.create_connection((harness.HOST, db.port)))
            db_servers.mysql_packet(held[-1])       # its greeting: the slot is taken
            t = time.time()
            self.wait_detail(lb, "greeting", "failed", "MySQL 1040 Too many connections", t)
            self.wait_detail(lb, "login", "failed", "MySQL 1040 Too many connections", t)
        finally:
            for s in held:
                s.close()
        t = time.time()
        self.wait_detail(lb, "login", "passed", ("MySQL 10.", ", login ok"), t)
        self.wait_detail(lb, "greeting", "passed", ("MySQL 10.", "deb12u1"), t)

    def test_mariadb_login_and_role(self):
        """A user that does not exist fails with the server's words; the role
        follows read_only: a primary while it is off, a replica while on."""
        db = self.mariadb
        lb = self.lb_pools([("denied", [("s", db.addr)], dict(KEYS, check="mysql",
                                                              check_user="nobody")),
                            ("primary", [("s", db.addr)], dict(KEYS, check="mysql",
                                                               check_user="lb_check",
                                                               check_role="primary")),
                            ("replica", [("s", db.addr)], dict(KEYS, check="mysql",
                                                               check_user="lb_check",
                                                               check_role="replica"))],
                           log_level="debug")
        self.wait_detail(lb, "denied", "failed", "MySQL 1045 Access denied for user "
                         "'nobody'@'127.0.0.1' (using password: NO)")
        self.wait_detail(lb, "primary", "passed", "MySQL read_only=0 (primary)")
        self.wait_detail(lb, "replica", "failed",
                         "MySQL read_only=0: a primary, check_role = replica")
        lb.wait_event("server_down", pool="replica")
        # Before the change: the next check may see it, and its transition
        # be logged, before the client that made it has exited.
        t = time.time()
        db.sql("SET GLOBAL read_only = 1")
        try:
            self.wait_detail(lb, "primary", "failed",
                             "MySQL read_only=1: a replica, check_role = primary", t)
            self.wait_detail(lb, "replica", "passed", "MySQL read_only=1 (replica)", t)
            wait_for(lambda: changes(lb, "server_down", "primary", t) and
                     changes(lb, "server_up", "replica", t), WAIT,
                     "the primary pool to drop the server and the replica pool to take it")
        finally:
            db.sql("SET GLOBAL read_only = 0")
        lb.assert_running()

    # --------------------------------------------------------- PostgreSQL

    def test_postgres_logins_and_too_many_clients(self):
        """Each answer of a login, in the server's words; then
        max_connections sessions: a login is refused with 53300, while the
        SSLRequest (answered before any slot is taken) still passes."""
        pg = self.postgres
        pools = {"login": ({"check_user": "postgres"}, "PostgreSQL login ok"),
                 "ssl": ({}, "PostgreSQL answered the SSLRequest (N)"),
                 "nobody": ({"check_user": "nobody"},
                            'PostgreSQL 28000 role "nobody" does not exist'),
                 "nodb": ({"check_user": "postgres", "check_database": "nodb"},
                          'PostgreSQL 3D000 database "nodb" does not exist'),
                 "password": ({"check_user": "pwuser"},
                              "PostgreSQL asks for SASL (SCRAM) (alive)")}
        admin_port = harness.free_port()
        lb = self.lb_pools([(name, [("s", pg.addr)], dict(KEYS, check="pgsql", **keys))
                            for name, (keys, _) in pools.items()], log_level="debug",
                           admin_port=admin_port)
        for name, (_, detail) in pools.items():
            self.wait_detail(lb, name, "failed" if name in ("nobody", "nodb") else "passed",
                             detail)
        # /stats (and the dashboard, which shows it) carries the same words.
        srv = Admin(admin_port).wait_server(
            "nobody", "s", lambda x: x["last_check"] and x["last_check"]["result"] == "failed",
            WAIT, "a failed check in /stats")
        self.assertEqual((srv["check"], srv["health"], srv["last_check"]["detail"]),
                         ("pgsql", "down", pools["nobody"][1]), srv)
        held = []
        try:
            # lb's own probes take slots for a moment: retry until all are ours.
            def hold():
                s = db_servers.pg_session(pg.port)
                if s is not None:
                    held.append(s)
                return len(held) == pg.MAX_CONNECTIONS
            wait_for(hold, WAIT, f"{pg.MAX_CONNECTIONS} PostgreSQL sessions")
            t = time.time()
            self.wait_detail(lb, "login", "failed",
                             "PostgreSQL 53300 sorry, too many clients already", t)
            self.wait_detail(lb, "ssl", "passed", "PostgreSQL answered the SSLRequest (N)", t)
        finally:
            for s in held:
                s.close()
        self.wait_detail(lb, "login", "passed", "PostgreSQL login ok", time.time())

    # -------------------------------------------------------------- Redis

    def test_redis_role_and_auth(self):
        """check_role against a primary and its replica (replicaof); then a
        password on the primary: PING's NOAUTH counts as alive, but a role
        can no longer be known."""
        p, r = self.redis, self.replica
        servers = [("p", p.addr), ("r", r.addr)]
        lb = self.lb_pools([("primary", servers, dict(KEYS, check="redis", check_role="primary")),
                            ("replica", servers, dict(KEYS, check="redis", check_role="replica")),
                            ("any", [("p", p.addr)], dict(KEYS, check="redis"))],
                           log_level="debug")

        def detail_of(pool, server, result, detail, after=0.0):
            wait_for(lambda: [e for e in checks(lb, pool, result, after)
                              if e["server"] == server and e.get("detail") == detail],
                     WAIT, f"{pool}/{server}: {result} with {detail!r}")
        detail_of("primary", "p", "passed", "Redis role master")
        detail_of("primary", "r", "failed", "Redis role slave, check_role = primary")
        detail_of("replica", "r", "passed", "Redis role slave")
        detail_of("replica", "p", "failed", "Redis role master, check_role = replica")
        self.assertEqual(p.cmd("CONFIG", "SET", "requirepass", "secret"), b"+OK\r\n")
        try:
            t = time.time()
            detail_of("any", "p", "passed",
                      "Redis NOAUTH Authentication required. (alive; lb sends no password)", t)
            detail_of("primary", "p", "failed", "Redis NOAUTH Authentication required.", t)
        finally:
            with socket.create_connection((harness.HOST, p.port), timeout=5) as s:
                s.sendall(b"AUTH secret\r\nCONFIG SET requirepass \"\"\r\n")
                buf = b""
                while buf.count(b"\r\n") < 2:
                    buf += s.recv(100)
                self.assertEqual(buf, b"+OK\r\n+OK\r\n")
        detail_of("primary", "p", "passed", "Redis role master", time.time())


    # ------------------------------------------------------- fake servers

    def test_fake_servers(self):
        """Servers that are not what the check expects: garbage, a packet
        cut short (then silence), an endless stream. Each check fails with a
        clear detail; lb reads at most its 1 KiB buffer, so an endless
        server does not make it grow."""
        garbage = b"\x15\x03\x01\x00\x02\x02\x50garbage\r\n"
        truncated = {"mysql": b"\x64\x00\x00\x00\x0a5.5.5-10.11", "pgsql": b"R\x00\x00",
                     "redis": b"+PON"}
        stop = threading.Event()
        sent = [0]

        def serve(first, endless):
            def handler(backend, conn):
                conn.settimeout(0.1)
                if first:
                    conn.sendall(first)
                deadline = time.monotonic() + 5
                while not stop.is_set() and time.monotonic() < deadline:
                    if endless:
                        sent[0] += conn.send(b"x" * 16384)   # fails once lb closes
                        continue
                    try:
                        if conn.recv(4096) == b"":
                            return              # lb closed
                    except socket.timeout:
                        pass
            return handler

        checks_of = {"mysql": {"check": "mysql"},
                     "pgsql_ssl": {"check": "pgsql"},
                     "pgsql": {"check": "pgsql", "check_user": "lb"},
                     "redis": {"check": "redis"}}
        want = {
            ("mysql", "garbage"): "MySQL packet of 66325 bytes, longer than the 1020 read "
                                  "(while waiting for the MySQL greeting)",
            ("mysql", "truncated"): "timeout after 200 ms waiting for the MySQL greeting",
            ("mysql", "endless"): "MySQL packet of 7895160 bytes, longer than the 1020 read "
                                  "(while waiting for the MySQL greeting)",
            ("pgsql_ssl", "garbage"): "not PostgreSQL: byte 0x15 where S or N was due",
            ("pgsql_ssl", "truncated"): "not PostgreSQL: byte 0x52 where S or N was due",
            ("pgsql_ssl", "endless"): "not PostgreSQL: byte 0x78 where S or N was due",
            ("pgsql", "garbage"): "PostgreSQL message of 50397186 bytes, longer than the 1023 "
                                  "read (while waiting for the PostgreSQL answer to the "
                                  "startup message)",
            ("pgsql", "truncated"): "timeout after 200 ms waiting for the PostgreSQL answer to "
                                    "the startup message",
            ("pgsql", "endless"): "PostgreSQL message of 2021161080 bytes, longer than the "
                                  "1023 read (while waiting for the PostgreSQL answer to the "
                                  "startup message)",
            ("redis", "garbage"): 'Redis answered "??????Pgarbage" to PING',
            ("redis", "truncated"): "timeout after 200 ms waiting for the Redis PONG",
            ("redis", "endless"): "Redis line longer than 1024 bytes (while waiting for the "
                                  "Redis PONG)",
        }
        pools = []
        for (check, mode) in want:
            first = {"garbage": garbage, "endless": None,
                     "truncated": truncated[check.split("_")[0]]}[mode]
            b = self.custom(serve(first, mode == "endless"), name=f"{check}-{mode}")
            pools.append((f"{check}-{mode}", [("s", b.addr)], dict(KEYS, **checks_of[check])))
        lb = self.lb_pools(pools, log_level="debug")
        self.addCleanup(stop.set)
        for (check, mode), detail in want.items():
            self.wait_detail(lb, f"{check}-{mode}", "failed", detail)
        # Memory: many more probes of the endless servers, no growth beyond
        # noise (an unbounded read would hold megabytes per probe).
        rss = lb.rss_kb()
        base = sent[0]
        n = len(checks(lb, "redis-endless"))
        wait_for(lambda: len(checks(lb, "redis-endless")) >= n + 10, WAIT,
                 "10 more probes of the endless Redis")
        grown = lb.rss_kb() - rss
        print(f"measured: endless servers sent {(sent[0] - base) >> 10} KiB during 10 "
              f"probes each; lb RSS grew {grown} KiB", file=sys.stderr)
        self.assertLess(grown, 2048, f"lb grew {grown} KiB while reading endless servers")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
