"""Network namespaces for the tests of lb as a tier of nodes.

A Tier makes a switch namespace holding a bridge, and node namespaces
each joined to it by a veth pair, with an address on 10.77.0.0/24; every
name starts with a prefix of this process's pid, and delete() removes them
all by name. Processes run inside a node with `ip netns exec`, which execs
them: the pid is the process's own, and the tests stop them by it.

Run inside a namespace, this file plays two roles of its own:
  tier.py backend NAME PORT [BIND]      HTTP on BIND:PORT (127.0.0.1 by
                                        default), answering NAME
  tier.py client ADDR PORT SECS [SRC]   a new connection every 10 ms for
                                        SECS seconds (from address SRC),
                                        one line each: TIME RESULT (the
                                        name that answered, or ERR:why)
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SUBNET = "10.77.0"


def sh(*args):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def missing(tools=("ip", "keepalived", "curl")):
    """Why the tier tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"needs {tool}"
    try:
        probe = f"lbt{os.getpid()}-probe"
        sh("ip", "netns", "add", probe)
        sh("ip", "netns", "del", probe)
    except (AssertionError, OSError) as e:
        return f"cannot make a network namespace: {e}"
    return None


class Tier:
    def __init__(self):
        self.prefix = f"lbt{os.getpid()}"
        self.namespaces = []
        self.procs = []
        self.sw = self._netns("sw")
        sh("ip", "-n", self.sw, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.sw, "link", "set", "br0", "up")

    def _netns(self, name):
        ns = f"{self.prefix}-{name}"
        sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def node(self, name, host):
        """A namespace joined to the bridge; its interface is NAME0 with
        address SUBNET.HOST/24. Returns the namespace's name."""
        ns = self._netns(name)
        dev, peer = f"{name}0", f"{self.prefix[-6:]}{name}"
        sh("ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", peer,
           "netns", self.sw)
        sh("ip", "-n", self.sw, "link", "set", peer, "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{host}/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        return ns

    def link(self, name_a, ns_a, addr_a, name_b, ns_b, addr_b):
        """A veth pair between two namespaces, NAME_A0 with ADDR_A (CIDR) in
        ns_a and NAME_B0 with ADDR_B in ns_b: a link of its own, off the
        bridge."""
        dev_a, dev_b = f"{name_a}{name_b}0", f"{name_b}{name_a}0"
        sh("ip", "link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b,
           "netns", ns_b)
        for ns, dev, addr in ((ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b)):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        return dev_a, dev_b

    def run(self, ns, args, log_path=None, **kw):
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(args), stdin=subprocess.DEVNULL,
                             stdout=kw.pop("stdout", log), stderr=log, **kw)
        if log_path:
            log.close()
        self.procs.append(p)
        return p

    def run_lb(self, ns, conf, log_path, lb_bin, timeout):
        """lb -c conf in ns, its log to log_path; returns it once ready."""
        p = self.run(ns, [lb_bin, "-c", conf], log_path)
        deadline = time.time() + timeout
        while not (os.path.exists(log_path) and b"event=ready" in open(log_path, "rb").read()):
            if p.poll() is not None or time.time() > deadline:
                with open(log_path, errors="replace") as f:
                    raise AssertionError(f"lb in {ns} not ready: {f.read()[-800:]}")
            time.sleep(0.01)
        return p

    def stop(self, p, sig=signal.SIGTERM, timeout=20):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout)

    def has_addr(self, ns, dev, addr):
        return f" {addr}/" in sh("ip", "-n", ns, "-o", "addr", "show", "dev", dev)

    def delete(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=20)
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.namespaces = []


def sanitizer_report(log_path, markers):
    """The first sanitizer marker in an lb's log, or None."""
    with open(log_path, errors="replace") as f:
        text = f.read()
    return next((m for m in markers if m in text), None)


def client_results(out):
    """[(time, result)] from a client's output."""
    rows = []
    for line in out.splitlines():
        t, _, r = line.partition(" ")
        rows.append((float(t), r))
    return rows


# ------------------------------------------------------------ the roles

def _backend(name, port, bind="127.0.0.1"):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind, port))
    s.listen(128)

    def serve(c):
        try:
            c.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                d = c.recv(4096)
                if not d:
                    return
                data += d
            body = name.encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (len(body), body))
        except OSError:
            pass
        finally:
            c.close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def _client(addr, port, secs, source=None):
    end = time.time() + secs
    while time.time() < end:
        t = time.time()
        try:
            s = socket.create_connection((addr, port), timeout=2,
                                         source_address=(source, 0) if source else None)
            s.sendall(b"GET / HTTP/1.1\r\nHost: tier\r\n\r\n")
            d = b""
            while True:
                c = s.recv(4096)
                if not c:
                    break
                d += c
            s.close()
            r = d.rsplit(b"\r\n\r\n", 1)[-1].decode(errors="replace") or "ERR:empty"
        except OSError as e:
            r = "ERR:" + type(e).__name__
        print(f"{t:.3f} {r}", flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    if sys.argv[1] == "backend":
        _backend(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
    elif sys.argv[1] == "client":
        _client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), *sys.argv[5:6])
