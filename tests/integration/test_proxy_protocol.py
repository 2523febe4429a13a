"""PROXY protocol against real peers: a strict v2 parser behind lb (the
UNIQUE_ID TLV against session_end's id=), checks with check_send_proxy,
real nginx behind lb (v1 and v2, IPv4 and IPv6) and real HAProxy in front
of it (send-proxy and send-proxy-v2). Expensive peers start once per class
and are stopped by pid."""

import functools
import os
import shutil
import signal
import socket
import struct
import subprocess
import time

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, free_port, recv_until_eof, skip_if, wait_for
from admin_client import Admin, find_server

SIG = b"\r\n\r\n\x00\r\nQUIT\n"
WAIT = 10.0


class Reader:
    """Buffered exact reads from a socket (a header and what follows it may
    come in one segment or in many)."""

    def __init__(self, conn):
        self.conn, self.buf = conn, b""

    def exact(self, n):
        while len(self.buf) < n:
            d = self.conn.recv(65536)
            if not d:
                raise AssertionError(f"EOF after {len(self.buf)} of {n} bytes")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self):
        out = [self.buf]
        while True:
            d = self.conn.recv(65536)
            if not d:
                return b"".join(out)
            out.append(d)


def parse_v2(r):
    """Reads one PROXY v2 PROXY-command header strictly; returns
    (src, dst, {tlv type: value})."""
    head = r.exact(16)
    assert head[:12] == SIG, f"bad signature {head[:12]!r}"
    assert head[12] == 0x21, f"ver/cmd {head[12]:#x}, expected 0x21 (v2 PROXY)"
    fam, length = head[13], struct.unpack("!H", head[14:16])[0]
    body = r.exact(length)
    if fam == 0x11:
        if length < 12:
            raise AssertionError(f"TCP4 block of {length} bytes")
        src = f"{socket.inet_ntop(socket.AF_INET, body[0:4])}:{struct.unpack('!H', body[8:10])[0]}"
        dst = f"{socket.inet_ntop(socket.AF_INET, body[4:8])}:{struct.unpack('!H', body[10:12])[0]}"
        off = 12
    elif fam == 0x21:
        if length < 36:
            raise AssertionError(f"TCP6 block of {length} bytes")
        src = f"[{socket.inet_ntop(socket.AF_INET6, body[0:16])}]:{struct.unpack('!H', body[32:34])[0]}"
        dst = f"[{socket.inet_ntop(socket.AF_INET6, body[16:32])}]:{struct.unpack('!H', body[34:36])[0]}"
        off = 36
    else:
        raise AssertionError(f"family {fam:#x}, expected 0x11 or 0x21")
    tlvs = {}
    while off < length:
        if off + 3 > length:
            raise AssertionError(f"TLV head past the end at {off} of {length}")
        t, n = body[off], struct.unpack("!H", body[off + 1:off + 3])[0]
        if off + 3 + n > length:
            raise AssertionError(f"TLV {t:#x} of {n} bytes past the end")
        assert t not in tlvs, f"TLV {t:#x} twice"
        tlvs[t] = body[off + 3:off + 3 + n]
        off += 3 + n
    return src, dst, tlvs


def v2_handler(backend, conn, greeting=None):
    """Parses the header, sends greeting if any (a server that speaks first),
    then reads the payload to EOF; reports both."""
    r = Reader(conn)
    try:
        src, dst, tlvs = parse_v2(r)
    except AssertionError as e:
        backend.report(("bad", str(e)))
        return
    if greeting is not None:
        conn.sendall(greeting)
    backend.report(("ok", src, dst, tlvs, r.rest()))
    conn.sendall(b"done")


def through_v2(test, backend, port, payload):
    """Sends payload through lb's port to a v2_handler backend and half-closes;
    checks the answer, the header's source and the payload; returns (client
    port, the header's destination, its TLVs)."""
    s, cport = bound_client()
    test.addCleanup(s.close)
    s.connect((HOST, port))
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    test.assertEqual(recv_until_eof(s), (b"done", "eof"))
    rep = backend.next_report()
    test.assertEqual(rep[0], "ok", rep)
    _, src, dst, tlvs, got = rep
    test.assertEqual(src, f"{HOST}:{cport}")
    test.assertTrue(got == payload, f"payload of {len(payload)} bytes changed "
                                    f"({len(got)} bytes arrived)")
    return cport, dst, tlvs


def bound_client(family=socket.AF_INET):
    """A client socket bound to a known port: (sock, port)."""
    s = socket.socket(family)
    s.bind(("::1" if family == socket.AF_INET6 else HOST, 0))
    s.settimeout(IO_TIMEOUT)
    return s, s.getsockname()[1]


def lb_config(frontends, pools, admin_port=None):
    """frontends: [(name, listen, pool, extra lines)]; pools: [(name, lines)]."""
    lines = ["[global]", "workers = 2", "log_level = debug", "shutdown_timeout = 3s", "",
             "[admin]", f"listen = {HOST}:{admin_port or free_port()}", ""]
    for name, listen, pool, extra in frontends:
        lines += [f"[frontend {name}]", f"listen = {listen}", f"pool = {pool}"] + extra + [""]
    for name, extra in pools:
        lines += [f"[pool {name}]", "connect_timeout = 1s"] + extra + [""]
    return "\n".join(lines)


class V2BackendTest(LbTestCase):

    def start_v2(self, b):
        """lb in front of backend b with send_proxy = v2: (lb, its port)."""
        port = free_port()
        lb = self.start_lb(lb_config([("fe", f"{HOST}:{port}", "p", [])],
                                     [("p", [f"server = s {b.addr}", "send_proxy = v2",
                                             "check = none"])]))
        return lb, port

    def test_v2_header_tlv_and_payload(self):
        b = self.custom(v2_handler, name="v2")
        lb, port = self.start_v2(b)
        # 0: a client that sends nothing and closes; the header still goes
        # first, then the FIN.
        for size in (0, 1, 100_000):
            cport, dst, tlvs = through_v2(self, b, port, os.urandom(size))
            self.assertEqual(dst, f"{HOST}:{port}")
            self.assertIn(0x05, tlvs, f"no UNIQUE_ID TLV: {tlvs}")
            uid = tlvs[0x05].decode()
            self.assertRegex(uid, r"^[0-9a-f]{16}$")
            ev = lb.wait_event("session_end", client=f"{HOST}:{cport}")[0]
            self.assertEqual(ev.get("id"), uid, ev)


    def test_server_speaks_first(self):
        """The header waits for the client's first bytes (to share their
        segment) only briefly: a server that greets first (SMTP, MySQL) gets
        it alone when the client says nothing, and the greeting comes."""
        b = self.custom(functools.partial(v2_handler, greeting=b"220 hello\r\n"),
                        name="greeter")
        _, port = self.start_v2(b)
        s, cport = bound_client()
        self.addCleanup(s.close)
        s.connect((HOST, port))
        self.assertEqual(Reader(s).exact(11), b"220 hello\r\n")
        s.sendall(b"QUIT\r\n")
        s.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_until_eof(s), (b"done", "eof"))
        rep = b.next_report()
        self.assertEqual((rep[0], rep[1], rep[4]), ("ok", f"{HOST}:{cport}", b"QUIT\r\n"), rep)


NGINX = "/usr/sbin/nginx"
HAPROXY = "/usr/sbin/haproxy"


def _stop(proc):
    """SIGTERM by pid, SIGKILL after a deadline."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _listening(port, family=socket.AF_INET):
    """True when something listens on port (read from /proc: no connect, so
    no access-log line and no upstream connect)."""
    path = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    with open(path) as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].split(":")[1], 16) == port:
                return True
    return False


def _spawn_listening(what, args, out, is_listening, logs=()):
    """Starts a peer (_spawn) and waits until is_listening(); one that exits
    first fails with its output and logs, and one that does not listen in
    time is stopped."""
    proc = harness.spawn_logged(args, out)
    try:
        wait_for(lambda: proc.poll() is not None or is_listening(),
                 harness.READY_TIMEOUT, f"{what} to listen")
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited: " + open(out).read()
                                 + "\n".join(line for path in logs for line in _read_log(path)))
    except BaseException:
        _stop(proc)
        raise
    return proc


def _read_log(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


class CheckSendProxyTest(LbTestCase):

    def test_check_send_proxy(self):
        def handler(backend, conn):
            r = Reader(conn)
            try:
                first = r.exact(6)
            except AssertionError:
                if r.buf:
                    raise
                # Not a byte: a probe that lb's exit cut between its connect
                # and its request (checks every 100 ms, at the end of the
                # test); the reports below judge the probes that were made.
                return
            if first == b"PROXY ":
                line = first
                while not line.endswith(b"\r\n"):
                    line += r.exact(1)
                backend.report(("v1", line))
            elif first == SIG[:6]:
                head = first + r.exact(10)
                if head[:12] != SIG:
                    backend.report(("bad", head))
                    return
                head += r.exact(struct.unpack("!H", head[14:16])[0])
                backend.report(("v2", head))
            else:
                backend.report(("none", first))
                return              # closes without answering
            while b"\r\n\r\n" not in r.buf:
                d = conn.recv(4096)
                if not d:
                    return
                r.buf += d
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n")

        b2, b1, boff = (self.custom(handler, name=n) for n in ("c2", "c1", "coff"))
        keys = ["check = http", "check_interval = 100ms", "check_timeout = 100ms",
                "rise = 1", "fall = 1", "min_servers = 0"]
        admin_port = free_port()
        lb = self.start_lb(lb_config(
            [("fe", f"{HOST}:{free_port()}", "c2", [])],
            [("c2", [f"server = s {b2.addr} send_proxy=v2", "check_send_proxy = on"] + keys),
             ("c1", [f"server = s {b1.addr} send_proxy=v1", "check_send_proxy = on"] + keys),
             ("coff", [f"server = s {boff.addr} send_proxy=v2", "check_send_proxy = off"] + keys)],
            admin_port=admin_port))
        admin = Admin(admin_port)
        for pool in ("c2", "c1"):
            admin.wait_server(pool, "s", lambda s: s["health"] == "up", WAIT, "health up")
        self.assertEqual(b2.next_report(), ("v2", SIG + b"\x20\x00\x00\x00"))
        self.assertEqual(b1.next_report(), ("v1", b"PROXY UNKNOWN\r\n"))
        # Without the header the backend closes every check: down, and still
        # down after 10 more intervals, with no check passed.
        admin.wait_server("coff", "s", lambda s: s["health"] == "down", WAIT, "health down")
        kind, first = boff.next_report()
        self.assertEqual(kind, "none", first)
        t0 = time.monotonic()
        n0 = len(lb.events("check", pool="coff"))
        wait_for(lambda: time.monotonic() - t0 >= 1.0 and
                 len(lb.events("check", pool="coff")) >= n0 + 5, WAIT,
                 "1 s and 5 more checks of coff")
        self.assertEqual(find_server(admin.stats(), "coff", "s")["health"], "down")
        self.assertFalse(lb.events("check", pool="coff", result="passed"))
        self.assertFalse(lb.events("server_up", pool="coff"))


@skip_if(not os.access(NGINX, os.X_OK), f"{NGINX} is not installed (Debian package nginx)")
class NginxBehindTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = harness.make_tmpdir()
        cls.p4, cls.p6 = free_port(), free_port()
        d = cls.dir
        cls.access = os.path.join(d, "access.log")
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    client_body_temp_path {d}/cb;
    proxy_temp_path {d}/px;
    fastcgi_temp_path {d}/fc;
    uwsgi_temp_path {d}/uw;
    scgi_temp_path {d}/sc;
    log_format pp '$proxy_protocol_addr:$proxy_protocol_port';
    server {{
        listen 127.0.0.1:{cls.p4} proxy_protocol;
        listen [::1]:{cls.p6} proxy_protocol;
        access_log {cls.access} pp;
        return 200 "ok\\n";
    }}
}}
""")
        cls.proc = _spawn_listening(
            "nginx", [NGINX, "-p", d, "-e", f"{d}/error.log", "-c", conf,
                      "-g", "daemon off; master_process off;"], os.path.join(d, "nginx.out"),
            lambda: _listening(cls.p4) and _listening(cls.p6, socket.AF_INET6),
            logs=[f"{d}/error.log"])

    @classmethod
    def tearDownClass(cls):
        _stop(cls.proc)

    def test_nginx_logs_the_client(self):
        ports = {k: free_port() for k in ("v1", "v2", "v1_6", "v2_6")}
        fronts = [("fe_v1", f"{HOST}:{ports['v1']}", "pv1", []),
                  ("fe_v2", f"{HOST}:{ports['v2']}", "pv2", []),
                  ("fe_v1_6", f"[::1]:{ports['v1_6']}", "pv1_6", []),
                  ("fe_v2_6", f"[::1]:{ports['v2_6']}", "pv2_6", [])]
        pools = [("pv1", [f"server = n {HOST}:{self.p4}", "send_proxy = v1", "check = none"]),
                 ("pv2", [f"server = n {HOST}:{self.p4}", "send_proxy = v2", "check = none"]),
                 ("pv1_6", [f"server = n [::1]:{self.p6}", "send_proxy = v1", "check = none"]),
                 ("pv2_6", [f"server = n [::1]:{self.p6}", "send_proxy = v2", "check = none"])]
        self.start_lb(lb_config(fronts, pools))
        for key, family, addr in (("v1", socket.AF_INET, HOST), ("v2", socket.AF_INET, HOST),
                                  ("v1_6", socket.AF_INET6, "::1"),
                                  ("v2_6", socket.AF_INET6, "::1")):
            with self.subTest(key):
                before = len(_read_log(self.access))
                s, cport = bound_client(family)
                self.addCleanup(s.close)
                s.connect((addr, ports[key]))
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                data, how = recv_until_eof(s)
                self.assertTrue(data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\nok\n"),
                                (data, how))
                lines = wait_for(lambda: len(_read_log(self.access)) > before and
                                 _read_log(self.access), WAIT, "a new access.log line")
                self.assertEqual(lines[before:], [f"{addr}:{cport}"])


@skip_if(not os.access(HAPROXY, os.X_OK), f"{HAPROXY} is not installed (Debian package haproxy)")
class HaproxyInFrontTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = harness.make_tmpdir()
        cls.ha1, cls.ha2, cls.lb_port = free_port(), free_port(), free_port()
        cfg = os.path.join(cls.dir, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(f"""global
    nbthread 1
defaults
    mode tcp
    timeout connect 5s
    timeout client 5s
    timeout server 5s
listen a
    bind {HOST}:{cls.ha1}
    server lb {HOST}:{cls.lb_port} send-proxy
listen b
    bind {HOST}:{cls.ha2}
    server lb {HOST}:{cls.lb_port} send-proxy-v2
""")
        cls.out = os.path.join(cls.dir, "haproxy.out")
        cls.proc = _spawn_listening("haproxy", [HAPROXY, "-f", cfg, "-db"], cls.out,
                                    lambda: _listening(cls.ha1) and _listening(cls.ha2))

    @classmethod
    def tearDownClass(cls):
        _stop(cls.proc)

    def test_haproxy_client_reaches_the_backend(self):
        b = self.custom(v2_handler, name="v2")
        lb = self.start_lb(lb_config(
            [("fe", f"{HOST}:{self.lb_port}", "p",
              ["accept_proxy = any", f"accept_proxy_from = {HOST}"])],
            [("p", [f"server = s {b.addr}", "send_proxy = v2", "check = none"])]))
        for name, ha in (("send-proxy", self.ha1), ("send-proxy-v2", self.ha2)):
            with self.subTest(name):
                cport, dst, tlvs = through_v2(self, b, ha, os.urandom(5000))
                self.assertEqual(dst, f"{HOST}:{ha}")
                ev = lb.wait_event("session_end", client=f"{HOST}:{cport}")[0]
                self.assertEqual(ev.get("id"), tlvs.get(0x05, b"").decode(), ev)


if __name__ == "__main__":
    harness.main()
