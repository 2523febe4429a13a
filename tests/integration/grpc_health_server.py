#!/usr/bin/python3
"""grpc_health_server.py - a real gRPC server (Debian's python3-grpcio) that
answers grpc.health.v1.Health/Check, for lb's `check = grpc` tests.

It runs under Debian's /usr/bin/python3, where python3-grpcio is installed
(the first python3 on the PATH may be another interpreter without it); the
grpc_health package is not used: the health service is a generic handler
and its two messages are encoded by hand (wire format of
grpc/health/v1/health.proto):
  HealthCheckRequest  { string service = 1; }
  HealthCheckResponse { ServingStatus status = 1; }
  ServingStatus: UNKNOWN = 0, SERVING = 1, NOT_SERVING = 2, SERVICE_UNKNOWN = 3
(b"\\x08\\x01" is SERVING; UNKNOWN, the proto3 default, is the empty message).

Usage:
  grpc_health_server.py --port PORT [--control-port PORT] [--name NAME]
                        [--status STATUS] [--unknown message|not_found]
                        [--mode health|unimplemented] [--cert FILE --key FILE]
  grpc_health_server.py who --target HOST:PORT [--count N] [--timeout S]

The server listens on 127.0.0.1:PORT (0: the kernel picks; SO_REUSEPORT is
off, so a port in use is an error), h2c with prior knowledge, or TLS with
--cert/--key (grpc.ssl_server_credentials; ALPN h2 is grpc's own). When it
listens it prints one line on stdout:
  ready {"port": P, "control": C, "tls": true|false, "pid": N}
It runs until SIGTERM/SIGINT (exit 0), or until its parent dies.

Health service, per service name ("" is the whole server): a status table,
at start {"": --status} (default SERVING). A service in the table answers
its status in the message. A service not in the table answers, by the
unknown-service behaviour (--unknown, or `unknown` below):
  message    SERVICE_UNKNOWN in the message, grpc-status 0 (default)
  not_found  grpc-status 5 NOT_FOUND "unknown service", as the grpc
             libraries' own health services do
Modes (--mode, or `mode` below):
  health         the health service above (default)
  unimplemented  no health service: every call gets grpc-status 12
                 UNIMPLEMENTED (grpc's own "Method not found!"), as a server
                 that does not register grpc.health.v1.Health
Besides, the method /lbtest.Who/Name answers the server's --name as its
raw message (the `who` client below), so a test can see which server a
client connection through lb reached.

Control port (127.0.0.1, kernel-picked unless --control-port): one command
per line, one JSON line back, {"ok": true, ...} or {"ok": false, "error":
"..."}. Each command has taken effect when its answer is sent, so a Check
that starts after the answer sees it. SERVICE is a name or "-" for "".
  ping
  set SERVICE STATUS     STATUS: SERVING, NOT_SERVING, UNKNOWN,
                         SERVICE_UNKNOWN or a number (sent as is)
  unset SERVICE          removes it: the service is unknown
  unknown message|not_found
  mode health|unimplemented
  delay MS               every Check answers MS ms late (0: at once)
  calls                  {"calls": {SERVICE: n, ...}, "total": n,
                          "other": n, "tls_calls": n}: Check calls received
                         (counted when they arrive, in every mode; SERVICE
                         "?": a call whose request was not read, in mode
                         unimplemented, or did not parse), "other": calls
                         of any other method, "tls_calls": the Check calls
                         that came over TLS (not counted in unimplemented)
  table                  {"table": {SERVICE: STATUS, ...}, "unknown": ...,
                          "mode": ..., "delay_ms": n}

`who` (a client, for the tests): opens --count channels to --target one
after the other, each a fresh TCP connection, calls /lbtest.Who/Name once
on each and prints one JSON line: {"names": [NAME or null, ...],
"errors": [...]} (null and an error: that call failed)."""

import argparse
import json
import os
import signal
import socketserver
import sys
import threading
import time
from concurrent import futures

import grpc

HOST = "127.0.0.1"
CHECK = "/grpc.health.v1.Health/Check"
WHO = "/lbtest.Who/Name"
STATUSES = {"UNKNOWN": 0, "SERVING": 1, "NOT_SERVING": 2, "SERVICE_UNKNOWN": 3}
NAMES = {v: k for k, v in STATUSES.items()}
UNKNOWN_MODES = ("message", "not_found")
MODES = ("health", "unimplemented")


# ---------------------------------------------------------------- protobuf

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(data, i):
    shift = value = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def decode_request(data):
    """HealthCheckRequest -> the service name (str). Unknown fields are
    skipped; the last `service` wins, as protobuf's parsers do."""
    service = b""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _read_varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = _read_varint(data, i)
            if i + n > len(data):
                raise ValueError("truncated length-delimited field")
            if field == 1:
                service = data[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(data):
            raise ValueError("truncated field")
    return service.decode("utf-8")


def encode_response(status):
    """HealthCheckResponse{status}; the proto3 default 0 is not sent."""
    return b"" if status == 0 else b"\x08" + _varint(status)


def decode_response(data):
    status = 0
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        if key == 0x08:
            status, i = _read_varint(data, i)
        else:
            raise ValueError(f"unexpected key {key}")
    return status


def parse_status(text):
    if text in STATUSES:
        return STATUSES[text]
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"status {text!r}: one of {', '.join(STATUSES)} or a number")
    if n < 0:
        raise ValueError(f"status {n} < 0")
    return n


def _identity(b):
    return b


# ------------------------------------------------------------------ server

class State:
    def __init__(self, name, status, unknown, mode):
        self.lock = threading.Lock()
        self.name = name
        self.table = {"": status}
        self.unknown = unknown
        self.mode = mode
        self.delay = 0.0
        self.calls = {}
        self.other = 0
        self.tls_calls = 0

    def count(self, service, tls):
        with self.lock:
            self.calls[service] = self.calls.get(service, 0) + 1
            if tls:
                self.tls_calls += 1


class Handler(grpc.GenericRpcHandler):
    """Every call comes here first (so it is counted in every mode); None
    makes grpc answer 12 UNIMPLEMENTED "Method not found!"."""

    def __init__(self, state):
        self.state = state
        self.check = grpc.unary_unary_rpc_method_handler(
            self._check, request_deserializer=_identity, response_serializer=_identity)
        self.who = grpc.unary_unary_rpc_method_handler(
            self._who, request_deserializer=_identity, response_serializer=_identity)

    def service(self, details):
        st = self.state
        if details.method == WHO:
            with st.lock:
                st.other += 1
            return self.who
        if details.method != CHECK:
            with st.lock:
                st.other += 1
            return None
        with st.lock:
            mode = st.mode
        if mode == "unimplemented":
            st.count("?", False)        # the service is not read: no handler
            return None
        return self.check

    def _check(self, request, context):
        st = self.state
        try:
            service = decode_request(request)
        except (ValueError, UnicodeDecodeError) as e:
            st.count("?", _is_tls(context))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad HealthCheckRequest: {e}")
        st.count(service, _is_tls(context))
        with st.lock:
            status = st.table.get(service)
            unknown = st.unknown
            delay = st.delay
        if delay:
            time.sleep(delay)
        if status is None:
            if unknown == "not_found":
                context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
            status = STATUSES["SERVICE_UNKNOWN"]
        return encode_response(status)

    def _who(self, request, context):
        return self.state.name.encode()


def _is_tls(context):
    try:
        kind = context.auth_context().get("transport_security_type")
    except Exception:
        return False
    return bool(kind) and kind[0] == b"ssl"


class Control(socketserver.StreamRequestHandler):
    def handle(self):
        st = self.server.state
        for raw in self.rfile:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                reply = dict(ok=True, **self.command(st, line.split()))
            except (ValueError, IndexError) as e:
                reply = {"ok": False, "error": f"{line!r}: {e}"}
            self.wfile.write(json.dumps(reply).encode() + b"\n")
            self.wfile.flush()

    @staticmethod
    def command(st, argv):
        cmd, args = argv[0], argv[1:]

        def service(s):
            return "" if s == "-" else s

        with st.lock:
            if cmd == "ping" and not args:
                return {}
            if cmd == "set" and len(args) == 2:
                st.table[service(args[0])] = parse_status(args[1])
                return {}
            if cmd == "unset" and len(args) == 1:
                st.table.pop(service(args[0]), None)
                return {}
            if cmd == "unknown" and len(args) == 1 and args[0] in UNKNOWN_MODES:
                st.unknown = args[0]
                return {}
            if cmd == "mode" and len(args) == 1 and args[0] in MODES:
                st.mode = args[0]
                return {}
            if cmd == "delay" and len(args) == 1:
                ms = int(args[0])
                if ms < 0:
                    raise ValueError("delay < 0")
                st.delay = ms / 1000.0
                return {}
            if cmd == "calls" and not args:
                return {"calls": dict(st.calls), "total": sum(st.calls.values()),
                        "other": st.other, "tls_calls": st.tls_calls}
            if cmd == "table" and not args:
                return {"table": {k: NAMES.get(v, v) for k, v in st.table.items()},
                        "unknown": st.unknown, "mode": st.mode,
                        "delay_ms": int(st.delay * 1000)}
        raise ValueError("unknown command or wrong arguments")


class ControlServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(opts):
    try:
        status = parse_status(opts.status)
    except ValueError as e:
        sys.exit(f"grpc_health_server: --status: {e}")
    state = State(opts.name, status, opts.unknown, opts.mode)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         handlers=[Handler(state)],
                         options=[("grpc.so_reuseport", 0)])
    addr = f"{HOST}:{opts.port}"
    tls = bool(opts.cert)
    try:
        if tls:
            with open(opts.cert, "rb") as f:
                cert = f.read()
            with open(opts.key, "rb") as f:
                key = f.read()
            port = server.add_secure_port(addr, grpc.ssl_server_credentials([(key, cert)]))
        else:
            port = server.add_insecure_port(addr)
    except RuntimeError:                # grpc's "Failed to bind to address"
        port = 0
    if port == 0:
        sys.exit(f"grpc_health_server: cannot listen on {addr}")
    control = ControlServer((HOST, opts.control_port), Control)
    control.state = state
    threading.Thread(target=control.serve_forever, daemon=True).start()
    server.start()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print("ready " + json.dumps({"port": port, "control": control.server_address[1],
                                 "tls": tls, "pid": os.getpid()}), flush=True)
    parent = os.getppid()
    while not done.wait(0.5):
        if os.getppid() != parent:      # the test that started us is gone
            break
    control.shutdown()
    control.server_close()
    server.stop(0).wait(5)
    return 0


# ------------------------------------------------------------------ client

def who(opts):
    names, errors = [], []
    for _ in range(opts.count):
        # A fresh channel is a fresh TCP connection: lb balances each.
        with grpc.insecure_channel(opts.target, options=[("grpc.use_local_subchannel_pool", 1)]) \
                as ch:
            call = ch.unary_unary(WHO, request_serializer=_identity,
                                  response_deserializer=_identity)
            try:
                names.append(call(b"", timeout=opts.timeout).decode())
            except grpc.RpcError as e:
                names.append(None)
                errors.append(f"{e.code().name}: {e.details()}")
    print(json.dumps({"names": names, "errors": errors}), flush=True)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "who":
        p = argparse.ArgumentParser(prog="grpc_health_server.py who")
        p.add_argument("--target", required=True)
        p.add_argument("--count", type=int, default=1)
        p.add_argument("--timeout", type=float, default=5.0)
        return who(p.parse_args(sys.argv[2:]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--control-port", type=int, default=0)
    p.add_argument("--name", default="grpc")
    p.add_argument("--status", default="SERVING")
    p.add_argument("--unknown", choices=UNKNOWN_MODES, default="message")
    p.add_argument("--mode", choices=MODES, default="health")
    p.add_argument("--cert")
    p.add_argument("--key")
    opts = p.parse_args()
    if bool(opts.cert) != bool(opts.key):
        p.error("--cert and --key go together")
    return serve(opts)


if __name__ == "__main__":
    sys.exit(main())
