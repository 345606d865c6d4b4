#!/usr/bin/env python3
"""The Debian package, as an operator installs it.

Builds it with dpkg-buildpackage from a copy of the repository's tracked files (debian/ is the
packaging), then: lintian passes (each override justified in debian/), its file list is the one
README's "Install on Debian/Ubuntu" shows, the example config is a 0640 conffile, the postinst makes
the system user, the unit files pass `systemd-analyze verify`; and the installed layout runs:
unpacked with dpkg -x into a temporary root (the machine's own packages are not touched), its
binary with its example config — the password from a credentials directory, as systemd's
LoadCredential= gives it, the rest pointed at the test stack by OUTBOX_BRIDGE_* variables —
passes check-config, migrate, runs, and answers healthcheck.

The package is built without optimisation or debug information (noopt, CXXFLAGS=-O0) and through ccache
when it is installed, at nice 10: what is tested is the packaging, and a full -O2 build would add
minutes to every run. `dpkg-buildpackage -b -us -uc` from the repository builds the real one.

usage: package_test.py BUILD_ROOT   (run by meson test, suite deploy, with the stack's environment)
"""
import os
import random
import re
import shutil
import subprocess
import sys
import time
import unittest

from deploy_support import REPO, env, free_port, sql

BUILD_ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(REPO, "build"))
WORK = os.path.join(BUILD_ROOT, "deb")
STAGE = os.path.join(WORK, "src")


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def build_package():
    """dpkg-buildpackage in a copy of the tracked files; the path of the .deb."""
    tracked = run(["git", "-C", REPO, "ls-files", "-z"], check=True).stdout.split("\0")
    shutil.rmtree(STAGE, ignore_errors=True)
    for name in (n for n in tracked if n):
        source = os.path.join(REPO, name)
        if not os.path.isfile(source):
            continue  # deleted in the work tree and not yet committed
        target = os.path.join(STAGE, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)
    for old in os.listdir(WORK):
        if old.endswith((".deb", ".changes", ".buildinfo")):
            os.remove(os.path.join(WORK, old))
    # -O0 and no debug info: half the compile time; no _FORTIFY_SOURCE, which needs optimisation.
    # noautodbgsym: with no debug information there is nothing for a -dbgsym package to hold.
    build_env = {**os.environ, "DEB_BUILD_OPTIONS": "parallel=2 noopt noautodbgsym", "DEB_CXXFLAGS_SET": "-O0",
                 "DEB_CPPFLAGS_SET": "",
                 "CCACHE_DIR": os.path.join(WORK, "ccache"), "CCACHE_BASEDIR": STAGE}
    started = time.monotonic()
    # At nice 10: tools/test runs this compile beside other lanes' tests, whose timings come first.
    out = run(["nice", "-n", "10", "dpkg-buildpackage", "-b", "-us", "-uc"], cwd=STAGE, env=build_env)
    with open(os.path.join(WORK, "build.log"), "w", encoding="utf-8") as f:
        f.write(out.stdout + out.stderr)
    if out.returncode != 0:
        raise RuntimeError(f"dpkg-buildpackage failed ({WORK}/build.log):\n{(out.stdout + out.stderr)[-4000:]}")
    print(f"package built in {time.monotonic() - started:.0f} s", file=sys.stderr)
    debs = [f for f in os.listdir(WORK) if re.fullmatch(r"outbox-bridge_[^_]+_[a-z0-9]+\.deb", f)]
    if len(debs) != 1:
        raise RuntimeError(f"expected one outbox-bridge .deb in {WORK}, found {debs}")
    return os.path.join(WORK, debs[0])


def readme_file_list():
    """The paths README's "Install on Debian/Ubuntu" shows in its ```text block of the package."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Install on Debian/Ubuntu"):]
    block = re.search(r"The package installs:\n\n```text\n(.*?)```", section, re.S)
    if not block:
        raise AssertionError("README's Install on Debian/Ubuntu has no ```text block of the package's files")
    return sorted(line.split()[0] for line in block.group(1).splitlines() if line.strip())


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(WORK, exist_ok=True)
        cls.deb = build_package()
        cls.root = os.path.join(WORK, "root")
        shutil.rmtree(cls.root, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-x", cls.deb, cls.root], check=True)
        cls.control = os.path.join(WORK, "control")
        shutil.rmtree(cls.control, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-e", cls.deb, cls.control], check=True)

    def test_lintian_passes(self):
        changes = [os.path.join(WORK, f) for f in os.listdir(WORK) if f.endswith(".changes")][0]
        out = run(["lintian", "--fail-on", "error,warning", "--display-info", changes])
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        for line in out.stdout.splitlines():
            self.assertFalse(line.startswith(("E:", "W:")), line)

    def test_the_file_list_is_the_readme_s(self):
        listing = run(["dpkg-deb", "-c", self.deb], check=True).stdout.splitlines()
        files = sorted(line.split()[-1].lstrip(".") for line in listing if not line.startswith("d"))
        self.assertEqual(files, readme_file_list())
        config = [line for line in listing if line.endswith("/etc/outbox-bridge/outbox.toml")][0]
        self.assertTrue(config.startswith("-rw-r----- "), config)
        with open(os.path.join(self.control, "conffiles"), encoding="utf-8") as f:
            self.assertIn("/etc/outbox-bridge/outbox.toml", f.read().split())
        with open(os.path.join(self.control, "postinst"), encoding="utf-8") as f:
            postinst = f.read()
        self.assertIn("systemd-sysusers", postinst)
        self.assertIn("chgrp outbox-bridge /etc/outbox-bridge/outbox.toml", postinst)
        self.assertLess(postinst.index("systemd-sysusers"), postinst.index("chgrp outbox-bridge"))
        with open(os.path.join(self.root, "etc", "outbox-bridge", "outbox.toml"), encoding="utf-8") as f:
            example = f.read()
        self.assertNotRegex(example, r"(?m)^\s*password\s*=", "the example config holds no secret")

    def test_the_docker_image_installs_the_package_s_binary_and_config(self):
        with open(os.path.join(REPO, "tools", "docker", "Dockerfile"), encoding="utf-8") as f:
            copies = [line.split()[1:] for line in f if line.startswith("COPY ")]
        self.assertIn(["--from=build", "/build/src/outbox-bridge", "/usr/bin/"], copies)
        self.assertIn(["debian/outbox.toml", "/etc/outbox-bridge/outbox.toml"], copies)
        for path in ("usr/bin/outbox-bridge", "etc/outbox-bridge/outbox.toml"):
            self.assertTrue(os.path.isfile(os.path.join(self.root, path)), path)

    def test_the_unit_files_verify(self):
        units = os.path.join(self.root, "lib", "systemd", "system")
        names = sorted(os.listdir(units))
        self.assertEqual(names, ["outbox-bridge-prune.service", "outbox-bridge-prune.timer", "outbox-bridge.service"])
        # Verified in a root that has the package's files and the machine's own units (the targets
        # they are ordered against): ExecStart= must name a binary there.
        verify_root = os.path.join(WORK, "verify-root")
        shutil.rmtree(verify_root, ignore_errors=True)
        shutil.copytree("/lib/systemd/system", os.path.join(verify_root, "lib", "systemd", "system"), symlinks=True)
        shutil.copytree(self.root, verify_root, symlinks=True, dirs_exist_ok=True)
        out = run(["systemd-analyze", "verify", f"--root={verify_root}", "--recursive-errors=no"]
                  + [os.path.join(verify_root, "lib", "systemd", "system", n) for n in names])
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(out.stdout + out.stderr, "", "systemd-analyze verify says nothing of a good unit")
        for service in ("outbox-bridge.service", "outbox-bridge-prune.service"):
            with open(os.path.join(units, service), encoding="utf-8") as f:
                unit = f.read()
            for line in ("User=outbox-bridge", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
                         "PrivateTmp=yes", "LoadCredential=db-password:/etc/outbox-bridge/credentials/db-password",
                         "Environment=OUTBOX_BRIDGE_CONFIG=/etc/outbox-bridge/outbox.toml"):
                self.assertIn(line, unit.splitlines(), f"{service}: {line}")
            # systemd's own exposure score of the sandbox (0 = locked down, 10 = none).
            score = run(["systemd-analyze", "security", "--offline=yes", f"--root={verify_root}",
                         os.path.join(verify_root, "lib", "systemd", "system", service)])
            found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", score.stdout + score.stderr)
            self.assertIsNotNone(found, score.stdout + score.stderr)
            self.assertLessEqual(float(found.group(1)), 2.0, score.stdout)
            print(f"{service}: systemd-analyze security {found.group(1)}", file=sys.stderr)
        with open(os.path.join(units, "outbox-bridge-prune.timer"), encoding="utf-8") as f:
            self.assertIn("OnCalendar=*:0/10", f.read().splitlines())

    def test_the_installed_layout_runs_with_the_example_config(self):
        suffix = "%06x" % random.randrange(1 << 24)
        database = f"t_deb_{suffix}"
        sql(None, f"CREATE DATABASE {database}")
        sql(database, "CREATE TABLE accounts (id BIGINT PRIMARY KEY, display_name VARCHAR(64))")
        credentials = os.path.join(WORK, f"credentials-{suffix}")
        os.makedirs(credentials, mode=0o700)
        with open(os.path.join(credentials, "db-password"), "w", encoding="utf-8") as f:
            f.write(env("OUTBOX_TEST_MYSQL_PASSWORD") + "\n")
        port = free_port()
        binary = os.path.join(self.root, "usr", "bin", "outbox-bridge")
        config = os.path.join(self.root, "etc", "outbox-bridge", "outbox.toml")
        # The example config as it is; what differs on this machine comes by environment, as a
        # drop-in's Environment= would give it.
        run_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OUTBOX_BRIDGE_")},
            "CREDENTIALS_DIRECTORY": credentials,
            "OUTBOX_BRIDGE_CONFIG": config,
            "OUTBOX_BRIDGE_NATS_URL": env("OUTBOX_TEST_NATS_URL"),
            "OUTBOX_BRIDGE_HTTP_LISTEN": f"127.0.0.1:{port}",
            "OUTBOX_BRIDGE_SOURCE_ACCOUNT_DSN": f"mysql://{env('OUTBOX_TEST_MYSQL_USER')}@"
                                                f"{env('OUTBOX_TEST_MYSQL_HOST')}:{env('OUTBOX_TEST_MYSQL_PORT')}/{database}",
            "OUTBOX_BRIDGE_SOURCE_ACCOUNT_STREAM": f"CONTROL_DEB{suffix.upper()}",
            "OUTBOX_BRIDGE_SOURCE_ACCOUNT_SUBJECT_PREFIX": f"control.deb{suffix}",
        }
        bridge = None
        try:
            for command in (["check-config"], ["migrate"]):
                out = run([binary] + command, env=run_env)
                self.assertEqual(out.returncode, 0, f"{command}: {out.stdout}{out.stderr}")
            self.assertNotIn(env("OUTBOX_TEST_MYSQL_PASSWORD"), run([binary, "check-config"], env=run_env).stdout)
            # Outside a unit with LoadCredential= the example says what is missing.
            outside = run([binary, "check-config"], env={k: v for k, v in run_env.items() if k != "CREDENTIALS_DIRECTORY"})
            self.assertEqual(outside.returncode, 2)
            self.assertIn("source.account.password_file", outside.stderr)
            with open(os.path.join(WORK, f"bridge-{suffix}.log"), "w", encoding="utf-8") as log:
                bridge = subprocess.Popen([binary, "run"], env=run_env, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 30
            while run([binary, "healthcheck"], env=run_env).returncode != 0:
                self.assertLess(time.monotonic(), deadline, "healthcheck never passed")
                self.assertIsNone(bridge.poll(), "the bridge exited")
                time.sleep(0.3)
            sql(database, "INSERT INTO accounts VALUES (1, 'Packaged'); INSERT INTO account_control_outbox "
                          "(entity_type, entity_key, op, payload) SELECT 'account', id, 'upsert', "
                          "JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts")
            deadline = time.monotonic() + 30
            while sql(database, "SELECT published_through FROM outbox_source_state WHERE source = 'account'") != "1":
                self.assertLess(time.monotonic(), deadline, "the row was not published")
                time.sleep(0.2)
        finally:
            if bridge is not None:
                bridge.terminate()
                self.assertEqual(bridge.wait(20), 0)
            sql(None, f"DROP DATABASE IF EXISTS {database}")
            shutil.rmtree(credentials, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
