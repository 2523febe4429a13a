#!/usr/bin/env python3
"""A bounded soak of lb: everything at once, for a given time.

    LB_BIN=build/lb python3 tests/stress/soak.py              # 5 minutes
    LB_BIN=build/lb python3 tests/stress/soak.py --duration 50 --kill-every 8 \\
        --down 1.5 --reload-every 4 --admin-every 3          # what ctest runs

One lb (2 workers, one frontend, a pool of 4 or 5 servers checked over TCP)
in front of backends that are processes of their own, while:
  - short connections arrive at a steady --rate per second (connect, one
    request, the whole answer, close);
  - --streams long-lived connections stay open, each for 2 to 15 s,
    exchanging a line every 250 ms, and are reopened when they end;
  - every --kill-every s one of the 4 first backends is killed (SIGKILL: a
    crash, its connections die with it) and restarted --down s later;
  - every --reload-every s the config is replaced (renamed into place) and
    reloaded, by SIGHUP and POST /reload in turn, alternating two files
    (roundrobin over 4 servers; leastconn over 5, other weights);
  - every --admin-every s an operator action: a server is drained or
    disabled, and enabled again at the next one.

Judged at the end, with the figures printed either way:
  - client failures: 0 beyond the connections the kills and the disables
    cut. A cut is a connection open on the killed (or disabled) server at
    that moment, or in flight through lb then and not yet answered; its
    failure must come within 5 s. The streams open on each killed server
    are counted when it is killed (with those not answered yet, which may
    be on it).
  - lb's open descriptors (/proc/PID/fd): back to the count before the load
    (the lowest of a few samples, as health probes come and go) within 20 s
    of the last client closing.
  - lb's RSS: at most --rss-growth MiB more at the end of the load than at
    the end of the warm-up (the first fifth of the run, and at least one
    kill, restart and reload), when every buffer and arena the load needs
    exists. Under ASan too, whose lb runs with a small quarantine
    (harness.STEADY_RSS_ENV) so that freed memory does not hide growth, and
    may grow ASAN_RSS_EXTRA_MIB more.
  - every reload and admin action succeeded; lb exits 0 on SIGTERM, with no
    error event and no sanitizer report in its log.
Exit status 0 when all hold, 1 otherwise. Every process it starts is
stopped by pid, also on failure. The load is bounded in count and time.
"""

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import admin_client  # noqa: E402  (tests/integration, on the path above)
import harness  # noqa: E402
from test_reload_traffic import config_text, reload_error, write_atomic  # noqa: E402

HOST = "127.0.0.1"
PAYLOAD = b"s" * 2048                   # every short answer carries it
PING_EVERY = 0.25
IO_TIMEOUT = 5.0                        # a client waits this long per step
CUT_WINDOW = 5.0                        # a cut shows within this of its cause
FD_DEADLINE = 20.0
# What an ASan lb (1 MB quarantine: harness.STEADY_RSS_ENV) grows beyond the
# optimised build after the warm-up, its allocator's caches filling: 2.9-3.0
# MiB in the short soak (4 runs), where the optimised build grew 0.1 MiB.
ASAN_RSS_EXTRA_MIB = 4.0
POOL = "web"


# ------------------------------------------------------------- the backend

def backend_main(name, port):
    """A backend process: for each line it gets, answers "NAME LINE"; a
    "REQ" line also gets PAYLOAD and then the connection is closed."""
    async def handle(reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                writer.write(name.encode() + b" " + line)
                if line.startswith(b"REQ "):
                    writer.write(PAYLOAD)
                    await writer.drain()
                    break
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def serve():
        server = await asyncio.start_server(handle, HOST, port, reuse_address=True,
                                            backlog=1024)
        async with server:
            await server.serve_forever()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    asyncio.run(serve())


class Backends:
    """The backend processes by name, each on its own fixed port."""

    def __init__(self, names):
        self.ports = {n: harness.free_port() for n in names}
        self.procs = {}

    def addr(self, name):
        return f"{HOST}:{self.ports[name]}"

    def start(self, name):
        self.procs[name] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--backend", name,
             str(self.ports[name])], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((HOST, self.ports[name]), timeout=1).close()
                return
            except OSError:
                if self.procs[name].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"backend {name} did not start")
                time.sleep(0.01)

    def kill(self, name):
        p = self.procs.pop(name)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.procs.clear()


# ---------------------------------------------------------------- clients

def failure_kind(e):
    if isinstance(e, ConnectionRefusedError):
        return "connect_refused"
    if isinstance(e, socket.timeout):
        return "timeout"
    if isinstance(e, ConnectionResetError):
        return "reset"
    if isinstance(e, BrokenPipeError):
        return "broken_pipe"
    return f"error:{type(e).__name__}"


class Conn:
    """One client connection's record: when it started and ended, the
    backend that answered (None before the first answer), and why it
    failed (None: it did not)."""
    __slots__ = ("kind", "t_start", "t_end", "backend", "failure", "detail")

    def __init__(self, kind):
        self.kind, self.t_start = kind, time.monotonic()
        self.t_end = self.backend = self.failure = self.detail = None

    def fail(self, kind, detail=""):
        self.failure, self.detail, self.t_end = kind, detail, time.monotonic()


class Load:
    """The short connections (threads sharing --rate) and the streams."""

    def __init__(self, port, names, rate, streams, seed):
        self.port, self.names = port, set(names)
        self.rate, self.nstreams = rate, streams
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.conns = []
        self.open_streams = []          # Conn of each stream open now
        self.streams_started = 0        # streams begun so far
        self.rng = random.Random(seed)
        self.threads = []

    def start(self):
        nshort = max(1, min(8, self.rate // 40))
        for i in range(nshort):
            self.threads.append(harness.Thread(self._shorts, nshort / self.rate, i))
        for i in range(self.nstreams):
            self.threads.append(harness.Thread(self._streams, self.rng.random()))
        for t in self.threads:
            t.start()

    def finish(self, timeout=30):
        """Stops the load; False when a thread is still running at timeout.
        Raises what a thread raised (a client thread's failure is a
        failure of the soak)."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        ended = all([t.wait(max(0.0, deadline - time.monotonic())) for t in self.threads])
        for t in self.threads:
            t.raise_error()
        return ended

    def _record(self, c):
        with self.lock:
            self.conns.append(c)

    def _read_line(self, s, buf):
        while b"\n" not in buf:
            data = s.recv(4096)
            if not data:
                return None, buf
            buf += data
        line, _, rest = buf.partition(b"\n")
        return line + b"\n", rest

    def _shorts(self, interval, n):
        next_t = time.monotonic() + interval * n / max(1, len(self.threads))
        seq = 0
        while not self.stop.is_set():
            next_t += interval
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.monotonic()           # late: no catch-up burst
            seq += 1
            self._short(f"{n}.{seq}")

    def _short(self, rid):
        c = Conn("short")
        try:
            with socket.create_connection((HOST, self.port), timeout=IO_TIMEOUT) as s:
                s.settimeout(IO_TIMEOUT)
                s.sendall(f"REQ {rid}\n".encode())
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            head, _, body = data.partition(b"\n")
            name, _, rest = head.decode(errors="replace").partition(" ")
            if name in self.names:
                c.backend = name
            if not data or b"\n" not in data:
                c.fail("eof", f"{len(data)} bytes")
            elif name not in self.names or rest != f"REQ {rid}" or body != PAYLOAD:
                c.fail("eof" if len(body) < len(PAYLOAD) else "bad_reply",
                       f"{head[:60]!r} and {len(body)} of {len(PAYLOAD)} payload bytes")
            else:
                c.t_end = time.monotonic()
        except OSError as e:
            c.fail(failure_kind(e), repr(e))
        self._record(c)

    def _streams(self, phase):
        # spread the first opens over a second
        if self.stop.wait(phase):
            return
        while not self.stop.is_set():
            self._stream(self.rng.uniform(2.0, 15.0))

    def _stream(self, lifetime):
        c = Conn("stream")
        with self.lock:
            self.open_streams.append(c)
            self.streams_started += 1
        try:
            with socket.create_connection((HOST, self.port), timeout=IO_TIMEOUT) as s:
                s.settimeout(IO_TIMEOUT)
                buf, seq = b"", 0
                end = c.t_start + lifetime
                while not self.stop.is_set() and time.monotonic() < end:
                    seq += 1
                    s.sendall(f"PING {seq}\n".encode())
                    line, buf = self._read_line(s, buf)
                    if line is None:
                        c.fail("eof", f"after {seq - 1} answers")
                        break
                    name, _, rest = line.decode(errors="replace").rstrip("\n").partition(" ")
                    if name not in self.names or rest != f"PING {seq}" or \
                            (c.backend is not None and name != c.backend):
                        c.fail("bad_reply", f"{line[:60]!r} (stream on {c.backend})")
                        break
                    c.backend = name
                    self.stop.wait(PING_EVERY)
            if c.failure is None:
                c.t_end = time.monotonic()
        except OSError as e:
            c.fail(failure_kind(e), f"{e!r} (stream on {c.backend})")
        with self.lock:
            self.open_streams.remove(c)
        self._record(c)

    def streams_on(self, name):
        """Streams that may be on server `name`: those it answered, and
        those no server has answered yet (a kill can cut them too)."""
        with self.lock:
            return sum(1 for c in self.open_streams if c.backend in (name, None))


# ------------------------------------------------------------------- soak

def config(admin_port, port, backends, version):
    """Version 0: roundrobin over s1..s4, weight 1. Version 1: leastconn
    over s1..s5, s1 weight 3."""
    keys = {"check": "tcp", "check_interval": "500ms", "check_timeout": "300ms",
            "rise": 2, "fall": 2, "drain_timeout": "60s", "min_servers": 1,
            "observe_errors": 3, "retries": 2, "connect_timeout": "1s",
            "balance": "roundrobin" if version == 0 else "leastconn"}
    names = ["s1", "s2", "s3", "s4"] + (["s5"] if version == 1 else [])
    servers = [(n, backends.addr(n), 3 if version == 1 and n == "s1" else 1) for n in names]
    return config_text(admin_port, [("fe", port, POOL)], [(POOL, servers, keys)],
                       max_connections=10000, log_level="info", shutdown_timeout="5s")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def attribute(conns, events):
    """Splits the failures: cut by a kill, cut by a disable, unexplained.
    events: (t_begin, t_end, "kill" or "disable", server), t_end when the
    backend was reaped or the action answered: a dying process still
    completes handshakes from its accept queue until its listener is gone."""
    cut = Counter()
    unexplained = []
    for c in conns:
        if c.failure is None:
            continue
        cause = None
        for t0, t1, what, server in events:
            if c.t_start <= t1 and t0 <= c.t_end <= t1 + CUT_WINDOW and \
                    c.backend in (server, None):
                cause = what
                break
        if cause is None:
            unexplained.append(c)
        else:
            cut[(cause, c.kind)] += 1
    return cut, unexplained


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of load (300)")
    ap.add_argument("--rate", type=int, default=300, help="new short connections per second")
    ap.add_argument("--streams", type=int, default=40, help="long-lived connections open")
    ap.add_argument("--kill-every", type=float, default=20.0)
    ap.add_argument("--down", type=float, default=3.0, help="seconds a killed backend stays down")
    ap.add_argument("--reload-every", type=float, default=10.0)
    ap.add_argument("--admin-every", type=float, default=7.0)
    ap.add_argument("--rss-growth", type=float, default=4.0, help="MiB allowed after warm-up")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", nargs=2, metavar=("NAME", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.backend:
        backend_main(args.backend[0], int(args.backend[1]))
        return 0

    if not harness.LB_BIN or not os.access(harness.LB_BIN, os.X_OK):
        print(f"LB_BIN={harness.LB_BIN!r} is not an executable lb binary", file=sys.stderr)
        return 1
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    rss_bound = args.rss_growth + (ASAN_RSS_EXTRA_MIB if harness.SANITIZED else 0)
    problems = []
    backends = Backends(["s1", "s2", "s3", "s4", "s5"])
    admin_port, port = harness.free_port(), harness.free_port()
    lb = harness.Lb(config(admin_port, port, backends, 0), env=harness.STEADY_RSS_ENV)
    load = None
    try:
        for name in backends.ports:
            backends.start(name)
        lb.start()
        admin = lb.admin = admin_client.Admin(admin_port)
        fds0 = min(fd_samples(lb.pid))
        rss0 = harness.vm_rss_kb(lb.pid)
        print(f"soak: {args.duration:.0f} s, {args.rate} connections/s, {args.streams} streams, "
              f"kill every {args.kill_every:g} s (down {args.down:g} s), reload every "
              f"{args.reload_every:g} s, admin every {args.admin_every:g} s; seed {seed}; "
              f"lb {harness.LB_BIN} pid {lb.pid}{' (ASan)' if harness.SANITIZED else ''}",
              flush=True)

        load = Load(port, backends.ports, args.rate, args.streams, seed)
        t0 = time.monotonic()
        load.start()
        events = []                         # see attribute()
        kills = reloads = 0
        open_on_killed = 0
        actions = Counter()
        version = 0
        down = {}                           # killed server -> restart time
        admin_out = None                    # (server, action) out by admin
        warm_at = t0 + max(args.duration / 5, args.kill_every + args.down + 1,
                           args.reload_every + 1)
        rss_warm = None
        next_kill = t0 + args.kill_every
        next_reload = t0 + args.reload_every
        next_admin = t0 + args.admin_every
        end = t0 + args.duration
        while True:
            now = time.monotonic()
            if now >= end:
                break
            for name, t in list(down.items()):
                if now >= t:
                    backends.start(name)
                    del down[name]
            if rss_warm is None and now >= warm_at:
                rss_warm = harness.vm_rss_kb(lb.pid)
            if now >= next_kill:
                next_kill += args.kill_every
                victim = f"s{kills % 4 + 1}"
                kills += 1
                started = load.streams_started
                open_on_killed += load.streams_on(victim)
                t_kill = time.monotonic()
                backends.kill(victim)
                events.append((t_kill, time.monotonic(), "kill", victim))
                # attribute() also blames the kill for a stream begun until
                # the victim was reaped (its accept queue still completes
                # handshakes), so those may be on it too (seen: 44 cut
                # against 43 counted before the kill)
                open_on_killed += load.streams_started - started
                down[victim] = time.monotonic() + args.down
            if now >= next_reload:
                next_reload += args.reload_every
                version ^= 1
                write_atomic(lb.config_path, config(admin_port, port, backends, version))
                reloads += 1
                err = reload_error(lb, use_signal=reloads % 2 == 1, timeout=30)
                if err:
                    problems.append(f"reload #{reloads}: {err}")
            if now >= next_admin:
                next_admin += args.admin_every
                if admin_out is None:
                    target = rng.choice([n for n in ("s1", "s2", "s3", "s4") if n not in down])
                    action = "drain" if actions["drain"] <= actions["disable"] else "disable"
                    admin_out = (target, action)
                else:
                    target, action = admin_out[0], "enable"
                    admin_out = None
                t_action = time.monotonic()
                r = admin.action(POOL, target, action)
                if action == "disable":     # closes the server's connections
                    events.append((t_action, time.monotonic(), "disable", target))
                actions[action] += 1
                if r.status != 200:
                    problems.append(f"POST {action} {target}: {r.status} {r.body[:200]!r}")
            lb.assert_running()
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        rss_load = harness.vm_rss_kb(lb.pid)
        if not load.finish():
            problems.append("client threads did not end within 30 s of the stop")
        t_stopped = time.monotonic()
        for name in list(down):
            backends.start(name)
        # Back to the start: every connection closed, descriptors as before.
        fds_end, t_fds = None, None
        while time.monotonic() < t_stopped + FD_DEADLINE:
            fds_end = fd_count(lb.pid)
            if fds_end <= fds0:
                t_fds = time.monotonic() - t_stopped
                break
            time.sleep(0.05)
        rss_end = harness.vm_rss_kb(lb.pid)
        active = admin.stats()["connections"]["active"]

        conns = load.conns
        cut, unexplained = attribute(conns, events)
        nshort = sum(1 for c in conns if c.kind == "short")
        nstream = len(conns) - nshort
        ran = t_stopped - t0
        print(f"connections: {nshort} short ({nshort / ran:.0f}/s), {nstream} streams; "
              f"{len(conns)} in all")
        print(f"backend kills: {kills}, streams open on the killed backend: {open_on_killed}; "
              f"cut by the kills: {cut[('kill', 'stream')]} streams, "
              f"{cut[('kill', 'short')]} short connections in flight")
        print(f"admin actions: {dict(actions)}; cut by disable: "
              f"{cut[('disable', 'stream')]} streams, {cut[('disable', 'short')]} short")
        print(f"reloads: {reloads} ({len(lb.events('reload'))} logged ok, "
              f"{len(lb.events('reload_failed'))} failed)")
        kinds = Counter(c.failure for c in unexplained)
        print(f"client failures beyond the cuts: {len(unexplained)} {dict(kinds)}")
        for c in unexplained[:10]:
            print(f"  {c.kind} at +{c.t_start - t0:.2f}..+{c.t_end - t0:.2f} s on "
                  f"{c.backend}: {c.failure} {c.detail}")
        print(f"lb descriptors: {fds0} at start, {fds_end} at the end"
              + (f" ({t_fds:.1f} s after the load stopped)" if t_fds is not None else
                 f" after {FD_DEADLINE:.0f} s") + f"; active connections {active}")
        growth = (rss_load - rss_warm) / 1024 if rss_warm is not None else None
        print(f"lb RSS: {rss0 / 1024:.1f} MiB at start, "
              + (f"{rss_warm / 1024:.1f} after warm-up, " if rss_warm else "")
              + f"{rss_load / 1024:.1f} at the end of the load, {rss_end / 1024:.1f} idle; "
              + (f"growth {growth:+.1f} MiB (bound {rss_bound:g}"
                 + (f", {ASAN_RSS_EXTRA_MIB:g} of it for ASan" if harness.SANITIZED else "")
                 + ")" if growth is not None else "no warm-up sample"))

        if unexplained:
            problems.append(f"{len(unexplained)} client failures beyond the cuts: {dict(kinds)}")
        if cut[("kill", "stream")] > open_on_killed:
            problems.append("more streams cut by kills than were open on the killed servers")
        if t_fds is None:
            problems.append(f"descriptors not back to {fds0} within {FD_DEADLINE:.0f} s "
                            f"(last count {fds_end})")
        if active != 0:
            problems.append(f"{active} connections still active in /stats")
        if rss_warm is None:
            problems.append("the run ended before its warm-up: make --duration longer")
        elif growth > rss_bound:
            problems.append(f"RSS grew {growth:.1f} MiB after warm-up (bound {rss_bound:g})")
        if kills == 0 or reloads == 0:
            problems.append("no kill or no reload happened: make --duration longer")
    except Exception as e:              # any failure of the soak's own steps
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        if load is not None:
            load.finish(timeout=10)
        try:
            lb.close()                  # SIGTERM, exit 0, no error event
        except AssertionError as e:
            problems.append(str(e))
        backends.stop_all()
    if problems:
        print("SOAK FAILED:\n  " + "\n  ".join(problems))
        print(f"lb's files kept in {lb.dir}")
        return 1
    shutil.rmtree(lb.dir, ignore_errors=True)
    print("soak passed")
    return 0


def fd_samples(pid, n=5):
    out = []
    for _ in range(n):
        out.append(fd_count(pid))
        time.sleep(0.1)
    return out


if __name__ == "__main__":
    sys.exit(main())
