"""UDP load balancing (issue 28): a frontend with `protocol = udp` keeps a
flow per client address and port, pinned to one server of its pool, with
one connected socket towards that server; replies go back from the
frontend's address. A flow ends after udp_idle_timeout without traffic,
after udp_responses replies (1 for DNS), when it is the least recently
used one past udp_max_flows (evicted), when its server is drained or
removed by reload (at the pool's drain_timeout), when a reload drops its
frontend's address, and at shutdown; a flow whose server is taken out by
its health check moves to another server on the client's next datagram.
Datagrams are never cut.

Real peers: two dnsmasq and one unbound (Debian's dnsmasq-base and
unbound), started once for the file (dns_servers.py) and shared by its
cases; the client is Python (the same query bytes, with a fixed id, sent
to a server and to lb, and the answers compared byte for byte) and dig
(dnsutils), whose answer must come from the address it asked. What no DNS
server sends (an empty datagram, the largest ones, a flood, a reply sent
twice) goes to a UDP echo server of the test's own (dns_servers.UdpEcho).

The removal window of a health check: interval I, fall K, timeout T; a
crashed server (refused at once) leaves between (K-1)*I and K*I + T after
the crash, a stopped one (SIGSTOP: every probe times out) between
(K-1)*I + T and K*I + T. Run by hand, the cases print what they measured
("measured: ...")."""

import itertools
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import harness
from harness import (HC_SLACK, HOST, IO_TIMEOUT, TIMER_TICK, LbTestCase, event_time, free_port,
                     wait_for)
import admin_client
from admin_client import Admin, find_frontend, find_pool, find_server
import dns_servers
from dns_servers import (Dnsmasq, Unbound, UdpEcho, client_socket, free_udp_port, parse, query,
                         txt_strings)
from test_reload_traffic import sighup_fail, sighup_reload, write_atomic

DIG = "/usr/bin/dig"
WAIT = 10.0                     # anything that takes a few intervals

# The health checks of the removal cases: a server answering late once on
# a loaded machine must not leave (fall 2).
I, T, K = 0.3, 0.2, 2
CHECK_TCP = {"check": "tcp", "check_interval": "300ms", "check_timeout": "200ms",
             "rise": 1, "fall": K}
# dnsmasq has no root zone: the defaults (". SOA", NOERROR) would fail
# against it (REFUSED), so the check asks for a record it holds.
CHECK_DNS = dict(CHECK_TCP, check="dns", check_dns_name="a.test", check_dns_type="A")

# How long a client waits for an answer once its flow's server is out of
# rotation: dig's +time=1. lb relays a datagram on loopback in well
# under a millisecond, 10 ms under ASan; a flow still pinned to a dead
# server gets no answer at all.
ANSWER_TIMEOUT = 1.0

# What load may add to one of lb's own deadlines (drain_timeout,
# udp_idle_timeout): a late timer on a busy machine (upper bounds only;
# lower bounds get harness.TIMER_TICK).
TIMEOUT_SLACK = 0.6 if harness.SANITIZED else 0.4

UDP_KEYS = ("flows", "flows_total", "flows_evicted", "datagrams_received", "datagrams_sent",
            "bytes_received", "bytes_sent")
DROP_REASONS = ("no_server", "denied", "no_socket", "send_failed", "too_many_flows")
FLOW_END_KEYS = ("frontend", "server", "client", "reason", "datagrams_in", "datagrams_out",
                 "bytes_in", "bytes_out", "duration_ms")


def _binary_has(symbol):
    try:
        with open(harness.LB_BIN, "rb") as f:
            return symbol in f.read()
    except OSError:
        return False


# harness.SANITIZED is ASan's; TSan's runtime grows lb's RSS too (shadow
# memory, histories), so the eviction case judges memory in neither.
TSAN = bool(harness.LB_BIN) and _binary_has(b"__tsan_init")


def measured(what, value):
    print(f"measured: {what} {value}", file=sys.stderr)


# ------------------------------------------------------------------ config

def udp_config(admin_port, frontends, pools, workers=2, log_level="info", shutdown_timeout="3s"):
    """A whole config file. frontends: [(name, listen "host:port", pool,
    {key: value})], each with protocol = udp unless its keys set another
    protocol (None: no protocol line); pools: [(name, servers, keys)] as
    admin_client.pool_lines (check = none unless keys set one)."""
    lines = ["[global]", f"workers = {workers}", f"log_level = {log_level}",
             f"shutdown_timeout = {shutdown_timeout}", "",
             "[admin]", f"listen = {HOST}:{admin_port}", ""]
    for name, listen, pool, keys in frontends:
        keys = dict({"protocol": "udp"}, **keys)
        lines += [f"[frontend {name}]", f"listen = {listen}", f"pool = {pool}"]
        lines += [f"{k} = {v}" for k, v in keys.items() if v is not None] + [""]
    lines += admin_client.pool_lines(pools)
    return "\n".join(lines)


# ------------------------------------------------------------------ client

class Client:
    """One client address and port: a bound UDP socket whose queries all
    form one flow through lb (host:port). ask() checks that the answer
    came from lb's own address, and skips a late answer to an earlier
    query (another id)."""

    def __init__(self, tc, port, host=HOST):
        self.sock = client_socket(host)
        tc.addCleanup(self.sock.close)
        self.lb = (host, port)
        self.port = self.sock.getsockname()[1]
        self.addr = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        self.qid = 0x100

    def recv(self, timeout):
        """One datagram within timeout (None if none); fails when it does
        not come from lb's frontend address."""
        r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not r:
            return None
        data, src = self.sock.recvfrom(65536)
        if src[:2] != self.lb:
            raise AssertionError(f"client {self.addr}: a datagram from {src}, not from lb's "
                                 f"frontend {self.lb}")
        return data

    def ask(self, data, timeout=IO_TIMEOUT):
        """Sends a DNS query; its answer (same id), or None after timeout."""
        qid = data[:2]
        self.sock.sendto(data, self.lb)
        deadline = time.monotonic() + timeout
        while True:
            reply = self.recv(deadline - time.monotonic())
            if reply is None or reply[:2] == qid:
                return reply

    def who(self, timeout=IO_TIMEOUT):
        """The name of the server that answered `who.test TXT`, or None."""
        self.qid += 1
        reply = self.ask(query("who.test", "TXT", qid=self.qid), timeout)
        return None if reply is None else dns_servers.who(reply)


def client_ports():
    """Client ports for queries(), each given once (a port the kernel
    picks for a new socket may be one whose flow lb still holds: with
    udp_responses = 0, 100 flows open and 28,000 ephemeral ports, one new
    socket in 280 would join an old flow instead of making one). From the
    ephemeral range, in order; one that is taken is skipped."""
    lo, hi = harness._ephemeral_range()
    return iter(range(lo, hi + 1))


_PORTS = itertools.cycle(range(harness._ephemeral_range()[0],
                               harness._ephemeral_range()[1] + 1))


def _bound_socket(host, ports):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for port in ports:
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.bind((host, port))
            return s
        except OSError:
            s.close()
    raise AssertionError("queries: out of client ports")


def queries(port, n, parallel=16, timeout=2.0, every=None, host=HOST, ports=None):
    """n `who.test TXT` queries through lb:port, each from a new socket
    bound to a port of its own (ports, an iterator of client_ports(); by
    default one shared by the file): a flow of its own. `parallel` at most
    in flight. every: (k, fn): fn() runs after every k answers. Returns
    ({server: answers}, [indices never answered within timeout], seconds,
    [(client port, server)])."""
    lb_addr = (host, port)
    ports = _PORTS if ports is None else ports
    inflight = {}                   # sock -> (i, deadline)
    answers, lost, flows = {}, [], []
    sent = done = 0
    t0 = time.monotonic()
    try:
        while done < n:
            while sent < n and len(inflight) < parallel:
                s = _bound_socket(host, ports)
                s.setblocking(False)
                s.sendto(query("who.test", "TXT", qid=sent & 0xFFFF), lb_addr)
                inflight[s] = (sent, time.monotonic() + timeout)
                sent += 1
            now = time.monotonic()
            wait = max(0.0, min(d for _, d in inflight.values()) - now)
            r, _, _ = select.select(list(inflight), [], [], wait)
            for s in r:
                i, _ = inflight.pop(s)
                data, src = s.recvfrom(65536)
                if src[:2] != lb_addr:
                    raise AssertionError(f"query {i}: answer from {src}, not from {lb_addr}")
                p = parse(data)
                if p["id"] != i & 0xFFFF:
                    raise AssertionError(f"query {i}: answer with id {p['id']}")
                name = dns_servers.who(data)
                answers[name] = answers.get(name, 0) + 1
                flows.append((s.getsockname()[1], name))
                s.close()
                done += 1
                if every and done % every[0] == 0:
                    every[1]()
            now = time.monotonic()
            for s, (i, d) in list(inflight.items()):
                if d <= now:
                    del inflight[s]
                    s.close()
                    lost.append(i)
                    done += 1
    finally:
        for s in inflight:
            s.close()
    return answers, lost, time.monotonic() - t0, flows


def dig(port, *args, host=HOST):
    """dig through lb (one try, 1 s): its output; fails when dig fails."""
    p = subprocess.run([DIG, f"@{host}", "-p", str(port), "+tries=1", "+time=1"] + list(args),
                       capture_output=True, timeout=30)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        raise AssertionError(f"dig {' '.join(args)} exited {p.returncode}:\n{out}"
                             f"{p.stderr.decode(errors='replace')}")
    return out


def dig_flags(out):
    m = re.search(r";; flags: ([a-z ]*);", out)
    if not m:
        raise AssertionError(f"no flags line in dig's output:\n{out}")
    return set(m.group(1).split())


# ------------------------------------------------------------ /stats

def _count(v):
    return type(v) is int and v >= 0


def udp_problems(st):
    """What is wrong with the UDP parts of a /stats document: a frontend
    with protocol udp has the udp object of the contract, every server the
    two datagram counts, and the figures hold together."""
    problems = []
    for fe in st["frontends"]:
        # Every frontend of this file is a UDP one.
        if fe.get("protocol") != "udp":
            problems.append(f"frontend {fe.get('name')}: protocol {fe.get('protocol')!r}")
            continue
        u = fe.get("udp")
        if not isinstance(u, dict):
            problems.append(f"frontend {fe['name']}: no udp object")
            continue
        for k in UDP_KEYS:
            if not _count(u.get(k)):
                problems.append(f"frontend {fe['name']}: udp.{k} = {u.get(k)!r}")
        d = u.get("dropped")
        if not isinstance(d, dict) or set(d) != set(DROP_REASONS) or \
                not all(_count(v) for v in d.values()):
            problems.append(f"frontend {fe['name']}: udp.dropped = {d!r}")
        if not problems and u["flows"] > u["flows_total"]:
            problems.append(f"frontend {fe['name']}: {u['flows']} flows open of "
                            f"{u['flows_total']} ever")
    for p in st["pools"]:
        for s in p["servers"]:
            for k in ("udp_datagrams_sent", "udp_datagrams_received"):
                if not _count(s.get(k)):
                    problems.append(f"server {p['name']}/{s['name']}: {k} = {s.get(k)!r}")
    return problems


def fe_udp(st, name):
    return find_frontend(st, name)["udp"]


def udp_no_ports():
    """The kernel's count of datagrams that came to a port with no socket
    (Udp: NoPorts in /proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return int(dict(zip(rows[0][1:], rows[1][1:]))["NoPorts"])


def quiet_stats(admin, settle=0.2, timeout=WAIT):
    """Waits until no datagram count of /stats (frontends and servers)
    moves for `settle` seconds: lb has handled every datagram sent so far.
    Returns that /stats. (The only bounded observation window of the file:
    a datagram that does not come can only be waited for.)"""
    state = {"key": None, "since": 0.0, "st": None}

    def key(st):
        return repr([(f.get("name"), f.get("udp")) for f in st["frontends"]] +
                    [(p["name"], s["name"], s.get("udp_datagrams_sent"),
                      s.get("udp_datagrams_received"), s["active_connections"])
                     for p in st["pools"] for s in p["servers"]])

    def still():
        st = admin.stats()
        k, now = key(st), time.monotonic()
        if k != state["key"]:
            state.update(key=k, since=now, st=st)
            return None
        return st if now - state["since"] >= settle else None
    return wait_for(still, timeout, lambda: f"/stats to stop moving; last {state['st']}",
                    interval=0.05)


def flow_ends(lb, **match):
    return lb.events("flow_end", **match)


class UdpTestCase(LbTestCase):

    def start_udp(self, frontends, pools, allowed_errors=(), env=None, **kw):
        """Starts lb on udp_config(...); lb.admin is its Admin client."""
        admin_port = free_port()
        lb = self.start_lb(udp_config(admin_port, frontends, pools, **kw),
                           allowed_errors=allowed_errors, env=env)
        lb.admin_port = admin_port
        lb.admin = Admin(admin_port)
        return lb

    def assert_consistent(self, lb):
        st = lb.admin.stats()
        # (admin_client's schema reads an address as host:port; "[::1]:N"
        # is one too.)
        problems = [p for p in admin_client.stats_problems(st)
                    if not re.search(r"address: not host:port: '\[[0-9a-f:]+\]:\d+'$", p)]
        self.assertEqual(problems + udp_problems(st), [], f"inconsistent /stats: {st}")
        return st

    def wait_checked(self, lb, pool, servers):
        """Waits for a passed check of each server."""
        for s in servers:
            lb.admin.wait_server(pool, s, lambda o: o["last_check"] is not None and
                                 o["last_check"]["result"] == "passed", WAIT,
                                 "a first passed check")


# ================================================== against DNS servers

class UdpDnsTest(UdpTestCase):
    """The cases against real DNS servers, started once for the class."""

    @classmethod
    def setUpClass(cls):
        cls.servers = []
        try:
            cls.d1 = cls._keep(Dnsmasq("d1"))
            cls.d2 = cls._keep(Dnsmasq("d2"))
            cls.u1 = cls._keep(Unbound("u1"))
        except BaseException:
            cls.tearDownClass()
            raise
        cls.by_name = {s.name: s for s in cls.servers}

    @classmethod
    def _keep(cls, server):
        cls.servers.append(server)
        return server

    @classmethod
    def tearDownClass(cls):
        for s in reversed(cls.servers):
            s.stop()

    def setUp(self):
        super().setUp()
        # A case that crashed or stopped a server left it running again
        # (its finally); a failure there must not spill into the next case.
        for s in self.servers:
            if not s.running():
                s.start()
            s.resume()

    def pair_lb(self, pool_keys=None, fe_keys=None, allowed_errors=(), **kw):
        """lb with one UDP frontend "fe" on pool "p" = d1, d2 (round
        robin). Returns (lb, port)."""
        port = free_udp_port()
        lb = self.start_udp([("fe", f"{HOST}:{port}", "p", fe_keys or {})],
                            [("p", [("d1", self.d1.addr), ("d2", self.d2.addr)],
                              pool_keys or {})], allowed_errors=allowed_errors, **kw)
        return lb, port

    def direct_lb(self):
        """lb with fe_d -> d1 alone and fe_u -> u1 alone: every answer
        through a frontend comes from one known server. Returns (lb,
        {frontend port: server})."""
        pd, pu = free_udp_port(), free_udp_port()
        lb = self.start_udp([("fe_d", f"{HOST}:{pd}", "pd", {}), ("fe_u", f"{HOST}:{pu}", "pu", {})],
                       [("pd", [("d1", self.d1.addr)], {}), ("pu", [("u1", self.u1.addr)], {})])
        return lb, {pd: self.d1, pu: self.u1}

    # ------------------------------------------------ answers unchanged

    def test_answers_identical_to_direct(self):
        """A, TXT and an NXDOMAIN, with and without EDNS, asked of each
        server straight and through lb with the same bytes (same id): the
        same bytes back, from lb's address; dig through lb reads them."""
        lb, fronts = self.direct_lb()
        cases = [("a.test", "A", "NOERROR", 1), ("t.test", "TXT", "NOERROR", 1),
                 ("nx.test", "A", "NXDOMAIN", 0)]
        for port, server in fronts.items():
            c = Client(self, port)
            for name, qtype, rcode, an in cases:
                for edns in (None, 1232):
                    with self.subTest(server=server.name, q=f"{name} {qtype}", edns=edns):
                        q = query(name, qtype, qid=0x4242, edns=edns)
                        direct = server.ask(q)
                        self.assertIsNotNone(direct, f"{server.name} did not answer")
                        p = parse(direct)
                        self.assertEqual((p["rcode"], p["an"], p["tc"]), (rcode, an, False), p)
                        via = c.ask(q)
                        self.assertIsNotNone(via, f"no answer through lb for {name} {qtype}")
                        self.assertEqual(via, direct, "answer through lb differs from the direct one")
            out = dig(port, "+short", "t.test", "TXT")
            self.assertEqual(out.strip(), '"hello world"', out)
            ip = "192.0.2.1" if server is self.d1 else "192.0.2.2"
            self.assertEqual(dig(port, "+short", "a.test").strip(), ip)
            self.assertIn("status: NXDOMAIN", dig(port, "nx.test"))
        self.assert_consistent(lb)

    def test_truncated_answer_keeps_tc(self):
        """big.test TXT (3,982 bytes) asked without EDNS: unbound answers
        within 512 bytes with TC set; the same bytes come through lb, and
        dig (+ignore: no retry over TCP) sees the tc flag."""
        _, fronts = self.direct_lb()
        port = next(p for p, s in fronts.items() if s is self.u1)
        q = query("big.test", "TXT", qid=0x5151, edns=None)
        direct = self.u1.ask(q)
        p = parse(direct)
        self.assertTrue(p["tc"] and len(direct) <= 512, f"{len(direct)} bytes: {p}")
        via = Client(self, port).ask(q)
        self.assertEqual(via, direct, "truncated answer through lb differs from the direct one")
        out = dig(port, "+noedns", "+ignore", "big.test", "TXT")
        self.assertIn("tc", dig_flags(out), out)

    def test_large_edns_answer_whole(self):
        """big.test TXT with EDNS 4096: 3,982 bytes in one datagram, not
        truncated, identical through lb; dig reads all 15 records."""
        _, fronts = self.direct_lb()
        port = next(p for p, s in fronts.items() if s is self.u1)
        q = query("big.test", "TXT", qid=0x6161, edns=4096)
        direct = self.u1.ask(q)
        p = parse(direct)
        self.assertTrue(3900 <= len(direct) <= 4096 and not p["tc"] and p["an"] == 15,
                        f"{len(direct)} bytes: {p}")
        via = Client(self, port).ask(q)
        self.assertIsNotNone(via, "no answer through lb")
        self.assertEqual(len(via), len(direct))
        self.assertEqual(via, direct, "EDNS answer through lb differs from the direct one")
        got = sorted(txt_strings(rd)[0] for _, _, rd in parse(via)["answers"])
        self.assertEqual(got, sorted(dns_servers.BIG_STRINGS))
        out = dig(port, "+bufsize=4096", "big.test", "TXT")
        self.assertNotIn("tc", dig_flags(out), out)
        self.assertIn(f"MSG SIZE  rcvd: {len(direct)}", out)
        self.assertIn("ANSWER: 15,", out)

    # ------------------------------------------------ removal by checks

    def flow_moves_when_out(self, lb, port, pool, fault, check_tcp_pool=None):
        """A flow (one client port) pinned to X; fault(X) (kill or hang)
        at wall time t; X leaves the pool; returns (X, Y, seconds from the
        fault to server_down). Once X is out every query of the same client
        port is answered by Y within ANSWER_TIMEOUT, and /stats shows the
        flow on Y."""
        c = Client(self, port)
        x = c.who()
        self.assertIn(x, ("d1", "d2"))
        for _ in range(3):
            self.assertEqual(c.who(), x, "a flow moved between servers with both up")
        y = "d2" if x == "d1" else "d1"
        st = lb.admin.stats()
        self.assertEqual((find_server(st, pool, x)["active_connections"],
                          find_server(st, pool, y)["active_connections"],
                          fe_udp(st, "fe")["flows"]), (1, 0, 1), st)
        settled = time.time()
        t_fault = fault(self.by_name[x])
        down = lb.wait_event("server_down", timeout=WAIT, pool=pool, server=x)[0]
        self.assertGreater(event_time(down), settled)
        latency = event_time(down) - t_fault
        # From here on no client waits for X: the same client port, the
        # next datagram, gets Y's answer.
        answers = [c.who(timeout=ANSWER_TIMEOUT) for _ in range(20)]
        self.assertEqual(answers, [y] * 20, f"answers after {x} left the pool")
        st = lb.admin.stats()
        self.assertEqual((find_server(st, pool, x)["active_connections"],
                          find_server(st, pool, y)["active_connections"],
                          fe_udp(st, "fe")["flows"]), (0, 1, 1),
                         f"the flow of {c.addr} did not move to {y}: {st}")
        self.assertEqual(find_server(st, pool, x)["state"], "down", st)
        ev = lb.wait_event("flow_end", client=c.addr, server=x)[0]
        self.assertEqual(ev.get("reason"), "server_down", ev)
        return x, y, latency

    def removal_on_crash(self, check):
        lb, port = self.pair_lb(pool_keys=check, fe_keys={"log_flows": "on"}, log_level="debug")
        self.wait_checked(lb, "p", ("d1", "d2"))
        x = None
        try:
            x, y, latency = self.flow_moves_when_out(lb, port, "p", lambda s: s.kill())
        finally:
            for s in (self.d1, self.d2):
                if not s.running():
                    s.start()
        measured(f"crash -> out (check = {check['check']})", f"{latency * 1000:.0f} ms")
        # Refused at once: the K-th failed probe comes between (K-1)*I and
        # K*I after the crash (and T for a probe started just before it).
        self.assertTrue((K - 1) * I - TIMER_TICK - 0.01 <= latency <= K * I + T + HC_SLACK,
                        f"{x} out {latency * 1000:.0f} ms after the crash, expected "
                        f"{(K - 1) * I * 1000:.0f}..{(K * I + T) * 1000:.0f} ms")
        lb.wait_event("server_up", timeout=WAIT, pool="p", server=x)
        self.assert_consistent(lb)

    def test_crash_tcp_check_moves_flow(self):
        self.removal_on_crash(CHECK_TCP)

    def test_crash_dns_check_moves_flow(self):
        self.removal_on_crash(CHECK_DNS)

    def test_hang_dns_check_moves_flow(self):
        """SIGSTOP: the kernel still completes TCP handshakes for the
        stopped dnsmasq (until its accept queue of 32 is full: some 10 s of
        checks every 300 ms), so a tcp check (pool "t", same servers) keeps
        it; the dns check (pool "p") takes it out, and the flow moves.
        SIGCONT brings it back."""
        port, tport = free_udp_port(), free_udp_port()
        servers = [("d1", self.d1.addr), ("d2", self.d2.addr)]
        lb = self.start_udp([("fe", f"{HOST}:{port}", "p", {"log_flows": "on"}),
                             ("fe_t", f"{HOST}:{tport}", "t", {})],
                            [("p", servers, CHECK_DNS), ("t", servers, CHECK_TCP)],
                            log_level="debug")
        self.wait_checked(lb, "p", ("d1", "d2"))
        self.wait_checked(lb, "t", ("d1", "d2"))
        hung = []

        def hang(s):
            hung.append(s)
            return s.hang()
        try:
            x, y, latency = self.flow_moves_when_out(lb, port, "p", hang)
            measured("hang -> out (check = dns)", f"{latency * 1000:.0f} ms")
            # Every probe of the stopped server times out: the K-th ends
            # between (K-1)*I + T and K*I + T after the hang.
            self.assertTrue((K - 1) * I + T - TIMER_TICK - 0.01 <= latency
                            <= K * I + T + HC_SLACK,
                            f"{x} out {latency * 1000:.0f} ms after the hang, expected "
                            f"{((K - 1) * I + T) * 1000:.0f}..{(K * I + T) * 1000:.0f} ms")
            after = time.time()
            wait_for(lambda: len([e for e in lb.events("check", pool="t", server=x,
                                                       result="passed")
                                  if event_time(e) > after]) >= 3, WAIT,
                     "3 more tcp passes of the stopped server")
            self.assertFalse(lb.events("server_down", pool="t"),
                             "check = tcp took a stopped server out")
        finally:
            for s in hung:
                s.resume()
        up = lb.wait_event("server_up", timeout=WAIT, pool="p", server=x)[0]
        self.assertGreater(event_time(up), event_time(lb.events("server_down", pool="p")[0]))
        self.assert_consistent(lb)

    # ------------------------------------------------ one answer per flow

    def test_responses_1_ends_every_flow(self):
        """udp_responses = 1: 10,000 queries, each from a new client port,
        16 in flight: every one answered, each flow ended by its answer
        (flows 0 afterwards, flows_total 10,000), every datagram counted
        once, at the server that answered."""
        lb, port = self.pair_lb(fe_keys={"udp_responses": 1})
        n = 10_000
        answers, lost, took, _ = queries(port, n)
        measured(f"{n} queries with udp_responses = 1", f"{took:.2f} s "
                 f"({n / took:.0f}/s), {answers}")
        self.assertEqual(lost, [], f"{len(lost)} of {n} queries got no answer in 2 s")
        # Loopback, 16 in flight: lb and dnsmasq answer thousands a second
        # even under ASan; a flow that lingers for its idle timeout, or a
        # worker that stalls, cannot make 10,000 in this time.
        self.assertLess(took, 40.0, f"{n} queries took {took:.1f} s")
        st = lb.admin.wait_stats(lambda s: fe_udp(s, "fe")["flows"] == 0, WAIT, "flows 0")
        st = quiet_stats(lb.admin)
        u = fe_udp(st, "fe")
        self.assertEqual({k: u[k] for k in ("flows", "flows_total", "flows_evicted",
                                             "datagrams_received", "datagrams_sent")},
                         {"flows": 0, "flows_total": n, "flows_evicted": 0,
                          "datagrams_received": n, "datagrams_sent": n}, u)
        self.assertEqual(u["dropped"], dict.fromkeys(DROP_REASONS, 0), u)
        for name in ("d1", "d2"):
            s = find_server(st, "p", name)
            self.assertEqual((s["udp_datagrams_sent"], s["udp_datagrams_received"],
                              s["active_connections"]),
                             (answers.get(name, 0), answers.get(name, 0), 0), s)
            # Round robin, per flow.
            self.assertGreater(answers.get(name, 0), n * 0.4, answers)
        self.assert_consistent(lb)

    # ------------------------------------------------ eviction

    def test_eviction_at_max_flows(self):
        """udp_max_flows = 100, flows that never end by themselves: two
        rounds of 8,000 new client ports. flows never goes past 100 (polled
        throughout), every flow past it is evicted, least recently used
        first (a hot flow touched every 25 new ones is never evicted),
        each logged, and lb's memory stays flat from the first round to
        the second."""
        cap, per_round = 100, 8000
        lb, port = self.pair_lb(fe_keys={"udp_max_flows": cap, "udp_idle_timeout": "10m",
                                         "log_flows": "on"}, env=harness.STEADY_RSS_ENV)
        hot = Client(self, port)
        hot_server = hot.who()
        hot_answers = []

        def touch():
            hot_answers.append(hot.who(timeout=2.0))
        peak = {"flows": 0, "samples": 0}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                st = lb.admin.stats()
                # (one atomic figure; the servers' counts are read one
                # after the other, so their sum may see a flow twice while
                # it is replaced)
                peak["flows"] = max(peak["flows"], fe_udp(st, "fe")["flows"])
                peak["samples"] += 1
                stop.wait(0.02)
        sampler = self.start_thread(sample, name="flows-sampler")
        self.addCleanup(stop.set)
        rss = []
        ports = client_ports()          # 16,000 distinct client ports
        t_rounds = time.monotonic()
        for rnd in (1, 2):
            answers, lost, took, _ = queries(port, per_round, every=(25, touch), ports=ports)
            self.assertEqual(lost, [], f"round {rnd}: {len(lost)} queries got no answer")
            st = quiet_stats(lb.admin)
            rss.append(lb.rss_kb())
            u = fe_udp(st, "fe")
            total = 1 + rnd * per_round
            measured(f"round {rnd}: {per_round} flows", f"{took:.2f} s, flows {u['flows']}, "
                     f"evicted {u['flows_evicted']}, lb VmRSS {rss[-1]} KiB")
            self.assertEqual((u["flows"], u["flows_total"], u["flows_evicted"]),
                             (cap, total, total - cap), u)
            self.assertEqual(sum(s["active_connections"] for s in find_pool(st, "p")["servers"]),
                             cap, st)
        took_rounds = time.monotonic() - t_rounds
        stop.set()
        sampler.join()
        measured("peak flows", f"{peak} (cap {cap})")
        self.assertGreater(peak["samples"], 10)
        self.assertLessEqual(peak["flows"], cap, "flows went past udp_max_flows")
        # LRU: the hot flow, used every 25 new flows, stayed on its server.
        self.assertEqual(set(hot_answers), {hot_server}, "the hot flow lost its server")
        evicted = flow_ends(lb, frontend="fe", reason="evicted")
        self.assertEqual(len(evicted), 2 * per_round + 1 - cap)
        self.assertNotIn(hot.addr, {e.get("client") for e in evicted},
                         "the most recently used flow was evicted")
        full = lb.events("udp_flows_full", frontend="fe")
        self.assertTrue(full, "no udp_flows_full event")
        self.assertEqual({e.get("level") for e in full}, {"warn"}, full[:3])
        # At most one a second (README), over the rounds and the quiet
        # waits after them.
        self.assertLessEqual(len(full), int(took_rounds) + 1,
                             f"{len(full)} udp_flows_full lines in {took_rounds:.1f} s")
        # Memory: the second round opened and evicted as many flows as the
        # first, on the same 100 slots. A flow is 168 bytes (README), so
        # leaking the evicted ones is 8,000 x 168 = 1.3 MB a round. The
        # optimised build's RSS moved 0 to 4 KiB from round to round
        # (measured): 256 KiB catches a leak of 32 bytes a flow. The
        # sanitizers' allocators are not judged by RSS: ASan's, even with
        # its quarantine at 1 MB (STEADY_RSS_ENV), grew 470 to 2,132 KiB
        # a round and TSan's 450 to 920 (measured), as much as a whole
        # leaked flow; there LeakSanitizer judges a flow leaked at exit,
        # and this bound is the optimised stage's.
        growth = rss[1] - rss[0]
        if not (harness.SANITIZED or TSAN):
            self.assertLess(growth, 256, f"lb's VmRSS grew {growth} KiB in the second round "
                                         f"({rss[0]} -> {rss[1]} KiB)")
        self.assert_consistent(lb)

    # ------------------------------------------------ drain and reload

    def flow_switch(self, c, old, new, t0, t1, drain_s, period=0.05):
        """Queries from client c every `period` until one is answered by
        `new`; the removal of `old` was applied between monotonic t0 and
        t1. Checks that every answer before was old's and that the switch
        came drain_s after the removal. Returns the seconds from t0 to the
        first answer of new."""
        seen = []
        deadline = t1 + drain_s + WAIT
        moved = None            # when the first query old did not answer went
        while True:
            ts = time.monotonic()
            name = c.who(timeout=ANSWER_TIMEOUT)
            tr = time.monotonic()
            seen.append((round(ts - t0, 3), name))
            if name != old and moved is None:
                moved = ts
            if name == new:
                break
            # A query sent as the drain deadline passes may lose its answer:
            # the flow ends with the reply on its way (a DNS client asks
            # again, as this loop does, after its answer timeout).
            if name is None and ts - t0 >= drain_s - TIMER_TICK:
                continue
            self.assertEqual(name, old, f"answers so far: {seen}")
            self.assertLess(tr, deadline, f"the flow never moved: {seen[-5:]}")
            time.sleep(max(0.0, period - (time.monotonic() - ts)))
        # lb received the datagram that moved after the drain deadline
        # (>= t0 + drain_s) and before its answer came (tr); the last query
        # old answered was sent at most `period` before the first it did
        # not (a lost one's wait for its answer is the client's, not lb's).
        self.assertGreaterEqual(tr - t0, drain_s - TIMER_TICK,
                                f"moved before drain_timeout: {seen[-5:]}")
        self.assertLessEqual(moved - t1, drain_s + period + TIMEOUT_SLACK,
                             f"still on {old} past drain_timeout: {seen[-5:]}")
        return tr - t0

    def test_drain_keeps_flow_until_drain_timeout(self):
        """An operator's drain: the flow keeps its server until the pool's
        drain_timeout (1 s), then ends (reason drained) and the client's
        next datagram goes to the other server."""
        lb, port = self.pair_lb(pool_keys={"drain_timeout": "1s"}, fe_keys={"log_flows": "on"})
        c = Client(self, port)
        x = c.who()
        y = "d2" if x == "d1" else "d1"
        t0 = time.monotonic()
        r = lb.admin.action("p", x, "drain")
        t1 = time.monotonic()
        self.assertEqual(r.status, 200, str(r))
        st = find_server(lb.admin.stats(), "p", x)
        self.assertEqual((st["state"], st["active_connections"]), ("draining", 1), st)
        took = self.flow_switch(c, x, y, t0, t1, 1.0)
        measured("drain -> flow on the other server", f"{took * 1000:.0f} ms")
        ev = lb.wait_event("flow_end", client=c.addr, server=x)[0]
        self.assertEqual(ev.get("reason"), "drained", ev)
        lb.admin.wait_idle("p", x)
        self.assertEqual([c.who(timeout=ANSWER_TIMEOUT) for _ in range(5)], [y] * 5)
        self.assert_consistent(lb)

    def test_reload_keeps_flows(self):
        """SIGHUP adding a server (u1): the open flow keeps its server and
        stays one flow; new flows reach u1 too. A reload whose file has
        protocol = sctp fails, naming the line, and changes nothing. A
        reload that removes the flow's server keeps it until the pool's
        drain_timeout (reason drained), then the flow moves; one that drops
        the frontend's address ends its flows (reason reload)."""
        port = free_udp_port()
        fronts = [("fe", f"{HOST}:{port}", "p", {"log_flows": "on"})]
        keys = {"drain_timeout": "1s"}
        two = [("d1", self.d1.addr), ("d2", self.d2.addr)]
        lb = self.start_udp(fronts, [("p", two, keys)], allowed_errors={"reload_failed"})
        admin_port = lb.admin_port
        c = Client(self, port)
        x = c.who()
        y = "d2" if x == "d1" else "d1"
        total = fe_udp(lb.admin.stats(), "fe")["flows_total"]

        write_atomic(lb.config_path, udp_config(admin_port, fronts,
                                                [("p", two + [("u1", self.u1.addr)], keys)]))
        sighup_reload(lb, 2)
        self.assertEqual([c.who(timeout=ANSWER_TIMEOUT) for _ in range(20)], [x] * 20,
                         "the open flow changed servers on a reload that kept its server")
        st = lb.admin.stats()
        self.assertEqual((fe_udp(st, "fe")["flows_total"], fe_udp(st, "fe")["flows"],
                          find_server(st, "p", x)["active_connections"]), (total, 1, 1), st)
        answers, lost, _, _ = queries(port, 9, parallel=1)
        self.assertEqual(lost, [])
        self.assertGreater(answers.get("u1", 0), 0, f"new flows after the reload: {answers}")

        bad = udp_config(admin_port, [("fe", f"{HOST}:{port}", "p",
                                       {"protocol": "sctp", "log_flows": "on"})],
                         [("p", two, keys)])
        write_atomic(lb.config_path, bad)
        line = harness.line_of(bad.split("\n"), "protocol = sctp")
        ev = sighup_fail(lb)
        err = ev.get("error", "")
        self.assertRegex(err, "^" + re.escape(lb.config_path) + f":{line}: ", ev)
        self.assertIn("sctp", err)
        self.assertEqual([c.who(timeout=ANSWER_TIMEOUT) for _ in range(5)], [x] * 5)

        others = [s for s in two + [("u1", self.u1.addr)] if s[0] != x]
        write_atomic(lb.config_path, udp_config(admin_port, fronts, [("p", others, keys)]))
        t0 = time.monotonic()
        sighup_reload(lb, 3)
        t1 = time.monotonic()
        # Round robin may send the moved flow to y or u1.
        seen = []
        deadline = t1 + 1.0 + WAIT
        while True:
            ts = time.monotonic()
            name = c.who(timeout=ANSWER_TIMEOUT)
            tr = time.monotonic()
            seen.append((round(ts - t0, 3), name))
            if name != x:
                break
            self.assertLess(tr, deadline, f"the flow never left the removed server: {seen[-5:]}")
            time.sleep(max(0.0, 0.05 - (time.monotonic() - ts)))
        self.assertIn(name, (y, "u1"), seen[-5:])
        self.assertGreaterEqual(tr - t0, 1.0 - TIMER_TICK, f"moved before drain_timeout: {seen}")
        self.assertLessEqual(ts - t1, 1.0 + 0.05 + TIMEOUT_SLACK,
                             f"still on the removed {x} past drain_timeout: {seen[-5:]}")
        # A removed server drains as an operator's drain does (README).
        ev = lb.wait_event("flow_end", client=c.addr, server=x)[0]
        self.assertEqual(ev.get("reason"), "drained", ev)

        # A reload that drops the frontend's address ends its flows
        # (reason reload); the new address serves.
        port2 = free_udp_port()
        write_atomic(lb.config_path, udp_config(
            admin_port, [("fe", f"{HOST}:{port2}", "p", {"log_flows": "on"})],
            [("p", others, keys)]))
        sighup_reload(lb, 4)
        ev = lb.wait_event("flow_end", client=c.addr, server=name)[0]
        self.assertEqual(ev.get("reason"), "reload", ev)
        self.assertIn(Client(self, port2).who(timeout=ANSWER_TIMEOUT), (y, "u1"))
        self.assertIsNone(c.who(timeout=0.3), "the dropped address still answers")
        lb.assert_running()

    # ------------------------------------------------ metrics and logs

    def test_metrics_families(self):
        """Every UDP family of /metrics with its type and labels, one
        sample per frontend, direction, reason and server, agreeing with
        /stats; an eviction and a no_server drop make two of them
        non-zero."""
        port, nport = free_udp_port(), free_udp_port()
        lb = self.start_udp([("fe", f"{HOST}:{port}", "p", {"udp_max_flows": 2}),
                             ("fe_none", f"{HOST}:{nport}", "none", {})],
                            [("p", [("d1", self.d1.addr), ("d2", self.d2.addr)], {}),
                             ("none", [("d1", self.d1.addr)], {})],
                            # One worker: with two, the third flow may come
                            # to the worker that holds neither of the first
                            # two, which drops it (too_many_flows) rather
                            # than evict the other's (README, UDP).
                            workers=1)
        r = lb.admin.action("none", "d1", "disable")
        self.assertEqual(r.status, 200, str(r))
        answers, lost, _, _ = queries(port, 3, parallel=1)
        self.assertEqual(lost, [])
        c = Client(self, nport)
        self.assertIsNone(c.who(timeout=0.3), "an answer with no server in rotation")
        st = quiet_stats(lb.admin)
        self.assertEqual(fe_udp(st, "fe_none")["dropped"]["no_server"], 1, st)
        self.assertEqual(fe_udp(st, "fe")["flows_evicted"], 1, st)
        m = lb.admin.metrics()
        fams = {
            "lb_frontend_udp_flows": ("gauge", {"frontend"}),
            "lb_frontend_udp_flows_total": ("counter", {"frontend"}),
            "lb_frontend_udp_flows_evicted_total": ("counter", {"frontend"}),
            "lb_frontend_udp_datagrams_total": ("counter", {"frontend", "direction"}),
            "lb_frontend_udp_bytes_total": ("counter", {"frontend", "direction"}),
            "lb_frontend_udp_dropped_total": ("counter", {"frontend", "reason"}),
            "lb_server_udp_datagrams_total": ("counter", {"pool", "server", "direction"}),
        }
        for fam, (typ, keys) in fams.items():
            self.assertIn(fam, m.families, f"family {fam} missing")
            self.assertEqual(m.families[fam]["type"], typ, f"TYPE of {fam}")
            self.assertTrue(m.families[fam]["help"], f"empty HELP of {fam}")
            for name, labels, v in m.families[fam]["samples"]:
                self.assertEqual(set(labels), keys, f"labels of {name}{labels}")
        for fe in ("fe", "fe_none"):
            u = fe_udp(st, fe)
            self.assertEqual(m.value("lb_frontend_udp_flows", frontend=fe), u["flows"], fe)
            self.assertEqual(m.value("lb_frontend_udp_flows_total", frontend=fe),
                             u["flows_total"], fe)
            self.assertEqual(m.value("lb_frontend_udp_flows_evicted_total", frontend=fe),
                             u["flows_evicted"], fe)
            for d in ("received", "sent"):
                self.assertEqual(m.value("lb_frontend_udp_datagrams_total", frontend=fe,
                                         direction=d), u[f"datagrams_{d}"], (fe, d))
                self.assertEqual(m.value("lb_frontend_udp_bytes_total", frontend=fe,
                                         direction=d), u[f"bytes_{d}"], (fe, d))
            self.assertEqual(sorted(lab["direction"] for lab, _ in
                                    m.samples("lb_frontend_udp_datagrams_total", frontend=fe)),
                             ["received", "sent"])
            self.assertEqual(sorted(lab["reason"] for lab, _ in
                                    m.samples("lb_frontend_udp_dropped_total", frontend=fe)),
                             sorted(DROP_REASONS))
            for reason in DROP_REASONS:
                self.assertEqual(m.value("lb_frontend_udp_dropped_total", frontend=fe,
                                         reason=reason), u["dropped"][reason], (fe, reason))
        servers = [("p", "d1"), ("p", "d2"), ("none", "d1")]
        self.assertEqual(sorted((lab["pool"], lab["server"], lab["direction"]) for lab, _ in
                                m.samples("lb_server_udp_datagrams_total")),
                         sorted((p, s, d) for p, s in servers for d in ("received", "sent")))
        for p, s in servers:
            srv = find_server(st, p, s)
            for d in ("sent", "received"):
                self.assertEqual(m.value("lb_server_udp_datagrams_total", pool=p, server=s,
                                         direction=d), srv[f"udp_datagrams_{d}"], (p, s, d))
        self.assertEqual(m.value("lb_frontend_udp_datagrams_total", frontend="fe",
                                 direction="received"), 3)
        self.assert_consistent(lb)

    def test_log_flows(self):
        """log_flows = on: a flow_end line at info per flow, with the fields
        of the contract (reason responses for udp_responses = 1, idle after
        udp_idle_timeout, shutdown for a flow open at SIGTERM); off: none."""
        ports = {fe: free_udp_port() for fe in ("fe_on", "fe_off", "fe_idle", "fe_open")}
        keys = {"fe_on": {"udp_responses": 1, "log_flows": "on"},
                "fe_off": {"udp_responses": 1},
                "fe_idle": {"udp_idle_timeout": "300ms", "log_flows": "on"},
                "fe_open": {"log_flows": "on"}}
        lb = self.start_udp([(fe, f"{HOST}:{ports[fe]}", "p", keys[fe]) for fe in ports],
                            [("p", [("d1", self.d1.addr), ("d2", self.d2.addr)], {})])
        q_len = len(query("who.test", "TXT"))
        sizes = {n: len(s.ask(query("who.test", "TXT"))) for n, s in
                 (("d1", self.d1), ("d2", self.d2))}
        n = 10
        _, lost, _, flows_on = queries(ports["fe_on"], n, parallel=1)
        _, lost_off, _, _ = queries(ports["fe_off"], n, parallel=1)
        self.assertEqual((lost, lost_off), ([], []))
        evs = lb.wait_event("flow_end", count=n, frontend="fe_on")
        self.assertEqual(len(evs), n, evs)
        self.assertEqual(sorted((e.get("client"), e.get("server")) for e in evs),
                         sorted((f"{HOST}:{p}", s) for p, s in flows_on))
        for e in evs:
            self.assertEqual([k for k in FLOW_END_KEYS if k not in e], [], e)
            self.assertEqual((e.get("level"), e.get("reason"), e.get("datagrams_in"),
                              e.get("datagrams_out"), e.get("bytes_in"), e.get("bytes_out")),
                             ("info", "responses", "1", "1", str(q_len),
                              str(sizes[e["server"]])), e)
            self.assertRegex(e.get("duration_ms", ""), r"^\d+(\.\d+)?$", e)
            self.assertLess(float(e["duration_ms"]), IO_TIMEOUT * 1000, e)
        lb.admin.wait_stats(lambda s: fe_udp(s, "fe_off")["flows_total"] == n and
                            fe_udp(s, "fe_off")["flows"] == 0, WAIT, "fe_off's flows ended")
        self.assertEqual(flow_ends(lb, frontend="fe_off"), [], "log_flows = off logged flows")

        c = Client(self, ports["fe_idle"])
        self.assertIsNotNone(c.who())
        t_last = time.time()
        ev = lb.wait_event("flow_end", frontend="fe_idle")[0]
        idle = event_time(ev) - t_last
        measured("udp_idle_timeout = 300ms: flow ended after", f"{idle * 1000:.0f} ms")
        self.assertEqual((ev.get("reason"), ev.get("client"), ev.get("datagrams_in")),
                         ("idle", c.addr, "1"), ev)
        self.assertTrue(0.3 - TIMER_TICK - 0.01 <= idle <= 0.3 + TIMEOUT_SLACK,
                        f"idle flow ended {idle * 1000:.0f} ms after its last datagram")
        self.assertEqual(fe_udp(lb.admin.stats(), "fe_idle")["flows"], 0)

        o = Client(self, ports["fe_open"])
        for _ in range(3):
            self.assertIsNotNone(o.who())
        self.assertEqual(flow_ends(lb, frontend="fe_open"), [])
        self.assert_consistent(lb)
        self.assertEqual(lb.stop(), 0)
        ev = flow_ends(lb, frontend="fe_open")
        self.assertEqual([(e.get("reason"), e.get("client"), e.get("datagrams_in"),
                           e.get("datagrams_out")) for e in ev],
                         [("shutdown", o.addr, "3", "3")], ev)


# ================================================== against a UDP echo

class UdpEdgeTest(UdpTestCase):
    """Datagrams no DNS server sends, to the test's own UDP echo."""

    def echo_lb(self, copies=1, fe_keys=None, host=HOST, allowed_errors=(), batch=1):
        """lb with a UDP frontend "fe" on host in front of one UdpEcho.
        Returns (lb, echo, port)."""
        echo = self.backend(UdpEcho("echo", host=host, copies=copies, batch=batch))
        port = free_udp_port(host)
        listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lb = self.start_udp([("fe", listen, "p", fe_keys or {})], [("p", [("e", echo.addr)], {})],
                            allowed_errors=allowed_errors)
        return lb, echo, port

    def roundtrip(self, c, payload, timeout=IO_TIMEOUT):
        c.sock.sendto(payload, c.lb)
        got = c.recv(timeout)
        self.assertIsNotNone(got, f"no echo of a {len(payload)}-byte datagram")
        return got

    def test_empty_datagram(self):
        """A datagram of 0 bytes is a datagram: it reaches the server, its
        empty echo comes back, and both are counted."""
        lb, echo, port = self.echo_lb()
        c = Client(self, port)
        self.assertEqual(self.roundtrip(c, b""), b"")
        self.assertEqual(echo.got(), [(0, harness.sha256(b""))])
        self.assertEqual(self.roundtrip(c, b"after"), b"after")
        st = quiet_stats(lb.admin)
        u = fe_udp(st, "fe")
        self.assertEqual((u["datagrams_received"], u["datagrams_sent"], u["bytes_received"],
                          u["bytes_sent"], u["flows"]), (2, 2, 5, 5, 1), u)
        s = find_server(st, "p", "e")
        self.assertEqual((s["udp_datagrams_sent"], s["udp_datagrams_received"]), (2, 2), s)
        self.assert_consistent(lb)

    def test_largest_datagrams(self):
        """The largest UDP payloads there are (IPv4: 65,535 - 20 - 8 =
        65,507 bytes; IPv6: 65,535 - 8 = 65,527, fragmented on loopback's
        64 KiB MTU) arrive whole at the server and whole back."""
        for host, size in ((HOST, 65507), ("::1", 65527)):
            with self.subTest(host=host):
                lb, echo, port = self.echo_lb(host=host)
                c = Client(self, port, host=host)
                payload = os.urandom(size)
                got = self.roundtrip(c, payload)
                self.assertEqual(echo.got(), [(size, harness.sha256(payload))],
                                 "the datagram reached the server cut or changed")
                self.assertEqual(len(got), size)
                self.assertTrue(got == payload, "the echo came back changed")
                st = quiet_stats(lb.admin)
                u = fe_udp(st, "fe")
                self.assertEqual((u["bytes_received"], u["bytes_sent"]), (size, size), u)
                self.assert_consistent(lb)

    def test_flood_from_one_address(self):
        """20,000 datagrams from one client port as fast as Python sends
        them: lb stays up and answers /stats while they come, every
        datagram it read is forwarded or counted as dropped, and a new
        client is served right after."""
        lb, echo, port = self.echo_lb()
        c = Client(self, port)
        n, size = 20_000, 100
        t0 = time.monotonic()
        for i in range(n):
            c.sock.sendto(b"%08d" % i + b"f" * (size - 8), c.lb)
            if i == n // 2:
                mid = lb.admin.stats(timeout=5.0)   # answered mid-flood
        took = time.monotonic() - t0
        back = 0
        c.sock.setblocking(False)
        try:
            while True:
                c.sock.recv(65536)
                back += 1
        except BlockingIOError:
            pass
        c.sock.setblocking(True)
        st = quiet_stats(lb.admin)
        lb.assert_running()
        while c.recv(0):
            back += 1
        u, s = fe_udp(st, "fe"), find_server(st, "p", "e")
        d = u["dropped"]
        measured(f"flood of {n}", f"sent in {took:.2f} s; lb read {u['datagrams_received']}, "
                 f"forwarded {s['udp_datagrams_sent']}, echo got {len(echo.got())}, lb got "
                 f"{s['udp_datagrams_received']} back and sent {u['datagrams_sent']}, client "
                 f"read {back}; dropped {d}")
        self.assertLess(took, 10.0, "sending the flood took too long")
        self.assertIn("frontends", mid)
        self.assertEqual(u["flows_total"], 1, "one client port is one flow")
        client_drops = d["no_server"] + d["denied"] + d["send_failed"] + d["too_many_flows"]
        # Each count is bounded by the one before it on the path; the
        # kernel may drop in between (full socket buffers), lb may not
        # lose a datagram it read without counting it.
        self.assertLessEqual(u["datagrams_received"], n)
        self.assertLessEqual(s["udp_datagrams_sent"], u["datagrams_received"])
        self.assertGreaterEqual(s["udp_datagrams_sent"] + client_drops, u["datagrams_received"])
        self.assertLessEqual(len(echo.got()), s["udp_datagrams_sent"])
        self.assertLessEqual(s["udp_datagrams_received"], echo.sent)
        self.assertLessEqual(u["datagrams_sent"], s["udp_datagrams_received"])
        self.assertLessEqual(back, u["datagrams_sent"])
        self.assertEqual(u["bytes_received"], size * u["datagrams_received"])
        self.assertGreater(u["datagrams_received"], n // 10, "lb read almost none of the flood")
        # Still serving: the same flow and a new one.
        self.assertEqual(self.roundtrip(Client(self, port), b"new"), b"new")
        self.assertEqual(self.roundtrip(c, b"same"), b"same")
        self.assert_consistent(lb)

    def test_second_reply_after_flow_ended(self):
        """udp_responses = 1 and a server that answers every datagram
        twice: each client gets exactly one answer; the second copy is
        dropped by the kernel (the flow's socket is closed), never
        relayed."""
        lb, echo, port = self.echo_lb(copies=2, fe_keys={"udp_responses": 1})
        n = 50
        clients = [Client(self, port) for _ in range(n)]
        for i, c in enumerate(clients):
            payload = b"q%03d" % i
            self.assertEqual(self.roundtrip(c, payload), payload)
        wait_for(lambda: echo.sent == 2 * n, WAIT, lambda: f"the echo to send {2 * n} copies "
                 f"(sent {echo.sent})")
        # Everything the server sent has reached lb's sockets or the
        # kernel's floor; quiet_stats waits until lb is done with it.
        st = quiet_stats(lb.admin)
        extra = [(c.addr, c.recv(0)) for c in clients]
        self.assertEqual([x for x in extra if x[1] is not None], [],
                         "a second answer reached a client")
        u = fe_udp(st, "fe")
        self.assertEqual((u["flows"], u["flows_total"], u["datagrams_received"],
                          u["datagrams_sent"]), (0, n, n, n), u)
        self.assert_consistent(lb)

    def test_burst_of_replies_past_a_turns_batch(self):
        """100 replies queued at once on a flow's socket (lb stopped while
        the server sends them), more than the 64 a flow's turn reads: every
        one reaches the client, in order, without another datagram from it.
        The socket is edge-triggered: what one turn leaves is read in the
        next, not at the server's next datagram."""
        lb, echo, port = self.echo_lb()
        c = Client(self, port)
        self.assertEqual(self.roundtrip(c, b"open"), b"open")
        n = 100
        os.kill(lb.pid, signal.SIGSTOP)
        try:
            for i in range(n):
                self.assertEqual(echo.send_to_senders(b"r%03d" % i), 1)
        finally:
            os.kill(lb.pid, signal.SIGCONT)
        got = []
        while len(got) < n and (d := c.recv(IO_TIMEOUT)) is not None:
            got.append(d)
        self.assertEqual(got, [b"r%03d" % i for i in range(n)])
        u = fe_udp(quiet_stats(lb.admin), "fe")
        self.assertEqual((u["flows"], u["datagrams_sent"]), (1, n + 1), u)
        self.assert_consistent(lb)

    def test_reply_to_closed_flow_is_counted(self):
        """A server that replies to flows lb has closed (udp_responses = 1,
        /stats shows none open): nothing reaches a client, and the
        kernel counts each reply in Udp: NoPorts (/proc/net/snmp), since
        the flow's socket is gone. lb holds no socket open to count them
        itself (nor does nginx)."""
        lb, echo, port = self.echo_lb(fe_keys={"udp_responses": 1})
        n = 30
        clients = [Client(self, port) for _ in range(n)]
        for i, c in enumerate(clients):
            self.assertEqual(self.roundtrip(c, b"q%03d" % i), b"q%03d" % i)
        wait_for(lambda: fe_udp(lb.admin.stats(), "fe")["flows"] == 0, WAIT,
                 "the flows to close at their answers")
        before = udp_no_ports()
        # One socket a flow, each on a port the kernel picked at random: two
        # of the 30, one closed before the other opened, may have had the
        # same one (about 1.6% of runs), more than 3 practically never.
        sent = echo.send_to_senders(b"late")
        self.assertGreaterEqual(sent, n - 3, "flows' sockets shared ports")
        wait_for(lambda: udp_no_ports() - before >= sent, WAIT,
                 lambda: f"Udp: NoPorts to count {sent} late replies "
                 f"(+{udp_no_ports() - before})")
        self.assertEqual([(c.addr, d) for c in clients if (d := c.recv(0)) is not None], [],
                         "a late reply reached a client")
        u = fe_udp(quiet_stats(lb.admin), "fe")
        self.assertEqual((u["flows"], u["flows_total"], u["datagrams_sent"]), (0, n, n), u)
        self.assert_consistent(lb)

    def test_responses_count_each_datagram(self):
        """udp_responses = 1 with two datagrams in flight from one port
        (a resolver's A and AAAA): the flow ends after both answers, as
        nginx's proxy_responses does, not at the first one (whose end
        would leave the second answer to a closed socket)."""
        lb, echo, port = self.echo_lb(batch=2, fe_keys={"udp_responses": 1})
        n = 20
        for i in range(n):
            c = Client(self, port)
            c.sock.sendto(b"a%03d" % i, c.lb)
            c.sock.sendto(b"aaaa%03d" % i, c.lb)
            got = sorted(x for x in (c.recv(IO_TIMEOUT), c.recv(IO_TIMEOUT)) if x is not None)
            self.assertEqual(got, [b"a%03d" % i, b"aaaa%03d" % i], f"pair {i}")
        u = fe_udp(quiet_stats(lb.admin), "fe")
        self.assertEqual((u["flows"], u["flows_total"], u["datagrams_received"],
                          u["datagrams_sent"]), (0, n, 2 * n, 2 * n), u)
        self.assert_consistent(lb)


# ============================================================ config

class UdpConfigTest(LbTestCase):

    def test_protocol_errors(self):
        """lb -t: protocol = sctp is an error at its line, naming the value;
        udp_ keys on a TCP frontend are an error at their line; a good UDP
        frontend is accepted."""
        d = harness.make_tmpdir()

        def check(fe_keys, expect_line_of=None, words=()):
            text = udp_config(free_port(), [("fe", f"{HOST}:{free_udp_port()}", "p", fe_keys)],
                              [("p", [("s", f"{HOST}:53")], {})])
            path = os.path.join(d, f"case{len(os.listdir(d))}.ini")
            with open(path, "w") as f:
                f.write(text)
            code, out, err = harness.lb_test(path)
            if expect_line_of is None:
                self.assertEqual(code, 0, f"{fe_keys}: {err}")
                return
            line = harness.line_of(text.split("\n"), expect_line_of)
            self.assertEqual(code, 1, f"{fe_keys}: lb -t accepted it ({out!r})")
            lines = [x for x in err.splitlines() if x.strip()]
            self.assertEqual(len(lines), 1, err)
            self.assertRegex(lines[0], "^" + re.escape(path) + f":{line}: ", err)
            for w in words:
                self.assertIn(w, lines[0])

        check({"udp_responses": 1, "udp_max_flows": 100, "udp_idle_timeout": "5s",
               "log_flows": "on"})
        check({"protocol": "sctp"}, "protocol = sctp", ("sctp", "udp"))
        check({"protocol": "tcp", "udp_responses": 1}, "udp_responses", ("udp_responses",))
        check({"udp_max_flows": 0}, "udp_max_flows", ("udp_max_flows",))


if __name__ == "__main__":
    harness.main()
