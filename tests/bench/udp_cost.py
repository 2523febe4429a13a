#!/usr/bin/env python3
"""udp_cost.py - lb's UDP frontend (`protocol = udp`) against nginx's stream module:
DNS queries per second, proxy CPU per query, latency at a fixed rate, and one-way
1,400-byte datagrams delivered per second (issue 28, "Bench").

A benchmark run by hand (not a ctest test). Python 3 stdlib only; needs nginx (with
the stream module), dnsperf, dnsmasq, taskset and a C compiler (cc): the load
generator, sink and responder are ./udp_load.c, compiled at start with `cc -O2` into
the work directory.

Method (that of ./sni_cost.py and of the project's peer benchmark,
../shared/bench/bench.py):

  - Backends, started once, pinned to the load CPU:
      two dnsmasq, each answering www.bench.test IN A from memory (a --host-record;
      no recursion, no upstream, no network): the first with 192.0.2.1, the second
      with 192.0.2.2, so that an answer shows which server it came from;
      two sinks (udp_load sink) that count the datagrams they receive;
      with --backend respond, also two udp_load responders (one fixed A record,
      much cheaper than dnsmasq) that the DNS trials then use instead of dnsmasq,
      for when the backends, not the proxy, are the limit.
  - Proxies, pinned to the proxy CPU (taskset), 2 workers each, with two UDP
    frontends: `dns` (pool of the two DNS servers, round robin, replies expected:
    1 per query) and `syslog` (pool of the two sinks, no replies):
      nginx   stream module, worker_processes 2, `listen ... udp reuseport` (both
              workers take datagrams), proxy_responses 1 (dns) / 0 (syslog),
              proxy_timeout 30s
      lb      workers = 2, `protocol = udp`, udp_responses = 1 / 0,
              udp_idle_timeout = 30s; `check = dns` on the DNS pool (A of the
              name the dnsmasq serve, every 2 s); none on the sinks
    and a reference without a proxy:
      direct  the load straight to the first backend (one dnsmasq, one sink): what
              the backend and the load side can do; a proxy that comes near it is
              load-bound, not proxy-bound.
  - Workloads, each trial a fresh proxy:
      qps     dnsperf -c 16 -q 100 -T 1 -t 1 for --secs, unlimited (a closed loop:
              100 queries outstanding over 16 sockets, so a client flow usually
              has several queries in flight): queries/s, proxy CPU per query,
              lost; every answer must be NOERROR (dnsperf's response codes). A
              lost query holds one of dnsperf's 100 slots for its 1 s timeout, so
              a small loss rate lowers queries/s much more than the proxy's cost;
      qps1    udp_load dnsloop: 100 sockets, each with exactly one query in flight
              (the next when its answer came, or lost after 200 ms), unlimited:
              the same figures when every query is a flow of its own, as from a
              stub resolver that asks from a fresh port each time; the capacity
              of the per-flow path (open, connect, answer, close);
      lat     udp_load dns at a fixed --lat-rate (10,000/s, an open loop: the
              schedule, not the replies, sets the pace; below what either proxy
              can do, so the figure is latency, not queueing) from 16 sockets:
              latency p50/p99/p99.9 of each reply, measured by the generator;
              every reply must come back to the socket its query left from, with
              its ID, NOERROR and an answer; lost = no reply within 1 s;
      oneway  udp_load flood: 1,400-byte syslog-like datagrams (an RFC 5424 header,
              then text) from 16 sockets at a fixed --flood-rate (450,000/s offered,
              above what either proxy forwards on one CPU, so both run saturated;
              about what the load CPU can send and sink at once), no replies:
              datagrams/s that reached the sinks, proxy CPU per
              delivered datagram, and where the kernel dropped the rest (receive
              buffer drops per socket from /proc/net/udp: the proxy's listening
              sockets, its upstream sockets, the sinks).
  - Pinning: the proxy alone on CPU 0; dnsperf, udp_load, dnsmasq, the sinks and
    this driver on CPU 1. Each trial's log line gives both CPUs' busy share and
    steal (time the hypervisor ran something else), from /proc/stat.
  - CPU: the proxy's processes (nginx: master and workers) and all their threads,
    the scheduler's runtime in ns from /proc/PID/task/TID/schedstat, checked
    against utime+stime ticks from /proc/PID/stat. CPU per query (datagram) = that
    CPU over the trial / the queries answered (datagrams delivered).
  - The proxies take turns (A B C A B C ...) within each workload, so that drift
    hits them alike; the median of --reps repetitions is reported with min..max.
    Trials during which processes outside this benchmark used more than 5% of a
    CPU are marked [busy] and listed.
  - Correctness, before the timed trials, through every proxy: a query from each
    of 8 sockets gets a NOERROR answer with www.bench.test A 192.0.2.1 or .2 from a
    real DNS server (dnsmasq, whatever --backend says), and both answers occur (the
    two servers are used); 8 A+AAAA pairs, each pair from one socket as glibc's
    resolver sends them, should get both answers (a warning if not); 32 datagrams sent through the syslog frontend reach the
    sinks, both of them. After each lb trial its /stats and its log's warnings and
    errors are kept (--keep, --json) and summarised in the log, with the flows
    lb opened per 1,000 queries (from /stats). Each trial also logs the kernel's
    UDP NoPorts count: replies that reached a flow socket the proxy had closed.

Issue 28's targets (printed, not enforced; this is a measurement): lb / nginx
queries/s >= 1.2, CPU per query <= 0.8 (both checked on qps and on qps1), p99
latency <= 0.9. The one-way row is reported as ratios without a target.

Usage:
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j2
  python3 tests/bench/udp_cost.py                 # 5 repetitions of 5 s, about 8 minutes
  python3 tests/bench/udp_cost.py --quick         # 1 repetition of 2 s: 30 s
  python3 tests/bench/udp_cost.py --reps 9 --json out.json --proxies nginx,lb --workloads qps,lat

Options: --lb PATH [build/lb], --reps N [5], --secs S [5], --quick, --json FILE,
--proxies LIST [direct,nginx,lb], --workloads LIST [qps,qps1,lat,oneway], --backend
dnsmasq|respond [dnsmasq], --lat-rate N [10000], --flood-rate N [450000],
--port-base P [23500] (ports from there up that nobody uses, TCP or UDP, below the
ephemeral range), --proxy-cpu N [0], --load-cpu N [1], --keep (keep the work
directory).

Exit status: 0 when every trial ran and every check passed; 1 when a proxy could
not run (e.g. an lb without `protocol = udp`: its rows are missing and the reason
is printed) or a check failed.
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from benchproc import (HOST, Failure, Proc, cpu_ns, cpu_share, cpu_times, fmt, free_ports, log,
                       median, others_cpu_since, others_cpu_ticks, prepare_driver)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUSY_LIMIT = 0.05          # CPUs used by other processes that mark a trial as disturbed
FULL = dict(reps=5, secs=5)
QUICK = dict(reps=1, secs=2)
PROXIES = ["direct", "nginx", "lb"]
WORKLOADS = ["qps", "qps1", "lat", "oneway"]
PREFIX = {"qps": "qps", "qps1": "q1", "lat": "lat", "oneway": "ow"}  # of each one's figures
QNAME = "www.bench.test"
ANSWERS = ("192.0.2.1", "192.0.2.2")   # what the first and the second dnsmasq answer
DNSPERF_CLIENTS = 16       # sockets, i.e. client flows through the proxy
DNSPERF_OUTSTANDING = 100  # dnsperf's default -q
LOOP_CLIENTS = 100         # qps1: as many sockets, one query outstanding on each
LOAD_FLOWS = 16            # sockets of udp_load dns and flood
FLOOD_SIZE = 1400
IDLE_TIMEOUT_S = 30        # lb udp_idle_timeout, nginx proxy_timeout
TARGET_QPS, TARGET_CPU, TARGET_P99 = 1.2, 0.8, 0.9


# ---------------------------------------------------------------- ports, /proc/net

def udp_sockets():
    """[(local port, remote port, drops)] of every IPv4 UDP socket, from /proc/net/udp."""
    out = []
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            out.append((int(p[1].split(":")[1], 16), int(p[2].split(":")[1], 16), int(p[-1])))
    return out


def udp_snmp():
    """The kernel's UDP counters (/proc/net/snmp): RcvbufErrors counts datagrams
    dropped for a full receive buffer, NoPorts those that found no socket (a reply
    to a flow socket the proxy already closed)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:])}


# ---------------------------------------------------------------- DNS, by hand

def dns_query(qid, name=QNAME):
    head = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)  # RD, one question
    qname = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return head + qname + struct.pack("!HH", 1, 1)


def dns_answer_a(reply, qid):
    """The first A record's address in a NOERROR reply to query `qid`, else a reason
    (str starting with '!')."""
    if len(reply) < 12:
        return "!short reply"
    rid, flags, qd, an = struct.unpack("!HHHH", reply[:8])
    if rid != qid or not flags & 0x8000:
        return f"!not the reply to query {qid} (id {rid}, flags {flags:#06x})"
    if flags & 0xF:
        return f"!rcode {flags & 0xF}"
    n = 12
    for _ in range(qd):                       # skip the question(s)
        while n < len(reply) and reply[n] != 0:
            n += 1 + reply[n]
        n += 5
    for _ in range(an):
        if n < len(reply) and reply[n] & 0xC0 == 0xC0:
            n += 2                            # a compressed name, as both servers send
        else:
            while n < len(reply) and reply[n] != 0:
                n += 1 + reply[n]
            n += 1
        if n + 10 > len(reply):
            break
        rtype, _, _, rdlen = struct.unpack("!HHIH", reply[n:n + 10])
        if rtype == 1 and rdlen == 4 and n + 14 <= len(reply):
            return socket.inet_ntoa(reply[n + 10:n + 14])
        n += 10 + rdlen
    return "!no A record in the answer"


def dns_ask(port, timeout=0.5, sock=None):
    """Ask 127.0.0.1:port for QNAME A; the address answered, or a reason ('!...')."""
    own = sock is None
    s = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        qid = random.randrange(65536)
        s.sendto(dns_query(qid), (HOST, port))
        while True:
            data, _ = s.recvfrom(4096)
            got = dns_answer_a(data, qid)
            if not got.startswith("!not the reply"):  # a late reply to an earlier try
                return got
    except OSError as e:
        return f"!{e or 'timed out'}"
    finally:
        if own:
            s.close()


def both_answered(port, pairs):
    """How many of `pairs` A+AAAA query pairs, each sent back to back from a socket of
    its own (glibc's resolver asks both at once from one port), got both replies."""
    ok = 0
    for i in range(pairs):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.5)
            ids = {2 * i + 1, 2 * i + 2}
            a = dns_query(2 * i + 1)
            aaaa = dns_query(2 * i + 2)[:-4] + struct.pack("!HH", 28, 1)  # QTYPE AAAA
            try:
                s.sendto(a, (HOST, port))
                s.sendto(aaaa, (HOST, port))
                got = set()
                while got != ids:
                    got.add(struct.unpack("!H", s.recv(4096)[:2])[0])
                ok += 1
            except OSError:
                pass  # a timeout: one of the two answers did not come
    return ok


# ---------------------------------------------------------------- backends

class Sink:
    """udp_load sink: its counters are three uint64 at the start of a file."""

    def __init__(self, name, tool, port, cpu, workdir):
        self.port = port
        self.path = os.path.join(workdir, name + ".count")
        self.proc = Proc(name, [tool, "sink", str(port), self.path], cpu, workdir)
        self.proc.wait_ready(lambda: os.path.exists(self.path)
                             and os.path.getsize(self.path) >= 24)

    def count(self):
        """(datagrams, bytes, datagrams of another size than the first)."""
        with open(self.path, "rb") as f:
            return struct.unpack("<3Q", f.read(24))


class Backends:
    def __init__(self, args, workdir, tool, ports):
        self.dnsmasq_ports, self.respond_ports, self.sink_ports = ports[0:2], ports[2:4], ports[4:6]
        self.procs, self.sinks = [], []
        cpu = args.load_cpu
        try:
            for i, (port, addr) in enumerate(zip(self.dnsmasq_ports, ANSWERS), 1):
                # --no-daemon: in the foreground, stopped by pid; the answer comes from the
                # host record, in memory (--no-resolv: nothing is ever forwarded)
                p = Proc(f"dnsmasq{i}", ["dnsmasq", "--no-daemon", f"--port={port}",
                                         f"--listen-address={HOST}", "--bind-interfaces",
                                         "--no-resolv", "--no-hosts", "--conf-file=/dev/null",
                                         f"--host-record={QNAME},{addr}"], cpu, workdir)
                self.procs.append(p)
                p.wait_ready(lambda port=port, addr=addr: dns_ask(port, 0.2) == addr)
            if args.backend == "respond":
                for i, port in enumerate(self.respond_ports, 1):
                    p = Proc(f"respond{i}", [tool, "respond", str(port)], cpu, workdir)
                    self.procs.append(p)
                    p.wait_ready(lambda port=port: dns_ask(port, 0.2) == ANSWERS[0])
            for i, port in enumerate(self.sink_ports, 1):
                s = Sink(f"sink{i}", tool, port, cpu, workdir)
                self.sinks.append(s)
                self.procs.append(s.proc)
        except BaseException:
            self.stop()
            raise
        self.dns_ports = self.respond_ports if args.backend == "respond" else self.dnsmasq_ports

    def sink_total(self):
        return [sum(x) for x in zip(*(s.count() for s in self.sinks))]

    def stop(self):
        for p in self.procs:
            p.stop()


# ---------------------------------------------------------------- proxies

def nginx_stream_module():
    """The load_module line nginx needs for `stream {}`: none when it is built in."""
    r = subprocess.run(["nginx", "-V"], capture_output=True, text=True, timeout=10)
    conf = r.stderr + r.stdout
    if "--with-stream=dynamic" not in conf:
        return "" if "--with-stream" in conf else None
    for d in ("/usr/lib/nginx/modules", "/usr/share/nginx/modules", "/usr/lib64/nginx/modules"):
        path = os.path.join(d, "ngx_stream_module.so")
        if os.path.exists(path):
            return f"load_module {path};\n"
    return None


NGINX = """\
{load_module}worker_processes 2;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile {nofile};
events {{ worker_connections {conns}; }}
stream {{
    upstream dns {{ {dns} }}
    upstream sinks {{ {sinks} }}
    server {{
        listen {host}:{dns_port} udp reuseport;
        proxy_pass dns;
        proxy_responses 1;
        proxy_timeout {idle}s;
    }}
    server {{
        listen {host}:{log_port} udp reuseport;
        proxy_pass sinks;
        proxy_responses 0;
        proxy_timeout {idle}s;
    }}
}}
"""


def nginx_argv(d, load_module, dns_port, log_port, dns_servers, sink_servers):
    conf = os.path.join(d, "nginx.conf")
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    with open(conf, "w") as f:
        # worker_connections: UDP sessions (each two connections: client, upstream)
        # are capped by it; nginx warns when it exceeds the descriptor limit
        f.write(NGINX.format(load_module=load_module, dir=d, host=HOST,
                             nofile=nofile, conns=min(65536, nofile),
                             dns=" ".join(f"server {HOST}:{p};" for p in dns_servers),
                             sinks=" ".join(f"server {HOST}:{p};" for p in sink_servers),
                             dns_port=dns_port, log_port=log_port, idle=IDLE_TIMEOUT_S))
    return ["nginx", "-p", d, "-e", os.path.join(d, "error.log"), "-c", conf]


def lb_config(d, dns_port, log_port, admin_port, dns_servers, sink_servers):
    lines = ["[global]", "workers = 2",
             "[admin]", f"listen = {HOST}:{admin_port}",
             "[pool dns]", "balance = roundrobin"]
    lines += [f"server = d{i} {HOST}:{p}" for i, p in enumerate(dns_servers, 1)]
    # the name the dnsmasq serve: the root's SOA (the default) they refuse
    lines += ["check = dns", f"check_dns_name = {QNAME}", "check_dns_type = A",
              "check_interval = 2s"]
    lines += ["[pool sinks]", "balance = roundrobin"]
    lines += [f"server = s{i} {HOST}:{p}" for i, p in enumerate(sink_servers, 1)]
    lines += ["check = none",  # a sink answers nothing, on no protocol
              "[frontend dns]", f"listen = {HOST}:{dns_port}", "protocol = udp", "pool = dns",
              "udp_responses = 1", f"udp_idle_timeout = {IDLE_TIMEOUT_S}s",
              "[frontend syslog]", f"listen = {HOST}:{log_port}", "protocol = udp",
              "pool = sinks", "udp_responses = 0", f"udp_idle_timeout = {IDLE_TIMEOUT_S}s"]
    conf = os.path.join(d, "lb.ini")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return conf


def http_get(port, path, timeout=2.0):
    """The body of GET path on 127.0.0.1:port (lb's admin listener), or None. Reads
    Content-Length bytes: the admin listener may keep the connection open."""
    data, want = b"", None
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
                      f"Connection: close\r\n\r\n".encode())
            for _ in range(4096):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                head, sep, body = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head) if sep else None
                want = int(m.group(1)) if m else None
                if want is not None and len(body) >= want:
                    break
    except OSError:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or (want is not None and len(body) < want):
        return None
    return body.decode(errors="replace")


def nonzero_alarms(obj, path=""):
    """{json path: value} of the nonzero numbers in lb's /stats whose name says
    something went wrong (drop, error, fail, lost, overflow, refused, timeout)."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(nonzero_alarms(v, f"{path}.{k}" if path else str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            name = v.get("name") if isinstance(v, dict) else None
            out.update(nonzero_alarms(v, f"{path}[{name or i}]"))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj:
        if (".dropped." in path or re.search(r"drop|error|fail|lost|overflow|refus|timeout|"
                                             r"timed_out|full|reject|evict",
                                             path.rsplit(".", 1)[-1])) \
                and not path.endswith("_ms"):
            out[path] = obj
    return out


def log_complaints(path, name):
    """{event or message: count} of the warnings and errors in a proxy's log."""
    seen = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if name == "lb":
                    m = re.search(r"level=(warn|error)\b.*?event=(\S+)", line)
                    key = f"{m.group(1)} {m.group(2)}" if m else None
                else:  # nginx: "2026/01/01 00:00:00 [error] 12#12: *3 message, client: ..."
                    m = re.search(r"\[(warn|error|crit|alert|emerg)\] \d+#\d+: (?:\*\d+ )?([^,]*)",
                                  line)
                    key = f"{m.group(1)} {m.group(2)[:80]}" if m else None
                if key:
                    seen[key] = seen.get(key, 0) + 1
    except OSError:
        pass
    return seen


# ---------------------------------------------------------------- load

def parse_dnsperf(out):
    def grab(pattern, conv=float):
        m = re.search(pattern, out, re.M)
        if not m:
            raise Failure(f"dnsperf's output not understood (no {pattern!r}):\n{out[-800:]}")
        return conv(m.group(1))
    codes = {}
    m = re.search(r"^\s*Response codes:\s+(.*)$", out, re.M)
    for code, n in re.findall(r"(\w+) (\d+) \(", m.group(1) if m else ""):
        codes[code] = int(n)
    return {"sent": grab(r"^\s*Queries sent:\s+(\d+)", int),
            "completed": grab(r"^\s*Queries completed:\s+(\d+)", int),
            "lost": grab(r"^\s*Queries lost:\s+(\d+)", int),
            "qps": grab(r"^\s*Queries per second:\s+([\d.]+)"),
            "avg_ms": grab(r"^\s*Average Latency \(s\):\s+([\d.]+)") * 1e3,
            "codes": codes}


def parse_kv(out, what):
    """The key=value words of udp_load's one result line."""
    line = out.strip().splitlines()[-1] if out.strip() else ""
    kv = dict(w.split("=", 1) for w in line.split() if "=" in w)
    if not kv:
        raise Failure(f"udp_load {what} printed no result: {out[-400:]!r}")
    return {k: float(v) for k, v in kv.items()}


def run_pinned(cpu, argv, timeout):
    r = subprocess.run(["taskset", "-c", str(cpu)] + argv, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise Failure(f"{argv[0]} {argv[1] if len(argv) > 1 else ''} exited with "
                      f"{r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}")
    return r.stdout


# ---------------------------------------------------------------- the bench

class Bench:
    def __init__(self, args, workdir, tool):
        self.args = args
        self.workdir = workdir
        self.tool = tool
        ports = free_ports(args.port_base, 9, udp=True)
        self.backend_ports = ports[0:6]
        self.dns_port, self.log_port, self.admin_port = ports[6:9]
        self.backends = None
        self.qfile = os.path.join(workdir, "queries.txt")
        with open(self.qfile, "w") as f:
            f.write(f"{QNAME} A\n")
        self.nginx_module = nginx_stream_module()

    # ------------------------------------------------ proxies

    def proxy_argv(self, name, d, dns_servers):
        sinks = self.backends.sink_ports
        if name == "nginx":
            return nginx_argv(d, self.nginx_module, self.dns_port, self.log_port,
                              dns_servers, sinks)
        conf = lb_config(d, self.dns_port, self.log_port, self.admin_port,
                         dns_servers, sinks)
        return [self.args.lb, "-c", conf]

    def lb_refuses(self):
        """lb -t on lb's config: None when lb takes it, else lb's reason."""
        d = tempfile.mkdtemp(prefix="lb-test-", dir=self.workdir)
        argv = self.proxy_argv("lb", d, self.backends.dns_ports)
        r = subprocess.run([argv[0], "-t"] + argv[1:], capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return None
        msg = (r.stderr or r.stdout).strip() or f"lb -t exited with {r.returncode}"
        return "\n".join(msg.splitlines()[:8])

    def start_proxy(self, name, dns_servers=None):
        """A fresh proxy on the two frontend ports, once a query through it is answered."""
        dns_servers = dns_servers or self.backends.dns_ports
        ports = (self.dns_port, self.log_port)
        deadline = time.monotonic() + 5
        # a leftover proxy with SO_REUSEPORT would share the port silently with the new one
        while any(lp in ports for lp, _, _ in udp_sockets()):
            if time.monotonic() > deadline:
                raise Failure(f"UDP ports {ports} are still bound by another process")
            time.sleep(0.05)
        d = tempfile.mkdtemp(prefix=name + "-", dir=self.workdir)
        proxy = Proc(name, self.proxy_argv(name, d, dns_servers), self.args.proxy_cpu, d)
        proxy.dir = d
        try:
            # 15 s: lb's servers may wait for their first checks (2 s apart) before use
            proxy.wait_ready(lambda: not dns_ask(self.dns_port, 0.2).startswith("!"), 15.0)
        except BaseException:
            proxy.stop()
            raise
        return proxy

    def targets(self, name):
        """(DNS port, one-way port) that the load of this proxy goes to."""
        if name == "direct":
            return self.backends.dns_ports[0], self.backends.sink_ports[0]
        return self.dns_port, self.log_port

    # ------------------------------------------------ correctness

    def check(self, name):
        """Through the proxy, with the dnsmasq servers: each of 8 sockets gets a right
        answer, and both servers answer some; 32 one-way datagrams reach the sinks.
        Returns warnings (str) for what is odd but not wrong."""
        proxy = None if name == "direct" else self.start_proxy(name, self.backends.dnsmasq_ports)
        warnings = []
        try:
            dns_port = self.backends.dnsmasq_ports[0] if proxy is None else self.dns_port
            _, log_port = self.targets(name)
            seen = []
            for i in range(8):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    got = "!"
                    for _ in range(3):  # UDP: a lost datagram is allowed, a wrong answer not
                        got = dns_ask(dns_port, 1.0, s)
                        if not got.startswith("!timed out"):
                            break
                    if got not in ANSWERS:
                        raise Failure(f"{name}: query {i + 1} of 8 got {got!r}, want one of "
                                      f"{ANSWERS} (www.bench.test A from dnsmasq)")
                    seen.append(got)
            if proxy and len(set(seen)) < 2:
                warnings.append(f"{name}: 8 flows were all answered by one server ({seen[0]})")
            pairs = both_answered(dns_port, 8)
            if pairs < 8:  # a warning: the timed rows show what it costs (lost queries)
                warnings.append(f"{name}: of 8 A+AAAA pairs sent from one socket each (as "
                                f"glibc's resolver does), {pairs} got both answers")
            before = [s.count()[0] for s in self.backends.sinks]
            payload = b"<134>1 2026-01-01T00:00:00Z bench-host udp_cost 1 ID47 - check " * 30
            socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(8)]
            try:
                for i in range(32):
                    socks[i % 8].sendto(payload[:FLOOD_SIZE], (HOST, log_port))
                    time.sleep(0.002)
            finally:
                for s in socks:
                    s.close()
            deadline = time.monotonic() + 3
            while True:
                got = [s.count()[0] - b for s, b in zip(self.backends.sinks, before)]
                if sum(got) >= 32 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if sum(got) != 32:
                raise Failure(f"{name}: of 32 one-way datagrams the sinks received {got}")
            if proxy and min(got) == 0:
                warnings.append(f"{name}: 8 one-way flows all went to one sink ({got})")
            if proxy and proxy.p.poll() is not None:
                raise Failure(f"{name} exited during the check:\n{proxy.log_tail()}")
        finally:
            if proxy:
                proxy.stop()
        return warnings

    # ------------------------------------------------ one timed trial

    def trial(self, name, workload):
        proxy = None if name == "direct" else self.start_proxy(name)
        args = self.args
        dns_port, log_port = self.targets(name)
        secs = args.secs
        out = {}
        try:
            pids = proxy.pids() if proxy else []
            drops0 = self.backend_drops()
            snmp0 = udp_snmp()
            sink0 = self.backends.sink_total()
            sched0, ticks0 = cpu_ns(pids)
            load0, proxy0 = cpu_times(args.load_cpu), cpu_times(args.proxy_cpu)
            t0 = time.monotonic()
            if workload == "qps":
                res = parse_dnsperf(run_pinned(args.load_cpu, [
                    "dnsperf", "-s", HOST, "-p", str(dns_port), "-d", self.qfile,
                    "-l", str(secs), "-c", str(DNSPERF_CLIENTS), "-q", str(DNSPERF_OUTSTANDING),
                    "-T", "1", "-t", "1"], secs + 60))
                bad = {c: n for c, n in res["codes"].items() if c != "NOERROR"}
                if bad:
                    raise Failure(f"{name}: dnsperf got answers other than NOERROR: {bad}")
                done = res["completed"]
                out = {"qps": res["qps"], "qps_lost": 100.0 * res["lost"] / max(1, res["sent"]),
                       "qps_avg_ms": res["avg_ms"], "queries": done}
            elif workload == "qps1":
                res = parse_kv(run_pinned(args.load_cpu, [
                    self.tool, "dnsloop", str(dns_port), str(secs), str(LOOP_CLIENTS), QNAME],
                    secs + 60), "dnsloop")
                if res["bad"]:
                    raise Failure(f"{name}: {res['bad']:.0f} of {res['sent']:.0f} replies were "
                                  f"wrong (not NOERROR with an answer, or to the wrong socket)")
                done = res["answered"]
                out = {"q1": res["qps"], "q1_lost": 100.0 * res["lost"] / max(1, res["sent"]),
                       "q1_avg_ms": res["mean_us"] / 1e3, "queries": done}
            elif workload == "lat":
                res = parse_kv(run_pinned(args.load_cpu, [
                    self.tool, "dns", str(dns_port), str(args.lat_rate), str(secs),
                    str(LOAD_FLOWS), QNAME], secs + 60), "dns")
                if res["bad"]:
                    raise Failure(f"{name}: {res['bad']:.0f} of {res['sent']:.0f} replies were "
                                  f"wrong (not NOERROR with an answer, or to the wrong socket)")
                done = res["answered"]
                out = {"lat_p50": res["p50_us"], "lat_p99": res["p99_us"],
                       "lat_p999": res["p999_us"], "lat_max": res["max_us"],
                       "lat_lost": 100.0 * (res["lost"] + res["late"]) / max(1, res["sent"]),
                       "lat_rate": res["sent"] / max(1e-9, res["secs"]), "queries": done}
            else:
                res = parse_kv(run_pinned(args.load_cpu, [
                    self.tool, "flood", str(log_port), str(FLOOD_SIZE), str(args.flood_rate),
                    str(secs), str(LOAD_FLOWS)], secs + 60), "flood")
                flood_secs = res["secs"]
                time.sleep(0.3)  # what the proxy still holds in its queues is delivered
                sink1 = self.backends.sink_total()
                done = sink1[0] - sink0[0]
                if sink1[2] != sink0[2]:
                    raise Failure(f"{name}: {sink1[2] - sink0[2]} datagrams reached the sinks "
                                  f"with another size than {FLOOD_SIZE} bytes")
                out = {"ow_dps": done / flood_secs, "ow_offered": res["sent"] / flood_secs,
                       "ow_loss": 100.0 * (1 - done / max(1, res["sent"])),
                       "datagrams": done, "sent": res["sent"]}
            wall = time.monotonic() - t0
            sched1, ticks1 = cpu_ns(pids)
            load_busy, load_steal = cpu_share(load0, cpu_times(args.load_cpu))
            proxy_busy, proxy_steal = cpu_share(proxy0, cpu_times(args.proxy_cpu))
            out.update(self.drops(name, drops0, snmp0))
            if proxy:
                if proxy.p.poll() is not None:
                    raise Failure(f"{name} exited during the run:\n{proxy.log_tail()}")
                if name == "lb":
                    out["lb_stats_alarms"], out["lb_udp"] = self.lb_stats(proxy)
        finally:
            if proxy:
                proxy.stop()
        if proxy:
            out["log_complaints"] = log_complaints(
                proxy.logpath if name == "lb" else os.path.join(proxy.dir, "error.log"), name)
        if not done:
            raise Failure(f"{name} {workload}: nothing got through")
        key = PREFIX[workload] + "_cpu"
        if proxy:
            out[key] = (sched1 - sched0) / done / 1e3
            out[key + "_ticks"] = (ticks1 - ticks0) / done / 1e3
        # flows lb opened per 1,000 queries (datagrams): 1,000 when every query was a
        # flow of its own, few when flows lasted (and the cost of opening one is shared)
        fe_udp = out.get("lb_udp", {}).get("syslog" if workload == "oneway" else "dns")
        if fe_udp and "flows_total" in fe_udp:
            out[PREFIX[workload] + "_flows_k"] = \
                fe_udp["flows_total"] * 1000 / done
        out.update({"secs": wall, "load_cpu_busy": load_busy, "load_cpu_steal": load_steal,
                    "proxy_cpu_busy": proxy_busy, "proxy_cpu_steal": proxy_steal})
        return out

    def backend_drops(self):
        """Receive-buffer drops so far at the backends' sockets (they live across trials)."""
        ports = set(self.backend_ports)
        return sum(d for lp, _, d in udp_sockets() if lp in ports)

    def drops(self, name, backend0, snmp0):
        """Where the kernel dropped datagrams during the trial, for full receive buffers:
        at the proxy's listening sockets (fresh each trial: their count is this trial's),
        at its upstream sockets (those connected to a backend), at the backends, and the
        rest (sockets closed meanwhile, the load's own, an unconnected upstream socket);
        and the datagrams that found no socket at all (noports)."""
        socks = udp_sockets()
        ports = set(self.backend_ports)
        listen = sum(d for lp, _, d in socks if lp in (self.dns_port, self.log_port)) \
            if name != "direct" else 0
        upstream = sum(d for lp, rp, d in socks if rp in ports and lp not in ports)
        backend = self.backend_drops() - backend0
        snmp = udp_snmp()
        total = snmp["RcvbufErrors"] - snmp0["RcvbufErrors"]
        return {"drops_listen": listen, "drops_upstream": upstream, "drops_backend": backend,
                "drops_other": max(0, total - listen - upstream - backend),
                "noports": snmp["NoPorts"] - snmp0["NoPorts"]}

    def lb_stats(self, proxy):
        """lb's /stats at the end of a trial (kept in the proxy's directory): (its
        nonzero alarm counters, {frontend: its "udp" object})."""
        body = http_get(self.admin_port, "/stats")
        if body is None:
            return {"/stats": "no answer"}, {}
        with open(os.path.join(proxy.dir, f"stats-{time.monotonic():.0f}.json"), "w") as f:
            f.write(body)
        try:
            stats = json.loads(body)
        except ValueError:
            return {"/stats": "not JSON"}, {}
        udp = {fe.get("name"): fe["udp"] for fe in stats.get("frontends", [])
               if isinstance(fe, dict) and isinstance(fe.get("udp"), dict)}
        return nonzero_alarms(stats), udp


# ---------------------------------------------------------------- report

def metrics(args):
    return [("qps", "qps", "DNS queries, unlimited", "q/s"),
            ("qps", "qps_cpu", "proxy CPU per query", "cpu-us"),
            ("qps", "qps_lost", "queries lost", "%"),
            ("qps", "qps_avg_ms", "mean latency (100 outst.)", "ms"),
            ("qps", "qps_flows_k", "lb flows per 1000 queries", "flows"),
            ("qps1", "q1", f"DNS q., 1 in flight x {LOOP_CLIENTS}", "q/s"),
            ("qps1", "q1_cpu", "proxy CPU per query", "cpu-us"),
            ("qps1", "q1_lost", "queries lost (200 ms)", "%"),
            ("qps1", "q1_avg_ms", "mean latency", "ms"),
            ("qps1", "q1_flows_k", "lb flows per 1000 queries", "flows"),
            ("lat", "lat_p50", f"latency p50 at {args.lat_rate}/s", "us"),
            ("lat", "lat_p99", f"latency p99 at {args.lat_rate}/s", "us"),
            ("lat", "lat_p999", f"latency p99.9 at {args.lat_rate}/s", "us"),
            ("lat", "lat_cpu", "proxy CPU per query", "cpu-us"),
            ("lat", "lat_lost", "queries lost or > 1 s", "%"),
            ("lat", "lat_flows_k", "lb flows per 1000 queries", "flows"),
            ("oneway", "ow_dps", f"{FLOOD_SIZE} B one-way delivered", "dgram/s"),
            ("oneway", "ow_cpu", "proxy CPU per datagram", "cpu-us"),
            ("oneway", "ow_offered", "offered", "dgram/s"),
            ("oneway", "ow_loss", "not delivered", "%")]


def print_table(raw, proxies, args):
    refs = [r for r in ("nginx", "direct") if r in proxies]
    print(f"{'metric':<32} {'unit':<7} {'proxy':<7} {'median':>8} {'min..max':>17} {'n':>2}"
          + "".join(f" {'/' + r:>8}" for r in refs))
    print("-" * (79 + 9 * len(refs)))
    last = None
    for workload, key, label, unit in metrics(args):
        for p in proxies:
            vals = raw.get(p, {}).get(key)
            if not vals:
                continue
            if last and last != workload:
                print()
            last = workload
            med = statistics.median(vals)
            row = f"{label:<32} {unit:<7} {p:<7} {fmt(med):>8} "
            row += f"{fmt(min(vals)) + '..' + fmt(max(vals)):>17} {len(vals):>2}"
            for r in refs:
                ref = median(raw, r, key)
                row += f" {(f'{med / ref:.3f}x' if ref and r != p else '-'):>8}"
            print(row)
    print()

    ratios = {}
    for key, what, target, better in (("qps", "queries/s (dnsperf)", TARGET_QPS, "ge"),
                                      ("qps_cpu", "CPU per query (dnsperf)", TARGET_CPU, "le"),
                                      ("q1", "queries/s (1 in flight)", TARGET_QPS, "ge"),
                                      ("q1_cpu", "CPU per query (1 in flight)", TARGET_CPU,
                                       "le"),
                                      ("lat_p99", f"p99 latency at {args.lat_rate}/s",
                                       TARGET_P99, "le"),
                                      ("ow_dps", "one-way datagrams/s", None, "ge"),
                                      ("ow_cpu", "CPU per one-way datagram", None, "le")):
        a, b = median(raw, "lb", key), median(raw, "nginx", key)
        sign = ">=" if better == "ge" else "<="
        goal = f"; target {sign} {target:.2f}" if target else " (no target)"
        if a is None or b is None:
            print(f"lb/nginx {what}: - (not measured){goal}")
            continue
        ratios[key] = a / b
        pairs = [x / y for x, y in zip(raw["lb"][key], raw["nginx"][key]) if y]
        verdict = ""
        if target:
            ok = a / b >= target if better == "ge" else a / b <= target
            verdict = ": meets" if ok else f": MISSES (by {abs(a / b - target) / target:.1%})"
        print(f"lb/nginx {what}: {a / b:.3f}x (per-rep pairs {min(pairs):.3f}..{max(pairs):.3f})"
              f"{goal}{verdict}")

    # is the proxy the limit? direct has the same load and one backend, no proxy
    for key, what in (("qps", "queries/s (dnsperf)"), ("q1", "queries/s (1 in flight)")):
        d = median(raw, "direct", key)
        for p in ("nginx", "lb"):
            m = median(raw, p, key)
            if d and m and m > 0.8 * d:
                print(f"# NOTE: {p} reached {m / d:.0%} of direct's {what}: the load CPU, not "
                      f"the proxy, may be the limit (try --backend respond)")
    # one way: direct delivers what is offered, so the test is whether the proxy dropped
    for p in ("nginx", "lb"):
        offered, loss = median(raw, p, "ow_offered"), median(raw, p, "ow_loss")
        if offered and offered < 0.97 * args.flood_rate:
            print(f"# NOTE: the load offered {p} only {offered:.0f} of {args.flood_rate} "
                  f"datagrams/s: the load CPU was the limit")
        elif loss is not None and loss < 1.0:
            print(f"# NOTE: {p} delivered {100 - loss:.1f}% of the one-way load: not saturated, "
                  f"raise --flood-rate")
    return ratios


def main():
    ap = argparse.ArgumentParser(description="lb's UDP frontend vs nginx's stream module: "
                                             "DNS queries/s, CPU per query, latency, "
                                             "one-way datagrams.")
    ap.add_argument("--lb", "--lb-bin", dest="lb", default=os.path.join(REPO, "build", "lb"))
    ap.add_argument("--reps", type=int, help="repetitions per proxy (default 5)")
    ap.add_argument("--secs", type=int, help="seconds per timed trial (default 5)")
    ap.add_argument("--quick", action="store_true", help="1 repetition of 2 s")
    ap.add_argument("--json", help="write every trial's figures to this file")
    ap.add_argument("--proxies", default=",".join(PROXIES),
                    help="comma-separated, from: " + " ".join(PROXIES))
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated, from: " + " ".join(WORKLOADS))
    ap.add_argument("--backend", choices=("dnsmasq", "respond"), default="dnsmasq",
                    help="who answers the timed DNS trials (the checks always use dnsmasq)")
    ap.add_argument("--lat-rate", type=int, default=10000, help="queries/s of the latency trial")
    ap.add_argument("--flood-rate", type=int, default=450000,
                    help="datagrams/s offered in the one-way trial")
    ap.add_argument("--port-base", type=int, default=23500)
    ap.add_argument("--proxy-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.reps:
        cfg["reps"] = max(1, min(args.reps, 50))
    if args.secs:
        cfg["secs"] = max(1, min(args.secs, 60))
    args.secs = cfg["secs"]
    args.lat_rate = max(100, min(args.lat_rate, 500000))
    args.flood_rate = max(1000, min(args.flood_rate, 5000000))
    proxies = [p for p in args.proxies.split(",") if p]
    workloads = [w for w in args.workloads.split(",") if w]
    for p in proxies:
        if p not in PROXIES:
            ap.error(f"--proxies: unknown {p!r}; choose from {' '.join(PROXIES)}")
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"--workloads: unknown {w!r}; choose from {' '.join(WORKLOADS)}")
    args.lb = os.path.abspath(args.lb)
    prepare_driver(["nginx", "dnsperf", "dnsmasq", "taskset", "cc"], args.proxy_cpu, args.load_cpu)

    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="udp_cost-")
    os.chmod(workdir, 0o755)  # nginx workers run as nobody
    raw, trials, busy, errors, notes, n = {}, [], [], [], [], 0
    bench = None
    try:
        tool = os.path.join(workdir, "udp_load")
        r = subprocess.run(["cc", "-O2", "-Wall", "-o", tool, os.path.join(HERE, "udp_load.c")],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise Failure(f"cc udp_load.c failed:\n{r.stderr[-1500:]}")
        bench = Bench(args, workdir, tool)
        if "nginx" in proxies and bench.nginx_module is None:
            errors.append("nginx: this nginx has no stream module")
            proxies.remove("nginx")
        print(f"# udp_cost: {time.strftime('%Y-%m-%d %H:%M:%S')}, kernel {os.uname().release}, "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"# proxy on CPU {args.proxy_cpu}; load, backends ({args.backend} for the timed DNS "
              f"trials) and driver on CPU {args.load_cpu}; {cfg['reps']} repetitions of "
              f"{cfg['secs']} s, median; workloads {', '.join(workloads)}")
        print(f"# qps: dnsperf -c {DNSPERF_CLIENTS} -q {DNSPERF_OUTSTANDING}; lat: {args.lat_rate} "
              f"queries/s from {LOAD_FLOWS} sockets; oneway: {FLOOD_SIZE} B at {args.flood_rate}/s "
              f"offered from {LOAD_FLOWS} sockets", flush=True)
        bench.backends = Backends(args, workdir, tool, bench.backend_ports)
        runnable = []
        for p in proxies:
            try:
                if p == "lb":
                    if not os.access(args.lb, os.X_OK):
                        raise Failure(f"lb: no executable at {args.lb} (build lb, or --lb PATH)")
                    why = bench.lb_refuses()
                    if why:
                        raise Failure(f"lb SKIPPED: {args.lb} refuses the UDP config "
                                      f"(lb -t):\n{why}")
                for w in bench.check(p):
                    notes.append(w)
                    log(f"WARNING: {w}")
                log(f"{p}: answers and one-way delivery checked")
                runnable.append(p)
            except Failure as e:
                errors.append(str(e))
                log(f"ERROR: {e}")
        for workload in workloads:
            for rep in range(1, cfg["reps"] + 1):
                for p in runnable:
                    n += 1
                    tag = f"[{workload} {rep}/{cfg['reps']}] {p}"
                    t0, others0 = time.monotonic(), others_cpu_ticks()
                    try:
                        res = bench.trial(p, workload)
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
                    trials.append(dict(res, proxy=p, workload=workload, rep=rep))
                    for k, v in res.items():
                        if isinstance(v, (int, float)):
                            raw.setdefault(p, {}).setdefault(k, []).append(v)
                    log(f"{tag}: {trial_summary(workload, res)}; load CPU "
                        f"{res['load_cpu_busy']:.0%} busy, proxy CPU {res['proxy_cpu_busy']:.0%}; "
                        f"steal {res['load_cpu_steal']:.0%}/{res['proxy_cpu_steal']:.0%}{note}")
                    for what in ("log_complaints", "lb_stats_alarms"):
                        if res.get(what):
                            log(f"{tag}: {what}: " + ", ".join(f"{k}={v}" for k, v in
                                                               sorted(res[what].items())[:12]))
    except Failure as e:
        errors.append(str(e))
        log(f"ERROR: {e}")
    finally:
        if bench and bench.backends:
            bench.backends.stop()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"# finished in {time.monotonic() - started:.0f} s")
    print()
    ratios = print_table(raw, [p for p in proxies if p in raw], args)
    for note in notes:
        print(f"# NOTE: {note}")
    if busy:
        print(f"# WARNING: {len(busy)} of {n} trials ran while other processes used more than "
              f"{BUSY_LIMIT:.2f} CPU: " + ", ".join(busy))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": dict(cfg, lat_rate=args.lat_rate, flood_rate=args.flood_rate,
                                        backend=args.backend),
                       "proxies": proxies, "workloads": workloads, "trials": trials,
                       "ratios": ratios, "busy_trials": busy, "notes": notes, "errors": errors},
                      f, indent=1)
    if errors:
        print(f"# FAILED: {len(errors)} error(s):")
        for e in errors:
            print("#   " + e.replace("\n", "\n#     "))
        sys.exit(1)


def trial_summary(workload, r):
    cpu = PREFIX[workload] + "_cpu"
    cpu = (f", {r[cpu]:.2f} cpu-us (ticks {r[cpu + '_ticks']:.2f})" if cpu in r else "")
    drops = "drops listen/upstream/backend/other " + "/".join(
        str(r[k]) for k in ("drops_listen", "drops_upstream", "drops_backend", "drops_other"))
    drops += f", noports {r['noports']}"
    if PREFIX[workload] + "_flows_k" in r:
        drops += f"; lb flows per 1000: {r[PREFIX[workload] + '_flows_k']:.1f}"
    if workload == "qps":
        head = f"{r['qps']:.0f} q/s, {r['qps_lost']:.2f}% lost, mean {r['qps_avg_ms']:.2f} ms"
    elif workload == "qps1":
        head = f"{r['q1']:.0f} q/s, {r['q1_lost']:.2f}% lost, mean {r['q1_avg_ms']:.2f} ms"
    elif workload == "lat":
        head = (f"{r['lat_rate']:.0f} q/s sent, p50 {r['lat_p50']:.0f} p99 {r['lat_p99']:.0f} "
                f"p99.9 {r['lat_p999']:.0f} max {r['lat_max']:.0f} us, {r['lat_lost']:.2f}% lost")
    else:
        head = (f"{r['ow_dps']:.0f} dgram/s delivered of {r['ow_offered']:.0f} offered "
                f"({r['ow_loss']:.1f}% not delivered)")
    return head + cpu + "; " + drops


if __name__ == "__main__":
    main()
