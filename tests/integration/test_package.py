"""What an operator installs: the Debian package the build makes (cpack -G
DEB) and cmake --install.

- the package holds exactly the binary, the man page, the unit, the
  sysusers file, the config (mode 0640: it holds the admin token; a
  conffile), the commented example, the alert rules and the dashboard
  (deploy/prometheus, deploy/grafana); it depends on Debian's package of
  every shared library the binary needs;
- unpacked into a clean root, the installed lb answers -v and checks the
  installed config with -t; `man -l` renders lb(8);
- the installed unit names the installed binary and config, and
  `systemd-analyze security` scores it below 3 (OK);
- cmake --install --prefix DIR writes the same, with the unit naming
  DIR's paths."""

import glob
import os
import re
import shutil
import stat
import subprocess
import sys

import harness
from harness import LbTestCase

BUILD = os.path.dirname(harness.LB_BIN)
FILES = {"./etc/lb/lb.ini", "./usr/lib/systemd/system/lb.service", "./usr/lib/sysusers.d/lb.conf",
         "./usr/sbin/lb", "./usr/share/doc/lb/examples/lb.ini", "./usr/share/man/man8/lb.8.gz",
         "./usr/share/doc/lb/examples/lb.rules.yml", "./usr/share/doc/lb/examples/lb.json"}
WHY_NOT = next((f"needs {t}" for t in ("cpack", "dpkg-deb", "man", "systemd-analyze")
                if shutil.which(t) is None), None)
if harness.SANITIZED:   # a package is made of the optimised build, whose libraries it names
    WHY_NOT = "a sanitized build is not packaged"


def run(*args, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=120, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def exposure(unit):
    """systemd-analyze security's overall score of a unit file."""
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", unit],
                         capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", out)
    assert m, out[-500:]
    return float(m.group(1))


@harness.skip_if(WHY_NOT is not None, WHY_NOT or "", ci_accepts=harness.SANITIZED)
class PackageTest(LbTestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = harness.make_tmpdir()
        run("cpack", "-G", "DEB", "-B", cls.dir, "--config",
            os.path.join(BUILD, "CPackConfig.cmake"), cwd=BUILD)
        debs = glob.glob(os.path.join(cls.dir, "*.deb"))
        assert len(debs) == 1, debs
        cls.deb = debs[0]

    def test_contents_and_dependencies(self):
        self.assertEqual(run("dpkg-deb", "-f", self.deb, "Package").strip(), "lb")
        listing = run("dpkg-deb", "-c", self.deb).splitlines()
        files = {line.split()[-1]: line.split()[0] for line in listing
                 if not line.startswith("d")}
        print("measured: package files:", " ".join(sorted(files)), file=sys.stderr)
        self.assertEqual(set(files), FILES)
        self.assertEqual(files["./etc/lb/lb.ini"], "-rw-r-----")
        self.assertEqual(files["./usr/sbin/lb"], "-rwxr-xr-x")
        self.assertEqual(run("dpkg-deb", "-I", self.deb, "conffiles").split(), ["/etc/lb/lb.ini"])
        # every library the binary needs, by its Debian package
        depends = run("dpkg-deb", "-f", self.deb, "Depends")
        named = set(re.findall(r"([a-z0-9][a-z0-9.+-]+)(?: \([^)]*\))?", depends))
        for line in run("ldd", harness.LB_BIN).splitlines():
            m = re.search(r"=> (/\S+)", line)
            if not m or "libasan" in m.group(1) or "libubsan" in m.group(1) \
                    or "libtsan" in m.group(1):
                continue
            path = os.path.realpath(m.group(1))
            owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if owner.returncode != 0:       # merged /usr: the package names /lib's path
                owner = subprocess.run(["dpkg", "-S", m.group(1)], capture_output=True,
                                       text=True)
            pkg = owner.stdout.split(":")[0]
            self.assertIn(pkg, named, f"{m.group(1)} is in {pkg}, not in Depends: {depends}")

    def test_installed_files_work(self):
        root = os.path.join(self.dir, "root")
        run("dpkg-deb", "-x", self.deb, root)
        lb = os.path.join(root, "usr/sbin/lb")
        self.assertRegex(run(lb, "-v"), r"^lb \d+\.\d+\.\d+\n$")
        self.assertEqual(run(lb, "-t", "-c", os.path.join(root, "etc/lb/lb.ini")),
                         "configuration OK\n")
        page = run("man", "-l", os.path.join(root, "usr/share/man/man8/lb.8.gz"),
                   env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"))
        for word in ("SYNOPSIS", "--takeover", "SIGUSR2", "control_socket", "GET /ready"):
            self.assertIn(word, page)
        unit = os.path.join(root, "usr/lib/systemd/system/lb.service")
        with open(unit) as f:
            text = f.read()
        for line in ("ExecStart=/usr/sbin/lb -c ${CONFIG}", "ExecReload=/usr/sbin/lb -r -c ${CONFIG}",
                     "Environment=CONFIG=/etc/lb/lb.ini", "Type=notify", "User=lb"):
            self.assertIn(f"\n{line}\n", text)
        score = exposure(unit)
        print(f"measured: systemd-analyze security: {score}", file=sys.stderr)
        self.assertLess(score, 3.0)

    def test_cmake_install(self):
        prefix = os.path.join(self.dir, "inst")
        run("cmake", "--install", BUILD, "--prefix", prefix)
        with open(os.path.join(prefix, "lib/systemd/system/lb.service")) as f:
            text = f.read()
        self.assertIn(f"\nExecStart={prefix}/sbin/lb -c ${{CONFIG}}\n", text)
        self.assertIn(f"\nEnvironment=CONFIG={prefix}/etc/lb/lb.ini\n", text)
        conf = os.path.join(prefix, "etc/lb/lb.ini")
        self.assertEqual(stat.S_IMODE(os.stat(conf).st_mode), 0o640)
        self.assertEqual(run(os.path.join(prefix, "sbin/lb"), "-t", "-c", conf),
                         "configuration OK\n")
        self.assertTrue(os.path.exists(os.path.join(prefix, "share/man/man8/lb.8.gz")))


if __name__ == "__main__":
    harness.main()
