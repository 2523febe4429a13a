"""gRPC health checks (check = grpc) against a real gRPC server: Debian's
python3-grpcio serving grpc.health.v1.Health/Check (grpc_health_server.py,
run by Debian's /usr/bin/python3, where python3-grpcio is installed; the
python3 running this test may be another interpreter).

The contract: SERVING passes; NOT_SERVING, UNKNOWN and SERVICE_UNKNOWN
fail with that name as the detail; a grpc-status other than 0 fails with
"CODE NAME: message" (12 UNIMPLEMENTED from a server without the health
service, 5 NOT_FOUND from the grpc libraries' own health service for a
service it does not know); check_grpc_service names the service ("" by
default: the whole server); check_tls = on runs the check over TLS with
ALPN h2 and SNI check_host (check_verify / check_ca as for https), and
cleartext h2c with prior knowledge is the default; a TLS check of an h2c
server, and an h2c check of a TLS server, fail with what was wrong.

The fault table, for gRPC: a crash (SIGKILL) and a hang (SIGSTOP: the
kernel still completes the handshake, so only the protocol check sees it;
a `check = tcp` pool on the same server keeps it in rotation). With
interval I, fall K and timeout T the server leaves between (K-1)*I and
K*I+T after the fault ((K-1)*I+T for a hang). The case prints the line
"grpc removal ..." with the latencies it measured, for the README.

Each test starts its own servers (a server is one process, its port from
harness.free_port) and stops them by pid; the TLS certificate (CN and
subjectAltName grpc.test) is made once for the file."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import harness
from harness import (HC_SLACK, HOST, IO_TIMEOUT, READY_TIMEOUT, TIMER_TICK, LbTestCase,
                     event_time, free_port, health_history, skip_if, transition_streak,
                     wait_for)
from admin_client import Admin, find_server
from test_health_https import make_cert

PYTHON = "/usr/bin/python3"         # Debian's: python3-grpcio is installed for it
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc_health_server.py")

I, T, K = 0.3, 0.2, 2
KEYS = {"check": "grpc", "check_interval": "300ms", "check_timeout": "200ms",
        "rise": 1, "fall": K}
WAIT = 10.0
# Below the window: a probe that started just before the fault and had not
# been answered yet (the Python server takes a few ms per call, more under
# load) fails as if it had started after it; and the ms-truncated ts.
EARLY = 0.1
# check_grpc_service may be as long as conf's CONF_CHECK_NAME_MAX (128):
# its protobuf length takes two bytes of varint from 128 on.
LONG_SERVICE = ("lbtest.long." + "x" * 128)[:128]


def _have_grpcio():
    try:
        return subprocess.run([PYTHON, "-c", "import grpc"], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAVE_GRPCIO = _have_grpcio()


class GrpcServer:
    """grpc_health_server.py as a process of its own (harness.spawn_logged)
    on a port of free_port(), h2c or TLS (tls=(cert, key)); started at once.
    cmd() talks to its control port (see that file's docstring); kill()
    (SIGKILL), hang() (SIGSTOP), resume() (SIGCONT) and stop() (SIGTERM)
    go to its pid."""

    def __init__(self, name, tls=None, args=()):
        self.name = name
        self.tls = tls
        self.args = list(args)
        self.dir = harness.make_tmpdir()
        self.log_path = os.path.join(self.dir, f"grpc-{name}.log")
        self.port = free_port()
        self.addr = f"{HOST}:{self.port}"
        self.proc = None
        self.ctl = None
        self.start()

    def start(self):
        argv = [PYTHON, SERVER, "--port", str(self.port), "--name", self.name] + self.args
        if self.tls:
            argv += ["--cert", self.tls[0], "--key", self.tls[1]]
        offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        self.proc = harness.spawn_logged(argv, self.log_path)

        def ready():
            for line in self.log()[offset:].splitlines():
                if line.startswith("ready "):
                    return json.loads(line[len("ready "):])
            if self.proc.poll() is not None:
                raise AssertionError(f"grpc server {self.name} exited with "
                                     f"{self.proc.returncode}:\n{self.log()[-3000:]}")
            return None
        info = wait_for(ready, READY_TIMEOUT, f"grpc server {self.name}'s ready line")
        if info["port"] != self.port:
            raise AssertionError(f"grpc server {self.name} on {info['port']}, not {self.port}")
        self.ctl = socket.create_connection((HOST, info["control"]), timeout=IO_TIMEOUT)
        self.ctl_file = self.ctl.makefile("rwb")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def cmd(self, line):
        """One control command; returns its JSON answer, fails on an error."""
        try:
            self.ctl_file.write(line.encode() + b"\n")
            self.ctl_file.flush()
            reply = self.ctl_file.readline()
        except OSError as e:
            raise AssertionError(f"grpc server {self.name}: {line!r}: {e}")
        if not reply:
            raise AssertionError(f"grpc server {self.name} closed its control port on "
                                 f"{line!r}\n{self.log()[-3000:]}")
        out = json.loads(reply)
        if not out.get("ok"):
            raise AssertionError(f"grpc server {self.name}: {line!r}: {out.get('error')}")
        return out

    def set(self, service, status):
        """Sets a service's status ("" is the whole server); from the
        answer on, every Check sees it. Returns the wall time."""
        self.cmd(f"set {service or '-'} {status}")
        return time.time()

    def calls(self, service=None):
        """Check calls received: for one service, or the whole answer."""
        out = self.cmd("calls")
        return out if service is None else out["calls"].get(service, 0)

    def wait_probed(self, service="", count=1):
        """Waits until lb has sent `count` more Check calls for service."""
        base = self.calls(service)
        wait_for(lambda: self.calls(service) >= base + count, WAIT,
                 f"{count} Check calls for service {service!r} on {self.name}")

    def _close_ctl(self):
        if self.ctl is not None:
            for f in (self.ctl_file, self.ctl):
                try:
                    f.close()
                except OSError:
                    pass
            self.ctl = None

    def kill(self):
        """A crash: SIGKILL, then wait until its port refuses connects.
        Returns the wall time just before the signal."""
        t = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=READY_TIMEOUT)
        self._close_ctl()
        wait_for(lambda: harness.is_refused(self.port), WAIT, f"{self.name} to refuse")
        return t

    def hang(self):
        """SIGSTOP: connects still complete (the kernel), nothing answers.
        Returns the wall time right after the signal."""
        self.proc.send_signal(signal.SIGSTOP)
        return time.time()

    def resume(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        """SIGCONT and SIGTERM (SIGKILL after a deadline); fails when the
        server ended badly (a traceback, a status other than 0) unless the
        test killed it."""
        self._close_ctl()
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=READY_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=READY_TIMEOUT)
                raise AssertionError(f"grpc server {self.name} ignored SIGTERM")
            if self.proc.returncode != 0 or "Traceback" in self.log():
                raise AssertionError(f"grpc server {self.name} ended with "
                                     f"{self.proc.returncode}:\n{self.log()[-3000:]}")


def who(port, count):
    """count gRPC clients, one after the other, each a fresh connection to
    lb's frontend on port: the names of the servers that answered (None:
    that call failed)."""
    p = subprocess.run([PYTHON, SERVER, "who", "--target", f"{HOST}:{port}",
                        "--count", str(count), "--timeout", "5"],
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"grpc client failed: {p.stderr.decode(errors='replace')[-2000:]}")
    return json.loads(p.stdout.decode().splitlines()[-1])["names"]


def checks(lb, pool, server=None, result=None, after=0.0):
    return [e for e in lb.events("check", pool=pool)
            if (server is None or e.get("server") == server)
            and event_time(e) > after and result in (None, e.get("result"))]


def changes(lb, event, pool, server=None, after=0.0):
    return [e for e in lb.events(event, pool=pool)
            if (server is None or e.get("server") == server) and event_time(e) > after]


def measured(what, seconds):
    print(f"measured: {what} {seconds * 1000:.0f} ms", file=sys.stderr)


@skip_if(not HAVE_GRPCIO, f"python3-grpcio is not installed for {PYTHON} "
                          "(apt-get install python3-grpcio)")
class GrpcCheckTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.cert_dir = harness.make_tmpdir()
        cls.cert, cls.key = make_cert(cls.cert_dir, "grpc", cn="grpc.test")
        cls.other_ca, _ = make_cert(cls.cert_dir, "other", cn="grpc.test")

    def server(self, name, tls=False, args=()):
        s = GrpcServer(name, tls=(self.cert, self.key) if tls else None, args=args)
        self.addCleanup(s.stop)
        return s

    def start(self, pools, **opts):
        admin_port = free_port()
        lb = self.lb_pools(pools, log_level="debug", admin_port=admin_port, **opts)
        lb.admin = Admin(admin_port)
        return lb

    def wait_detail(self, lb, pool, result, detail, server=None, after=0.0):
        """Waits for a check of pool with that result and detail (a str:
        the whole detail; a tuple: its start and its end; None: any
        non-empty detail); returns the event."""
        def matches(d):
            if detail is None:
                return d != ""
            if isinstance(detail, tuple):
                return d.startswith(detail[0]) and d.endswith(detail[1])
            return d == detail

        def found():
            for e in checks(lb, pool, server, result, after):
                if matches(e.get("detail", "")):
                    return e
            return None
        try:
            return wait_for(found, WAIT, f"pool {pool}: a check {result} with {detail!r}")
        except AssertionError:
            seen = [(e.get("result"), e.get("detail")) for e in checks(lb, pool, server)][-5:]
            raise AssertionError(f"pool {pool}: no check {result} with {detail!r}; "
                                 f"the last ones: {seen}\n{lb.log_tail()}") from None

    def stats_server(self, lb, pool, server):
        return find_server(lb.admin.stats(), pool, server)

    def wait_state(self, lb, pool, server, state, detail=None):
        """Waits until /stats shows the server in that state (and, if given,
        with that last_check detail); returns the server object."""
        def ok(s):
            lc = s.get("last_check") or {}
            return s["state"] == state and (detail is None or lc.get("detail") == detail)
        return lb.admin.wait_server(pool, server, ok, WAIT,
                                    f"{pool}/{server} {state} with detail {detail!r}")

    # ----------------------------------------------------- rotation by status

    def test_serving_switch(self):
        """Two servers; one switched to NOT_SERVING leaves the rotation
        (gRPC clients through lb reach only the other) and comes back when
        SERVING again. lb asks for the whole server (service "")."""
        a, b = self.server("a"), self.server("b")
        lb = self.start([("p", [("a", a.addr), ("b", b.addr)], KEYS)])
        port = lb.ports["p"]
        for s in ("a", "b"):
            self.wait_detail(lb, "p", "passed", "SERVING", server=s)
            srv = self.wait_state(lb, "p", s, "up", "SERVING")
            self.assertEqual((srv["check"], srv["health"]), ("grpc", "up"), srv)
            self.assertEqual(srv["last_check"]["result"], "passed", srv)
        self.assertGreater(a.calls(""), 0, "lb's Check did not ask for service \"\"")
        self.assertEqual(set(a.calls()["calls"]), {""}, a.calls())
        self.assertEqual(set(who(port, 6)), {"a", "b"}, "clients before the switch")

        t = a.set("", "NOT_SERVING")
        wait_for(lambda: changes(lb, "server_down", "p", "a", t), WAIT, "a to go down")
        down = changes(lb, "server_down", "p", "a", t)[0]
        self.assertEqual(down.get("reason"), "NOT_SERVING", down)
        self.assertEqual(down.get("failures"), str(K), down)
        hist = health_history(lb, "p", "a")
        self.assertIsNone(transition_streak(
            hist, next(e for e in hist if e["event"] == "server_down"), K))
        for e in checks(lb, "p", "a", "failed"):
            self.assertEqual(e.get("detail"), "NOT_SERVING", e)
        srv = self.wait_state(lb, "p", "a", "down", "NOT_SERVING")
        self.assertEqual((srv["health"], srv["last_check"]["result"]), ("down", "failed"), srv)
        self.assertEqual(self.stats_server(lb, "p", "b")["state"], "up")
        wait_for(lambda: set(who(port, 4)) == {"b"}, WAIT,
                 "clients to reach only b while a is NOT_SERVING")

        t = a.set("", "SERVING")
        wait_for(lambda: changes(lb, "server_up", "p", "a", t), WAIT, "a to come back")
        up = changes(lb, "server_up", "p", "a", t)[0]
        self.assertEqual(up.get("reason"), "SERVING", up)
        self.wait_state(lb, "p", "a", "up", "SERVING")
        wait_for(lambda: "a" in who(port, 4), WAIT, "clients to reach a again")
        self.assertFalse(lb.events("server_down", server="b"), "b went down")
        lb.assert_running()

    def test_statuses_and_services(self):
        """Each serving status of a named service (check_grpc_service), in
        the message; a service the server does not know: SERVICE_UNKNOWN in
        the message, or grpc-status 5 NOT_FOUND from a server that answers
        as the grpc libraries' health services do. A 128-byte service name
        (the longest conf takes: two bytes of protobuf length) reaches the
        server whole."""
        s = self.server("s")
        nf = self.server("nf", args=["--unknown", "not_found"])
        named = "lbtest.Named"
        s.set(named, "SERVING")
        s.set(LONG_SERVICE, "SERVING")
        lb = self.start([
            ("named", [("s", s.addr)], dict(KEYS, check_grpc_service=named)),
            ("long", [("s", s.addr)], dict(KEYS, check_grpc_service=LONG_SERVICE)),
            ("missing", [("s", s.addr)], dict(KEYS, check_grpc_service="lbtest.Missing")),
            ("notfound", [("nf", nf.addr)], dict(KEYS, check_grpc_service="lbtest.Missing")),
            ("whole", [("nf", nf.addr)], KEYS),
        ])
        self.wait_detail(lb, "named", "passed", "SERVING")
        self.wait_detail(lb, "long", "passed", "SERVING")
        self.assertGreater(s.calls(LONG_SERVICE), 0, s.calls())
        self.wait_detail(lb, "missing", "failed", "SERVICE_UNKNOWN")
        self.wait_detail(lb, "notfound", "failed", "5 NOT_FOUND: unknown service")
        self.wait_detail(lb, "whole", "passed", "SERVING")
        for pool, server, detail in (("missing", "s", "SERVICE_UNKNOWN"),
                                     ("notfound", "nf", "5 NOT_FOUND: unknown service")):
            srv = self.wait_state(lb, pool, server, "down", detail)
            self.assertEqual(srv["health"], "down", srv)
        self.assertEqual(s.calls()["calls"].get(""), None,
                         "a pool with check_grpc_service asked for the whole server")
        self.assertGreater(nf.calls("lbtest.Missing"), 0)

        for status in ("NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN"):
            t = s.set(named, status)
            self.wait_detail(lb, "named", "failed", status, after=t)
            self.wait_state(lb, "named", "s", "down", status)
            t = s.set(named, "SERVING")
            self.wait_detail(lb, "named", "passed", "SERVING", after=t)
            self.wait_state(lb, "named", "s", "up", "SERVING")
        # A status outside the enum fails too (a newer server's value).
        t = s.set(named, 7)
        e = self.wait_detail(lb, "named", "failed", None, after=t)
        self.assertIn("7", e["detail"], e)
        s.set(named, "SERVING")
        for pool in ("long", "whole"):
            self.assertFalse(lb.events("server_down", pool=pool), pool)
        lb.assert_running()

    def test_unimplemented(self):
        """A gRPC server without the health service: grpc-status 12."""
        s = self.server("u", args=["--mode", "unimplemented"])
        lb = self.start([("p", [("u", s.addr)], KEYS)])
        e = self.wait_detail(lb, "p", "failed", ("12 UNIMPLEMENTED", ""))
        self.assertTrue(e["detail"].startswith("12 UNIMPLEMENTED: "), e)
        down = lb.wait_event("server_down", timeout=WAIT, pool="p", server="u")[0]
        self.assertTrue(down.get("reason", "").startswith("12 UNIMPLEMENTED"), down)
        srv = self.wait_state(lb, "p", "u", "down")
        self.assertTrue(srv["last_check"]["detail"].startswith("12 UNIMPLEMENTED"), srv)
        self.assertGreater(s.calls("?"), 0, "the server saw no Check call")
        # The health service registered again: the server passes.
        s.cmd("mode health")
        t = time.time()
        self.wait_detail(lb, "p", "passed", "SERVING", after=t)
        lb.wait_event("server_up", timeout=WAIT, pool="p", server="u")
        lb.assert_running()

    # ---------------------------------------------------------------- TLS

    def test_h2c_and_tls(self):
        """h2c (the default) and TLS (check_tls = on, SNI check_host,
        verified against check_ca, or not verified) pass; verification
        against another CA or name fails; TLS to an h2c server and h2c to a
        TLS server fail with what was wrong, not by the timeout."""
        plain = self.server("plain")
        tls = self.server("tls", tls=True)
        lb = self.start([
            ("h2c", [("plain", plain.addr)], KEYS),
            ("tls", [("tls", tls.addr)],
             dict(KEYS, check_tls="on", check_host="grpc.test", check_verify="on",
                  check_ca=self.cert)),
            ("tls_noverify", [("tls", tls.addr)],
             dict(KEYS, check_tls="on", check_host="grpc.test")),
            ("badca", [("tls", tls.addr)],
             dict(KEYS, check_tls="on", check_host="grpc.test", check_verify="on",
                  check_ca=self.other_ca)),
            ("badname", [("tls", tls.addr)],
             dict(KEYS, check_tls="on", check_host="wrong.test", check_verify="on",
                  check_ca=self.cert)),
            ("h2c_to_tls", [("tls", tls.addr)], KEYS),
            ("tls_to_h2c", [("plain", plain.addr)],
             dict(KEYS, check_tls="on", check_host="grpc.test")),
        ])
        for pool in ("h2c", "tls", "tls_noverify"):
            self.wait_detail(lb, pool, "passed", "SERVING")
        wait_for(lambda: tls.calls()["tls_calls"] >= 2, WAIT, "Check calls over TLS")
        tls_calls = tls.calls()
        self.assertEqual(tls_calls["tls_calls"], tls_calls["total"],
                         f"a Check reached the TLS server in the clear: {tls_calls}")
        self.assertEqual(plain.calls()["tls_calls"], 0)

        details = {}
        for pool, server in (("badca", "tls"), ("badname", "tls"), ("h2c_to_tls", "tls"),
                             ("tls_to_h2c", "plain")):
            down = lb.wait_event("server_down", timeout=WAIT, pool=pool, server=server)[0]
            self.assertEqual(down.get("failures"), "1", down)
            wait_for(lambda: len(checks(lb, pool, server)) >= 3, WAIT, f"3 checks of {pool}")
            for e in checks(lb, pool, server):
                self.assertEqual(e["result"], "failed", e)
                self.assertTrue(e.get("detail"), f"{pool}: a failure without detail: {e}")
                self.assertNotIn("timeout", e["detail"].lower(),
                                 f"{pool}: failed by the timeout, not by what was wrong: {e}")
            details[pool] = down.get("reason")
            srv = self.wait_state(lb, pool, server, "down")
            self.assertTrue(srv["last_check"]["detail"], srv)
        print(f"measured: grpc TLS failure details {details}", file=sys.stderr)
        for pool in ("badca", "badname"):
            reason = details[pool].lower()
            self.assertTrue(any(w in reason for w in ("tls", "certificate", "verif")),
                            f"{pool}: the reason should name TLS or the certificate: "
                            f"{details[pool]!r}")
        for pool in ("h2c", "tls", "tls_noverify"):
            self.assertFalse(lb.events("server_down", pool=pool), pool)
        lb.assert_running()

    # -------------------------------------------------------- fault table

    def test_crash_and_hang(self):
        """The fault table of the README, for gRPC, over h2c and over TLS:
        a hang (SIGSTOP) and then a crash (SIGKILL) of each server, timed
        from the fault to server_down; a tcp pool on the h2c server keeps
        the hung server in."""
        plain = self.server("plain")
        tls = self.server("tls", tls=True)
        tls_keys = dict(KEYS, check_tls="on", check_host="grpc.test", check_verify="on",
                        check_ca=self.cert)
        servers = {"h2c": plain, "tls": tls}
        lb = self.start([("h2c", [("s", plain.addr)], KEYS),
                         ("tls", [("s", tls.addr)], tls_keys),
                         ("tcp", [("s", plain.addr)], dict(KEYS, check="tcp"))])
        for pool in servers:
            self.wait_detail(lb, pool, "passed", "SERVING")
        wait_for(lambda: all(len(checks(lb, p, result="passed")) >= 2
                             for p in ("h2c", "tls", "tcp")), WAIT, "2 passes of each pool")
        settled = time.time()
        hang_lo, hang_hi = (K - 1) * I + T - EARLY, K * I + T + HC_SLACK
        crash_lo, crash_hi = (K - 1) * I - EARLY - TIMER_TICK, K * I + T + HC_SLACK
        latency = {}
        problems = []

        hung = {}
        try:
            for pool, srv in servers.items():
                hung[pool] = srv.hang()
            for pool in servers:
                wait_for(lambda: changes(lb, "server_down", pool, after=settled), WAIT,
                         f"{pool} to take the hung server out")
                down = changes(lb, "server_down", pool, after=settled)[0]
                self.assertTrue(down.get("reason", "").startswith(
                    f"timeout after {int(T * 1000)} ms waiting for "), down)
                hist = health_history(lb, pool, "s")
                d = next(e for e in hist if e["event"] == "server_down"
                         and event_time(e) > settled)
                streak = transition_streak(hist, d, K)
                if streak:
                    problems.append(f"{pool} hang: {streak}")
                latency[(pool, "hang")] = event_time(down) - hung[pool]
                measured(f"grpc {pool} hang -> out ({down.get('reason')})",
                         latency[(pool, "hang")])
            last_down = max(event_time(changes(lb, "server_down", p, after=settled)[0])
                            for p in servers)
            # The kernel still completes the handshake: the tcp check passes.
            wait_for(lambda: len(checks(lb, "tcp", result="passed", after=last_down)) >= 3,
                     WAIT, "3 more tcp passes of the hung server")
            self.assertFalse(changes(lb, "server_down", "tcp", after=settled),
                             "check = tcp took a hung server out")
        finally:
            for srv in servers.values():
                srv.resume()
        for pool in servers:
            wait_for(lambda: changes(lb, "server_up", pool, after=settled), WAIT,
                     f"{pool} to take the server back after SIGCONT")
        settled = time.time()

        for pool, srv in servers.items():
            t_kill = srv.kill()
            wait_for(lambda: changes(lb, "server_down", pool, after=settled), WAIT,
                     f"{pool} to take the crashed server out")
            down = changes(lb, "server_down", pool, after=settled)[0]
            self.assertEqual(down.get("reason"), "connect: connection refused", down)
            latency[(pool, "crash")] = event_time(down) - t_kill
            measured(f"grpc {pool} crash -> out", latency[(pool, "crash")])
        wait_for(lambda: changes(lb, "server_down", "tcp", after=settled), WAIT,
                 "tcp to take the crashed server out")

        for (pool, fault), lat in sorted(latency.items()):
            lo, hi = (hang_lo, hang_hi) if fault == "hang" else (crash_lo, crash_hi)
            if not lo <= lat <= hi:
                problems.append(f"{pool} {fault}: out {lat * 1000:.0f} ms after the fault, "
                                f"not in [{lo * 1000:.0f}, {hi * 1000:.0f}]")
        ms = {k: f"{v * 1000:.0f}" for k, v in latency.items()}
        print(f"\ngrpc removal h2c crash={ms[('h2c', 'crash')]} ms hang={ms[('h2c', 'hang')]} ms; "
              f"tls crash={ms[('tls', 'crash')]} ms hang={ms[('tls', 'hang')]} ms; "
              f"window crash=[{(K - 1) * I * 1000:.0f}, {(K * I + T) * 1000:.0f}] "
              f"hang=[{((K - 1) * I + T) * 1000:.0f}, {(K * I + T) * 1000:.0f}] ms "
              f"(check_interval {I * 1000:.0f} ms, check_timeout {T * 1000:.0f} ms, fall {K}"
              f"{', ASan build' if harness.SANITIZED else ''})", flush=True)
        self.assertFalse(problems, "\n".join(problems))
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
