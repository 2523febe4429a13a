#!/usr/bin/env python3
"""halfcore.py - requests and connections per second of lb and HAProxy when
each has half a core, so that the proxy, not the load, is what runs out
(issue 31, "The bench harness").

A benchmark run by hand (not a ctest test). Python 3 stdlib only; needs
haproxy, nginx, wrk, ab and taskset (../shared/bench/setup.sh installs them)
and root (a cgroup).

Why: in ../shared/bench the proxy has CPU 0 to itself while wrk or ab, the
nginx backends and the driver share CPU 1. When the proxy needs less than a
core, CPU 1 is what saturates, and the rates (req/s, conn/s) are the load
side's, the same for every fast proxy; only CPU per operation tells the
proxies apart. Here each proxy runs in a cgroup of its own that may use
--quota percent of one CPU (cpu.max on cgroup v2, cpu.cfs_quota_us on v1),
still pinned to CPU 0: at 50% the proxy is the bottleneck, and the rate is
its own.

Method (bench.py's):
  - One nginx backend (worker_processes 2, pinned to the load CPU) with two
    listeners; `location = /` returns 200 "ok\\n".
  - Proxies: haproxy (mode tcp, nbthread 2, balance roundrobin, check inter
    2s) and lb (workers = 2, balance = roundrobin, check = tcp,
    check_interval = 2s), the settings of bench.py. --proxies may add
    relay-epoll and relay-uring: ./relay_proto.c, a bare relay with 2
    threads and no checks, compiled here with cc and liburing, to measure
    what io_uring saves against epoll with nothing else in the way.
  - Workloads: keep-alive requests (`wrk -t1 -c64 --latency` on /, --secs
    seconds): req/s, p99, CPU us per request; new connections (`ab -c 32 -n
    N` on /, no keep-alive): conn/s, CPU us per connection.
  - Each trial starts a fresh proxy in the cgroup, waits until it answers,
    runs the workload and stops it; proxies take turns (A B A B ...) for
    --reps repetitions; the table gives the median, min..max and lb's ratio
    to HAProxy. CPU is the proxy's, from /proc in nanoseconds (schedstat),
    which the quota bounds at --quota percent of the trial's time. The
    quota comes in periods of 10 ms: a throttled proxy waits up to 5 ms at
    50%, which shows in both proxies' p99 alike.
  - The cgroup is created at the start and removed at the end, by its name
    (lb-bench-halfcore); every process is stopped by pid.

Usage:
  python3 tests/bench/halfcore.py                 # 5 repetitions, 50%, about 4 minutes
  python3 tests/bench/halfcore.py --quota 100 --reps 3 --secs 5

Options: --lb-bin PATH [build/lb], --reps N [5], --secs S [5], --ab-n N
[20000], --quota PERCENT [50], --proxies LIST [haproxy,lb; also
relay-epoll, relay-uring], --port-base P [23300], --proxy-cpu N [0],
--load-cpu N [1].
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchproc import (HOST, Cgroup, Failure, Proc, cpu_ns, fmt, free_ports, haproxy_argv,  # noqa: E402
                       http_ok, listening, log, nginx_conf, prepare_driver)

CGROUP = "lb-bench-halfcore"

NGINX_HTTP = """\
    access_log off;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    server {{
        listen {host}:{p1} backlog=4096;
        listen {host}:{p2} backlog=4096;
        location = / {{ return 200 "ok\\n"; }}
    }}
"""


def lb_argv(lb_bin, d, port, servers, maxconn):
    lines = ["[global]", "workers = 2", f"max_connections = {maxconn}",
             "[frontend bench]", f"listen = {HOST}:{port}", "pool = bench",
             "[pool bench]", "balance = roundrobin", "check = tcp", "check_interval = 2s"]
    lines += [f"server = b{i} {HOST}:{p}" for i, p in enumerate(servers, 1)]
    conf = os.path.join(d, "lb.ini")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return [lb_bin, "-c", conf]


def run(argv, timeout):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise Failure(f"{argv[0]} exited with {r.returncode}: {r.stderr[-400:]}")
    return r.stdout


def keepalive(port, secs):
    out = run(["wrk", "-t1", "-c64", f"-d{secs}s", "--latency", f"http://{HOST}:{port}/"],
              secs + 30)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    done = re.search(r"(\d+) requests in", out)
    if not (m and p99 and done):
        raise Failure(f"wrk output not understood:\n{out}")
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[p99.group(2)]
    return {"rate": float(m.group(1)), "p99_ms": float(p99.group(1)) * scale,
            "ops": int(done.group(1))}


def newconn(port, n):
    out = run(["ab", "-q", "-c", "32", "-n", str(n), f"http://{HOST}:{port}/"], 300)
    rate = re.search(r"Requests per second:\s+([\d.]+)", out)
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    p99 = re.search(r"\n\s*99%\s+(\d+)", out)
    if not (rate and failed and p99):
        raise Failure(f"ab output not understood:\n{out}")
    if int(failed.group(1)) != 0:
        raise Failure(f"ab: {failed.group(1)} failed requests")
    return {"rate": float(rate.group(1)), "p99_ms": float(p99.group(1)), "ops": n}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lb-bin", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "build", "lb"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--secs", type=int, default=5)
    ap.add_argument("--ab-n", type=int, default=20000)
    ap.add_argument("--quota", type=int, default=50, help="percent of one CPU")
    ap.add_argument("--proxies", default="haproxy,lb",
                    help="haproxy, lb, relay-epoll, relay-uring (comma-separated)")
    ap.add_argument("--port-base", type=int, default=23300)
    ap.add_argument("--proxy-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    args = ap.parse_args()
    if not 1 <= args.quota <= 100:
        sys.exit(f"--quota {args.quota}: a percent of one CPU, 1 to 100")
    if not os.access(args.lb_bin, os.X_OK):
        sys.exit(f"--lb-bin {args.lb_bin}: not an executable (cmake --build build first)")
    proxies = args.proxies.split(",")
    for name in proxies:
        if name not in ("haproxy", "lb", "relay-epoll", "relay-uring"):
            sys.exit(f"--proxies: unknown {name!r}")
    if "haproxy" not in proxies:
        sys.exit("--proxies: haproxy is the reference every ratio is to")
    prepare_driver(["haproxy", "nginx", "wrk", "ab", "taskset", "cc"], args.proxy_cpu,
                   args.load_cpu)
    work = tempfile.mkdtemp(prefix="lb-halfcore-")
    relay = os.path.join(work, "relay_proto")
    if any(n.startswith("relay-") for n in proxies):
        r = subprocess.run(["cc", "-O2", "-Wall", "-o", relay,
                            os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "relay_proto.c"), "-luring", "-lpthread"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"cc relay_proto.c failed (liburing-dev installed?):\n{r.stderr[-1500:]}")
    ports = free_ports(args.port_base, 3)
    servers, port = ports[0:2], ports[2]
    maxconn = min(100000, (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1000) // 3)
    cg = Cgroup(CGROUP, args.quota)
    backend = None
    raw = {}    # (proxy, workload) -> [{"rate", "p99_ms", "cpu_us"}]
    try:
        ndir = os.path.join(work, "nginx")
        os.makedirs(ndir)
        with open(os.path.join(ndir, "nginx.conf"), "w") as f:
            f.write(nginx_conf(ndir, 65536, NGINX_HTTP.format(host=HOST, p1=servers[0],
                                                              p2=servers[1])))
        backend = Proc("nginx", ["nginx", "-p", ndir, "-e", ndir + "/error.log", "-c",
                                 os.path.join(ndir, "nginx.conf")], args.load_cpu, work)
        for p in servers:
            backend.wait_ready(lambda p=p: http_ok(p))
        log(f"proxies pinned to CPU {args.proxy_cpu} in a cgroup of {args.quota}% of a CPU "
            f"({'v2' if cg.v2 else 'v1'}), load on CPU {args.load_cpu}; {args.reps} reps, "
            f"wrk {args.secs} s, ab -n {args.ab_n}")
        for rep in range(args.reps):
            for workload in ("keepalive", "newconn"):
                for name in proxies:
                    for _ in range(100):
                        if not listening(port):
                            break
                        time.sleep(0.05)
                    d = tempfile.mkdtemp(prefix=name + "-", dir=work)
                    if name == "haproxy":
                        argv = haproxy_argv(d, port, servers, maxconn)
                    elif name == "lb":
                        argv = lb_argv(args.lb_bin, d, port, servers, maxconn)
                    else:
                        argv = [relay, name.split("-")[1], str(port), "2"] + [str(p) for p in servers]
                    proxy = Proc(name, argv, args.proxy_cpu, d)
                    try:
                        cg.add(proxy.pid)
                        proxy.wait_ready(lambda: http_ok(port))
                        c0 = cpu_ns(proxy.pids())[0]
                        r = (keepalive(port, args.secs) if workload == "keepalive"
                             else newconn(port, args.ab_n))
                        r["cpu_us"] = (cpu_ns(proxy.pids())[0] - c0) / 1e3 / r["ops"]
                    finally:
                        proxy.stop()
                    raw.setdefault((name, workload), []).append(r)
                    log(f"  rep {rep + 1} {workload:9} {name:11} {r['rate']:9.0f}/s "
                        f"p99 {r['p99_ms']:.2f} ms, {r['cpu_us']:.1f} us CPU an operation")
    finally:
        if backend:
            backend.stop()
        cg.remove()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nproxy in {args.quota}% of a CPU, median (min..max) of {args.reps}; "
          f"ratios to haproxy of the medians")
    others = [n for n in proxies if n != "haproxy"]
    print("| workload | figure | " + " | ".join(proxies) + " | "
          + " | ".join(f"{n} / haproxy" for n in others) + " |")
    print("|---" * (2 + len(proxies) + len(others)) + "|")
    for workload, what in (("keepalive", "keep-alive requests"), ("newconn", "new connections")):
        for key, label in (("rate", "per second"), ("p99_ms", "p99 (ms)"),
                           ("cpu_us", "CPU µs an operation")):
            cells, meds = [], {}
            for name in proxies:
                vals = [r[key] for r in raw[(name, workload)]]
                meds[name] = statistics.median(vals)
                cells.append(f"{fmt(meds[name])} ({fmt(min(vals))}..{fmt(max(vals))})")
            base = meds.get("haproxy")
            ratios = [f"{meds[n] / base:.3f}×" if base else "-" for n in others]
            print(f"| {what} | {label} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        sys.exit(f"halfcore.py: {e}")
