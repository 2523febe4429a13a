#!/usr/bin/env python3
"""Stalls the processes of a test run at random, to shake out races.

    (cd build-asan && ctest --output-on-failure) & python3 tests/stress/staller.py $! 0.3

Every 0.3-1.5 s it picks one descendant of ROOT_PID that is an lb, a
backend helper or a test script and stops it (SIGSTOP) for 20 ms up to
MAX_STALL seconds (default 0.25), then lets it go on (SIGCONT): a machine
that deschedules a process now and then, harsher than a CPU hog. It runs
until ROOT_PID exits and never leaves a process stopped."""

import os
import random
import signal
import sys
import time

WANTED = ("/lb ", "hc_backend.py", "/test_")


def descendants(root):
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        parent[int(d)] = (ppid, cmd)
    found, todo = [], [root]
    while todo:
        p = todo.pop()
        for pid, (ppid, cmd) in parent.items():
            if ppid == p:
                todo.append(pid)
                if any(w in cmd + " " for w in WANTED):
                    found.append(pid)
    return found


def main():
    root = int(sys.argv[1])
    max_stall = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    rng = random.Random()
    while True:
        try:
            os.kill(root, 0)
        except OSError:
            return
        time.sleep(rng.uniform(0.3, 1.5))
        pids = descendants(root)
        if not pids:
            continue
        pid = rng.choice(pids)
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            continue
        try:
            time.sleep(rng.uniform(0.02, max_stall))
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass


if __name__ == "__main__":
    main()
