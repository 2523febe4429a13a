"""The real database servers of Debian's packages (mariadb-server,
postgresql, redis-server) run by a test on 127.0.0.1 with a temporary data
directory, and the few client steps a test needs to hold sessions open.

Each server is started once per test file (setUpClass) and shared by its
cases; a case that crashes one (kill) starts it again (start), one that
stops it (SIGSTOP: hang) continues it. Every process is stopped by its pid
(PostgreSQL by its process group: the postmaster and its backends)."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import time

import harness
from harness import HOST, free_port, wait_for

START_TIMEOUT = 30.0


def _accepts(port):
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
        return True
    except OSError:
        return False


class _Server:
    """A server process with start / kill (SIGKILL: a crash) / hang
    (SIGSTOP) / resume / stop, by pid or process group."""

    name = "server"

    def __init__(self):
        self.dir = harness.make_tmpdir()
        os.chmod(self.dir, 0o755)           # PostgreSQL's user reaches its data
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, f"{self.name}.log")

    @property
    def addr(self):
        return f"{HOST}:{self.port}"

    def _signal(self, sig):
        os.killpg(self.proc.pid, sig)       # the whole server, children too

    def kill(self):
        """A crash: SIGKILL, then wait until the port refuses."""
        self._signal(signal.SIGKILL)
        self.proc.wait(timeout=START_TIMEOUT)
        wait_for(lambda: not _accepts(self.port), 10, f"{self.name} to stop accepting")
        t = time.time()
        return t

    def hang(self):
        self._signal(signal.SIGSTOP)
        return time.time()

    def resume(self):
        self._signal(signal.SIGCONT)

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            self.proc.wait(timeout=START_TIMEOUT)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            self._signal(signal.SIGKILL)
            self.proc.wait(timeout=START_TIMEOUT)
        self.proc = None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def _wait_up(self, ready):
        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                     f"{self.log()}")
            return ready()
        wait_for(up, START_TIMEOUT, f"{self.name} to accept connections")


class MariaDb(_Server):
    """mariadbd with max_connections = 10 (its minimum), the users lb_check
    (no password, no privilege) on 127.0.0.1, and connect_timeout long
    enough that a test's unauthenticated connection stays."""

    name = "mariadb"
    BIN = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    MAX_CONNECTIONS = 10

    def __init__(self):
        super().__init__()
        self.data = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "mysqld.sock")
        install = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
        r = subprocess.run([install, "--no-defaults", f"--datadir={self.data}", "--user=root",
                            "--auth-root-authentication-method=normal", "--skip-test-db"],
                           capture_output=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"mariadb-install-db failed: {r.stderr.decode()[-2000:]}")
        self.start()
        self.sql("CREATE USER lb_check@'127.0.0.1'")

    def start(self):
        self.proc = harness.spawn_logged([self.BIN, "--no-defaults", f"--datadir={self.data}",
                            f"--port={self.port}", f"--bind-address={HOST}",
                            f"--socket={self.socket}", "--user=root", "--skip-name-resolve",
                            f"--pid-file={self.dir}/mysqld.pid", "--skip-log-bin",
                            "--innodb-buffer-pool-size=16M", "--connect-timeout=120",
                            f"--max-connections={self.MAX_CONNECTIONS}",
                            "--max-connect-errors=1000000"], self.log_path)
        self._wait_up(lambda: os.path.exists(self.socket) and _accepts(self.port))

    def sql(self, query):
        """Runs a statement as root over the unix socket."""
        client = shutil.which("mariadb") or "/usr/bin/mariadb"
        r = subprocess.run([client, "--no-defaults", "-uroot", f"--socket={self.socket}",
                            "-e", query], capture_output=True, timeout=30)
        if r.returncode != 0:
            raise AssertionError(f"mariadb -e {query!r}: {r.stderr.decode()}")


class Postgres(_Server):
    """postgres 15 run as the postgres user, trust authentication on
    127.0.0.1 except for the role pwuser (SCRAM), max_connections = 5 with
    no slot reserved for superusers."""

    name = "postgres"
    MAX_CONNECTIONS = 5

    def __init__(self):
        super().__init__()
        self.bindir = self._bindir()
        self.data = os.path.join(self.dir, "data")
        self.run = os.path.join(self.dir, "run")       # its unix socket and lock
        for d in (self.data, self.run):
            os.makedirs(d, mode=0o700)
            shutil.chown(d, "postgres", "postgres")
        r = subprocess.run([os.path.join(self.bindir, "initdb"), "-D", self.data, "-A", "trust",
                            "-U", "postgres", "--no-sync"],
                           capture_output=True, timeout=120, user="postgres", group="postgres")
        if r.returncode != 0:
            raise AssertionError(f"initdb failed: {r.stderr.decode()[-2000:]}")
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as f:
            f.write(f"host all pwuser {HOST}/32 scram-sha-256\n"
                    f"host all all {HOST}/32 trust\n"
                    "local all all trust\n")
        self.start()

    @staticmethod
    def _bindir():
        root = "/usr/lib/postgresql"
        versions = sorted(os.listdir(root), key=lambda v: int(v) if v.isdigit() else 0)
        return os.path.join(root, versions[-1], "bin")

    def start(self):
        self.proc = harness.spawn_logged([os.path.join(self.bindir, "postgres"), "-D", self.data,
                            "-p", str(self.port), "-k", self.run, "-c", f"listen_addresses={HOST}",
                            "-c", f"max_connections={self.MAX_CONNECTIONS}",
                            "-c", "superuser_reserved_connections=0", "-c", "fsync=off",
                            "-c", "shared_buffers=16MB"],
                           self.log_path, user="postgres", group="postgres")
        self._wait_up(lambda: pg_ready(self.port))


class Redis(_Server):
    """redis-server without persistence; replica_of: the primary's port."""

    name = "redis"
    BIN = shutil.which("redis-server") or "/usr/bin/redis-server"

    def __init__(self, replica_of=None):
        self.replica_of = replica_of
        super().__init__()
        self.name = f"redis-{self.port}"
        self.start()

    def start(self):
        args = [self.BIN, "--port", str(self.port), "--bind", HOST, "--save", "",
                "--appendonly", "no", "--dir", self.dir, "--daemonize", "no"]
        if self.replica_of:
            args += ["--replicaof", HOST, str(self.replica_of)]
        self.proc = harness.spawn_logged(args, self.log_path)
        self._wait_up(lambda: redis_cmd(self.port, "PING") == b"+PONG\r\n")

    def cmd(self, *args):
        return redis_cmd(self.port, *args)


# ------------------------------------------------------------ clients

def _recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed")
        b += c
    return b


def mysql_packet(s):
    h = _recv_exact(s, 4)
    return _recv_exact(s, h[0] | h[1] << 8 | h[2] << 16)


def mysql_session(port, user="lb_check"):
    """A logged-in MySQL session (empty password), left open; None when the
    server refused it (its ERR payload is in .error)."""
    s = socket.create_connection((HOST, port), timeout=5)
    greeting = mysql_packet(s)
    if greeting[0] == 0xff:
        s.close()
        return None
    caps = 0x1 | 0x200 | 0x8000
    body = struct.pack("<IIB", caps, 1 << 24, 33) + b"\0" * 23 + user.encode() + b"\0\0"
    s.sendall(struct.pack("<I", len(body))[:3] + b"\x01" + body)
    if mysql_packet(s)[0] != 0:
        s.close()
        return None
    return s


def pg_session(port, user="postgres"):
    """A logged-in PostgreSQL session (trust), left open; None if refused."""
    s = socket.create_connection((HOST, port), timeout=5)
    body = struct.pack(">I", 196608) + b"user\0" + user.encode() + b"\0\0"
    s.sendall(struct.pack(">I", len(body) + 4) + body)
    while True:
        t = _recv_exact(s, 1)
        n = struct.unpack(">I", _recv_exact(s, 4))[0]
        _recv_exact(s, n - 4)
        if t == b"Z":
            return s
        if t == b"E":
            s.close()
            return None


def pg_ready(port):
    """The server answers an SSLRequest and takes a login."""
    try:
        s = pg_session(port)
    except OSError:
        return False
    if s is None:
        return False
    s.close()
    return True


def redis_cmd(port, *args):
    """One command; the first reply line (or bulk) as bytes, None if the
    port refuses."""
    try:
        s = socket.create_connection((HOST, port), timeout=5)
    except OSError:
        return None
    with s:
        req = f"*{len(args)}\r\n".encode()
        for a in args:
            a = str(a).encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        buf = b""
        while not buf.endswith(b"\r\n"):
            c = s.recv(4096)
            if not c:
                break
            buf += c
        return buf
