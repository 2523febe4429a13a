#!/usr/bin/env python3
"""health_cost.py - what lb's health module costs at 10,000 servers, against HAProxy.

A benchmark run by hand (not a ctest test). For each `[health] threads`
value (and each log level) it:

  1. starts 1..4 backend processes (this same file, `--backend-child`) that
     together listen on N ports of 127.0.0.1 (below the kernel's ephemeral
     range, so lb's own connect()s never compete for them) and answer every
     request with `HTTP/1.1 200 OK`, Content-Length 0, Connection: close,
     then close. They record, per port, the kernel's arrival time of each
     request (SO_TIMESTAMPNS, turned into CLOCK_MONOTONIC) and the time they
     got round to it, so backend queueing shows apart from lb's own timing;
  2. writes an lb config with one pool of N servers, `check = http`,
     `check_interval = 1s`, `check_timeout = 1s` (rise/fall defaults), one
     frontend, `[global] workers = 1` and the chosen `log_level`;
  3. starts build/lb, waits for `event=ready`, lets it run --duration s,
     and measures over the steady window (from ready + --warmup s to the
     end): the CPU of the `lb-health` threads (utime+stime of
     /proc/PID/task/TID/stat) and of the whole lb process in % of one core,
     the actual interval between consecutive checks of each server as the
     backend saw them, lb's lag_ms / duration_ms (debug runs only: one
     `event=check` line per probe), failed checks and server_down events;
  4. stops everything it started and prints markdown tables;
  5. with --haproxy (the default when /usr/sbin/haproxy exists), does the
     same for HAProxy once per threads value, on fresh backends of the same
     layout: `nbthread` = that value, `maxconn 1000`, no `log`, the stats
     socket (read 1 s before the window and just after it, for its failed
     checks: chkfail), `spread-checks 0` (HAProxy's default: no jitter), `defaults
     mode tcp`, `timeout connect 1s`, `timeout check 1s`, `timeout
     client/server 1m`, one backend with `option httpchk GET /` and N
     `server sN 127.0.0.1:PORT check inter 1s rise 2 fall 3` (lb's rise and
     fall defaults) and one frontend. It runs `haproxy -db -f cfg`, counts
     as ready when the backends have seen its first check and measures the
     same window (ready + --warmup to ready + --duration). HAProxy runs its
     checks on its worker threads, so its health CPU is the whole process;
     lb's is its `lb-health` threads, and its whole process is shown too.
     Checks are counted for both from the backends' arrivals in the window,
     and the last table gives lb/HAProxy CPU per check.

Usage:
  cmake -S . -B build >/dev/null && cmake --build build -j2 --target lb
  python3 tests/bench/health_cost.py                      # threads 1 and 2, debug and info
  python3 tests/bench/health_cost.py --threads 1,2 --log-levels debug --duration 20
  python3 tests/bench/health_cost.py --servers 2000 --backends 1 --keep

With --check-reuse, each lb run (threads x log level) is followed by one
with `check_reuse = on` in its pool, on backends that keep every connection
open and answer each request on it (`HTTP/1.1 200 OK`, Content-Length 0, no
Connection: close); it shows as "LEVEL + reuse" in the tables, and the
comparison table gets a column of new connections per check. HAProxy runs
as without it (on the closing backends: it opens a connection per check
either way). Such a backend holds a listener and a kept connection per
server, so --backends must keep that under the fd limit (2 at 10,000).

Options (defaults in brackets): --lb PATH [build/lb], --servers N [10000],
--threads LIST [1,2], --log-levels LIST [debug,info], --duration S [18],
--warmup S [3], --backends K [2], --port-base P [20000], --pin-lb CPUS and
--pin-backends CPUS (sched_setaffinity, e.g. 0 and 1, to keep lb and the
backends off each other's CPU; --pin-lb pins HAProxy too), --haproxy /
--no-haproxy [on if /usr/sbin/haproxy exists], --haproxy-bin PATH
[/usr/sbin/haproxy], --json FILE (all numbers, per run), --keep (keep the
work dir: configs, lb and HAProxy logs, timings), --check-reuse (see above).

Notes:
  - The fd hard limit here is 20000 and cannot be raised; every process
    raises its soft limit to the hard one. A backend keeps its listeners
    plus at most a handful of accepted sockets (TCP_DEFER_ACCEPT: a
    connection is accepted once its request is in, answered and closed in
    the same pass), so one process could hold 10,000 ports; more processes
    only spread the Python CPU. lb holds one socket per probe in flight,
    and so does HAProxy (its fd budget: 2 * maxconn + one per checked
    server + a few, Maxsock 12025 here).
  - Fairness: with `threads = 1` lb runs one health thread beside its
    worker, main and admin threads, and only the health thread does the
    checks; HAProxy with `nbthread 1` does its checks (and everything else,
    idle here: no clients) on its single thread. So lb's health threads
    against HAProxy's whole process is the like-for-like figure; lb's whole
    process is the conservative one. Both are pinned alike (--pin-lb).
  - The debug log (10k lines/s) is written by lb's main thread, not by the
    health threads; both levels are measured so its cost shows separately.
    Interval and failure figures come from the backend and do not need it.
  - Interval stats use intervals whose both ends fall in the steady window.
    The "arrival" time is the kernel timestamp of the request's segment;
    "queue" is how long it then waited for the Python backend.
  - The machine may be shared: "other procs CPU" is the CPU time of
    processes that are not part of this benchmark during the window
    (machine busy time minus irq/softirq minus lb, backends and this
    script), in % of one core; "softirq" is mostly loopback TCP.
"""

import argparse
import array
import datetime
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
# --check-reuse: the backend keeps the connection and answers every request on it
RESPONSE_KA = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
SO_TIMESTAMPNS = 35        # SO_TIMESTAMPNS_OLD on Linux (timespec of longs)
CLK_TCK = os.sysconf("SC_CLK_TCK")
HAPROXY = "/usr/sbin/haproxy"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# ================================================================ backend

def backend_child(port_lo, port_hi, count, out_path, keep_alive=False):
    """Listen on `count` ports in [port_lo, port_hi); print {"ports": [...]}
    on stdout; answer until "dump" (write the timings to out_path, exit) or
    EOF (exit) on stdin; "count" prints the number of requests so far.
    keep_alive (--check-reuse): answer RESPONSE_KA and keep the connection,
    answering every further request on it until the client closes it."""
    soft, hard = raise_fd_limit()
    lsocks, ports = [], []
    port = port_lo
    while len(ports) < count and port < port_hi:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((HOST, port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, 1)
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            s.listen(128)
            s.setblocking(False)
        except OSError:
            s.close()
            port += 1
            continue
        lsocks.append(s)
        ports.append(port)
        port += 1
    sys.stdout.write(json.dumps({"ports": ports, "fd_limit": soft}) + "\n")
    sys.stdout.flush()

    ep = select.epoll(len(lsocks) + 16)
    fd2idx = {}
    for i, s in enumerate(lsocks):
        fd2idx[s.fileno()] = i
        ep.register(s.fileno(), select.EPOLLIN)
    stdin_fd = sys.stdin.fileno()
    ep.register(stdin_fd, select.EPOLLIN)

    # realtime -> monotonic offset (kernel stamps are CLOCK_REALTIME)
    def rt_offset():
        best = None
        for _ in range(5):
            a = time.monotonic()
            r = time.time()
            b = time.monotonic()
            if best is None or b - a < best[0]:
                best = (b - a, r - (a + b) / 2)
        return best[1]

    off0 = rt_offset()
    idx_a = array.array("i")        # port index of each request
    arr_a = array.array("d")        # kernel arrival, monotonic seconds
    proc_a = array.array("d")       # when the backend handled it
    empty_a = array.array("d")      # connections closed before any request
    accept_a = array.array("d")     # when each connection was accepted
    pending = {}                    # fd -> (sock, idx, bytes) partial requests
    kept = {}                       # keep_alive: fd -> [sock, idx, bytes] answered, kept open
    busy = 0.0
    busy_marks = array.array("d")   # (mono, cumulative busy) about every 0.5 s
    next_mark = time.monotonic()
    stats = {"accepts": 0, "requests": 0, "partial": 0, "empty": 0,
             "errors": 0, "max_batch": 0, "no_stamp": 0, "max_pending": 0,
             "kept_closed": 0, "max_kept": 0}
    monotonic = time.monotonic
    MSG_DONTWAIT = socket.MSG_DONTWAIT
    unpack = struct.unpack

    def record(idx, anc, now):
        stamp = None
        for lvl, typ, cdata in anc:
            if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(cdata) >= 16:
                sec, nsec = unpack("qq", cdata[:16])
                stamp = sec + nsec * 1e-9 - off0
        if stamp is None:
            stats["no_stamp"] += 1
            stamp = now
        idx_a.append(idx)
        arr_a.append(stamp)
        proc_a.append(now)
        stats["requests"] += 1

    def finish(sock, idx, data, anc, now):
        record(idx, anc, now)
        if keep_alive:
            try:
                sock.send(RESPONSE_KA, MSG_DONTWAIT)
            except OSError:
                stats["errors"] += 1
                sock.close()
                return
            sock.setblocking(False)
            kept[sock.fileno()] = [sock, idx, b""]
            ep.register(sock.fileno(), select.EPOLLIN)
            if len(kept) > stats["max_kept"]:
                stats["max_kept"] = len(kept)
            return
        try:
            sock.send(RESPONSE, MSG_DONTWAIT)
        except OSError:
            stats["errors"] += 1
        sock.close()

    while True:
        events = ep.poll(1.0)
        t0 = monotonic()
        if len(events) > stats["max_batch"]:
            stats["max_batch"] = len(events)
        for fd, ev in events:
            idx = fd2idx.get(fd)
            if idx is not None:
                ls = lsocks[idx]
                while True:
                    try:
                        c, _ = ls.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        stats["errors"] += 1
                        break
                    stats["accepts"] += 1
                    accept_a.append(monotonic())
                    try:
                        data, anc, _, _ = c.recvmsg(4096, 64, MSG_DONTWAIT)
                    except BlockingIOError:
                        # accepted before its request (defer-accept timeout)
                        c.setblocking(False)
                        pending[c.fileno()] = (c, idx, b"", [])
                        ep.register(c.fileno(), select.EPOLLIN)
                        stats["partial"] += 1
                        if len(pending) > stats["max_pending"]:
                            stats["max_pending"] = len(pending)
                        continue
                    except OSError:
                        stats["errors"] += 1
                        c.close()
                        continue
                    if not data:
                        stats["empty"] += 1
                        empty_a.append(monotonic())
                        c.close()
                    elif data.endswith(b"\r\n\r\n"):
                        finish(c, idx, data, anc, monotonic())
                    else:
                        c.setblocking(False)
                        pending[c.fileno()] = (c, idx, data, anc)
                        ep.register(c.fileno(), select.EPOLLIN)
                        stats["partial"] += 1
                        if len(pending) > stats["max_pending"]:
                            stats["max_pending"] = len(pending)
            elif fd == stdin_fd:
                line = os.read(stdin_fd, 4096)
                if not line:
                    return 0
                if b"count" in line:
                    os.write(1, b"%d\n" % stats["requests"])
                elif b"dump" in line:
                    off1 = rt_offset()
                    with open(out_path, "wb") as f:
                        meta = dict(stats, ports=ports, busy_s=busy,
                                    rt_offset_drift_us=(off1 - off0) * 1e6,
                                    n=len(idx_a), marks=len(busy_marks),
                                    n_accepts=len(accept_a), keep_alive=keep_alive,
                                    empty_times=list(empty_a))
                        head = json.dumps(meta).encode()
                        f.write(struct.pack("<I", len(head)) + head)
                        f.write(idx_a.tobytes())
                        f.write(arr_a.tobytes())
                        f.write(proc_a.tobytes())
                        f.write(busy_marks.tobytes())
                        f.write(accept_a.tobytes())
                    os.write(1, b"dumped\n")
                    return 0
            elif fd in kept:
                ent = kept[fd]
                try:
                    more, anc2, _, _ = ent[0].recvmsg(4096, 64, MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    more = None
                    stats["errors"] += 1
                if not more:
                    # the client closed (lb after a failed check or at exit)
                    if more is not None:
                        stats["kept_closed"] += 1
                    del kept[fd]
                    ep.unregister(fd)
                    ent[0].close()
                    continue
                ent[2] += more
                if ent[2].endswith(b"\r\n\r\n"):
                    ent[2] = b""
                    record(ent[1], anc2, monotonic())
                    try:
                        ent[0].send(RESPONSE_KA, MSG_DONTWAIT)
                    except OSError:
                        stats["errors"] += 1
            else:
                c, idx, data, anc = pending.pop(fd)
                ep.unregister(fd)
                try:
                    more, anc2, _, _ = c.recvmsg(4096, 64)
                except BlockingIOError:
                    pending[fd] = (c, idx, data, anc)
                    ep.register(fd, select.EPOLLIN)
                    continue
                except OSError:
                    stats["errors"] += 1
                    c.close()
                    continue
                if not more:
                    stats["empty"] += 1
                    empty_a.append(monotonic())
                    c.close()
                    continue
                data += more
                if data.endswith(b"\r\n\r\n"):
                    finish(c, idx, data, anc or anc2, monotonic())
                else:
                    pending[fd] = (c, idx, data, anc or anc2)
                    ep.register(fd, select.EPOLLIN)
        t1 = monotonic()
        if events:
            busy += t1 - t0
        if t1 >= next_mark:
            busy_marks.append(t1)
            busy_marks.append(busy)
            next_mark = t1 + 0.5


def read_dump(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hl,) = struct.unpack("<I", blob[:4])
    meta = json.loads(blob[4:4 + hl])
    pos = 4 + hl
    n = meta["n"]
    idx = array.array("i")
    idx.frombytes(blob[pos:pos + 4 * n])
    pos += 4 * n
    arr = array.array("d")
    arr.frombytes(blob[pos:pos + 8 * n])
    pos += 8 * n
    proc = array.array("d")
    proc.frombytes(blob[pos:pos + 8 * n])
    pos += 8 * n
    marks = array.array("d")
    marks.frombytes(blob[pos:pos + 8 * meta["marks"]])
    pos += 8 * meta["marks"]
    acc = array.array("d")
    acc.frombytes(blob[pos:pos + 8 * meta.get("n_accepts", 0)])
    meta["accept_times"] = acc
    return meta, idx, arr, proc, marks


class Backend:
    def __init__(self, i, port_lo, port_hi, count, workdir, cpus=None, keep_alive=False):
        self.out = os.path.join(workdir, "backend%d.bin" % i)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--backend-child",
             str(port_lo), str(port_hi), str(count), self.out]
            + (["keep-alive"] if keep_alive else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("backend %d died at start" % i)
        info = json.loads(line)
        self.ports = info["ports"]
        if len(self.ports) < count:
            raise RuntimeError("backend %d: only %d of %d ports free in %d..%d"
                               % (i, len(self.ports), count, port_lo, port_hi))

    def count(self):
        self.proc.stdin.write(b"count\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def dump(self):
        self.proc.stdin.write(b"dump\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        self.proc.wait(timeout=30)
        if line.strip() != b"dumped":
            raise RuntimeError("backend did not dump")
        return read_dump(self.out)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ================================================================ sampling

def proc_ticks(path):
    """utime+stime of a /proc/.../stat file, in clock ticks."""
    with open(path) as f:
        s = f.read()
    rest = s[s.rindex(")") + 2:].split()
    return int(rest[11]) + int(rest[12])


def thread_ticks(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                comm = f.read().strip()
            out[int(tid)] = (comm, proc_ticks("/proc/%d/task/%s/stat" % (pid, tid)))
        except (OSError, ValueError):
            pass
    return out


def cpu_stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]), idle, v[5] + v[6]       # user..steal, idle, irq+softirq


def net_counters():
    out = {}
    try:
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
        for i in range(0, len(lines) - 1, 2):
            keys = lines[i].split()
            vals = lines[i + 1].split()
            for k, v in zip(keys[1:], vals[1:]):
                out[keys[0] + k] = int(v)
    except OSError:
        pass
    return out


def sample(pid, backend_pids):
    """pid: the proxy under test (lb or HAProxy)."""
    tot, idle, irq = cpu_stat()
    return {
        "mono": time.monotonic(),
        "wall": time.time(),
        "threads": thread_ticks(pid),
        "proc": proc_ticks("/proc/%d/stat" % pid),
        "backends": [proc_ticks("/proc/%d/stat" % p) for p in backend_pids],
        "self": proc_ticks("/proc/self/stat"),
        "cpu_total": tot,
        "cpu_idle": idle,
        "cpu_irq": irq,
    }


def pct(ticks, secs):
    return 100.0 * ticks / CLK_TCK / secs if secs > 0 else 0.0


# ================================================================ stats

def quantiles(xs):
    if not xs:
        return None
    xs = sorted(xs)
    n = len(xs)

    def q(p):
        return xs[min(n - 1, int(p * (n - 1) + 0.5))]
    return {"n": n, "min": xs[0], "p50": q(0.5), "p99": q(0.99),
            "p999": q(0.999), "max": xs[-1], "mean": sum(xs) / n}


TS_RE = re.compile(r"^ts=(\S+) level=(\w+) event=(\w+)")
CHECK_RE = re.compile(r"server=(\S+) result=(\w+) .*duration_ms=([\d.]+) lag_ms=([\d.]+)")


def parse_ts(ts):
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def parse_lb_log(path, wall0, wall1, timeout_ms=1000.0):
    """Times are wall clock (lb's ts); failed_at_s is seconds from the start
    of the steady window (negative: during the warm-up)."""
    r = {"checks": 0, "checks_window": 0, "failed": 0, "server_down": 0,
         "server_up": 0, "warn_error_events": {}, "failed_samples": [],
         "down_samples": [], "failed_details": {}, "failed_at_s": {},
         "passed_after_timeout": 0, "server_down_at_s": {}, "server_up_at_s": {}}
    lags, durs = [], []
    starts = {}
    per_sec_lag = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = TS_RE.match(line)
            if m is None:
                continue
            level, event = m.group(2), m.group(3)
            if event == "check":
                r["checks"] += 1
                c = CHECK_RE.search(line)
                if c is None:
                    continue
                t = parse_ts(m.group(1))
                if c.group(2) != "passed":
                    r["failed"] += 1
                    det = line[line.index("detail=") + 7:line.index(" duration_ms")]
                    r["failed_details"][det] = r["failed_details"].get(det, 0) + 1
                    sec = "%d" % ((t - wall0) // 1)
                    r["failed_at_s"][sec] = r["failed_at_s"].get(sec, 0) + 1
                    if len(r["failed_samples"]) < 5:
                        r["failed_samples"].append(line.strip())
                dur = float(c.group(3))
                # the probe started duration_ms before its result was logged
                starts.setdefault(c.group(1), []).append(t - dur / 1000.0)
                if wall0 <= t <= wall1:
                    r["checks_window"] += 1
                    lag = float(c.group(4))
                    lags.append(lag)
                    durs.append(dur)
                    if dur > timeout_ms:
                        r["passed_after_timeout"] += c.group(2) == "passed"
                    s = int(t - wall0)
                    if lag > per_sec_lag.get(s, -1):
                        per_sec_lag[s] = lag
            elif event in ("server_down", "server_up"):
                r[event] += 1
                sec = "%d" % ((parse_ts(m.group(1)) - wall0) // 1)
                r[event + "_at_s"][sec] = r[event + "_at_s"].get(sec, 0) + 1
                if event == "server_down" and len(r["down_samples"]) < 5:
                    r["down_samples"].append(line.strip())
            if level in ("warn", "error") and event != "server_down":
                r["warn_error_events"][event] = r["warn_error_events"].get(event, 0) + 1
    # probe start to probe start per server, as lb ran them (ts has 1 ms
    # resolution; the main thread logs a result shortly after it arrives)
    ivs, periods = [], []
    for ts in starts.values():
        ts.sort()
        w = [x for x in ts if wall0 <= x <= wall1]
        ivs.extend((b - a) * 1000.0 for a, b in zip(w, w[1:]))
        if len(w) >= 2:
            periods.append((w[-1] - w[0]) * 1000.0 / (len(w) - 1))
    r["start_interval_ms"] = quantiles(ivs)
    r["start_period_ms"] = quantiles(periods)
    r["lag_ms"] = quantiles(lags)
    r["duration_ms"] = quantiles(durs)
    r["max_lag_per_second"] = [per_sec_lag.get(s) for s in range(int(wall1 - wall0) + 1)]
    return r


# ================================================================ one run

def free_port(avoid):
    lo = 10000
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        eph_lo = int(f.read().split()[0])
    import random
    rng = random.Random()
    for _ in range(1000):
        p = rng.randint(lo, eph_lo - 1)
        if p in avoid:
            continue
        s = socket.socket()
        try:
            s.bind((HOST, p))
        except OSError:
            continue
        finally:
            s.close()
        return p
    raise RuntimeError("no free port")


def write_config(path, threads, log_level, ports, fe_port, admin_port, reuse=False):
    lines = [
        "; written by tests/bench/health_cost.py",
        "[global]",
        "workers = 1",
        "log_level = %s" % log_level,
        "max_connections = 1000",      # keeps fd_limit_low quiet: no clients here
        "shutdown_timeout = 1s",
        "",
        "[admin]",
        "listen = %s:%d" % (HOST, admin_port),
        "",
        "[health]",
        "threads = %d" % threads,
        "",
        "[frontend f]",
        "listen = %s:%d" % (HOST, fe_port),
        "pool = p",
        "",
        "[pool p]",
        "check = http",
        "check_interval = 1s",
        "check_timeout = 1s",
    ]
    if reuse:
        lines.append("check_reuse = on")
    for i, p in enumerate(ports):
        lines.append("server = s%05d %s:%d" % (i, HOST, p))
    text = "\n".join(lines) + "\n"
    assert max(len(l) for l in lines) < 200
    with open(path, "w") as f:
        f.write(text)


def wait_ready(lb, log_path, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if lb.poll() is not None:
            raise RuntimeError("lb exited with %s before ready; see %s" % (lb.returncode, log_path))
        with open(log_path, errors="replace") as f:
            if "event=ready" in f.read():
                return time.monotonic()
        time.sleep(0.05)
    raise RuntimeError("lb not ready after %ss; see %s" % (timeout, log_path))


def write_haproxy_config(path, nbthread, ports, fe_port, stats_sock):
    lines = [
        "# written by tests/bench/health_cost.py",
        "global",
        "    nbthread %d" % nbthread,
        # no clients here, as lb's max_connections; HAProxy sizes its fd
        # budget as 2 * maxconn plus one socket per checked server
        "    maxconn 1000",
        # HAProxy's default, written out: no random jitter on `inter` (the
        # first checks are still staggered over one interval at start)
        "    spread-checks 0",
        # read at the window's edges only, for the failed-check counters
        "    stats socket %s mode 600 level user" % stats_sock,
        "",
        "defaults",
        "    mode tcp",
        "    timeout connect 1s",
        "    timeout check 1s",
        "    timeout client 1m",
        "    timeout server 1m",
        "",
        "frontend f",
        "    bind %s:%d" % (HOST, fe_port),
        "    default_backend p",
        "",
        "backend p",
        "    option httpchk GET /",
    ]
    # rise/fall: lb's defaults (conf/conf_keys.c)
    for i, p in enumerate(ports):
        lines.append("    server s%05d %s:%d check inter 1s rise 2 fall 3" % (i, HOST, p))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def haproxy_stat(sock_path):
    """Per-server check counters from HAProxy's stats socket: failed checks
    (chkfail: HAProxy counts them while a server is up), UP->DOWN
    transitions (chkdown) and the servers' status and last check status."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(10)
        s.connect(sock_path)
        s.sendall(b"show stat -1 4 -1\n")         # servers only
        chunks = []
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    head = lines[0].lstrip("# ").split(",")
    col = {k: i for i, k in enumerate(head)}
    r = {"servers": 0, "chkfail": 0, "chkdown": 0, "status": {}, "check_status": {}}
    for line in lines[1:]:
        v = line.split(",")
        if len(v) < len(head):
            continue
        r["servers"] += 1
        r["chkfail"] += int(v[col["chkfail"]] or 0)
        r["chkdown"] += int(v[col["chkdown"]] or 0)
        for k in ("status", "check_status"):
            r[k][v[col[k]]] = r[k].get(v[col[k]], 0) + 1
    return r


def wait_checks(proc, backends, log_path, timeout):
    """HAProxy has no ready line to wait for: ready is when the backends
    have seen its first checks."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("haproxy exited with %s before its first check; see %s"
                               % (proc.returncode, log_path))
        if sum(b.count() for b in backends):
            return time.monotonic()
        time.sleep(0.05)
    raise RuntimeError("no check from haproxy after %ss; see %s" % (timeout, log_path))


def run_one(args, proxy, threads, log_level, workdir, reuse=False):
    """proxy: "lb" (threads = [health] threads, log_level its log_level) or
    "haproxy" (threads = nbthread, log_level None). reuse (lb only):
    `check_reuse = on`, on backends that keep their connections."""
    tag = "t%d-%s" % (threads, log_level) if proxy == "lb" else "haproxy-t%d" % threads
    if reuse:
        tag += "-reuse"
    per = [args.servers // args.backends + (1 if i < args.servers % args.backends else 0)
           for i in range(args.backends)]
    backends, proc = [], None
    try:
        lo = args.port_base
        for i, n in enumerate(per):
            hi = lo + int(n * 1.25) + 100
            backends.append(Backend(i, lo, hi, n, workdir, args.pin_backends, keep_alive=reuse))
            lo = hi
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            eph_lo = int(f.read().split()[0])
        if lo > eph_lo:
            print("warning: backend ports reach into the ephemeral range (%d >= %d)"
                  % (lo, eph_lo), file=sys.stderr)
        ports = [p for b in backends for p in b.ports]
        port_owner = {}
        for bi, b in enumerate(backends):
            for p in b.ports:
                port_owner[p] = bi
        avoid = set(ports)
        fe_port = free_port(avoid)
        admin_port = free_port(avoid | {fe_port})
        log_path = os.path.join(workdir, "%s.log" % tag)
        stats_sock = os.path.join(workdir, "%s.sock" % tag)
        if proxy == "lb":
            conf = os.path.join(workdir, "lb-%s.ini" % tag)
            write_config(conf, threads, log_level, ports, fe_port, admin_port, reuse)
            cmd = [args.lb, "-c", conf]
        else:
            conf = os.path.join(workdir, "%s.cfg" % tag)
            write_haproxy_config(conf, threads, ports, fe_port, stats_sock)
            cmd = [args.haproxy_bin, "-db", "-f", conf]
        net0 = net_counters()
        with open(log_path, "wb") as logf:
            pin = args.pin_lb
            proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None)
        t_start = time.monotonic()
        if proxy == "lb":
            t_ready = wait_ready(proc, log_path, 60)
        else:
            t_ready = wait_checks(proc, backends, log_path, 60)
        bpids = [b.proc.pid for b in backends]
        samples = []
        fd_max = 0
        t_end = t_ready + args.duration
        t_win = t_ready + args.warmup
        # HAProxy's counters, read outside the window: dumping 10,000
        # servers keeps its thread busy for a while (~0.2 s) and delays its
        # checks, so the first read is a second before the window
        t_stat = max(t_ready, t_win - 1.0) if proxy == "haproxy" else None
        s0 = None
        hstat = []
        while True:
            now = time.monotonic()
            if t_stat is not None and not hstat and now >= t_stat:
                hstat.append(haproxy_stat(stats_sock))
                now = time.monotonic()
            if s0 is None and now >= t_win:
                s0 = sample(proc.pid, bpids)
            if now >= t_end:
                break
            if proc.poll() is not None:
                raise RuntimeError("%s exited with %s during the run" % (proxy, proc.returncode))
            samples.append(sample(proc.pid, bpids))
            try:
                fd_max = max(fd_max, len(os.listdir("/proc/%d/fd" % proc.pid)))
            except OSError:
                pass
            nxt = min(t_end, t_win if s0 is None else t_end,
                      t_stat if t_stat is not None and not hstat else t_end,
                      now + args.sample_every)
            time.sleep(max(0.0, nxt - time.monotonic()))
        s1 = sample(proc.pid, bpids)
        net1 = net_counters()
        if proxy == "haproxy":
            hstat.append(haproxy_stat(stats_sock))

        # SIGTERM: lb drains for shutdown_timeout, HAProxy stops at once
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        rc = proc.returncode
        proc = None
        dumps = [b.dump() for b in backends]
        res = analyse(args, proxy, tag, threads, log_level, s0, s1, samples, fd_max,
                      dumps, log_path, hstat, t_ready - t_start, net0, net1, rc)
        res["reuse"] = reuse
        return res
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for b in backends:
            b.kill()


def health_ticks(proxy, a, b):
    """The health-check CPU between samples a and b: lb's lb-health threads;
    HAProxy runs its checks on its worker threads, so all of it."""
    if proxy == "haproxy":
        return b["proc"] - a["proc"]
    return sum(tk - a["threads"].get(tid, (comm, 0))[1]
               for tid, (comm, tk) in b["threads"].items() if comm == "lb-health")


def analyse(args, proxy, tag, threads, log_level, s0, s1, samples, fd_max, dumps,
            log_path, hstat, startup_s, net0, net1, rc):
    win = s1["mono"] - s0["mono"]
    t0, t1 = s0["mono"], s1["mono"]
    res = {"proxy": proxy, "tag": tag, "threads": threads, "log_level": log_level,
           "servers": args.servers, "window_s": win, "startup_s": startup_s,
           "exit": rc, "fd_max_sampled": fd_max}

    # ---- CPU
    per_thread, other_threads = [], {}
    for tid, (comm, ticks1) in s1["threads"].items():
        ticks0 = s0["threads"].get(tid, (comm, 0))[1]
        d = ticks1 - ticks0
        if comm == "lb-health" or proxy == "haproxy":
            per_thread.append(round(pct(d, win), 1))
        else:
            other_threads[comm] = other_threads.get(comm, 0) + d
    health = health_ticks(proxy, s0, s1)
    res["health_cpu_pct"] = pct(health, win)
    res["health_cpu_pct_per_thread"] = per_thread
    res["proc_cpu_pct"] = pct(s1["proc"] - s0["proc"], win)
    res["lb_other_threads_cpu_pct"] = {k: round(pct(v, win), 1) for k, v in other_threads.items()}
    res["backend_cpu_pct"] = [round(pct(b1 - b0, win), 1)
                              for b0, b1 in zip(s0["backends"], s1["backends"])]
    ncpu = os.cpu_count()
    busy_all = (s1["cpu_total"] - s0["cpu_total"]) - (s1["cpu_idle"] - s0["cpu_idle"])
    mine = (s1["proc"] - s0["proc"]) + sum(b1 - b0 for b0, b1 in zip(s0["backends"], s1["backends"])) \
        + (s1["self"] - s0["self"])
    # /proc/stat counts USER_HZ ticks too; others = everything busy but us
    res["machine_cpus"] = ncpu
    res["machine_busy_pct"] = pct(busy_all, win)            # of one core
    irq = s1["cpu_irq"] - s0["cpu_irq"]        # loopback TCP runs mostly in softirq
    res["machine_irq_pct"] = pct(irq, win)
    res["other_cpu_pct"] = max(0.0, pct(busy_all - irq - mine, win))
    # health CPU per second, to see whether it is steady
    series = []
    for a, b in zip(samples, samples[1:]):
        if a["mono"] < t0:
            continue
        series.append(round(pct(health_ticks(proxy, a, b), b["mono"] - a["mono"]), 1))
    res["health_cpu_pct_series"] = series

    # ---- backend view
    intervals, queue, arrivals, periods = [], [], [], []
    bstats = []
    window_requests = 0
    for meta, idx, arr, proc, marks in dumps:
        by_port = {}
        for i, ta, tp in zip(idx, arr, proc):
            by_port.setdefault(i, []).append(ta)
            if t0 <= ta <= t1:
                window_requests += 1
                arrivals.append(ta)
                queue.append((tp - ta) * 1000.0)
        for i, ts in by_port.items():
            ts.sort()
            for a, b in zip(ts, ts[1:]):
                if a >= t0 and b <= t1:
                    intervals.append((b - a) * 1000.0)
            w = [x for x in ts if t0 <= x <= t1]
            if len(w) >= 2:
                periods.append((w[-1] - w[0]) * 1000.0 / (len(w) - 1))
        ports_seen = len(by_port)
        # busy fraction of the event loop in the window
        m = list(zip(marks[0::2], marks[1::2]))
        busy = None
        inw = [x for x in m if t0 <= x[0] <= t1]
        if len(inw) >= 2:
            busy = 100.0 * (inw[-1][1] - inw[0][1]) / (inw[-1][0] - inw[0][0])
        bstats.append({k: meta.get(k) for k in ("accepts", "requests", "partial", "empty",
                                                "errors", "max_batch", "no_stamp",
                                                "max_pending", "rt_offset_drift_us",
                                                "kept_closed", "max_kept")}
                      | {"ports": len(meta["ports"]), "ports_checked": ports_seen,
                         "empty_in_window": sum(1 for x in meta["empty_times"] if t0 <= x <= t1),
                         "empty_after_window": sum(1 for x in meta["empty_times"] if x > t1),
                         "loop_busy_pct": busy})
    res["backend"] = bstats
    res["accepts_in_window"] = sum(sum(1 for x in meta["accept_times"] if t0 <= x <= t1)
                                   for meta, _, _, _, _ in dumps)
    res["conns_per_check"] = res["accepts_in_window"] / max(1, window_requests)
    res["backend_checks_per_s"] = window_requests / win
    # both proxies' checks counted alike: requests the backends got in the window
    res["health_us_per_check"] = 1e6 * health / CLK_TCK / max(1, window_requests)
    res["proc_us_per_check"] = 1e6 * (s1["proc"] - s0["proc"]) / CLK_TCK / max(1, window_requests)
    res["interval_ms"] = quantiles(intervals)
    # drift: each server's mean period over the window, (last - first) /
    # (n - 1); unlike the mean of the intervals above it is not biased by
    # dropping the intervals cut by the window's edges
    res["period_ms"] = quantiles(periods)
    if res["interval_ms"]:
        res["interval_ms"]["drift_ms"] = res["period_ms"]["mean"] - 1000.0
        res["interval_ms"]["over_1100"] = sum(1 for x in intervals if x > 1100)
        res["interval_ms"]["over_1500"] = sum(1 for x in intervals if x > 1500)
    res["backend_queue_ms"] = quantiles(queue)
    # burstiness: the busiest 100 ms of the window (10 ms bins), as a rate
    bins = [0] * (int(win * 100) + 1)
    for ta in arrivals:
        bins[min(len(bins) - 1, int((ta - t0) * 100))] += 1
    run = sum(bins[:10])
    peak = run
    for i in range(10, len(bins)):
        run += bins[i] - bins[i - 10]
        peak = max(peak, run)
    res["peak_checks_per_s_100ms"] = peak * 10.0
    res["servers_never_checked"] = args.servers - sum(b["ports_checked"] for b in bstats)

    if proxy == "lb":
        res["lb_log"] = parse_lb_log(log_path, s0["wall"], s1["wall"])
        fa = res["lb_log"]["failed_at_s"]
        # one event=check line per probe: debug runs only
        res["failed_in_window"] = sum(v for k, v in fa.items() if 0 <= int(k) < win) \
            if log_level == "debug" else None
    else:
        h0, h1 = hstat
        res["haproxy_stat"] = {"start": h0, "end": h1}
        res["failed_in_window"] = h1["chkfail"] - h0["chkfail"]
        with open(log_path, errors="replace") as f:
            res["haproxy_messages"] = [l.strip() for l in f if "[WARNING]" in l or "[ALERT]" in l]
    res["net"] = {k: net1.get(k, 0) - net0.get(k, 0) for k in
                  ("TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPTimeWaitOverflow",
                   "TcpExtTCPDeferAcceptDrop", "TcpExtTCPReqQFullDrop", "TcpExtTCPReqQFullDoCookies")}
    return res


# ================================================================ report

def f1(x):
    return "-" if x is None else "%.1f" % x


def log_label(r):
    """The log column: lb's log level, "+ reuse" for a --check-reuse run."""
    return (r["log_level"] or "-") + (" + reuse" if r.get("reuse") else "")


def print_tables(results):
    """lb's runs in detail (the HAProxy runs are in print_comparison)."""
    results = [r for r in results if r["proxy"] == "lb"]
    print()
    print("| threads | log | health CPU % (per thread) | lb CPU % | checks/s | "
          "interval min / p50 / p99 / max ms | mean drift ms | lag_ms p50 / p99 / max | "
          "failed | server_down (whole run) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        iv = r["interval_ms"] or {}
        lag = r["lb_log"]["lag_ms"]
        lag_s = "%s / %s / %s" % (f1(lag["p50"]), f1(lag["p99"]), f1(lag["max"])) if lag else "n/a (info)"
        print("| %d | %s | %.1f (%s) | %.1f | %.0f | %s / %s / %s / %s | %+.1f | %s | %s | %d |" % (
            r["threads"], log_label(r), r["health_cpu_pct"],
            ", ".join("%.1f" % x for x in r["health_cpu_pct_per_thread"]),
            r["proc_cpu_pct"], r["backend_checks_per_s"],
            f1(iv.get("min")), f1(iv.get("p50")), f1(iv.get("p99")), f1(iv.get("max")),
            iv.get("drift_ms", float("nan")), lag_s,
            str(r["lb_log"]["failed"]) if r["log_level"] == "debug" else "n/a (info)",
            r["lb_log"]["server_down"]))
    print()
    print("| threads | log | lb other threads CPU % | probe duration_ms p50 / p99 / max | "
          "backend CPU % | backend loop busy % | backend queue ms p50 / p99 / max | "
          "intervals >1.1 s | peak checks/s (100 ms) | lb fds (max sampled) | softirq CPU % | other procs CPU % | startup s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        d = r["lb_log"]["duration_ms"]
        d_s = "%s / %s / %s" % (f1(d["p50"]), f1(d["p99"]), f1(d["max"])) if d else "n/a"
        q = r["backend_queue_ms"]
        q_s = "%s / %s / %s" % (f1(q["p50"]), f1(q["p99"]), f1(q["max"])) if q else "-"
        print("| %d | %s | %s | %s | %s | %s | %s | %s | %.0f | %d | %.0f | %.0f | %.1f |" % (
            r["threads"], log_label(r),
            ", ".join("%s %.1f" % kv for kv in sorted(r["lb_other_threads_cpu_pct"].items())),
            d_s, ", ".join("%.0f" % x for x in r["backend_cpu_pct"]),
            ", ".join(f1(b["loop_busy_pct"]) for b in r["backend"]), q_s,
            (r["interval_ms"] or {}).get("over_1100", 0), r["peak_checks_per_s_100ms"],
            r["fd_max_sampled"], r["machine_irq_pct"], r["other_cpu_pct"], r["startup_s"]))
    print()
    for r in results:
        notes = []
        lg = r["lb_log"]
        if lg["warn_error_events"]:
            notes.append("warn/error events: %s" % lg["warn_error_events"])
        if lg["failed_samples"]:
            notes.append("failed e.g.: %s" % lg["failed_samples"][0])
        if lg["down_samples"]:
            notes.append("server_down e.g.: %s; server_down / server_up by second of the window "
                         "(negative = warm-up): %s / %s" % (lg["down_samples"][0], lg["server_down_at_s"],
                                                            lg["server_up_at_s"]))
        if r["servers_never_checked"]:
            notes.append("%d servers never checked" % r["servers_never_checked"])
        if r.get("reuse"):
            notes.append("check_reuse = on: %d connections accepted in the window for %d checks "
                         "(%.3f per check), %d kept connections at most, %d closed by lb (at its exit too)"
                         % (r["accepts_in_window"], r["backend_checks_per_s"] * r["window_s"],
                            r["conns_per_check"], sum(b["max_kept"] for b in r["backend"]),
                            sum(b["kept_closed"] for b in r["backend"])))
        net = {k: v for k, v in r["net"].items() if v}
        if net:
            notes.append("kernel counters: %s" % net)
        errs = sum(b["errors"] for b in r["backend"])
        if errs:
            notes.append("backend socket errors: %d" % errs)
        emp = [sum(b[k] for b in r["backend"]) for k in ("empty", "empty_in_window", "empty_after_window")]
        if emp[0]:
            notes.append("connections closed by lb before a request: %d (%d in the window, %d after it, "
                         "i.e. probes cancelled at shutdown)" % tuple(emp))
        if lg["failed"]:
            notes.append("failed by detail: %s; by second of the window: %s"
                         % (lg["failed_details"], lg["failed_at_s"]))
        if lg["passed_after_timeout"]:
            notes.append("%d checks passed with duration_ms > check_timeout" % lg["passed_after_timeout"])
        si = lg.get("start_interval_ms")
        if si:
            notes.append("lb-side start-to-start interval (log ts - duration) min/p50/p99/max ms: "
                         "%.0f / %.0f / %.0f / %.0f" % (si["min"], si["p50"], si["p99"], si["max"]))
        if lg["lag_ms"]:
            notes.append("max lag per second of the window: %s" % lg["max_lag_per_second"])
        notes.append("health CPU per second: %s" % r["health_cpu_pct_series"])
        print("- %s: %s" % (r["tag"], "; ".join(notes)))


def print_comparison(results):
    """Health CPU per check, lb against HAProxy. lb's health figure is its
    lb-health threads; HAProxy's is its whole process (it checks on its
    worker threads). Each lb run is set against the HAProxy run with
    nbthread = its [health] threads."""
    hap = {r["threads"]: r for r in results if r["proxy"] == "haproxy"}
    if not hap:
        return
    # --check-reuse runs add a column: new connections per check
    reuse = any(r.get("reuse") for r in results)
    print()
    print("| proxy | threads | log | checks/s | health CPU % | health CPU us/check | "
          "process CPU % | process CPU us/check | failed checks (window) | "
          "interval p50 / p99 / max ms | softirq CPU % | other procs CPU % | fds (max sampled) |"
          + (" connections / check |" if reuse else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if reuse else ""))
    for r in results:
        iv = r["interval_ms"] or {}
        fw = r["failed_in_window"]
        print("| %s | %d | %s | %.0f | %.1f | %.2f | %.1f | %.2f | %s | %s / %s / %s | %.0f | %.0f | %d |" % (
            r["proxy"], r["threads"], log_label(r), r["backend_checks_per_s"],
            r["health_cpu_pct"], r["health_us_per_check"], r["proc_cpu_pct"],
            r["proc_us_per_check"], "n/a (info)" if fw is None else str(fw),
            f1(iv.get("p50")), f1(iv.get("p99")), f1(iv.get("max")),
            r["machine_irq_pct"], r["other_cpu_pct"], r["fd_max_sampled"])
            + (" %.3f |" % r["conns_per_check"] if reuse else ""))
    print()
    print("| lb threads | log | HAProxy nbthread | lb health threads / HAProxy, per check | "
          "lb process / HAProxy, per check |")
    print("|---|---|---|---|---|")
    for r in results:
        h = hap.get(r["threads"])
        if r["proxy"] != "lb" or h is None:
            continue
        print("| %d | %s | %d | %.2fx | %.2fx |" % (
            r["threads"], log_label(r), h["threads"],
            r["health_us_per_check"] / h["proc_us_per_check"],
            r["proc_us_per_check"] / h["proc_us_per_check"]))
    print()
    for h in hap.values():
        st0, st1 = h["haproxy_stat"]["start"], h["haproxy_stat"]["end"]
        notes = ["CPU per thread: %s" % h["health_cpu_pct_per_thread"],
                 "servers %d, status at end %s, last check status %s"
                 % (st1["servers"], st1["status"], st1["check_status"]),
                 "UP->DOWN in the window %d" % (st1["chkdown"] - st0["chkdown"])]
        if h["servers_never_checked"]:
            notes.append("%d servers never checked" % h["servers_never_checked"])
        emp = sum(b["empty_in_window"] for b in h["backend"])
        if emp:
            notes.append("connections closed before a request in the window: %d" % emp)
        if h["haproxy_messages"]:
            notes.append("%d warnings/alerts, e.g. %s" % (len(h["haproxy_messages"]),
                                                           h["haproxy_messages"][0]))
        notes.append("CPU per second: %s" % h["health_cpu_pct_series"])
        print("- %s: %s" % (h["tag"], "; ".join(notes)))


# ================================================================ main

def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--backend-child":
        lo, hi, n, out = sys.argv[2:6]
        return backend_child(int(lo), int(hi), int(n), out,
                             keep_alive=sys.argv[6:7] == ["keep-alive"])

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lb", default=os.path.join(REPO, "build", "lb"))
    ap.add_argument("--servers", type=int, default=10000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--log-levels", default="debug,info")
    ap.add_argument("--duration", type=float, default=18.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--backends", type=int, default=2, choices=[1, 2, 3, 4])
    ap.add_argument("--port-base", type=int, default=20000)
    ap.add_argument("--sample-every", type=float, default=1.0)
    ap.add_argument("--haproxy", action=argparse.BooleanOptionalAction,
                    default=os.access(HAPROXY, os.X_OK),
                    help="also run HAProxy on the same servers (default: if %s exists)" % HAPROXY)
    ap.add_argument("--haproxy-bin", default=HAPROXY)
    ap.add_argument("--pin-lb", type=lambda v: {int(x) for x in v.split(",")},
                    help="CPU list for lb and HAProxy (sched_setaffinity), e.g. 0")
    ap.add_argument("--pin-backends", type=lambda v: {int(x) for x in v.split(",")},
                    help="CPU list for the backend processes, e.g. 1")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--check-reuse", action="store_true",
                    help="also run lb with check_reuse = on, on backends that keep "
                         "their connections (an extra row against HAProxy)")
    args = ap.parse_args()

    if not os.access(args.lb, os.X_OK):
        sys.exit("no lb binary at %s: build it first (see the usage at the top)" % args.lb)
    if args.haproxy and not os.access(args.haproxy_bin, os.X_OK):
        sys.exit("no haproxy at %s (--no-haproxy to skip it)" % args.haproxy_bin)
    soft, _ = raise_fd_limit()
    if args.check_reuse:
        # a keep-alive backend holds a listener and a kept connection per server
        per = -(-args.servers // args.backends)
        if 2 * per + 100 > soft:
            sys.exit("--check-reuse: a backend of %d servers needs %d fds (a listener and a "
                     "kept connection each), the limit is %d: use more --backends"
                     % (per, 2 * per + 100, soft))
    workdir = tempfile.mkdtemp(prefix="lb-health-bench-")
    results = []
    try:
        for level in args.log_levels.split(","):
            for th in (int(x) for x in args.threads.split(",")):
                print("run: threads=%d log_level=%s servers=%d backends=%d duration=%.0fs ..."
                      % (th, level, args.servers, args.backends, args.duration),
                      file=sys.stderr, flush=True)
                results.append(run_one(args, "lb", th, level, workdir))
                time.sleep(2)       # let the TIME_WAIT/backlog state of one run settle
                if args.check_reuse:
                    print("run: threads=%d log_level=%s check_reuse=on servers=%d backends=%d "
                          "duration=%.0fs ..." % (th, level, args.servers, args.backends,
                                                  args.duration), file=sys.stderr, flush=True)
                    results.append(run_one(args, "lb", th, level, workdir, reuse=True))
                    time.sleep(2)
        if args.haproxy:
            for th in sorted({int(x) for x in args.threads.split(",")}):
                print("run: haproxy nbthread=%d servers=%d backends=%d duration=%.0fs ..."
                      % (th, args.servers, args.backends, args.duration),
                      file=sys.stderr, flush=True)
                results.append(run_one(args, "haproxy", th, None, workdir))
                time.sleep(2)
    finally:
        if args.keep:
            print("work dir kept: %s" % workdir, file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    try:
        rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = "?"
    print("\nlb %s (binary built %s)" % (rev, time.strftime(
        "%Y-%m-%d %H:%M", time.localtime(os.stat(args.lb).st_mtime))))
    print("lb health checks: %d servers, http, check_interval 1s, workers=1, %d backend process(es), "
          "steady window %.1f s (after %.0f s warm-up), %d CPUs, loadavg at end %s"
          % (args.servers, args.backends, results[0]["window_s"], args.warmup, os.cpu_count(),
             " ".join(open("/proc/loadavg").read().split()[:3])))
    print_tables(results)
    if args.haproxy:
        hv = subprocess.run([args.haproxy_bin, "-v"], capture_output=True, text=True).stdout
        print("\n%s: nbthread = lb's [health] threads, same servers, http check "
              "(GET /), inter 1s, rise 2, fall 3, spread-checks 0" % hv.split(" - ")[0].strip())
        print_comparison(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
