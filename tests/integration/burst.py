"""burst.py - a connection burst against lb: a backend process with a small
listen backlog that serves one short request per connection, and a client
that opens thousands of connections within a fraction of a second and
classifies how each one ended.

The backend runs as its own process (python3 burst.py backend ...) so its
accept loop does not share the test process's interpreter with the client:
it must accept at its own steady pace, as a real server does, while its
kernel accept queue (the backlog) overflows. It prints one JSON line of
figures on SIGTERM: accepted, served, and the most connections it held open
at once (what a per-server cap bounds).
"""

import errno
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time

HOST = "127.0.0.1"


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---------------------------------------------------------------- backend

def backend_main(name, backlog, hold_ms, rate):
    """Accepts with a listen backlog of `backlog`, at most `rate`
    connections a second (a server with a fixed number of request threads
    takes new work at its own pace); each connection gets its request line
    answered with `name` after hold_ms, then closed."""
    raise_fd_limit()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((HOST, 0))
    lsock.listen(backlog)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    listening = [True]
    conns = {}                  # sock -> [request bytes, reply due (0: not yet)]
    due = []                    # (time, sock): replies waiting for hold_ms
    figures = {"accepted": 0, "served": 0, "max_open": 0}
    next_accept = 0.0
    stopping = []
    signal.signal(signal.SIGTERM, lambda *a: stopping.append(1))
    print(lsock.getsockname()[1], flush=True)

    def close(s):
        sel.unregister(s)
        del conns[s]
        s.close()

    while not stopping:
        now = time.monotonic()
        timeout = 0.05
        if due:
            timeout = max(0.0, min(timeout, due[0][0] - now))
        accepting = now >= next_accept
        if accepting != listening[0]:
            if accepting:
                sel.register(lsock, selectors.EVENT_READ, None)
            else:
                sel.unregister(lsock)
                timeout = max(0.0, min(timeout, next_accept - now))
            listening[0] = accepting
        elif not accepting:
            timeout = max(0.0, min(timeout, next_accept - now))
        for key, _ in sel.select(timeout):
            s = key.fileobj
            if s is lsock:
                next_accept = time.monotonic() + 1.0 / rate
                try:
                    c, _ = lsock.accept()
                except OSError:
                    continue
                c.setblocking(False)
                conns[c] = [b"", 0]
                sel.register(c, selectors.EVENT_READ, None)
                figures["accepted"] += 1
                figures["max_open"] = max(figures["max_open"], len(conns))
                continue
            try:
                data = s.recv(4096)
            except OSError:
                close(s)
                continue
            if not data:
                close(s)
                continue
            st = conns[s]
            st[0] += data
            if b"\n" in st[0] and st[1] == 0:
                st[1] = now + hold_ms / 1000.0
                due.append((st[1], s))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, s = due.pop(0)
            if s not in conns:
                continue
            try:
                s.send(name.encode() + b"\n")
                figures["served"] += 1
            except OSError:
                pass
            close(s)
    print(json.dumps(figures), flush=True)


class BurstBackend:
    """The backend process, started and stopped by the test."""

    def __init__(self, name, backlog=128, hold_ms=0, rate=1000):
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "backend", name,
             str(backlog), str(hold_ms), str(rate)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"burst backend {name} did not start")
        self.port = int(line)
        self.addr = f"{HOST}:{self.port}"
        self.figures = None

    def stop(self):
        """Stops the process by pid and returns its figures."""
        if self.figures is not None:
            return self.figures
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"burst backend {self.name} ignored SIGTERM")
        self.figures = json.loads(out.strip().splitlines()[-1])
        return self.figures


# ----------------------------------------------------------------- client

def burst(port, count, spread_s=0.1, deadline_s=60.0):
    """Opens `count` connections to port within spread_s, sends a request
    line on each, reads the answer to EOF. Returns a dict of outcome ->
    count: "served" (an answer arrived), "closed" (EOF before any answer:
    lb gave up on the client), "reset", "refused", "timeout" (still waiting
    at the deadline), plus "answers": {name: count}."""
    raise_fd_limit()
    sel = selectors.DefaultSelector()
    outcome = {"served": 0, "closed": 0, "reset": 0, "refused": 0, "timeout": 0}
    answers = {}
    state = {}                          # sock -> bytes received (None: connecting)
    start = time.monotonic()
    served_at = []
    for i in range(count):
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex((HOST, port))
        if err not in (0, errno.EINPROGRESS):
            outcome["refused"] += 1
            s.close()
            continue
        state[s] = None
        sel.register(s, selectors.EVENT_WRITE, None)
        # Pace the opening over spread_s, as many clients arriving together.
        ahead = start + spread_s * (i + 1) / count - time.monotonic()
        if ahead > 0.001:
            _pump(sel, state, outcome, answers, ahead, served_at)
    end = time.monotonic() + deadline_s
    while state and time.monotonic() < end:
        _pump(sel, state, outcome, answers, 0.1, served_at)
    outcome["timeout"] += len(state)
    for s in list(state):
        sel.unregister(s)
        s.close()
    outcome["answers"] = answers
    outcome["seconds"] = round(time.monotonic() - start, 2)
    served_at.sort()
    for q in (50, 90, 99, 100):
        if served_at:
            k = min(len(served_at) - 1, len(served_at) * q // 100)
            outcome[f"served_p{q}_s"] = round(served_at[k] - start, 3)
    return outcome


def _pump(sel, state, outcome, answers, timeout, served_at):
    for key, ev in sel.select(timeout):
        s = key.fileobj
        if state[s] is None:
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                _end(sel, state, s, outcome, "refused" if err == errno.ECONNREFUSED else "reset")
                continue
            try:
                s.send(b"hello\n")
            except OSError:
                _end(sel, state, s, outcome, "reset")
                continue
            state[s] = b""
            sel.modify(s, selectors.EVENT_READ, None)
            continue
        try:
            data = s.recv(4096)
        except OSError:
            _end(sel, state, s, outcome, "reset")
            continue
        if data:
            state[s] += data
            continue
        got = state[s].strip().decode(errors="replace")
        if got:
            answers[got] = answers.get(got, 0) + 1
            served_at.append(time.monotonic())
        _end(sel, state, s, outcome, "served" if got else "closed")


def _end(sel, state, s, outcome, kind):
    outcome[kind] += 1
    sel.unregister(s)
    del state[s]
    s.close()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "backend":
        backend_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit("usage: burst.py backend NAME BACKLOG HOLD_MS ACCEPTS_PER_S")
