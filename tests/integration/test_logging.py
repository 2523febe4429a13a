"""The log: one key=value line per event on stderr, with a UTC millisecond
timestamp, quoted values where needed, and log_level filtering; under
journald (JOURNAL_STREAM names stderr) each line starts with its syslog
priority; log_target = syslog sends RFC 5424 datagrams, and stderr takes
what the socket cannot."""

import datetime
import os
import re
import signal
import socket
import time

import harness
from harness import LbTestCase, request, wait_for

LINE = re.compile(
    r'^ts=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z '
    r'level=(debug|info|warn|error) '
    r'event=[a-z][a-z0-9_]*'
    r'( [a-z][a-z0-9_]*=("(?:[^"\\]|\\.)*"|[^"\s]+))*$')


class LoggingTest(LbTestCase):

    def _traffic(self, lb, n=6):
        """A few connections: some hit the refused server, all succeed."""
        for i in range(n):
            data, how = request(lb.port)
            self.assertEqual((data, how), (b"live\n", "eof"), f"connection {i + 1}")

    def _start_quiet(self, servers, **opts):
        """Starts lb at a log level that hides event=ready; waits until the
        frontend accepts instead."""
        text, port = harness.make_config(servers, **opts)
        lb = self.start_lb(text, port=port, wait_ready=False,
                           allowed_errors={"no_server"})

        def up():
            lb.assert_running()
            return not harness.is_refused(port)
        wait_for(up, harness.READY_TIMEOUT, "lb's frontend to accept connections")
        return lb

    def test_line_format(self):
        dead, live = self.refused(), self.named("live")
        lb = self.lb([("dead", dead), ("live", live)], log_level="debug", workers=1)
        self._traffic(lb)
        lb.wait_event("connect_failed")
        lb.wait_event("session_end", count=6, server="live")
        self.assertEqual(lb.stop(), 0)
        lines = lb.log().splitlines()
        self.assertTrue(lines)
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        for line in lines:
            m = LINE.match(line)
            self.assertIsNotNone(m, f"log line not in the key=value format: {line!r}")
            ts = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
            self.assertLess(abs((now - ts).total_seconds()), 600,
                            f"timestamp is not the current UTC time: {line!r}")
        ev = lb.events("connect_failed")[0]
        self.assertIn("refused", ev["error"].lower())
        self.assertIn('error="', [l for l in lines if "event=connect_failed" in l][0],
                      "a value with a space must be double-quoted")
        end = lb.events("session_end", server="live")[0]
        self.assertTrue(end.get("client", "").startswith("127.0.0.1:"), end)
        self.assertEqual(end.get("frontend"), "fe", end)
        self.assertTrue(end.get("reason"), end)
        self.assertEqual(end.get("bytes_in"), "5", end)     # "live\n" from the server
        self.assertEqual(end.get("bytes_out"), "0", end)
        self.assertEqual(lb.events()[-1].get("event"), "exit", "the last line is event=exit")

    def test_journald_priorities(self):
        live = self.named("live")
        text, port = harness.make_config([("live", live)])
        stream = lambda path: f"{os.stat(path).st_dev}:{os.stat(path).st_ino}"
        lb = self.start_lb(text, port=port, env={"JOURNAL_STREAM": stream})
        lb.send_signal(signal.SIGHUP)     # nothing changed: info
        lb.wait_event("reload")
        with open(lb.config_path, "a") as f:
            f.write("bogus = 1\n")                     # a failed reload: error
        lb.send_signal(signal.SIGHUP)
        lb.wait_event("reload_failed")
        lb.allowed_errors.add("reload_failed")
        self.assertEqual(lb.stop(), 0)
        prio = {"debug": "7", "info": "6", "warn": "4", "error": "3"}
        lines = lb.log().splitlines()
        for line in lines:
            m = re.match(r"^<(\d)>(ts=\S+ level=(\w+) .*)$", line)
            self.assertIsNotNone(m, f"no priority: {line!r}")
            self.assertEqual(m.group(1), prio[m.group(3)], line)
            self.assertIsNotNone(LINE.match(m.group(2)), line)
        self.assertTrue(any(l.startswith("<3>") for l in lines))
        # a JOURNAL_STREAM that is not our stderr (redirected): no prefixes
        lb2 = self.start_lb(text.replace(f":{port}", f":{harness.free_port()}", 1),
                            env={"JOURNAL_STREAM": "1:2"})
        lb2.stop()
        self.assertTrue(all(LINE.match(l) for l in lb2.log().splitlines()), lb2.log_tail())

    def test_syslog_target(self):
        live = self.named("live")
        dir_ = harness.make_tmpdir()
        path = os.path.join(dir_, "log.sock")
        sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sink.bind(path)
        sink.settimeout(5)
        self.addCleanup(sink.close)
        text, port = harness.make_config([("live", live)])
        text = text.replace("[global]", f"[global]\nlog_target = syslog\nsyslog_socket = {path}", 1)
        lb = self.start_lb(text, port=port, wait_ready=False)
        got = []
        while not any(" ready - " in g for g in got):
            got.append(sink.recv(4096).decode())
        head = re.compile(r"^<(\d+)>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (\S+) lb "
                          r"(\d+) ([a-z_]+) - (level=(\w+) event=([a-z_]+)( .*)?)$")
        for g in got:
            m = head.match(g)
            self.assertIsNotNone(m, f"not RFC 5424: {g!r}")
            pri, level = int(m.group(1)), m.group(7)
            self.assertEqual(pri, 3 * 8 + {"info": 6, "warn": 4, "error": 3, "debug": 7}[level])
            self.assertEqual((int(m.group(4)), m.group(5)), (lb.pid, m.group(8)), g)
            self.assertEqual(m.group(3), socket.gethostname())
        self.assertEqual(lb.log(), "", "stderr gets nothing while syslog takes the lines")
        # the socket goes away: the lines are not lost, stderr has them
        sink.close()
        os.unlink(path)
        lb.send_signal(signal.SIGHUP)
        lb.wait_event("reload")
        lb.stop()
        lb2 = self.start_lb(text.replace(f":{port}", f":{harness.free_port()}", 1))
        ev = lb2.events("syslog_unavailable")[0]
        self.assertIn("No such file or directory", ev["error"])

    def test_info_hides_debug(self):
        live = self.named("live")
        lb = self.lb([("live", live)], log_level="info")
        self.assertEqual(harness.fetch_name(lb.port), "live")
        self.assertEqual(lb.stop(), 0)
        levels = {e.get("level") for e in lb.events()}
        self.assertNotIn("debug", levels, lb.log_tail())
        self.assertFalse(lb.events("session_end"), "session_end is a debug event")

    def test_warn_hides_info(self):
        dead, live = self.refused(), self.named("live")
        lb = self._start_quiet([("dead", dead), ("live", live)], log_level="warn", workers=1)
        self._traffic(lb)
        lb.wait_event("connect_failed", server="dead")
        self.assertEqual(lb.stop(), 0)
        levels = {e.get("level") for e in lb.events()}
        self.assertLessEqual(levels, {"warn", "error"}, lb.log_tail())

    def test_error_hides_warn(self):
        dead = self.refused()
        lb = self._start_quiet([("dead", dead)], log_level="error", retries=0)
        data, how = request(lb.port)
        self.assertEqual(data, b"")
        lb.wait_event("no_server")
        self.assertEqual(lb.stop(), 0)
        levels = {e.get("level") for e in lb.events()}
        self.assertEqual(levels, {"error"}, lb.log_tail())

    def test_per_client_errors_are_rate_limited(self):
        # 300 clients refused in a row (retries = 0): at most 50 no_server
        # lines a second, and the first line after the held-back ones says
        # how many there were, so every refusal is accounted for.
        dead = self.refused()
        lb = self.lb([("dead", dead)], retries=0, allowed_errors={"no_server"})
        clients = 300
        t0 = time.monotonic()
        for i in range(clients):
            data, how = request(lb.port)
            self.assertEqual(data, b"", f"connection {i + 1}")
        elapsed = time.monotonic() - t0
        wait_for(lambda: time.monotonic() - t0 > 1.1, 2, "a new second of the limit")
        data, _ = request(lb.port)
        evs = wait_for(lambda: [e for e in lb.events("no_server") if "suppressed" in e]
                       or None, harness.IO_TIMEOUT, "a no_server line with suppressed=")
        lines = lb.events("no_server")
        seconds = int(elapsed) + 2
        self.assertLessEqual(len(lines), 50 * seconds, f"{len(lines)} lines in {elapsed:.2f}s")
        self.assertLess(len(lines), clients, "nothing was held back")
        held = sum(int(e["suppressed"]) for e in lines if "suppressed" in e)
        self.assertEqual(len(lines) + held, clients + 1,
                         f"{len(lines)} lines + {held} suppressed for {clients + 1} refusals")
        self.assertTrue(evs)


if __name__ == "__main__":
    harness.main()
