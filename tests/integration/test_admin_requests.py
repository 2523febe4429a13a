"""Admin port, requests read strictly (issue 10, section 6): what libevent
2.1 would read differently from a strict HTTP/1.1 parser is refused with a
400 JSON error and the connection is closed, so that nothing sent behind it
runs: two Content-Length headers (the smuggling shape: the first one framed
the body and the rest ran as a second request), Transfer-Encoding with or
without Content-Length, an HTTP version other than 1.0 and 1.1 (answered
as "HTTP/1.-1" before), CONNECT (answered without a Content-Length on a
kept-alive connection before), a folded header line. A POST to an unknown
path is 404 (was 405). The token check takes the exact token only: not
with a trailing space, not with a NUL and junk after it, not from two
Authorization headers (the first one decided). Every probe is sent with a
request behind it that would disable a server, and the server must stay
up."""

import re
import socket

import harness
from harness import HOST, LbTestCase
import admin_client
from admin_client import find_server, raw_exchange

TOKEN = "s3cret-token"
WAIT = 5.0


def answers(raw):
    """The (status line, headers dict, body) of each HTTP answer in raw, in
    order; each body framed by its Content-Length (which must be there)."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            raise AssertionError(f"an answer without the end of its head: {raw[:300]!r}")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if "content-length" not in headers:
            raise AssertionError(f"an answer without Content-Length: {head!r}")
        n = int(headers["content-length"])
        out.append((lines[0], headers, rest[:n]))
        raw = rest[n:]
    return out


class AdminRequestsTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.lb = admin_client.start_lb(self, [("web", [("web1", self.named("web1"))], {})],
                                        token=TOKEN)
        self.host = f"Host: {HOST}:{self.lb.admin_port}\r\n"
        # What a smuggler would hide behind a request: it must never run.
        self.smuggled = (f"POST /pools/web/servers/web1/disable HTTP/1.1\r\n{self.host}"
                         f"Authorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\r\n")

    def assertUp(self, what):
        srv = find_server(self.lb.admin.stats(), "web", "web1")
        self.assertEqual((srv["state"], srv["admin"]), ("up", "none"),
                         f"{what}: the request behind it ran")

    def assertRefusedAndClosed(self, payload, status, error, what):
        """payload gets exactly one answer, `status` with a JSON error
        (whose message contains `error`), a Content-Length and
        "Connection: close", and lb closes the connection: what was sent
        behind it is never read."""
        raw, how = raw_exchange(self.lb.admin_port, payload, timeout=WAIT)
        self.assertIn(how, ("eof", "reset"), f"{what}: connection left open after {raw[:300]!r}")
        got = answers(raw)
        self.assertEqual(len(got), 1, f"{what}: {len(got)} answers: {raw[:600]!r}")
        line, headers, body = got[0]
        self.assertRegex(line, rf"^HTTP/1\.[01] {status} ", f"{what}: {raw[:300]!r}")
        self.assertEqual(headers.get("content-type"), "application/json", what)
        self.assertEqual(headers.get("connection"), "close", what)
        self.assertIn(error, admin_client.strict_json(body)["error"], what)
        self.assertUp(what)
        self.lb.assert_running()

    def test_two_content_lengths_smuggle_nothing(self):
        # The shape that worked: libevent framed the body with the first
        # Content-Length (0) and ran the rest as a second request.
        for first, second in ((0, len(self.smuggled)), (len(self.smuggled), 0)):
            payload = (f"GET /healthz HTTP/1.1\r\n{self.host}Content-Length: {first}\r\n"
                       f"Content-Length: {second}\r\n\r\n{self.smuggled}").encode()
            self.assertRefusedAndClosed(payload, 400, "two Content-Length headers",
                                        f"Content-Length {first} then {second}")
        payload = (f"GET /healthz HTTP/1.1\r\n{self.host}Content-Length: 0\r\n"
                   f"Content-Length: 0\r\n\r\n{self.smuggled}").encode()
        self.assertRefusedAndClosed(payload, 400, "two Content-Length headers", "equal values")

    def test_transfer_encoding_is_refused(self):
        # With Content-Length too, libevent refuses some shapes itself (a
        # JSON "bad request" then); either way nothing behind them runs.
        body = "0\r\n\r\n"
        for headers, error in (
                ("Transfer-Encoding: chunked\r\n", "Transfer-Encoding is not supported"),
                (f"Transfer-Encoding: chunked\r\nContent-Length: {len(body)}\r\n", ""),
                (f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n", ""),
                (f"Content-Length: {len(body)}\r\nTransfer-Encoding: gzip\r\n", ""),
                ("Transfer-Encoding: gzip\r\n", "Transfer-Encoding is not supported")):
            payload = (f"POST /reload HTTP/1.1\r\n{self.host}Authorization: Bearer {TOKEN}\r\n"
                       f"{headers}\r\n{body}{self.smuggled}").encode()
            self.assertRefusedAndClosed(payload, 400, error, headers.strip())
        self.assertEqual(self.lb.admin.stats()["reloads"]["ok"], 0, "a refused reload ran")

    def test_versions_other_than_1_0_and_1_1(self):
        for version in ("HTTP/1.2147483647", "HTTP/1.2", "HTTP/1.257", "HTTP/0.9"):
            raw, how = raw_exchange(self.lb.admin_port, (
                f"GET /stats {version}\r\n{self.host}\r\n{self.smuggled}").encode(), timeout=WAIT)
            # never "HTTP/1.-1" nor an echo of a version lb does not speak
            self.assertTrue(raw.startswith(b"HTTP/1.1 400 "), f"{version}: {raw[:200]!r}")
            self.assertIn(b'"error":"unsupported HTTP version', raw, version)
            self.assertIn(how, ("eof", "reset"), f"{version}: left open")
        self.assertUp("odd versions")
        # 1.0 and 1.1 are served as before, with a Content-Length even
        # where libevent would frame the answer by the close (1.0)
        for version in ("HTTP/1.0", "HTTP/1.1"):
            raw, how = raw_exchange(self.lb.admin_port, (
                f"GET /healthz {version}\r\n{self.host}Connection: close\r\n\r\n").encode(),
                timeout=WAIT)
            self.assertTrue(raw.startswith(f"{version} 200 ".encode()), f"{version}: {raw!r}")
            self.assertEqual(answers(raw)[0][2], b"ok\n", version)

    def test_connect_is_refused_and_closed(self):
        # Before: 400 with a body but no Content-Length, and the connection
        # kept alive, so the next request ran.
        payload = (f"CONNECT {HOST}:{self.lb.admin_port} HTTP/1.1\r\n{self.host}\r\n"
                   f"{self.smuggled}").encode()
        self.assertRefusedAndClosed(payload, 400, "CONNECT is not supported", "CONNECT")

    def test_folded_header_and_control_bytes(self):
        cases = {
            "folded line": f"GET /stats HTTP/1.1\r\n{self.host}X-A: a\r\n b\r\n\r\n",
            "space before the colon": f"GET /stats HTTP/1.1\r\nHost : {HOST}\r\n\r\n",
            "two Host headers": f"GET /stats HTTP/1.1\r\n{self.host}{self.host}\r\n",
            "HTTP/1.1 without Host": "GET /stats HTTP/1.1\r\n\r\n",
            "absolute target": f"GET http://{HOST}:{self.lb.admin_port}/stats HTTP/1.1\r\n"
                               f"{self.host}\r\n",
        }
        for what, head in cases.items():
            self.assertRefusedAndClosed((head + self.smuggled).encode(), 400, "", what)

    def test_unknown_path_is_404_whatever_the_method(self):
        a = self.lb.admin
        for method in ("POST", "GET", "DELETE", "PUT"):
            r = a.request(method, "/no-such-thing",
                          headers={"Authorization": f"Bearer {TOKEN}"})
            self.assertEqual(r.status, 404, f"{method}: {r}")
            self.assertEqual(r.json(), {"error": "not found"}, f"{method}: {r}")
        # a known path with the wrong method is still 405 with Allow
        r = a.post("/stats")
        self.assertEqual((r.status, r.header("Allow")), (405, "GET, HEAD"), str(r))
        r = a.get("/reload")
        self.assertEqual((r.status, r.header("Allow")), (405, "POST"), str(r))

    def test_exact_token_only(self):
        path = "/pools/web/servers/web1/disable"

        def post(auth_lines):
            return raw_exchange(self.lb.admin_port, (
                f"POST {path} HTTP/1.1\r\n{self.host}{auth_lines}Content-Length: 0\r\n"
                f"Connection: close\r\n\r\n").encode() + b"", timeout=WAIT)
        # the token and a trailing space or tab: 401 (libevent trimmed it)
        for tail in (" ", "\t", "  "):
            raw, _ = post(f"Authorization: Bearer {TOKEN}{tail}\r\n")
            self.assertTrue(raw.startswith(b"HTTP/1.1 401 "), f"tail {tail!r}: {raw[:200]!r}")
            self.assertIn(b"WWW-Authenticate: Bearer", raw)
        self.assertUp("token with a trailing blank")
        # the token, a NUL and junk: refused (libevent stopped at the NUL)
        raw, how = raw_exchange(self.lb.admin_port, (
            f"POST {path} HTTP/1.1\r\n{self.host}Authorization: Bearer {TOKEN}").encode()
            + b"\0junk\r\nContent-Length: 0\r\n\r\n", timeout=WAIT)
        self.assertTrue(raw.startswith(b"HTTP/1.1 400 "), f"NUL: {raw[:200]!r}")
        self.assertIn(how, ("eof", "reset"), "NUL: left open")
        self.assertUp("token with a NUL and junk")
        # two Authorization headers: 400 whichever comes first
        good, bad = f"Authorization: Bearer {TOKEN}\r\n", "Authorization: Bearer nope\r\n"
        for lines in (good + bad, bad + good, good + good):
            payload = (f"POST {path} HTTP/1.1\r\n{self.host}{lines}Content-Length: 0\r\n\r\n"
                       f"{self.smuggled}").encode()
            self.assertRefusedAndClosed(payload, 400, "two Authorization headers", lines)
        # the exact token works, with the scheme in any case
        for scheme in ("Bearer", "bearer"):
            raw, _ = post(f"Authorization: {scheme} {TOKEN}\r\n")
            self.assertTrue(raw.startswith(b"HTTP/1.1 200 "), f"{scheme}: {raw[:200]!r}")
            self.assertIn(b'"admin":"disable"', raw)
            r = self.lb.admin.action("web", "web1", "enable")
            self.assertEqual(r.status, 200, str(r))

    def test_kept_alive_connection_goes_on_after_a_good_request(self):
        # The strict reading does not cost keep-alive: two requests on one
        # connection, then a refused one that closes it.
        s = harness.connect(self.lb.admin_port, timeout=WAIT)
        self.addCleanup(s.close)
        s.sendall((f"GET /healthz HTTP/1.1\r\n{self.host}\r\n"
                   f"GET /healthz HTTP/1.1\r\n{self.host}\r\n"
                   f"GET /healthz HTTP/9.9\r\n{self.host}\r\n{self.smuggled}").encode())
        raw, how = harness.recv_until_eof(s, timeout=WAIT)
        got = answers(raw)
        self.assertEqual([re.match(r"HTTP/1\.1 (\d+)", line).group(1) for line, _, _ in got],
                         ["200", "200", "400"], raw[:800])
        self.assertIn(how, ("eof", "reset"))
        self.assertUp("pipelined")


if __name__ == "__main__":
    harness.main()
