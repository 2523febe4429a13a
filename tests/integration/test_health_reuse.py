"""HTTP health checks with `check_reuse = on`: lb keeps its check connection
between probes (as Envoy does) when the answer is reusable, and opens one
per check otherwise, as with `check_reuse = off` (the default).

- with reuse on the request is `GET path HTTP/1.1` with Host, Connection:
  keep-alive, User-Agent: lb-health and Accept: */*; with off it says
  Connection: close;
- a server that keeps the connection open gets all its checks on one or two
  connections; with reuse off every check is a connection of its own;
- a server that closes the connection after each answer (without saying
  Connection: close) costs lb a reconnect inside the same probe, never a
  failed check; one that answers Connection: close is not reused at all;
- a server that stops answering on the kept connection fails its checks by
  timeout and goes down as fast as without reuse; each failed check closes
  the kept connection and the next probe connects afresh, also when the
  failing answer (a 500) would have left the connection reusable;
- the trade-off, documented by test_listener_closed_is_missed: a server that
  no longer accepts new connections but still serves the kept one stays up
  with reuse on, and goes down with reuse off.

The servers are KeepAliveBackend instances of this file: real sockets on
127.0.0.1, one thread per connection, counting accepted connections and
requests, with an answer mode each test switches at runtime. Every wait has
a deadline."""

import time

import harness
from harness import LbTestCase, event_time, health_history, transition_streak, wait_for

I = 0.1                 # check_interval in seconds
T = 0.1                 # check_timeout (lb refuses one above the interval)
HTTP = {"check": "http", "check_interval": "100ms", "check_timeout": "100ms"}
WAIT = 10.0             # deadline for anything that takes a few intervals
BODY = b"ok"


class KeepAliveBackend(harness.Backend):
    """A small HTTP/1.1 server (harness.Backend) answering each request (a
    head ending in an empty line; lb's checks have no body) according to
    `mode`, read when the request has arrived, so a switch applies from the
    next request on:

      keep         200 with Content-Length: 2 and a body, then waits for the
                   next request on the same connection;
      close_after  the same answer (no Connection: close), then closes;
      conn_close   the same answer with Connection: close, then closes;
      status500    500 with Content-Length: 2 and a body (a reusable answer
                   that fails the check), then waits for the next request;
      hang         no answer: reads on until the client closes.

    Counts, under a lock, beside Backend's: requests, heads (the request
    heads, decoded)."""

    def __init__(self, name, mode="keep"):
        self.mode = mode
        self._requests = 0
        self._heads = []
        super().__init__(KeepAliveBackend._answer, name=name, backlog=64)

    @property
    def requests(self):
        with self._lock:
            return self._requests

    @property
    def heads(self):
        with self._lock:
            return list(self._heads)

    def counts(self):
        """(accepted, requests), read together."""
        with self._lock:
            return self._accepted, self._requests

    def _answer(self, conn):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = conn.recv(65536)
                if not d:
                    return
                buf += d
            head, _, buf = buf.partition(b"\r\n\r\n")
            mode = self.mode
            with self._lock:
                self._requests += 1
                self._heads.append(head.decode(errors="replace"))
            if mode == "hang":
                while conn.recv(65536):
                    pass
                return
            extra = b"Connection: close\r\n" if mode == "conn_close" else b""
            status = (b"500 Internal Server Error" if mode == "status500" else b"200 OK")
            conn.sendall(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s"
                         % (status, len(BODY), extra, BODY))
            if mode not in ("keep", "status500"):
                return


def checks(lb, pool, server="s", result=None):
    return [e for e in lb.events("check", pool=pool, server=server)
            if result is None or e.get("result") == result]


def wait_checks(lb, pool, count, server="s", after=0, timeout=WAIT):
    """Waits until the server has `count` check events beyond the first
    `after` ones; returns those."""
    def found():
        evs = checks(lb, pool, server)[after:]
        return evs if len(evs) >= count else None
    return wait_for(found, timeout,
                    lambda: f"{count} checks of {pool}/{server} after the first {after}\n"
                            f"{lb.log_tail()}")


def parse_head(head):
    lines = head.split("\r\n")
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs.setdefault(k.strip().lower(), []).append(v.strip())
    return lines[0], hdrs


class HealthReuseTest(LbTestCase):

    def ka(self, name, mode="keep"):
        return self.backend(KeepAliveBackend(name, mode))

    def assert_all_passed(self, evs, what):
        failed = [e for e in evs if e.get("result") != "passed"]
        self.assertFalse(failed, f"{what}: failed checks {failed[:3]}")

    def test_reuse_keeps_one_connection(self):
        on, off = self.ka("on"), self.ka("dflt")
        lb = self.lb_pools([("on", [("s", on)], dict(HTTP, check_reuse="on", rise=1, fall=2)),
                            ("dflt", [("s", off)], dict(HTTP, rise=1, fall=2))],
                           log_level="debug")
        evs_on = wait_checks(lb, "on", 20)
        evs_off = wait_checks(lb, "dflt", 20)
        acc_on, req_on = on.counts()
        acc_off, req_off = off.counts()
        n_on = len(checks(lb, "on"))
        self.assert_all_passed(evs_on, "reuse on")
        self.assert_all_passed(evs_off, "reuse off")
        self.assertGreaterEqual(req_on, 20)
        self.assertLessEqual(acc_on, 2, f"reuse on: {acc_on} connections for {req_on} requests")
        # One request per check, none sent twice (one may be in flight).
        self.assertLessEqual(abs(req_on - n_on), 1, f"{req_on} requests, {n_on} checks logged")
        self.assertGreaterEqual(req_off, 20)
        self.assertLessEqual(abs(acc_off - req_off), 1,
                             f"reuse off: {acc_off} connections for {req_off} requests")
        for head in on.heads:
            line, hdrs = parse_head(head)
            self.assertEqual(line, "GET / HTTP/1.1", head)
            self.assertEqual([v.lower() for v in hdrs.get("connection", [])], ["keep-alive"], head)
            self.assertEqual(hdrs.get("user-agent"), ["lb-health"], head)
            self.assertEqual(hdrs.get("accept"), ["*/*"], head)
            self.assertEqual(len(hdrs.get("host", [])), 1, head)
        for head in off.heads:
            line, hdrs = parse_head(head)
            self.assertEqual(line, "GET / HTTP/1.1", head)
            self.assertEqual([v.lower() for v in hdrs.get("connection", [])], ["close"], head)
        self.assertFalse(lb.events("server_down"))

    def test_server_closing_after_answer_is_not_a_failure(self):
        # The answer looks reusable, so lb keeps the connection; the server
        # has closed it by the next probe, which reconnects at once.
        b = self.ka("closer", mode="close_after")
        lb = self.lb_pools([("on", [("s", b)], dict(HTTP, check_reuse="on", rise=1, fall=1))],
                           log_level="debug")
        evs = wait_checks(lb, "on", 20)
        acc, req = b.counts()
        self.assert_all_passed(evs, "server closing after each answer")
        for e in evs:
            self.assertLessEqual(float(e["duration_ms"]), (T + harness.HC_SLACK) * 1000, e)
        self.assertFalse(lb.events("server_down"), "the server left the rotation")
        self.assertGreaterEqual(req, 20)
        # Every answer was on a new connection, and each reached the server
        # once.
        self.assertLessEqual(abs(acc - req), 1, f"{acc} connections for {req} requests")
        self.assertLessEqual(abs(req - len(checks(lb, "on"))), 1)

    def test_connection_close_answer_is_not_reused(self):
        b = self.ka("cc", mode="conn_close")
        lb = self.lb_pools([("on", [("s", b)], dict(HTTP, check_reuse="on", rise=1, fall=1))],
                           log_level="debug")
        evs = wait_checks(lb, "on", 20)
        acc, req = b.counts()
        self.assert_all_passed(evs, "Connection: close answers")
        self.assertFalse(lb.events("server_down"))
        self.assertGreaterEqual(req, 20)
        self.assertLessEqual(abs(acc - req), 1, f"{acc} connections for {req} requests")

    def test_hang_on_kept_connection_goes_down(self):
        fall = 3
        b = self.ka("hang")
        lb = self.lb_pools([("on", [("s", b)],
                             dict(HTTP, check_reuse="on", rise=1, fall=fall))],
                           log_level="debug")
        wait_checks(lb, "on", 3)
        self.assertEqual(b.accepted, 1, "checks before the fault were not on one connection")
        t_fault = time.time()
        b.mode = "hang"
        down = lb.wait_event("server_down", timeout=WAIT, server="s")[0]
        self.assertIn("timeout", down.get("reason", "").lower(), down)
        hist = health_history(lb, "on", "s")
        down = [e for e in hist if e["event"] == "server_down"][0]
        self.assertIsNone(transition_streak(hist, down, fall))
        # The streak's first probe (on the kept connection) starts within
        # an interval of the fault, each probe runs check_timeout: what a
        # server hanging on new connections costs.
        latency = event_time(down) - t_fault
        self.assertTrue((fall - 1) * I + T - 0.03 <= latency <= fall * I + T + harness.HC_SLACK,
                        f"server_down {latency * 1000:.0f} ms after the fault; fall = {fall} "
                        f"at {I * 1000:.0f} ms, timeout {T * 1000:.0f} ms")
        # The failed check closed the kept connection; the next probes
        # connected afresh (and hung there too).
        wait_for(lambda: b.ended(1), harness.HC_SLACK, "lb to close the kept connection")
        self.assertGreaterEqual(b.accepted, fall,
                                "probes after a failed check did not connect afresh")

        # Back to answering: up again, and the connection is kept again.
        b.mode = "keep"
        lb.wait_event("server_up", timeout=WAIT, server="s")
        acc0 = b.accepted
        n0 = len(checks(lb, "on"))
        evs = wait_checks(lb, "on", 10, after=n0)
        self.assert_all_passed(evs, "after recovery")
        self.assertLessEqual(b.accepted - acc0, 2,
                             "reuse did not resume after the server recovered")

    def test_failed_status_closes_kept_connection(self):
        # A 500 that is otherwise a reusable answer: the check fails, and a
        # failed check closes the kept connection, so every probe after a
        # failed one connects afresh.
        b = self.ka("e500")
        lb = self.lb_pools([("on", [("s", b)], dict(HTTP, check_reuse="on", rise=1, fall=1))],
                           log_level="debug")
        wait_checks(lb, "on", 3)
        self.assertEqual(b.accepted, 1)
        n0 = len(checks(lb, "on"))
        b.mode = "status500"
        lb.wait_event("server_down", timeout=WAIT, server="s")
        evs = wait_checks(lb, "on", 10, after=n0)
        acc = b.accepted
        failed = [e for e in checks(lb, "on")[n0:] if e["result"] == "failed"]
        self.assertGreaterEqual(len(failed), 8, evs)
        for e in failed:
            self.assertIn("500", e.get("detail", ""), e)
        # The first failed check ran on the kept connection (1); each later
        # one on a connection of its own (one more may be in flight).
        self.assertGreaterEqual(acc - 1, len(failed) - 2,
                                f"{len(failed)} failed checks on {acc} connections "
                                f"({b.requests} requests): failed checks kept their connection")
        wait_for(lambda: b.ended(1), harness.HC_SLACK, "lb to close the kept connection")

    def test_listener_closed_is_missed(self):
        """The trade-off of check_reuse, documented: a server that accepts no
        new connection any more (here its listening socket is closed: connects
        are refused; a hung accept loop, a full backlog or a firewall dropping
        SYNs look alike to a probe) but still serves the kept connection keeps
        passing its checks with reuse on, while clients cannot reach it. With
        reuse off the same fault takes it down at the next checks. (A TLS
        certificate that changed is likewise only seen at the next new
        connection.)"""
        fall = 2
        on, off = self.ka("on"), self.ka("off")
        lb = self.lb_pools([("on", [("s", on)], dict(HTTP, check_reuse="on", rise=1, fall=fall)),
                            ("off", [("s", off)],
                             dict(HTTP, check_reuse="off", rise=1, fall=fall))],
                           log_level="debug")
        wait_checks(lb, "on", 3)
        wait_checks(lb, "off", 3)
        self.assertEqual(on.accepted, 1)
        n0 = len(checks(lb, "on"))
        t_fault = time.time()
        on.close_listener()
        off.close_listener()
        self.assertTrue(harness.is_refused(on.port), "the listener still accepts")
        self.assertTrue(harness.is_refused(off.port), "the listener still accepts")

        down = lb.wait_event("server_down", timeout=WAIT, pool="off", server="s")[0]
        self.assertIn("refused", down.get("reason", "").lower(), down)
        latency = event_time(down) - t_fault
        self.assertLessEqual(latency, fall * I + harness.HC_SLACK,
                             f"reuse off: server_down {latency * 1000:.0f} ms after the fault")

        evs = wait_checks(lb, "on", 10, after=n0)
        self.assert_all_passed(evs, "reuse on, listener closed")
        self.assertFalse(lb.events("server_down", pool="on"),
                         "reuse on: the server went down (the miss is gone: update the docs)")
        self.assertEqual(on.accepted, 1, "reuse on: lb opened another connection")
        self.assertGreaterEqual(on.requests, n0 + 10)


if __name__ == "__main__":
    harness.main()
