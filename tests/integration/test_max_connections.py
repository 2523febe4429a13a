"""max_connections caps client connections over all frontends together: past
the cap lb stops accepting (new clients wait in the kernel backlog, connected
but unserved) and resumes when a connection closes."""

import select

import harness
from harness import LbTestCase, wait_for

QUIET = 1.0     # how long a queued client must stay unserved to count as waiting


class MaxConnectionsTest(LbTestCase):

    def _config(self, backend, limit):
        admin, pa, pb = harness.free_port(), harness.free_port(), harness.free_port()
        text = "\n".join([
            "[global]", "workers = 2", f"max_connections = {limit}",
            "shutdown_timeout = 3s", "",
            "[admin]", f"listen = 127.0.0.1:{admin}", "",
            "[frontend a]", f"listen = 127.0.0.1:{pa}", "pool = p", "",
            "[frontend b]", f"listen = 127.0.0.1:{pb}", "pool = p", "",
            "[pool p]", f"server = web1 {backend.addr}", "check = none", "",
        ])
        return text, pa, pb

    def _served(self, s, timeout=harness.IO_TIMEOUT):
        s.settimeout(timeout)
        line = harness.read_line(s)
        self.assertEqual(line, b"web1\n", "a served client reads the backend's name")

    def _assert_waiting(self, socks, backend, accepted):
        """Every socket in socks stays connected but unserved for QUIET s."""
        readable = select.select(socks, [], [], QUIET)[0]
        for s in readable:
            try:
                d = s.recv(100)
            except ConnectionResetError:
                d = b"<reset>"
            self.fail(f"a client past max_connections got {d!r} instead of waiting "
                      "(b'' = lb accepted and closed it)")
        self.assertEqual(backend.accepted, accepted, "connections that reached the backend")

    def test_cap_over_frontends_and_resume(self):
        web1 = self.named("web1", hold=True)
        text, pa, pb = self._config(web1, 3)
        lb = self.start_lb(text)

        held = [self.client(pa), self.client(pa), self.client(pb)]
        for s in held:
            self._served(s)
        wait_for(lambda: web1.active == 3, 5, "3 held connections at the backend")

        # 4th and 5th clients, one per frontend: the handshake completes in
        # the kernel's backlog, but lb does not accept them.
        w4 = self.client(pa)
        w5 = self.client(pb)
        self._assert_waiting([w4, w5], web1, 3)
        ev = lb.wait_event("max_connections_reached")[0]
        self.assertEqual(ev.get("level"), "warn", ev)
        self.assertEqual(ev.get("limit"), "3", ev)

        # One held connection closes: exactly one waiting client gets in.
        held[0].close()
        ready = harness.wait_for(
            lambda: select.select([w4, w5], [], [], 0.05)[0], 10,
            "a waiting client to be served after a connection closed")
        self.assertEqual(len(ready), 1, "both waiting clients got in with one free slot")
        first = ready[0]
        other = w5 if first is w4 else w4
        self._served(first)
        self._assert_waiting([other], web1, 4)

        # Another one closes: the last waiting client gets in too.
        held[1].close()
        self._served(other, timeout=10)
        lb.wait_event("accept_resumed")

        # Back under the cap after everything closes: lb serves as usual.
        for s in (held[2], first, other):
            s.close()
        wait_for(lambda: web1.active == 0, 5, "all connections to end")
        for _ in range(5):
            s = harness.connect(pa)
            try:
                self._served(s)
            finally:
                s.close()
        lb.assert_running()

    def test_cap_of_one(self):
        # Sequential clients under a cap of one all get served in turn.
        web1 = self.named("web1")
        text, pa, pb = self._config(web1, 1)
        self.start_lb(text)
        for i in range(20):
            port = pa if i % 2 == 0 else pb
            self.assertEqual(harness.fetch_name(port), "web1", f"client {i + 1}")


if __name__ == "__main__":
    harness.main()
