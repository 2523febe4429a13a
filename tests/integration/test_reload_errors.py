"""Bad reloads change nothing: for each kind of broken file (and a file that
is gone or unreadable, and a new frontend whose port is taken) the old
config keeps serving, /stats counts reloads.failed and shows the error
"FILE:LINE: message" under reloads.last_error, lb logs event=reload_failed
with it for both triggers, and POST /reload answers 400 with it. Every bad
file also carries a valid change (a new weight), which must not be applied
either. The next good file clears last_error.

Settings that need a restart (workers, [health] threads, [admin] listen)
are kept, with event=reload_keeps, while the rest of that reload applies;
log_level, max_connections and the admin token apply at once."""

import os
import re
import socket

import harness
from harness import HOST, IO_TIMEOUT, LbTestCase, fetch_name, free_port, line_of, wait_for
from test_reload_traffic import post_reload, servers_of, sighup_fail, start_lb, write_atomic


def base_lines(admin_port, port, web1, web2):
    """A good config as a list of lines (line N of the file is [N - 1])."""
    return [
        "; lb reload test: the good configuration",     # 1
        "[global]",                                     # 2
        "workers = 2",                                  # 3
        "max_connections = 10000",                      # 4
        "log_level = info",                             # 5
        "shutdown_timeout = 3s",                        # 6
        "",                                             # 7
        "[health]",                                     # 8
        "threads = 2",                                  # 9
        "",                                             # 10
        "[admin]",                                      # 11
        f"listen = {HOST}:{admin_port}",                # 12
        "",                                             # 13
        "[frontend web]",                               # 14
        f"listen = {HOST}:{port}",                      # 15
        "pool = web",                                   # 16
        "",                                             # 17
        "[pool web]",                                   # 18
        "balance = roundrobin",                         # 19
        f"server = web1 {web1.addr} weight=1",          # 20
        f"server = web2 {web2.addr}",                   # 21
        "connect_timeout = 1s",                         # 22
        "retries = 2",                                  # 23
        "check = none",                                 # 24
        "min_servers = 0",                              # 25
    ]


def text_of(lines):
    return "\n".join(lines) + "\n"


class ReloadErrorsTest(LbTestCase):

    def setUp(self):
        super().setUp()
        self.web1, self.web2 = self.named("web1"), self.named("web2")
        self.admin_port, self.port = free_port(), free_port()
        self.good = base_lines(self.admin_port, self.port, self.web1, self.web2)

    def changed(self):
        """The good lines plus a valid change: web1's weight 1 -> 5."""
        lines = list(self.good)
        lines[line_of(lines, "server = web1") - 1] = f"server = web1 {self.web1.addr} weight=5"
        return lines

    def cases(self):
        """(name, content or action, expected line or None, words): content
        is the file's lines (or bytes); an action is a callable that breaks
        the path itself. A line None: a file-level error, no line."""
        out = []

        def edit(name, words, replace=None, append=None, drop=()):
            lines = self.changed()
            line = None
            if replace:
                key, new = replace
                line = line_of(lines, key)
                lines[line - 1] = new
            for key in drop:
                del lines[line_of(lines, key) - 1]
            if append:
                line = len(lines) + 1
                lines += append
            out.append((name, lines, line, words))

        edit("unknown section", ["bogus"], append=["[bogus]"])
        edit("unknown key", ["colour"], append=["colour = blue"])
        edit("bad number", ["retries", "number"], replace=("retries", "retries = 2x"))
        edit("bad duration", ["connect_timeout", "duration"],
             replace=("connect_timeout", "connect_timeout = 10q"))
        edit("out of range", ["retries", "range"], replace=("retries", "retries = 99"))
        edit("server without port", ["port"], append=["server = web3 127.0.0.1"])
        edit("duplicate server", ["web1", "already"],
             append=[f"server = web1 {self.web2.addr}"])
        edit("duplicate frontend", ["web", "already"],
             append=["[frontend web]", f"listen = {HOST}:{free_port()}", "pool = web"])
        edit("frontend naming a missing pool", ["nosuch"],
             replace=("pool = web", "pool = nosuch"))
        lines = [l for l in self.changed() if not l.startswith("server = ")]
        out.append(("pool with no servers", lines, line_of(lines, "[pool web]"),
                    ["no servers"]))
        edit("unresolvable address", ["lb-reload-test.invalid", "resolve"],
             append=["server = web3 lb-reload-test.invalid:80"])
        edit("over-long line", ["too long", "long"], append=["; " + "x" * 250])
        out.append(("empty file", b"", 1, ["empty"]))
        out.append(("binary file", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, 1,
                    ["binary"]))

        def delete(path):
            os.unlink(path)
        out.append(("file deleted", delete, None, ["No such file", "cannot open"]))

        def directory(path):
            os.unlink(path)
            os.mkdir(path)
        out.append(("path is a directory", directory, None, ["directory", "cannot read"]))
        return out

    def assert_unchanged(self, lb, generation, where):
        st = lb.admin.stats()
        self.assertEqual(st["reloads"]["generation"], generation, f"{where}: generation")
        self.assertEqual({n: (s["address"], s["weight"])
                          for n, s in servers_of(st, "web").items()},
                         {"web1": (self.web1.addr, 1), "web2": (self.web2.addr, 1)},
                         f"{where}: the pool changed")
        self.assertEqual([(f["name"], f["listen"]) for f in st["frontends"]],
                         [("web", f"{HOST}:{self.port}")], f"{where}: frontends changed")
        names = [fetch_name(self.port) for _ in range(4)]
        self.assertEqual(sorted(names), ["web1", "web1", "web2", "web2"],
                         f"{where}: the old config does not serve as before")
        return st

    def check_bad(self, lb, where, line, words, ok_before, failed_before, generation):
        """POST /reload then SIGHUP on the bad file; checks the answer, the
        log, /stats and that the old config serves. Returns the error."""
        path = lb.config_path
        status, body = post_reload(lb)
        self.assertEqual(status, 400, f"{where}: POST /reload answered {status} {body}")
        self.assertEqual(list(body), ["error"], f"{where}: {body}")
        err = body["error"]
        prefix = re.escape(path) + (f":{line}: " if line is not None else r"(:\d+)?: ")
        self.assertRegex(err, "^" + prefix, f"{where}: error not shaped FILE:LINE: message")
        self.assertTrue(any(w.lower() in err.lower() for w in words),
                        f"{where}: {err!r} should name one of {words}")
        ev = lb.events("reload_failed")[-1]
        self.assertEqual((ev.get("level"), ev.get("trigger"), ev.get("error")),
                         ("error", "admin", err), f"{where}: {ev}")
        st = self.assert_unchanged(lb, generation, where)
        self.assertEqual(st["reloads"], {"ok": ok_before, "failed": failed_before + 1,
                                         "generation": generation, "last_error": err},
                         where)

        ev = sighup_fail(lb)
        self.assertEqual((ev.get("trigger"), ev.get("error")), ("SIGHUP", err), f"{where}: {ev}")
        st = self.assert_unchanged(lb, generation, where + " (SIGHUP)")
        self.assertEqual(st["reloads"], {"ok": ok_before, "failed": failed_before + 2,
                                         "generation": generation, "last_error": err},
                         where + " (SIGHUP)")
        return err

    def restore(self, lb, generation):
        path = lb.config_path
        if os.path.isdir(path):
            os.rmdir(path)
        write_atomic(path, text_of(self.good))
        status, body = post_reload(lb)
        self.assertEqual((status, body), (200, {"reloaded": True, "generation": generation}))
        ev = lb.events("reload")[-1]
        self.assertEqual((ev.get("trigger"), ev.get("generation")), ("admin", str(generation)))

    def test_bad_files_change_nothing(self):
        lb = start_lb(self, text_of(self.good), self.admin_port,
                      allowed_errors={"reload_failed"})
        seen = []
        for name, content, line, words in self.cases():
            with self.subTest(case=name):
                # Each case starts from the counters as they are (a failed
                # case does not throw the next ones off).
                r = lb.admin.stats()["reloads"]
                ok, failed, generation = r["ok"], r["failed"], r["generation"]
                if r["last_error"] is not None:
                    generation += 1
                    self.restore(lb, generation)
                    ok += 1
                if callable(content):
                    content(lb.config_path)
                else:
                    write_atomic(lb.config_path, content if isinstance(content, bytes)
                                 else text_of(content))
                err = self.check_bad(lb, name, line, words, ok, failed, generation)
                seen.append((name, err))
                failed += 2
                # A good file clears last_error.
                generation += 1
                self.restore(lb, generation)
                ok += 1
                st = lb.admin.stats()
                self.assertEqual(st["reloads"], {"ok": ok, "failed": failed,
                                                 "generation": generation, "last_error": None})
        print("\n" + "\n".join(f"  {n}: {e}" for n, e in seen))
        lb.assert_running()

    def test_taken_port_fails_the_whole_reload(self):
        lb = start_lb(self, text_of(self.good), self.admin_port,
                      allowed_errors={"reload_failed"})
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind((HOST, 0))
        taken.listen(8)
        tport = taken.getsockname()[1]
        free = free_port()
        # The new file drops web2, reweights web1, adds a frontend that can
        # listen and one that cannot: nothing of it may apply.
        lines = [l for l in self.changed() if not l.startswith("server = web2")]
        n_bad = len(lines) + 7
        lines += ["", "[frontend ok]", f"listen = {HOST}:{free}", "pool = web", "",
                  "[frontend taken]", f"listen = {HOST}:{tport}", "pool = web"]
        self.assertEqual(lines[n_bad - 1], f"listen = {HOST}:{tport}")
        write_atomic(lb.config_path, text_of(lines))
        err = self.check_bad(lb, "port taken", n_bad, ["in use"], 0, 0, 1)
        self.assertEqual(err, f"{lb.config_path}:{n_bad}: {HOST}:{tport} is already in use")
        self.assertTrue(harness.is_refused(free), "the frontend of a failed reload listens")
        # The port holder was not disturbed. (The client closes first, so
        # that no TIME_WAIT stays on the port.)
        c = socket.create_connection((HOST, tport), timeout=IO_TIMEOUT)
        a, _ = taken.accept()
        c.close()
        a.settimeout(IO_TIMEOUT)
        self.assertEqual(a.recv(10), b"")
        a.close()
        # Once the port is free, the same file reloads.
        taken.close()
        status, body = post_reload(lb)
        self.assertEqual((status, body), (200, {"reloaded": True, "generation": 2}))
        st = lb.admin.stats()
        self.assertEqual(st["reloads"]["last_error"], None)
        self.assertEqual({n: s["weight"] for n, s in servers_of(st, "web").items()}, {"web1": 5})
        self.assertEqual(sorted(f["name"] for f in st["frontends"]), ["ok", "taken", "web"])
        self.assertEqual(fetch_name(tport), "web1")
        self.assertEqual(fetch_name(free), "web1")

    def test_restart_only_settings_kept(self):
        checked = self.named("checked")
        good = self.good + ["", "[pool hc]", f"server = c1 {checked.addr}", "check = tcp",
                            "check_interval = 200ms", "check_timeout = 150ms"]
        lb = start_lb(self, text_of(good), self.admin_port)

        def threads():
            names = []
            for t in os.listdir(f"/proc/{lb.pid}/task"):
                try:
                    with open(f"/proc/{lb.pid}/task/{t}/comm") as f:
                        names.append(f.read().strip())
                except OSError:
                    pass
            return names.count("lb-worker"), names.count("lb-health")

        wait_for(lambda: threads() == (2, 2), IO_TIMEOUT, lambda: f"2 workers and 2 health "
                 f"threads; threads {threads()}")
        wait_for(lambda: checked.accepted >= 2, IO_TIMEOUT, "two tcp checks")
        self.assertEqual(lb.events("check"), [], "debug lines at log_level = info")
        new_admin = free_port()
        lines = list(good)
        for key, new in (("workers", "workers = 3"), ("threads", "threads = 3"),
                         ("listen = 127.0.0.1:%d" % self.admin_port,
                          f"listen = {HOST}:{new_admin}"),
                         ("max_connections", "max_connections = 500"),
                         ("log_level", "log_level = debug")):
            lines[line_of(lines, key) - 1] = new
        lines.insert(line_of(lines, "[admin]"), "token = s3cret")
        lines.insert(line_of(lines, "server = web2"), f"server = web3 {self.web2.addr}")
        write_atomic(lb.config_path, text_of(lines))
        status, body = post_reload(lb)
        self.assertEqual((status, body), (200, {"reloaded": True, "generation": 2}))

        keeps = {ev.get("key"): ev for ev in lb.events("reload_keeps")}
        self.assertEqual(sorted(keeps), ["listen", "threads", "workers"], keeps)
        self.assertEqual((keeps["workers"].get("level"), keeps["workers"].get("value"),
                          keeps["workers"].get("new")), ("warn", "2", "3"), keeps["workers"])
        self.assertEqual((keeps["threads"].get("value"), keeps["threads"].get("new")),
                         ("2", "3"), keeps["threads"])
        self.assertIn(str(self.admin_port), keeps["listen"].get("value", ""), keeps["listen"])
        self.assertIn(str(new_admin), keeps["listen"].get("new", ""), keeps["listen"])
        # The old values stay: as many threads as before, admin where it was.
        self.assertEqual(threads(), (2, 2), "worker and health threads after the reload")
        self.assertTrue(harness.is_refused(new_admin), "admin listens on the new address")
        # The rest applied: the server, max_connections, log_level, token.
        st = lb.admin.stats()
        self.assertEqual(sorted(servers_of(st, "web")), ["web1", "web2", "web3"])
        self.assertEqual(st["connections"]["max"], 500)
        lb.wait_event("check", pool="hc")
        r = lb.admin.post("/reload", auth=False)
        self.assertEqual(r.status, 401, f"POST /reload without the new token: {r}")
        r = lb.admin.post("/reload", headers={"Authorization": "Bearer s3cret"})
        self.assertEqual((r.status, r.json()), (200, {"reloaded": True, "generation": 3}), r)
        # The same file again: the restart-only settings are still kept.
        self.assertEqual(len(lb.events("reload_keeps", key="workers")), 2)
        self.assertEqual(threads(), (2, 2))


if __name__ == "__main__":
    harness.main()
