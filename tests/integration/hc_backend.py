#!/usr/bin/env python3
"""hc_backend.py - a fake HTTP(S) server farm for lb's health-check tests.

One process, one thread, one selector: it listens on many ports of
127.0.0.1 at once (200+ is fine) and answers HTTP on each in a mode that a
test switches at runtime through a line-based control port.

Usage:
  hc_backend.py [--count N] [--tls-count M --cert FILE --key FILE] [--mode MODE]

It binds N plain ports and M TLS ports (kernel-picked), then prints one JSON
line on stdout: {"control": PORT, "ports": [...], "tls_ports": [...]}.
It runs until SIGTERM/SIGINT or until its stdin reaches EOF (the test that
started it died), and exits 0.

Modes (per port, default "ok"); the mode is read when a request's head
(up to the blank line) has arrived:
  ok          HTTP/1.1 200 OK, body "PORT\\n"
  NNN         that status code (e.g. 204, 404, 500), body "PORT\\n"
  slow:MS     200 OK after MS milliseconds
  hang        never answers; the connection stays open until the peer closes
              (the listener stays open: a TCP connect still succeeds)
  malformed   a status line that is not HTTP, then close
  endless     "HTTP/1.1 200 " and then bytes without a newline, forever
              (4 KB every 10 ms)
  trickle     the same, one byte every 20 ms: a reader that waits for the
              line end only stops on its own deadline
  close       close without answering
  reset       close with RST without answering
A connection whose first byte cannot start an HTTP request (a TLS
ClientHello on a plain port) gets "400 Bad Request" and is closed.

Control port: one command per line, one JSON line back ({"ok": true, ...}
or {"ok": false, "error": "..."}). PORTS is a port, a comma list or "all".
  ping
  mode PORTS MODE      -> {"mono": T, "wall": T} when the switch took effect
  crash PORTS          close the listener and every open connection; the port
                       stays bound (not listening), so connects are refused
  revive PORTS         listen again on the same port
  times PORTS          health requests (User-Agent: lb-health) seen per port:
                       {"times": {PORT: [[mono, wall], ...]}}
  info PORT            counters (accepts, health, other, empty, open), mode,
                       the last 50 health request heads, the SNI names seen
  clear PORTS          forget recorded times, heads and SNI names
A "health" request is one with User-Agent: lb-health; "other" is any other
request (client traffic through lb); "empty" is a connection closed before
any byte arrived (a TCP check).
"""

import argparse
import heapq
import http
import json
import os
import resource
import selectors
import signal
import socket
import ssl
import struct
import sys
import time
import traceback

HOST = "127.0.0.1"
HEAD_LIMIT = 65536
ENDLESS_CHUNK = b"x" * 4096
ENDLESS_PERIOD = 0.01
TRICKLE_PERIOD = 0.02
KEEP_HEADS = 50


class Port:
    def __init__(self, port, tls, lsock):
        self.port = port
        self.tls = tls
        self.lsock = lsock          # listening socket, or None when crashed
        self.placeholder = None     # bound, not listening (while crashed)
        self.mode = "ok"
        self.conns = set()
        self.accepts = 0
        self.health = 0
        self.other = 0
        self.empty = 0
        self.times = []             # [mono, wall] per health request
        self.heads = []             # last KEEP_HEADS health request heads
        self.sni = []

    def info(self):
        return {"port": self.port, "tls": self.tls, "mode": self.mode,
                "listening": self.lsock is not None, "accepts": self.accepts,
                "health": self.health, "other": self.other, "empty": self.empty,
                "open": len(self.conns), "heads": self.heads, "sni": self.sni}


class Conn:
    def __init__(self, farm, sock, port):
        self.farm = farm
        self.sock = sock
        self.port = port
        self.buf = b""
        self.out = b""
        self.close_after_write = False
        self.state = "handshake" if port.tls else "head"
        self.endless = False
        self.got_bytes = False
        self.closed = False
        self.pending_eof = False
        self.events = selectors.EVENT_READ

    # -- selector plumbing
    def set_events(self, events):
        if self.closed or events == self.events:
            return
        self.events = events
        self.farm.sel.modify(self.sock, events, self)

    def close(self, rst=False):
        if self.closed:
            return
        self.closed = True
        try:
            self.farm.sel.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        if rst:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     struct.pack("ii", 1, 0))
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass
        self.port.conns.discard(self)
        self.farm.sni_owner.pop(id(self.sock), None)

    # -- events
    def on_event(self, mask):
        try:
            if self.state == "handshake":
                self.handshake()
                return
            if mask & selectors.EVENT_READ:
                self.on_read()
            if not self.closed and mask & selectors.EVENT_WRITE:
                self.flush()
        except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            pass
        except ssl.SSLWantWriteError:
            self.set_events(selectors.EVENT_READ | selectors.EVENT_WRITE)
        except (OSError, ssl.SSLError):
            self.close()

    def handshake(self):
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.set_events(selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self.set_events(selectors.EVENT_READ | selectors.EVENT_WRITE)
            return
        except (OSError, ssl.SSLError):
            self.close()
            return
        self.state = "head"
        self.set_events(selectors.EVENT_READ)
        self.on_read()              # the request may already be buffered

    def read_some(self):
        """Reads what is available; returns b"" on EOF, None when nothing
        is available now."""
        chunks = []
        while True:
            try:
                d = self.sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            except ssl.SSLWantWriteError:
                break
            if not d:
                if chunks:
                    self.pending_eof = True
                    break
                return b""
            chunks.append(d)
            if not self.port.tls or not self.sock.pending():
                if len(d) < 65536:
                    break
        return b"".join(chunks) if chunks else None

    def on_read(self):
        self.pending_eof = False
        d = self.read_some()
        if d is None:
            return
        if d == b"":
            self.on_eof()
            return
        self.got_bytes = True
        if self.state == "head":
            self.buf += d
            self.parse_head()
        # other states: discard what the peer sends (hang, endless, writing)
        if not self.closed and self.pending_eof:
            self.on_eof()

    def on_eof(self):
        if self.state == "head" and not self.got_bytes:
            self.port.empty += 1
        self.close()

    def parse_head(self):
        first = self.buf[:1]
        if first and not (b"A" <= first <= b"Z"):
            self.state = "done"
            self.respond_status(400)
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            end = self.buf.find(b"\n\n")
        if end < 0:
            if len(self.buf) > HEAD_LIMIT:
                self.state = "done"
                self.respond_status(431)
            return
        head = self.buf[:end].decode("latin-1")
        self.state = "answer"
        is_health = False
        for line in head.split("\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "user-agent" and v.strip() == "lb-health":
                is_health = True
        p = self.port
        if is_health:
            p.health += 1
            p.times.append([time.monotonic(), time.time()])
            p.heads.append(head)
            del p.heads[:-KEEP_HEADS]
        else:
            p.other += 1
        self.act(p.mode)

    def act(self, mode):
        if mode == "ok":
            self.respond_status(200)
        elif mode.isdigit():
            self.respond_status(int(mode))
        elif mode.startswith("slow:"):
            self.state = "slow"
            self.farm.later(int(mode[5:]) / 1000.0,
                            lambda: None if self.closed else self.respond_status(200))
        elif mode == "hang":
            self.state = "hang"
        elif mode == "malformed":
            self.send(b"this is not http at all\r\n\r\n", close=True)
        elif mode == "endless":
            self.state = "endless"
            self.send(b"HTTP/1.1 200 ")
            self.farm.later(ENDLESS_PERIOD, self.endless_tick)
        elif mode == "trickle":
            self.state = "endless"
            self.trickle = b"HTTP/1.1 200 OK"
            self.farm.later(TRICKLE_PERIOD, self.trickle_tick)
        elif mode == "close":
            self.close()
        elif mode == "reset":
            self.close(rst=True)
        else:
            self.respond_status(500)

    def endless_tick(self):
        if self.closed:
            return
        if not self.out:
            self.send(ENDLESS_CHUNK)
        if not self.closed:
            self.farm.later(ENDLESS_PERIOD, self.endless_tick)

    def trickle_tick(self):
        if self.closed:
            return
        if not self.out:
            byte, self.trickle = (self.trickle[:1], self.trickle[1:]) if self.trickle \
                else (b"x", b"")
            self.send(byte)
        if not self.closed:
            self.farm.later(TRICKLE_PERIOD, self.trickle_tick)

    def respond_status(self, code):
        try:
            reason = http.HTTPStatus(code).phrase
        except ValueError:
            reason = "Custom"
        body = f"{self.port.port}\n".encode()
        head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n"
                f"X-Port: {self.port.port}\r\n\r\n").encode()
        self.send(head + body, close=True)

    def send(self, data, close=False):
        self.out += data
        self.close_after_write = self.close_after_write or close
        self.flush()

    def flush(self):
        while self.out and not self.closed:
            try:
                n = self.sock.send(self.out)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                self.set_events(selectors.EVENT_READ | selectors.EVENT_WRITE)
                return
            except (OSError, ssl.SSLError):
                self.close()
                return
            self.out = self.out[n:]
        if self.closed:
            return
        if self.close_after_write:
            self.close()
        else:
            self.set_events(selectors.EVENT_READ)


class Control:
    def __init__(self, farm, sock):
        self.farm = farm
        self.sock = sock
        self.buf = b""
        self.out = b""

    def on_event(self, mask):
        if mask & selectors.EVENT_READ:
            try:
                d = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                d = None
            except OSError:
                d = b""
            if d == b"":
                self.close()
                return
            if d:
                self.buf += d
                while b"\n" in self.buf:
                    line, self.buf = self.buf.split(b"\n", 1)
                    try:
                        reply = self.farm.command(line.decode().split())
                    except Exception as e:          # noqa: BLE001 - reported
                        reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                    self.out += (json.dumps(reply) + "\n").encode()
        self.flush()

    def flush(self):
        while self.out:
            try:
                n = self.sock.send(self.out)
            except BlockingIOError:
                break
            except OSError:
                self.close()
                return
            self.out = self.out[n:]
        ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0)
        try:
            self.farm.sel.modify(self.sock, ev, self)
        except (KeyError, ValueError):
            pass

    def close(self):
        try:
            self.farm.sel.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        self.sock.close()


class Farm:
    def __init__(self, count, tls_count, cert, key, mode):
        self.sel = selectors.DefaultSelector()
        self.ports = {}
        self.timers = []
        self.timer_seq = 0
        self.sni_owner = {}
        self.stopping = False
        self.ctx = None
        if tls_count:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
            self.ctx.sni_callback = self.on_sni
        self.plain = [self.add_port(False, mode) for _ in range(count)]
        self.tls = [self.add_port(True, mode) for _ in range(tls_count)]
        self.csock = socket.socket()
        self.csock.bind((HOST, 0))
        self.csock.listen(16)
        self.csock.setblocking(False)
        self.sel.register(self.csock, selectors.EVENT_READ, "control")

    # -- ports
    def listener(self, port=0):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((HOST, port))
        s.listen(1024)
        s.setblocking(False)
        return s

    def add_port(self, tls, mode):
        s = self.listener()
        p = Port(s.getsockname()[1], tls, s)
        p.mode = mode
        self.ports[p.port] = p
        self.sel.register(s, selectors.EVENT_READ, p)
        return p.port

    def accept(self, p):
        for _ in range(64):
            if p.lsock is None:
                return
            try:
                sock, _ = p.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            p.accepts += 1
            if p.tls:
                sock = self.ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
            c = Conn(self, sock, p)
            if p.tls:
                self.sni_owner[id(sock)] = c
            p.conns.add(c)
            self.sel.register(sock, selectors.EVENT_READ, c)
            if p.tls:
                c.on_event(selectors.EVENT_READ)

    def on_sni(self, sslsock, name, ctx):
        c = self.sni_owner.pop(id(sslsock), None)
        if c is not None:
            c.port.sni.append(name if name is not None else "")

    def crash(self, p):
        if p.lsock is None:
            return
        self.sel.unregister(p.lsock)
        p.lsock.close()
        p.lsock = None
        for c in list(p.conns):
            c.close()
        ph = socket.socket()
        ph.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ph.bind((HOST, p.port))          # bound, never listening: RST to SYNs
        p.placeholder = ph

    def revive(self, p):
        if p.lsock is not None:
            return
        p.placeholder.close()
        p.placeholder = None
        p.lsock = self.listener(p.port)
        self.sel.register(p.lsock, selectors.EVENT_READ, p)

    # -- timers
    def later(self, delay, fn):
        self.timer_seq += 1
        heapq.heappush(self.timers, (time.monotonic() + delay, self.timer_seq, fn))

    def run_timers(self):
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _, _, fn = heapq.heappop(self.timers)
            fn()

    # -- control
    def select_ports(self, spec):
        if spec == "all":
            return list(self.ports.values())
        out = []
        for item in spec.split(","):
            port = int(item)
            if port not in self.ports:
                raise ValueError(f"unknown port {port}")
            out.append(self.ports[port])
        return out

    def command(self, argv):
        if not argv:
            return {"ok": False, "error": "empty command"}
        cmd, args = argv[0], argv[1:]
        if cmd == "ping":
            return {"ok": True}
        if cmd == "mode" and len(args) == 2:
            mode = args[1]
            valid = (mode in ("ok", "hang", "malformed", "endless", "trickle",
                              "close", "reset")
                     or (mode.isdigit() and 100 <= int(mode) <= 599)
                     or (mode.startswith("slow:") and mode[5:].isdigit()))
            if not valid:
                return {"ok": False, "error": f"bad mode {mode}"}
            for p in self.select_ports(args[0]):
                p.mode = mode
            return {"ok": True, "mono": time.monotonic(), "wall": time.time()}
        if cmd in ("crash", "revive") and len(args) == 1:
            for p in self.select_ports(args[0]):
                (self.crash if cmd == "crash" else self.revive)(p)
            return {"ok": True, "mono": time.monotonic(), "wall": time.time()}
        if cmd == "times" and len(args) == 1:
            return {"ok": True, "times": {str(p.port): p.times
                                          for p in self.select_ports(args[0])}}
        if cmd == "info" and len(args) == 1:
            return {"ok": True, "info": self.select_ports(args[0])[0].info()}
        if cmd == "clear" and len(args) == 1:
            for p in self.select_ports(args[0]):
                p.times, p.heads, p.sni = [], [], []
            return {"ok": True}
        return {"ok": False, "error": f"unknown command {' '.join(argv)}"}

    # -- loop
    def run(self):
        self.sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
        while not self.stopping:
            timeout = 0.1
            if self.timers:
                timeout = max(0.0, min(timeout, self.timers[0][0] - time.monotonic()))
            for key, mask in self.sel.select(timeout):
                obj = key.data
                if obj == "control":
                    try:
                        s, _ = self.csock.accept()
                    except OSError:
                        continue
                    s.setblocking(False)
                    self.sel.register(s, selectors.EVENT_READ, Control(self, s))
                elif obj == "stdin":
                    if not os.read(sys.stdin.fileno(), 4096):
                        self.stopping = True
                elif isinstance(obj, Port):
                    self.accept(obj)
                else:
                    obj.on_event(mask)
            self.run_timers()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--tls-count", type=int, default=0)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--mode", default="ok")
    a = ap.parse_args()
    if a.tls_count and not (a.cert and a.key):
        ap.error("--tls-count needs --cert and --key")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    farm = Farm(a.count, a.tls_count, a.cert, a.key, a.mode)
    signal.signal(signal.SIGTERM, lambda *_: setattr(farm, "stopping", True))
    signal.signal(signal.SIGINT, lambda *_: setattr(farm, "stopping", True))
    print(json.dumps({"control": farm.csock.getsockname()[1], "ports": farm.plain,
                      "tls_ports": farm.tls}), flush=True)
    try:
        farm.run()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
    sys.exit(0)


if __name__ == "__main__":
    main()
