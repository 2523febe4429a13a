"""splice = off | auto | on: a bulk transfer arrives whole (count and sha256)
in both directions, lb's byte counters say exactly what moved, and a client
that does not read holds lb at a bounded amount whichever way the bytes go.
Whether the relay spliced is read from lb's descriptors: a spliced half that
waits for its reader holds a pipe."""

import hashlib
import os
import socket
import time

import harness
from harness import LbTestCase, sha256, wait_for

MB = 1 << 20
SIZE = 32 * MB


def lb_pipes(lb):
    n = 0
    for fd in os.listdir(f"/proc/{lb.pid}/fd"):
        try:
            if os.readlink(f"/proc/{lb.pid}/fd/{fd}").startswith("pipe:"):
                n += 1
        except OSError:                 # closed meanwhile
            pass
    return n


class SpliceTest(LbTestCase):

    def start(self, mode, handler, name):
        b = self.custom(handler, name)
        text, port = harness.make_config([(name, b)], workers=1, log_level="debug")
        lb = self.start_lb(text.replace("check = none", f"check = none\nsplice = {mode}"),
                           port=port)
        return b, lb

    def download(self, mode):
        payload = os.urandom(SIZE)
        sent = [0]

        def firehose(backend, conn):
            for off in range(0, SIZE, MB):
                conn.sendall(payload[off:off + MB])
                sent[0] = off + MB
            conn.shutdown(socket.SHUT_WR)
            harness.drain_until_eof(conn)

        _, lb = self.start(mode, firehose, "firehose")
        pipes_idle = lb_pipes(lb)
        s = self.client(lb.port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 * 1024)

        # Read nothing until the backend stalls: lb holds what it read.
        last = [-1, time.monotonic()]

        def stalled():
            v, now = sent[0], time.monotonic()
            self.assertLess(v, SIZE, "the backend sent everything to a client that reads "
                                     "nothing: lb buffers without bound")
            if v != last[0]:
                last[:] = [v, now]
                return False
            return v > 0 and now - last[1] >= 0.5

        wait_for(stalled, 30, lambda: f"the backend to stall (sent {sent[0] // MB} MB)")
        pipes_held = lb_pipes(lb) - pipes_idle
        data, how = harness.recv_until_eof(s, timeout=60)
        self.assertEqual(how, "eof")
        self.assertEqual(len(data), SIZE)
        self.assertEqual(sha256(data), sha256(payload), "content")
        s.shutdown(socket.SHUT_WR)
        ev = lb.wait_event("session_end", server="firehose")[0]
        self.assertEqual((ev["bytes_in"], ev["bytes_out"]), (str(SIZE), "0"), ev)
        return pipes_held

    def upload(self, mode):
        def digest(backend, conn):
            h, n = hashlib.sha256(), 0
            while True:
                d = conn.recv(65536)
                if not d:
                    break
                h.update(d)
                n += len(d)
            conn.sendall(f"{n} {h.hexdigest()}\n".encode())

        _, lb = self.start(mode, digest, "digest")
        payload = os.urandom(SIZE)
        s = self.client(lb.port)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)      # the half-close passes through
        reply, how = harness.recv_until_eof(s, timeout=60)
        self.assertEqual(how, "eof")
        self.assertEqual(reply.decode(), f"{SIZE} {sha256(payload)}\n")
        ev = lb.wait_event("session_end", server="digest")[0]
        self.assertEqual((ev["bytes_in"], ev["bytes_out"]), (str(len(reply)), str(SIZE)), ev)

    def test_off_copies(self):
        self.assertEqual(self.download("off"), 0, "splice = off made pipes")
        self.upload("off")

    def test_on_splices(self):
        # One pipe (two descriptors) for the blocked server-to-client half.
        self.assertEqual(self.download("on"), 2, "pipes held by a blocked spliced half")
        self.upload("on")

    def test_auto_splices_bulk(self):
        self.assertEqual(self.download("auto"), 2, "a bulk direction under auto is spliced")
        self.upload("auto")


if __name__ == "__main__":
    harness.main()
