#!/usr/bin/env python3
"""agent_server.py - an HAProxy-style agent for lb's agent check
(`agent_port=N` on a server line): each TCP connection gets one line about
the server, in the mode a test switches at runtime. Standard library only,
any python3.

Usage:
  agent_server.py [--port PORT] [--control-port PORT] [--mode MODE]
                  [--read-window MS]

It listens on 127.0.0.1:PORT (0, the default: the kernel picks; SO_REUSEADDR
so that `listen` can take the same port again) and prints one line on
stdout:
  ready {"port": P, "control": C, "pid": N}
It runs until SIGTERM/SIGINT (exit 0), or until its parent dies.

Modes (--mode, default "line up"; or `mode` below), read when a connection
is accepted:
  line TEXT   reads what the client sends if anything arrives within
              --read-window ms (default 30: lb writes its agent_send right
              after the connect), then writes TEXT + "\\n", shuts its write
              side (FIN) and reads on until the client closes (at most 2 s),
              so that nothing lb sent is lost and lb never gets a reset;
              records the bytes (`received`). TEXT is the rest of the
              command line as typed (spaces, tabs, commas; empty too).
  raw TEXT    the same without the "\\n": the line ends at the FIN
  hang        accepts and never answers; keeps the socket open until the
              client closes it (what it sends is recorded)
  garbage [N] writes N (default 300) random bytes, none of them "\\n" or
              "\\r", then FIN and close: a line longer than any agent's
  close       accepts and closes at once, without a byte
(An unknown word is `line fast`.)

Control port (127.0.0.1, kernel-picked unless --control-port): one command
per line, one JSON line back, {"ok": true, ...} or {"ok": false, "error":
"..."}. A command has taken effect when its answer is sent: a connection
accepted after the answer sees it.
  ping
  mode MODE ...      switches the mode (as above)
  refuse             closes the listening socket; the port stays bound (a
                     socket that does not listen), so connects are refused
                     and nothing else can take the port meanwhile
  listen             listens again on the same port
  calls              {"calls": n, "accepted": n, "received": "...",
                      "received_calls": n, "open": n, "mode": "...",
                      "listening": bool}: connections answered (a line, raw
                     text or garbage written), accepted (every mode), the
                     bytes the last connection that sent any sent (latin-1;
                     "" when none ever did), how many connections sent
                     bytes, connections open now
  reset              mode "line up", listening, counters and `received`
                     cleared (open connections are left to end by
                     themselves); for a test that reuses the process
"""

import argparse
import json
import os
import random
import select
import signal
import socket
import socketserver
import sys
import threading
import time

HOST = "127.0.0.1"
DRAIN_LIMIT = 2.0       # after its answer, how long a connection waits for the client's close
QUIET = 0.01            # once bytes came, the pause that ends the client's message
READ_LIMIT = 1 << 16    # bytes kept of what a client sends


def parse_mode(argv):
    """A mode from its words (a str for line/raw keeps its text as is);
    returns (name, arg). Raises ValueError."""
    if isinstance(argv, str):
        name, _, rest = argv.partition(" ")
    else:
        name, rest = argv[0], " ".join(argv[1:])
    if name in ("line", "raw"):
        return name, rest
    if name in ("hang", "close") and not rest.strip():
        return name, None
    if name == "garbage":
        n = int(rest) if rest.strip() else 300
        if n < 0 or n > 1 << 20:
            raise ValueError("garbage: 0 to 1048576 bytes")
        return name, n
    raise ValueError(f"unknown mode {argv!r}: line TEXT, raw TEXT, hang, garbage [N], close")


def mode_text(mode):
    name, arg = mode
    return name if arg is None else f"{name} {arg}"


class Agent:
    def __init__(self, port, mode, read_window):
        self.lock = threading.Lock()          # the counters, mode, lsock
        self.listen_lock = threading.Lock()   # refuse/listen, one at a time
        self.mode = mode
        self.read_window = read_window
        self.calls = 0
        self.accepted = 0
        self.received = b""
        self.received_calls = 0
        self.open = 0
        self.lsock = None
        self.placeholder = None     # bound, not listening, while refused
        self.acceptor = None
        self.port = port
        self._listen()

    # -- the listener
    def _listen(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((HOST, self.port))
        s.listen(128)
        self.port = s.getsockname()[1]
        with self.lock:
            self.lsock = s
        self.acceptor = threading.Thread(target=self._accept_loop, args=(s,), daemon=True)
        self.acceptor.start()

    def refuse(self):
        """Called with listen_lock held, not lock: the accept loop takes
        lock after an accept, and refuse waits for that loop to end."""
        with self.lock:
            s, self.lsock = self.lsock, None
        if s is None:
            return
        try:
            s.shutdown(socket.SHUT_RDWR)        # wakes accept() (EINVAL)
        except OSError:
            pass
        self.acceptor.join(timeout=5)
        s.close()
        ph = socket.socket()
        ph.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ph.bind((HOST, self.port))              # never listens: a SYN gets RST
        self.placeholder = ph

    def listen(self):
        """Called with listen_lock held."""
        if self.lsock is not None:
            return
        self.placeholder.close()
        self.placeholder = None
        self._listen()

    def _accept_loop(self, lsock):
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return                          # refuse() or the end
            with self.lock:
                self.accepted += 1
                self.open += 1
                mode = self.mode
            threading.Thread(target=self._serve, args=(conn, mode), daemon=True).start()

    # -- a connection
    def _serve(self, conn, mode):
        got = b""
        try:
            name, arg = mode
            if name == "close":
                return
            if name == "hang":
                got = self._read_until_eof(conn, None)
                return
            got = self._read_offer(conn)
            if name == "line":
                out = arg.encode("latin-1", errors="replace") + b"\n"
            elif name == "raw":
                out = arg.encode("latin-1", errors="replace")
            else:
                allowed = bytes(b for b in range(256) if b not in (10, 13))
                out = bytes(random.choice(allowed) for _ in range(arg))
            conn.sendall(out)
            with self.lock:
                self.calls += 1
            conn.shutdown(socket.SHUT_WR)
            got += self._read_until_eof(conn, DRAIN_LIMIT)
        except OSError:
            pass                                # a reset is the client's business
        finally:
            conn.close()
            with self.lock:
                self.open -= 1
                if got:
                    self.received = got
                    self.received_calls += 1

    def _read_offer(self, conn):
        """What the client sends first, if it starts within read_window:
        read until it pauses for QUIET (or closes)."""
        got = b""
        wait = self.read_window
        while len(got) < READ_LIMIT:
            r, _, _ = select.select([conn], [], [], wait)
            if not r:
                break
            d = conn.recv(65536)
            if not d:
                break
            got += d
            wait = QUIET
        return got[:READ_LIMIT]

    @staticmethod
    def _read_until_eof(conn, limit):
        got = b""
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return got
            r, _, _ = select.select([conn], [], [], wait)
            if not r:
                return got
            d = conn.recv(65536)
            if not d:
                return got
            if len(got) < READ_LIMIT:
                got += d[:READ_LIMIT - len(got)]

    # -- control
    def command(self, line):
        cmd, _, rest = line.partition(" ")
        if cmd in ("refuse", "listen", "reset") and rest:
            raise ValueError("unknown command or wrong arguments")
        with self.listen_lock:
            if cmd == "refuse":
                self.refuse()
                return {}
            if cmd in ("listen", "reset"):
                self.listen()
            with self.lock:
                if cmd == "listen":
                    return {"port": self.port}
                if cmd == "reset":
                    self.mode = ("line", "up")
                    self.calls = self.accepted = self.received_calls = 0
                    self.received = b""
                    return {}
                if cmd == "ping" and not rest:
                    return {}
                if cmd == "mode":
                    self.mode = parse_mode(rest)
                    return {"mode": mode_text(self.mode)}
                if cmd == "calls" and not rest:
                    return {"calls": self.calls, "accepted": self.accepted,
                            "received": self.received.decode("latin-1"),
                            "received_calls": self.received_calls, "open": self.open,
                            "mode": mode_text(self.mode),
                            "listening": self.lsock is not None}
        raise ValueError("unknown command or wrong arguments")


class Control(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            # Only the line end goes: a mode's text keeps its blanks.
            line = raw.decode("latin-1").rstrip("\r\n")
            if not line.strip():
                continue
            try:
                reply = dict(ok=True, **self.server.agent.command(line))
            except (ValueError, OSError) as e:
                reply = {"ok": False, "error": f"{line!r}: {e}"}
            self.wfile.write(json.dumps(reply).encode() + b"\n")
            self.wfile.flush()


class ControlServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--control-port", type=int, default=0)
    p.add_argument("--mode", default="line up")
    p.add_argument("--read-window", type=int, default=30, help="ms")
    opts = p.parse_args()
    try:
        mode = parse_mode(opts.mode)
    except ValueError as e:
        p.error(str(e))
    try:
        agent = Agent(opts.port, mode, opts.read_window / 1000.0)
    except OSError as e:
        sys.exit(f"agent_server: cannot listen on {HOST}:{opts.port}: {e}")
    control = ControlServer((HOST, opts.control_port), Control)
    control.agent = agent
    threading.Thread(target=control.serve_forever, daemon=True).start()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print("ready " + json.dumps({"port": agent.port, "control": control.server_address[1],
                                 "pid": os.getpid()}), flush=True)
    parent = os.getppid()
    while not done.wait(0.5):
        if os.getppid() != parent:      # the test that started us is gone
            break
    control.shutdown()
    control.server_close()
    with agent.listen_lock:
        agent.refuse()
        agent.placeholder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
