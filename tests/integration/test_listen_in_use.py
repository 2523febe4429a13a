"""A port someone else listens on is refused, not shared.

lb's listening sockets set SO_REUSEPORT (one per worker), and the kernel
lets such a socket join any listener of the same user that set it too,
then splits that port's clients between them. So lb proves a new address
free before it binds it: a start whose frontend names a port in use exits 1
with "FILE:LINE: 127.0.0.1:PORT is already in use" (the line of the
frontend's listen) and never logs event=ready; a reload that adds such a
frontend fails before anything changed, says the same in its answer, in
/stats and in its log, and the old config keeps serving. The other holder
is a plain socket, with SO_REUSEPORT (the case the kernel would share) and
without, or another lb. Every client of the holder's port still reaches the
holder. A reload that keeps an address keeps lb's own sockets, which are
not "someone else"."""

import socket

import harness
from harness import (HOST, IO_TIMEOUT, Backend, Lb, LbTestCase, fetch_name, free_port, line_of,
                     wait_for)
from test_reload_traffic import config_text, post_reload, sighup_fail, start_lb, write_atomic

CLIENTS = 20        # with sharing, the chance that all reach the holder is 2^-20


def holder_gets_every_client(holder, port):
    """CLIENTS connections to port: each one must be the holder's."""
    before = holder.accepted
    for _ in range(CLIENTS):
        c = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
        c.close()
    wait_for(lambda: holder.accepted - before == CLIENTS, IO_TIMEOUT,
             lambda: f"the holder to accept all {CLIENTS} clients "
             f"(it accepted {holder.accepted - before})")


class ListenInUseTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.web1 = self.named("web1")

    def hold(self, port, reuseport):
        """The other holder of port: a listener that accepts and closes
        (with SO_REUSEADDR, as servers do: the connections it closed then do
        not keep the port from lb once it is gone)."""
        return self.backend(Backend(lambda b, conn: None, name=f"holder{port}", port=port,
                                    reuseport=reuseport))

    def config(self, port):
        """(text, line of the frontend's listen) of a config serving port."""
        text, _ = harness.make_config([("web1", self.web1)], port=port)
        return text, line_of(text.split("\n"), f"listen = {HOST}:{port}")

    def refused_start(self, text):
        """Starts lb on text and expects it to exit 1 before event=ready;
        returns the start_failed event."""
        lb = Lb(text, allowed_errors={"start_failed"})
        lb.expect_status = 1
        self.addCleanup(lb.close)
        lb.start(wait_ready=False)
        self.assertEqual(lb.wait_exit(), 1, lb.log_tail())
        self.assertEqual(lb.events("ready"), [], "lb said ready on a port in use")
        evs = lb.events("start_failed")
        self.assertEqual(len(evs), 1, lb.log_tail())
        return lb, evs[0]

    def test_start_fails_on_a_port_in_use(self):
        for reuseport in (True, False):
            with self.subTest(holder_reuseport=reuseport):
                port = free_port()
                holder = self.hold(port, reuseport)
                text, line = self.config(port)
                lb, ev = self.refused_start(text)
                self.assertEqual(ev.get("error"),
                                 f"{lb.config_path}:{line}: {HOST}:{port} is already in use")
                holder_gets_every_client(holder, port)
                # The same file starts once the port is free: the holder was
                # the only reason.
                holder.stop()
                lb2 = self.start_lb(text)
                self.assertEqual(fetch_name(port), "web1")
                lb2.stop()
                lb2.close()

    def test_second_lb_on_the_same_port_fails(self):
        port = free_port()
        text, line = self.config(port)
        first = self.start_lb(text)
        # The second one has its own admin port, and the same frontend.
        text2, _ = harness.make_config([("web1", self.web1)], port=port)
        lb, ev = self.refused_start(text2)
        self.assertEqual(ev.get("error"),
                         f"{lb.config_path}:{line}: {HOST}:{port} is already in use")
        # Every client still goes through the first lb.
        for _ in range(CLIENTS):
            self.assertEqual(fetch_name(port), "web1")
        wait_for(lambda: self.web1.accepted == CLIENTS, IO_TIMEOUT,
                 lambda: f"{CLIENTS} connections at web1, got {self.web1.accepted}")
        first.assert_running()

    def test_reload_that_adds_a_port_in_use_fails(self):
        admin_port, port = free_port(), free_port()
        pools = [("web", [("web1", self.web1)], {})]
        good = config_text(admin_port, [("web", port, "web")], pools)
        lb = start_lb(self, good, admin_port, allowed_errors={"reload_failed"})
        generation = 1
        for reuseport in (True, False):
            with self.subTest(holder_reuseport=reuseport):
                taken = free_port()
                holder = self.hold(taken, reuseport)
                text = config_text(admin_port, [("web", port, "web"), ("taken", taken, "web")],
                                   pools)
                line = line_of(text.split("\n"), f"listen = {HOST}:{taken}")
                write_atomic(lb.config_path, text)
                want = f"{lb.config_path}:{line}: {HOST}:{taken} is already in use"
                self.assertEqual(post_reload(lb), (400, {"error": want}))
                st = lb.admin.stats()
                self.assertEqual(st["reloads"]["last_error"], want)
                self.assertEqual(st["reloads"]["generation"], generation)
                self.assertEqual([f["name"] for f in st["frontends"]], ["web"])
                ev = sighup_fail(lb)
                self.assertEqual((ev.get("trigger"), ev.get("error")), ("SIGHUP", want))
                holder_gets_every_client(holder, taken)
                self.assertEqual(fetch_name(port), "web1", "the old config no longer serves")
                # Once the port is free, the same file applies.
                holder.stop()
                generation += 1
                self.assertEqual(post_reload(lb), (200, {"reloaded": True,
                                                         "generation": generation}))
                self.assertEqual(fetch_name(taken), "web1")
                # Back to the one frontend for the next holder.
                write_atomic(lb.config_path, good)
                generation += 1
                self.assertEqual(post_reload(lb), (200, {"reloaded": True,
                                                         "generation": generation}))
                wait_for(lambda: harness.is_refused(taken), IO_TIMEOUT,
                         f"the removed frontend to stop listening on {taken}")
        self.assertEqual(lb.admin.stats()["reloads"]["last_error"], None)

    def test_reload_keeps_its_own_sockets(self):
        """A kept address is lb's own, not a port in use: a reload that
        renames the frontend and moves it to another pool keeps listening
        there (the probe would fail on lb's own sockets)."""
        web2 = self.named("web2")
        admin_port, port = free_port(), free_port()
        lb = start_lb(self, config_text(admin_port, [("web", port, "web")],
                                        [("web", [("web1", self.web1)], {})]), admin_port)
        self.assertEqual(fetch_name(port), "web1")
        write_atomic(lb.config_path, config_text(
            admin_port, [("renamed", port, "other")],
            [("web", [("web1", self.web1)], {}), ("other", [("web2", web2)], {})]))
        self.assertEqual(post_reload(lb), (200, {"reloaded": True, "generation": 2}))
        self.assertEqual(fetch_name(port), "web2")


if __name__ == "__main__":
    harness.main()
