"""Agent checks (`agent_port=N` on a server line, HAProxy's agent-check)
against a real agent: agent_server.py, a process of its own whose reply a
test switches through its control port, one process for the whole class
(each test resets it and starts its own lb).

The contract: every agent_interval lb connects to the server's address at
agent_port, writes agent_send if set, and reads one line of words (spaces,
tabs or commas between them, any case; the agent's close ends the line
too): up|ready|down|drain|maint, N%, maxconn:N, #note.
- N% multiplies the server's share (/stats "share", "effective_weight");
- maxconn:N is its max_connections, live (0: no limit);
- down takes it out as a failing probe does (server_down reason="agent:
  down"), and the minimum-pool guard may hold it;
- drain takes it out as an operator's drain (connections finish;
  server_maintenance reason="agent: drain"), maint as an operator's
  disable (connections closed at once; reason="agent: maint");
- up and ready lift only the agent's own earlier word, never a failing
  probe (haproxy/haproxy#1176);
- an unreachable, late or unreadable agent (refused, hung, an unknown word,
  a line too long, a close without a byte) changes nothing: the last
  verdict stays and /stats "agent" shows the failure's detail.

Checks and replies every 300 ms (agent_timeout 200 ms), so each step takes
a fraction of a second; every wait has a deadline. "Stays" is judged over
several more agent replies (the agent object's "total"), each /stats poll
in between checked."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import admin_client
import harness
from admin_client import find_pool, find_server
from harness import HOST, IO_TIMEOUT, READY_TIMEOUT, LbTestCase, event_time, wait_for
from test_removal_drain import StreamBackend, open_stream, who

AGENT_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_server.py")
AGENT = {"agent_interval": "300ms", "agent_timeout": "200ms"}
WAIT = 10.0
PROMPT = 1.0            # "at once": a maint's close reaches the client within this
STAYS = 3               # agent replies over which "nothing changes" is judged

TIMEOUT_DETAIL = "timeout after 200 ms waiting for the agent's reply"
REFUSED_DETAIL = "connect: connection refused"
UNKNOWN_DETAIL = 'agent reply: unknown word "fast"'
LONG_DETAIL = "agent reply longer than 256 bytes"
CLOSED_DETAIL = "agent closed the connection without a reply"


class AgentServer:
    """agent_server.py as a process of its own (harness.spawn_logged),
    started at once. cmd() talks to its control port (see that file's
    docstring); stop() ends it by pid (SIGTERM) and fails when it ended
    badly."""

    def __init__(self):
        self.dir = harness.make_tmpdir()
        self.log_path = os.path.join(self.dir, "agent.log")
        self.proc = harness.spawn_logged([sys.executable, AGENT_SERVER], self.log_path)

        def ready():
            for line in self.log().splitlines():
                if line.startswith("ready "):
                    return json.loads(line[len("ready "):])
            if self.proc.poll() is not None:
                raise AssertionError(f"agent_server exited with {self.proc.returncode}:\n"
                                     f"{self.log()[-3000:]}")
            return None
        info = wait_for(ready, READY_TIMEOUT, "agent_server's ready line")
        if info["pid"] != self.proc.pid:
            raise AssertionError(f"agent_server's ready line names pid {info['pid']}, "
                                 f"not {self.proc.pid}")
        self.port = info["port"]
        self.ctl = socket.create_connection((HOST, info["control"]), timeout=IO_TIMEOUT)
        self.ctl_file = self.ctl.makefile("rwb")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def cmd(self, line):
        """One control command; returns its JSON answer, fails on an error.
        It has taken effect when it returns: the next connection the agent
        accepts sees it."""
        try:
            self.ctl_file.write(line.encode("latin-1") + b"\n")
            self.ctl_file.flush()
            reply = self.ctl_file.readline()
        except OSError as e:
            raise AssertionError(f"agent_server: {line!r}: {e}")
        if not reply:
            raise AssertionError(f"agent_server closed its control port on {line!r}\n"
                                 f"{self.log()[-3000:]}")
        out = json.loads(reply)
        if not out.get("ok"):
            raise AssertionError(f"agent_server: {line!r}: {out.get('error')}")
        return out

    def say(self, text):
        """From now on every connection gets text + "\\n"."""
        self.cmd(f"mode line {text}")

    def mode(self, mode):
        self.cmd(f"mode {mode}")

    def calls(self):
        return self.cmd("calls")

    def stop(self):
        """SIGTERM (SIGKILL after a deadline); fails when the agent ignored
        it, exited with a status other than 0 or printed a traceback."""
        for f in (self.ctl_file, self.ctl):
            try:
                f.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=READY_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=READY_TIMEOUT)
                raise AssertionError("agent_server ignored SIGTERM")
        if self.proc.returncode != 0 or "Traceback" in self.log():
            raise AssertionError(f"agent_server ended with {self.proc.returncode}:\n"
                                 f"{self.log()[-3000:]}")


def agent_opt(agent, extra=""):
    return f"{extra} agent_port={agent.port}".strip()


def entry(name, target, opts=""):
    """A server of a pool for harness.pool_lines: (name, target) or, with
    options, (name, target, "option=N ...")."""
    return (name, target, opts) if opts else (name, target)


class AgentCheckTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.agent = AgentServer()
        cls.addClassCleanup(cls.agent.stop)

    def setUp(self):
        super().setUp()
        self.agent.cmd("reset")         # listening, "line up", counters cleared

    # ------------------------------------------------------------ helpers

    def start(self, pools, workers=2, allowed_errors=()):
        """lb with admin_client's config (check none, min_servers 0 unless
        a pool says otherwise) and the agent keys; log_level debug, for the
        agent events."""
        pools = [(name, servers, dict(AGENT, **keys)) for name, servers, keys in pools]
        lb = admin_client.start_lb(self, pools, workers=workers, log_level="debug",
                                   allowed_errors=allowed_errors)
        self.lbi = lb
        return lb

    def srv(self, pool, server):
        return find_server(self.lbi.admin.stats(), pool, server)

    def wait_srv(self, pool, server, cond, what):
        return self.lbi.admin.wait_server(pool, server, cond, WAIT, what)

    def wait_agent(self, pool, server, result, detail, after=None):
        """Waits until /stats shows an agent reply of pool/server with that
        result and detail, newer than the agent total `after` (if given);
        returns the server object."""
        def ok(s):
            a = s.get("agent") or {}
            return (a.get("result") == result and a.get("detail") == detail
                    and (after is None or a.get("total", 0) > after))
        return self.wait_srv(pool, server, ok, f"an agent reply {result} with {detail!r}")

    def total(self, pool, server):
        return self.srv(pool, server)["agent"]["total"]

    def stays(self, pool, server, cond, what, replies=STAYS):
        """Checks cond(server object) at every /stats poll until `replies`
        more agent replies have been taken (so the verdict they carried, or
        their failure, has been applied); fails at the first poll where it
        does not hold. Returns the last server object."""
        base = self.total(pool, server)

        def probe():
            s = self.srv(pool, server)
            if not cond(s):
                raise AssertionError(f"{pool}/{server}: {what} broke after "
                                     f"{s['agent']['total'] - base} more agent replies: {s}")
            return s if s["agent"]["total"] >= base + replies else None
        return wait_for(probe, WAIT, f"{replies} more agent replies of {pool}/{server}")

    def changes(self, event, pool, server, after=0.0):
        return [e for e in self.lbi.events(event, pool=pool, server=server)
                if event_time(e) > after]

    def assert_consistent(self):
        self.assertEqual(admin_client.stats_problems(self.lbi.admin.stats()), [], "inconsistent /stats")

    # -------------------------------------------------------------- shares

    def test_half_share_splits_traffic(self):
        """`up 50%`: share 0.5, effective_weight half the weight, and one
        roundrobin cursor (one worker) gives the server exactly a third of
        the connections of two weight-1 servers (smooth weighted round
        robin at weights 0.5 and 1: one pick in three, give or take the
        cursor's phase when the share changed). A reply that does not parse
        (garbage, an unknown word) keeps the share; `up 100%` restores it."""
        a, b = self.named("a"), self.named("b")
        self.agent.say("up 50%")
        t0 = time.time()
        lb = self.start([("p", [entry("a", a, agent_opt(self.agent, "weight=1")),
                                 entry("b", b, "weight=1")],
                          {"balance": "roundrobin"})], workers=1)
        srv = self.wait_agent("p", "a", "passed", "up 50%")
        self.assertEqual((srv["state"], srv["weight"], srv["share"], srv["effective_weight"]),
                         ("up", 1, 0.5, 0.5), srv)
        ag = srv["agent"]
        self.assertEqual((ag["state"], ag["share"], ag["maxconn"], ag["result"]),
                         ("up", 0.5, None, "passed"), ag)
        self.assertIn(ag["note"], (None, ""), ag)
        self.assertGreaterEqual(ag["total"], 1, ag)
        self.assertTrue(t0 - 1 <= ag["at"] <= time.time() + 1, f"agent at {ag['at']}, "
                        f"lb started at {t0}")
        other = self.srv("p", "b")
        self.assertEqual((other["agent"], other["share"], other["effective_weight"]),
                         (None, 1.0, 1.0), other)
        ev = lb.wait_event("agent", pool="p", server="a", result="passed")[0]
        self.assertEqual((ev.get("level"), ev.get("detail")), ("debug", "up 50%"), ev)
        self.assert_consistent()

        n = 300
        got = Counter(harness.fetch_name(lb.fports["fe_p"]) for _ in range(n))
        print(f"\nmeasured: agent up 50%: a got {got['a']} of {n} connections, b {got['b']}")
        self.assertEqual(got["a"] + got["b"], n, got)
        # Round robin: a keeps every other one of its 150 turns (75), and
        # the 75 turns it gives up are drawn by weight x share, 1 in 3 of
        # them to a (25, 4.1 standard deviation): 100 +-16 at four. At
        # full share a would get 150, at share squared 60.
        self.assertTrue(n // 3 - 16 <= got["a"] <= n // 3 + 16,
                        f"the 50% server got {got['a']} of {n} connections, want {n // 3} +-16")

        # Replies that do not parse change nothing: still half.
        for mode, detail in (("garbage", LONG_DETAIL), ("line fast", UNKNOWN_DETAIL)):
            self.agent.mode(mode)
            srv = self.wait_agent("p", "a", "failed", detail)
            self.assertEqual((srv["share"], srv["effective_weight"], srv["agent"]["state"],
                              srv["agent"]["share"]), (0.5, 0.5, "up", 0.5), srv)
            self.stays("p", "a", lambda s: s["share"] == 0.5 and s["agent"]["result"] == "failed",
                       f"share 0.5 after {mode}")
            fails = [e for e in lb.events("agent", pool="p", server="a", result="failed")
                     if e.get("detail") == detail]
            self.assertTrue(fails, f"no agent event result=failed detail={detail!r}")
        got = Counter(harness.fetch_name(lb.fports["fe_p"]) for _ in range(30))
        self.assertTrue(9 <= got["a"] <= 11, f"after the failed replies, a got {got}")

        self.agent.say("up 100%")
        srv = self.wait_agent("p", "a", "passed", "up 100%")
        self.assertEqual((srv["share"], srv["effective_weight"], srv["agent"]["share"]),
                         (1.0, 1.0, 1.0), srv)
        self.assertFalse(lb.events("server_down") + lb.events("server_maintenance"),
                         "a share moved a server out")
        lb.assert_running()

    # -------------------------------------------------------------- reload

    def reload(self, pools, generation):
        """The config rewritten with these pools (same admin port), SIGHUP,
        and the reload of that generation logged."""
        pools = [(name, servers, dict(AGENT, **keys)) for name, servers, keys in pools]
        text, _, _ = admin_client.make_admin_config(pools, admin_port=self.lbi.admin_port,
                                                    log_level="debug")
        with open(self.lbi.config_path, "w") as f:
            f.write(text)
        self.lbi.send_signal(signal.SIGHUP)
        self.lbi.wait_event("reload", generation=str(generation))

    def test_reload_forgets_the_agent_and_a_new_one_counts(self):
        """A reload that takes agent_port off the server forgets its agent:
        its drain no longer holds the server out. One that gives it back
        starts a new agent: the earlier verdict is not revived, and the new
        agent's replies are taken from its first (the health module counts
        a new target's replies from 1 again)."""
        a, b = self.named("a"), self.named("b")

        def pools(with_agent):
            return [("p", [entry("a", a, agent_opt(self.agent) if with_agent else ""),
                           entry("b", b)], {})]
        self.agent.say("drain")
        self.start(pools(True))
        self.wait_srv("p", "a", lambda s: s["state"] == "draining", "a drained by its agent")
        self.reload(pools(False), 2)
        srv = self.wait_srv("p", "a", lambda s: s["state"] == "up", "a back without its agent")
        self.assertIsNone(srv["agent"], srv)
        self.agent.say("up 50%")
        self.reload(pools(True), 3)
        # at once: no reply yet (off), or the new agent's first (up)
        srv = self.srv("p", "a")
        self.assertEqual(srv["state"], "up", f"the old agent's drain came back: {srv}")
        self.assertIn(srv["agent"]["state"], ("off", "up"), srv)
        srv = self.wait_agent("p", "a", "passed", "up 50%")
        self.assertEqual((srv["state"], srv["share"], srv["agent"]["state"]), ("up", 0.5, "up"),
                         srv)
        self.assert_consistent()

    # ------------------------------------------------------- drain, faults

    def start_streams(self, names=("A", "B")):
        """StreamBackends (a client gets "NAME\\n" then an echo), lb with
        pool web over them, A with the agent. Waits for A's agent to say
        up."""
        self.backends = {n: self.backend(StreamBackend(n)) for n in names}
        servers = [entry(n, b, agent_opt(self.agent) if n == "A" else "")
                   for n, b in self.backends.items()]
        lb = self.start([("web", servers, {})])
        lb.port = lb.fports["fe_web"]
        self.wait_agent("web", "A", "passed", "up")
        return lb

    def test_drain_finishes_connections_and_faults_change_nothing(self):
        """`drain`: an open connection to the server keeps relaying, /stats
        says draining, new connections go to the other server. Then an
        agent that hangs, sends 300 bytes without a newline, an unknown
        word, closes without a byte or refuses the connect: each shows its
        failure in /stats "agent" and the server stays draining, its
        connection flowing. `up` brings it back."""
        lb = self.start_streams()
        a = self.backends["A"]
        stream = open_stream(self, lb.port, "A")
        self.wait_srv("web", "A", lambda s: s["active_connections"] == 1,
                      "A's stream and nothing else open")

        t = time.time()
        self.agent.say("drain")
        srv = self.wait_srv("web", "A", lambda s: s["state"] == "draining", "state draining")
        self.assertEqual((srv["agent"]["state"], srv["agent"]["detail"], srv["admin"],
                          srv["active_connections"]), ("drain", "drain", "none", 1), srv)
        self.assertEqual(find_pool(lb.admin.stats(), "web")["in_rotation"], 1)
        ev = lb.wait_event("server_maintenance", pool="web", server="A")[0]
        self.assertEqual(ev.get("reason"), "agent: drain", ev)
        self.assertGreater(event_time(ev), t - 0.01, ev)
        self.assertEqual(lb.events("server_down", server="A"), [])
        self.assert_consistent()

        t_drain = time.monotonic()
        stream.wait_rounds_after(t_drain, 5)
        before = a.clients
        names = [who(lb.port) for _ in range(12)]
        self.assertEqual(set(names), {"B"}, f"new connections while A drains: {names}")
        self.assertEqual(a.clients, before, "A got a new client while draining")

        faults = (("hang", TIMEOUT_DETAIL), ("garbage", LONG_DETAIL),
                  ("line fast", UNKNOWN_DETAIL), ("close", CLOSED_DETAIL),
                  ("refuse", REFUSED_DETAIL))
        for mode, detail in faults:
            with self.subTest(fault=mode):
                base = self.total("web", "A")
                if mode == "refuse":
                    self.agent.cmd("refuse")
                else:
                    self.agent.mode(mode)
                srv = self.wait_agent("web", "A", "failed", detail, after=base)
                self.assertEqual((srv["state"], srv["agent"]["state"]), ("draining", "drain"),
                                 srv)
                self.stays("web", "A", lambda s: s["state"] == "draining"
                           and s["agent"]["state"] == "drain"
                           and s["agent"]["detail"] == detail, f"draining with {mode}")
                stream.wait_rounds_after(time.monotonic(), 2)
        calls = self.agent.calls()
        self.assertFalse(calls["listening"], calls)
        self.assertEqual(len(lb.events("server_maintenance", server="A")), 1,
                         lb.events("server_maintenance", server="A"))
        self.assertEqual(lb.events("server_up", server="A"), [])
        self.assertEqual(a.clients, before, "A got a new client while its agent failed")

        t = time.time()
        self.agent.cmd("listen")
        self.agent.say("up")
        srv = self.wait_srv("web", "A", lambda s: s["state"] == "up", "state up again")
        self.assertEqual((srv["agent"]["state"], srv["agent"]["result"]), ("up", "passed"), srv)
        up = wait_for(lambda: self.changes("server_up", "web", "A", t), WAIT,
                      "server_up for A")[0]
        self.assertEqual(up.get("reason"), "agent: up", up)
        wait_for(lambda: "A" in {who(lb.port) for _ in range(4)}, WAIT,
                 "a new connection to reach A again")
        stream.wait_rounds_after(time.monotonic(), 2)
        self.assertTrue(stream.is_open())
        self.assert_consistent()
        lb.assert_running()

    def test_maint_closes_connections_at_once(self):
        """`maint`: the server's open connections are closed at once (as an
        operator's disable: counted in drained_by_timeout), /stats says
        disabled; the other server's connection is untouched; `up` brings
        it back."""
        lb = self.start_streams()
        a = self.backends["A"]
        s1 = open_stream(self, lb.port, "A")
        s2 = open_stream(self, lb.port, "A")
        sb = open_stream(self, lb.port, "B")
        self.wait_srv("web", "A", lambda s: s["active_connections"] == 2,
                      "A's two streams and nothing else open")

        t = time.time()
        self.agent.say("maint")
        ev = wait_for(lambda: self.changes("server_maintenance", "web", "A", t), WAIT,
                      "server_maintenance for A")[0]
        self.assertEqual(ev.get("reason"), "agent: maint", ev)
        ends = [s.wait_end(timeout=WAIT) for s in (s1, s2)]
        took = max(e[1] for e in ends) - event_time(ev)
        print(f"\nmeasured: agent maint: A's connections closed {took * 1000:.0f} ms after "
              f"server_maintenance ({', '.join(e[2] for e in ends)})")
        for e in ends:
            self.assertIn(e[2], ("eof", "reset"))
        self.assertLess(took, PROMPT, "maint must close the connections at once")
        srv = self.wait_srv("web", "A", lambda s: s["state"] == "disabled"
                            and s["active_connections"] == 0, "state disabled, nothing open")
        self.assertEqual((srv["agent"]["state"], srv["admin"], srv["drained_by_timeout"]),
                         ("maint", "none", 2), srv)
        wait_for(lambda: a.open_clients == 0, WAIT, "lb to close A's side too")
        self.assertEqual(lb.events("server_down", server="A"), [])
        sb.wait_rounds_after(time.monotonic(), 3)
        self.assertEqual(self.srv("web", "B")["drained_by_timeout"], 0)
        before = a.clients
        self.assertEqual({who(lb.port) for _ in range(9)}, {"B"})
        self.assertEqual(a.clients, before, "A got a new client in maint")
        self.stays("web", "A", lambda s: s["state"] == "disabled", "disabled while maint")
        self.assert_consistent()

        t = time.time()
        self.agent.say("up")
        self.wait_srv("web", "A", lambda s: s["state"] == "up", "state up again")
        up = wait_for(lambda: self.changes("server_up", "web", "A", t), WAIT,
                      "server_up for A")[0]
        self.assertEqual(up.get("reason"), "agent: up", up)
        wait_for(lambda: "A" in {who(lb.port) for _ in range(4)}, WAIT,
                 "a new connection to reach A again")
        self.assertTrue(sb.is_open())
        lb.assert_running()

    # ------------------------------------------------------------- maxconn

    def test_maxconn_caps_live(self):
        """`maxconn:5` on the only server: of 8 clients 5 reach it, 3 wait
        in the pool's queue (and stay there over several agent replies);
        /stats max_connections is 5. `maxconn:0` lifts the cap: the 3
        waiting clients are served."""
        s = self.named("s", hold=True)
        self.agent.say("maxconn:5")
        lb = self.start([("p", [("s", s, agent_opt(self.agent))], {"queue_timeout": "30s"})])
        srv = self.wait_agent("p", "s", "passed", "maxconn:5")
        self.assertEqual((srv["max_connections"], srv["agent"]["maxconn"], srv["state"],
                          srv["share"]), (5, 5, "up", 1.0), srv)
        ev = lb.wait_event("server_maxconn", pool="p", server="s")[0]
        self.assertEqual((ev.get("max_connections"), ev.get("reason")), ("5", "agent"), ev)

        clients = [self.client(lb.fports["fe_p"]) for _ in range(8)]
        wait_for(lambda: s.accepted >= 5, WAIT, "5 connections at the server")
        lb.admin.wait_stats(lambda st: find_pool(st, "p")["queue"]["depth"] == 3, WAIT,
                            "3 clients in the queue")
        self.stays("p", "s", lambda x: x["active_connections"] == 5 and x["max_connections"] == 5
                   and s.accepted == 5, "5 connections at the cap of 5")
        served = [c for c in clients if harness.is_readable(c)]
        self.assertEqual(len(served), 5, "clients that got the server's name")
        for c in served:
            self.assertEqual(harness.read_line(c), b"s\n")
        waiting = [c for c in clients if c not in served]
        self.assertEqual(select.select(waiting, [], [], 0)[0], [],
                         "a client past the cap got bytes")

        self.agent.say("maxconn:0")
        srv = self.wait_agent("p", "s", "passed", "maxconn:0")
        self.assertEqual(srv["max_connections"], 0, srv)
        self.assertIn(srv["agent"]["maxconn"], (0, None), srv)
        ev = lb.wait_event("server_maxconn", count=2, pool="p", server="s")[1]
        self.assertEqual((ev.get("max_connections"), ev.get("reason")), ("0", "agent"), ev)
        wait_for(lambda: s.accepted == 8, WAIT, "the 3 waiting clients to reach the server")
        for c in waiting:
            c.settimeout(IO_TIMEOUT)
            self.assertEqual(harness.read_line(c), b"s\n")
        st = lb.admin.wait_stats(lambda st: find_pool(st, "p")["queue"]["depth"] == 0, WAIT,
                                 "an empty queue")
        self.assertEqual(find_server(st, "p", "s")["active_connections"], 8)
        self.assertEqual(find_pool(st, "p")["queue"]["timeouts_total"], 0)
        lb.assert_running()

    # ---------------------------------------------------- against the probe

    def test_up_does_not_lift_a_failing_probe(self):
        """haproxy/haproxy#1176: the HTTP probe answers 500, the agent says
        up (then ready): the server stays down over several agent replies.
        The probe passing again brings it back, by its health."""
        hc = self.hc_backend(count=1, mode="500")
        port = hc.ports[0]
        lb = self.start([("p", [("s", hc.addr(port), agent_opt(self.agent))],
                          {"check": "http", "check_interval": "200ms",
                           "check_timeout": "150ms", "rise": 1, "fall": 1})])
        down = lb.wait_event("server_down", pool="p", server="s")[0]
        self.assertNotIn("agent", down.get("reason", ""), down)
        srv = self.wait_agent("p", "s", "passed", "up")
        self.assertEqual((srv["state"], srv["health"], srv["agent"]["state"]),
                         ("down", "down", "up"), srv)
        for word in ("up", "ready"):
            self.agent.say(word)
            self.wait_agent("p", "s", "passed", word)
            self.stays("p", "s", lambda x: x["state"] == "down" and x["health"] == "down",
                       f"down while the agent says {word}")
        self.assertEqual(find_pool(lb.admin.stats(), "p")["in_rotation"], 0)
        self.assertEqual(lb.events("server_up", server="s"), [])
        self.assert_consistent()

        t = time.time()
        hc.mode(port, "ok")
        up = wait_for(lambda: self.changes("server_up", "p", "s", t), WAIT, "server_up")[0]
        self.assertNotIn("agent", up.get("reason", ""), up)
        self.wait_srv("p", "s", lambda x: x["state"] == "up", "state up")
        lb.assert_running()

    # ------------------------------------------------------- down, the guard

    def test_down_is_a_failure_the_guard_may_hold(self):
        """`down` from one agent for two servers: in a pool with
        min_servers 0 (a beside b, no agent) the server goes down
        (server_down reason="agent: down"); in a pool with min_servers 1
        where it is the only server, the guard holds it in rotation
        (guarded, guard_hold) and clients still reach it. `up` brings the
        first back and releases the second."""
        a, b, g = self.named("a"), self.named("b"), self.named("g")
        lb = self.start([("free", [entry("a", a, agent_opt(self.agent)), entry("b", b)], {}),
                         ("guard", [("g", g, agent_opt(self.agent))], {"min_servers": 1})])
        self.wait_agent("free", "a", "passed", "up")
        self.wait_agent("guard", "g", "passed", "up")

        self.agent.say("down")
        ev = lb.wait_event("server_down", pool="free", server="a")[0]
        self.assertEqual(ev.get("reason"), "agent: down", ev)
        srv = self.wait_srv("free", "a", lambda s: s["state"] == "down", "state down")
        self.assertEqual((srv["agent"]["state"], srv["admin"], srv["guarded"]),
                         ("down", "none", False), srv)
        hold = lb.wait_event("guard_hold", pool="guard", server="g")[0]
        self.assertEqual((hold.get("in_rotation"), hold.get("min_servers")), ("1", "1"), hold)
        srv = self.wait_agent("guard", "g", "passed", "down")
        self.assertEqual((srv["state"], srv["guarded"], srv["agent"]["state"]),
                         ("up", True, "down"), srv)
        self.assertTrue(find_pool(lb.admin.stats(), "guard")["guard_active"])
        self.stays("guard", "g", lambda s: s["state"] == "up" and s["guarded"],
                   "held by the guard")
        self.assertEqual(lb.events("server_down", pool="guard"), [])
        self.assertEqual(len(lb.events("guard_hold", server="g")), 1)
        self.assertEqual({harness.fetch_name(lb.fports["fe_guard"]) for _ in range(4)}, {"g"})
        self.assertEqual({harness.fetch_name(lb.fports["fe_free"]) for _ in range(6)}, {"b"})
        self.assert_consistent()

        t = time.time()
        self.agent.say("up")
        up = wait_for(lambda: self.changes("server_up", "free", "a", t), WAIT,
                      "server_up for free/a")[0]
        self.assertEqual(up.get("reason"), "agent: up", up)
        lb.wait_event("guard_release", pool="guard", server="g")
        self.wait_srv("guard", "g", lambda s: s["state"] == "up" and not s["guarded"],
                      "g up and not guarded")
        self.wait_srv("free", "a", lambda s: s["state"] == "up", "a up")
        self.assertIn("a", {harness.fetch_name(lb.fports["fe_free"]) for _ in range(4)})
        self.assertFalse(find_pool(lb.admin.stats(), "guard")["guard_active"])
        lb.assert_running()

    # ------------------------------------------------- agent_send, one reply

    def test_agent_send_and_one_reply_with_every_part(self):
        """agent_send (escapes \\xHH, \\t, \\r, \\n) reaches the agent before
        its reply; `up 50% maxconn:5 #busy` sets the share, the cap and the
        note at once; `DRAIN,25%<TAB>#deploy 42` without a newline (the
        close ends it; any case; commas and tabs) drains; `up 100%
        maxconn:0 #` restores everything and clears the note."""
        s = self.named("s")
        self.agent.say("up 50% maxconn:5 #busy")
        lb = self.start([("p", [entry("s", s, agent_opt(self.agent)), entry("t", self.named("t"))],
                          {"agent_send": r"hello\x20agent\t1\r\n"})])
        srv = self.wait_agent("p", "s", "passed", "up 50% maxconn:5 #busy")
        want = b"hello agent\t1\r\n".decode("latin-1")
        calls = wait_for(lambda: (lambda c: c if c["received"] == want else None)(
            self.agent.calls()), WAIT, f"the agent to receive {want!r}")
        self.assertGreaterEqual(calls["received_calls"], 1, calls)
        ag = srv["agent"]
        self.assertEqual((srv["state"], srv["share"], srv["effective_weight"],
                          srv["max_connections"]), ("up", 0.5, 0.5, 5), srv)
        self.assertEqual((ag["state"], ag["share"], ag["maxconn"], ag["note"], ag["result"]),
                         ("up", 0.5, 5, "busy", "passed"), ag)
        self.assertIsNone(self.srv("p", "t")["agent"])
        self.assert_consistent()

        # A reply that is not the last one: waited for by its note, its
        # detail judged at the end (so that the rest is seen either way).
        drain = "DRAIN,25%\t#deploy 42"
        self.agent.mode(f"raw {drain}")
        srv = self.wait_srv("p", "s", lambda x: x["agent"]["note"] == "deploy 42",
                            "the note of the drain reply")
        self.assertEqual((srv["state"], srv["agent"]["state"], srv["agent"]["share"],
                          srv["agent"]["result"], srv["agent"]["maxconn"]),
                         ("draining", "drain", 0.25, "passed", 5), srv)
        drain_detail = srv["agent"]["detail"]
        self.assertEqual({harness.fetch_name(lb.fports["fe_p"]) for _ in range(4)}, {"t"})
        ev = wait_for(lambda: [e for e in lb.events("server_maintenance", pool="p", server="s")],
                      WAIT, "server_maintenance for s")[0]
        self.assertTrue(ev.get("reason", "").startswith("agent: drain"), ev)
        self.assert_consistent()

        self.agent.say("up 100% maxconn:0 #")
        srv = self.wait_agent("p", "s", "passed", "up 100% maxconn:0 #")
        self.assertEqual((srv["state"], srv["share"], srv["max_connections"]), ("up", 1.0, 0),
                         srv)
        self.assertIn(srv["agent"]["note"], (None, ""), srv)
        self.assertIn("s", {harness.fetch_name(lb.fports["fe_p"]) for _ in range(4)})
        self.assertEqual(drain_detail, drain, "/stats agent detail: the reply as received")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
