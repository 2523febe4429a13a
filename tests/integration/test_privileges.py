"""[global] user and group, outside systemd: started as root, lb binds a
port below 1024, then runs as the user (nobody here) with only its groups.

- /proc shows every ID of the process, and of each thread, as the user's;
  the privileged frontend serves;
- a reload afterwards reads the file as the user: a new frontend on a port
  below 1024 fails the reload with the reason (and the old config serves),
  one above works;
- an unknown user stops the start with the reason."""

import os
import pwd
import re
import signal
import socket

import harness
from admin_client import Admin, make_admin_config
from harness import LbTestCase

WHY_NOT = None if os.geteuid() == 0 else "needs root (to bind a port below 1024 and drop)"


def low_port():
    """A free port below 1024 on 127.0.0.1."""
    for port in range(1000, 700, -1):
        s = socket.socket()
        try:
            s.bind((harness.HOST, port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise AssertionError("no free port below 1024")


def ids(pid):
    """{Uid, Gid, Groups} of a process or thread's /proc status."""
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    return {k: re.search(rf"^{k}:\s*(.*)$", text, re.M).group(1).split()
            for k in ("Uid", "Gid", "Groups")}


@harness.skip_if(WHY_NOT is not None, WHY_NOT or "")
class PrivilegesTest(LbTestCase):

    def test_binds_then_runs_as_the_user(self):
        a = self.named("a")
        nobody = pwd.getpwnam("nobody")
        port = low_port()
        text, admin_port, _ = make_admin_config([("web", [("a", a.port)], {})],
                                                frontends=[])
        text = text.replace("[global]", "[global]\nuser = nobody", 1)
        text += f"\n[frontend low]\nlisten = {harness.HOST}:{port}\npool = web\n"
        lb = self.start_lb(text)
        os.chmod(lb.dir, 0o755)             # the user reads the file on reload
        os.chmod(lb.config_path, 0o644)
        ev = lb.events("privileges")[0]
        self.assertEqual((ev["user"], ev["uid"]), ("nobody", str(nobody.pw_uid)))
        want = {"Uid": [str(nobody.pw_uid)] * 4, "Gid": [str(nobody.pw_gid)] * 4}
        for tid in os.listdir(f"/proc/{lb.pid}/task"):
            got = ids(f"{lb.pid}/task/{tid}")
            self.assertEqual({k: got[k] for k in want}, want, f"thread {tid}")
            self.assertTrue(set(got["Groups"]) <= {str(g) for g in os.getgrouplist(
                "nobody", nobody.pw_gid)}, got)
        self.assertEqual(harness.fetch_name(port), "a")
        admin = Admin(admin_port)
        # a reload binding another port below 1024 fails, with the reason
        bad = text + f"\n[frontend low2]\nlisten = {harness.HOST}:{low_port()}\npool = web\n"
        with open(lb.config_path, "w") as f:
            f.write(bad)
        r = admin.post("/reload")
        self.assertEqual(r.status, 400, str(r))
        self.assertIn("Permission denied", r.json()["error"])
        lb.allowed_errors.add("reload_failed")
        self.assertEqual(harness.fetch_name(port), "a")
        # ... one above works
        high = harness.free_port()
        with open(lb.config_path, "w") as f:
            f.write(text + f"\n[frontend high]\nlisten = {harness.HOST}:{high}\npool = web\n")
        r = admin.post("/reload")
        self.assertEqual(r.status, 200, str(r))
        self.assertEqual(harness.fetch_name(high), "a")
        self.assertEqual(lb.stop(signal.SIGTERM), 0)

    def test_unknown_user(self):
        a = self.named("a")
        text, _, _ = make_admin_config([("web", [("a", a.port)], {})])
        text = text.replace("[global]", "[global]\nuser = no-such-user-here", 1)
        lb = self.start_lb(text, wait_ready=False, allowed_errors=("start_failed",))
        self.assertEqual(lb.wait_exit(), 1)
        lb.expect_status = 1
        self.assertEqual(lb.events("start_failed")[0]["error"],
                         "user = no-such-user-here: no such user")


if __name__ == "__main__":
    harness.main()
