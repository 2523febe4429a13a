"""deploy/grafana/lb.json names only what lb serves. Grafana is not in
Debian, so the dashboard is checked against a real lb instead:

- every PromQL expression in it (panels, the rows repeated per pool, the
  template variables' label_values() queries, the annotations) is read for
  its metric names and label matchers; each name must be a family of a real
  lb's GET /metrics (a histogram's _bucket, _sum and _count are its
  family's), with samples, and each label matched must be one of that
  family's labels (or Prometheus's instance and job). The lb runs every
  feature the dashboard shows: health checks, a queue, discovery, servers
  with max_connections, so that every family has samples;
- the dashboard's shape: a `pool` template variable (multi-value, All) from
  lb_pool_servers, rows repeated by it whose every expression selects
  pool="$pool", unique panel ids, and every query on the `datasource`
  variable;
- every expression is valid PromQL: promtool (Debian's prometheus) checks
  them as recording rules, Grafana's $variables replaced;
- the checker itself finds a metric that lb does not serve, a histogram
  suffix on a gauge and a label that the family lacks.
"""

import copy
import json
import os
import re
import shutil
import subprocess

import harness
from harness import IO_TIMEOUT, free_port
import admin_client

DASHBOARD = os.path.join(harness.SOURCE_DIR or ".", "deploy", "grafana", "lb.json")
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
# What Grafana puts for its variables, for promtool
GRAFANA_VARS = {"$__rate_interval": "1m", "$instance": ".+", "$pool": "web"}
TARGET_LABELS = {"instance", "job"}     # added by Prometheus to every series
HIST_SUFFIXES = ("_bucket", "_sum", "_count")
# PromQL words that are neither metrics nor functions
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<matchers>\{(?:[^}"]|"(?:[^"\\]|\\.)*")*\})
  | (?P<range>\[[^\]]*\])
  | (?P<duration>\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*(?![\w.]))
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<var>\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)
  | (?P<other>.)
""", re.X | re.S)

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*,?')


def selectors(expr):
    """The vector selectors of a PromQL expression: [(metric name, {label
    keys matched})]. Function and aggregation names (an identifier before
     "("), keywords, the label lists of by/without/on/ignoring/group_*,
    strings, numbers, durations and Grafana's $variables are not
    selectors. An aggregation may put its by/without first."""
    toks = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        kind = m.lastgroup
        if kind != "space":
            toks.append((kind, m.group()))
        pos = m.end()
    found = []
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else (None, None)
        if kind == "ident" and text in LABEL_LISTS and nxt[1] == "(":
            i += 2                          # skip the label list to its ")"
            while i < len(toks) and toks[i][1] != ")":
                i += 1
        elif (kind == "ident" and text not in KEYWORDS and nxt[1] != "("
              and nxt[1] not in ("by", "without")):     # sum by (...) (...)
            keys = set()
            if nxt[0] == "matchers":
                body = nxt[1][1:-1]
                pos = 0
                while pos < len(body):
                    mm = _MATCHER.match(body, pos)
                    if mm is None or mm.end() == pos:
                        raise AssertionError(f"cannot read the matchers {nxt[1]} in {expr!r}")
                    keys.add(mm.group(1))
                    pos = mm.end()
            found.append((text, keys))
        elif kind == "matchers" and (i == 0 or toks[i - 1][0] != "ident"):
            raise AssertionError(f"a selector without a metric name in {expr!r}")
        i += 1
    return found


def dashboard_queries(dash):
    """[(where, PromQL)] of a dashboard: every "expr" anywhere (targets of
    panels and rows, annotations) and the metric part of each query
    variable's label_values(metric, label) (with the label, as a selector
    that must have it)."""
    out = []

    def walk(node, where):
        if isinstance(node, dict):
            title = node.get("title") or node.get("name") or where
            for k, v in node.items():
                if k == "expr" and isinstance(v, str):
                    out.append((f"{title}", v))
                else:
                    walk(v, title)
        elif isinstance(node, list):
            for v in node:
                walk(v, where)
    walk(dash.get("panels", []), "panels")
    walk(dash.get("annotations", {}), "annotations")
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        q = var.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        for text in {q, var.get("definition", "")} - {""}:
            m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", text)
            if not m:
                raise AssertionError(f"variable {var['name']}: only label_values(metric, "
                                     f"label) is understood here: {text!r}")
            out.append((f"variable {var['name']}", m.group(1)))
            out.append((f"variable {var['name']} (label)",
                        f'{selectors(m.group(1))[0][0]}{{{m.group(2)}!=""}}'))
    return out


def problems_of(dash, metrics):
    """What in dash does not exist in metrics (admin_client.parse_metrics
    of a real lb's /metrics): [text]."""
    problems = []
    for where, expr in dashboard_queries(dash):
        sels = selectors(expr)
        if not sels:
            problems.append(f"{where}: no metric in {expr!r}")
        for name, keys in sels:
            fam, labels_ok = name, set()
            if name not in metrics.families:
                base = next((name[:-len(s)] for s in HIST_SUFFIXES if name.endswith(s)), None)
                if base in metrics.families and metrics.families[base]["type"] == "histogram":
                    fam = base
                else:
                    problems.append(f"{where}: {name} is not served by lb ({expr!r})")
                    continue
            elif metrics.families[name]["type"] == "histogram":
                problems.append(f"{where}: {name} is a histogram: use _bucket, _sum or _count")
                continue
            samples = metrics.families[fam]["samples"]
            if not samples:
                problems.append(f"{where}: {fam} has no samples in lb's /metrics")
            for sample, labels, _ in samples:
                if sample == name:
                    labels_ok |= set(labels)
            unknown = keys - labels_ok - TARGET_LABELS
            if unknown:
                problems.append(f"{where}: {name} has no label {sorted(unknown)} "
                                f"(it has {sorted(labels_ok)})")
    return problems


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


class GrafanaDashboardTest(harness.LbTestCase):

    def lb_metrics(self):
        """A real lb's /metrics with every feature the dashboard shows in
        use: checks (a failing server too), a queue, max_connections,
        discovery (its resolver does not answer: the pool's status is
        "failing", which is what the families need), traffic, and a server
        a reload removed while a connection to it drains (removed="true")."""
        e1, e2, q1 = self.echo("e1"), self.echo("e2"), self.named("q1", hold=True)
        o1, o2, dead = self.echo("o1"), self.echo("o2"), self.refused()
        hc = {"check": "tcp", "check_interval": "200ms", "check_timeout": "200ms",
              "rise": 1, "fall": 1}
        lb = admin_client.start_lb(self, [
            ("web", [("e1", e1), ("e2", e2, "max_connections=10"), ("dead", dead)],
             dict(hc, min_servers=1)),
            ("q", [("q1", q1, "max_connections=1")], {"queue_max": 1, "queue_timeout": "30s"}),
            ("dns", [], dict(hc, discover="dns-a", discover_name="web.svc.test",
                             discover_port=e1.port,
                             discover_resolver=f"127.0.0.1:{free_port()}",
                             discover_interval="200ms")),
            ("old", [("o1", o1), ("o2", o2)], {"balance": "leastconn", "drain_timeout": "30s"}),
        ], allowed_errors=("discover_failed",))
        for _ in range(3):
            with harness.connect(lb.fports["fe_web"]) as c:
                self.assertEqual(harness.roundtrip(c, b"x"), b"x")
        for _ in range(2):          # leastconn: one on each
            c = self.client(lb.fports["fe_old"])
            self.assertEqual(harness.roundtrip(c, b"x"), b"x")
        with open(lb.config_path) as f:
            text = f.read()
        with open(lb.config_path, "w") as f:
            f.write(re.sub(r"(?m)^server = o2 .*\n", "", text))
        r = lb.admin.post("/reload")
        self.assertEqual(r.status, 200, str(r))
        return lb.admin.wait_metrics(
            lambda m: (m.samples("lb_pool_discovery_failing")
                       and m.value("lb_server_up", pool="web", server="dead") == 0
                       and m.value("lb_pool_session_duration_seconds_count", pool="web") == 3
                       and m.samples("lb_server_up", pool="old", server="o2", removed="true")),
            IO_TIMEOUT, "discovery tried, dead down, 3 sessions ended, o2 removed")

    def test_every_expression_names_what_lb_serves(self):
        dash = load_dashboard()
        m = self.lb_metrics()
        queries = dashboard_queries(dash)
        self.assertGreaterEqual(len(queries), 30, "the dashboard's queries were not found")
        self.assertEqual(problems_of(dash, m), [])
        used = {n for _, e in queries for n, _ in selectors(e)}
        print(f"\n{len(queries)} queries name {len(used)} metrics: {sorted(used)}")

    def test_checker_finds_what_lb_does_not_serve(self):
        dash = load_dashboard()
        m = self.lb_metrics()
        panel = next(p for p in all_panels(dash["panels"]) if p.get("targets"))
        for what, expr, want in (
                ("unknown metric", 'rate(lb_server_bogus_total{pool="$pool"}[5m])',
                 "lb_server_bogus_total is not served"),
                ("misspelt family", "sum(lb_pool_in_rotations)", "lb_pool_in_rotations is not"),
                ("suffix on a gauge", "lb_pool_servers_count", "lb_pool_servers_count is not"),
                ("bare histogram", "lb_pool_connect_seconds", "is a histogram"),
                ("unknown label", 'lb_pool_queue_depth{server="x"}', "has no label ['server']"),
                ("by() is no metric",
                 'sum by (pool, lb_nope) (rate(lb_nope_total[1m])) > bool 0',
                 "lb_nope_total is not served")):
            with self.subTest(what):
                bad = copy.deepcopy(dash)
                p = next(q for q in all_panels(bad["panels"]) if q["id"] == panel["id"])
                p["targets"][0]["expr"] = expr
                problems = problems_of(bad, m)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(want, problems[0])
        # the selector reader, on the shapes the dashboard uses
        self.assertEqual(
            selectors('histogram_quantile(0.9, sum by (le) (rate(a_bucket{x=~"$v",y="a}b"}'
                      '[$__rate_interval]))) / on (x) group_left (z) b offset 5m + 1e3'),
            [("a_bucket", {"x", "y"}), ("b", set())])

    def test_expressions_are_promql(self):
        if not os.access(PROMTOOL, os.X_OK):
            self.fail(f"{PROMTOOL} is not installed (deploy/install-deps.sh --test installs "
                      "prometheus)")
        queries = dashboard_queries(load_dashboard())
        rules = ["groups:", "  - name: dashboard", "    rules:"]
        for i, (_, expr) in enumerate(queries):
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            self.assertNotIn("$", expr, "a Grafana variable promtool would not read")
            rules += [f"      - record: dashboard_query_{i}", f"        expr: {json.dumps(expr)}"]
        path = os.path.join(harness.make_tmpdir(), "dashboard.rules.yml")
        with open(path, "w") as f:
            f.write("\n".join(rules) + "\n")
        r = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"SUCCESS: {len(queries)} rules found", r.stdout)

    def test_rows_repeat_per_pool(self):
        dash = load_dashboard()
        var = {v["name"]: v for v in dash["templating"]["list"]}
        self.assertEqual(var["datasource"]["type"], "datasource")
        self.assertEqual(var["datasource"]["query"], "prometheus")
        pool = var["pool"]
        self.assertEqual((pool["type"], pool["multi"], pool["includeAll"]), ("query", True, True))
        self.assertIn("label_values(lb_pool_servers", pool["definition"])
        ids = [p["id"] for p in all_panels(dash["panels"])]
        self.assertEqual(len(ids), len(set(ids)), f"panel ids not unique: {ids}")
        # Panels belong to the row above them (the rows are not collapsed).
        rows, current = {}, None
        for p in dash["panels"]:
            if p["type"] == "row":
                self.assertFalse(p.get("collapsed"), p["title"])
                current = p
                rows[p["title"]] = []
            else:
                self.assertIsNotNone(current, f"panel {p['title']} above every row")
                rows[current["title"]].append(p)
        repeated = [p for p in dash["panels"] if p["type"] == "row" and p.get("repeat") == "pool"]
        self.assertEqual(len(repeated), 1, "one row repeated per pool")
        self.assertIn("$pool", repeated[0]["title"])
        pool_panels = rows[repeated[0]["title"]]
        self.assertGreaterEqual(len(pool_panels), 12)
        for p in pool_panels:
            for t in p["targets"]:
                self.assertIn('pool="$pool"', t["expr"], f"{p['title']}: {t['expr']}")
        for p in all_panels(dash["panels"]):
            if p["type"] != "row":
                self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
                for t in p["targets"]:
                    self.assertEqual(t["datasource"]["uid"], "${datasource}", p["title"])
        # what the per-pool rows must show
        shown = " ".join(t["expr"] for p in pool_panels for t in p["targets"])
        for fam in ("lb_server_up", "lb_server_state", "lb_server_active_connections",
                    "lb_server_connections_total", "lb_server_bytes_in_total",
                    "lb_server_bytes_out_total", "lb_pool_connect_seconds_bucket",
                    "lb_pool_queue_depth", "lb_pool_discovery_failing",
                    "lb_check_duration_seconds_bucket"):
            self.assertIn(fam, shown)
        everywhere = " ".join(e for _, e in dashboard_queries(dash))
        self.assertIn("lb_reloads_total", everywhere)


if __name__ == "__main__":
    harness.main()
