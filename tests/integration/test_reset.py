"""Abrupt ends: a client or a server that resets (RST) or vanishes mid-stream
makes lb close the other side too, and lb goes on serving (no crash, no
leaked session, no sanitizer report)."""

import socket
import struct
import time

import harness
from harness import LbTestCase, recv_until_eof, wait_for

MB = 1 << 20


def abort(sock):
    """Closes sock with an RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def firehose(backend, conn):
    """Sends until the peer goes away (bounded to 1 GB)."""
    chunk = b"z" * (256 * 1024)
    for _ in range(4096):
        conn.sendall(chunk)


class ResetTest(LbTestCase):

    def test_client_reset_closes_server_side(self):
        b = self.custom(firehose, "firehose")
        lb = self.lb([("firehose", b)])
        for i in range(5):
            s = harness.connect(lb.port)
            harness.recv_exact(s, 100 * 1024)       # data is flowing
            abort(s)
            wait_for(lambda: b.active == 0, 10,
                     f"lb to close the server side after client reset {i + 1}")
        self.assertEqual(b.accepted, 5)
        self._still_serves(lb, b"zzzz")

    def test_server_reset_closes_client_side(self):
        def resetter(backend, conn):
            conn.sendall(b"partial data\n")
            harness.read_line(conn)           # the client's "go"
            abort(conn)
        b = self.custom(resetter, "resetter")
        lb = self.lb([("resetter", b)])
        for i in range(5):
            s = self.client(lb.port)
            self.assertEqual(harness.read_line(s), b"partial data\n")
            s.sendall(b"go\n")
            data, how = recv_until_eof(s, timeout=10)
            self.assertIn(how, ("eof", "reset"), f"client {i + 1} not closed after the server's RST")
            self.assertEqual(data, b"")
            s.close()
        self._still_serves(lb, b"partial data\n")

    def test_client_gone_before_backend_answers(self):
        # Clients that connect and vanish at once (FIN or RST), many of them
        # while lb is still connecting upstream.
        echo = self.echo()
        lb = self.lb([("echo", echo)])
        for i in range(60):
            s = socket.create_connection((harness.HOST, lb.port), timeout=5)
            if i % 2:
                abort(s)
            else:
                s.sendall(b"bye")
                s.close()
        wait_for(lambda: echo.active == 0 and echo.accepted > 0, 10,
                 lambda: f"the backend connections to end (active {echo.active})")
        # Every connection that reached the backend was closed by lb.
        s = self.client(lb.port)
        self.assertEqual(harness.roundtrip(s, b"still here\n"), b"still here\n")
        lb.assert_running()

    def test_server_closes_while_client_sends(self):
        # The backend reads a little and closes while the client is still
        # pushing data: the client ends up closed (EOF, reset or EPIPE).
        def quitter(backend, conn):
            conn.recv(1000)
            conn.close()
        b = self.custom(quitter, "quitter")
        lb = self.lb([("quitter", b)])
        s = self.client(lb.port)
        outcome = None
        deadline = time.monotonic() + 10
        chunk = b"q" * 65536
        s.settimeout(1)
        for _ in range(2000):
            if time.monotonic() > deadline:
                break
            try:
                s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                outcome = "closed"
                break
            except socket.timeout:
                pass                    # lb stopped reading: check for EOF
            if harness.is_readable(s):
                try:
                    d = s.recv(100)
                except ConnectionResetError:
                    d = b""
                if d == b"":
                    outcome = "closed"
                    break
        self.assertEqual(outcome, "closed", "lb kept the client open after the server closed")
        wait_for(lambda: b.active == 0, 5, "the backend handler to end")
        lb.assert_running()
        self.assertFalse(harness.is_refused(lb.port))

    def _still_serves(self, lb, expect_prefix):
        """lb is alive and a new client still gets the backend's first
        bytes."""
        lb.assert_running()
        s = harness.connect(lb.port)
        try:
            got = harness.recv_exact(s, len(expect_prefix))
        finally:
            abort(s)
        self.assertEqual(got, expect_prefix, "a new client after the resets")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
