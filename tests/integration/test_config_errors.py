"""Configuration checking: `lb -t -c FILE` accepts a good file with
"configuration OK", and rejects each kind of bad file with exit status 1 and
one "FILE:LINE: message" line per problem, at the right line. `lb -c` on a
bad file exits 1 without listening; bad usage exits 2."""

import os
import re
import socket
import time

import harness
from harness import LbTestCase, lb_test, line_of


def base_lines():
    """A good config as a list of lines (line N of the file is [N - 1])."""
    return [
        "; lb integration test: a good configuration",      # 1
        "[global]",                                          # 2
        "workers = 2                 ; data-path threads",   # 3
        "max_connections = 100",                             # 4
        "log_level = info",                                  # 5
        "shutdown_timeout = 30s",                            # 6
        "",                                                  # 7
        "[admin]",                                           # 8
        f"listen = 127.0.0.1:{harness.free_port()}",         # 9
        "",                                                  # 10
        "[frontend web]",                                    # 11
        f"listen = 127.0.0.1:{harness.free_port()}",         # 12
        "pool = web",                                        # 13
        "",                                                  # 14
        "[pool web]",                                        # 15
        "balance = roundrobin        ; roundrobin | leastconn | source | random",  # 16
        "server = web1 127.0.0.1:9001 weight=3",             # 17
        "server = web2 127.0.0.1:9002",                      # 18
        "connect_timeout = 300ms",                           # 19
        "idle_timeout = 5m",                                 # 20
        "retries = 2",                                       # 21
        "check = none",                                      # 22
    ]


class ConfigErrorsTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.dir = harness.make_tmpdir()
        self.n = 0

    def write(self, content, name=None):
        self.n += 1
        path = os.path.join(self.dir, name or f"case{self.n}.ini")
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(path, mode) as f:
            f.write(content if isinstance(content, bytes) else "\n".join(content) + "\n")
        return path

    def problems(self, path, cwd=None):
        """Runs lb -t; asserts exit 1, nothing on stdout that says OK, and
        every stderr line shaped "PATH:LINE: message". Returns
        [(line, message)]."""
        code, out, err = lb_test(path, cwd=cwd)
        self.assertEqual(code, 1, f"lb -t exit status (stdout {out!r}, stderr {err!r})")
        self.assertNotIn("configuration OK", out)
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertTrue(lines, "no problem reported on stderr")
        found = []
        for l in lines:
            m = re.match(re.escape(path) + r":(\d+): (.+)$", l)
            self.assertIsNotNone(m, f"stderr line not shaped '{path}:LINE: message': {l!r}")
            found.append((int(m.group(1)), m.group(2)))
        return found

    def assertOneProblem(self, path, lines_ok, words):
        """Exactly one problem, at one of lines_ok, whose message holds one of
        words (any case). Returns the message."""
        found = self.problems(path)
        self.assertEqual(len(found), 1, f"expected one problem, got {found}")
        line, msg = found[0]
        if isinstance(lines_ok, int):
            lines_ok = (lines_ok,)
        self.assertIn(line, lines_ok, f"line number of {msg!r}")
        self.assertTrue(any(w.lower() in msg.lower() for w in words),
                        f"message {msg!r} should name one of {words}")
        return msg

    # -------------------------------------------------------------- good

    def test_good_config_is_ok(self):
        path = self.write(base_lines())
        code, out, err = lb_test(path)
        self.assertEqual((code, out.strip()), (0, "configuration OK"), f"stderr: {err!r}")

    def test_good_config_all_values(self):
        lines = base_lines()
        lines[line_of(lines, "workers") - 1] = "workers = 0"
        lines[line_of(lines, "log_level") - 1] = "log_level = debug"
        lines[line_of(lines, "shutdown_timeout") - 1] = "shutdown_timeout = 1h"
        lines += ["", "[pool other]", "balance = leastconn", "server = o1 127.0.0.1:9101",
                  "check = none", "", "[pool third]", "balance = source",
                  "server = t1 localhost:9102 weight=2", "check = none", "",
                  "[pool fourth]", "balance = random", "server = f1 127.0.0.1:9103",
                  "check = none", "",
                  "[frontend other]", f"listen = 127.0.0.1:{harness.free_port()}",
                  "pool = other"]
        path = self.write(lines)
        code, out, err = lb_test(path)
        self.assertEqual((code, out.strip()), (0, "configuration OK"), f"stderr: {err!r}")

    # --------------------------------------------------------- bad: keys

    def test_unknown_section(self):
        lines = base_lines()
        lines.insert(14, "[bogus]")             # an empty section: line 15
        self.assertOneProblem(self.write(lines), 15, ["bogus"])

    def test_unknown_section_with_keys(self):
        lines = base_lines()
        lines[14:14] = ["[bogus]", "foo = 1"]   # header at 15, key at 16
        # One problem, at the header: its keys are not reported one by one.
        self.assertOneProblem(self.write(lines), 15, ["bogus"])

    def test_unknown_key(self):
        lines = base_lines()
        n = line_of(lines, "retries")
        lines.insert(n, "colour = blue")
        self.assertOneProblem(self.write(lines), n + 1, ["colour"])

    def test_bad_number(self):
        lines = base_lines()
        n = line_of(lines, "retries")
        lines[n - 1] = "retries = 2x"
        self.assertOneProblem(self.write(lines), n, ["retries", "2x"])

    def test_bad_duration(self):
        lines = base_lines()
        n = line_of(lines, "connect_timeout")
        lines[n - 1] = "connect_timeout = 10q"
        self.assertOneProblem(self.write(lines), n, ["connect_timeout", "10q"])

    def test_out_of_range(self):
        lines = base_lines()
        n = line_of(lines, "max_connections")
        lines[n - 1] = "max_connections = 0"
        self.assertOneProblem(self.write(lines), n, ["max_connections"])

    def test_bad_enum(self):
        lines = base_lines()
        n = line_of(lines, "balance")
        lines[n - 1] = "balance = fastest"
        self.assertOneProblem(self.write(lines), n, ["balance", "fastest"])

    def test_short_check_interval(self):
        # check_interval = 200ms alone is accepted: the default check_timeout
        # (1s) follows a shorter interval, as HAProxy's "timeout check" does
        # when unset (test_health_short_interval checks the probes' 200 ms).
        lines = base_lines()
        lines[line_of(lines, "check =") - 1] = "check = tcp"
        lines.append("check_interval = 200ms")
        code, out, err = lb_test(self.write(lines))
        self.assertEqual((code, out.strip()), (0, "configuration OK"), f"stderr: {err!r}")
        # An explicit check_timeout longer than the interval stays an error,
        # at the timeout's line.
        lines.append("check_timeout = 1s")
        msg = self.assertOneProblem(self.write(lines), len(lines), ["check_timeout"])
        self.assertEqual(msg, "pool web: check_timeout 1s is longer than check_interval 200ms")

    def test_check_reuse_needs_http(self):
        # check_reuse = on is accepted with http and https checks ...
        for check in ("http", "https"):
            lines = base_lines()
            lines[line_of(lines, "check =") - 1] = f"check = {check}"
            lines.append("check_reuse = on")
            code, out, err = lb_test(self.write(lines))
            self.assertEqual((code, out.strip()), (0, "configuration OK"),
                             f"check = {check}: stderr {err!r}")
        # ... and rejected with any other, at its own line, whether it comes
        # after the check key or before it.
        for check, before in (("tcp", False), ("none", False), ("tcp", True)):
            with self.subTest(check=check, before=before):
                lines = base_lines()
                n = line_of(lines, "check =")
                lines[n - 1] = f"check = {check}"
                lines.insert(n - 1 if before else n, "check_reuse = on")
                msg = self.assertOneProblem(self.write(lines), line_of(lines, "check_reuse"),
                                            ["check_reuse"])
                self.assertEqual(msg, "check_reuse = on needs check = http or https")

    def test_protocol_check_keys(self):
        # Accepted: each key with the checks that use it.
        for check, keys in (("mysql", ["check_user = lb_check", "check_role = primary"]),
                            ("mysql", ["check_role = any"]),
                            ("pgsql", ["check_user = lb", "check_database = app"]),
                            ("pgsql", []),
                            ("redis", ["check_role = replica"])):
            lines = base_lines()
            lines[line_of(lines, "check =") - 1] = f"check = {check}"
            lines += keys
            code, out, err = lb_test(self.write(lines))
            self.assertEqual((code, out.strip()), (0, "configuration OK"),
                             f"check = {check} {keys}: stderr {err!r}")
        # Refused, at the key's own line: a key the check would ignore, a
        # role MySQL cannot tell without a login, a name too long.
        long = "u" * 129
        for check, keys, bad, want in (
                ("tcp", ["check_user = lb"], "check_user", "check_user needs check = mysql or pgsql"),
                ("redis", ["check_user = lb"], "check_user", "check_user needs check = mysql or pgsql"),
                ("mysql", ["check_database = app", "check_user = lb"], "check_database",
                 "check_database needs check = pgsql"),
                ("pgsql", ["check_database = app"], "check_database",
                 "check_database needs check_user (the login names both)"),
                ("http", ["check_role = primary"], "check_role",
                 "check_role = primary needs check = mysql or redis"),
                ("pgsql", ["check_role = replica"], "check_role",
                 "check_role = replica needs check = mysql or redis"),
                ("mysql", ["check_role = primary"], "check_role",
                 "check_role = primary needs check_user: MySQL answers the read_only query "
                 "only after a login"),
                ("pgsql", [f"check_user = {long}"], "check_user",
                 "check_user is longer than 128 bytes")):
            with self.subTest(check=check, keys=keys):
                lines = base_lines()
                lines[line_of(lines, "check =") - 1] = f"check = {check}"
                lines += keys
                msg = self.assertOneProblem(self.write(lines), line_of(lines, bad), [bad])
                self.assertEqual(msg, want)
        lines = base_lines()
        lines[line_of(lines, "check =") - 1] = "check = redis"
        lines.append("check_role = master")
        self.assertOneProblem(self.write(lines), len(lines), ["check_role", "master"])

    def test_check_reuse_bad_value(self):
        lines = base_lines()
        lines[line_of(lines, "check =") - 1] = "check = http"
        lines.append("check_reuse = sometimes")
        self.assertOneProblem(self.write(lines), len(lines), ["check_reuse", "sometimes"])

    # ------------------------------- PROXY protocol, access lists, limits

    def test_proxy_and_access_keys_ok(self):
        lines = base_lines()
        n = line_of(lines, "pool = web")
        lines[n:n] = ["accept_proxy = any",
                      "accept_proxy_from = 127.0.0.1, ::1, 10.0.0.0/8",
                      "accept_proxy_timeout = 500ms",
                      "allow = 127.0.0.0/8, 2001:db8::/32",
                      "deny = 127.0.0.2",
                      "max_connections_per_source = 10",
                      "rate_per_source = 100/s",
                      "source_table_size = 1024",
                      "source_ipv6_prefix = 56"]
        lines[line_of(lines, "server = web2") - 1] = "server = web2 127.0.0.1:9002 send_proxy=v1"
        lines += ["send_proxy = v2", "check_send_proxy = on"]
        code, out, err = lb_test(self.write(lines))
        self.assertEqual((code, out.strip()), (0, "configuration OK"), f"stderr: {err!r}")

    def test_accept_proxy_needs_its_balancers(self):
        # Without accept_proxy_from anyone could claim any client address:
        # refused at the accept_proxy line.
        lines = base_lines()
        n = line_of(lines, "pool = web")
        lines.insert(n, "accept_proxy = v2")
        msg = self.assertOneProblem(self.write(lines), n + 1, ["accept_proxy"])
        self.assertEqual(msg, "accept_proxy = v2 needs accept_proxy_from: the addresses of "
                              "the balancers allowed to send a PROXY header")
        # The list without accept_proxy reads no header: refused at its line.
        lines = base_lines()
        lines.insert(n, "accept_proxy_from = 10.0.0.0/8")
        msg = self.assertOneProblem(self.write(lines), n + 1, ["accept_proxy_from"])
        self.assertEqual(msg, "accept_proxy_from needs accept_proxy = v1, v2 or any (with "
                              "accept_proxy off, no PROXY header is read)")

    def test_bad_access_values(self):
        for line, want in (
                ("allow = 10.1.2.3/8",
                 'allow: "10.1.2.3/8" has bits set past its /8: did you mean 10.0.0.0/8?'),
                ("deny = 10.0.0.0/8,,192.0.2.7",
                 'deny: "10.0.0.0/8,,192.0.2.7" has an empty item (expected addresses or '
                 'ADDR/PREFIX blocks, e.g. 10.0.0.0/8, 2001:db8::/32, 192.0.2.7)'),
                ("allow = localhost",
                 'allow: "localhost" is not an IPv4 or IPv6 address (write ADDR or '
                 'ADDR/PREFIX, e.g. 192.0.2.7 or 10.0.0.0/8; names are not looked up)'),
                ("rate_per_source = 10",
                 'rate_per_source: "10" needs its unit: write N/s, e.g. 10/s (new '
                 'connections per second)'),
                ("rate_per_source = 10/m",
                 'rate_per_source: "10/m": the rate is per second (write N/s, e.g. 100/s)'),
                ("source_ipv6_prefix = 129",
                 "source_ipv6_prefix: 129 is out of range (1..128)")):
            with self.subTest(line=line):
                lines = base_lines()
                n = line_of(lines, "pool = web")
                lines.insert(n, line)
                msg = self.assertOneProblem(self.write(lines), n + 1, [line.split()[0]])
                self.assertEqual(msg, want)

    def test_bad_send_proxy(self):
        lines = base_lines()
        n = line_of(lines, "server = web2")
        lines[n - 1] = "server = web2 127.0.0.1:9002 send_proxy=any"
        msg = self.assertOneProblem(self.write(lines), n, ["web2"])
        self.assertEqual(msg, 'server web2: send_proxy "any" is not one of off, v1 or v2')
        lines = base_lines()
        lines.append("send_proxy = on")
        msg = self.assertOneProblem(self.write(lines), len(lines), ["send_proxy"])
        self.assertEqual(msg, 'send_proxy: "on" is not one of off, v1 or v2')

    # ------------------------------------------------------ bad: servers

    def test_server_without_port(self):
        lines = base_lines()
        n = line_of(lines, "server = web2")
        lines[n - 1] = "server = web2 127.0.0.1"
        self.assertOneProblem(self.write(lines), n, ["port", "127.0.0.1", "web2"])

    def test_duplicate_server_name(self):
        lines = base_lines()
        n = line_of(lines, "server = web2")
        lines.insert(n, "server = web1 127.0.0.1:9003")
        first = line_of(lines, "server = web1")
        msg = self.assertOneProblem(self.write(lines), n + 1, ["web1"])
        self.assertIn(f"line {first}", msg, "the message points back at the first definition")

    def test_unresolvable_address(self):
        t0 = time.monotonic()
        try:
            socket.getaddrinfo("nosuchhost.invalid", 9003, type=socket.SOCK_STREAM)
            resolved = True
        except socket.gaierror:
            resolved = False
        if resolved or time.monotonic() - t0 > 3:
            self.skip("nosuchhost.invalid resolves, or slowly, on this machine")
        lines = base_lines()
        n = line_of(lines, "server = web2")
        lines[n - 1] = "server = web2 nosuchhost.invalid:9002"
        t0 = time.monotonic()
        self.assertOneProblem(self.write(lines), n, ["nosuchhost.invalid", "resolve"])
        self.assertLess(time.monotonic() - t0, 10)

    def test_pool_without_servers(self):
        lines = [l for l in base_lines() if not l.startswith("server")]
        self.assertOneProblem(self.write(lines), line_of(lines, "[pool web]"),
                              ["server", "web"])

    # ------------------------------------------------- bad: cross checks

    def test_duplicate_frontend_name(self):
        lines = base_lines()
        lines += ["", "[frontend web]", f"listen = 127.0.0.1:{harness.free_port()}", "pool = web"]
        msg = self.assertOneProblem(self.write(lines), len(lines) - 2, ["web"])
        self.assertIn(f"line {line_of(lines, '[frontend web]')}", msg,
                      "the message points back at the first definition")

    def test_frontend_names_missing_pool(self):
        lines = base_lines()
        n = line_of(lines, "pool = web")
        lines[n - 1] = "pool = nosuch"
        # The error points at the frontend's pool line.
        found = self.problems(self.write(lines))
        nosuch = [f for f in found if "nosuch" in f[1]]
        self.assertEqual([line for line, _ in nosuch], [n],
                         f"one message naming the pool 'nosuch', at line {n}: {found}")
        # pool web is now unused; a warning about that (at its header) is
        # fine, nothing else.
        others = [f for f in found if f not in nosuch]
        self.assertTrue(all(line == line_of(lines, "[pool web]") and "web" in msg
                            for line, msg in others), found)
        self.assertLessEqual(len(found), 2, found)

    # ---------------------------------------------------- bad: file shape

    def test_long_line(self):
        lines = base_lines()
        n = line_of(lines, "retries")
        lines.insert(n, "; " + "x" * 250)
        self.assertOneProblem(self.write(lines), n + 1, ["long", "200", "length", "characters"])

    def test_long_value_line(self):
        lines = base_lines()
        n = line_of(lines, "retries")
        lines.insert(n, "connect_timeout = " + "1" * 200 + "ms")
        # Only the length: the value inih would have cut is not judged.
        self.assertOneProblem(self.write(lines), n + 1, ["long"])

    def test_empty_file(self):
        # An empty file has no offending line: the problem is reported at
        # line 1, where the sections should start.
        self.assertOneProblem(self.write(b""), 1, ["empty"])

    def test_comments_only_file(self):
        # Comments and blank lines are no content either.
        self.assertOneProblem(self.write(["; nothing here", "", "# nor here"]), 1, ["empty"])

    def test_binary_file(self):
        data = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00" + bytes(range(256)) * 4
        # One problem, at line 1 (not one per line of garbage).
        self.assertOneProblem(self.write(data), 1, ["binary"])

    def test_nul_byte_in_line(self):
        lines = base_lines()
        n = line_of(lines, "max_connections")
        raw = "\n".join(lines).encode().split(b"\n")
        raw[n - 1] = b"max_connections = 100\x00garbage"
        # One problem, at the line with the NUL byte.
        self.assertOneProblem(self.write(b"\n".join(raw) + b"\n"), n, ["binary", "0x00"])

    def test_two_problems_two_lines(self):
        lines = base_lines()
        a = line_of(lines, "log_level")
        b = line_of(lines, "idle_timeout")
        lines[a - 1] = "log_level = chatty"
        lines[b - 1] = "idle_timeout = 5 minutes"
        found = self.problems(self.write(lines))
        found.sort()
        self.assertEqual([line for line, _ in found], [a, b], found)
        self.assertIn("log_level", found[0][1])
        self.assertIn("idle_timeout", found[1][1])

    def test_file_as_given_on_command_line(self):
        lines = base_lines()
        n = line_of(lines, "retries")
        lines[n - 1] = "retries = 2x"
        self.write(lines, name="relative.ini")
        code, out, err = lb_test("relative.ini", cwd=self.dir)
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith(f"relative.ini:{n}: "), f"stderr: {err!r}")

    def test_missing_file(self):
        path = os.path.join(self.dir, "does-not-exist.ini")
        code, out, err = lb_test(path)
        self.assertEqual(code, 1)
        self.assertIn(path, err)

    # ------------------------------------------------------------ lb -c

    def test_run_with_bad_config_exits_without_listening(self):
        lines = base_lines()
        n = line_of(lines, "connect_timeout")
        lines[n - 1] = "connect_timeout = 10q"
        admin_port = int(lines[8].rsplit(":", 1)[1])
        frontend_port = int(lines[11].rsplit(":", 1)[1])
        lb = harness.Lb("\n".join(lines) + "\n")
        lb.expect_status = 1
        self.addCleanup(lb.close)
        lb.start(wait_ready=False)
        # It must never listen while it works out that the file is bad.
        deadline = time.monotonic() + 10
        while lb.running() and time.monotonic() < deadline:
            self.assertTrue(harness.is_refused(frontend_port, timeout=1),
                            "lb listens although its config is bad")
            time.sleep(0.01)    # poll interval
        status = lb.wait_exit(timeout=10)
        self.assertEqual(status, 1)
        self.assertTrue(re.search(re.escape(lb.config_path) + f":{n}: .*connect_timeout", lb.log()),
                        lb.log_tail())
        self.assertFalse(lb.events("listen") or lb.events("ready"), lb.log_tail())
        self.assertTrue(harness.is_refused(frontend_port))
        self.assertTrue(harness.is_refused(admin_port))

    def test_bad_usage(self):
        for args in (["-Z"], ["-c"], ["-t", "-c"]):
            code, out, err = harness.run_lb(args)
            self.assertEqual(code, 2, f"lb {' '.join(args)}: stderr {err!r}")


if __name__ == "__main__":
    harness.main()
