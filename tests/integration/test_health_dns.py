"""The datagram checks, check = dns and check = udp, against real DNS
servers of Debian's packages (dnsmasq 2.90 from dnsmasq-base, unbound
1.17), fake DNS servers that send what is not the answer, and a small UDP
responder, all on 127.0.0.1 and started by this file.

The fault table, for a DNS server: a crash (SIGKILL) is refused at once
(the kernel answers the probe's datagram with an ICMP port unreachable),
a hang (SIGSTOP: the socket still takes the queries, nobody answers) times
out; either takes the server out between (K-1)*I and K*I+T after the fault,
with interval I, fall K and timeout T, by the K-th failed probe exactly.
Run by hand, each case prints what it measured ("measured: ...")."""

import os
import signal
import socket
import struct
import sys
import threading
import time

import harness
from admin_client import Admin
from harness import (HC_SLACK, HOST, TIMER_TICK, LbTestCase, event_time, free_port,
                     from_slot_ms, health_history, lb_test, transition_streak, wait_for)
from dns_servers import Unbound, free_udp_port
from test_discover import DnsServer

I, T, K = 0.3, 0.2, 2
KEYS = {"check_interval": "300ms", "check_timeout": "200ms", "rise": 1, "fall": K}
WAIT = 10.0

# dnsmasq answers example.test from its own zone (SOA, NS, the host
# record's A) and NXDOMAIN for any other name in it; for names outside,
# such as the root the dns check asks by default, REFUSED: it has no
# upstream.
ZONE = ["auth-zone=example.test", "auth-server=ns.example.test",
        "host-record=www.example.test,127.0.0.9"]


def measured(what, seconds):
    print(f"measured: {what} {seconds * 1000:.0f} ms", file=sys.stderr, flush=True)


def checks(lb, pool, result=None, after=0.0):
    return [e for e in lb.events("check", pool=pool)
            if event_time(e) > after and result in (None, e.get("result"))]


def changes(lb, event, pool, after=0.0):
    return [e for e in lb.events(event, pool=pool) if event_time(e) > after]


class UdpServer:
    """A UDP socket on 127.0.0.1 and a thread that answers each datagram
    with reply(datagram) -> [datagrams to send back] (none: silence), and
    keeps what came: [(source port, datagram)]. stop() closes the socket,
    which ends the thread."""

    def __init__(self, reply):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.port = self.sock.getsockname()[1]
        self.addr = f"{HOST}:{self.port}"
        self.reply = reply
        self.got = []
        self._lock = threading.Lock()
        self.thread = harness.start_thread(self._serve, name=f"udp-{self.port}")

    def _serve(self):
        while True:
            try:
                data, peer = self.sock.recvfrom(4096)
            except OSError:
                return                          # closed by stop()
            if peer is None:
                return                          # shut down by stop()
            with self._lock:
                self.got.append((peer[1], data))
            for out in self.reply(data):
                try:
                    self.sock.sendto(out, peer)
                except OSError:
                    return

    def received(self):
        with self._lock:
            return list(self.got)

    def stop(self):
        # shutdown wakes the recvfrom, which then fails: the thread ends
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def answer_to(query, rcode=0, answers=0):
    """A DNS answer to query: its header with QR, rcode and an answer
    count, and its question (no records: the check reads none)."""
    flags = struct.unpack(">H", query[2:4])[0] | 0x8000 | rcode
    return query[:2] + struct.pack(">HHHHH", flags, 1, answers, 0, 0) + query[12:]


class HealthDnsTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        for tool in (DnsServer.BIN, Unbound.BIN):
            if not os.access(tool, os.X_OK):
                raise AssertionError(f"{tool} is not installed (deploy/install-deps.sh --test "
                                     "installs dnsmasq-base and unbound)")
        cls.dns = DnsServer(harness.make_tmpdir())
        cls.unbound = None
        try:
            cls.dns.port = free_udp_port()
            cls.dns.serve(extra=ZONE)
            cls.unbound = Unbound("ub")
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.unbound is not None:
            cls.unbound.stop()
        cls.dns.stop()

    def own_dnsmasq(self):
        """A dnsmasq of the test's own, to crash or stop."""
        d = DnsServer(harness.make_tmpdir())
        d.port = free_udp_port()
        self.addCleanup(d.stop)
        d.serve(extra=ZONE)
        return d

    def udp_server(self, reply):
        s = UdpServer(reply)
        self.addCleanup(s.stop)
        return s

    def wait_detail(self, lb, pool, result, detail, after=0.0):
        """Waits for a check of pool with that result and detail; returns
        it."""
        def found():
            for e in checks(lb, pool, result, after):
                if e.get("detail") == detail:
                    return e
            return None
        try:
            return wait_for(found, WAIT, f"pool {pool}: a check {result} with {detail!r}")
        except AssertionError:
            seen = [(e.get("result"), e.get("detail")) for e in checks(lb, pool)][-5:]
            raise AssertionError(f"pool {pool}: no check {result} with {detail!r}; "
                                 f"the last ones: {seen}") from None

    # ------------------------------------------------------------ verdicts

    def test_passing_servers_in_stats(self):
        """Answers of both servers pass, with the rcode and answer count as
        the detail, which /stats shows; a tcp check of the same dnsmasq
        (its TCP port) runs beside them."""
        dns, ub = self.dns.port, self.unbound.addr
        admin_port = free_port()
        lb = self.lb_pools([
            ("soa", [("ns", f"{HOST}:{dns}")], dict(KEYS, check="dns",
                                                   check_dns_name="example.test")),
            ("a", [("ns", f"{HOST}:{dns}")], dict(KEYS, check="dns", check_dns_type="A",
                                                 check_dns_name="WWW.Example.Test.")),
            ("unbound", [("ub", ub)], dict(KEYS, check="dns", check_dns_type="TXT",
                                           check_dns_name="t.test")),
            ("tcp", [("ns", f"{HOST}:{dns}")], dict(KEYS, check="tcp"))],
            log_level="debug", admin_port=admin_port)
        for pool in ("soa", "a", "unbound"):
            self.wait_detail(lb, pool, "passed", "rcode NOERROR, 1 answer")
        self.wait_detail(lb, "tcp", "passed", "connected")
        admin = Admin(admin_port)
        for pool, server in (("soa", "ns"), ("unbound", "ub")):
            srv = admin.wait_server(pool, server, lambda s: s["last_check"] is not None, WAIT,
                                    "a check in /stats")
            self.assertEqual((srv["check"], srv["health"], srv["last_check"]["result"],
                              srv["last_check"]["detail"]),
                             ("dns", "up", "passed", "rcode NOERROR, 1 answer"), srv)
        for pool in ("soa", "a", "unbound", "tcp"):
            self.assertFalse(changes(lb, "server_down", pool), pool)

    def test_rcodes(self):
        """check_dns_rcode decides: NXDOMAIN fails by default and passes
        when listed; dnsmasq refuses the default question (the root's SOA)
        for want of an upstream. A failing first probe takes the server
        out at once, with the rcode as its reason."""
        dns, ub = f"{HOST}:{self.dns.port}", self.unbound.addr
        nx = {"check": "dns", "check_dns_name": "nx.example.test", "check_dns_type": "A"}
        lb = self.lb_pools([
            ("nx", [("ns", dns)], dict(KEYS, **nx)),
            ("nx_ok", [("ns", dns)], dict(KEYS, check_dns_rcode="NOERROR, NXDOMAIN", **nx)),
            ("unbound_nx", [("ub", ub)], dict(KEYS, **nx)),
            ("root", [("ns", dns)], dict(KEYS, check="dns")),
            ("refused_ok", [("ns", dns)], dict(KEYS, check="dns", check_dns_rcode="refused"))],
            log_level="debug")
        for pool, reason in (("nx", "rcode NXDOMAIN"), ("unbound_nx", "rcode NXDOMAIN"),
                             ("root", "rcode REFUSED")):
            self.wait_detail(lb, pool, "failed", reason)
            down = lb.wait_event("server_down", pool=pool)[0]
            self.assertEqual(down["reason"], reason, down)
        self.wait_detail(lb, "nx_ok", "passed", "rcode NXDOMAIN, 0 answers")
        self.wait_detail(lb, "refused_ok", "passed", "rcode REFUSED, 0 answers")
        wait_for(lambda: len(checks(lb, "nx_ok", "passed")) >= 3, WAIT, "3 passes of nx_ok")
        for pool in ("nx_ok", "refused_ok"):
            self.assertFalse(changes(lb, "server_down", pool), pool)
            self.assertFalse(checks(lb, pool, "failed"), pool)

    # ---------------------------------------------------------------- faults

    def assert_out_by_kth(self, lb, pool, down):
        """down (a server_down event) came with the K-th failed probe."""
        history = health_history(lb, pool, "ns")
        same = next(e for e in history if e["event"] == "server_down" and e["ts"] == down["ts"])
        problem = transition_streak(history, same, K)
        self.assertIsNone(problem, problem)

    def test_killed_server(self):
        """SIGKILL: each probe is refused at once, so the K-th comes
        between (K-1)*I and K*I after the crash; back at the first pass
        after a restart."""
        d = self.own_dnsmasq()
        lb = self.lb_pools([("p", [("ns", f"{HOST}:{d.port}")],
                             dict(KEYS, check="dns", check_dns_name="example.test"))],
                           log_level="debug")
        wait_for(lambda: len(checks(lb, "p", "passed")) >= 2, WAIT, "2 passes")
        d.proc.kill()
        d.proc.wait(timeout=10)
        t_kill = time.time()
        down = wait_for(lambda: changes(lb, "server_down", "p"), WAIT,
                        "the killed server to go down")[0]
        self.assertEqual(down["reason"], "refused (ICMP port unreachable)", down)
        latency = event_time(down) - t_kill
        measured("dnsmasq SIGKILL -> down", latency)
        self.assertTrue((K - 1) * I - TIMER_TICK - 0.01 <= latency <= K * I + T + HC_SLACK,
                        f"down {latency * 1000:.0f} ms after the kill")
        self.assert_out_by_kth(lb, "p", down)
        refused = checks(lb, "p", "failed", t_kill)
        self.assertTrue(all(float(e["duration_ms"]) < 50 for e in refused),
                        f"a refused probe waited: {refused}")
        # t_up is taken before serve(), which waits for dnsmasq to answer:
        # the first pass may come while it waits.
        t_up = time.time()
        d.serve(extra=ZONE)
        t_ready = time.time()
        up = wait_for(lambda: changes(lb, "server_up", "p", t_up), WAIT,
                      "the restarted server to come back")[0]
        measured("dnsmasq answering -> up", event_time(up) - t_ready)
        self.assertLessEqual(event_time(up) - t_ready, I + HC_SLACK)

    def test_stopped_server(self):
        """SIGSTOP: the queries wait in the socket, unanswered; each probe
        times out after T, so the K-th ends between (K-1)*I + T and
        K*I + T. SIGCONT: back at the next probe."""
        d = self.own_dnsmasq()
        lb = self.lb_pools([("p", [("ns", f"{HOST}:{d.port}")],
                             dict(KEYS, check="dns", check_dns_name="example.test"))],
                           log_level="debug")
        wait_for(lambda: len(checks(lb, "p", "passed")) >= 2, WAIT, "2 passes")
        os.kill(d.proc.pid, signal.SIGSTOP)
        t_stop = time.time()
        try:
            down = wait_for(lambda: changes(lb, "server_down", "p"), WAIT,
                            "the stopped server to go down")[0]
            self.assertEqual(down["reason"], "timeout: no reply in 200 ms", down)
            latency = event_time(down) - t_stop
            measured("dnsmasq SIGSTOP -> down", latency)
            self.assertTrue((K - 1) * I + T - TIMER_TICK - 0.01 <= latency
                            <= K * I + T + HC_SLACK,
                            f"down {latency * 1000:.0f} ms after the stop")
            self.assert_out_by_kth(lb, "p", down)
            for e in checks(lb, "p", "failed", t_stop):
                self.assertGreaterEqual(from_slot_ms(e), (T - TIMER_TICK) * 1000 - 10, e)
                self.assertLessEqual(float(e["duration_ms"]), (T + HC_SLACK) * 1000, e)
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        t_cont = time.time()
        up = wait_for(lambda: changes(lb, "server_up", "p", t_cont), WAIT,
                      "the continued server to come back")[0]
        measured("dnsmasq SIGCONT -> up", event_time(up) - t_cont)
        self.assertLessEqual(event_time(up) - t_cont, I + HC_SLACK)

    # ------------------------------------------- datagrams that are not the answer

    def test_not_the_answer(self):
        """What is not the answer is ignored, and the probe waits on for
        it: an answer that follows a wrong one passes; wrong ones alone
        fail at the timeout, which names the last. Each probe comes from a
        port of its own with an id of its own."""
        def wrong_id(q):
            return [bytes([q[0] ^ 0xff]) + answer_to(q)[1:]]
        modes = {
            "late": lambda q: wrong_id(q) + [answer_to(q, answers=1)],
            "wrong_id": wrong_id,
            "echo": lambda q: [q],
            "short": lambda q: [answer_to(q)[:11]],
            "question": lambda q: [answer_to(q)[:-4] + b"\x00\x01\x00\x01"],   # type A
        }
        servers = {m: self.udp_server(f) for m, f in modes.items()}
        lb = self.lb_pools([(m, [("ns", s.addr)], dict(KEYS, check="dns",
                                                      check_dns_name="example.test"))
                            for m, s in servers.items()], log_level="debug")
        self.wait_detail(lb, "late", "passed", "rcode NOERROR, 1 answer")
        for mode, why in (("wrong_id", "wrong id"), ("echo", "not a response"),
                          ("short", "truncated header"), ("question", "question mismatch")):
            e = self.wait_detail(lb, mode, "failed", "timeout: no answer in 200 ms (1 reply "
                                 f"ignored, the last: {why})")
            self.assertGreaterEqual(from_slot_ms(e), (T - TIMER_TICK) * 1000 - 10, e)
        wait_for(lambda: len(servers["late"].received()) >= 6, WAIT, "6 queries")
        got = servers["late"].received()
        ports = [p for p, _ in got]
        ids = [q[:2] for _, q in got]
        # the kernel picks each socket's port at random: two may meet
        self.assertGreaterEqual(len(set(ports)), len(ports) - 1, f"source ports: {ports}")
        self.assertGreaterEqual(len(set(ids)), len(ids) - 1, f"ids: {ids}")
        for _, q in got:
            self.assertEqual(q[2:], b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
                             b"\x07example\x04test\x00\x00\x06\x00\x01", q)
        self.assertFalse(changes(lb, "server_down", "late"))

    # -------------------------------------------------------------- check = udp

    def test_udp_check(self):
        """check = udp sends check_send as written and passes on a reply
        that starts with check_expect_bytes (any reply without it); a
        different start fails at once, no reply at check_timeout, and an
        ICMP port unreachable at once."""
        pong = self.udp_server(lambda d: [b"PONG " + d])
        pang = self.udp_server(lambda d: [b"PANG"])
        echo = self.udp_server(lambda d: [d])
        silent = self.udp_server(lambda d: [])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((HOST, 0))
            closed = s.getsockname()[1]         # nothing there once closed
        ping = {"check": "udp", "check_send": r"PING\r\n", "check_expect_bytes": "PONG"}
        lb = self.lb_pools([
            ("pong", [("s", pong.addr)], dict(KEYS, **ping)),
            ("pang", [("s", pang.addr)], dict(KEYS, **ping)),
            ("any", [("s", pang.addr)], dict(KEYS, check="udp", check_send="hello")),
            ("hex", [("s", echo.addr)], dict(KEYS, check="udp", check_send="0x00ff0a",
                                             check_expect_bytes=r"\x00\xff")),
            ("silent", [("s", silent.addr)], dict(KEYS, **ping)),
            ("refused", [("s", f"{HOST}:{closed}")], dict(KEYS, **ping))],
            log_level="debug")
        self.wait_detail(lb, "pong", "passed", r'reply "PONG PING\r\n" (11 bytes)')
        self.wait_detail(lb, "any", "passed", 'reply "PANG" (4 bytes)')
        self.wait_detail(lb, "hex", "passed", r'reply "\0\xff\n" (3 bytes)')
        e = self.wait_detail(lb, "pang", "failed",
                             'reply "PANG" (4 bytes) does not start with check_expect_bytes')
        self.assertLess(float(e["duration_ms"]), 50, e)
        e = self.wait_detail(lb, "silent", "failed", "timeout: no reply in 200 ms")
        measured("udp check, no reply: probe", float(e["duration_ms"]) / 1000)
        self.assertTrue((T - TIMER_TICK) * 1000 - 10 <= from_slot_ms(e)
                        <= (T + HC_SLACK) * 1000, e)
        e = self.wait_detail(lb, "refused", "failed", "refused (ICMP port unreachable)")
        self.assertLess(float(e["duration_ms"]), 50, e)
        self.assertEqual({d for _, d in pong.received()}, {b"PING\r\n"})
        self.assertEqual({d for _, d in echo.received()}, {b"\x00\xff\n"})
        for pool in ("pang", "silent", "refused"):
            lb.wait_event("server_down", pool=pool)
        for pool in ("pong", "any", "hex"):
            self.assertFalse(changes(lb, "server_down", pool), pool)

    # --------------------------------------------------------- config errors

    def test_config_errors(self):
        """Each mistake is one FILE:LINE: message at its own line, and lb
        does not start."""
        text, _ = harness.make_pools_config(
            [("p", [("ns", f"{HOST}:{self.dns.port}")], dict(KEYS, check="dns"))])
        base = text.splitlines()
        cases = (
            ("check = dns", ["check_dns_type = AXFR"],
             'check_dns_type: "AXFR" is not a DNS type (use A, AAAA, NS, MX, TXT, CNAME, PTR, '
             "SRV, SOA, ANY or TYPEnnn, nnn 1..65535)"),
            ("check = dns", ["check_dns_rcode = NOERROR, NOSUCH"],
             'check_dns_rcode: "NOSUCH" is not an rcode (use NOERROR, FORMERR, SERVFAIL, '
             "NXDOMAIN, NOTIMP, REFUSED, YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH or NOTZONE)"),
            ("check = dns", ["check_dns_name = bad..name"],
             'check_dns_name: "bad..name" is not a DNS name (labels of 1 to 63 of A-Z a-z 0-9 '
             "- _, at most 253 characters; . for the root)"),
            ("check = tcp", ["check_dns_name = example.test"],
             "check_dns_name needs check = dns"),
            ("check = tcp", ["check_send = PING"], "check_send needs check = udp"),
            ("check = dns", ["check_expect_bytes = PONG"],
             "check_expect_bytes needs check = udp"),
            ("check = udp", ["check_send = 0x0g"],
             'check_send: "0x0g" is not hex after its 0x (use 0-9 and a-f, two digits a byte)'),
            ("check = udp", ["check_send = PING\\q"],
             'check_send: "\\q" in "PING\\q" is not an escape (use \\\\, \\r, \\n, \\t, \\0 or '
             "\\xHH with two hex digits)"),
        )
        d = harness.make_tmpdir()
        for n, (check, extra, want) in enumerate(cases):
            with self.subTest(want=want):
                lines = [check if l == "check = dns" else l for l in base] + extra
                path = os.path.join(d, f"case{n}.ini")
                with open(path, "w") as f:
                    f.write("\n".join(lines) + "\n")
                code, out, err = lb_test(path)
                self.assertEqual(code, 1, (out, err))
                self.assertEqual(err.strip(), f"{path}:{len(lines)}: {want}")
        # check = udp without check_send: at the check line
        lines = [("check = udp" if l == "check = dns" else l) for l in base]
        path = os.path.join(d, "nosend.ini")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        code, out, err = lb_test(path)
        self.assertEqual((code, err.strip()),
                         (1, f"{path}:{lines.index('check = udp') + 1}: pool p: check = udp "
                             "needs check_send (the datagram to send)"))
        # and lb -c does not start on such a file
        code, out, err = harness.run_lb(["-c", path])
        self.assertEqual(code, 1, err)
        self.assertIn("check = udp needs check_send", err)


if __name__ == "__main__":
    harness.main()
