"""Admin port, other web pages (issue 10, section 3): with no token set, any
page open in the operator's browser could POST to the admin port (a POST
without a body needs no CORS preflight) and drain, disable or reload, and a
page that rebinds its DNS name to 127.0.0.1 could read /stats.

Now a request whose Origin is present and is not the port's own origin
(http:// + the Host it was sent to) is refused with 403 and a JSON error,
and so is a request whose Host is not the listen address, localhost or a
name of [admin] allowed_hosts. curl (no Origin, Host = the address) and the
dashboard's own requests keep working. Each is checked with and without a
token, on 127.0.0.1 and [::1], with allowed_hosts changed by a reload, and
in headless Chromium: a page of another origin POSTs for real and changes
nothing, a rebound name reads a 403, the dashboard's own buttons work."""

import http.client
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, wait_for
import admin_client
from admin_client import find_server, raw_exchange

CHROMIUM = "/usr/bin/chromium"
TOKEN = "t0ken-for-origin"
EVIL = "http://evil.example"


class Browser:
    """Headless Chromium driven through the DevTools protocol on a pipe
    (--remote-debugging-pipe: JSON messages ended by a NUL, commands on
    its fd 3, answers on its fd 4). Killed (its process group) at
    close()."""

    def __init__(self, tc, *args):
        self.profile = tempfile.mkdtemp(prefix="lb-chromium-")
        tc.addCleanup(shutil.rmtree, self.profile, True)
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", *args, "about:blank"]
        env = dict(os.environ, HOME=self.profile, XDG_CONFIG_HOME=self.profile,
                   XDG_CACHE_HOME=self.profile)
        self.stderr_path = os.path.join(self.profile, "chromium.stderr")
        with open(self.stderr_path, "wb") as err:
            # the shell puts our pipe ends where Chromium looks for them;
            # bash, as dash takes only one-digit descriptors ("Bad fd number"
            # once the test process has ten open)
            self.proc = subprocess.Popen(
                ["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{out_w}', "bash", *argv],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                pass_fds=(cmd_r, out_w), start_new_session=True)
        harness._all_procs.append(self.proc)
        os.close(cmd_r)
        os.close(out_w)
        self.w = cmd_w
        self.r = out_r
        self.buf = b""
        self.next_id = 0
        tc.addCleanup(self.close)

    def _message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise AssertionError("chromium did not answer in time\n" + self.stderr())
            chunk = os.read(self.r, 65536)
            if not chunk:
                raise AssertionError("chromium closed its pipe\n" + self.stderr())
            self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=30.0):
        """One command; returns its result (events meanwhile are dropped)."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise AssertionError(f"chromium: {method}: {m['error']}")
                return m["result"]

    def open(self, url):
        """A new tab on url, loaded; returns its session."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        self.navigate(session, url)
        return session

    def navigate(self, session, url):
        """Loads url in the tab and waits until the new page is loaded (a
        mark left on the old page is gone: the initial about:blank, or the
        same URL, is "complete" too)."""
        self.eval(session, "window.lbOldPage = true")
        self.send("Page.navigate", {"url": url}, session=session)

        def loaded():
            try:
                return self.eval(session, "!window.lbOldPage && document.readyState === "
                                          "'complete'")
            except AssertionError as e:     # evaluated while navigating
                if "navigated" in str(e) or "context" in str(e).lower():
                    return False
                raise
        wait_for(loaded, 20, f"chromium to load {url}")

    def eval(self, session, expression):
        """The value of a JavaScript expression in the tab (promises are
        awaited)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                           "returnByValue": True}, session=session)
        if "exceptionDetails" in r:
            raise AssertionError(f"chromium: {expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass


def page_backend(html):
    """A harness.Backend handler serving html to any HTTP request."""
    body = html.encode()

    def handler(backend, conn):
        conn.settimeout(IO_TIMEOUT)
        if harness.recv_head(conn) is None:
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return handler


class AdminOriginTest(LbTestCase):

    def start(self, token=None, **opts):
        lb = admin_client.start_lb(self, [("web", [("web1", self.named("web1"))], {})],
                                   token=token, **opts)
        lb.host = f"{HOST}:{lb.admin_port}"
        return lb

    def assertForbidden(self, r, what):
        self.assertEqual(r.status, 403, f"{what}: {r}")
        self.assertEqual(r.media_type()[0], "application/json", f"{what}: {r}")
        self.assertIn("forbidden", r.json()["error"], f"{what}: {r}")

    def assertUntouched(self, lb, what, reloads=0):
        st = lb.admin.stats()
        srv = find_server(st, "web", "web1")
        self.assertEqual((srv["state"], srv["admin"]), ("up", "none"), f"{what}: web1 changed")
        self.assertEqual(st["reloads"]["ok"], reloads, f"{what}: a reload ran")

    def check_other_sites(self, lb, token):
        """The refusals, then what keeps working, for lb with token (or
        none)."""
        a = lb.admin
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        own = f"http://{lb.host}"
        # Another site's page: POSTs (with the right token even) and GETs.
        for origin in (EVIL, "null", f"https://{lb.host}", f"http://localhost:{lb.admin_port}",
                       f"http://{HOST}:{lb.admin_port + 1}", own + "/"):
            for path in ("/pools/web/servers/web1/disable", "/reload"):
                self.assertForbidden(a.request("POST", path, headers={"Origin": origin, **auth}),
                                     f"POST {path} from {origin}")
            self.assertForbidden(a.get("/stats", headers={"Origin": origin}),
                                 f"GET /stats from {origin}")
        self.assertUntouched(lb, "requests from other sites")
        # A rebound name: the browser sends it as Host.
        for host in ("evil.example", f"evil.example:{lb.admin_port}", f"127.0.0.2:{lb.admin_port}",
                     f"localhost.evil.example:{lb.admin_port}"):
            self.assertForbidden(a.get("/stats", headers={"Host": host}), f"Host {host}")
            self.assertForbidden(a.request("POST", "/reload", headers={"Host": host, **auth}),
                                 f"POST with Host {host}")
        self.assertUntouched(lb, "rebound names")
        # What keeps working: curl (no Origin), our own origin, localhost,
        # any port (a tunnel), HTTP/1.0 without Host.
        self.assertEqual(a.get("/stats").status, 200)
        for host in (lb.host, f"localhost:{lb.admin_port}", "LOCALHOST", f"{HOST}:18000"):
            self.assertEqual(a.get("/healthz", headers={"Host": host}).status, 200, host)
        r = a.request("POST", "/pools/web/servers/web1/drain", headers={"Origin": own, **auth})
        self.assertEqual((r.status, r.json()["admin"]), (200, "drain"), str(r))
        r = a.request("POST", "/pools/web/servers/web1/enable",
                      headers={"Origin": f"http://localhost:{lb.admin_port}",
                               "Host": f"localhost:{lb.admin_port}", **auth})
        self.assertEqual((r.status, r.json()["admin"]), (200, "none"), str(r))
        r = a.request("POST", "/reload", headers=auth)     # curl: no Origin
        self.assertEqual(r.status, 200, str(r))
        raw, _ = raw_exchange(lb.admin_port, b"GET /healthz HTTP/1.0\r\n\r\n", timeout=5)
        self.assertTrue(raw.startswith(b"HTTP/1.0 200 "), raw[:200])
        if token:
            r = a.request("POST", "/reload", headers={"Origin": own})
            self.assertEqual(r.status, 401, f"our own origin still needs the token: {r}")

    def test_other_sites_without_token(self):
        self.check_other_sites(self.start(), None)

    def test_other_sites_with_token(self):
        self.check_other_sites(self.start(token=TOKEN), TOKEN)

    def test_ipv6_listen_address(self):
        port = harness.free_port()
        lb = admin_client.start_lb(self, [("web", [("web1", self.named("web1"))], {})],
                                   admin_listen=f"[::1]:{port}")

        def req(method, path, headers=None):
            c = http.client.HTTPConnection("::1", port, timeout=IO_TIMEOUT)
            try:
                c.request(method, path, headers=headers or {})     # Host: [::1]:port
                r = c.getresponse()
                return r.status, r.read()
            finally:
                c.close()
        self.assertEqual(req("GET", "/stats")[0], 200)
        self.assertEqual(req("GET", "/stats", {"Host": f"[0:0::1]:{port}"})[0], 200)
        self.assertEqual(req("GET", "/stats", {"Host": f"localhost:{port}"})[0], 200)
        self.assertEqual(req("GET", "/stats", {"Host": f"{HOST}:{port}"})[0], 403,
                         "an IPv4 address is not this port's address")
        status, body = req("POST", "/pools/web/servers/web1/drain",
                           {"Origin": f"http://[::1]:{port}"})
        self.assertEqual(status, 200, body)
        status, body = req("POST", "/pools/web/servers/web1/enable", {"Origin": EVIL})
        self.assertEqual(status, 403, body)
        lb.assert_running()

    def test_allowed_hosts(self):
        lb = self.start(token=TOKEN)
        a = lb.admin
        name = "lb-admin.example.test"
        host = f"{name}:{lb.admin_port}"
        self.assertForbidden(a.get("/stats", headers={"Host": host}), "before allowed_hosts")
        with open(lb.config_path) as f:
            text = f.read()
        with_hosts = text.replace("[admin]\n", f"[admin]\nallowed_hosts = other.test, {name.upper()}\n")
        self.assertNotEqual(with_hosts, text)
        with open(lb.config_path, "w") as f:
            f.write(with_hosts)
        self.assertEqual(a.post("/reload").status, 200)
        # applies at once, case-insensitive, any port, with its own origin
        self.assertEqual(a.get("/stats", headers={"Host": host}).status, 200)
        self.assertEqual(a.get("/stats", headers={"Host": name}).status, 200)
        r = a.post("/pools/web/servers/web1/drain",
                   headers={"Host": host, "Origin": f"http://{host}"})
        self.assertEqual((r.status, r.json()["admin"]), (200, "drain"), str(r))
        self.assertForbidden(a.post("/pools/web/servers/web1/enable",
                                    headers={"Host": host, "Origin": EVIL}), "allowed Host, evil Origin")
        self.assertForbidden(a.get("/stats", headers={"Host": f"x{name}"}), "a longer name")
        # A bad list: lb -t names the line; a reload keeps the old list.
        bad = with_hosts.replace(f"other.test, {name.upper()}", f"{name}:9900")
        with open(lb.config_path, "w") as f:
            f.write(bad)
        code, out, err = harness.lb_test(lb.config_path)
        line = harness.line_of(bad.splitlines(), "allowed_hosts")
        self.assertEqual((code, err.strip()), (1, f"{lb.config_path}:{line}: allowed_hosts: "
                         f"\"{name}:9900\": write the name without a port (any port is accepted)"))
        lb.allowed_errors.add("reload_failed")
        r = a.post("/reload")
        self.assertEqual(r.status, 400, str(r))
        self.assertIn("allowed_hosts", r.json()["error"])
        self.assertEqual(a.get("/stats", headers={"Host": host}).status, 200,
                         "a failed reload dropped the allowed host")
        # Removed by a good reload: refused at once.
        with open(lb.config_path, "w") as f:
            f.write(text)
        self.assertEqual(a.post("/reload").status, 200)
        self.assertForbidden(a.get("/stats", headers={"Host": host}), "after the removal")

    # ------------------------------------------------------------ browser

    def browser_case(self, token):
        lb = self.start(token=token)
        evil = self.custom(page_backend("<!doctype html><title>evil</title><p>cat pictures"),
                           name="evil")
        b = Browser(self, "--host-resolver-rules=MAP rebind.test 127.0.0.1")
        # Another site's page POSTs for real (no-cors: no preflight, the
        # browser sends it and hides the answer): nothing happens.
        tab = b.open(f"http://{evil.addr}/")
        for path in ("pools/web/servers/web1/disable", "reload"):
            sent = b.eval(tab, f"fetch('http://{lb.host}/{path}', {{method: 'POST', "
                               f"mode: 'no-cors'}}).then(() => 'sent', e => 'error ' + e)")
            self.assertEqual(sent, "sent", path)
        self.assertUntouched(lb, "POSTs from another site's page")
        # A rebound name reads a 403, not /stats.
        tab = b.open(f"http://rebind.test:{lb.admin_port}/stats")
        text = b.eval(tab, "document.body.innerText")
        self.assertIn("forbidden", text)
        self.assertNotIn("frontends", text, "a rebound page read /stats")
        # The dashboard's own buttons (fetch POST with Origin): they work.
        tab = b.open(f"http://{lb.host}/")
        if token:       # as the dashboard keeps a token once entered
            b.eval(tab, f"sessionStorage.setItem('lb-token', {json.dumps(token)})")
            b.navigate(tab, f"http://{lb.host}/")
        button = 'document.querySelector(\'button[title="drain web1"]\')'
        wait_for(lambda: b.eval(tab, f"{button} !== null"), 20, "the dashboard's drain button")
        b.eval(tab, f"{button}.click()")
        lb.admin.wait_server("web", "web1", lambda s: s["admin"] == "drain", 10,
                             "the dashboard's drain to take effect")
        self.assertEqual(b.eval(tab, "fetch('stats').then(r => r.status)"), 200)

    def test_browser_without_token(self):
        self.browser_case(None)

    def test_browser_with_token(self):
        self.browser_case(TOKEN)


if __name__ == "__main__":
    harness.main()
