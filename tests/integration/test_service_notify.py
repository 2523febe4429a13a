"""lb under a service manager: systemd's notify protocol, driven here with
a datagram socket of our own as $NOTIFY_SOCKET, and `lb -r`, the reload
whose outcome the caller sees (the unit's ExecReload).

- READY=1 once the listeners and the admin port are up;
- a reload: RELOADING=1 (with MONOTONIC_USEC) at its start, READY=1 at
  its end, failed or not;
- `lb -r -c FILE`: exit 0 with the admin port's answer when the reload
  worked, 1 with the reason when it failed at run time (a port in use,
  which `lb -t` cannot see) or in the file, or when no lb answers;
- STOPPING=1 at shutdown;
- --version and --help, as -v and -h."""

import os
import re
import signal
import socket
import time

import harness
from admin_client import make_admin_config
from harness import LbTestCase

WAIT = 10.0


class NotifyTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.dir = harness.make_tmpdir()
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.path = os.path.join(self.dir, "notify")
        self.notify.bind(self.path)
        self.notify.settimeout(WAIT)
        self.addCleanup(self.notify.close)

    def next_state(self):
        return self.notify.recv(4096).decode()

    def assert_quiet(self):
        self.notify.settimeout(0.2)
        try:
            self.fail(f"unexpected notification {self.notify.recv(4096)!r}")
        except socket.timeout:
            pass
        finally:
            self.notify.settimeout(WAIT)

    def test_ready_reload_and_stopping(self):
        a = self.named("a")
        text, admin_port, fports = make_admin_config([("web", [("a", a.port)], {})],
                                                     token="s3cret")
        lb = self.start_lb(text, env={"NOTIFY_SOCKET": self.path})
        self.assertEqual(self.next_state(), "READY=1")
        # a good reload, asked with lb -r (the token comes from the file)
        code, out, err = harness.run_lb(["-r", "-c", lb.config_path])
        self.assertEqual((code, err), (0, ""))
        self.assertRegex(out, r'^\{"reloaded":true,"generation":2\}\n$')
        state = self.next_state()
        self.assertRegex(state, r"^RELOADING=1\nMONOTONIC_USEC=\d+$")
        usec = int(state.split("=")[-1])
        self.assertLess(abs(usec / 1e6 - time.monotonic()), 5.0, "not CLOCK_MONOTONIC")
        self.assertEqual(self.next_state(), "READY=1")
        # a reload that fails at run time: a new frontend's port is in use
        busy = socket.socket()
        busy.bind((harness.HOST, 0))
        busy.listen()
        self.addCleanup(busy.close)
        with open(lb.config_path, "a") as f:
            f.write(f"\n[frontend extra]\nlisten = {harness.HOST}:{busy.getsockname()[1]}\n"
                    "pool = web\n")
        self.assertEqual(harness.lb_test(lb.config_path)[0], 0, "lb -t cannot see it")
        code, out, err = harness.run_lb(["-r", "-c", lb.config_path])
        self.assertEqual(code, 1, out)
        self.assertIn("is already in use", err)
        self.assertRegex(self.next_state(), r"^RELOADING=1\n")
        self.assertEqual(self.next_state(), "READY=1")
        # one that fails in the file
        with open(lb.config_path, "a") as f:
            f.write("bogus_key = 1\n")
        code, out, err = harness.run_lb(["-r", "-c", lb.config_path])
        self.assertEqual(code, 1)
        self.assertIn("unknown key", err)
        self.assert_quiet()                 # lb -r read the file itself: no reload
        self.assertEqual(harness.fetch_name(fports["fe_web"]), "a")
        lb.stop(signal.SIGTERM)
        self.assertEqual(self.next_state(), "STOPPING=1")
        lb.allowed_errors.add("reload_failed")

    def test_reload_without_lb_and_usage(self):
        a = self.named("a")
        text, admin_port, _ = make_admin_config([("web", [("a", a.port)], {})])
        path = os.path.join(self.dir, "lb.ini")
        with open(path, "w") as f:
            f.write(text)
        code, out, err = harness.run_lb(["-r", "-c", path])
        self.assertEqual(code, 1)
        self.assertIn(f"admin port 127.0.0.1:{admin_port}: Connection refused "
                      f"(is lb running with {path}?)", err)
        for args in (["--version"], ["-v"]):
            code, out, _ = harness.run_lb(args)
            self.assertEqual(code, 0)
            self.assertRegex(out, r"^lb \S+\n$")
        for args in (["--help"], ["-h"]):
            code, out, _ = harness.run_lb(args)
            self.assertEqual(code, 0)
            for opt in ("--config", "--test", "--reload", "--takeover", "--version", "--help"):
                self.assertIn(opt, out)
        code, _, err = harness.run_lb(["--bogus"])
        self.assertEqual(code, 2)
        self.assertTrue(re.search(r"unrecognized option '--bogus'", err), err)
        code, _, _ = harness.run_lb(["-t", "-r", "-c", path])
        self.assertEqual(code, 2)


if __name__ == "__main__":
    harness.main()
