"""A connection the kernel completed before lb closed a listener is served.

lb closes a listener at shutdown (SIGINT at once, SIGTERM after
withdraw_delay) and when a reload drops its address. Closing a listening
socket resets what its accept queue holds and the handshakes still under
way, although those clients' connect() already succeeded: lb first stops
new handshakes, then accepts what is queued before the socket closes.

Each case runs clients through the close: every connect() that succeeded
must get its bytes echoed back in full, and a client that comes after the
close is refused (ECONNREFUSED), never reset after connecting. The cases at
the connection cap hold connections in the accept queue for certain (lb
does not accept past max_connections), so they fail on a close that drops
the queue whatever the machine's speed.
"""

import errno
import selectors
import signal
import socket
import threading
import time

import harness
from harness import HOST, LbTestCase, free_port, wait_for

PAYLOAD = b"0123456789abcdef" * 64          # 1 KiB, echoed back in full
CONCURRENCY = 32                            # client connections in flight
MAX_ATTEMPTS = 20000                        # the loop's bound in count...
LOOP_S = 6.0                                # ...and in time
# A SYN lb drops while its listener closes is sent again 1 s later and
# then refused; a connect still pending after this failed.
CONNECT_TIMEOUT_S = 3.5
REFUSED_ENOUGH = 100                        # refusals that show the close


def attempt_outcomes(port, until, after_refused_s=0.3):
    """Opens connections to port, CONCURRENCY at a time, until `until`
    (monotonic) or MAX_ATTEMPTS, and for after_refused_s more once one was
    refused (REFUSED_ENOUGH refusals end it sooner). Each sends PAYLOAD and reads it back. Returns (served, refused,
    failures): failures lists (reason, connected) for every attempt that was
    neither served nor refused at connect."""
    sel = selectors.DefaultSelector()
    served, refused, failures = 0, 0, []
    conns = {}          # sock -> [connected, bytes echoed, deadline]
    attempts = 0
    stop_opening = until

    def end(s, reason=None):
        nonlocal served
        st = conns.pop(s)
        sel.unregister(s)
        s.close()
        if reason is None:
            served += 1
        else:
            failures.append((reason, st[0]))

    while True:
        now = time.monotonic()
        while len(conns) < CONCURRENCY and now < stop_opening and attempts < MAX_ATTEMPTS:
            s = socket.socket()
            s.setblocking(False)
            attempts += 1
            err = s.connect_ex((HOST, port))
            if err == errno.ECONNREFUSED:
                refused += 1
                s.close()
                stop_opening = min(stop_opening, now + after_refused_s)
                if refused >= REFUSED_ENOUGH:
                    stop_opening = now
                continue
            if err not in (0, errno.EINPROGRESS):
                s.close()
                failures.append((f"connect: {errno.errorcode.get(err, err)}", False))
                continue
            conns[s] = [False, 0, now + CONNECT_TIMEOUT_S]
            sel.register(s, selectors.EVENT_WRITE)
        if not conns and (now >= stop_opening or attempts >= MAX_ATTEMPTS):
            return served, refused, failures
        for key, _ in sel.select(0.05):
            s = key.fileobj
            st = conns[s]
            if not st[0]:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err == errno.ECONNREFUSED:
                    conns.pop(s)
                    sel.unregister(s)
                    s.close()
                    refused += 1
                    stop_opening = min(stop_opening, time.monotonic() + after_refused_s)
                    if refused >= REFUSED_ENOUGH:
                        stop_opening = time.monotonic()
                    continue
                if err:
                    end(s, f"connect: {errno.errorcode.get(err, err)}")
                    continue
                st[0] = True
                st[2] = time.monotonic() + harness.IO_TIMEOUT
                try:
                    s.sendall(PAYLOAD)      # 1 KiB fits the socket buffer
                except OSError as e:
                    end(s, f"send: {e}")
                    continue
                sel.modify(s, selectors.EVENT_READ)
                continue
            try:
                d = s.recv(65536)
            except OSError as e:
                end(s, f"recv after {st[1]} bytes: {e}")
                continue
            if not d:
                end(s, f"EOF after {st[1]} bytes")
                continue
            st[1] += len(d)
            if st[1] >= len(PAYLOAD):
                end(s)
        now = time.monotonic()
        for s in [s for s, st in conns.items() if st[2] < now]:
            end(s, ("no echo" if conns[s][0] else "connect timeout") + " in time")


def connect_queued(port, n):
    """n clients whose connect() succeeded, each with PAYLOAD sent: lb,
    at its cap, leaves them in its accept queue."""
    socks = []
    for _ in range(n):
        s = harness.connect(port)
        s.sendall(PAYLOAD)
        socks.append(s)
    return socks


def serve_all(socks, timeout=harness.IO_TIMEOUT):
    """Reads PAYLOAD back on every sock, in whatever order lb serves them
    (at its cap it takes a queued one only when another ends), closing each
    once echoed. Returns the (index, reason) of those not served."""
    sel = selectors.DefaultSelector()
    got = {}
    for i, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        got[i] = 0
    failed = []
    deadline = time.monotonic() + timeout
    while got and time.monotonic() < deadline:
        for key, _ in sel.select(0.1):
            i, s = key.data, key.fileobj
            try:
                d = s.recv(65536)
            except OSError as e:
                d, why = None, str(e)
            if not d:
                failed.append((i, why if d is None else f"EOF after {got[i]} bytes"))
            elif got[i] + len(d) < len(PAYLOAD):
                got[i] += len(d)
                continue
            del got[i]
            sel.unregister(s)
            s.close()
    return failed + [(i, f"{n} bytes in {timeout} s") for i, n in got.items()]


def takes_handshakes(port):
    """True while a connect to port completes within 0.2 s (the probe is
    closed at once: lb serves it as an empty connection)."""
    try:
        socket.create_connection((HOST, port), timeout=0.2).close()
        return True
    except OSError:         # refused, or a SYN dropped while it closes
        return False


class ListenerCloseTest(LbTestCase):

    def config(self, echo, frontends=("fe",), max_connections=10000, **global_keys):
        ports = {name: free_port() for name in frontends}
        lines = ["[global]", "workers = 2", f"max_connections = {max_connections}",
                 "shutdown_timeout = 20s"]
        lines += [f"{k} = {v}" for k, v in global_keys.items()]
        lines += ["", "[admin]", f"listen = {HOST}:{free_port()}", ""]
        for name, port in ports.items():
            lines += [f"[frontend {name}]", f"listen = {HOST}:{port}", "pool = p", ""]
        lines += ["[pool p]", f"server = e {echo.addr}", "check = none", ""]
        return "\n".join(lines), ports

    def client_loop(self, port, result):
        th = threading.Thread(target=lambda: result.append(
            attempt_outcomes(port, time.monotonic() + LOOP_S)), daemon=True)
        th.start()
        return th

    def assertServedThroughClose(self, outcomes, what):
        served, refused, failures = outcomes
        print(f"measured ({what}): {served} served, {refused} refused, "
              f"{len(failures)} failed {failures[:5]}")
        self.assertEqual(failures, [], f"{what}: clients not served (reason, connected)")
        self.assertGreater(served, 50, f"{what}: too few clients before the close")
        self.assertGreater(refused, 0, f"{what}: no client came after the close")

    def loop_through_signal(self, sig, what, **config):
        """A client loop runs while sig makes lb close its listener."""
        echo = self.echo()
        text, ports = self.config(echo, **config)
        lb = self.start_lb(text)
        result = []
        th = self.client_loop(ports["fe"], result)
        wait_for(lambda: echo.accepted >= 200, harness.IO_TIMEOUT, "clients before the close")
        lb.send_signal(sig)
        th.join(LOOP_S + CONNECT_TIMEOUT_S + harness.IO_TIMEOUT)
        self.assertFalse(th.is_alive(), "the client loop did not end")
        self.assertServedThroughClose(result[0], what)
        self.assertEqual(lb.wait_exit(), 0)

    def test_sigint_loop(self):
        self.loop_through_signal(signal.SIGINT, "SIGINT")

    def test_sigterm_withdraw_loop(self):
        self.loop_through_signal(signal.SIGTERM, "SIGTERM after withdraw_delay",
                                 withdraw_delay="300ms")

    def test_reload_drops_address_loop(self):
        echo = self.echo()
        text, ports = self.config(echo, frontends=("kept", "dropped"))
        lb = self.start_lb(text)
        port = ports["dropped"]
        result = []
        th = self.client_loop(port, result)
        wait_for(lambda: echo.accepted >= 200, harness.IO_TIMEOUT, "clients before the reload")
        kept = text.split("[frontend dropped]")[0] + "[pool p]" + text.split("[pool p]")[1]
        with open(lb.config_path, "w") as f:
            f.write(kept)
        lb.send_signal(signal.SIGHUP)
        th.join(LOOP_S + CONNECT_TIMEOUT_S + harness.IO_TIMEOUT)
        self.assertFalse(th.is_alive(), "the client loop did not end")
        self.assertServedThroughClose(result[0], "a reload dropping the address")
        self.assertEqual(harness.roundtrip(harness.connect(ports["kept"]), b"kept"), b"kept")

    def _queued_at_cap(self, close, **global_keys):
        """Two connections hold lb at max_connections = 2; more clients
        connect and wait in its accept queue; close() makes lb close the
        listener. Once the two held end, every queued client is served."""
        echo = self.echo()
        text, ports = self.config(echo, frontends=("kept", "fe"), max_connections=2,
                                  **global_keys)
        lb = self.start_lb(text)
        held = [harness.connect(ports["kept"]) for _ in range(2)]
        for s in held:
            self.assertEqual(harness.roundtrip(s, b"held"), b"held")
        wait_for(lambda: echo.active == 2, harness.IO_TIMEOUT, "two held connections")
        queued = connect_queued(ports["fe"], 20)
        lb.wait_event("max_connections_reached")
        close(lb, text)
        # The listener waits for slots with its queue; a close that
        # dropped the queue has reset the queued clients by now.
        wait_for(lambda: not takes_handshakes(ports["fe"]), harness.IO_TIMEOUT,
                 "the listener to stop taking new connections")
        self.assertEqual(echo.accepted, 2, "lb accepted past its cap")
        for s in held:
            s.close()
        self.assertEqual(serve_all(queued), [], "queued clients not served (index, why)")
        wait_for(lambda: harness.is_refused(ports["fe"]), harness.IO_TIMEOUT,
                 "the listener to close once its queue is served")
        return lb

    def test_queued_at_cap_served_after_sigint(self):
        lb = self._queued_at_cap(lambda lb, text: lb.send_signal(signal.SIGINT))
        self.assertEqual(lb.wait_exit(), 0)

    def test_queued_at_cap_served_after_reload_drops_address(self):
        def drop(lb, text):
            with open(lb.config_path, "w") as f:
                f.write(text.split("[frontend fe]")[0] + "[pool p]" + text.split("[pool p]")[1])
            lb.send_signal(signal.SIGHUP)
        lb = self._queued_at_cap(drop)
        lb.assert_running()

    def test_reload_readds_address_while_it_closes(self):
        """A reload drops fe's address while its listener waits at the cap
        with a client queued; the next reload adds it back at once. lb's
        own closing socket must not count as the address being in use:
        that reload succeeds, and new clients on the address are served."""
        echo = self.echo()
        text, ports = self.config(echo, frontends=("kept", "fe"), max_connections=2)
        lb = self.start_lb(text, allowed_errors={"reload_failed"})
        fds_at_start = lb.fd_count()
        held = [harness.connect(ports["kept"]) for _ in range(2)]
        for s in held:
            self.assertEqual(harness.roundtrip(s, b"held"), b"held")
        wait_for(lambda: echo.active == 2, harness.IO_TIMEOUT, "two held connections")
        queued = connect_queued(ports["fe"], 1)
        lb.wait_event("max_connections_reached")

        def reload(new_text, n):
            with open(lb.config_path, "w") as f:
                f.write(new_text)
            lb.send_signal(signal.SIGHUP)
            wait_for(lambda: len(lb.events("reload")) >= n or lb.events("reload_failed"),
                     harness.IO_TIMEOUT, f"reload {n} to end")
            self.assertEqual([ev.get("error") for ev in lb.events("reload_failed")], [],
                             f"reload {n} failed")

        reload(text.split("[frontend fe]")[0] + "[pool p]" + text.split("[pool p]")[1], 1)
        # The listener is closing (no new handshake) but still open: the
        # queued client waits for a slot.
        wait_for(lambda: not takes_handshakes(ports["fe"]), harness.IO_TIMEOUT,
                 "the listener to stop taking new connections")
        reload(text, 2)
        for s in held:
            s.close()
        self.assertEqual(serve_all(queued), [], "the queued client not served (index, why)")
        # A SYN the kernel hands to the closing socket is dropped and sent
        # again 1 s later; that socket closes once its queue is served
        # (above), so the retransmission finds a new socket, well within
        # harness.connect's timeout.
        for i in range(10):
            with harness.connect(ports["fe"]) as c:
                self.assertEqual(harness.roundtrip(c, b"new %d" % i), b"new %d" % i)
        # The closing sockets are closed, each once: as many descriptors as
        # at the start (one socket per worker on each address).
        wait_for(lambda: lb.fd_count() == fds_at_start, harness.IO_TIMEOUT,
                 lambda: f"lb's descriptors back to {fds_at_start} (now {lb.fd_count()})")
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
