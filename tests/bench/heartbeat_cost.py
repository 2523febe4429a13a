#!/usr/bin/env python3
"""heartbeat_cost.py - what heartbeats cost lb: 10,000 servers each reporting
every second, and whether they delay the data path.

A benchmark run by hand (not a ctest test). It:

  1. writes an lb config with a pool `hb` of N heartbeat-only servers
     (`check = none`, `heartbeat_ttl = 3s`; their addresses are never
     connected to) and a pool `web` of one real backend (hc_backend.py,
     one port), `[global] workers = 1`, log_level info;
  2. starts build/lb and a client that sends one request per connection
     through `web`, one after the other, timing each (the data path);
  3. runs four phases:
     - "quiet", --phase seconds with no heartbeat (shorter than the TTL:
       lb gives each server one TTL from start);
     - "heartbeats", --duration seconds: K sender processes (--senders),
       each with one pipelined keep-alive connection to the admin port,
       together POSTing /pools/hb/servers/sN/heartbeat for every server
       once per --period (default 1 s: 10,000 heartbeats per second);
     - "cpu hogs", the control: --duration seconds of K processes that
       only spin, no heartbeat (every server expires: a dead agent fleet);
     - "recovery", --duration seconds of heartbeats again: every server
       comes back at once;
  4. reports per phase: heartbeats per second answered 200, how far the
     senders fell behind their period, the CPU of lb's admin thread
     (`lb-admin`), main thread and worker in % of one core (utime+stime
     from /proc/PID/task/TID/stat), the data path's request latency p50 /
     p99 / max; and the server_down and server_up events.

With --ephemeral the pool `hb` has no server line: its servers are
ephemeral instances (`ephemeral_delete_after = 6s`) that register themselves
with their first heartbeat, which carries their address (201), and send it
with every heartbeat as Nacos' clients do; in the control phase they expire
and are deleted, and in the recovery phase each registers again.

Usage:
  cmake -S . -B build >/dev/null && cmake --build build -j2 --target lb
  python3 tests/bench/heartbeat_cost.py                 # 10,000 servers, 1/s, 10 s
  python3 tests/bench/heartbeat_cost.py --servers 2000 --phase 5 --duration 20
  python3 tests/bench/heartbeat_cost.py --servers 1000 --ephemeral

Options: --lb PATH [build/lb], --servers N [10000], --period S [1.0],
--senders K [2], --duration S [10] (each later phase), --phase S [1.5]
(the quiet phase), --ephemeral.
"""

import argparse
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402
from admin_client import Pipeline  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
HOST = "127.0.0.1"


def thread_ticks(pid):
    """{comm: utime+stime ticks} summed over the threads of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            out[comm] = out.get(comm, 0) + int(rest[11]) + int(rest[12])
        except (OSError, ValueError, IndexError):
            pass
    return out


def spinner(duration, result):
    """The control: a process that only burns CPU."""
    t_end = time.monotonic() + duration
    while time.monotonic() < t_end:
        pass
    result.put((0, 0, 0.0))


def sender(port, items, period, duration, conns, result):
    """One process: every period, one heartbeat for each of items (path,
    body), over conns pipelined connections at once (an admin connection
    answers its requests one after the other: a registration, answered
    when the members reload that adds it ends, holds up the ones behind
    it, so instances that each have a connection of their own are
    registered together by one reload); a registration's 201 counts as
    answered."""
    import threading
    pipes = [Pipeline(port) for _ in range(conns)]
    counts = [[0, 0] for _ in range(conns)]
    late = 0.0

    def one(k):
        for status, _ in pipes[k].post_many(items[k::conns], batch=128):
            counts[k][status not in (200, 201)] += 1

    t_end = time.monotonic() + duration
    while time.monotonic() < t_end:
        t = time.monotonic()
        threads = [threading.Thread(target=one, args=(k,)) for k in range(conns)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        spent = time.monotonic() - t
        late = max(late, spent - period)
        if spent < period:
            time.sleep(period - spent)
    for p in pipes:
        p.close()
    result.put((sum(c[0] for c in counts), sum(c[1] for c in counts), late))


def client(port, stop, out):
    """Sequential requests through lb; out: latencies in ms."""
    while not stop.is_set():
        t = time.monotonic()
        try:
            with socket.create_connection((HOST, port), timeout=5) as s:
                s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n")
                while s.recv(65536):
                    pass
        except OSError:
            out.append(float("inf"))
            continue
        out.append((time.monotonic() - t) * 1000)


def quantile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lb", default=os.path.join(HERE, "..", "..", "build", "lb"))
    ap.add_argument("--servers", type=int, default=10000)
    ap.add_argument("--period", type=float, default=1.0)
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--phase", type=float, default=1.5)
    ap.add_argument("--ephemeral", action="store_true")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="lb-hb-bench-")
    backend = harness.HcBackend(count=1)
    admin, fe = harness.free_port(), harness.free_port()
    lines = ["[global]", "workers = 1", "log_level = info", "", "[admin]",
             f"listen = {HOST}:{admin}", "", "[frontend web]", f"listen = {HOST}:{fe}",
             "pool = web", "", "[pool web]", f"server = w {backend.addr(backend.ports[0])}",
             "check = none", "", "[pool hb]", "check = none", "heartbeat_ttl = 3s",
             "min_servers = 0"]
    addrs = [f"127.0.{1 + i // 60000}.{1 + (i // 250) % 250}:{1 + i % 60000}"
             for i in range(args.servers)]
    if args.ephemeral:
        lines.append("ephemeral_delete_after = 6s")
    else:
        lines += [f"server = s{i} {a}" for i, a in enumerate(addrs)]
    conf = os.path.join(work, "lb.ini")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    log = open(os.path.join(work, "lb.log"), "wb")
    lb = subprocess.Popen([args.lb, "-c", conf], stdout=log, stderr=log)
    try:
        harness.wait_for(lambda: b"event=ready" in open(log.name, "rb").read(), 30, "lb ready")
        import threading
        stop = threading.Event()
        lat = []
        th = threading.Thread(target=client, args=(fe, stop, lat), daemon=True)
        th.start()
        rows = []

        def window(name, secs, senders_args=None):
            procs, q = [], multiprocessing.Queue()
            if senders_args == "spin":
                procs = [multiprocessing.Process(target=spinner, args=(secs, q))
                         for _ in range(args.senders)]
            elif senders_args:
                procs = [multiprocessing.Process(target=sender, args=a + (q,)) for a in
                         senders_args]
            for p in procs:
                p.start()
            n0, t0, c0 = len(lat), time.monotonic(), thread_ticks(lb.pid)
            time.sleep(secs)
            n1, t1, c1 = len(lat), time.monotonic(), thread_ticks(lb.pid)
            results = [q.get(timeout=60) for _ in procs]
            for p in procs:
                p.join(timeout=60)
            el = t1 - t0
            cpu = {k: 100.0 * (c1.get(k, 0) - c0.get(k, 0)) / CLK_TCK / el for k in c1}
            ok = sum(r[0] for r in results)
            rows.append((name, ok / el, sum(r[1] for r in results),
                         max((r[2] for r in results), default=0), cpu.get("lb-admin", 0),
                         cpu.get("lb", 0), cpu.get("lb-worker", 0), lat[n0:n1]))

        window("quiet", args.phase)
        items = [(f"/pools/hb/servers/s{i}/heartbeat",
                  f'{{"address":"{a}"}}'.encode() if args.ephemeral else b"")
                 for i, a in enumerate(addrs)]
        per = [items[k::args.senders] for k in range(args.senders)]
        conns = 32 if args.ephemeral else 1
        senders = [(admin, p, args.period, args.duration, conns) for p in per]
        window("heartbeats", args.duration, senders)
        window("cpu hogs (control)", args.duration, "spin")
        window("recovery", args.duration, senders)
        stop.set()
        th.join(timeout=10)
        text = open(log.name, "rb").read()
        downs, ups = text.count(b"event=server_down"), text.count(b"event=server_up")
    finally:
        lb.terminate()
        lb.wait(timeout=20)
        backend.stop()
        log.close()
    shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.servers} heartbeat-only {'ephemeral ' if args.ephemeral else ''}servers, "
          f"every {args.period:g} s, "
          f"{args.senders} pipelined senders; lb workers = 1\n")
    print("| phase | heartbeats/s answered | refused | senders behind (max s) | lb-admin % core "
          "| main % core | worker % core | data path requests | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rate, bad, late, cadm, cmain, cwork, l in rows:
        print(f"| {name} | {rate:,.0f} | {bad} | {late:.2f} | {cadm:.1f} | {cmain:.1f} | "
              f"{cwork:.1f} | {len(l)} | {quantile(l, 0.5):.2f} | {quantile(l, 0.99):.2f} | "
              f"{max(l) if l else float('nan'):.2f} |")
    print(f"\nserver_down events: {downs} (the servers expire in the control phase only), "
          f"server_up: {ups}")
    if rows[1][1] > 0:
        print(f"admin thread per heartbeat: {rows[1][4] / 100 * 1e6 / rows[1][1]:.1f} µs")


if __name__ == "__main__":
    main()
