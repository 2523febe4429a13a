"""The admin dashboard (GET / on the admin port): one HTML page with no
external assets that shows every pool and server with its state, refreshed
from /stats. Checked in headless Chromium (Debian's `chromium` package): the
DOM it renders names each server with the state /stats gives, strings from
the servers are shown as text (never parsed as HTML), and a screenshot is
taken. With LB_UPDATE_SCREENSHOT=1 the screenshot is copied to
lb/admin/dashboard.png (never otherwise, so CI does not write into the
tree).

The lb under test has two pools with HTTP checks at short intervals: up
servers, one drained and one disabled through the operator POSTs, and one
whose port refuses connections (down)."""

import html.parser
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, http_via, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_TIMEOUT = 60.0
# fall 3: with Chromium taking the CPU, one late answer from a backend
# thread must not turn an up server down while the page is read.
HTTP = {"check": "http", "check_interval": "200ms", "check_timeout": "200ms",
        "fall": 3, "rise": 1}
WAIT = 10.0
# A check detail is the backend's reason phrase, printable ASCII: it may be
# markup, which the page must show as text.
HOSTILE_REASON = "<img src=x onerror=alert(1)><b id=xss>!</b>"


def hostile_handler(backend, conn):
    """Answers a health check with HOSTILE_REASON as the reason phrase."""
    if harness.recv_head(conn) is None:
        return
    conn.sendall(f"HTTP/1.1 503 {HOSTILE_REASON}\r\nContent-Length: 0\r\n"
                 "Connection: close\r\n\r\n".encode())


def admin_request(port, method, path):
    """(status, content type, body bytes) of one request to the admin port."""
    c = http.client.HTTPConnection(HOST, port, timeout=IO_TIMEOUT)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read()
    finally:
        c.close()


def stats(port):
    status, _, body = admin_request(port, "GET", "/stats")
    if status != 200:
        raise AssertionError(f"GET /stats: {status} {body!r}")
    return json.loads(body)


def web_server(port, name):
    pool = next(p for p in stats(port)["pools"] if p["name"] == "web")
    return next(s for s in pool["servers"] if s["name"] == name)


def server_states(port):
    return {(p["name"], s["name"]): s["state"]
            for p in stats(port)["pools"] for s in p["servers"]}


class DomRows(html.parser.HTMLParser):
    """Collects the elements of a dumped DOM: rows[(pool, server)] = the
    row's attributes and text; pills[(pool, server)] = the text of the
    row's element that carries data-state; ids[id] = attributes of the
    element with that id; tags: the tag of every element."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
            "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows, self.pills, self.ids, self.tags = {}, {}, {}, []
        self.stack = []          # open elements: (tag, attrs)
        self.row = None          # (pool, server) of the open <tr data-server>
        self.pill_depth = None   # stack depth of the open pill element

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids[a["id"]] = a
        if tag in self.VOID:
            return
        self.stack.append((tag, a))
        if tag == "tr" and "data-server" in a:
            self.row = (a.get("data-pool"), a["data-server"])
            self.rows[self.row] = {"attrs": a, "text": ""}
        elif self.row and "data-state" in a and self.pill_depth is None:
            self.pill_depth = len(self.stack)
            self.pills[self.row] = {"state": a["data-state"], "text": ""}

    def handle_endtag(self, tag):
        if tag in self.VOID or not self.stack:
            return
        if self.pill_depth is not None and len(self.stack) == self.pill_depth:
            self.pill_depth = None
        t, _ = self.stack.pop()
        if t == "tr":
            self.row = None

    def handle_data(self, data):
        if self.row:
            self.rows[self.row]["text"] += data
            if self.pill_depth is not None:
                self.pills[self.row]["text"] += data


class AdminDashboardTest(LbTestCase):

    def setUp(self):
        super().setUp()
        if not os.access(CHROMIUM, os.X_OK):
            self.fail(f"{CHROMIUM} is missing: this test needs Debian's chromium "
                      "package (apt-get install chromium)")

    def _start(self, hostile=False):
        """Starts lb and brings its servers to their states. Returns (lb,
        admin port, {(pool, server): expected state})."""
        b = self.hc_backend(count=5)
        web1, web2, web3, api1, api3 = (b.addr(p) for p in b.ports)
        refused = self.refused()
        api = [("api1", api1, 2), ("api2", refused), ("api3", api3)]
        expect = {("web", "web1"): "up", ("web", "web2"): "up", ("web", "web3"): "draining",
                  ("api", "api1"): "up", ("api", "api2"): "down", ("api", "api3"): "disabled"}
        if hostile:
            api.append(("evil", self.custom(hostile_handler, name="evil").addr))
            expect[("api", "evil")] = "down"
        admin = harness.free_port()
        lb = self.lb_pools([("web", [("web1", web1, 3), ("web2", web2), ("web3", web3)],
                             dict(HTTP, balance="roundrobin", drain_timeout="5m")),
                            ("api", api, dict(HTTP, balance="leastconn"))],
                           admin_port=admin)
        wait_for(lambda: all(s == "up" for k, s in server_states(admin).items()
                             if expect[k] != "down"), WAIT,
                 lambda: f"the servers to be up; /stats says {server_states(admin)}")
        # Some traffic so that the counters are not all zero.
        for _ in range(6):
            http_via(lb.ports["web"])
        for _ in range(3):
            http_via(lb.ports["api"])
        # lb counts those out a moment after their clients closed; a late
        # one would pass below for a held connection.
        wait_for(lambda: stats(admin)["connections"]["active"] == 0, WAIT,
                 "the traffic's connections closed at lb")
        # A server is draining while it is out of rotation by the operator
        # and still has connections: hold client connections open (an
        # unfinished request) until one of them is on web3, then drain it.
        held = []

        def web3_active():
            held.append(self.client(lb.ports["web"]))
            held[-1].sendall(b"GET /held HTTP/1.1\r\nHost: lb-test\r\n")
            wait_for(lambda: stats(admin)["connections"]["active"] == len(held), WAIT,
                     lambda: f"{len(held)} held client connections in /stats")
            return web_server(admin, "web3")["active_connections"] >= 1
        wait_for(web3_active, WAIT, "a held client connection on web3")
        for pool, server, action in (("web", "web3", "drain"), ("api", "api3", "disable")):
            status, _, body = admin_request(admin, "POST",
                                            f"/pools/{pool}/servers/{server}/{action}")
            self.assertEqual(status, 200, body)
        wait_for(lambda: server_states(admin) == expect, WAIT,
                 lambda: f"servers in states {expect}; /stats says {server_states(admin)}")
        return lb, admin, expect

    def chromium(self, url, *args):
        """Runs headless Chromium on url with a fresh profile; returns its
        stdout. Killed (its whole process group) past CHROMIUM_TIMEOUT."""
        profile = tempfile.mkdtemp(prefix="lb-chromium-")
        self.addCleanup(shutil.rmtree, profile, True)
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args, url]
        env = dict(os.environ, HOME=profile, XDG_CONFIG_HOME=profile, XDG_CACHE_HOME=profile)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        harness._all_procs.append(proc)     # killed at exit if the test is interrupted
        try:
            out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"chromium did not finish in {CHROMIUM_TIMEOUT:.0f}s; killed it\n"
                                 + err.decode(errors="replace")[-3000:])
        if proc.returncode != 0:
            raise AssertionError(f"chromium exited with status {proc.returncode}\n"
                                 + err.decode(errors="replace")[-3000:])
        return out.decode(errors="replace")

    def test_page_is_self_contained_html(self):
        lb, admin, _ = self._start()
        status, ctype, body = admin_request(admin, "GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/html"), ctype)
        page = body.decode()
        self.assertIn("<!doctype html>", page.lower())
        for needle in ("http://", "https://", "//cdn", "@import", "<link"):
            self.assertNotIn(needle, page.lower(), f"external asset marker {needle!r} in the page")
        self.assertIn("stats", page)
        with open(os.path.join(harness.SOURCE_DIR or ".", "lb", "admin", "dashboard.html"), "rb") as f:
            self.assertEqual(f.read(), body, "lb serves a stale copy of lb/admin/dashboard.html")
        lb.assert_running()

    def test_dom_shows_every_server_state(self):
        lb, admin, expect = self._start(hostile=True)
        dom = self.chromium(f"http://{HOST}:{admin}/", "--dump-dom")
        p = DomRows()
        p.feed(dom)
        self.assertEqual(set(p.rows), set(expect), f"server rows in the DOM:\n{dom[:3000]}")
        for key, state in expect.items():
            row = p.rows[key]
            self.assertEqual(row["attrs"].get("data-state"), state, f"{key}: {row}")
            self.assertIn(key[1], row["text"], key)
            self.assertIn(key, p.pills, f"{key}: no state pill")
            self.assertEqual(p.pills[key]["state"], state, key)
            self.assertIn(state, p.pills[key]["text"], key)
        for pool in ("web", "api"):
            self.assertIn(f'data-pool="{pool}"', dom)
        # The failed check's detail is shown as text, not turned into markup.
        self.assertIn(HOSTILE_REASON, p.rows[("api", "evil")]["text"])
        self.assertNotIn("xss", p.ids, "a check detail was parsed as HTML")
        self.assertNotIn("img", p.tags, "a check detail was parsed as HTML")
        self.assertIn("HTTP 200 OK", p.rows[("web", "web1")]["text"])
        live = p.ids.get("live", {}).get("class", "").split()
        self.assertIn("live", live, "no live indicator")
        self.assertNotIn("lost", live, "the page shows 'connection lost': it could not read /stats")
        version = re.search(r'id="k-version"[^>]*>([^<]*)<', dom)
        self.assertEqual(version and version.group(1), stats(admin)["version"],
                         "the header does not show lb's version")
        lb.assert_running()

    def test_removed_servers_failed_reload_and_disable_confirmation(self):
        b = self.hc_backend(count=2)
        admin = harness.free_port()
        lb = self.lb_pools([("web", [("web1", b.addr(b.ports[0])), ("web2", b.addr(b.ports[1]))],
                             dict(HTTP, drain_timeout="5m"))],
                           admin_port=admin, allowed_errors=("reload_failed",))
        wait_for(lambda: set(server_states(admin).values()) == {"up"}, WAIT, "both up")
        held = [self.client(lb.ports["web"]) for _ in range(2)]     # one on each
        for c in held:
            c.sendall(b"GET /held HTTP/1.1\r\nHost: lb-test\r\n")
        wait_for(lambda: web_server(admin, "web2")["active_connections"] == 1, WAIT, "held")
        with open(lb.config_path) as f:
            text = f.read()
        with open(lb.config_path, "w") as f:
            f.write(re.sub(r"(?m)^server = web2 .*\n", "", text))
        status, _, body = admin_request(admin, "POST", "/reload")
        self.assertEqual(status, 200, body)
        dom = self.chromium(f"http://{HOST}:{admin}/", "--dump-dom")
        self.assertRegex(dom, r'<div id="reload-banner" role="alert"( class="")?></div>',
                         "a banner without a failed reload")
        self.assertIn('data-removed="web/web2"', dom, "the removed, draining server is not shown")
        with open(lb.config_path, "a") as f:
            f.write("bogus_key = 1\n")
        status, _, body = admin_request(admin, "POST", "/reload")
        self.assertEqual(status, 400, body)
        dom = self.chromium(f"http://{HOST}:{admin}/", "--dump-dom")
        m = re.search(r'<div id="reload-banner" role="alert" class="on">([^<]*)</div>', dom)
        self.assertIsNotNone(m, "no banner for the failed reload")
        self.assertIn("The last reload failed:", m.group(1))
        self.assertIn("unknown key", m.group(1))
        # disable closes connections at once: the page asks before it acts
        _, _, page = admin_request(admin, "GET", "/")
        self.assertRegex(page.decode(), r"action === 'disable' && !confirm\(")
        lb.assert_running()

    def test_screenshot(self):
        lb, admin, _ = self._start()
        shot_dir = tempfile.mkdtemp(prefix="lb-shot-")
        self.addCleanup(shutil.rmtree, shot_dir, True)
        shot = os.path.join(shot_dir, "admin_dashboard.png")
        self.chromium(f"http://{HOST}:{admin}/", f"--screenshot={shot}", "--window-size=1280,900")
        self.assertTrue(os.path.exists(shot), "chromium wrote no screenshot")
        with open(shot, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
        self.assertGreater(len(png), 10 * 1024, "the screenshot is nearly empty")
        if os.environ.get("LB_UPDATE_SCREENSHOT") == "1":
            dest = os.path.join(harness.SOURCE_DIR or ".", "lb", "admin", "dashboard.png")
            shutil.copyfile(shot, dest)
            print(f"screenshot copied to {dest}")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
