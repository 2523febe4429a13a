"""A frontend that reads a PROXY header from the balancer in front of it
(accept_proxy): headers split across reads and sent slowly are read whole,
what follows them is relayed untouched, and every way of being wrong closes
the connection before any server connect, counted by reason, while other
clients are served (README, "Client addresses and access control")."""

import os
import socket
import struct
import time

import harness
from admin_client import Admin
from harness import LbTestCase, wait_for

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
TIMEOUT_MS = 300


def v2_header(src="192.0.2.10", sport=4321, dst="198.51.100.1", dport=443, cmd=0x21,
              length=None):
    body = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return V2_SIG + bytes([cmd, 0x11]) + struct.pack("!H", len(body) if length is None
                                                     else length) + body


def v1_header(src="192.0.2.10", sport=4321):
    return f"PROXY TCP4 {src} 198.51.100.1 {sport} 443\r\n".encode()


class ProxyAcceptTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.echo_ = self.echo()
        self.admin_port = harness.free_port()
        self.ports = {n: harness.free_port() for n in ("v1", "v2", "any", "narrow")}
        fronts = {
            "v1": ["accept_proxy = v1", "accept_proxy_from = 127.0.0.1"],
            "v2": ["accept_proxy = v2", "accept_proxy_from = 127.0.0.0/8",
                   f"accept_proxy_timeout = {TIMEOUT_MS}ms"],
            "any": ["accept_proxy = any", "accept_proxy_from = 127.0.0.1, ::1"],
            "narrow": ["accept_proxy = any", "accept_proxy_from = 127.0.0.2/32"],
        }
        lines = ["[global]", "workers = 2", "log_level = debug", "shutdown_timeout = 3s", "",
                 "[admin]", f"listen = 127.0.0.1:{self.admin_port}", ""]
        for name, keys in fronts.items():
            lines += [f"[frontend {name}]", f"listen = 127.0.0.1:{self.ports[name]}",
                      "pool = p", *keys, ""]
        lines += ["[pool p]", f"server = echo {self.echo_.addr}", "check = none", ""]
        self.lb_ = self.start_lb("\n".join(lines))
        self.admin = Admin(self.admin_port)

    def bad_count(self, frontend, reason):
        return self.admin.metrics().value("lb_frontend_proxy_header_bad_total",
                                          frontend=frontend, reason=reason)

    def send(self, frontend, data, split, source=None):
        """Sends data (one byte a send, 2 ms apart, when split) and returns
        the socket; lb may close it before the last byte."""
        s = self.client(self.ports[frontend], source=source)
        try:
            if split:
                for i in range(len(data)):
                    s.send(data[i:i + 1])
                    time.sleep(0.002)
            else:
                s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return s

    def assertClosed(self, s, what):
        data, how = harness.recv_until_eof(s)
        self.assertEqual(data, b"", what)
        self.assertIn(how, ("eof", "reset"), what)

    def test_bad_headers_close_before_any_server(self):
        good = self.client(self.ports["any"])
        good.sendall(v1_header())
        self.assertEqual(harness.roundtrip(good, b"before"), b"before")
        cases = [
            ("v2", b"GET / HTTP/1.0\r\n\r\n", "not_proxy", False),
            ("v1", b"\x16\x03\x01\x02\x00\x01", "not_proxy", False),
            ("v1", b"PROXY TCP4 1.2.3 198.51.100.1 1 2\r\n", "malformed", False),
            ("v1", b"PROXY TCP4 192.0.2.1 198.51.100.1 65536 2\r\n", "malformed", False),
            ("v2", v2_header(cmd=0x22), "malformed", False),
            ("v2", v2_header(length=8), "malformed", False),
            ("v1", v2_header(), "wrong_version", False),
            ("v2", v1_header(), "wrong_version", False),
            ("v2", v2_header(cmd=0x11), "wrong_version", False),
            ("v1", b"PROXY UNKNOWN " + b"x" * 120, "too_long", False),
            ("v2", v2_header(length=2000) + b"x" * 100, "too_long", False),
            ("v1", b"PROXY TCP4 192.0.2", "closed", True),
        ]
        for frontend, data, reason, shut in cases:
            for split in (False, True):
                what = f"{data[:24]!r} to {frontend}, split={split}"
                before = self.bad_count(frontend, reason)
                s = self.send(frontend, data, split)
                if shut:
                    s.shutdown(socket.SHUT_WR)
                self.assertClosed(s, what)
                wait_for(lambda: self.bad_count(frontend, reason) == before + 1,
                         harness.IO_TIMEOUT, f"{what}: counted as {reason}")
                self.assertEqual(self.echo_.accepted, 1, f"{what}: reached the server")
                self.assertEqual(harness.roundtrip(good, b"meanwhile"), b"meanwhile", what)
        ev = self.lb_.wait_event("proxy_header_bad", reason="too_long")[0]
        self.assertEqual(ev.get("level"), "warn", ev)
        self.assertTrue(ev.get("client", "").startswith("127.0.0.1:"), ev)

    def test_late_header_times_out(self):
        before = self.bad_count("v2", "timeout")
        for data in (b"", v2_header()[:20]):
            t0 = time.monotonic()
            s = self.send("v2", data, split=False)
            self.assertClosed(s, f"{data!r} and then nothing")
            took = time.monotonic() - t0
            # accept_proxy_timeout from accept, on the workers' coarse clock.
            self.assertTrue(TIMEOUT_MS / 1000 - 0.01 <= took < TIMEOUT_MS / 1000 + 0.7,
                            f"closed after {took:.3f} s, the timeout is {TIMEOUT_MS} ms")
        wait_for(lambda: self.bad_count("v2", "timeout") == before + 2, harness.IO_TIMEOUT,
                 "two timeouts counted")
        self.assertEqual(self.echo_.accepted, 0)

    def test_split_and_slow_headers_then_bytes_untouched(self):
        payload = os.urandom(128 * 1024)
        for frontend, header in (("v2", v2_header(sport=1111)), ("v1", v1_header(sport=2222)),
                                 ("any", v2_header(sport=3333)), ("any", v1_header(sport=4444))):
            s = self.client(self.ports[frontend])
            s.sendall(header + payload[:1000])      # with the first bytes
            self.assertEqual(harness.recv_exact(s, 1000), payload[:1000], frontend)
            self.assertEqual(harness.roundtrip(s, payload), payload, frontend)
            s.close()
        # One byte every 5 ms: 28 bytes of v2 in 140 ms, inside 300 ms;
        # the v1 line (46 bytes, 3 s default) over 0.9 s at 20 ms a byte.
        for frontend, header, gap in (("v2", v2_header(sport=5555), 0.005),
                                      ("any", v1_header(sport=6666), 0.02)):
            s = self.client(self.ports[frontend])
            for i in range(len(header)):
                s.send(header[i:i + 1])
                time.sleep(gap)
            self.assertEqual(harness.roundtrip(s, b"slow"), b"slow", frontend)
            s.close()
        for port in (1111, 2222, 3333, 4444, 5555, 6666):
            self.lb_.wait_event("session_end", client=f"192.0.2.10:{port}")
        self.assertEqual(sum(self.bad_count(f, r) for f in ("v1", "v2", "any")
                             for r in ("not_proxy", "malformed", "wrong_version", "too_long",
                                       "timeout", "closed")), 0)

    def test_local_keeps_the_peer_and_outsiders_are_refused(self):
        s = self.client(self.ports["v2"], source="127.0.0.3")
        s.sendall(V2_SIG + bytes([0x20, 0x00, 0x00, 0x00]) + b"local")
        self.assertEqual(harness.recv_exact(s, 5), b"local")
        s.close()
        ev = self.lb_.wait_event("session_end", frontend="v2")[0]
        self.assertTrue(ev.get("client", "").startswith("127.0.0.3:"), ev)

        s = self.send("narrow", v1_header(), split=False)
        self.assertClosed(s, "a header from outside accept_proxy_from")
        ev = self.lb_.wait_event("denied", frontend="narrow")[0]
        self.assertEqual((ev.get("reason"), ev.get("rule")), ("acl", "accept_proxy_from"), ev)
        self.assertEqual(self.admin.metrics().value("lb_frontend_denied_total",
                                                    frontend="narrow", reason="acl"), 1)
        self.assertEqual(self.echo_.accepted, 1)


if __name__ == "__main__":
    harness.main()
