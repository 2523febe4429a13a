"""HTTPS checks: the HTTP check over TLS, with SNI = check_host. With
check_verify off any certificate passes; with it on the server's
certificate must chain to check_ca and match check_host. A TLS check
against a plain-HTTP port fails fast (handshake failed), not by timeout.

The certificates are made by the test with the openssl CLI (self-signed,
CN and subjectAltName localhost, valid one day); the servers are TLS ports
of one hc_backend process (Python's ssl), which records the SNI name of
every handshake."""

import os
import shutil
import subprocess

import harness
from harness import LbTestCase, wait_for

I = 0.5
T = 0.4
HTTPS = {"check": "https", "check_interval": "500ms", "check_timeout": "400ms",
         "rise": 1, "fall": 2}
# The TLS check of a plain port: a long timeout, so that "fails fast, not by
# timeout" has room under load.
T_PLAIN = 1.0
HTTPS_PLAIN = dict(HTTPS, check_interval="1s", check_timeout="1s")
WAIT = 10.0


def make_cert(d, name, cn="localhost"):
    """A self-signed certificate and its key in d; returns (cert, key)."""
    cert, key = os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")
    openssl = shutil.which("openssl")
    if openssl is None:
        raise AssertionError("the openssl CLI is needed to make test certificates")
    p = subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-days", "1", "-subj", f"/CN={cn}",
                        "-addext", f"subjectAltName=DNS:{cn}",
                        "-keyout", key, "-out", cert],
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"openssl req failed: {p.stderr.decode(errors='replace')}")
    return cert, key


class HealthHttpsTest(LbTestCase):

    def test_https_checks(self):
        d = harness.make_tmpdir()
        cert, key = make_cert(d, "server")
        other, _ = make_cert(d, "other")
        b = self.hc_backend(count=1, tls_count=2, cert=cert, key=key)
        plain = b.ports[0]
        t1, t2 = b.tls_ports
        lb = self.lb_pools([
            ("off", [("t1", b.addr(t1))],
             dict(HTTPS, check_host="sni.example.test", check_path="/tls")),
            ("ca", [("t2", b.addr(t2))],
             dict(HTTPS, check_verify="on", check_ca=cert, check_host="localhost")),
            ("badca", [("t2", b.addr(t2))],
             dict(HTTPS, check_verify="on", check_ca=other, check_host="localhost")),
            ("badname", [("t2", b.addr(t2))],
             dict(HTTPS, check_verify="on", check_ca=cert, check_host="wrong.example.test")),
            ("plain", [("p", b.addr(plain))], HTTPS_PLAIN),
        ], log_level="debug")

        def checks(pool, server, count):
            def got():
                evs = lb.events("check", pool=pool, server=server)
                return evs if len(evs) >= count else None
            return wait_for(got, WAIT, lambda: f"{count} checks of {pool}/{server}\n"
                            + lb.log_tail())

        # Verification off: passes, SNI and Host are check_host.
        for e in checks("off", "t1", 3):
            self.assertEqual(e["result"], "passed", e)
            self.assertIn("200", e.get("detail", ""), e)
        info = b.info(t1)
        self.assertTrue(info["sni"], "no SNI name sent")
        self.assertEqual(set(info["sni"]), {"sni.example.test"}, info["sni"])
        self.assertTrue(info["heads"], "no HTTP request over TLS")
        for head in info["heads"]:
            self.assertTrue(head.startswith("GET /tls HTTP/1.1\r\n"), head)
            self.assertIn("\r\nHost: sni.example.test", head)
            self.assertIn("\r\nUser-Agent: lb-health", head)

        # Verification on, the right CA and name: passes.
        for e in checks("ca", "t2", 3):
            self.assertEqual(e["result"], "passed", e)

        # Verification on, a CA that did not sign it, or the wrong name:
        # down at the first probe, with a TLS/certificate reason.
        for pool in ("badca", "badname"):
            down = lb.wait_event("server_down", timeout=WAIT, pool=pool, server="t2")[0]
            self.assertEqual(down.get("failures"), "1", down)
            reason = down.get("reason", "").lower()
            self.assertTrue(any(w in reason for w in ("tls", "certificate", "verif")),
                            f"{pool}: reason should name TLS or the certificate: {down}")
            for e in checks(pool, "t2", 3):
                self.assertEqual(e["result"], "failed", e)
                self.assertNotIn("timeout", e.get("detail", "").lower(), e)
        self.assertIn("localhost", b.info(t2)["sni"])
        self.assertIn("wrong.example.test", b.info(t2)["sni"])

        # TLS to a plain HTTP port: the handshake fails, long before the
        # timeout (the plain server answers the ClientHello with a 400 and
        # closes).
        down = lb.wait_event("server_down", timeout=WAIT, pool="plain", server="p")[0]
        self.assertIn("tls", down.get("reason", "").lower(), down)
        for e in checks("plain", "p", 3):
            self.assertEqual(e["result"], "failed", e)
            self.assertNotIn("timeout", e.get("detail", "").lower(), e)
            self.assertLess(float(e["duration_ms"]), T_PLAIN * 1000 / 2,
                            f"the failed handshake took too long: {e}")
        self.assertEqual(b.info(plain)["health"], 0, "plain port got a cleartext request")

        for pool, server in (("off", "t1"), ("ca", "t2")):
            self.assertFalse(lb.events("server_down", pool=pool), pool)
        self.assertEqual(len(lb.events("server_down")), 3)
        lb.assert_running()


if __name__ == "__main__":
    harness.main()
