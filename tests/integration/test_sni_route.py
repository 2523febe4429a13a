"""TLS passthrough routed by SNI (issue 27): a frontend with route lines
sends each client to the pool its ClientHello's server name matches, and
passes every byte on untouched (lb terminates nothing).

Real peers: one nginx (Debian's) serves the TLS pools, a server block per
pool on its own port, each with its own certificate from a CA the test
makes with the openssl CLI at setUpClass; curl and openssl s_client over
TLS 1.2 and 1.3 are the clients and verify the chain and the name end to
end through lb. Python's ssl module (a MemoryBIO, no socket of its own)
gives real ClientHellos that the test sends a byte per TCP segment or
re-framed into two records before it completes the handshake. The
unroutable first flights go to a plain TCP backend of the test that
records every byte it gets; a strict PROXY v2 parser checks the
AUTHORITY TLV. nginx is started once for its class and stopped by pid.
"""

import array
import fcntl
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import time

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, free_port, recv_until_eof, skip_if, wait_for
from admin_client import Admin, find_frontend
# nginx is started and stopped as test_proxy_protocol does (spawn, wait
# until it listens, fail with its output; SIGTERM by pid).
from test_proxy_protocol import Reader, _listening, _spawn_listening, _stop, parse_v2

NGINX = "/usr/sbin/nginx"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
CURL = shutil.which("curl") or "/usr/bin/curl"
PP2_TYPE_AUTHORITY = 0x02

# The pools served by nginx: pool -> the certificate its server shows.
# api2 shows api's certificate: the reload test moves api.example.com to
# it, and a client must still verify.
CERTS = {"api": "api.example.com", "shop": "*.shop.example.com",
         "web": "web.example.com", "any": "other.example.org"}
NGINX_POOLS = {"api": "api", "api2": "api", "shop": "shop", "web": "web", "any": "any"}

# The silent client's sni_timeout, and what load may add to it (an
# upper bound: a late timer, a busy machine). Lower bounds get only the
# clock's tick (harness.TIMER_TICK).
SNI_TIMEOUT = 0.3
TIMEOUT_SLACK = 0.6 if harness.SANITIZED else 0.4

SIOCOUTQNSD = 0x894B            # linux/sockios.h: bytes not yet sent


# ------------------------------------------------------------ config

def lb_config(frontends, pools, admin_port, log_level="debug"):
    """frontends: [(name, port, [lines])]; pools: [(name, [lines])]."""
    lines = ["[global]", "workers = 2", f"log_level = {log_level}", "shutdown_timeout = 3s", "",
             "[admin]", f"listen = {HOST}:{admin_port}", ""]
    for name, port, extra in frontends:
        lines += [f"[frontend {name}]", f"listen = {HOST}:{port}"] + extra + [""]
    for name, extra in pools:
        lines += [f"[pool {name}]", "connect_timeout = 1s", "check = none"] + extra + [""]
    return "\n".join(lines)


def write_atomic(path, text):
    """A new config renamed into place, as the README asks."""
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ------------------------------------------------------- certificates

def make_pki(d):
    """A CA and one leaf per entry of CERTS, EC P-256, signed by the CA,
    with the name as CN and subjectAltName. Returns {name: (cert, key)}
    with "ca" -> (ca.pem, ca.key)."""
    def run(args):
        p = subprocess.run([OPENSSL] + args, capture_output=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError(f"openssl {args[0]} failed: {p.stderr.decode(errors='replace')}")

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]
    out = {"ca": (os.path.join(d, "ca.pem"), os.path.join(d, "ca.key"))}
    run(["req", "-x509"] + ec + ["-subj", "/CN=lb sni test CA",
                                 "-addext", "basicConstraints=critical,CA:TRUE",
                                 "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                                 "-keyout", out["ca"][1], "-out", out["ca"][0]])
    for name, cn in CERTS.items():
        cert, key = os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")
        run(["req", "-x509"] + ec + ["-subj", f"/CN={cn}",
                                     "-addext", f"subjectAltName=DNS:{cn}",
                                     "-addext", "basicConstraints=CA:FALSE",
                                     "-addext", "extendedKeyUsage=serverAuth",
                                     "-CA", out["ca"][0], "-CAkey", out["ca"][1],
                                     "-keyout", key, "-out", cert])
        out[name] = (cert, key)
    return out


# ------------------------------------------------- ClientHello framing

def python_hello(sni, alpn=None):
    """A real ClientHello flight (bytes) from Python's ssl, for a server
    that is never answered."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def client_hello(sni=None, ciphers=3, sni_list_extra=0):
    """A ClientHello built by hand in one TLS record: TLS 1.2 layout,
    `ciphers` cipher suites (a long list puts the extensions far from the
    start), and a server_name extension when sni is given. sni_list_extra
    is added to the server_name list's length (non-zero: malformed)."""
    suites = b"".join(struct.pack("!H", 0x1301 + i) for i in range(ciphers))
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack("!H", len(suites)) + suites \
        + b"\x01\x00"
    exts = struct.pack("!HH", 0x000a, 4) + b"\x00\x02\x00\x1d"     # supported_groups: x25519
    if sni is not None:
        name = sni.encode()
        entry = b"\x00" + struct.pack("!H", len(name)) + name
        lst = struct.pack("!H", len(entry) + sni_list_extra) + entry
        exts += struct.pack("!HH", 0x0000, len(lst)) + lst
    body += struct.pack("!H", len(exts)) + exts
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def reframe(flight, cut):
    """The one handshake record of flight (a ClientHello) as two records:
    the handshake message's first `cut` bytes in the first, the rest in
    the second (RFC 8446 5.1 lets a handshake message span records)."""
    if flight[0] != 0x16 or struct.unpack("!H", flight[3:5])[0] != len(flight) - 5:
        raise AssertionError("not a single handshake record")
    msg = flight[5:]
    return [flight[:3] + struct.pack("!H", len(part)) + part for part in (msg[:cut], msg[cut:])]


def sni_offset(flight, name):
    """Where name's bytes start in flight (the server_name's host_name)."""
    at = flight.find(name.encode())
    if at < 0:
        raise AssertionError(f"{name!r} is not in the ClientHello")
    return at


def send_segments(sock, pieces):
    """Sends each piece in a TCP segment of its own: TCP_NODELAY is set, and
    the next piece waits until the kernel has put the last one on the wire
    (SIOCOUTQNSD, unsent bytes, is 0; a send while a byte waits for the
    congestion window would join it). Waiting for the ACK instead would
    take a delayed ACK's 40 ms a byte: lb only peeks at the hello."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = array.array("i", [0])

    def unsent():
        fcntl.ioctl(sock.fileno(), SIOCOUTQNSD, buf)
        return buf[0]
    for p in pieces:
        sock.sendall(p)
        if unsent():
            wait_for(lambda: unsent() == 0, IO_TIMEOUT, "the segment sent", interval=0.0002)


# ---------------------------------------------------------- TLS client

class TlsClient:
    """A TLS client over a socket of the test, Python's ssl driven through
    MemoryBIOs, so the test decides how the ClientHello travels. sni None:
    no server_name. The chain must verify to the test CA; OpenSSL checks
    the name against the SNI unless check_name is False (a name no
    certificate of its pool holds: the test reads cert_names())."""

    def __init__(self, test, port, sni, ca, version=None, check_name=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(ca)
        ctx.check_hostname = sni is not None if check_name is None else check_name
        if version is not None:
            ctx.minimum_version = ctx.maximum_version = version
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=sni)
        self.sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
        test.addCleanup(self.sock.close)
        self.cport = self.sock.getsockname()[1]
        self.buf = b""

    def hello(self):
        """The ClientHello flight, not sent yet."""
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.out.read()

    def _flush(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def _pump(self):
        d = self.sock.recv(65536)
        if not d:
            raise AssertionError("the server closed during the exchange")
        self.inc.write(d)

    def handshake(self):
        """Completes the handshake (after hello() was sent one way or
        another); verification failures raise ssl.SSLCertVerificationError."""
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self._pump()
        self._flush()
        return self

    def connect(self):
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(self.hello())
        return self.handshake()

    def get(self, host="lb-test"):
        """One keep-alive HTTP/1.1 request; returns the body."""
        self.obj.write(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        self._flush()
        while True:
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"\r\nContent-Length: (\d+)\r\n", head + b"\r\n", re.I)
                if m is None:
                    raise AssertionError(f"no Content-Length in {head!r}")
                n = int(m.group(1))
                if len(rest) >= n:
                    if not head.startswith(b"HTTP/1.1 200 "):
                        raise AssertionError(f"answer {head!r}")
                    self.buf = rest[n:]
                    return rest[:n]
            try:
                self.buf += self.obj.read(65536)
            except ssl.SSLWantReadError:
                self._pump()

    def cert_names(self):
        """The subjectAltName DNS names of the server's certificate."""
        return [v for k, v in self.obj.getpeercert().get("subjectAltName", ()) if k == "DNS"]


# ------------------------------------------------------------- checks

def cert_holds(cn, sni):
    """True when a certificate for cn (a name or "*.NAME") is valid for
    the name sni (any case, a trailing dot)."""
    if sni is None:
        return False
    want = re.escape(cn).replace(r"\*", "[^.]+")
    return re.fullmatch(want, sni.lower().rstrip(".")) is not None


def reason_counts(m, name, frontend, reasons):
    """{reason: value} of a counter's samples for frontend (each must be
    there: lb shows every reason, zeros too, as its other counters)."""
    return {r: m.value(name, frontend=frontend, reason=r) for r in reasons}


FALLBACKS = ("no_sni", "no_match", "unroutable")
SNI_BADS = ("not_tls", "malformed", "too_long", "timeout", "truncated")


@skip_if(not os.access(NGINX, os.X_OK), f"{NGINX} is not installed (Debian package nginx)")
@skip_if(not os.access(CURL, os.X_OK), f"{CURL} is not installed (Debian package curl)")
class SniTlsTest(LbTestCase):
    """Real TLS servers (nginx) behind routed frontends."""

    @classmethod
    def setUpClass(cls):
        cls.dir = d = harness.make_tmpdir()
        cls.pki = make_pki(d)
        cls.ca = cls.pki["ca"][0]
        cls.ng = {pool: free_port() for pool in NGINX_POOLS}
        servers = "".join(
            f"""    server {{
        listen {HOST}:{cls.ng[pool]} ssl;
        ssl_certificate {cls.pki[cert][0]};
        ssl_certificate_key {cls.pki[cert][1]};
        return 200 "{pool}\\n";
    }}
""" for pool, cert in NGINX_POOLS.items())
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {d}/cb;
    proxy_temp_path {d}/px;
    fastcgi_temp_path {d}/fc;
    uwsgi_temp_path {d}/uw;
    scgi_temp_path {d}/sc;
    access_log off;
    keepalive_timeout 60s;
    ssl_protocols TLSv1.2 TLSv1.3;
{servers}}}
""")
        cls.proc = _spawn_listening(
            "nginx", [NGINX, "-p", d, "-e", f"{d}/error.log", "-c", conf,
                      "-g", "daemon off; master_process off;"], os.path.join(d, "nginx.out"),
            lambda: all(_listening(p) for p in cls.ng.values()), logs=[f"{d}/error.log"])

    @classmethod
    def tearDownClass(cls):
        _stop(cls.proc)

    def pools(self):
        return [(p, [f"server = n {HOST}:{self.ng[p]}"]) for p in NGINX_POOLS]

    def start_routed(self, frontends):
        """lb with frontends [(name, [lines])] in front of every nginx pool;
        returns (lb, {frontend: port}, Admin)."""
        ports = {name: free_port() for name, _ in frontends}
        admin_port = free_port()
        text = lb_config([(n, ports[n], lines) for n, lines in frontends], self.pools(),
                         admin_port)
        lb = self.start_lb(text)
        lb.admin_port = admin_port
        return lb, ports, Admin(admin_port)

    # Routes of the frontends most tests use: "tls" has exact, wildcard and
    # a default; "star" adds "*". Patterns written with case and dots that
    # must not matter.
    TLS = ["route = *.Shop.Example.COM. shop", "route = API.example.com. api",
           "default_pool = web"]
    STAR = ["route = api.example.com api", "route = * any", "default_pool = web"]

    def curl(self, port, name, tls13):
        version = ["--tlsv1.3"] if tls13 else ["--tlsv1.2", "--tls-max", "1.2"]
        p = subprocess.run([CURL, "-sS", "--max-time", "10", "--resolve",
                            f"{name}:{port}:{HOST}", "--cacert", self.ca] + version
                           + [f"https://{name}:{port}/"], capture_output=True, timeout=30)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def s_client(self, port, servername, verify_name, tls13):
        """openssl s_client through lb (servername None: no SNI), the chain
        and verify_name checked, one HTTP request. Returns (exit status,
        whether it said "Verify return code: 0 (ok)", the body's word or
        None, the protocol or None, its output)."""
        args = [OPENSSL, "s_client", "-connect", f"{HOST}:{port}", "-CAfile", self.ca,
                "-verify_return_error", "-verify_hostname", verify_name,
                "-tls1_3" if tls13 else "-tls1_2", "-ign_eof"]
        args += ["-noservername"] if servername is None else ["-servername", servername]
        req = f"GET / HTTP/1.1\r\nHost: {verify_name}\r\nConnection: close\r\n\r\n"
        p = subprocess.run(args, input=req.encode(), capture_output=True, timeout=30)
        out = p.stdout.decode(errors="replace")
        body = re.search(r"HTTP/1\.1 200 OK\r\n.*?\r\n\r\n(\w+)\n", out, re.S)
        proto = re.search(r"^\s*Protocol\s*: (TLSv1\.[23])$", out, re.M)
        verified = "Verify return code: 0 (ok)" in out
        return (p.returncode, verified, body and body.group(1), proto and proto.group(1),
                out + p.stderr.decode(errors="replace"))

    def test_real_clients_reach_their_pool_and_verify(self):
        _, ports, _ = self.start_routed([("tls", self.TLS), ("star", self.STAR)])
        # (frontend, SNI sent, the pool that must answer): curl sends the
        # URL's host and verifies it, so only names some certificate holds.
        for fe, name, pool in (("tls", "api.example.com", "api"),
                               ("tls", "a.shop.example.com", "shop"),
                               ("tls", "web.example.com", "web"),       # no route: default
                               ("star", "other.example.org", "any"),
                               ("star", "api.example.com", "api")):    # exact beats "*"
            for tls13 in (False, True):
                with self.subTest(tool="curl", frontend=fe, sni=name, tls13=tls13):
                    rc, out, err = self.curl(ports[fe], name, tls13)
                    self.assertEqual((rc, out), (0, f"{pool}\n"), err)
        # s_client checks the chain and a name of our choice: also names no
        # certificate holds, sent to the default pool (web) or to "*" (any).
        for fe, sni, pool in (("tls", "api.example.com", "api"),
                              ("tls", "API.Example.COM.", "api"),       # case, trailing dot
                              ("tls", "z.SHOP.example.com.", "shop"),
                              ("tls", "a.b.shop.example.com", "web"),   # "*." is one label
                              ("tls", "shop.example.com", "web"),       # ... not zero
                              ("tls", None, "web"),                     # no SNI
                              ("star", "a.b.shop.example.com", "any"),
                              ("star", "API.EXAMPLE.COM", "api"),
                              ("star", None, "web")):                   # "*" wants a name
            verify = CERTS[NGINX_POOLS[pool]].replace("*", "z")
            for tls13 in (False, True):
                with self.subTest(tool="s_client", frontend=fe, sni=sni, tls13=tls13):
                    rc, verified, body, proto, out = self.s_client(ports[fe], sni, verify, tls13)
                    self.assertEqual((rc, verified, body, proto),
                                     (0, True, pool, "TLSv1.3" if tls13 else "TLSv1.2"), out)

    def test_hello_a_byte_per_segment_and_in_two_records(self):
        lb, ports, _ = self.start_routed([("tls", self.TLS)])
        port = ports["tls"]
        v12, v13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
        for name, pool, version in (("a.shop.example.com", "shop", v13),
                                    ("api.example.com", "api", v12)):
            with self.subTest("a byte per segment", sni=name, version=version.name):
                c = TlsClient(self, port, name, self.ca, version)
                hello = c.hello()
                send_segments(c.sock, [hello[i:i + 1] for i in range(len(hello))])
                c.handshake()
                self.assertEqual((c.obj.version(), c.get(), c.get()),
                                 (version.name.replace("_", "."), f"{pool}\n".encode(),
                                  f"{pool}\n".encode()))
                self.assertEqual(c.cert_names(), [CERTS[pool]])
        # Two records, cut inside the handshake header, or inside the name
        # itself; each record in a segment of its own.
        for name, pool in (("api.example.com", "api"), ("b.shop.example.com", "shop")):
            for where in ("header", "name"):
                for version in (v12, v13):
                    with self.subTest("two records", sni=name, cut=where, version=version.name):
                        c = TlsClient(self, port, name, self.ca, version)
                        hello = c.hello()
                        cut = 2 if where == "header" else \
                            sni_offset(hello, name) - 5 + len(name) // 2
                        send_segments(c.sock, reframe(hello, cut))
                        c.handshake()
                        self.assertEqual(c.get(), f"{pool}\n".encode())
                        self.assertEqual(c.cert_names(), [CERTS[pool]])

    def test_counts_stats_and_session_end(self):
        lb, ports, admin = self.start_routed([("tls", self.TLS), ("star", self.STAR)])
        # (frontend, SNI, pool that answers): python clients, the chain
        # verified, the name too where a certificate holds it.
        plan = [("tls", "api.example.com", "api"), ("tls", "API.EXAMPLE.COM", "api"),
                ("tls", "api.example.com.", "api"),
                ("tls", "a.shop.example.com", "shop"), ("tls", "B.Shop.Example.Com.", "shop"),
                ("tls", "a.b.shop.example.com", "web"), ("tls", "shop.example.com", "web"),
                ("tls", None, "web"),
                ("star", "other.example.org", "any"), ("star", "x.y.z", "any"),
                ("star", "api.example.com", "api"), ("star", None, "web")]
        clients = {}
        for fe, sni, pool in plan:
            # OpenSSL's own name check does not take a trailing dot: those
            # names, and names no certificate holds, are judged by the SAN
            # list (cert_names) after the chain verified.
            c = TlsClient(self, ports[fe], sni, self.ca,
                          check_name=cert_holds(CERTS[NGINX_POOLS[pool]], sni)
                          and not sni.endswith("."))
            c.connect()
            self.assertEqual((c.get(), c.cert_names()), (f"{pool}\n".encode(),
                                                          [CERTS[NGINX_POOLS[pool]]]), (fe, sni))
            c.sock.close()
            clients[c.cport] = (fe, sni)
        # Every session ended, and each session_end names its SNI as routed
        # (lower case, no trailing dot) or "-".
        ends = lb.wait_event("session_end", count=len(plan))
        got = {}
        for ev in ends:
            cport = int(ev["client"].rsplit(":", 1)[1])
            if cport in clients:
                got[cport] = ev.get("sni")
        self.assertEqual(got, {cp: (sni.lower().rstrip(".") if sni else "-")
                               for cp, (fe, sni) in clients.items()})
        m = admin.metrics()
        routes = {(lab["frontend"], lab["route"]): v for lab, v in
                  m.samples("lb_frontend_route_sessions_total")}
        self.assertEqual(routes, {("tls", "api.example.com"): 3, ("tls", "*.shop.example.com"): 2,
                                  ("star", "api.example.com"): 1, ("star", "*"): 2})
        for fe, default in (("tls", {"no_sni": 1, "no_match": 2, "unroutable": 0}),
                            ("star", {"no_sni": 1, "no_match": 0, "unroutable": 0})):
            self.assertEqual(reason_counts(m, "lb_frontend_route_default_sessions_total", fe,
                                           FALLBACKS), default, fe)
            self.assertEqual(reason_counts(m, "lb_frontend_route_closed_total", fe, FALLBACKS),
                             dict.fromkeys(FALLBACKS, 0), fe)
            self.assertEqual(reason_counts(m, "lb_frontend_sni_unroutable_total", fe, SNI_BADS),
                             dict.fromkeys(SNI_BADS, 0), fe)
        st = admin.stats()
        for fe, want in (("tls", {"api.example.com": ("api", 3),
                                  "*.shop.example.com": ("shop", 2)}),
                         ("star", {"api.example.com": ("api", 1), "*": ("any", 2)})):
            f = find_frontend(st, fe)
            self.assertIsNone(f["pool"], f)
            self.assertEqual((f["default_pool"], f["route_unknown"]), ("web", "default"), f)
            self.assertEqual({r["route"].lower().rstrip("."): (r["pool"], r["sessions"])
                              for r in f["routes"]}, want, f)
            self.assertEqual(len(f["routes"]), len(want), f)
        self.assertFalse(lb.events("sni_unroutable"))

    def test_reload_moves_a_route(self):
        routes = ["route = api.example.com api", "route = *.shop.example.com shop",
                  "default_pool = web"]
        lb, ports, admin = self.start_routed([("tls", routes)])
        port = ports["tls"]
        held = TlsClient(self, port, "api.example.com", self.ca).connect()
        self.assertEqual(held.get(), b"api\n")
        text = lb_config([("tls", port, ["route = api.example.com api2"] + routes[1:])],
                         self.pools(), lb.admin_port)
        write_atomic(lb.config_path, text)
        lb.send_signal(signal.SIGHUP)
        lb.wait_event("reload", generation="2")
        # The first connection after the reload event takes the new route.
        c = TlsClient(self, port, "api.example.com", self.ca).connect()
        self.assertEqual((c.get(), c.cert_names()), (b"api2\n", ["api.example.com"]))
        s = TlsClient(self, port, "a.shop.example.com", self.ca).connect()
        self.assertEqual(s.get(), b"shop\n", "an unchanged route")
        # The one established before is left alone, on the old pool.
        self.assertFalse(harness.is_readable(held.sock), "lb closed the held connection")
        self.assertEqual((held.get(), held.get()), (b"api\n", b"api\n"))
        f = find_frontend(admin.stats(), "tls")
        self.assertEqual({r["route"]: r["pool"] for r in f["routes"]},
                         {"api.example.com": "api2", "*.shop.example.com": "shop"}, f)


# ----------------------------------------------- unroutable first flights

def recorder(backend, conn):
    """A plain TCP server: reports ("accept", when), then every byte it got
    until the client's FIN as ("data", bytes), and answers how many."""
    backend.report(("accept", time.monotonic()))
    chunks = []
    while True:
        d = conn.recv(65536)
        if not d:
            break
        chunks.append(d)
    data = b"".join(chunks)
    backend.report(("data", data))
    conn.sendall(b"seen %d\n" % len(data))


def unroutable_flights():
    """(case, the bytes a client sends then FIN, the reason lb must give)
    for a frontend with sni_max_bytes = 512. Two hellos over the cap: a
    real one of 1.8 KiB (Python's, 150 ALPN protocols) whose server_name
    comes early, within the first 512 bytes, and one whose server_name
    lies past them (300 cipher suites first). The truncated hello is
    short (88 bytes, under the cap) and cut inside its server name."""
    short = client_hello("api.example.com")
    return [
        ("http", b"GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "not_tls"),
        ("garbage", b"\xff\xfe" + os.urandom(300), "not_tls"),
        ("malformed", client_hello("api.example.com", sni_list_extra=8), "malformed"),
        ("too_long_name_early",
         python_hello("api.example.com", alpn=[f"proto-{i:03d}" for i in range(150)]),
         "too_long"),
        ("too_long_name_late", client_hello("api.example.com", ciphers=300), "too_long"),
        ("truncated", short[:sni_offset(short, "api.example.com") + 7], "truncated"),
    ]


def expected_bads(flights):
    """lb_frontend_sni_unroutable_total of a frontend that got flights, a
    silent client (timeout) and one that sent nothing and closed
    (truncated)."""
    out = dict.fromkeys(SNI_BADS, 0)
    for _, _, reason in flights:
        out[reason] += 1
    out["timeout"] += 1
    out["truncated"] += 1
    return out


class SniUnroutableTest(LbTestCase):
    """route_unknown with a plain TCP backend as default_pool: what is not
    a routable ClientHello reaches it byte for byte (default) or is closed
    (close), and is counted and logged with its reason."""

    CAP = ["sni_max_bytes = 512", f"sni_timeout = {int(SNI_TIMEOUT * 1000)}ms"]

    def start(self, frontends):
        self.raw = self.custom(recorder, name="raw")
        self.api = self.custom(recorder, name="apiraw")
        self.ports = {name: free_port() for name, _ in frontends}
        admin_port = free_port()
        self.lb_ = self.start_lb(lb_config(
            [(n, self.ports[n], ["route = api.example.com apiraw"] + lines)
             for n, lines in frontends],
            [("raw", [f"server = r {self.raw.addr}"]), ("apiraw", [f"server = a {self.api.addr}"])],
            admin_port))
        self.admin = Admin(admin_port)

    def open(self, fe):
        """A client of frontend fe: (socket, its port)."""
        s = self.client(self.ports[fe])
        return s, s.getsockname()[1]

    def reaches(self, fe, backend, payload):
        """payload then FIN through fe: backend gets exactly payload."""
        s, cport = self.open(fe)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_until_eof(s), (b"seen %d\n" % len(payload), "eof"))
        self.assertEqual(backend.next_report()[0], "accept")
        kind, got = backend.next_report()
        self.assertEqual(kind, "data")
        self.assertTrue(got == payload, f"{len(payload)} bytes sent, {len(got)} arrived "
                                        "(or as many, changed)")
        return cport

    def closed(self, fe, payload):
        """payload then FIN through fe: lb closes without a byte."""
        s, cport = self.open(fe)
        before = (self.raw.accepted, self.api.accepted)
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass                # lb may have reset it already
        data, how = recv_until_eof(s)
        self.assertEqual(data, b"")
        self.assertIn(how, ("eof", "reset"))
        self.assertEqual((self.raw.accepted, self.api.accepted), before, "a server was connected")
        return cport

    def assert_logged(self, fe, cport, reason, action):
        # By frontend too: the kernel may give a client of another frontend
        # the same ephemeral port (each destination has its own sequence).
        ev = self.lb_.wait_event("sni_unroutable", frontend=fe, client=f"{HOST}:{cport}")
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual((ev[0].get("level"), ev[0].get("frontend"), ev[0].get("reason"),
                          ev[0].get("action")), ("warn", fe, reason, action), ev[0])

    def silent(self, fe):
        """A client that sends nothing: (socket, its port, t0 before the
        connect)."""
        t0 = time.monotonic()
        s, cport = self.open(fe)
        return s, cport, t0

    def assert_in_timeout(self, elapsed, what):
        self.assertTrue(SNI_TIMEOUT - harness.TIMER_TICK <= elapsed < SNI_TIMEOUT + TIMEOUT_SLACK,
                        f"{what} {elapsed:.3f} s after the connect; sni_timeout is {SNI_TIMEOUT} s")

    def wait_idle(self, fe):
        wait_for(lambda: find_frontend(self.admin.stats(), fe)["active_connections"] == 0,
                 IO_TIMEOUT, f"frontend {fe} without connections")

    def test_route_unknown_default(self):
        self.start([("ud", ["default_pool = raw", "route_unknown = default"] + self.CAP)])
        flights = unroutable_flights()
        self.assertGreater(len(flights[3][1]), 1000)
        self.assertLess(sni_offset(flights[3][1], "api.example.com"), 200)
        for case, payload, reason in flights:
            with self.subTest(case):
                cport = self.reaches("ud", self.raw, payload)
                self.assert_logged("ud", cport, reason, "default")
        # Silent: sent to the default pool at sni_timeout; what the client
        # sends then arrives as sent.
        s, cport, t0 = self.silent("ud")
        kind, when = self.raw.next_report()
        self.assertEqual(kind, "accept")
        self.assert_in_timeout(when - t0, "the default server was connected")
        s.sendall(b"late bytes\n")
        s.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_until_eof(s), (b"seen 11\n", "eof"))
        self.assertEqual(self.raw.next_report(), ("data", b"late bytes\n"))
        self.assert_logged("ud", cport, "timeout", "default")
        # Nothing, then a FIN: closed whatever route_unknown says.
        cport = self.closed("ud", b"")
        self.assert_logged("ud", cport, "truncated", "close")
        # Routable hellos on the same frontend: a short one by its name, one
        # without a name and one no route matches to the default pool.
        self.reaches("ud", self.api, client_hello("API.example.com."))
        self.reaches("ud", self.raw, client_hello(None))
        self.reaches("ud", self.raw, client_hello("other.example.org"))
        self.wait_idle("ud")
        self.assertEqual((self.raw.accepted, self.api.accepted), (len(flights) + 3, 1))
        m = self.admin.metrics()
        self.assertEqual(reason_counts(m, "lb_frontend_sni_unroutable_total", "ud", SNI_BADS),
                         expected_bads(flights))
        self.assertEqual(reason_counts(m, "lb_frontend_route_default_sessions_total", "ud",
                                       FALLBACKS),
                         {"no_sni": 1, "no_match": 1, "unroutable": len(flights) + 1})
        self.assertEqual(reason_counts(m, "lb_frontend_route_closed_total", "ud", FALLBACKS),
                         {"no_sni": 0, "no_match": 0, "unroutable": 1})
        self.assertEqual(m.value("lb_frontend_route_sessions_total", frontend="ud",
                                 route="api.example.com"), 1)

    def test_route_unknown_close_and_no_default_pool(self):
        self.start([("uc", ["default_pool = raw", "route_unknown = close"] + self.CAP),
                    ("un", self.CAP)])
        flights = unroutable_flights()
        for fe in ("uc", "un"):
            for case, payload, reason in flights:
                with self.subTest(frontend=fe, case=case):
                    self.assert_logged(fe, self.closed(fe, payload), reason, "close")
            # Silent: closed at sni_timeout.
            s, cport, t0 = self.silent(fe)
            data, how = recv_until_eof(s)
            self.assert_in_timeout(time.monotonic() - t0, "lb closed the client")
            self.assertEqual(data, b"")
            self.assertIn(how, ("eof", "reset"))
            self.assert_logged(fe, cport, "timeout", "close")
            self.assert_logged(fe, self.closed(fe, b""), "truncated", "close")
            self.reaches(fe, self.api, client_hello("api.example.com"))
        # With a default pool, a hello without a name or with an unrouted
        # one goes there; without one, both are closed.
        self.reaches("uc", self.raw, client_hello(None))
        self.reaches("uc", self.raw, client_hello("other.example.org"))
        self.closed("un", client_hello(None))
        self.closed("un", client_hello("other.example.org"))
        for fe in ("uc", "un"):
            self.wait_idle(fe)
        self.assertEqual((self.raw.accepted, self.api.accepted), (2, 2))
        m = self.admin.metrics()
        for fe, closed, default in (
                ("uc", {"no_sni": 0, "no_match": 0, "unroutable": len(flights) + 2},
                 {"no_sni": 1, "no_match": 1, "unroutable": 0}),
                ("un", {"no_sni": 1, "no_match": 1, "unroutable": len(flights) + 2},
                 {"no_sni": 0, "no_match": 0, "unroutable": 0})):
            self.assertEqual(reason_counts(m, "lb_frontend_sni_unroutable_total", fe, SNI_BADS),
                             expected_bads(flights), fe)
            self.assertEqual(reason_counts(m, "lb_frontend_route_closed_total", fe, FALLBACKS),
                             closed, fe)
            self.assertEqual(reason_counts(m, "lb_frontend_route_default_sessions_total", fe,
                                           FALLBACKS), default, fe)
        st = self.admin.stats()
        self.assertEqual((find_frontend(st, "uc")["default_pool"],
                          find_frontend(st, "uc")["route_unknown"]), ("raw", "close"))
        self.assertIsNone(find_frontend(st, "un")["default_pool"])


# ------------------------------------------------------------ PROXY v2

class SniProxyV2Test(LbTestCase):

    def test_authority_tlv_and_the_hello_after_it(self):
        def handler(backend, conn):
            r = Reader(conn)
            try:
                src, dst, tlvs = parse_v2(r)
            except AssertionError as e:
                backend.report(("bad", str(e)))
                return
            backend.report(("ok", src, tlvs, r.rest()))
            conn.sendall(b"done")

        v = self.custom(handler, name="v2")
        port = free_port()
        self.start_lb(lb_config(
            [("pp", port, ["route = api.example.com ppapi", "route = *.shop.example.com ppshop",
                           "default_pool = ppdef"])],
            [(p, [f"server = v {v.addr}", "send_proxy = v2"])
             for p in ("ppapi", "ppshop", "ppdef")],
            free_port()))
        for sni, authority, bytewise in (("API.Example.COM.", b"api.example.com", False),
                                         ("X.Shop.Example.com", b"x.shop.example.com", False),
                                         ("api.example.com", b"api.example.com", True),
                                         (None, None, False)):
            with self.subTest(sni=sni, bytewise=bytewise):
                hello = python_hello(sni) if sni else client_hello(None)
                payload = hello + b"after the hello"
                s = self.client(port)
                cport = s.getsockname()[1]
                if bytewise:
                    send_segments(s, [hello[i:i + 1] for i in range(len(hello))])
                    s.sendall(b"after the hello")
                else:
                    s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                self.assertEqual(recv_until_eof(s), (b"done", "eof"))
                rep = v.next_report()
                self.assertEqual(rep[0], "ok", rep)
                _, src, tlvs, rest = rep
                self.assertEqual(src, f"{HOST}:{cport}")
                self.assertEqual(tlvs.get(PP2_TYPE_AUTHORITY), authority, tlvs)
                self.assertTrue(rest == payload, f"{len(payload)} bytes sent, {len(rest)} "
                                                 "after the header, or changed")


# ------------------------------------------------------- config errors

class SniConfigErrorsTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.dir = harness.make_tmpdir()
        self.n = 0

    def lines(self, frontend):
        """A config whose [frontend tls] body is `frontend`; returns (lines,
        the line number of frontend's first line)."""
        head = ["[global]", "workers = 1", "",
                "[admin]", f"listen = {HOST}:{free_port()}", "",
                "[frontend tls]", f"listen = {HOST}:{free_port()}"]
        tail = ["", "[pool api]", "server = a 127.0.0.1:9001", "check = none",
                "", "[pool web]", "server = w 127.0.0.1:9002", "check = none"]
        return head + frontend + tail, len(head) + 1

    def lb_t(self, frontend):
        lines, first = self.lines(frontend)
        self.n += 1
        path = os.path.join(self.dir, f"case{self.n}.ini")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        code, out, err = harness.lb_test(path)
        found = []
        for l in err.splitlines():
            m = re.match(re.escape(path) + r":(\d+): (.+)$", l)
            self.assertIsNotNone(m, f"stderr line not shaped '{path}:LINE: message': {l!r}")
            found.append((int(m.group(1)) - first, m.group(2)))
        return code, out, found

    def assertOk(self, frontend):
        code, out, found = self.lb_t(frontend)
        self.assertEqual((code, found), (0, []), frontend)
        self.assertIn("configuration OK", out)

    def assertProblem(self, frontend, where, *words):
        """lb -t fails with one problem, at frontend[where] (or one of them,
        a tuple; -2 is the section header), whose message holds every
        word."""
        code, out, found = self.lb_t(frontend)
        self.assertEqual(code, 1, (frontend, found))
        self.assertEqual(len(found), 1, (frontend, found))
        self.assertIn(found[0][0], where if isinstance(where, tuple) else (where,),
                      (frontend, found))
        for w in words:
            self.assertIn(w.lower(), found[0][1].lower(), (frontend, found))

    def test_good_files(self):
        self.assertOk(["route = api.example.com api", "route = *.shop.example.com web",
                       "route = * web", "default_pool = web", "route_unknown = default",
                       "sni_max_bytes = 256", "sni_timeout = 300ms"])
        self.assertOk(["route = API.Example.com. api", "route = close.example.com web",
                       "route_unknown = close", "sni_max_bytes = 65536"])
        self.assertOk(["route = localhost api"])

    def test_bad_files(self):
        cases = [
            # the same pattern twice, after case folding and the trailing dot
            (["route = api.example.com api", "default_pool = web", "route = API.Example.COM. web"],
             2, "api.example.com"),
            (["route = *.SHOP.example.com. api", "route = *.shop.example.com web"],
             1, "*.shop.example.com"),
            (["route = * api", "route = * web"], 1, "*"),
            # pool and route together, in either order (either line will do);
            # neither of them
            (["pool = web", "route = api.example.com api"], (0, 1)),
            (["route = api.example.com api", "pool = web"], (0, 1)),
            (["default_pool = web"], (-2, 0)),
            # a pool that does not exist
            (["route = api.example.com api", "route = b.example.com nosuch"], 1, "nosuch"),
            (["route = api.example.com api", "default_pool = nosuch"], 1, "nosuch"),
            # patterns that are not a name, "*.NAME" or "*"
            (["route = api.example.com api", "route = a*.example.com web"], 1, "a*.example.com"),
            (["route = *. web"], 0, "*."),
            (["route = foo..bar web"], 0, "foo..bar"),
            (["route = *.*.example.com web"], 0),
            (["route = .example.com web"], 0),
            (["route = ** web"], 0),
            (["route = api.example.com"], 0),
            (["route = api.example.com api web"], 0),
            # route_unknown = default written without a default_pool
            (["route = api.example.com api", "route_unknown = default"], 1, "default_pool"),
            (["route = api.example.com api", "route_unknown = maybe"], 1),
            (["route = api.example.com api", "sni_max_bytes = 255"], 1),
            (["route = api.example.com api", "sni_max_bytes = 65537"], 1),
            (["route = api.example.com api", "sni_timeout = 5q"], 1),
        ]
        for case in cases:
            frontend, index, words = case[0], case[1], case[2:]
            with self.subTest(frontend=frontend):
                self.assertProblem(frontend, index, *words)


if __name__ == "__main__":
    harness.main()
