"""deploy/prometheus/lb.rules.yml against a real Prometheus (Debian's
prometheus package) scraping a real lb every second, its rules evaluated
every second:

- `promtool check rules` accepts the file;
- while everything is healthy (every server up, discovery answering, the
  queue and the descriptors far from their limits) no alert is pending:
  no expression is true whatever the figures;
- each alert goes pending (or firing, those without `for:`) once its
  condition holds, with the pool and server labels of what broke: a backend
  stopped (server down), the pool's last backend stopped (the guard holds
  it), both servers disabled (below min_servers, no server in rotation), a
  broken file reloaded, the DNS server stopped, a client refused by a full
  queue, connections held until 80% of the descriptors are open.

Prometheus runs on a free port of 127.0.0.1 with its own config and data
directory (a system service of the package, if any, is not used) and is
stopped by its pid.
"""

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import harness
from harness import HOST, IO_TIMEOUT, free_port, wait_for
import admin_client
from test_discover import DnsServer

RULES = os.path.join(harness.SOURCE_DIR or ".", "deploy", "prometheus", "lb.rules.yml")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
ALERTS = ("LbServerDown", "LbPoolGuardActive", "LbPoolBelowMinServers",
          "LbPoolNoServerInRotation", "LbReloadFailed", "LbDiscoveryFailing",
          "LbPoolQueueFull", "LbDescriptorBudgetLow")
# Scrape and evaluation every second; lb's checks every 200 ms with fall =
# 1 (discovery every 500 ms). An alert is pending at the first evaluation
# after the scrape that saw its condition: at most about 3 s after the
# cause (a verdict or a failed round, a scrape, an evaluation); twice that.
# Measured: 0-1.1 s optimised, 0-2.0 s under ASan.
PENDING_S = 6.0
START_S = 30.0          # Prometheus's start (its TSDB, the rule manager)
# lb's descriptor limit: room for the test's connections past 80% of it
NOFILE = 256


def _api(port, path, **params):
    url = f"http://{HOST}:{port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=IO_TIMEOUT) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise AssertionError(f"GET {url}: {doc}")
    return doc["data"]


def _rfc3339(text):
    """Prometheus's timestamps (nanoseconds, Z) as unix seconds."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text)
    if not m:
        raise AssertionError(f"not an RFC 3339 time: {text!r}")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    t = datetime.datetime.fromisoformat(m.group(1) + tz).timestamp()
    return t + float(m.group(2) or 0)


class Prometheus:
    """prometheus on 127.0.0.1:port scraping lb's admin port with the rules
    loaded; data in its own directory."""

    def __init__(self, tmpdir, lb_admin_port):
        self.port = free_port()
        self.dir = tmpdir
        conf = os.path.join(tmpdir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n"
                    "  scrape_interval: 1s\n"
                    "  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n"
                    f"rule_files:\n  - {os.path.abspath(RULES)}\n"
                    "scrape_configs:\n"
                    "  - job_name: lb\n"
                    "    static_configs:\n"
                    f"      - targets: ['{HOST}:{lb_admin_port}']\n")
        self.log_path = os.path.join(tmpdir, "prometheus.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={conf}",
                 f"--storage.tsdb.path={os.path.join(tmpdir, 'data')}",
                 f"--web.listen-address={HOST}:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=tmpdir,
                start_new_session=True)
        harness._all_procs.append(self.proc)     # killed at exit if interrupted

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n"
                                     + self.log_tail())
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.port}/-/ready",
                                            timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(ready, START_S, lambda: "prometheus to be ready\n" + self.log_tail())

    def log_tail(self, n=30):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError("prometheus did not stop on SIGTERM in 20 s")

    def query(self, expr):
        return _api(self.port, "/api/v1/query", query=expr)["result"]

    def alerts(self):
        """Active (pending or firing) alerts: [(alertname, state, labels)]."""
        return [(a["labels"]["alertname"], a["state"], a["labels"])
                for a in _api(self.port, "/api/v1/alerts")["alerts"]]

    def last_evaluation(self):
        """When the group was evaluated last (unix seconds; 0: not yet)."""
        groups = _api(self.port, "/api/v1/rules")["groups"]
        t = groups[0]["lastEvaluation"] if groups else ""
        return 0.0 if t.startswith("0001-") or not t else _rfc3339(t)

    def wait_alert(self, name, timeout=PENDING_S, **labels):
        """Waits until alert `name` with those labels is pending or firing;
        returns (its state, seconds waited)."""
        t0 = time.monotonic()
        last = [[]]

        def active():
            last[0] = self.alerts()
            return next((state for a, state, lab in last[0] if a == name
                         and all(lab.get(k) == v for k, v in labels.items())), None)
        state = wait_for(active, timeout, lambda: f"alert {name} {labels} pending; "
                         f"active alerts: {last[0]}")
        return state, time.monotonic() - t0


class PrometheusRulesTest(harness.LbTestCase):

    def setUp(self):
        super().setUp()
        for tool in (PROMETHEUS, PROMTOOL, DnsServer.BIN):
            if not os.access(tool, os.X_OK):
                self.fail(f"{tool} is not installed (deploy/install-deps.sh --test installs "
                          "prometheus and dnsmasq-base)")

    def test_promtool_accepts_the_rules(self):
        r = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"SUCCESS: {len(ALERTS)} rules found", r.stdout)
        names = re.findall(r"(?m)^\s*- alert: (\S+)$", open(RULES).read())
        self.assertEqual(sorted(names), sorted(ALERTS))

    def start(self):
        """lb with pools web (2 servers, TCP checks, min_servers = 1), q (a
        server holding 1 connection, queue_max = 1), api (discovered by
        dns-a from dnsmasq) and fd (an echo server for held connections),
        all healthy; then Prometheus, once every server is up."""
        self.w1, self.w2 = self.echo("w1"), self.echo("w2")
        self.q1, self.f1 = self.named("q1", hold=True), self.echo("f1")
        self.a1 = self.echo("a1")
        self.dns = DnsServer(harness.make_tmpdir())
        self.addCleanup(self.dns.stop)
        self.dns.serve(hosts={"api.svc.test": HOST})
        checks = {"check": "tcp", "check_interval": "200ms", "check_timeout": "200ms",
                  "rise": 1, "fall": 1}
        lb = admin_client.start_lb(self, [
            ("web", [("w1", self.w1), ("w2", self.w2)], dict(checks, min_servers=1)),
            ("q", [("q1", self.q1, "max_connections=1")],
             {"queue_max": 1, "queue_timeout": "30s"}),
            ("api", [], dict(checks, discover="dns-a", discover_name="api.svc.test",
                             discover_port=self.a1.port,
                             discover_resolver=f"{HOST}:{self.dns.port}",
                             discover_interval="500ms")),
            ("fd", [("f1", self.f1)], {}),
        ], nofile=NOFILE, max_connections=200,
            allowed_errors=("reload_failed", "no_server", "discover_failed"))
        lb.admin.wait_stats(lambda st: all(s["state"] == "up" for p in st["pools"]
                                           for s in p["servers"])
                            and len(admin_client.find_pool(st, "api")["servers"]) == 1,
                            IO_TIMEOUT, "every server up, api's discovered")
        prom = Prometheus(harness.make_tmpdir(), lb.admin_port)
        self.addCleanup(prom.stop)
        return lb, prom

    def assert_quiet(self, prom):
        """Prometheus has lb's series, has evaluated the rules twice since,
        and no alert is active."""
        def scraped():
            pools = {r["metric"].get("pool") for r in prom.query("lb_pool_in_rotation")}
            disc = prom.query("lb_pool_discovery_failing")
            return (pools == {"web", "q", "api", "fd"} and len(disc) == 1
                    and prom.query('up{job="lb"} == 1'))
        wait_for(scraped, PENDING_S, "Prometheus to have scraped lb")
        t = time.time()
        wait_for(lambda: prom.last_evaluation() > t + 1.0, PENDING_S,
                 "two rule evaluations after the scrape")
        self.assertEqual(prom.alerts(), [], "alerts active while everything is healthy")

    def test_alerts_quiet_when_healthy_and_pending_when_broken(self):
        lb, prom = self.start()
        self.assert_quiet(prom)
        took = {}

        def expect(name, **labels):
            state, s = prom.wait_alert(name, **labels)
            took[name] = (state, round(s, 1))
            return state

        # A backend gone: its checks fail at once (fall = 1).
        self.w1.stop()
        self.assertEqual(expect("LbServerDown", pool="web", server="w1"), "pending")
        # The last one gone too: min_servers = 1 holds it in rotation.
        self.w2.stop()
        expect("LbPoolGuardActive", pool="web")
        lb.admin.wait_server("web", "w2", lambda s: s["guarded"], IO_TIMEOUT, "w2 guarded")
        # Operators take both out: the guard cannot hold the floor.
        for s in ("w1", "w2"):
            r = lb.admin.action("web", s, "disable")
            self.assertEqual(r.status, 200, str(r))
        expect("LbPoolBelowMinServers", pool="web")
        expect("LbPoolNoServerInRotation", pool="web")

        # A file lb refuses: the old config keeps serving.
        with open(lb.config_path, "a") as f:
            f.write("\n[pool broken\n")
        r = lb.admin.post("/reload")
        self.assertEqual(r.status, 400, str(r))
        expect("LbReloadFailed")

        # The registry stops answering: the discovered server keeps serving.
        self.dns.stop()
        expect("LbDiscoveryFailing", pool="api")

        # q1 holds one client, one waits, the next is refused.
        held = [self.client(lb.fports["fe_q"])]
        self.assertEqual(harness.read_line(held[0]), b"q1\n")
        held.append(self.client(lb.fports["fe_q"]))
        lb.admin.wait_stats(lambda st: admin_client.find_pool(st, "q")["queue"]["depth"] == 1,
                            IO_TIMEOUT, "one client queued")
        got, how = harness.recv_until_eof(harness.connect(lb.fports["fe_q"]))
        self.assertEqual(got, b"", how)
        expect("LbPoolQueueFull", pool="q")

        # Connections held open (two descriptors each) until 80% of lb's
        # limit is in use; at most NOFILE / 2 of them.
        for _ in range(NOFILE // 2):
            m = lb.admin.metrics()
            if m.value("process_open_fds") > 0.82 * m.value("process_max_fds"):
                break
            c = self.client(lb.fports["fe_fd"])
            self.assertEqual(harness.roundtrip(c, b"x"), b"x")
            held.append(c)
        else:
            self.fail(f"{NOFILE // 2} connections did not take lb past 82% of "
                      f"{NOFILE} descriptors")
        self.assertEqual(m.value("process_max_fds"), NOFILE)
        expect("LbDescriptorBudgetLow")
        for c in held:
            c.close()

        self.assertEqual(sorted(took), sorted(ALERTS), took)
        print(f"\nalert: (state, seconds from the cause to it): {took}")


if __name__ == "__main__":
    harness.main()
