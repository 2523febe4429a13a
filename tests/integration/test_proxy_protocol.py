"""PROXY protocol against real peers: a strict v2 parser behind lb (the
UNIQUE_ID TLV against session_end's id=), checks with check_send_proxy,
real nginx behind lb (v1 and v2, IPv4 and IPv6) and real HAProxy in front
of it (send-proxy and send-proxy-v2). Expensive peers start once per class
and are stopped by pid."""

import os
import socket
import struct

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, free_port, recv_until_eof, wait_for

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


def v2_handler(backend, conn):
    """Parses the header, then reads the payload to EOF; reports both."""
    r = Reader(conn)
    try:
        src, dst, tlvs = parse_v2(r)
    except AssertionError as e:
        backend.report(("bad", str(e)))
        return
    backend.report(("ok", src, dst, tlvs, r.rest()))
    conn.sendall(b"done")


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

    def test_v2_header_tlv_and_payload(self):
        b = self.custom(v2_handler, name="v2")
        port = free_port()
        lb = self.start_lb(lb_config([("fe", f"{HOST}:{port}", "p", [])],
                                     [("p", [f"server = s {b.addr}", "send_proxy = v2",
                                             "check = none"])]))
        for size in (1, 100_000):
            payload = os.urandom(size)
            s, cport = bound_client()
            self.addCleanup(s.close)
            s.connect((HOST, port))
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            data, how = recv_until_eof(s)
            self.assertEqual((data, how), (b"done", "eof"))
            rep = b.next_report()
            self.assertEqual(rep[0], "ok", rep)
            _, src, dst, tlvs, got = rep
            self.assertEqual(src, f"{HOST}:{cport}")
            self.assertEqual(dst, f"{HOST}:{port}")
            self.assertTrue(got == payload, f"payload of {size} bytes changed "
                                            f"({len(got)} bytes arrived)")
            self.assertIn(0x05, tlvs, f"no UNIQUE_ID TLV: {tlvs}")
            uid = tlvs[0x05].decode()
            self.assertRegex(uid, r"^[0-9a-f]{16}$")
            ev = lb.wait_event("session_end", client=f"{HOST}:{cport}")[0]
            self.assertEqual(ev.get("id"), uid, ev)


if __name__ == "__main__":
    harness.main()
