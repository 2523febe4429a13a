#!/usr/bin/env python3
"""proxy_cost.py - CPU per new connection of lb's `send_proxy = v2` against HAProxy's
`send-proxy-v2`, and against lb's own `send_proxy = off` (issue 26, "Bench").

A benchmark run by hand (not a ctest test). Python 3 stdlib only; needs
haproxy, nginx, ab and taskset (../shared/bench/setup.sh installs them).

Method (that of the project's peer benchmark, ../shared/bench/bench.py):

  - One nginx backend (`worker_processes 2`, pinned to the load CPU) with
    two pairs of listeners on 127.0.0.1: a pair with `proxy_protocol` and a
    plain pair. `location = /` returns 200 "ok\\n". Each pair logs every
    request (buffered) with `$proxy_protocol_addr`, so that a run can prove
    that the backend saw a PROXY header on every request.
  - Proxies, each a pool of the two servers of one pair, round robin, a TCP
    check every 2 s, 2 threads (bench.py's settings):
      haproxy-v2   haproxy, mode tcp, nbthread 2, `server ... send-proxy-v2`
      lb-v2        lb, workers = 2, `send_proxy = v2`
      lb-off       lb, workers = 2, no send_proxy (off), to the plain pair
      haproxy-off  haproxy without send-proxy, to the plain pair (reference)
  - Workload: bench.py's new-connection one, `ab -c 32 -n 20000` on `/`
    without keep-alive: one request per TCP connection.
  - The proxy runs pinned to CPU 0 (taskset), ab, nginx and this driver to
    CPU 1. Each trial starts a fresh proxy, waits until a request through it
    is answered, runs ab and stops the proxy. The proxies take turns (A B C
    D A B C D ...), so that drift hits them alike; the median of --reps
    repetitions is reported with min..max.
  - CPU: the proxy's processes and all their threads, from /proc. bench.py
    reads utime+stime from /proc/PID/stat, in clock ticks (10 ms: 1-2% of a
    trial's CPU, too coarse for a 3% target); this reads the same runtime
    in nanoseconds from /proc/PID/task/TID/schedstat (the scheduler's
    sum_exec_runtime, of which utime+stime is a scaled copy), and checks
    it against the ticks. CPU per connection = that CPU over the trial / the
    connections ab completed.
  - Before the timed trials, each send-proxy variant is pointed once at a
    small listener in this script that reads what arrives and checks a
    proper v2 header: signature, PROXY command, TCP over IPv4, the client's
    address and port, the frontend's address and port. During the trials,
    every request of a v2 trial must show up in nginx's log with a
    non-empty $proxy_protocol_addr (and every request of an off trial in
    the plain log). Either check failing fails the run.
  - Trials during which processes outside this benchmark used more than
    5% of a CPU are marked [busy] and listed; rerun when there are many.

Ratios: lb-v2 / haproxy-v2 CPU per connection (issue's target <= 0.90) and
lb-v2 / lb-off (target <= 1.03), medians over medians.

Usage:
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j2
  python3 tests/bench/proxy_cost.py                    # 5 repetitions, about 2 minutes
  python3 tests/bench/proxy_cost.py --quick            # 1 repetition, ab -n 5000
  python3 tests/bench/proxy_cost.py --reps 9 --json out.json --proxies lb-v2,haproxy-v2

Options: --lb-bin PATH [build/lb], --reps N [5], --quick, --json FILE,
--proxies LIST [haproxy-v2,lb-v2,lb-off,haproxy-off], --port-base P [23100]
(ports from there up that nobody listens on, below the ephemeral range),
--proxy-cpu N [0], --load-cpu N [1], --keep (keep the work directory).

Exit status: 0 when every trial ran and every PROXY check passed; 1 when a
proxy could not run (e.g. an lb without send_proxy) or a check failed; the
ratio targets are printed, not enforced (this is a measurement).
"""

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from benchproc import (HOST, Failure, Proc, cpu_ns, fmt, free_ports, haproxy_argv, http_ok,
                       listening, log, nginx_conf, others_cpu_since, others_cpu_ticks,
                       prepare_driver)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUSY_LIMIT = 0.05          # CPUs used by other processes that mark a trial as disturbed
AB_CONCURRENCY = 32
FULL = dict(reps=5, ab_n=20000)
QUICK = dict(reps=1, ab_n=5000)
PROXIES = ["haproxy-v2", "lb-v2", "lb-off", "haproxy-off"]
TARGETS = [("lb-v2", "haproxy-v2", 0.90), ("lb-v2", "lb-off", 1.03)]
PP2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


# ---------------------------------------------------------------- processes

# ---------------------------------------------------------------- backend

NGINX_HTTP = """\
    log_format pp '$server_port $status pp=$proxy_protocol_addr:$proxy_protocol_port';
    sendfile on;
    keepalive_timeout 120s;
    default_type application/octet-stream;
    server {{
        listen {host}:{pp1} backlog=4096 proxy_protocol;
        listen {host}:{pp2} backlog=4096 proxy_protocol;
        access_log {dir}/pp.log pp buffer=256k flush=200ms;
        location = / {{ return 200 "ok\\n"; }}
    }}
    server {{
        listen {host}:{plain1} backlog=4096;
        listen {host}:{plain2} backlog=4096;
        access_log {dir}/plain.log pp buffer=256k flush=200ms;
        location = / {{ return 200 "ok\\n"; }}
    }}
"""


class Backend:
    def __init__(self, workdir, ports, cpu, maxconn):
        self.dir = os.path.join(workdir, "nginx")
        os.makedirs(self.dir)
        self.pp, self.plain = ports[0:2], ports[2:4]
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(self.dir, 2 * maxconn, NGINX_HTTP.format(
                dir=self.dir, host=HOST, pp1=self.pp[0], pp2=self.pp[1],
                plain1=self.plain[0], plain2=self.plain[1])))
        self.proc = Proc("nginx", ["nginx", "-p", self.dir, "-e", self.dir + "/error.log",
                                   "-c", conf], cpu, workdir)
        for port in self.plain:
            self.proc.wait_ready(lambda port=port: http_ok(port))
        for port in self.pp:
            self.proc.wait_ready(lambda port=port: listening(port))

    def log_path(self, kind):
        return os.path.join(self.dir, "pp.log" if kind == "pp" else "plain.log")

    def log_size(self, kind):
        try:
            return os.path.getsize(self.log_path(kind))
        except OSError:
            return 0

    def log_lines(self, kind, offset, want, timeout=5.0):
        """The log's lines after `offset`, once at least `want` are there (nginx flushes
        its buffer every 200 ms) or at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path(kind), "rb") as f:
                f.seek(offset)
                lines = f.read().decode(errors="replace").splitlines()
            if len(lines) >= want or time.monotonic() > deadline:
                return lines
            time.sleep(0.1)

    def stop(self):
        self.proc.stop()


# ---------------------------------------------------------------- proxies

def lb_config(d, port, admin_port, servers, send_proxy, maxconn):
    lines = ["[global]", "workers = 2", f"max_connections = {maxconn}",
             "[admin]", f"listen = {HOST}:{admin_port}",
             "[frontend bench]", f"listen = {HOST}:{port}", "pool = bench",
             "[pool bench]", "balance = roundrobin"]
    lines += [f"server = b{i} {HOST}:{p}" for i, p in enumerate(servers, 1)]
    lines += ["check = tcp", "check_interval = 2s"]
    if send_proxy:  # off is the default: leaving the key out works on every lb
        lines.append("send_proxy = v2")
    conf = os.path.join(d, "lb.ini")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return conf


class Bench:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        ports = free_ports(args.port_base, 6)
        self.backend_ports, self.port, self.admin_port = ports[0:4], ports[4], ports[5]
        self.maxconn = min(100000, (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1000) // 3)
        self.backend = None

    def proxy_argv(self, name, d, servers):
        send_proxy = name.endswith("-v2")
        if name.startswith("haproxy"):
            return haproxy_argv(d, self.port, servers, self.maxconn,
                                " send-proxy-v2" if send_proxy else "")
        conf = lb_config(d, self.port, self.admin_port, servers, send_proxy, self.maxconn)
        return [self.args.lb_bin, "-c", conf]

    def servers_for(self, name):
        return self.backend.pp if name.endswith("-v2") else self.backend.plain

    def start_proxy(self, name, servers, ready):
        for _ in range(100):  # the previous proxy's listener may still be closing
            if not listening(self.port):
                break
            time.sleep(0.05)
        if listening(self.port):
            raise Failure(f"port {self.port} is still in use")
        d = tempfile.mkdtemp(prefix=name + "-", dir=self.workdir)
        proxy = Proc(name, self.proxy_argv(name, d, servers), self.args.proxy_cpu, d)
        try:
            proxy.wait_ready(ready)
        except BaseException:
            proxy.stop()
            raise
        return proxy

    def lb_supports(self, name):
        """lb -t on the variant's config: a clear reason when this lb cannot run it."""
        d = tempfile.mkdtemp(prefix=name + "-test-", dir=self.workdir)
        argv = self.proxy_argv(name, d, self.backend.pp)
        r = subprocess.run([argv[0], "-t"] + argv[1:], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return (r.stderr or r.stdout).strip()[-400:] or f"lb -t exited with {r.returncode}"
        return None

    # ------------------------------------------------ the PROXY header itself

    def check_header(self, name):
        """Point the proxy at a listener here; one request through it must arrive with a
        correct v2 header (PROXY command, TCP over IPv4, client and frontend addresses)."""
        got, socks, stop = [], [], threading.Event()
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((HOST, 0))
        ls.listen(64)
        ls.settimeout(0.1)

        def serve():
            while not stop.is_set():
                try:
                    c, _ = ls.accept()
                except socket.timeout:
                    continue
                except OSError:
                    return
                socks.append(c)
                c.settimeout(2)
                data = b""
                try:  # health checks send nothing and close; clients send header + request
                    while b"\r\n\r\n" not in data[28:] and len(data) < 4096:
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    if data:
                        got.append(data)
                        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                                  b"Connection: close\r\n\r\nok\n")
                except OSError:
                    pass
                c.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        proxy = None
        try:
            backend_port = ls.getsockname()[1]
            proxy = self.start_proxy(name, [backend_port, backend_port],
                                     lambda: listening(self.port))
            got.clear()
            with socket.create_connection((HOST, self.port), timeout=3) as c:
                client = c.getsockname()
                c.sendall(b"GET / HTTP/1.0\r\nHost: check\r\n\r\n")
                reply = b""
                while True:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
            if not got:
                raise Failure(f"{name}: the server got no request")
            why = parse_v2(got[0], client, (HOST, self.port))
            if why:
                raise Failure(f"{name}: bad PROXY v2 header: {why}; got {got[0][:64]!r}")
            if not reply.endswith(b"ok\n"):
                raise Failure(f"{name}: reply through the proxy was {reply[:80]!r}")
        finally:
            if proxy:
                proxy.stop()
            stop.set()
            ls.close()
            t.join(3)
            for c in socks:
                c.close()

    # ------------------------------------------------ one trial

    def trial(self, name, ab_n):
        kind = "pp" if name.endswith("-v2") else "plain"
        proxy = self.start_proxy(name, self.servers_for(name), lambda: http_ok(self.port))
        try:
            log_offset = self.backend.log_size(kind)
            pids = proxy.pids()
            csv = os.path.join(self.workdir, "ab.csv")
            sched0, ticks0 = cpu_ns(pids)
            t0 = time.monotonic()
            r = subprocess.run(["taskset", "-c", str(self.args.load_cpu), "ab", "-q", "-r",
                                "-s", "5", "-c", str(AB_CONCURRENCY), "-n", str(ab_n), "-e", csv,
                                f"http://{HOST}:{self.port}/"],
                               capture_output=True, text=True, timeout=300)
            secs = time.monotonic() - t0
            sched1, ticks1 = cpu_ns(pids)
            if proxy.p.poll() is not None:
                raise Failure(f"{name} exited during the run:\n{proxy.log_tail()}")
        finally:
            proxy.stop()
        out = r.stdout
        if r.returncode != 0:
            raise Failure(f"ab failed ({r.returncode}): {(r.stderr or out).strip()[-400:]}")
        done = int(re.search(r"^Complete requests:\s+(\d+)", out, re.M).group(1))
        failed = int(re.search(r"^Failed requests:\s+(\d+)", out, re.M).group(1))
        non2xx = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)
        if failed or non2xx or done < ab_n:
            raise Failure(f"{name}: ab completed {done} of {ab_n}, {failed} failed, "
                          f"{non2xx.group(1) if non2xx else 0} non-2xx")
        self.check_log(name, kind, log_offset, done)
        with open(csv) as f:
            pct = dict(line.strip().split(",") for line in f.readlines()[1:])
        cps = float(re.search(r"^Requests per second:\s+([\d.]+)", out, re.M).group(1))
        return {"cps": cps, "cpu_us": (sched1 - sched0) / done / 1e3,
                "cpu_us_ticks": (ticks1 - ticks0) / done / 1e3, "p99_ms": float(pct["99"]),
                "secs": secs, "conns": done}

    def check_log(self, name, kind, offset, done):
        """Every request of the trial is in the backend's log, with the client's address
        from a PROXY header on the proxy_protocol listeners (none on the plain ones)."""
        lines = self.backend.log_lines(kind, offset, done)
        ok = [ln for ln in lines if ln.split(" ")[1:2] == ["200"]]
        if kind == "pp":
            bad = [ln for ln in ok if not re.search(r" pp=127\.0\.0\.1:\d+$", ln)]
        else:
            bad = [ln for ln in ok if not ln.endswith(" pp=-:-")]  # nginx logs "-" for empty
        if len(ok) < done or bad:
            raise Failure(f"{name}: the backend's {kind} log has {len(ok)} answered requests "
                          f"for {done} connections, {len(bad)} without the expected PROXY "
                          f"address (e.g. {bad[:1]})")


def parse_v2(data, client, frontend):
    """None when data starts with a PROXY v2 header for client -> frontend, else why not."""
    if not data.startswith(PP2_SIGNATURE):
        return "no v2 signature"
    if len(data) < 16:
        return "shorter than 16 bytes"
    ver_cmd, fam, length = data[12], data[13], struct.unpack("!H", data[14:16])[0]
    if ver_cmd != 0x21:
        return f"version/command 0x{ver_cmd:02x}, want 0x21 (v2 PROXY)"
    if fam != 0x11:
        return f"family 0x{fam:02x}, want 0x11 (TCP over IPv4)"
    if length < 12 or len(data) < 16 + length:
        return f"length {length} (have {len(data) - 16} bytes)"
    src, dst = socket.inet_ntoa(data[16:20]), socket.inet_ntoa(data[20:24])
    sport, dport = struct.unpack("!HH", data[24:28])
    if (src, sport) != tuple(client):
        return f"source {src}:{sport}, want {client[0]}:{client[1]}"
    if (dst, dport) != tuple(frontend):
        return f"destination {dst}:{dport}, want {frontend[0]}:{frontend[1]}"
    if not data[16 + length:].startswith(b"GET / "):
        return "the request does not follow the header"
    return None


# ---------------------------------------------------------------- report

METRICS = [("cps", "new connections", "conn/s"),
           ("cpu_us", "proxy CPU per connection", "cpu-us"),
           ("p99_ms", "p99 (connect included)", "ms")]


def print_table(raw, proxies):
    print(f"{'metric':<26} {'unit':<7} {'proxy':<12} {'median':>8} {'min..max':>15} {'n':>2}"
          f" {'/haproxy-v2':>11} {'/lb-off':>8}")
    print("-" * 96)
    for key, label, unit in METRICS:
        med = {p: statistics.median(raw[p][key]) for p in proxies if raw.get(p, {}).get(key)}
        for p in proxies:
            vals = raw.get(p, {}).get(key)
            if not vals:
                continue
            row = f"{label:<26} {unit:<7} {p:<12} {fmt(med[p]):>8} "
            row += f"{fmt(min(vals)) + '..' + fmt(max(vals)):>15} {len(vals):>2}"
            for ref, width in (("haproxy-v2", 11), ("lb-off", 8)):
                row += f" {(f'{med[p] / med[ref]:.3f}x' if ref in med else '-'):>{width}}"
            print(row)
        print()
    cpu = {p: statistics.median(raw[p]["cpu_us"]) for p in proxies if raw.get(p, {}).get("cpu_us")}
    ratios = {}
    for a, b, target in TARGETS:
        key = f"{a}/{b}"
        if a in cpu and b in cpu:
            ratios[key] = cpu[a] / cpu[b]
            # the ratio's spread: each rep's pair (the two ran next to each other)
            pairs = [x / y for x, y in zip(raw[a]["cpu_us"], raw[b]["cpu_us"])]
            verdict = "meets" if ratios[key] <= target else "MISSES"
            print(f"CPU per connection {key}: {ratios[key]:.3f}x (per-rep pairs "
                  f"{min(pairs):.3f}..{max(pairs):.3f}); target <= {target:.2f}: {verdict}")
        else:
            print(f"CPU per connection {key}: - (not measured); target <= {target:.2f}")
    return ratios


def main():
    ap = argparse.ArgumentParser(description="lb send_proxy=v2 vs HAProxy send-proxy-v2: "
                                             "CPU per new connection.")
    ap.add_argument("--lb-bin", default=os.path.join(REPO, "build", "lb"))
    ap.add_argument("--reps", type=int, help="repetitions per proxy (default 5)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, ab -n 5000")
    ap.add_argument("--json", help="write every trial's figures to this file")
    ap.add_argument("--proxies", default=",".join(PROXIES),
                    help="comma-separated, from: " + " ".join(PROXIES))
    ap.add_argument("--port-base", type=int, default=23100)
    ap.add_argument("--proxy-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    if args.reps:
        cfg["reps"] = max(1, min(args.reps, 50))
    proxies = [p for p in args.proxies.split(",") if p]
    for p in proxies:
        if p not in PROXIES:
            ap.error(f"--proxies: unknown {p!r}; choose from {' '.join(PROXIES)}")
    args.lb_bin = os.path.abspath(args.lb_bin)
    if any(p.startswith("lb") for p in proxies) and not os.access(args.lb_bin, os.X_OK):
        sys.exit(f"--lb-bin {args.lb_bin}: no executable there (build lb first)")
    prepare_driver(["haproxy", "nginx", "ab", "taskset"], args.proxy_cpu, args.load_cpu)

    workdir = tempfile.mkdtemp(prefix="proxy_cost-")
    os.chmod(workdir, 0o755)  # nginx workers may run as nobody
    bench = Bench(args, workdir)
    print(f"# proxy_cost: {time.strftime('%Y-%m-%d %H:%M:%S')}, kernel {os.uname().release}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# proxy on CPU {args.proxy_cpu}; ab, nginx and driver on CPU {args.load_cpu}; "
          f"ab -c {AB_CONCURRENCY} -n {cfg['ab_n']}, {cfg['reps']} repetitions, median; "
          f"maxconn {bench.maxconn}", flush=True)
    raw, busy, errors, n = {}, [], [], 0
    try:
        bench.backend = Backend(workdir, bench.backend_ports, args.load_cpu, bench.maxconn)
        runnable = []
        for p in proxies:
            try:
                why = bench.lb_supports(p) if p.startswith("lb") else None
                if why:
                    raise Failure(f"{p}: this lb cannot run it: {why}")
                if p.endswith("-v2"):
                    bench.check_header(p)
                    log(f"{p}: PROXY v2 header checked")
                runnable.append(p)
            except Failure as e:
                errors.append(str(e))
                log(f"ERROR: {e}")
        for rep in range(1, cfg["reps"] + 1):
            for p in runnable:
                n += 1
                tag = f"[{rep}/{cfg['reps']}] {p}"
                t0, others0 = time.monotonic(), others_cpu_ticks()
                try:
                    res = bench.trial(p, cfg["ab_n"])
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
                    f"(ticks {res['cpu_us_ticks']:.2f}), p99 {res['p99_ms']:.0f} ms{note}")
    finally:
        if bench.backend:
            bench.backend.stop()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print()
    ratios = print_table(raw, [p for p in proxies if p in raw])
    if busy:
        print(f"# WARNING: {len(busy)} of {n} trials ran while other processes used more than "
              f"{BUSY_LIMIT:.2f} CPU: " + ", ".join(busy))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": cfg, "proxies": proxies, "results": raw, "ratios": ratios,
                       "busy_trials": busy, "errors": errors}, f, indent=1)
    if errors:
        print(f"# FAILED: {len(errors)} error(s):")
        for e in errors:
            print("#   " + e.replace("\n", "\n#     "))
        sys.exit(1)


if __name__ == "__main__":
    main()
