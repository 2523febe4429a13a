"""admin_client.py - helpers for the tests of lb's admin port
(test_admin_*.py): a config builder with several frontends and an admin
token, an HTTP client for the admin port, the /stats schema of the contract
and a strict parser of the Prometheus text format (0.0.4).

Nothing here waits with a fixed sleep: the waits poll with a deadline
(harness.wait_for). Every request opens a fresh connection (http.client),
so a test never depends on lb keeping a connection alive.
"""

import http.client
import json
import math
import re
import select
import socket
import time

import harness
from harness import HOST, IO_TIMEOUT, free_port, wait_for

# Connections the admin port keeps at most (LB_ADMIN_MAX_CONNS, lb/admin/admin.h).
ADMIN_MAX_CONNS = 64

# ------------------------------------------------------------------ config


def make_admin_config(pools, frontends=None, admin_port=None, token=None,
                      admin_listen=None, workers=2, max_connections=10000,
                      log_level="info", shutdown_timeout="3s", heartbeat_token=None,
                      withdraw_delay=None, state_file=None, control_socket=None):
    """Config text for the admin tests.

    pools: list of (pool_name, servers, keys); servers a list of
    (name, target) or (name, target, weight) (a target as in
    harness.make_config); keys a dict of pool keys. Unlike the harness,
    check defaults to none (a test that wants health checks says so), and
    min_servers = 0, observe_errors = 0 so that only checks and operators
    take servers out.
    frontends: list of (frontend_name, pool_name); default one fe_<pool> per
    pool. token: the [admin] token (None: no token line), heartbeat_token
    and [global] withdraw_delay, state_file and control_socket likewise. admin_listen
    replaces the whole listen address (its port is the admin port then).
    Returns (text, admin_port, {frontend_name: port})."""
    if admin_listen:
        admin_port = int(admin_listen.rsplit(":", 1)[1])
    admin_port = admin_port or free_port()
    listen = admin_listen or f"{HOST}:{admin_port}"
    lines = ["[global]", f"workers = {workers}",
             f"max_connections = {max_connections}", f"log_level = {log_level}",
             f"shutdown_timeout = {shutdown_timeout}"]
    if withdraw_delay is not None:
        lines.append(f"withdraw_delay = {withdraw_delay}")
    if state_file is not None:
        lines.append(f"state_file = {state_file}")
    if control_socket is not None:
        lines.append(f"control_socket = {control_socket}")
    lines += ["", "[admin]", f"listen = {listen}"]
    if token is not None:
        lines.append(f"token = {token}")
    if heartbeat_token is not None:
        lines.append(f"heartbeat_token = {heartbeat_token}")
    lines.append("")
    if frontends is None:
        frontends = [(f"fe_{name}", name) for name, _, _ in pools]
    fports = {}
    for fe, pool in frontends:
        fports[fe] = free_port()
        lines += [f"[frontend {fe}]", f"listen = {HOST}:{fports[fe]}", f"pool = {pool}", ""]
    lines += pool_lines(pools)
    return "\n".join(lines), admin_port, fports


def pool_lines(pools):
    """harness.pool_lines with health checks off unless a pool sets them."""
    return harness.pool_lines(pools, {"check": "none"})


def start_lb(tc, pools, frontends=None, token=None, allowed_errors=(), nofile=None, args=(),
             **opts):
    """Starts lb (teardown registered on the LbTestCase tc) with
    make_admin_config(...), under RLIMIT_NOFILE nofile if given. Returns lb
    with lb.admin (an Admin client that sends the token, if any, with its
    POSTs), lb.admin_port and lb.fports ({frontend: port})."""
    text, admin_port, fports = make_admin_config(pools, frontends=frontends,
                                                 token=token, **opts)
    lb = tc.start_lb(text, allowed_errors=allowed_errors, nofile=nofile, args=args)
    lb.admin_port = admin_port
    lb.fports = fports
    lb.admin = Admin(admin_port, token=token)
    return lb


# ------------------------------------------------------------------ client


class Response:
    def __init__(self, status, reason, headers, body, elapsed):
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value)
        self.body = body
        self.elapsed = elapsed          # seconds, connect to last byte

    def header(self, name):
        """The value of header `name` (case-insensitive); None when absent;
        fails when it is repeated."""
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        if len(vals) > 1:
            raise AssertionError(f"header {name} repeated: {vals}")
        return vals[0] if vals else None

    def media_type(self):
        """(type, {param: value}) of Content-Type, lower-cased; fails when
        there is none."""
        ct = self.header("Content-Type")
        if ct is None:
            raise AssertionError(f"no Content-Type in the {self.status} answer: {self}")
        parts = [p.strip() for p in ct.split(";")]
        params = {}
        for p in parts[1:]:
            k, sep, v = p.partition("=")
            if not sep:
                raise AssertionError(f"bad Content-Type parameter {p!r} in {ct!r}")
            params[k.strip().lower()] = v.strip().strip('"').lower()
        return parts[0].lower(), params

    def text(self):
        return self.body.decode("utf-8")        # strict: fails on bad UTF-8

    def json(self):
        return strict_json(self.body)

    def __str__(self):
        body = self.body[:500]
        return (f"HTTP {self.status} {self.reason} {self.headers} "
                f"body[{len(self.body)}]={body!r}")


def _no_dup_keys(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise AssertionError(f"JSON object with key {k!r} twice")
        out[k] = v
    return out


def _no_constant(name):
    raise AssertionError(f"JSON holds {name}, which is not JSON")


def strict_json(body):
    """Parses bytes as RFC 8259 JSON: UTF-8 (strict), no NaN/Infinity, no
    repeated keys. Fails with the body in the message."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError(f"JSON body is not UTF-8 ({e}): {body[:2000]!r}")
    try:
        return json.loads(text, object_pairs_hook=_no_dup_keys,
                          parse_constant=_no_constant)
    except ValueError as e:
        raise AssertionError(f"invalid JSON ({e}): {body[:2000]!r}")


class Admin:
    """A client of lb's admin port. POSTs send `Authorization: Bearer
    <token>` when the client has a token, unless told otherwise."""

    def __init__(self, port, token=None, timeout=IO_TIMEOUT):
        self.port = port
        self.token = token
        self.timeout = timeout

    def request(self, method, path, headers=None, body=None, timeout=None):
        """One request on a fresh connection; returns a Response. Socket
        errors and timeouts raise."""
        t0 = time.monotonic()
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout or self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, r.reason, r.getheaders(), data,
                            time.monotonic() - t0)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, auth=True, headers=None, **kw):
        h = dict(headers or {})
        if auth and self.token is not None:
            h["Authorization"] = f"Bearer {self.token}"
        return self.request("POST", path, headers=h, **kw)

    def action(self, pool, server, action, **kw):
        return self.post(f"/pools/{pool}/servers/{server}/{action}", **kw)

    def stats(self, timeout=None):
        r = self.get("/stats", timeout=timeout)
        if r.status != 200:
            raise AssertionError(f"GET /stats: {r}")
        if r.media_type()[0] != "application/json":
            raise AssertionError(f"GET /stats: Content-Type {r.header('Content-Type')!r}")
        return r.json()

    def metrics(self):
        r = self.get("/metrics")
        if r.status != 200:
            raise AssertionError(f"GET /metrics: {r}")
        return parse_metrics(r.text())

    def wait_server(self, pool, server, cond, timeout, what):
        """Polls /stats until cond(server_object) is true; returns that
        object. The failure message shows the last object seen."""
        last = [None]

        def probe():
            s = find_server(self.stats(), pool, server)
            last[0] = s
            return s if cond(s) else None
        return wait_for(probe, timeout,
                        lambda: f"{pool}/{server}: {what}; last seen {last[0]}")

    def wait_idle(self, pool, server, timeout=10.0):
        """Waits until lb has closed every session of pool/server. A client
        that read its answer and closed is not enough: lb sees the close a
        moment later, and until then an action on the server finds it busy
        (disable and drain answer "draining", not "disabled")."""
        return self.wait_server(pool, server, lambda s: s["active_connections"] == 0,
                                timeout, "no active connection")

    def wait_metrics(self, cond, timeout, what):
        """Polls /metrics (parsed) until cond(metrics) is true; returns
        them."""
        last = [None]

        def probe():
            m = self.metrics()
            last[0] = m
            return m if cond(m) else None
        return wait_for(probe, timeout,
                        lambda: f"{what}; last /metrics:\n{last[0].text if last[0] else None}")

    def wait_stats(self, cond, timeout, what):
        """Polls /stats until cond(stats) is true; returns those stats."""
        last = [None]

        def probe():
            st = self.stats()
            last[0] = st
            return st if cond(st) else None
        return wait_for(probe, timeout, lambda: f"{what}; last /stats {last[0]}")


class Pipeline:
    """One keep-alive connection to the admin port that sends POSTs in
    batches without waiting between them (HTTP/1.1 pipelining, which
    evhttp answers in order): how an agent, or a test of 10,000 servers,
    heartbeats cheaply. post_many returns [(status, body)] in order."""

    def __init__(self, port, token=None, timeout=IO_TIMEOUT):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.buf = b""

    def close(self):
        self.sock.close()

    def _response(self):
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("admin port closed a pipelined connection")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(self.buf) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("admin port closed a pipelined connection")
            self.buf += chunk
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, body

    def post_many(self, items, batch=64):
        """items: [(path, body bytes or b"")]."""
        out = []
        for i in range(0, len(items), batch):
            chunk = items[i:i + batch]
            self.sock.sendall(b"".join(
                (f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\n{self.auth}"
                 f"Content-Length: {len(body)}\r\n\r\n").encode() + body
                for path, body in chunk))
            out += [self._response() for _ in chunk]
        return out


def find_pool(stats, pool):
    found = [p for p in stats["pools"] if p["name"] == pool]
    if len(found) != 1:
        raise AssertionError(f"/stats has {len(found)} pools named {pool!r}")
    return found[0]


def find_server(stats, pool, server):
    found = [s for s in find_pool(stats, pool)["servers"] if s["name"] == server]
    if len(found) != 1:
        raise AssertionError(f"/stats pool {pool!r} has {len(found)} servers named {server!r}")
    return found[0]


def find_frontend(stats, name):
    found = [f for f in stats["frontends"] if f["name"] == name]
    if len(found) != 1:
        raise AssertionError(f"/stats has {len(found)} frontends named {name!r}")
    return found[0]


# ----------------------------------------------------------- /stats schema

STATES = ("up", "draining", "down", "disabled")


def _is_int(v):
    return type(v) is int


def _is_num(v):
    return type(v) in (int, float) and math.isfinite(v)


def _is_str(v):
    return type(v) is str


def _is_bool(v):
    return type(v) is bool


def _is_count(v):
    return _is_int(v) and v >= 0


def _check_fields(where, obj, spec, problems):
    if not isinstance(obj, dict):
        problems.append(f"{where}: not an object: {obj!r}")
        return False
    for key, pred in spec.items():
        if key not in obj:
            problems.append(f"{where}: no key {key!r}")
        elif not pred(obj[key]):
            problems.append(f"{where}.{key}: bad value {obj[key]!r}")
    return True


SERVER_SPEC = {
    "name": _is_str, "address": _is_str, "weight": _is_count,
    "state": lambda v: v in STATES, "guarded": _is_bool,
    "active_connections": _is_count, "total_connections": _is_count,
    "bytes_in": _is_count, "bytes_out": _is_count, "connect_failures": _is_count,
    "consecutive_successes": _is_count, "consecutive_failures": _is_count,
    "last_check": lambda v: v is None or isinstance(v, dict),
    "last_change": _is_num,
    # present now, beyond the minimum of the contract
    "health": lambda v: v in ("starting", "up", "down", "pending", "warning"),
    "admin": lambda v: v in ("none", "drain", "disable"),
    "check": _is_str, "checks_total": _is_count, "last_detection_ms": _is_num,
    "max_connections": _is_count,
    "source": lambda v: v in ("config", "dns", "api", "etcd"),
    "share": lambda v: _is_num(v) and 0 <= v <= 1,
    "effective_weight": lambda v: _is_num(v) and v >= 0,
    "slow_start": lambda v: v is None or (isinstance(v, dict) and 0 <= v.get("progress", -1) <= 1),
    "heartbeat": lambda v: v is None or (isinstance(v, dict) and
                                         v.get("status") in ("pass", "warn", "fail", "expired")),
    "agent": lambda v: v is None or isinstance(v, dict),
    "ephemeral": _is_bool,
    "delete_in_s": lambda v: v is None or (_is_num(v) and v >= 0),
}

# "agent", without agent_port null: the verdict (what the agent said last
# that parsed) and its last reply (which may have failed).
AGENT_SPEC = {
    "state": lambda v: v in ("off", "up", "down", "drain", "maint"),
    "share": lambda v: v is None or (_is_num(v) and 0 <= v <= 1),
    "maxconn": lambda v: v is None or _is_count(v),
    "note": _is_str, "result": lambda v: v in (None, "passed", "failed"),
    "detail": _is_str, "at": lambda v: v is None or _is_num(v), "total": _is_count,
}

LAST_CHECK_SPEC = {
    "result": lambda v: v in ("passed", "failed", "warning"), "detail": _is_str,
    "duration_ms": lambda v: _is_num(v) and v >= 0, "at": _is_num,
}

POOL_SPEC = {
    "name": _is_str, "balance": _is_str, "servers_total": _is_count,
    "in_rotation": _is_count, "guard_active": _is_bool,
    "servers": lambda v: isinstance(v, list), "check": _is_str,
    "queue": lambda v: isinstance(v, dict),
}

QUEUE_SPEC = {
    "depth": _is_count, "max": _is_count, "timeout_ms": _is_count,
    "queued_total": _is_count, "timeouts_total": _is_count, "full_total": _is_count,
    "wait_ms_mean": lambda v: _is_num(v) and v >= 0,
}

FRONTEND_SPEC = {
    "name": _is_str, "listen": _is_str, "active_connections": _is_count,
    "total_connections": _is_count,
}

TOP_SPEC = {
    "version": _is_str, "uptime_s": lambda v: _is_num(v) and v >= 0,
    "frontends": lambda v: isinstance(v, list), "pools": lambda v: isinstance(v, list),
    "reloads": lambda v: isinstance(v, dict), "health": lambda v: isinstance(v, dict),
    "connections": lambda v: isinstance(v, dict),
}

RELOADS_SPEC = {"ok": _is_count, "failed": _is_count,
                "last_error": lambda v: v is None or _is_str(v)}
HEALTH_SPEC = {"checks_total": _is_count, "detections_down": _is_count,
               "detections_up": _is_count, "lag_ms_mean": _is_num}
CONNECTIONS_SPEC = {"active": _is_count, "max": _is_count}


def server_problems(srv, where="server"):
    """What is wrong with one server object of /stats (or of an action's
    answer): missing keys, wrong types, values outside the contract."""
    problems = []
    if not _check_fields(where, srv, SERVER_SPEC, problems):
        return problems
    if not re.fullmatch(r"[^\s:]+:\d{1,5}", str(srv.get("address"))):
        problems.append(f"{where}.address: not host:port: {srv.get('address')!r}")
    # guarded: failing its checks but held in rotation by min_servers
    if srv.get("guarded") is True and (srv.get("state") != "up" or srv.get("health") != "down"):
        problems.append(f"{where}.guarded: true but state {srv.get('state')} "
                        f"health {srv.get('health')}")
    lc = srv.get("last_check")
    if isinstance(lc, dict):
        _check_fields(f"{where}.last_check", lc, LAST_CHECK_SPEC, problems)
    agent = srv.get("agent")
    if isinstance(agent, dict):
        _check_fields(f"{where}.agent", agent, AGENT_SPEC, problems)
    # The state follows from the inputs (contract): down only with no
    # connection open; draining with connections open or drained by an
    # operator (HAProxy's DRAIN) or the server's agent (drain, 0%);
    # disabled by an operator or the agent's maint only.
    state, active = srv.get("state"), srv.get("active_connections")
    agent_state = agent.get("state") if isinstance(agent, dict) else "off"
    agent_drains = isinstance(agent, dict) and (agent_state == "drain" or agent.get("share") == 0)
    if srv.get("delete_in_s") is not None and srv.get("ephemeral") is not True:
        problems.append(f"{where}: not ephemeral but delete_in_s {srv.get('delete_in_s')}")
    if state == "down" and active:
        problems.append(f"{where}: state down with {active} connections open")
    if state == "draining" and active == 0 and srv.get("admin") != "drain" and not agent_drains:
        problems.append(f"{where}: state draining with no connection open")
    if state == "disabled" and srv.get("admin") != "disable" and agent_state != "maint":
        problems.append(f"{where}: state disabled but admin {srv.get('admin')}")
    if state == "draining" and srv.get("admin") == "disable":
        problems.append(f"{where}: state draining but admin disable")
    if state == "down" and srv.get("admin") != "none":
        problems.append(f"{where}: state down but admin {srv.get('admin')}")
    if state == "up" and srv.get("admin") != "none":
        problems.append(f"{where}: state up but admin {srv.get('admin')}")
    return problems


def stats_problems(st):
    """Everything wrong with a whole /stats document (list of strings)."""
    problems = []
    if not _check_fields("stats", st, TOP_SPEC, problems):
        return problems
    if isinstance(st.get("reloads"), dict):
        _check_fields("stats.reloads", st["reloads"], RELOADS_SPEC, problems)
    if isinstance(st.get("health"), dict):
        _check_fields("stats.health", st["health"], HEALTH_SPEC, problems)
    if isinstance(st.get("connections"), dict):
        _check_fields("stats.connections", st["connections"], CONNECTIONS_SPEC, problems)
    for i, fe in enumerate(st.get("frontends") or []):
        _check_fields(f"frontends[{i}]", fe, FRONTEND_SPEC, problems)
    for i, p in enumerate(st.get("pools") or []):
        where = f"pools[{i}]"
        if not _check_fields(where, p, POOL_SPEC, problems):
            continue
        if isinstance(p.get("queue"), dict):
            _check_fields(f"{where}.queue", p["queue"], QUEUE_SPEC, problems)
        servers = p.get("servers") or []
        if p.get("guard_active") != any(s.get("guarded") is True for s in servers):
            problems.append(f"{where}.guard_active: {p.get('guard_active')} does not match "
                            f"its servers' guarded flags")
        if p.get("servers_total") != len(servers):
            problems.append(f"{where}: servers_total {p.get('servers_total')} but "
                            f"{len(servers)} servers listed")
        for k, s in enumerate(servers):
            problems += server_problems(s, f"{where}.servers[{k}]")
        ups = sum(1 for s in servers if isinstance(s, dict) and s.get("state") == "up")
        if p.get("in_rotation") != ups:
            problems.append(f"{where}: in_rotation {p.get('in_rotation')} but "
                            f"{ups} servers in state up")
    return problems


# ------------------------------------------------------- Prometheus 0.0.4

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
_LABEL = rf"{_LABEL_NAME}={_LABEL_VALUE}"
_FLOAT = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|Inf|NaN)"
_SAMPLE_RE = re.compile(
    rf"({_NAME})(?:\{{((?:{_LABEL}(?:,{_LABEL})*,?)?)\}})?[ \t]+({_FLOAT})(?:[ \t]+(-?\d+))?")
_LABEL_RE = re.compile(rf"({_LABEL_NAME})=({_LABEL_VALUE})")
_HELP_RE = re.compile(rf"# HELP ({_NAME}) ((?:[^\\\n]|\\[\\n])*)")
_TYPE_RE = re.compile(rf"# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)")


def _unescape_label(v):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v[1:-1])


def parse_float(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    return float(s)


class Metrics:
    """A parsed exposition. families: {name: {"type", "help", "samples"}}
    where samples is a list of (sample_name, labels_dict, value)."""

    def __init__(self, families, text):
        self.families = families
        self.text = text

    def samples(self, name, **labels):
        """(labels, value) of every sample named `name` whose labels include
        the given ones."""
        out = []
        for fam in self.families.values():
            for sname, lab, v in fam["samples"]:
                if sname == name and all(lab.get(k) == str(x) for k, x in labels.items()):
                    out.append((lab, v))
        return out

    def value(self, name, **labels):
        """The value of the one sample `name` with exactly these labels."""
        found = [v for lab, v in self.samples(name, **labels)
                 if set(lab) == set(labels)]
        if len(found) != 1:
            raise AssertionError(f"{len(found)} samples {name}{labels} in /metrics")
        return found[0]


def _family_of(sample, families):
    """The declared family a sample name belongs to (histogram and summary
    samples carry suffixes)."""
    if sample in families:
        return sample
    for suffix in ("_bucket", "_sum", "_count"):
        if sample.endswith(suffix):
            base = sample[:-len(suffix)]
            if base in families and families[base]["type"] in ("histogram", "summary"):
                if suffix == "_bucket" and families[base]["type"] != "histogram":
                    return None
                return base
    return None


def parse_metrics(text):
    """Parses Prometheus text format 0.0.4 strictly and checks its rules;
    raises AssertionError naming the line. Checked: every line is a HELP,
    a TYPE, a sample (or blank); each family has one HELP and one TYPE,
    both before its samples; samples belong to a declared family and are
    grouped by family; no sample (name + labels) twice; counters end in
    _total; histograms have for each label set buckets with increasing le,
    non-decreasing counts, a last bucket le="+Inf" equal to _count, one
    _sum and one _count, and no bucket on a non-histogram."""
    if not text.endswith("\n"):
        raise AssertionError("/metrics does not end with a newline")
    families = {}
    seen_samples = set()
    done = set()            # families whose samples are over (grouping)
    current = None
    for no, line in enumerate(text.split("\n")[:-1], 1):
        def bad(msg):
            raise AssertionError(f"/metrics line {no}: {msg}: {line!r}")
        if line == "":
            continue
        if line.startswith("#"):
            m = _HELP_RE.fullmatch(line)
            if m:
                fam = families.setdefault(m.group(1), {"type": None, "help": None,
                                                       "samples": []})
                if fam["help"] is not None:
                    bad("second HELP")
                if fam["samples"]:
                    bad("HELP after samples")
                fam["help"] = m.group(2)
                continue
            m = _TYPE_RE.fullmatch(line)
            if m:
                fam = families.setdefault(m.group(1), {"type": None, "help": None,
                                                       "samples": []})
                if fam["type"] is not None:
                    bad("second TYPE")
                if fam["samples"]:
                    bad("TYPE after samples")
                fam["type"] = m.group(2)
                if m.group(2) == "counter" and not m.group(1).endswith("_total"):
                    bad("counter not named *_total")
                continue
            if line.startswith("# HELP") or line.startswith("# TYPE"):
                bad("malformed HELP/TYPE")
            continue                    # other comments are allowed
        m = _SAMPLE_RE.fullmatch(line)
        if not m:
            bad("not a sample line")
        name, labels_text, value = m.group(1), m.group(2) or "", m.group(3)
        labels = {}
        for lm in _LABEL_RE.finditer(labels_text):
            if lm.group(1) in labels:
                bad(f"label {lm.group(1)} twice")
            labels[lm.group(1)] = _unescape_label(lm.group(2))
        fam_name = _family_of(name, families)
        if fam_name is None:
            bad("sample of an undeclared family")
        fam = families[fam_name]
        if fam["type"] is None or fam["help"] is None:
            bad("sample before its family's HELP and TYPE")
        if fam_name != current:
            if fam_name in done:
                bad(f"samples of {fam_name} not grouped together")
            if current is not None:
                done.add(current)
            current = fam_name
        key = (name, tuple(sorted(labels.items())))
        if key in seen_samples:
            bad("same sample twice")
        seen_samples.add(key)
        if "le" in labels and name != fam_name + "_bucket":
            bad("le label outside a histogram bucket")
        if fam["type"] == "histogram" and name == fam_name:
            bad("histogram sample without _bucket/_sum/_count")
        fam["samples"].append((name, labels, parse_float(value)))
    for fname, fam in families.items():
        if fam["type"] is None or fam["help"] is None:
            raise AssertionError(f"/metrics: family {fname} lacks HELP or TYPE")
        if fam["type"] == "histogram":
            _check_histogram(fname, fam)
    return Metrics(families, text)


def _check_histogram(fname, fam):
    series = {}
    for name, labels, v in fam["samples"]:
        rest = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        s = series.setdefault(rest, {"buckets": [], "sum": [], "count": []})
        if name.endswith("_bucket"):
            if "le" not in labels:
                raise AssertionError(f"{fname}{dict(rest)}: bucket without le")
            s["buckets"].append((parse_float(labels["le"]), v, labels["le"]))
        elif name.endswith("_sum"):
            s["sum"].append(v)
        else:
            s["count"].append(v)
    if not series:
        raise AssertionError(f"histogram {fname} has no samples")
    for rest, s in series.items():
        where = f"{fname}{dict(rest)}"
        if len(s["sum"]) != 1 or len(s["count"]) != 1:
            raise AssertionError(f"{where}: {len(s['sum'])} _sum and "
                                 f"{len(s['count'])} _count samples")
        b = s["buckets"]
        if not b or b[-1][0] != math.inf:
            raise AssertionError(f"{where}: buckets do not end in le=\"+Inf\": {b}")
        for (le1, c1, t1), (le2, c2, t2) in zip(b, b[1:]):
            if not le2 > le1:
                raise AssertionError(f"{where}: le {t2} after {t1}")
            if c2 < c1:
                raise AssertionError(f"{where}: bucket le={t2} ({c2}) < le={t1} ({c1})")
        for le, c, t in b:
            if c != int(c) or c < 0:
                raise AssertionError(f"{where}: bucket le={t} count {c} not a count")
        if b[-1][1] != s["count"][0]:
            raise AssertionError(f"{where}: +Inf bucket {b[-1][1]} != _count {s['count'][0]}")
        if s["sum"][0] < 0 or (s["count"][0] == 0 and s["sum"][0] != 0):
            raise AssertionError(f"{where}: _sum {s['sum'][0]} with _count {s['count'][0]}")


def hist_count(metrics, name, **labels):
    return metrics.value(name + "_count", **labels)


# ---------------------------------------------------------------- backends


def sized_reply_backend(name):
    """A harness.Backend handler: reads until the client half-closes, then
    answers "NAME\\n" and 2 * received + 5 bytes of "y". Bytes to and from
    the server differ, and the client can tell which server answered."""
    def handler(backend, conn):
        got = 0
        while True:
            d = conn.recv(65536)
            if not d:
                break
            got += len(d)
        conn.sendall(f"{name}\n".encode() + b"y" * (2 * got + 5))
    return handler


def sized_exchange(port, payload, names):
    """One client of a sized_reply_backend pool through lb: sends payload,
    half-closes, reads the answer. Returns (server_name, bytes_received);
    fails on a wrong answer."""
    s = harness.connect(port)
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data, how = harness.recv_until_eof(s)
    finally:
        s.close()
    name, _, rest = data.partition(b"\n")
    name = name.decode(errors="replace")
    if name not in names or rest != b"y" * (2 * len(payload) + 5) or how != "eof":
        raise AssertionError(f"bad answer for {len(payload)} bytes sent: "
                             f"{data[:60]!r}... ({len(data)} bytes, {how})")
    return name, len(data)


def name_then_echo_backend(name):
    """A harness.Backend handler: sends "NAME\\n" at once, then echoes
    until the client closes."""
    def handler(backend, conn):
        conn.sendall(f"{name}\n".encode())
        while True:
            d = conn.recv(65536)
            if not d:
                break
            conn.sendall(d)
    return handler


# ------------------------------------------------------------------ misc


def raw_exchange(port, payload, timeout=IO_TIMEOUT):
    """Sends payload on a fresh connection to the admin port (ignoring a
    send that fails because lb already closed), then reads until EOF.
    Returns (data, how) as harness.recv_until_eof."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return harness.recv_until_eof(s, timeout=timeout)
    finally:
        s.close()


def peer_closed(sock):
    """True when the peer has closed sock (EOF or reset is waiting), without
    blocking or consuming data."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def status_of(raw):
    """The status code of a raw HTTP answer, or None when it has none."""
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", raw)
    return int(m.group(1)) if m else None
