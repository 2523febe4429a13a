"""A connection that began before a reload retries against today's rotation:
its old generation's pool shares each server's rotation flag with the new
one, so a server an operator took out after the reload is not picked by the
retry. (Before the flags were shared, the retry picked from the old pool's
frozen flags and reached the disabled server.)

X is a blackhole (its connects time out), Y answers its name. With one
worker and round robin, a client is made to wait on X's connect; then lb
reloads, Y is disabled, and X's connect timeout sends the client to its
retry: no other server is in rotation, so the client is closed unanswered
and Y sees no connection."""

import time

import admin_client
import harness
from harness import IO_TIMEOUT, LbTestCase, free_port, wait_for
from test_reload_traffic import config_text, sighup_reload, start_lb, write_atomic

CONNECT_TIMEOUT_MS = 3000      # room for a reload and a POST, even loaded


class ReloadRetryTest(LbTestCase):

    def text(self, x, y, idle_timeout):
        keys = {"connect_timeout": f"{CONNECT_TIMEOUT_MS}ms", "retries": 1,
                "idle_timeout": idle_timeout}
        return config_text(self.admin_port, [("fe", self.port, "p")],
                           [("p", [("X", x), ("Y", y)], keys)], workers=1)

    def wait_on_x(self, lb):
        """A client whose connect lb has sent to X (pending there)."""
        for _ in range(4):
            c = self.client(self.port)
            def placed():
                x = admin_client.find_server(lb.admin.stats(), "p", "X")
                if x["active_connections"] == 1:
                    return "X"
                if harness.is_readable(c):
                    return "Y"
                return None
            where = wait_for(placed, IO_TIMEOUT, "the client to reach X or Y")
            if where == "X":
                return c, time.monotonic()
            c.close()
        self.fail("round robin never sent a client to X")

    def test_retry_after_reload_skips_a_server_disabled_since(self):
        self.admin_port, self.port = free_port(), free_port()
        x, y = self.blackhole(), self.named("Y")
        lb = start_lb(self, self.text(x, y, "5m"), self.admin_port,
                      allowed_errors=("no_server",))
        lb.admin.wait_idle("p", "Y")
        y_before = y.accepted

        c, t0 = self.wait_on_x(lb)
        write_atomic(lb.config_path, self.text(x, y, "4m"))
        sighup_reload(lb, "2")
        self.assertEqual(lb.admin.action("p", "Y", "disable").status, 200)
        # All of this must happen while X's connect is still pending.
        self.assertLess(time.monotonic() - t0, CONNECT_TIMEOUT_MS / 1000,
                        "the reload and the disable took longer than X's connect timeout")

        got, _ = harness.recv_until_eof(c, timeout=IO_TIMEOUT)
        self.assertEqual(got, b"", "the retry reached Y, disabled after the reload")
        ev = lb.wait_event("no_server")[0]
        self.assertEqual(ev.get("reason"), "2 connect attempts failed", ev)
        self.assertEqual(y.accepted, y_before, "Y got a connection while disabled")
        fail = lb.events("connect_failed", server="X")
        self.assertEqual([f.get("attempt") for f in fail], ["1", "2"], fail)
        self.assertEqual(fail[0].get("error"), f"timeout after {CONNECT_TIMEOUT_MS} ms", fail)


if __name__ == "__main__":
    harness.main()
