"""benchproc.py - what the benchmarks of tests/bench share: the processes
they start (pinned, logged, stopped by pid), the CPU those use, read from
/proc in nanoseconds, the CPU every other process used meanwhile (a
disturbed trial), and free ports. Python 3 stdlib only; imported by the
scripts beside it (proxy_cost.py, sni_cost.py), not run itself.
"""
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")

def log(msg):
    print(msg, file=sys.stderr, flush=True)

class Failure(Exception):
    """A check of this benchmark failed: the run's figures cannot be trusted."""

def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # from field 3 (state): [1] ppid, [11] utime

def proc_table():
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                table[int(name)] = stat_fields(int(name))
            except (OSError, IndexError):
                pass
    return table

def process_tree(root, table=None):
    children = {}
    for pid, fields in (table or proc_table()).items():
        children.setdefault(int(fields[1]), []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree

def cpu_ns(pids):
    """(runtime in ns from every thread's schedstat, utime+stime in ns from stat)."""
    sched = ticks = 0
    for pid in pids:
        try:
            fields = stat_fields(pid)
            ticks += int(fields[11]) + int(fields[12])
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    sched += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that just ended
    return sched, ticks * 1e9 / CLK_TCK

def others_cpu_ticks():
    """{pid: ticks} of processes that are neither ours nor kernel threads (with reaped children)."""
    table = proc_table()
    ours = set(process_tree(os.getpid(), table))
    return {pid: sum(int(x) for x in f[11:15])
            for pid, f in table.items() if pid not in ours and pid != 2 and f[1] != "2"}

def others_cpu_since(before, t0):
    """(CPUs used by other processes since t0, the name of the one that used most)."""
    after = others_cpu_ticks()
    used = {pid: max(0, t - before.get(pid, 0)) for pid, t in after.items()}
    top = max(used, key=used.get, default=None)
    name = "-"
    if top is not None:
        try:
            with open(f"/proc/{top}/comm") as f:
                name = f.read().strip()
        except OSError:
            pass
    return sum(used.values()) / CLK_TCK / (time.monotonic() - t0), name

def listening(port):
    suffix = ":%04X" % port
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[1].endswith(suffix) and parts[3] == "0A":
                return True
    return False

def binds(port, kind):
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False

def free_ports(base, count, udp=False):
    """`count` ports from `base` up that nobody listens on and that bind now (for UDP
    too with udp: dnsmasq binds both on its port)."""
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports, port = [], base
    while len(ports) < count:
        if port >= lo:
            sys.exit(f"no {count} free ports between --port-base {base} and the ephemeral range ({lo})")
        if not listening(port):
            kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if udp else (socket.SOCK_STREAM,)
            if all(binds(port, kind) for kind in kinds):
                ports.append(port)
        port += 1
    return ports

def http_ok(port):
    """One GET / through port answered 200 "ok\\n" (the bench backends' page)."""
    try:
        with socket.create_connection((HOST, port), timeout=1) as s:
            s.sendall(b"GET / HTTP/1.0\r\nHost: bench\r\n\r\n")
            data = b""
            for _ in range(64):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.startswith(b"HTTP/1.1 200") and data.endswith(b"ok\n")
    except OSError:
        return False

def haproxy_argv(d, port, servers, maxconn, server_opt=""):
    """HAProxy with bench.py's settings (mode tcp, nbthread 2, roundrobin, a check every
    2 s) in front of servers, its config written in d; server_opt is added to each
    server line."""
    lines = ["global", "    nbthread 2", f"    maxconn {maxconn}",
             "defaults", "    mode tcp", f"    maxconn {maxconn}", "    timeout connect 5s",
             "    timeout client 1m", "    timeout server 1m",
             "frontend bench", f"    bind {HOST}:{port}", "    default_backend bench",
             "backend bench", "    balance roundrobin"]
    lines += [f"    server b{i} {HOST}:{p} check inter 2s{server_opt}"
              for i, p in enumerate(servers, 1)]
    conf = os.path.join(d, "haproxy.cfg")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return ["haproxy", "-db", "-f", conf]

def nginx_conf(d, connections, http):
    """The config of an nginx bench backend: 2 workers in the foreground, its pid, logs
    and temporary files in d, `connections` a worker, and http (the http block's own
    settings and servers, each line indented)."""
    temp = "".join(f"    {kind}_temp_path {d}/{where};\n"
                   for kind, where in (("client_body", "body"), ("proxy", "proxy"),
                                       ("fastcgi", "fastcgi"), ("uwsgi", "uwsgi"),
                                       ("scgi", "scgi")))
    return (f"worker_processes 2;\ndaemon off;\npid {d}/nginx.pid;\n"
            f"error_log {d}/error.log warn;\n"
            f"worker_rlimit_nofile {resource.getrlimit(resource.RLIMIT_NOFILE)[0]};\n"
            f"events {{ worker_connections {connections}; }}\n"
            f"http {{\n{temp}{http}}}\n")

def cpu_times(cpu):
    """(busy, steal, total) jiffies of one CPU from /proc/stat (busy excludes idle,
    iowait and steal)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:9]]
                return v[0] + v[1] + v[2] + v[5] + v[6], v[7], sum(v)
    return 0, 0, 1


def cpu_share(before, after):
    """(busy, steal) fractions of the CPU between two cpu_times()."""
    total = max(1, after[2] - before[2])
    return (after[0] - before[0]) / total, (after[1] - before[1]) / total

def median(raw, p, key):
    vals = raw.get(p, {}).get(key)
    return statistics.median(vals) if vals else None

def prepare_driver(tools, proxy_cpu, load_cpu):
    """Exits unless the tools are installed and proxy_cpu and load_cpu are two CPUs of
    ours; then moves this driver beside the load, raises its descriptor limit to the
    hard one (the proxies and load it starts inherit it) and makes SIGTERM exit."""
    os.environ["PATH"] += ":/usr/sbin:/sbin"
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (see ../shared/bench/setup.sh)")
    cpus = os.sched_getaffinity(0)
    if proxy_cpu not in cpus or load_cpu not in cpus or proxy_cpu == load_cpu:
        sys.exit(f"--proxy-cpu {proxy_cpu} and --load-cpu {load_cpu} must be two "
                 f"available CPUs (have {sorted(cpus)})")
    os.sched_setaffinity(0, {load_cpu})  # the driver runs beside the load, not the proxy
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))

# A short period: a quota of 50% is spent in slices of 5 ms, so a throttled
# proxy stalls 5 ms at a time, not 50 (which would be all its p99 says).
CGROUP_PERIOD_US = 10000


class Cgroup:
    """A cpu cgroup that may use quota percent of one CPU: cgroup v2 where
    the cpu controller is there, else v1's cpu hierarchy."""

    def __init__(self, name, quota):
        v2 = "/sys/fs/cgroup/cgroup.controllers"
        if os.path.exists(v2) and "cpu" in open(v2).read().split():
            self.path = os.path.join("/sys/fs/cgroup", name)
            self.v2 = True
        elif os.path.isdir("/sys/fs/cgroup/cpu"):
            self.path = os.path.join("/sys/fs/cgroup/cpu", name)
            self.v2 = False
        else:
            sys.exit("no cpu cgroup controller (neither cgroup v2's nor v1's /sys/fs/cgroup/cpu)")
        os.makedirs(self.path, exist_ok=True)
        us = CGROUP_PERIOD_US * quota // 100
        if self.v2:
            self.write("cpu.max", f"{us} {CGROUP_PERIOD_US}")
        else:
            self.write("cpu.cfs_period_us", str(CGROUP_PERIOD_US))
            self.write("cpu.cfs_quota_us", str(us))

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def add(self, pid):
        """The whole process, its threads included (cgroup.procs)."""
        self.write("cgroup.procs", str(pid))

    def remove(self):
        for _ in range(50):         # the last stopped proxy may take a moment to leave
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)
        log(f"could not remove the cgroup {self.path}")


class Proc:
    """A process we started, pinned to `cpu`, output to a log file, stopped by pid."""

    def __init__(self, name, argv, cpu, logdir):
        self.name = name
        self.logpath = os.path.join(logdir, name + ".log")
        with open(self.logpath, "ab") as out:
            self.p = subprocess.Popen(["taskset", "-c", str(cpu)] + argv, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = self.p.pid

    def pids(self):
        return process_tree(self.pid)

    def log_tail(self, n=10):
        try:
            with open(self.logpath, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def wait_ready(self, check, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                raise Failure(f"{self.name} exited with {self.p.returncode}:\n{self.log_tail()}")
            if check():
                return
            time.sleep(0.05)
        raise Failure(f"{self.name} did not answer within {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self):
        """SIGTERM, then SIGKILL; leftover children (nginx workers) by pid and start time."""
        if self.p.poll() is not None:
            return
        leftovers = []
        for pid in self.pids()[1:]:
            try:
                leftovers.append((pid, stat_fields(pid)[19]))
            except OSError:
                pass
        self.p.terminate()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
        for pid, start in leftovers:
            try:
                if stat_fields(pid)[19] == start:
                    os.kill(pid, signal.SIGKILL)
            except (OSError, IndexError):
                pass

def fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
