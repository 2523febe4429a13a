#!/usr/bin/env python3
"""sni_cost.py - new TLS connections routed by SNI without terminating TLS: lb's
`route =` lines against HAProxy's `req.ssl_sni` (issue 27, "Bench").

A benchmark run by hand (not a ctest test). Python 3 stdlib only; needs
haproxy, nginx (with ssl), ab, openssl, curl and taskset
(../shared/bench/setup.sh installs all but openssl and curl, which Debian has).

Method (that of ./proxy_cost.py and of the project's peer benchmark,
../shared/bench/bench.py):

  - At start, openssl makes an EC P-256 CA and three leaf certificates:
    api.example.com, *.shop.example.com and www.example.org (the default
    pool's). One nginx (`worker_processes 2`, pinned to the load CPU) has
    three TLS server blocks on three ports, one per pool, each with its own
    certificate and access log (buffered; `$ssl_server_name`,
    `$ssl_session_reused`, `$ssl_protocol`); `location = /` answers 200 with
    a body naming the pool ("api\\n", "shop\\n", "web\\n"). The servers have
    what a normal deployment has (TLS 1.2 and 1.3, a shared session cache,
    session tickets on); the client offers no resumption, so every
    connection is a FULL handshake, and every logged request must show
    `$ssl_session_reused` = "." (not reused).
  - Proxies, each pinned to CPU 0 with 2 threads, a TCP check every 2 s on
    each pool's one server:
      haproxy       mode tcp, nbthread 2, `tcp-request inspect-delay 5s`,
                    `tcp-request content accept if { req.ssl_hello_type 1 }`,
                    `use_backend api if { req.ssl_sni -i api.example.com }`,
                    `use_backend shop if { req.ssl_sni -m end .shop.example.com }`,
                    `default_backend web`
      lb            workers = 2, `route = api.example.com api`,
                    `route = *.shop.example.com shop`, `default_pool = web`
                    (sni_timeout 5s, its default)
    and two references that do not read the hello (everything to pool api):
      haproxy-pool  haproxy, `default_backend api`, no inspection
      lb-pool       lb, `pool = api`
  - Workload: `ab` over https, one request per connection (no keep-alive:
    HTTP/1.0, the server closes), so each connection is a new TCP
    connection and a full TLS handshake. Two ab run side by side, 16
    connections each (32 in all), `-n` half the total each: one sends
    `Host: api.example.com`, the other `Host: a.shop.example.com`; ab sends
    the Host header's name as SNI (checked at start: a listener in this
    script reads ab's ClientHello and parses its server_name). conn/s = all
    connections / the longer of the two ab's times.
  - Pinning: the proxy alone on CPU 0; ab, nginx and this driver on CPU 1
    (the handshakes cost the client and the server far more than the proxy:
    measured here with Debian's OpenSSL 3.0, about 1.4 ms of ab and 1 ms of
    nginx per connection against 0.3-0.4 ms of the proxy; CPU 1 is
    saturated, about 450 conn/s, so conn/s differs little between proxies
    and its spread is that of CPU 1's speed; the proxy
    CPU per connection row shows the difference in cost better). Each
    trial's log line gives both CPUs' busy share and their steal (time the
    hypervisor ran something else), from /proc/stat.
  - CPU: the proxy's process and all its threads, the scheduler's runtime
    in ns from /proc/PID/task/TID/schedstat (checked against utime+stime
    ticks). CPU per connection = that CPU over the trial / the connections
    ab completed.
  - The proxies take turns (A B C D A B C D ...), a fresh proxy per trial;
    the median of --reps repetitions is reported with min..max. Trials
    during which processes outside this benchmark used more than 5% of a
    CPU are marked [busy] and listed.
  - Correctness: before the timed trials, curl (--resolve, --cacert: the
    certificate is verified against the name) through each routed proxy
    must get api.example.com -> "api", a.shop.example.com -> "shop",
    www.example.org -> "web", and a hello without SNI (Python ssl) -> "web".
    After each trial, the access log of each server block must hold exactly
    as many answered requests as ab completed for that name, each with that
    SNI, not resumed (and none in the other logs); any miss fails the run.
  - Memory, for each routed proxy, each repetition, a fresh proxy each time:
      idle     --mem-conns (5,000) TLS connections to api.example.com that
               complete their handshake (Python ssl, certificate verified)
               and then stay idle: routed, relayed, quiet;
      hello100 as many connections that sent only the first 100 bytes of a
               real ClientHello (517 bytes, from Python's ssl with a
               MemoryBIO) and wait: the proxy is still reading the hello;
      hello12k the first 12,000 bytes of a 12,800-byte ClientHello (the same
               hello with a padding extension placed before server_name,
               so that the name is not among the bytes sent: lb routes as
               soon as it has read the name, HAProxy waits for the whole
               hello): the same wait, more bytes queued.
    Proxy memory = growth of Rss (and Pss) in /proc/PID/smaps_rollup
    between before and after opening them, / the connections; the proxy's
    descriptors must have grown by 2 per connection (idle: client + server)
    or 1 (hello: nobody connected yet), else the trial fails. Kernel socket
    buffers are not counted. lb peeks at the hello and leaves it in the
    kernel, so hello12k must not exceed hello100; HAProxy copies the hello
    into a buffer of its own.
  - --quota PCT: each timed trial's proxy runs in a cgroup that may use
    PCT percent of one CPU (benchproc.Cgroup, cpu.max or v1's cfs quota,
    10 ms period), so that the proxy, not CPU 1's handshakes, bounds conn/s:
    then conn/s compares the proxies, as ./halfcore.py does for plain HTTP.
    The proxy needs 20-30% of a CPU at the load CPU's rate, so 10% makes
    it the bottleneck. Memory trials are not throttled.
  - --syscalls: after the timed trials, one more (untimed) trial of each
    proxy under `perf stat -e 'syscalls:sys_enter_*' -p PID`, printed as
    system calls per connection side by side.

Issue 27's targets (printed, not enforced; this is a measurement): lb /
haproxy conn/s >= 1.05, lb / haproxy CPU per connection <= 0.90, lb memory
per idle routed connection <= 1.0 KiB.

Usage:
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j2
  python3 tests/bench/sni_cost.py                  # 5 repetitions, about 11 minutes (--syscalls: +1)
  python3 tests/bench/sni_cost.py --quick          # 1 repetition, 2,000 conns, 1,000 for memory: 40 s
  python3 tests/bench/sni_cost.py --reps 9 --json out.json --proxies lb,haproxy --syscalls

Options: --lb-bin PATH [build/lb], --reps N [5], --quick, --json FILE,
--proxies LIST [haproxy,lb,haproxy-pool,lb-pool], --conns N [8000 in all
per trial], --mem-conns N [5000], --no-mem, --syscalls, --quota PCT [none],
--port-base P [23300] (ports from there up that nobody listens on, below
the ephemeral range), --proxy-cpu N [0], --load-cpu N [1], --keep (keep the
work directory).

Exit status: 0 when every trial ran and every check passed; 1 when a proxy
could not run (e.g. an lb without routes) or a check failed.
"""

import argparse
import concurrent.futures
import json
import os
import re
import resource
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from benchproc import (HOST, Cgroup, Failure, Proc, cpu_ns, cpu_share, cpu_times, fmt, free_ports,
                       listening, log, median, nginx_conf, others_cpu_since, others_cpu_ticks,
                       prepare_driver)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUSY_LIMIT = 0.05          # CPUs used by other processes that mark a trial as disturbed
AB_CONCURRENCY = 32        # in all: 16 per name
FULL = dict(reps=5, conns=8000, mem_conns=5000)
QUICK = dict(reps=1, conns=2000, mem_conns=1000)
PROXIES = ["haproxy", "lb", "haproxy-pool", "lb-pool"]
ROUTED = ("haproxy", "lb")
POOLS = ("api", "shop", "web")
# the names the load sends, and the pool each must reach through a routed proxy
LOAD_NAMES = [("api.example.com", "api"), ("a.shop.example.com", "shop")]
CHECK_NAMES = LOAD_NAMES + [("www.example.org", "web")]
CERTS = {"api": "api.example.com", "shop": "*.shop.example.com", "web": "www.example.org"}
HELLO_SMALL_SENT = 100
HELLO_LARGE_SIZE, HELLO_LARGE_SENT = 12800, 12000
TARGET_CPS, TARGET_CPU, TARGET_MEM = 1.05, 0.90, 1.0


# ---------------------------------------------------------------- /proc

def mem_kib(pids):
    """(Rss, Pss) in KiB from smaps_rollup, summed over the processes."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return rss, pss


def fd_count(pids):
    n = 0
    for pid in pids:
        try:
            n += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return n


def thread_ids(pids):
    tids = []
    for pid in pids:
        try:
            tids += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            pass
    return tids


# ---------------------------------------------------------------- TLS

def make_certs(d):
    """An EC P-256 CA and one leaf per pool, signed by it; returns the CA's path."""
    def run(*argv):
        r = subprocess.run(["openssl"] + list(argv), capture_output=True, text=True, cwd=d)
        if r.returncode != 0:
            raise Failure(f"openssl {argv[0]} failed: {r.stderr.strip()[-400:]}")
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=sni_cost bench CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    for pool, name in CERTS.items():
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{pool}.key", "-out", f"{pool}.csr", "-subj", f"/CN={name}")
        with open(os.path.join(d, f"{pool}.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\n"
                    "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
        run("x509", "-req", "-in", f"{pool}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{pool}.crt", "-days", "2", "-extfile", f"{pool}.ext")
    for name in os.listdir(d):
        os.chmod(os.path.join(d, name), 0o644)  # nginx workers may run as nobody
    return os.path.join(d, "ca.crt")


def client_context(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    return ctx


def tls_get(port, name, cafile, path="/", timeout=2.0):
    """The body of an https GET through port with SNI `name` (verified), or None.
    name None: a hello without SNI, the certificate not verified."""
    ctx = client_context(cafile)
    if name is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname=name) as s:
                s.sendall(f"GET {path} HTTP/1.0\r\nHost: {name or 'none'}\r\n\r\n".encode())
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
    except (OSError, ssl.SSLError):
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    return body.decode(errors="replace") if head.startswith(b"HTTP/1.1 200") else None


def client_hello(name, cafile):
    """A real first flight (one TLS record holding a ClientHello) from Python's ssl."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context(cafile).wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def parse_hello(data):
    """(server name or None, extension types) of a complete ClientHello record; raises
    ValueError when data is not one."""
    if len(data) < 9 or data[0] != 22 or data[5] != 1:
        raise ValueError("not a TLS handshake record holding a ClientHello")
    rec_len = struct.unpack("!H", data[3:5])[0]
    hs_len = int.from_bytes(data[6:9], "big")
    if len(data) < 5 + rec_len or hs_len + 4 > rec_len:
        raise ValueError(f"incomplete: {len(data)} bytes, record {rec_len}, hello {hs_len}")
    p = 9 + 2 + 32
    p += 1 + data[p]                                             # session id
    p += 2 + struct.unpack("!H", data[p:p + 2])[0]               # cipher suites
    p += 1 + data[p]                                             # compression
    end = p + 2 + struct.unpack("!H", data[p:p + 2])[0]
    p += 2
    sni, types = None, []
    while p + 4 <= end:
        etype, elen = struct.unpack("!HH", data[p:p + 4])
        types.append(etype)
        if etype == 0:
            q = p + 4 + 2
            if data[q] == 0:
                nlen = struct.unpack("!H", data[q + 1:q + 3])[0]
                sni = data[q + 3:q + 3 + nlen].decode()
        p += 4 + elen
    if p != end:
        raise ValueError("extension lengths do not add up")
    return sni, types


def pad_hello(hello, size):
    """The same ClientHello made `size` bytes long by a padding extension (21) placed
    FIRST, before server_name (OpenSSL's own padding, if any, is dropped): a reader that
    stops at the server name must wait for all but the last few hundred bytes."""
    head, exts = split_hello(hello)
    exts = [(t, d) for t, d in exts if t != 21]
    rest = sum(4 + len(d) for _, d in exts)
    pad = size - len(head) - 2 - rest - 4
    if pad < 0 or size - 5 > 16384:
        raise Failure(f"cannot pad a {len(hello)}-byte hello to {size}")
    exts.insert(0, (21, bytes(pad)))
    body = bytearray(head) + struct.pack("!H", size - len(head) - 2)
    for t, d in exts:
        body += struct.pack("!HH", t, len(d)) + d
    struct.pack_into("!H", body, 3, size - 5)
    body[6:9] = (size - 9).to_bytes(3, "big")
    if len(body) != size or parse_hello(bytes(body))[0] != parse_hello(hello)[0]:
        raise Failure("padding the ClientHello went wrong")
    return bytes(body)


def split_hello(hello):
    """(the hello up to its extensions' length field, [(type, data)])."""
    parse_hello(hello)
    p = 9 + 2 + 32
    p += 1 + hello[p]
    p += 2 + struct.unpack("!H", hello[p:p + 2])[0]
    p += 1 + hello[p]
    end = p + 2 + struct.unpack("!H", hello[p:p + 2])[0]
    head, q, exts = hello[:p], p + 2, []
    while q < end:
        t, n = struct.unpack("!HH", hello[q:q + 4])
        exts.append((t, hello[q + 4:q + 4 + n]))
        q += 4 + n
    return head, exts


def ab_sends_sni(port_pair):
    """Run ab against a listener here; every ClientHello it gets must carry the Host
    header's name as SNI. Returns the names seen."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((HOST, port_pair))
    ls.listen(8)
    ls.settimeout(0.2)
    seen, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            c.settimeout(2)
            data = b""
            try:
                while len(data) < 5 or len(data) < 5 + struct.unpack("!H", data[3:5])[0]:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if data:  # ab also opens a connection that sends nothing, on failures
                    seen.append(parse_hello(data)[0])
            except (OSError, ValueError) as e:
                seen.append(f"<{e}>")
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        for name, _ in LOAD_NAMES:
            subprocess.run(["ab", "-q", "-r", "-s", "2", "-n", "2", "-c", "1", "-H", f"Host: {name}",
                            f"https://{HOST}:{port_pair}/"], capture_output=True, timeout=30)
    finally:
        stop.set()
        ls.close()
        t.join(3)
    want = [n for n, _ in LOAD_NAMES for _ in range(2)]
    if seen != want:
        raise Failure(f"ab's ClientHellos carried SNI {seen}, want {want}")
    return seen


# ---------------------------------------------------------------- processes

# ---------------------------------------------------------------- backend

NGINX_HTTP = """\
    log_format sni '$server_port $status $request_uri $ssl_server_name $ssl_session_reused $ssl_protocol';
    keepalive_timeout 120s;
    default_type application/octet-stream;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_timeout 1d;
    ssl_session_tickets on;
"""

NGINX_SERVER = """\
    server {{
        listen {host}:{port} ssl backlog=4096;
        server_name {name};
        ssl_certificate {certs}/{pool}.crt;
        ssl_certificate_key {certs}/{pool}.key;
        access_log {dir}/{pool}.log sni buffer=256k flush=200ms;
        location = / {{ return 200 "{pool}\\n"; }}
        location = /ready {{ access_log off; return 200 "{pool}\\n"; }}
    }}
"""


class Backend:
    def __init__(self, workdir, ports, cpu, maxconn, certs):
        self.dir = os.path.join(workdir, "nginx")
        os.makedirs(self.dir)
        self.ports = dict(zip(POOLS, ports))
        servers = "".join(NGINX_SERVER.format(host=HOST, port=self.ports[p], name=CERTS[p],
                                              certs=certs, pool=p, dir=self.dir)
                          for p in POOLS)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(self.dir, 2 * maxconn, NGINX_HTTP + servers))
        self.proc = Proc("nginx", ["nginx", "-p", self.dir, "-e", self.dir + "/error.log",
                                   "-c", conf], cpu, workdir)
        cafile = os.path.join(certs, "ca.crt")
        for pool in POOLS:
            name = CERTS[pool].replace("*", "x")
            self.proc.wait_ready(lambda pool=pool, name=name:
                                 tls_get(self.ports[pool], name, cafile, "/ready") == pool + "\n")

    def log_path(self, pool):
        return os.path.join(self.dir, pool + ".log")

    def log_sizes(self):
        sizes = {}
        for pool in POOLS:
            try:
                sizes[pool] = os.path.getsize(self.log_path(pool))
            except OSError:
                sizes[pool] = 0
        return sizes

    def new_lines(self, offsets, want, timeout=5.0):
        """{pool: its log's lines after offsets[pool]}, once want[pool] lines are there
        for every pool (nginx flushes its buffers every 200 ms) and a little longer, so
        that extra lines show up too; or at the deadline."""
        def read():
            got = {}
            for pool in POOLS:
                try:
                    with open(self.log_path(pool), "rb") as f:
                        f.seek(offsets[pool])
                        got[pool] = f.read().decode(errors="replace").splitlines()
                except OSError:
                    got[pool] = []
            return got
        deadline = time.monotonic() + timeout
        while True:
            got = read()
            if all(len(got[p]) >= want.get(p, 0) for p in POOLS):
                time.sleep(0.5)
                return read()
            if time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def stop(self):
        self.proc.stop()


# ---------------------------------------------------------------- proxies

def haproxy_cmd(d, port, ports, routed, maxconn):
    lines = ["global", "    nbthread 2", f"    maxconn {maxconn}",
             "defaults", "    mode tcp", f"    maxconn {maxconn}", "    timeout connect 5s",
             "    timeout client 1m", "    timeout server 1m",
             "frontend tls", f"    bind {HOST}:{port}"]
    if routed:
        lines += ["    tcp-request inspect-delay 5s",
                  "    tcp-request content accept if { req.ssl_hello_type 1 }",
                  "    use_backend api if { req.ssl_sni -i api.example.com }",
                  "    use_backend shop if { req.ssl_sni -m end .shop.example.com }",
                  "    default_backend web"]
    else:
        lines.append("    default_backend api")
    for pool in POOLS if routed else ("api",):
        lines += [f"backend {pool}", "    balance roundrobin",
                  f"    server {pool[0]}1 {HOST}:{ports[pool]} check inter 2s"]
    conf = os.path.join(d, "haproxy.cfg")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return ["haproxy", "-db", "-f", conf]


def lb_config(d, port, admin_port, ports, routed, maxconn):
    lines = ["[global]", "workers = 2", f"max_connections = {maxconn}",
             "[admin]", f"listen = {HOST}:{admin_port}",
             "[frontend tls]", f"listen = {HOST}:{port}"]
    if routed:
        lines += ["route = api.example.com api", "route = *.shop.example.com shop",
                  "default_pool = web"]
    else:
        lines.append("pool = api")
    for pool in POOLS if routed else ("api",):
        lines += [f"[pool {pool}]", "balance = roundrobin",
                  f"server = {pool[0]}1 {HOST}:{ports[pool]}",
                  "check = tcp", "check_interval = 2s"]
    conf = os.path.join(d, "lb.ini")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return conf


def parse_ab(out):
    def grab(pattern, conv=float):
        m = re.search(pattern, out, re.M)
        if not m:
            raise Failure(f"ab's output not understood (no {pattern!r}):\n{out[-800:]}")
        return conv(m.group(1))
    non2xx = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)
    proto = re.search(r"^SSL/TLS Protocol:\s+(\S+)", out, re.M)
    key = re.search(r"^Server Temp Key:\s+(.+)$", out, re.M)
    return {"done": grab(r"^Complete requests:\s+(\d+)", int),
            "failed": grab(r"^Failed requests:\s+(\d+)", int),
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "secs": grab(r"^Time taken for tests:\s+([\d.]+)"),
            "tls": (proto.group(1) if proto else "?") + (f", {key.group(1).strip()}" if key else "")}


class Bench:
    def __init__(self, args, workdir):
        self.args = args
        self.cgroup = None      # --quota: made by main, which removes it
        self.workdir = workdir
        ports = free_ports(args.port_base, 6)
        self.backend_ports, self.port, self.admin_port, self.probe_port = \
            ports[0:3], ports[3], ports[4], ports[5]
        self.maxconn = min(100000, (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1000) // 3)
        self.backend = None
        self.certs = os.path.join(workdir, "certs")
        os.makedirs(self.certs)
        self.cafile = make_certs(self.certs)
        self.tls_seen = set()
        hello = client_hello("api.example.com", self.cafile)
        if parse_hello(hello)[0] != "api.example.com":
            raise Failure("Python's ClientHello carries no SNI api.example.com")
        self.hellos = {"hello100": (hello, HELLO_SMALL_SENT),
                       "hello12k": (pad_hello(hello, HELLO_LARGE_SIZE), HELLO_LARGE_SENT)}

    def proxy_argv(self, name, d):
        routed = name in ROUTED
        if name.startswith("haproxy"):
            return haproxy_cmd(d, self.port, self.backend.ports, routed, self.maxconn)
        conf = lb_config(d, self.port, self.admin_port, self.backend.ports, routed, self.maxconn)
        return [self.args.lb_bin, "-c", conf]

    def start_proxy(self, name):
        for _ in range(100):  # the previous proxy's listener may still be closing
            if not listening(self.port):
                break
            time.sleep(0.05)
        if listening(self.port):
            raise Failure(f"port {self.port} is still in use")
        d = tempfile.mkdtemp(prefix=name + "-", dir=self.workdir)
        proxy = Proc(name, self.proxy_argv(name, d), self.args.proxy_cpu, d)
        try:  # /ready is not logged: it does not count in a trial's log check
            proxy.wait_ready(lambda: tls_get(self.port, "api.example.com", self.cafile,
                                             "/ready") == "api\n")
        except BaseException:
            proxy.stop()
            raise
        return proxy

    def lb_supports(self, name):
        """lb -t on the variant's config: a clear reason when this lb cannot run it."""
        d = tempfile.mkdtemp(prefix=name + "-test-", dir=self.workdir)
        argv = self.proxy_argv(name, d)
        r = subprocess.run([argv[0], "-t"] + argv[1:], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return (r.stderr or r.stdout).strip()[-400:] or f"lb -t exited with {r.returncode}"
        return None

    # ------------------------------------------------ routing, by curl

    def check_routes(self, name):
        """Each name reaches its pool's server (certificate verified by curl), and a
        hello without SNI the default pool."""
        proxy = self.start_proxy(name)
        try:
            checks = CHECK_NAMES if name in ROUTED else [("api.example.com", "api")]
            for host, pool in checks:
                r = subprocess.run(["curl", "-sS", "--max-time", "5", "--cacert", self.cafile,
                                    "--resolve", f"{host}:{self.port}:{HOST}",
                                    f"https://{host}:{self.port}/ready"],
                                   capture_output=True, text=True, timeout=30)
                if r.returncode != 0 or r.stdout != pool + "\n":
                    raise Failure(f"{name}: curl https://{host}/ got {r.stdout!r} (want "
                                  f"{pool + chr(10)!r}), exit {r.returncode} {r.stderr.strip()}")
            want = "web\n" if name in ROUTED else "api\n"
            got = tls_get(self.port, None, self.cafile, "/ready")
            if got != want:
                raise Failure(f"{name}: a hello without SNI got {got!r}, want {want!r}")
        finally:
            proxy.stop()

    # ------------------------------------------------ one timed trial

    def run_ab(self, total):
        """Both ab side by side, one per name; {name: parse_ab result}."""
        per = total // len(LOAD_NAMES)
        conc = AB_CONCURRENCY // len(LOAD_NAMES)
        procs = {}
        for host, _ in LOAD_NAMES:
            procs[host] = subprocess.Popen(
                ["taskset", "-c", str(self.args.load_cpu), "ab", "-q", "-r", "-s", "5",
                 "-c", str(conc), "-n", str(per), "-H", f"Host: {host}",
                 f"https://{HOST}:{self.port}/"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        res = {}
        for host, p in procs.items():
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise Failure(f"ab {host} failed ({p.returncode}): {(err or out).strip()[-400:]}")
            res[host] = parse_ab(out)
            r = res[host]
            if r["failed"] or r["non2xx"] or r["done"] < per:
                raise Failure(f"ab {host}: completed {r['done']} of {per}, {r['failed']} failed, "
                              f"{r['non2xx']} non-2xx")
            self.tls_seen.add(r["tls"])
        return res

    def trial(self, name, total, perf=False):
        proxy = self.start_proxy(name)
        if self.cgroup:
            self.cgroup.add(proxy.pid)
        perf_out = os.path.join(self.workdir, f"perf-{name}.csv")
        try:
            offsets = self.backend.log_sizes()
            pids = proxy.pids()
            tracer = None
            if perf:
                tracer = subprocess.Popen(
                    ["taskset", "-c", str(self.args.load_cpu), "perf", "stat", "-x", ",",
                     "-o", perf_out, "-e", "syscalls:sys_enter_*",
                     "-p", ",".join(str(p) for p in pids)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(2)  # attaching to ~360 tracepoints takes a moment
            sched0, ticks0 = cpu_ns(pids)
            load0, proxy0 = cpu_times(self.args.load_cpu), cpu_times(self.args.proxy_cpu)
            t0 = time.monotonic()
            res = self.run_ab(total)
            wall = time.monotonic() - t0
            sched1, ticks1 = cpu_ns(pids)
            load_busy, load_steal = cpu_share(load0, cpu_times(self.args.load_cpu))
            proxy_busy, proxy_steal = cpu_share(proxy0, cpu_times(self.args.proxy_cpu))
            if tracer:
                tracer.send_signal(signal.SIGINT)
                _, err = tracer.communicate(timeout=30)
                if tracer.returncode not in (0, -signal.SIGINT, 130):
                    raise Failure(f"perf stat failed ({tracer.returncode}): {err.decode()[-400:]}")
            if proxy.p.poll() is not None:
                raise Failure(f"{name} exited during the run:\n{proxy.log_tail()}")
        finally:
            proxy.stop()
        done = sum(r["done"] for r in res.values())
        self.check_log(name, offsets, res)
        out = {"cps": done / max(r["secs"] for r in res.values()),
               "cpu_us": (sched1 - sched0) / done / 1e3,
               "cpu_us_ticks": (ticks1 - ticks0) / done / 1e3,
               "secs": wall, "conns": done, "load_cpu_busy": load_busy,
               "load_cpu_steal": load_steal, "proxy_cpu_busy": proxy_busy,
               "proxy_cpu_steal": proxy_steal}
        if perf:
            out["syscalls"] = parse_perf(perf_out, done)
        return out

    def check_log(self, name, offsets, res):
        """Each server block logged exactly the requests ab completed for its name, each
        answered, with that SNI, on a full handshake (not resumed)."""
        want = {p: 0 for p in POOLS}
        names = {p: set() for p in POOLS}
        for host, pool in LOAD_NAMES:
            pool = pool if name in ROUTED else "api"
            want[pool] += res[host]["done"]
            names[pool].add(host)
        got = self.backend.new_lines(offsets, want)
        for pool in POOLS:
            lines = got[pool]
            bad = [ln for ln in lines if len(ln.split()) < 6 or ln.split()[1] != "200"
                   or ln.split()[2] != "/" or ln.split()[3] not in names[pool]]
            reused = [ln for ln in lines if len(ln.split()) >= 6 and ln.split()[4] != "."]
            if len(lines) != want[pool] or bad or reused:
                raise Failure(f"{name}: the {pool} server logged {len(lines)} requests for "
                              f"{want[pool]} completed, {len(bad)} not a 200 on / with SNI "
                              f"{sorted(names[pool]) or 'none expected'} (e.g. {bad[:1]}), "
                              f"{len(reused)} resumed (e.g. {reused[:1]})")

    # ------------------------------------------------ memory

    def memory(self, name, kind, n):
        """Proxy Rss/Pss growth per connection while n connections are open through it:
        kind 'idle' (handshake done, then quiet) or a key of self.hellos (part of a
        ClientHello sent)."""
        proxy = self.start_proxy(name)
        socks = []
        try:
            time.sleep(0.3)
            pids = proxy.pids()
            rss0, pss0 = mem_kib(pids)
            fds0 = fd_count(pids)
            t0 = time.monotonic()
            if kind == "idle":
                socks = self.open_idle(n)
                settle = 1.0
            else:
                hello, sent = self.hellos[kind]
                socks = self.open_partial(n, hello[:sent])
                settle = 0.5
            opened = time.monotonic() - t0
            time.sleep(settle)
            pids = proxy.pids()
            rss1, pss1 = mem_kib(pids)
            fds1 = fd_count(pids)
            if proxy.p.poll() is not None:
                raise Failure(f"{name} exited holding connections:\n{proxy.log_tail()}")
        finally:
            for s in socks:
                s.close()
            proxy.stop()
        per = 2 if kind == "idle" else 1
        if not (per - 0.05) * n <= fds1 - fds0 <= (per + 0.05) * n:
            raise Failure(f"{name} {kind}: the proxy holds {fds1 - fds0} more descriptors for "
                          f"{n} connections, want {per} each ({'routed' if per == 2 else 'none routed yet'})"
                          f"; opening them took {opened:.1f}s")
        return {"kib": (rss1 - rss0) / n, "pss_kib": (pss1 - pss0) / n, "rss_mib": rss1 / 1024,
                "open_secs": opened}

    def open_idle(self, n):
        ctx = client_context(self.cafile)
        linger = struct.pack("ii", 1, 0)  # RST on close: no TIME_WAIT pile-up

        def one(_):
            raw = socket.create_connection((HOST, self.port), timeout=10)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            try:
                return ctx.wrap_socket(raw, server_hostname="api.example.com")
            except BaseException:
                raw.close()
                raise
        socks = []
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            futures = [ex.submit(one, i) for i in range(n)]
            errors = []
            for f in futures:
                try:
                    socks.append(f.result())
                except (OSError, ssl.SSLError) as e:
                    errors.append(e)
        if errors:
            for s in socks:
                s.close()
            raise Failure(f"{len(errors)} of {n} TLS handshakes through the proxy failed, "
                          f"e.g. {errors[0]}")
        return socks

    def open_partial(self, n, data):
        socks = []
        linger = struct.pack("ii", 1, 0)
        try:
            for _ in range(n):
                s = socket.create_connection((HOST, self.port), timeout=5)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                s.sendall(data)
        except OSError as e:
            for s in socks:
                s.close()
            raise Failure(f"connection {len(socks)} of {n} failed: {e}")
        return socks


def parse_perf(path, conns):
    """{syscall: calls per connection} from perf stat -x, output."""
    counts = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 3 or not parts[2].startswith("syscalls:sys_enter_"):
                continue
            try:
                c = int(parts[0])
            except ValueError:
                continue  # <not counted> / <not supported>
            if c:
                counts[parts[2][len("syscalls:sys_enter_"):]] = c / conns
    return counts


# ---------------------------------------------------------------- report

METRICS = [("cps", "new TLS connections", "conn/s"),
           ("cpu_us", "proxy CPU per connection", "cpu-us"),
           ("mem_idle", "mem per idle routed conn", "KiB"),
           ("mem_idle_pss", "  (Pss)", "KiB"),
           ("rss_idle", "  total Rss, conns open", "MiB"),
           ("mem_hello100", "mem per conn, 100 B hello", "KiB"),
           ("mem_hello12k", "mem per conn, 12000 B hello", "KiB"),
           ("rss_hello12k", "  total Rss, conns open", "MiB")]


def print_table(raw, proxies):
    refs = [r for r in ("haproxy", "lb-pool") if r in proxies]
    print(f"{'metric':<28} {'unit':<7} {'proxy':<13} {'median':>8} {'min..max':>15} {'n':>2}"
          + "".join(f" {'/' + r:>9}" for r in refs))
    print("-" * (78 + 10 * len(refs)))
    for key, label, unit in METRICS:
        printed = False
        for p in proxies:
            vals = raw.get(p, {}).get(key)
            if not vals:
                continue
            med = statistics.median(vals)
            row = f"{label:<28} {unit:<7} {p:<13} {fmt(med):>8} "
            row += f"{fmt(min(vals)) + '..' + fmt(max(vals)):>15} {len(vals):>2}"
            for r in refs:
                ref = median(raw, r, key)
                row += f" {(f'{med / ref:.3f}x' if ref else '-'):>9}"
            print(row)
            printed = True
        if printed and key in ("cps", "cpu_us", "rss_idle", "rss_hello12k"):
            print()
    print()

    ratios = {}

    def pairs(a, b, key):
        return [x / y for x, y in zip(raw[a][key], raw[b][key])]

    for key, what, target, better in (("cps", "conn/s", TARGET_CPS, "ge"),
                                      ("cpu_us", "CPU per connection", TARGET_CPU, "le")):
        a, b = median(raw, "lb", key), median(raw, "haproxy", key)
        sign = ">=" if better == "ge" else "<="
        if a is None or b is None:
            print(f"lb/haproxy {what}: - (not measured); target {sign} {target:.2f}")
            continue
        ratio = a / b
        ratios[key] = ratio
        pr = pairs("lb", "haproxy", key)
        ok = ratio >= target if better == "ge" else ratio <= target
        miss = "" if ok else f" (by {abs(ratio - target) / target * 100:.1f}%)"
        print(f"lb/haproxy {what}: {ratio:.3f}x (per-rep pairs {min(pr):.3f}..{max(pr):.3f}); "
              f"target {sign} {target:.2f}: {'meets' if ok else 'MISSES' + miss}")
    m = median(raw, "lb", "mem_idle")
    if m is None:
        print(f"lb memory per idle routed connection: - (not measured); target <= {TARGET_MEM:.1f} KiB")
    else:
        ratios["mem_idle_kib"] = m
        print(f"lb memory per idle routed connection: {m:.2f} KiB (min..max "
              f"{min(raw['lb']['mem_idle']):.2f}..{max(raw['lb']['mem_idle']):.2f}); target <= "
              f"{TARGET_MEM:.1f} KiB: {'meets' if m <= TARGET_MEM else 'MISSES'}")
    s, l = median(raw, "lb", "mem_hello100"), median(raw, "lb", "mem_hello12k")
    if s is not None and l is not None:
        grows = l - s
        ratios["hello_growth_kib"] = grows
        held = (HELLO_LARGE_SENT - HELLO_SMALL_SENT) / 1024
        print(f"lb memory per connection reading a hello: {s:.2f} KiB at {HELLO_SMALL_SENT} B, "
              f"{l:.2f} KiB at {HELLO_LARGE_SENT} B ({grows:+.2f} KiB; keeping the bytes would "
              f"add {held:.1f}); must not grow with the hello: "
              f"{'meets' if grows < 1.0 else 'MISSES'}")
    return ratios


def print_syscalls(sys_counts):
    names = list(sys_counts)
    if not names:
        return
    calls = sorted({c for v in sys_counts.values() for c, x in v.items() if x >= 0.01},
                   key=lambda c: -max(sys_counts[p].get(c, 0) for p in names))
    print("\n# system calls per connection (perf stat -e 'syscalls:sys_enter_*', one untimed trial)")
    print(f"{'syscall':<22}" + "".join(f" {p:>13}" for p in names))
    for c in calls:
        print(f"{c:<22}" + "".join(f" {sys_counts[p].get(c, 0):>13.2f}" for p in names))
    print(f"{'total':<22}" + "".join(f" {sum(sys_counts[p].values()):>13.2f}" for p in names))


def main():
    ap = argparse.ArgumentParser(description="lb SNI routes vs HAProxy req.ssl_sni: new TLS "
                                             "connections, CPU per connection, memory.")
    ap.add_argument("--lb-bin", default=os.path.join(REPO, "build", "lb"))
    ap.add_argument("--reps", type=int, help="repetitions per proxy (default 5)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, 2000 connections, "
                                                         "1000 for memory")
    ap.add_argument("--json", help="write every trial's figures to this file")
    ap.add_argument("--proxies", default=",".join(PROXIES),
                    help="comma-separated, from: " + " ".join(PROXIES))
    ap.add_argument("--conns", type=int, help="connections per trial, in all (default 8000)")
    ap.add_argument("--mem-conns", type=int, help="connections held open for memory (5000)")
    ap.add_argument("--no-mem", action="store_true", help="skip the memory trials")
    ap.add_argument("--syscalls", action="store_true",
                    help="one more trial per proxy under perf stat: syscalls per connection")
    ap.add_argument("--quota", type=int, help="percent of one CPU the proxy may use in "
                    "a timed trial (a cgroup; default: no limit)")
    ap.add_argument("--port-base", type=int, default=23300)
    ap.add_argument("--proxy-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.reps:
        cfg["reps"] = max(1, min(args.reps, 50))
    if args.conns:
        cfg["conns"] = max(200, args.conns)
    if args.mem_conns:
        cfg["mem_conns"] = max(100, args.mem_conns)
    proxies = [p for p in args.proxies.split(",") if p]
    for p in proxies:
        if p not in PROXIES:
            ap.error(f"--proxies: unknown {p!r}; choose from {' '.join(PROXIES)}")
    args.lb_bin = os.path.abspath(args.lb_bin)
    if any(p.startswith("lb") for p in proxies) and not os.access(args.lb_bin, os.X_OK):
        sys.exit(f"--lb-bin {args.lb_bin}: no executable there (build lb first)")
    prepare_driver(["haproxy", "nginx", "ab", "openssl", "curl", "taskset"] + (["perf"] if args.syscalls else []), args.proxy_cpu, args.load_cpu)

    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="sni_cost-")
    os.chmod(workdir, 0o755)  # nginx workers may run as nobody
    raw, busy, errors, n, sys_counts = {}, [], [], 0, {}
    bench = None
    try:
        bench = Bench(args, workdir)
        if args.quota:
            bench.cgroup = Cgroup("lb-bench-sni", args.quota)
        cfg["mem_conns"] = min(cfg["mem_conns"], bench.maxconn - 100)
        print(f"# sni_cost: {time.strftime('%Y-%m-%d %H:%M:%S')}, kernel {os.uname().release}, "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"# proxy on CPU {args.proxy_cpu}"
              f"{f' in a cgroup of {args.quota}% of a CPU' if args.quota else ''}; ab, nginx and driver on CPU {args.load_cpu}; "
              f"{cfg['conns']} connections per trial: ab -c {AB_CONCURRENCY // 2} -n "
              f"{cfg['conns'] // 2} for each of {', '.join(h for h, _ in LOAD_NAMES)} side by side; "
              f"{cfg['reps']} repetitions, median; maxconn {bench.maxconn}")
        print(f"# every connection a new TCP connection and a full TLS handshake (no resumption "
              f"offered; checked in nginx's log), EC P-256 certificates; memory: "
              f"{0 if args.no_mem else cfg['mem_conns']} connections", flush=True)
        ab_sends_sni(bench.probe_port)
        log("ab sends the Host header's name as SNI (its ClientHello checked)")
        bench.backend = Backend(workdir, bench.backend_ports, args.load_cpu, bench.maxconn,
                                bench.certs)
        runnable = []
        for p in proxies:
            try:
                why = bench.lb_supports(p) if p.startswith("lb") else None
                if why:
                    raise Failure(f"{p}: this lb cannot run it: {why}")
                bench.check_routes(p)
                log(f"{p}: routes checked with curl")
                runnable.append(p)
            except Failure as e:
                errors.append(str(e))
                log(f"ERROR: {e}")
        mem_kinds = [] if args.no_mem else ["idle", "hello100", "hello12k"]
        for rep in range(1, cfg["reps"] + 1):
            for p in runnable:
                n += 1
                tag = f"[{rep}/{cfg['reps']}] {p}"
                t0, others0 = time.monotonic(), others_cpu_ticks()
                try:
                    res = bench.trial(p, cfg["conns"])
                except Failure as e:
                    errors.append(f"{tag}: {e}")
                    log(f"{tag}: FAILED: {e}")
                    continue
                other, top = others_cpu_since(others0, t0)
                res["others_cpu"] = other
                note = ""
                if other > BUSY_LIMIT:
                    busy.append(tag)
                    note = f"  [busy: other processes used {other:.2f} CPU, most {top}]"
                for k, v in res.items():
                    raw.setdefault(p, {}).setdefault(k, []).append(v)
                log(f"{tag}: {res['cps']:.0f} conn/s, {res['cpu_us']:.2f} cpu-us/conn "
                    f"(ticks {res['cpu_us_ticks']:.2f}), {res['secs']:.1f} s; load CPU "
                    f"{res['load_cpu_busy']:.0%} busy, proxy CPU {res['proxy_cpu_busy']:.0%}; "
                    f"steal {res['load_cpu_steal']:.0%}/{res['proxy_cpu_steal']:.0%}{note}")
            for p in runnable:
                if p not in ROUTED:
                    continue
                for kind in mem_kinds:
                    tag = f"[{rep}/{cfg['reps']}] {p} memory {kind}"
                    try:
                        m = bench.memory(p, kind, cfg["mem_conns"])
                    except Failure as e:
                        errors.append(f"{tag}: {e}")
                        log(f"{tag}: FAILED: {e}")
                        continue
                    d = raw.setdefault(p, {})
                    d.setdefault("mem_" + kind, []).append(m["kib"])
                    d.setdefault(f"mem_{kind}_pss", []).append(m["pss_kib"])
                    d.setdefault("rss_" + kind, []).append(m["rss_mib"])
                    d.setdefault(f"open_secs_{kind}", []).append(m["open_secs"])
                    log(f"{tag}: {m['kib']:.2f} KiB/conn (Pss {m['pss_kib']:.2f}), Rss "
                        f"{m['rss_mib']:.1f} MiB, opened in {m['open_secs']:.1f} s")
        if args.syscalls:
            for p in runnable:
                try:
                    res = bench.trial(p, cfg["conns"], perf=True)
                    sys_counts[p] = res["syscalls"]
                    log(f"[syscalls] {p}: {sum(res['syscalls'].values()):.1f} calls/conn "
                        f"(under perf: {res['cps']:.0f} conn/s, {res['cpu_us']:.1f} cpu-us/conn)")
                except Failure as e:
                    errors.append(f"[syscalls] {p}: {e}")
                    log(f"[syscalls] {p}: FAILED: {e}")
    except Failure as e:
        errors.append(str(e))
        log(f"ERROR: {e}")
    finally:
        if bench and bench.backend:
            bench.backend.stop()
        if bench and bench.cgroup:
            bench.cgroup.remove()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"# TLS as negotiated by ab: {', '.join(sorted(bench.tls_seen)) if bench else '-'}; "
          f"finished in {time.monotonic() - started:.0f} s")
    print()
    ratios = print_table(raw, [p for p in proxies if p in raw])
    print_syscalls(sys_counts)
    if busy:
        print(f"# WARNING: {len(busy)} of {n} trials ran while other processes used more than "
              f"{BUSY_LIMIT:.2f} CPU: " + ", ".join(busy))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": cfg, "proxies": proxies, "results": raw, "ratios": ratios,
                       "syscalls_per_conn": sys_counts, "busy_trials": busy,
                       "tls": sorted(bench.tls_seen) if bench else [], "errors": errors},
                      f, indent=1)
    if errors:
        print(f"# FAILED: {len(errors)} error(s):")
        for e in errors:
            print("#   " + e.replace("\n", "\n#     "))
        sys.exit(1)


if __name__ == "__main__":
    main()
