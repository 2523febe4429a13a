"""Half-close: a FIN from one side becomes shutdown(SHUT_WR) towards the other
side while the opposite direction keeps flowing, both ways."""

import hashlib
import os
import socket
import struct
import time

import harness
from harness import LbTestCase, recv_until_eof, sha256


class HalfCloseTest(LbTestCase):

    def test_client_fin_echo_drains(self):
        # 1 MB is still in flight when the client's FIN reaches lb: lb must
        # pass the FIN on and keep relaying the echo back to the client.
        echo = self.echo()
        lb = self.lb([("echo", echo)])
        payload = os.urandom(1 << 20)
        data, how = harness.echo_transfer(lb.port, payload, timeout=30)
        self.assertEqual(how, "eof", "the client should see an orderly EOF")
        self.assertEqual(len(data), len(payload), "bytes echoed back")
        self.assertEqual(sha256(data), sha256(payload))
        self.assertEqual(echo.next_report(), ("eof", len(payload)),
                         "the backend should see EOF after all the data")

    def test_client_fin_then_server_replies(self):
        # The backend answers only once it has read EOF (like a request whose
        # end is marked by the FIN): the reply must still reach the client.
        def summer(backend, conn):
            n = 0
            h = hashlib.sha256()
            while True:
                d = conn.recv(65536)
                if not d:
                    break
                n += len(d)
                h.update(d)
            conn.sendall(f"{n} {h.hexdigest()}\n".encode())
            backend.report("replied")

        b = self.custom(summer, "summer")
        lb = self.lb([("summer", b)])
        payload = os.urandom(300 * 1000)
        s = self.client(lb.port)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data, how = recv_until_eof(s)
        self.assertEqual(data.decode(), f"{len(payload)} {sha256(payload)}\n",
                         f"reply after the client's FIN ({how})")
        self.assertEqual(how, "eof")
        self.assertEqual(b.next_report(), "replied")

    def test_server_fin_client_keeps_sending(self):
        # The backend greets, shuts its write side at once, then reads on
        # until EOF and reports what it got.
        def greeter(backend, conn):
            conn.sendall(b"hello\n")
            conn.shutdown(socket.SHUT_WR)
            n, data = harness.drain_until_eof(conn)
            backend.report(data)

        b = self.custom(greeter, "greeter")
        lb = self.lb([("greeter", b)])
        s = self.client(lb.port)
        data, how = recv_until_eof(s, timeout=10)
        self.assertEqual((data, how), (b"hello\n", "eof"),
                         "the client should read the greeting then EOF")

        # After EOF on its read side, the client's writes still reach the
        # backend (paced, so several reads happen on each hop).
        parts = [f"part {i} ".encode() * 100 for i in range(5)]
        for p in parts:
            s.sendall(p)
            time.sleep(0.05)    # pacing, not waiting for anything
        s.shutdown(socket.SHUT_WR)
        got = b.next_report()
        self.assertEqual(got, b"".join(parts),
                         "bytes the backend received after its own FIN")
        # Both directions are closed now: lb ends the session and closes.
        harness.wait_for(lambda: b.active == 0, 5, "the backend connection to end")
        data, how = recv_until_eof(s, timeout=5)
        self.assertEqual(data, b"")

    def test_both_sides_fin_ends_session(self):
        # Client FIN and server FIN crossing: the session ends and the log
        # (debug) says so with the byte counts of both directions.
        echo = self.echo()
        lb = self.lb([("echo", echo)], log_level="debug")
        s = self.client(lb.port)
        self.assertEqual(harness.roundtrip(s, b"ping\n"), b"ping\n")
        s.shutdown(socket.SHUT_WR)
        data, how = recv_until_eof(s)
        self.assertEqual((data, how), (b"", "eof"))
        ev = lb.wait_event("session_end", server="echo")[0]
        self.assertEqual(ev.get("frontend"), "fe", ev)
        self.assertEqual((ev.get("bytes_in"), ev.get("bytes_out")), ("5", "5"), ev)

    def test_reply_and_fin_reach_the_client_in_one_segment(self):
        # A server that answers and closes (HTTP/1.0, a one-shot RPC) sends
        # its reply and its FIN in one segment here; lb sees both in one
        # event and passes them on in one segment too (MSG_MORE, then the
        # FIN), so the client wakes once. The client counts what its socket
        # received (TCP_INFO's tcpi_segs_in): the SYN-ACK, the ACK of its
        # request and the reply with the FIN, 3 in all; 4 when the FIN
        # travels alone.
        def answer_and_close(backend, conn):
            if conn.recv(100):
                conn.send(b"reply\n", socket.MSG_MORE)
                conn.shutdown(socket.SHUT_WR)
                harness.drain_until_eof(conn)

        b = self.custom(answer_and_close, "oneshot")
        lb = self.lb([("oneshot", b)])
        segments = []
        for _ in range(10):
            s = self.client(lb.port)
            s.sendall(b"request\n")
            data, how = recv_until_eof(s)
            self.assertEqual((data, how), (b"reply\n", "eof"))
            info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            segments.append(struct.unpack_from("I", info, 140)[0])   # tcpi_segs_in
            s.close()
        self.assertEqual(segments, [3] * 10, "segments each client received")


if __name__ == "__main__":
    harness.main()
