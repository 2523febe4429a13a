"""lb -x: a new process takes over from the running one through [global]
control_socket, without a refused connection and without forgetting.

- the new process gets the listening sockets (the same kernel sockets, so
  nothing queued on them is lost), the admin port and the control socket;
- every server keeps its state: down stays down with no "first probe
  decides", disabled stays disabled, the guard holds the same server, a
  heartbeat's "fail" keeps its server out, the admin API's members and
  weights are in the pools from the first connection on;
- the new process does not probe the pool in one burst: servers whose
  state came along are first probed at random points of their interval;
- the old process stops accepting, lets its open connections finish and
  exits; new connections at 200/s during the hand-over all succeed;
- SIGUSR2 starts the binary anew from disk with -x (the upgrade path under
  systemd): the new process tells $NOTIFY_SOCKET its MAINPID;
- what cannot work is refused with the reason, and a new process that
  fails leaves the old one serving as before."""

import datetime
import json
import os
import signal
import socket
import sys
import threading
import time

import harness
from admin_client import Admin, find_server, make_admin_config
from harness import LbTestCase, wait_for

WAIT = 10.0
CHECK = {"check": "tcp", "check_interval": "300ms", "check_timeout": "200ms", "rise": 2,
         "fall": 2, "min_servers": 0}


def log_time(ev):
    return datetime.datetime.strptime(ev["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def stop_pid(pid, timeout=10.0):
    """SIGTERM to a process that is not our child (the new process of an
    upgrade), then waits until it is gone or a zombie nobody reaps."""
    def gone():
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    if gone():
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        wait_for(gone, timeout, f"pid {pid} to exit")
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        raise


class PacedLoad:
    """Calls one() `rate` times per second from a thread, until stop() or
    for limit_s at most."""

    def __init__(self, rate, limit_s):
        self.rate, self.limit_s = rate, limit_s
        self.stop_ev = threading.Event()
        self.thread = harness.Thread(self._run)
        self.thread.start()

    def _run(self):
        start = time.monotonic()
        n = 0
        while not self.stop_ev.is_set() and time.monotonic() - start < self.limit_s:
            self.one()
            n += 1
            delay = start + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=10)


class Load(PacedLoad):
    """New connections, each reading the backend's name: how many were
    served and which failed (and how)."""

    def __init__(self, port, rate=200, limit_s=20.0):
        self.port = port
        self.ok, self.failed = 0, []
        super().__init__(rate, limit_s)

    def one(self):
        try:
            name = harness.fetch_name(self.port, timeout=2.0)
            if name:
                self.ok += 1
            else:
                self.failed.append("empty answer")
        except OSError as e:
            self.failed.append(repr(e))


class UdpNamed:
    """A UDP server on 127.0.0.1 that answers each datagram with its name."""

    def __init__(self, name):
        self.name = name.encode()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((harness.HOST, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop_ev = threading.Event()
        self.thread = harness.Thread(self._run)
        self.thread.start()

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                _, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            self.sock.sendto(self.name, peer)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=5)
        self.sock.close()


class UdpLoad(PacedLoad):
    """A query from a fresh client port each time, asked again once after
    300 ms without an answer (as a DNS client does): how many were answered
    at once, after the second try, or never."""

    def __init__(self, port, rate=200, limit_s=20.0):
        self.port = port
        self.ok, self.retried, self.lost = 0, 0, 0
        super().__init__(rate, limit_s)

    def one(self):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
            c.settimeout(0.3)
            for attempt in range(2):
                c.sendto(b"q", (harness.HOST, self.port))
                try:
                    if c.recv(100) in (b"a", b"b"):
                        if attempt == 0:
                            self.ok += 1
                        else:
                            self.retried += 1
                        return
                except socket.timeout:
                    pass
        self.lost += 1


class TakeoverTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.dir = harness.make_tmpdir()
        self.sock = os.path.join(self.dir, "lb.sock")

    def config(self, pools, **kw):
        kw.setdefault("shutdown_timeout", "10s")
        text, admin_port, fports = make_admin_config(pools, control_socket=self.sock, **kw)
        return text, admin_port, fports

    def write(self, name, text):
        """A config file of this case's directory; its path."""
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, text, admin_port, fports, args=(), **kw):
        lb = self.start_lb(text, args=args, **kw)
        lb.admin, lb.admin_port, lb.fports = Admin(admin_port), admin_port, fports
        return lb

    def takeover(self, text, admin_port, fports, **kw):
        """lb -x with text; returns the new lb once it has said "go"."""
        new = self.start(text, admin_port, fports, args=["-x"], **kw)
        new.wait_event("takeover", role="new")
        return new

    def test_state_members_and_guard_carry_over(self):
        a, b = self.named("a"), self.named("b")
        c, g1, g2 = self.refused(), self.refused(), self.refused()
        d, h = self.named("d"), self.named("h")
        text, admin_port, fports = self.config([
            ("web", [("a", a.port), ("b", b.port), ("c", c.port)], CHECK),
            ("g", [("g1", g1.port), ("g2", g2.port)], dict(CHECK, min_servers=1)),
            ("hb", [("h", h.port)], dict(CHECK, heartbeat_ttl="30s")),
        ])
        old = self.start(text, admin_port, fports)
        old.wait_event("server_down", server="c")
        old.admin.wait_stats(lambda st: find_server(st, "g", "g1")["health"] == "down" and
                             find_server(st, "g", "g2")["health"] == "down", WAIT, "g1, g2 down")
        self.assertEqual(old.admin.action("web", "b", "disable").status, 200)
        r = old.admin.post("/pools/web/servers", body=json.dumps(
            {"name": "d", "address": f"{harness.HOST}:{d.port}", "weight": 3}),
            headers={"Content-Type": "application/json"})
        self.assertEqual(r.status, 201, str(r))
        old.admin.wait_server("web", "d", lambda s: s["state"] == "up", WAIT, "d up")
        # h passes its probes but said it fails: out, and must stay out
        old.admin.wait_server("hb", "h", lambda s: s["state"] == "up", WAIT, "h up")
        r = old.admin.post("/pools/hb/servers/h/heartbeat", body=b'{"status":"fail"}')
        self.assertEqual(r.status, 200, str(r))
        old.admin.wait_server("hb", "h", lambda s: s["state"] == "down", WAIT, "h down")
        st = old.admin.stats()
        held = [s for s in ("g1", "g2") if find_server(st, "g", s)["guarded"]]
        self.assertEqual(len(held), 1, st)

        new = self.takeover(text, admin_port, fports)
        ev = new.events("takeover_state")[0]
        self.assertEqual((ev["servers"], ev["applied"], ev["unreadable"]), ("7", "7", "0"), ev)
        old.wait_exit()
        st = new.admin.stats()
        got = {s: (find_server(st, "web", s)["state"], find_server(st, "web", s)["admin"])
               for s in ("a", "b", "c", "d")}
        self.assertEqual(got, {"a": ("up", "none"), "b": ("disabled", "disable"),
                               "c": ("down", "none"), "d": ("up", "none")})
        self.assertEqual(find_server(st, "web", "d")["weight"], 3)
        self.assertEqual([s for s in ("g1", "g2") if find_server(st, "g", s)["guarded"]], held)
        h_now = find_server(st, "hb", "h")
        self.assertEqual((h_now["state"], h_now["heartbeat"]["status"]), ("down", "fail"), h_now)
        names = [harness.fetch_name(new.fports["fe_web"]) for _ in range(8)]
        self.assertEqual(sorted(set(names)), ["a", "d"], names)
        self.assertEqual(names.count("d"), 6, f"weight 3 against 1: {names}")
        # c was down already: no transition, however many probes come
        new.admin.wait_server("web", "c", lambda s: s["checks_total"] >= 3, WAIT, "3 probes of c")
        self.assertEqual(new.events("server_down"), [])
        self.assertEqual(new.events("server_up"), [])
        # the next upgrade goes through the socket the new one took over
        newer = self.takeover(text, admin_port, fports)
        new.wait_exit()
        self.assertEqual(find_server(newer.admin.stats(), "web", "b")["admin"], "disable")
        newer.stop()
        self.assertFalse(os.path.exists(self.sock), "the last process leaves no socket behind")

    def test_no_probe_burst(self):
        backends = [self.named(f"s{i}") for i in range(20)]
        interval = 2.0
        text, admin_port, fports = self.config([(
            "web", [(f"s{i}", b.port) for i, b in enumerate(backends)],
            dict(CHECK, check_interval="2s", check_timeout="500ms", rise=1, fall=1))])
        old = self.start(text, admin_port, fports)
        old.admin.wait_stats(lambda st: all(s["state"] == "up" for s in st["pools"][0]["servers"]),
                             WAIT, "all up")
        new = self.takeover(text, admin_port, fports)
        went = log_time(new.events("takeover", role="new")[0])
        st = new.admin.stats()
        elapsed = time.time() - went
        probed = sum(s["checks_total"] for s in st["pools"][0]["servers"])
        # spread over 2 s: about 20 * elapsed / 2 probes so far; a burst is 20
        print(f"measured: {probed} of 20 servers probed in the new process's first "
              f"{elapsed * 1000:.0f} ms", file=sys.stderr)
        self.assertLess(elapsed, 0.5, "stats came too late to tell")
        self.assertLessEqual(probed, 10, f"{probed} of 20 probed within {elapsed:.3f} s")
        # and every one within its first interval
        new.admin.wait_stats(lambda st: all(s["checks_total"] >= 1
                                            for s in st["pools"][0]["servers"]),
                             interval + 1.0, "every server probed within its interval")
        self.assertLess(time.time() - went, interval + 0.5)
        old.wait_exit()

    def test_no_refused_connection_and_open_ones_finish(self):
        a, b, e = self.named("a"), self.named("b"), self.echo()
        text, admin_port, fports = self.config(
            [("web", [("a", a.port), ("b", b.port)], CHECK), ("echo", [("e", e.port)], {})])
        old = self.start(text, admin_port, fports)
        held = socket.create_connection((harness.HOST, fports["fe_echo"]), timeout=5)
        self.addCleanup(held.close)
        self.assertEqual(harness.roundtrip(held, b"before"), b"before")
        load = Load(fports["fe_web"], rate=200)
        wait_for(lambda: load.ok >= 100, WAIT, "100 connections before the hand-over")
        new = self.takeover(text, admin_port, fports)
        old.wait_event("takeover", role="old")
        n_at = load.ok
        wait_for(lambda: load.ok >= n_at + 200, WAIT, "200 connections after the hand-over")
        load.stop()
        asked = log_time(old.events("takeover_asked")[0])
        went = log_time(new.events("takeover", role="new")[0])
        print(f"measured: hand-over in {(went - asked) * 1000:.0f} ms (asked to go); "
              f"{len(load.failed)} of {load.ok + len(load.failed)} connections at 200/s failed",
              file=sys.stderr)
        self.assertEqual(load.failed, [], f"{len(load.failed)} of {load.ok + len(load.failed)}")
        # the old process drains: the open connection still works through it
        self.assertTrue(old.running(), "old process exited with a connection open")
        self.assertEqual(harness.roundtrip(held, b"after"), b"after")
        served_new = new.admin.stats()["frontends"]
        self.assertGreater(sum(f["total_connections"] for f in served_new), 100, served_new)
        held.close()
        self.assertEqual(old.wait_exit(), 0)
        self.assertEqual(harness.fetch_name(fports["fe_web"]) in ("a", "b"), True)

    def test_udp_sockets_are_handed_over(self):
        """The UDP sockets go to the new process with the TCP ones: queries
        at 200/s through the hand-over are all answered (a query the old
        process had in flight as it stopped is asked again, as DNS clients
        do); the flows stay behind."""
        a, b = UdpNamed("a"), UdpNamed("b")
        self.addCleanup(a.stop)
        self.addCleanup(b.stop)
        udp_port = harness.free_port()
        text, admin_port, fports = self.config([("web", [("a", a.port), ("b", b.port)], {})])
        text += (f"\n[frontend dns]\nlisten = {harness.HOST}:{udp_port}\nprotocol = udp\n"
                 f"pool = web\nudp_responses = 1\n")
        old = self.start(text, admin_port, fports)
        load = UdpLoad(udp_port, rate=200)
        wait_for(lambda: load.ok >= 100, WAIT, "100 queries before the hand-over")
        new = self.takeover(text, admin_port, fports)
        old.wait_event("takeover", role="old")
        n_at = load.ok
        wait_for(lambda: load.ok >= n_at + 200, WAIT, "200 queries after the hand-over")
        load.stop()
        print(f"measured: {load.ok} queries answered at once, {load.retried} on the second "
              f"try, {load.lost} lost, through the hand-over at 200/s", file=sys.stderr)
        self.assertEqual(load.lost, 0)
        self.assertLessEqual(load.retried, 2, "more than the queries in flight at the stop")
        self.assertEqual(old.wait_exit(), 0)
        udp = new.admin.stats()["frontends"][1]["udp"]
        self.assertGreaterEqual(udp["flows_total"], 200, udp)
        self.assertEqual(udp["flows"], 0, udp)

    def test_sigusr2_starts_the_new_binary_which_tells_systemd(self):
        a = self.named("a")
        notify_path = os.path.join(self.dir, "notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(WAIT)
        self.addCleanup(notify.close)
        text, admin_port, fports = self.config([("web", [("a", a.port)], {})])
        old = self.start(text, admin_port, fports, env={"NOTIFY_SOCKET": notify_path})
        self.assertEqual(notify.recv(256), b"READY=1")
        old.send_signal(signal.SIGUSR2)
        msg = notify.recv(256).decode()
        self.assertRegex(msg, r"^MAINPID=\d+\nREADY=1$")
        pid = int(msg.split("\n")[0].split("=")[1])
        self.addCleanup(stop_pid, pid)
        self.assertNotEqual(pid, old.pid)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")[:-1]
        self.assertEqual(argv[0], os.path.realpath(harness.LB_BIN).encode())
        self.assertEqual(argv[1:], [b"-c", os.path.realpath(old.config_path).encode(), b"-x"])
        # both processes log to the old one's stderr: the new one inherited it
        ev = old.wait_event("upgrade")[0]
        self.assertEqual(ev["binary"], os.path.realpath(harness.LB_BIN))
        old.wait_event("takeover", role="new")
        self.assertEqual(old.wait_exit(), 0)
        self.assertEqual(harness.fetch_name(fports["fe_web"]), "a")
        stop_pid(pid)
        # without control_socket there is nothing to hand over to
        plain, admin2, fports2 = make_admin_config([("web", [("a", a.port)], {})])
        lone = self.start(plain, admin2, fports2)
        lone.send_signal(signal.SIGUSR2)
        ev = lone.wait_event("upgrade_refused")[0]
        self.assertEqual(ev["reason"], "control_socket is not set")
        lone.assert_running()

    def test_refusals_and_a_failed_new_process(self):
        a = self.named("a")
        # -x needs control_socket
        plain, _, _ = make_admin_config([("web", [("a", a.port)], {})])
        path = self.write("plain.ini", plain)
        code, _, err = harness.run_lb(["-c", path, "-x"])
        self.assertEqual(code, 1)
        self.assertIn("-x takes over through [global] control_socket, which is not set", err)
        # nobody to take over from
        text, admin_port, fports = self.config([("web", [("a", a.port)], {})])
        path = self.write("x.ini", text)
        code, _, err = harness.run_lb(["-c", path, "-x"])
        self.assertEqual(code, 1)
        self.assertIn("event=takeover_failed", err)
        self.assertIn("No such file or directory (is lb running there?)", err)

        old = self.start(text, admin_port, fports)
        # a second lb (other ports) on the same control socket
        other, _, _ = self.config([("web", [("a", a.port)], {})])
        path = self.write("other.ini", other)
        code, _, err = harness.run_lb(["-c", path])
        self.assertEqual(code, 1)
        self.assertIn("another lb answers there (lb -x takes over from it)", err)

        # a new config that cannot start: a frontend on a port in use
        busy = socket.socket()
        busy.bind((harness.HOST, 0))
        busy.listen()
        self.addCleanup(busy.close)
        bad = text + f"\n[frontend extra]\nlisten = {harness.HOST}:{busy.getsockname()[1]}\n" \
                     "pool = web\n"
        failed = self.start(bad, admin_port, fports, args=["-x"], wait_ready=False,
                            allowed_errors=("start_failed",))
        self.assertEqual(failed.wait_exit(), 1)
        failed.expect_status = 1
        self.assertIn("is already in use", failed.log())
        old.wait_event("takeover_aborted")
        self.assertEqual(harness.fetch_name(fports["fe_web"]), "a")
        self.assertEqual(old.admin.get("/ready").status, 200)
        # and the old one can still hand over
        new = self.takeover(text, admin_port, fports)
        self.assertEqual(old.wait_exit(), 0)
        self.assertEqual(new.admin.get("/ready").status, 200)


if __name__ == "__main__":
    harness.main()
