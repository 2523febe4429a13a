"""The real DNS servers of Debian's packages (dnsmasq from dnsmasq-base,
unbound) run by a test on 127.0.0.1 with their records in the test's temp
dir, the DNS wire format a test needs to ask them and read their answers,
and a UDP echo server of the test's own (UdpEcho) for what no DNS server
sends: empty and maximal datagrams, floods, a reply given twice.

Each DNS server is started once per test file (setUpClass) and shared by
its cases; a case that crashes one (kill) starts it again (start), one that
stops it (SIGSTOP: hang) continues it (resume). Every process is stopped by
its pid (its own session: start_new_session, signalled by process group).

Every server answers `who.test. TXT "<its name>"`, so a client can tell
which one answered through lb; each also holds `a.test. A`, `t.test. TXT`
and nothing else under test. (NXDOMAIN for the rest: dnsmasq's --local,
unbound's static zone). Unbound also holds `big.test. TXT`, 15 strings of
250 bytes: 3,982 bytes answered with EDNS, truncated (TC) without."""

import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import traceback

import harness
from harness import HOST, free_port, wait_for

START_TIMEOUT = 30.0

# ------------------------------------------------------------------ ports


def udp_port_free(port, host=HOST):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_udp_port(host=HOST):
    """A port free for TCP (harness.free_port: outside the ephemeral range,
    so no socket of lb's or a client's takes it meanwhile) and for UDP on
    host: a DNS server binds both, a UDP frontend of lb its UDP half."""
    for _ in range(100):
        port = free_port()
        if udp_port_free(port, host):
            return port
    raise RuntimeError("free_udp_port: no port free for TCP and UDP in 100 tries")


# ------------------------------------------------------------- wire format

TYPES = {"A": 1, "NS": 2, "SOA": 6, "TXT": 16, "AAAA": 28, "OPT": 41}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
FLAG_QR, FLAG_AA, FLAG_TC, FLAG_RD = 0x8000, 0x0400, 0x0200, 0x0100


def query(name, qtype="A", qid=0x1234, rd=True, edns=None):
    """A DNS query (bytes) for name/qtype with id qid; edns: the UDP
    payload size of an OPT record (RFC 6891), None for none (the 512-byte
    limit of RFC 1035)."""
    flags = FLAG_RD if rd else 0
    head = struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if edns else 0)
    qname = b"".join(bytes([len(label)]) + label.encode()
                     for label in name.rstrip(".").split(".") if label) + b"\0"
    body = qname + struct.pack("!HH", TYPES[qtype], 1)
    if edns:
        body += b"\0" + struct.pack("!HHIH", TYPES["OPT"], edns, 0, 0)
    return head + body


def _skip_name(msg, off):
    while True:
        n = msg[off]
        if n & 0xC0 == 0xC0:
            return off + 2
        if n == 0:
            return off + 1
        off += 1 + n


def _read_name(msg, off):
    labels = []
    for _ in range(128):            # a loop of pointers is a broken message
        n = msg[off]
        if n & 0xC0 == 0xC0:
            off = struct.unpack("!H", msg[off:off + 2])[0] & 0x3FFF
            continue
        if n == 0:
            return ".".join(labels) + "."
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    raise AssertionError("DNS name with a pointer loop")


def parse(msg):
    """The parts of a DNS answer a test looks at: id, flags, tc, rcode (a
    name), the four counts and the answer section as [(name, type, rdata
    bytes)]. Raises AssertionError on a message too short or cut."""
    try:
        qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", msg[:12])
        off = 12
        for _ in range(qd):
            off = _skip_name(msg, off) + 4
        answers = []
        for _ in range(an):
            name = _read_name(msg, off)
            off = _skip_name(msg, off)
            rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
            off += 10
            rdata = msg[off:off + rdlen]
            if len(rdata) != rdlen:
                raise AssertionError(f"answer record cut: {len(rdata)} of {rdlen} bytes")
            answers.append((name, rtype, rdata))
            off += rdlen
    except (struct.error, IndexError) as e:
        raise AssertionError(f"not a whole DNS message ({e}): {msg[:64]!r}")
    return {"id": qid, "flags": flags, "qr": bool(flags & FLAG_QR), "tc": bool(flags & FLAG_TC),
            "rcode": RCODES.get(flags & 0xF, str(flags & 0xF)), "qd": qd, "an": an, "ns": ns,
            "ar": ar, "answers": answers}


def txt_strings(rdata):
    out, off = [], 0
    while off < len(rdata):
        n = rdata[off]
        out.append(rdata[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    return out


def who(msg):
    """The server name of an answer to `who.test. TXT`; fails on anything
    else."""
    p = parse(msg)
    txt = [txt_strings(rd) for name, t, rd in p["answers"] if t == TYPES["TXT"]]
    if p["rcode"] != "NOERROR" or len(txt) != 1 or len(txt[0]) != 1:
        raise AssertionError(f"not an answer to who.test TXT: {p}")
    return txt[0][0]


def exchange(sock, addr, data, timeout=harness.IO_TIMEOUT):
    """Sends data to addr on the unconnected UDP sock and waits for one
    datagram back. Returns (reply, source address), or (None, None) when
    nothing came within timeout."""
    sock.sendto(data, addr)
    r, _, _ = select.select([sock], [], [], timeout)
    if not r:
        return None, None
    reply, src = sock.recvfrom(65536)
    return reply, src


def client_socket(host=HOST):
    """An unconnected UDP socket bound to a port of its own: one flow."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((host, 0))
    return s


# ----------------------------------------------------------- the servers

class DnsServer:
    """A DNS server process on 127.0.0.1:port (UDP and TCP) with start /
    kill (SIGKILL: a crash) / hang (SIGSTOP) / resume / stop, by process
    group. Subclasses give the command line (_args)."""

    BIN = None

    def __init__(self, name):
        self.name = name
        self.dir = harness.make_tmpdir()
        self.port = free_udp_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, f"{name}.log")

    @property
    def addr(self):
        return f"{HOST}:{self.port}"

    @property
    def sockaddr(self):
        return (HOST, self.port)

    def start(self):
        self.proc = harness.spawn_logged(self._args(), self.log_path)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                     f"{self.log()}")
            return self.ask(query("who.test", "TXT"), timeout=0.2) is not None
        wait_for(up, START_TIMEOUT, f"{self.name} to answer on {self.addr}")

    def ask(self, data, timeout=harness.IO_TIMEOUT):
        """data sent straight to the server from a fresh port; its reply, or
        None when none came within timeout."""
        with client_socket() as s:
            reply, _ = exchange(s, self.sockaddr, data, timeout)
            return reply

    def _signal(self, sig):
        os.killpg(self.proc.pid, sig)

    def kill(self):
        """A crash: SIGKILL and reap (its sockets are closed then). Returns
        the wall time of the kill."""
        t = time.time()
        self._signal(signal.SIGKILL)
        self.proc.wait(timeout=START_TIMEOUT)
        return t

    def hang(self):
        t = time.time()
        self._signal(signal.SIGSTOP)
        return t

    def resume(self):
        self._signal(signal.SIGCONT)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self._signal(signal.SIGCONT)
                self._signal(signal.SIGTERM)
                self.proc.wait(timeout=START_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout=START_TIMEOUT)
        self.proc = None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""


class Dnsmasq(DnsServer):
    """dnsmasq (dnsmasq-base) in the foreground with no upstream, no
    /etc/hosts and no config file: local records only, NXDOMAIN for the
    rest of test. (--local); EDNS answers up to 4096 bytes."""

    BIN = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"

    def __init__(self, name):
        super().__init__(name)
        self.start()

    def _args(self):
        return [self.BIN, "--no-daemon", "--log-facility=-", f"--port={self.port}",
                f"--listen-address={HOST}", "--bind-interfaces", "--no-resolv", "--no-hosts",
                "--conf-file=/dev/null", f"--pid-file={self.dir}/dnsmasq.pid",
                "--edns-packet-max=4096", "--local=/test/",
                "--host-record=a.test,192.0.2.1", "--txt-record=t.test,hello world",
                f"--txt-record=who.test,{self.name}"]


BIG_STRINGS = [chr(ord("a") + i) + "x" * 249 for i in range(15)]


class Unbound(DnsServer):
    """unbound as root (username "", no chroot) in the foreground, its
    config in the temp dir: one thread, a static local zone test., no
    recursion (module iterator, nothing outside test. to ask), RRsets in
    a fixed order (rrset-roundrobin off: answers are byte-identical
    whatever the query id) and EDNS answers up to 4096 bytes."""

    BIN = shutil.which("unbound") or "/usr/sbin/unbound"

    def __init__(self, name):
        super().__init__(name)
        self.conf = os.path.join(self.dir, "unbound.conf")
        big = "".join(f"    local-data: 'big.test. 3600 IN TXT \"{s}\"'\n" for s in BIG_STRINGS)
        with open(self.conf, "w") as f:
            f.write(f"""server:
    interface: {HOST}@{self.port}
    port: {self.port}
    do-daemonize: no
    chroot: ""
    username: ""
    pidfile: ""
    directory: "{self.dir}"
    use-syslog: no
    logfile: ""
    verbosity: 1
    num-threads: 1
    do-ip6: no
    so-reuseport: no
    module-config: "iterator"
    rrset-roundrobin: no
    max-udp-size: 4096
    edns-buffer-size: 4096
    local-zone: "test." static
    local-data: "a.test. 3600 IN A 192.0.2.2"
    local-data: 't.test. 3600 IN TXT "hello world"'
    local-data: 'who.test. 3600 IN TXT "{name}"'
{big}
remote-control:
    control-enable: no
""")
        self.start()

    def _args(self):
        return [self.BIN, "-d", "-c", self.conf]


# -------------------------------------------------------- UDP echo server

class UdpEcho:
    """A UDP server of the test on host (127.0.0.1 or ::1), port picked by
    the kernel, run by one thread: it echoes each datagram to its sender
    (`copies` times: 2 makes a server that answers twice), once `batch`
    datagrams of that sender are in (2: both of a resolver's A and AAAA
    queries are in flight before the first answer). It keeps the
    length and SHA-256 of every datagram it got (got(), thread-safe) and
    counts the copies it sent. Stopped (stop) through a socketpair that
    wakes its select at once; exceptions of the thread land in .errors,
    which LbTestCase.backend checks at teardown."""

    def __init__(self, name="echo", host=HOST, copies=1, batch=1):
        self.name = name
        self.copies = copies
        self.batch = batch
        self._held = {}             # sender -> its datagrams not yet echoed
        self._senders = set()       # every address a datagram came from
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        # Room for a flood's backlog: what does not fit is dropped by the
        # kernel, which the tests allow for.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((host, 0))
        self.port = self.sock.getsockname()[1]
        self.addr = f"[{host}]:{self.port}" if family == socket.AF_INET6 else f"{host}:{self.port}"
        self.errors = []
        self._lock = threading.Lock()
        self._got = []              # (length, sha256 hex)
        self._sent = 0
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = harness.start_thread(self._run, name=f"{name}-udp")

    def _run(self):
        buf = bytearray(65536)
        try:
            while True:
                r, _, _ = select.select([self.sock, self._wake_r], [], [])
                if self._wake_r in r:
                    return
                n, src = self.sock.recvfrom_into(buf)
                data = bytes(buf[:n])
                with self._lock:
                    self._got.append((n, harness.sha256(data)))
                    self._senders.add(src)
                held = self._held.setdefault(src, [])
                held.append(data)
                if len(held) < self.batch:
                    continue
                del self._held[src]
                for data in held:
                    for _ in range(self.copies):
                        try:
                            self.sock.sendto(data, src)
                            with self._lock:
                                self._sent += 1
                        except OSError:
                            pass    # ICMP from a closed flow socket: the tests' business
        except Exception:
            self.errors.append(traceback.format_exc())

    def send_to_senders(self, data):
        """data, once, to every address a datagram came from (from the
        test's thread: sendto on the echo's socket is safe beside its
        thread). Returns how many were sent."""
        with self._lock:
            senders = list(self._senders)
        for src in senders:
            self.sock.sendto(data, src)
        return len(senders)

    def got(self):
        with self._lock:
            return list(self._got)

    @property
    def sent(self):
        with self._lock:
            return self._sent

    def stop(self):
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.wait(5)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()
