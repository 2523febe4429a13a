#!/usr/bin/env python3
"""scale.py - how lb's costs grow with the work: curves at 5 or more sizes,
written as CSV files and drawn as PNGs (gnuplot), HAProxy beside lb where it
has the same operation. A benchmark run by hand, not a ctest test:

  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j2
  python3 tests/bench/scale.py                      # every curve, into scale-out/
  python3 tests/bench/scale.py --curves servers --sizes 10,1000,100000

The curves:
  pick       ns per pick, per algorithm, 10 .. 100,000 servers: the
             balancer's code alone (pick_cost.c, built here with cc -O2
             against build/libbal.a), one thread, every server in rotation;
  servers    one pool of N servers (check = none, addresses never dialled),
             10 .. 100,000: start-up time (exec to /ready), RSS per server,
             GET /stats and GET /metrics (time to the last byte, bytes), a
             file reload that changes one server's weight (POST /reload,
             time to its answer), a members reload that adds one server
             (POST /pools/P/servers, time to its 201); HAProxy: start-up
             time (exec to its stats socket answering), RSS per server and
             `show stat` (time, bytes) for the same backend;
  pools      P pools and P frontends of one server each, 1 .. 1,000:
             start-up time, RSS, a file reload that changes one server;
  conns      C idle connections through lb to one backend, 100 .. 9,000
             (the descriptor limit, 20,000, holds two per connection and the
             client and backend live in other processes): RSS per
             connection.

Every figure is the median of --reps (3) where it is repeated. lb runs
with workers = 1 and log_level = warn. Each lb and HAProxy is stopped by
pid; nothing listens but on 127.0.0.1.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
HOST = "127.0.0.1"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    return free_ports(1)[0]


def free_ports(n):
    """n distinct free ports: each socket is held until all are bound (ports
    taken one at a time may come back twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.005)
    raise RuntimeError(f"timed out waiting for {what}")


def http(port, method, path, body=None, timeout=120):
    """(seconds to the last byte, status, body bytes)."""
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", data=body, method=method,
                                 headers={"Content-Type": "application/json"} if body else {})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        data, status = e.read(), e.code
    return time.monotonic() - t0, status, data


def get_raw(port, path, timeout=120):
    """(seconds to the last byte, status, body bytes) of a GET read with
    plain socket calls: urllib's reader alone took 20-30 ms of a 9 MB
    /metrics, which is the client's time, not lb's."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        t0 = time.monotonic()
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            chunks.append(b)
        t = time.monotonic() - t0
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return t, int(head.split(b" ", 2)[1]), body


def server_addr(i):
    # 10.x.y.z:port, never dialled (check = none, no client)
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}:{1000 + i % 60000}"


class Lb:
    def __init__(self, lb_bin, work, text):
        self.path = os.path.join(work, "lb.ini")
        self.write(text)
        self.log = open(os.path.join(work, "lb.log"), "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([lb_bin, "-c", self.path], stdout=self.log,
                                     stderr=self.log, stdin=subprocess.DEVNULL)

    def write(self, text):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.path)       # as the README asks of a reload

    def ready(self, admin_port, timeout=300):
        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"lb exited: {open(self.log.name).read()[-2000:]}")
            try:
                return http(admin_port, "GET", "/ready", timeout=2)[1] == 200
            except OSError:
                return False
        wait(up, timeout, "lb /ready")
        return time.monotonic() - self.t0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def lb_config(admin_port, pools, fports):
    """pools: [(name, [server lines])]; fports: one frontend per pool."""
    lines = ["[global]", "workers = 1", "log_level = warn", "max_connections = 19000", "",
             "[admin]", f"listen = {HOST}:{admin_port}", ""]
    for (name, _), port in zip(pools, fports):
        lines += [f"[frontend fe_{name}]", f"listen = {HOST}:{port}", f"pool = {name}", ""]
    for name, servers in pools:
        lines += [f"[pool {name}]", "check = none", "min_servers = 0"]
        lines += [f"server = {s}" for s in servers]
        lines.append("")
    return "\n".join(lines)


def reload_times(args, lb, admin, text):
    """--reps file reloads, each of text(k) (one server's weight changed):
    the seconds each POST /reload took to answer."""
    times = []
    for k in range(args.reps):
        lb.write(text(k))
        t, status, body = http(admin, "POST", "/reload")
        if status != 200:
            raise RuntimeError(f"reload: {status} {body[:200]!r}")
        times.append(t)
    return times


# ----------------------------------------------------------------- curves

def curve_pick(args, out):
    exe = os.path.join(args.work, "pick_cost")
    subprocess.run(["cc", "-O2", "-I", os.path.join(ROOT, "balancer"),
                    os.path.join(HERE, "pick_cost.c"), os.path.join(ROOT, "build", "libbal.a"),
                    "-lm", "-o", exe], check=True)
    res = subprocess.run([exe] + [str(n) for n in args.sizes], check=True,
                         capture_output=True, text=True).stdout
    with open(os.path.join(out, "pick.csv"), "w") as f:
        f.write(res)
    log(res)


def curve_servers(args, out):
    rows = []
    for n in args.sizes:
        work = tempfile.mkdtemp(prefix="lb-scale-", dir=args.work)
        admin, fe = free_ports(2)
        servers = [f"s{i} {server_addr(i)}" for i in range(n)]
        text = lb_config(admin, [("p", servers)], [fe])
        lb = Lb(args.lb, work, text)
        try:
            start = lb.ready(admin)
            time.sleep(0.5)
            rss = rss_kb(lb.proc.pid)
            stats = [get_raw(admin, "/stats") for _ in range(args.reps)]
            metrics = [get_raw(admin, "/metrics") for _ in range(args.reps)]
            def text(k):
                servers[0] = f"s0 {server_addr(0)} weight={2 + k % 2}"
                return lb_config(admin, [("p", servers)], [fe])
            reloads = reload_times(args, lb, admin, text)
            adds = []
            for k in range(args.reps):
                body = json.dumps({"name": f"x{k}", "address": f"10.255.255.{k + 1}:80"}).encode()
                t, status, data = http(admin, "POST", "/pools/p/servers", body)
                if status != 201:
                    raise RuntimeError(f"add: {status} {data[:200]!r}")
                adds.append(t)
        finally:
            lb.stop()
        row = {"servers": n, "start_ms": start * 1000, "rss_kb": rss,
               "stats_ms": statistics.median(s[0] for s in stats) * 1000,
               "stats_bytes": len(stats[0][2]),
               "metrics_ms": statistics.median(m[0] for m in metrics) * 1000,
               "metrics_bytes": len(metrics[0][2]),
               "reload_ms": statistics.median(reloads) * 1000,
               "member_add_ms": statistics.median(adds) * 1000}
        row.update(haproxy_servers(args, n) if args.haproxy else {})
        log(str(row))
        rows.append(row)
        shutil.rmtree(work, ignore_errors=True)
    base = rows[0]
    for r in rows:      # per server, above the smallest pool's
        r["rss_bytes_per_server"] = ((r["rss_kb"] - base["rss_kb"]) * 1024 /
                                     (r["servers"] - base["servers"])
                                     if r["servers"] > base["servers"] else 0)
        if "haproxy_rss_kb" in r:
            r["haproxy_rss_bytes_per_server"] = ((r["haproxy_rss_kb"] - base["haproxy_rss_kb"]) *
                                                 1024 / (r["servers"] - base["servers"])
                                                 if r["servers"] > base["servers"] else 0)
    write_csv(os.path.join(out, "servers.csv"), rows)


def haproxy_servers(args, n):
    """HAProxy 2.6 with the same backend: start-up (exec to its stats
    socket answering), RSS, `show stat` (time, bytes)."""
    work = tempfile.mkdtemp(prefix="hap-scale-", dir=args.work)
    sock = os.path.join(work, "stats.sock")
    fe = free_port()
    lines = ["global", "  maxconn 9000", f"  stats socket {sock} mode 600 level admin",
             "defaults", "  mode tcp", "  timeout connect 5s", "  timeout client 60s",
             "  timeout server 60s", f"frontend fe", f"  bind {HOST}:{fe}", "  default_backend p",
             "backend p"]
    lines += [f"  server s{i} {server_addr(i)}" for i in range(n)]
    cfg = os.path.join(work, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write("\n".join(lines) + "\n")
    t0 = time.monotonic()
    proc = subprocess.Popen([args.haproxy_bin, "-f", cfg], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    def ask(cmd):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(60)
            s.connect(sock)
            s.sendall(cmd.encode() + b"\n")
            data = b""
            while True:
                d = s.recv(65536)
                if not d:
                    return data
                data += d
    try:
        def up():
            if proc.poll() is not None:
                raise RuntimeError("haproxy exited")
            try:
                return ask("show info") != b""
            except OSError:
                return False
        wait(up, 300, "haproxy's stats socket")
        start = time.monotonic() - t0
        time.sleep(0.5)
        rss = rss_kb(proc.pid)
        times, size = [], 0
        for _ in range(args.reps):
            t = time.monotonic()
            size = len(ask("show stat"))
            times.append(time.monotonic() - t)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    return {"haproxy_start_ms": start * 1000, "haproxy_rss_kb": rss,
            "haproxy_show_stat_ms": statistics.median(times) * 1000,
            "haproxy_show_stat_bytes": size}


def curve_pools(args, out):
    rows = []
    for n in args.pool_sizes:
        work = tempfile.mkdtemp(prefix="lb-scale-", dir=args.work)
        admin, *fports = free_ports(n + 1)
        pools = [(f"p{i}", [f"s {server_addr(i)}"]) for i in range(n)]
        lb = Lb(args.lb, work, lb_config(admin, pools, fports))
        try:
            start = lb.ready(admin)
            time.sleep(0.5)
            rss = rss_kb(lb.proc.pid)
            def text(k):
                pools[0] = ("p0", [f"s {server_addr(0)} weight={2 + k % 2}"])
                return lb_config(admin, pools, fports)
            reloads = reload_times(args, lb, admin, text)
        finally:
            lb.stop()
        row = {"pools": n, "start_ms": start * 1000, "rss_kb": rss,
               "reload_ms": statistics.median(reloads) * 1000}
        log(str(row))
        rows.append(row)
        shutil.rmtree(work, ignore_errors=True)
    write_csv(os.path.join(out, "pools.csv"), rows)


def curve_conns(args, out):
    """Idle connections through lb: a backend that accepts and holds, a
    client that opens and holds (one process each, beside lb)."""
    rows = []
    for n in args.conn_sizes:
        work = tempfile.mkdtemp(prefix="lb-scale-", dir=args.work)
        admin, fe = free_ports(2)
        backend = socket.socket()
        backend.bind((HOST, 0))
        backend.listen(4096)
        held, clients = [], []
        stop = threading.Event()

        def accept():
            backend.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(backend.accept()[0])
                except OSError:
                    pass
        th = threading.Thread(target=accept, daemon=True)
        th.start()
        lb = Lb(args.lb, work, lb_config(admin, [("p", [f"b {HOST}:{backend.getsockname()[1]}"])],
                                         [fe]))
        try:
            lb.ready(admin)
            time.sleep(0.5)
            before = rss_kb(lb.proc.pid)
            for _ in range(n):
                clients.append(socket.create_connection((HOST, fe), timeout=10))
            wait(lambda: len(held) >= n, 60, f"{n} connections at the backend")
            time.sleep(0.5)
            after = rss_kb(lb.proc.pid)
        finally:
            for c in clients:
                c.close()
            stop.set()
            th.join()
            lb.stop()
            for c in held:
                c.close()
            backend.close()
        row = {"connections": n, "rss_kb_before": before, "rss_kb_after": after,
               "rss_bytes_per_connection": (after - before) * 1024 / n}
        log(str(row))
        rows.append(row)
        shutil.rmtree(work, ignore_errors=True)
    write_csv(os.path.join(out, "conns.csv"), rows)


# ------------------------------------------------------------------ output

def write_csv(path, rows):
    keys = list(rows[0].keys())
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(fmt(r.get(k, "")) for k in keys) + "\n")


def fmt(v):
    return f"{v:.3f}" if isinstance(v, float) else str(v)


PLOTS = {
    # file, csv, x column, [(y column, title)], y label
    "pick.png": ("pick.csv", None, None, "ns per pick"),
    "servers_time.png": ("servers.csv", "servers",
                         [("start_ms", "lb start-up"), ("reload_ms", "lb file reload, one server"),
                          ("member_add_ms", "lb members reload, one server added"),
                          ("stats_ms", "lb GET /stats"), ("metrics_ms", "lb GET /metrics"),
                          ("haproxy_start_ms", "HAProxy start-up"),
                          ("haproxy_show_stat_ms", "HAProxy show stat")], "ms"),
    "servers_memory.png": ("servers.csv", "servers",
                           [("rss_bytes_per_server", "lb RSS per server"),
                            ("haproxy_rss_bytes_per_server", "HAProxy RSS per server")],
                           "bytes per server"),
    "pools.png": ("pools.csv", "pools", [("start_ms", "start-up"), ("reload_ms", "file reload")],
                  "ms"),
    "conns.png": ("conns.csv", "connections",
                  [("rss_bytes_per_connection", "lb RSS per idle connection")],
                  "bytes per connection"),
}


def plot(out):
    gp = shutil.which("gnuplot")
    if gp is None:
        log("gnuplot is not installed (apt-get install gnuplot-nox): no PNGs")
        return
    for png, (csv, x, ys, ylabel) in PLOTS.items():
        path = os.path.join(out, csv)
        if not os.path.exists(path):
            continue
        head = open(path).readline().strip().split(",")
        cmds = ["set terminal png size 900,560", f"set output '{os.path.join(out, png)}'",
                "set datafile separator ','", "set key top left", "set logscale x",
                "set logscale y", "set grid", f"set ylabel '{ylabel}'"]
        if csv == "pick.csv":
            algos = sorted({line.split(",")[0] for line in open(path).readlines()[1:]})
            cmds.append("set xlabel 'servers in the pool'")
            cmds.append("plot " + ", ".join(
                f"'< grep ^{a}, {path}' using 2:3 with linespoints title '{a}'" for a in algos))
        else:
            cmds.append(f"set xlabel '{x}'")
            series = [f"'{path}' using {head.index(x) + 1}:{head.index(y) + 1} with linespoints "
                      f"title '{t}'" for y, t in ys if y in head]
            cmds.append("plot " + ", ".join(series))
        subprocess.run([gp], input="\n".join(cmds), text=True, check=True)
        log(f"wrote {os.path.join(out, png)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lb", default=os.path.join(ROOT, "build", "lb"))
    ap.add_argument("--out", default="scale-out")
    ap.add_argument("--curves", default="pick,servers,pools,conns")
    ap.add_argument("--sizes", default="10,100,1000,10000,100000")
    ap.add_argument("--pool-sizes", default="1,10,100,300,1000")
    ap.add_argument("--conn-sizes", default="100,1000,3000,6000,9000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--haproxy-bin", default=shutil.which("haproxy") or "/usr/sbin/haproxy")
    ap.add_argument("--no-haproxy", dest="haproxy", action="store_false")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.pool_sizes = [int(s) for s in args.pool_sizes.split(",")]
    args.conn_sizes = [int(s) for s in args.conn_sizes.split(",")]
    args.haproxy = args.haproxy and os.access(args.haproxy_bin, os.X_OK)
    # the connections curve holds two descriptors a connection here too
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.makedirs(args.out, exist_ok=True)
    args.work = tempfile.mkdtemp(prefix="lb-scale-")
    try:
        for c in args.curves.split(","):
            globals()[f"curve_{c}"](args, args.out)
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    plot(args.out)


if __name__ == "__main__":
    main()
