#!/usr/bin/env python3
"""Fails when a log of this test run contains a secret a test gave the bridge.

Every test notes the secrets it uses (harness registerSecret: passwords, tokens, nkey seeds) in
$OUTBOX_TEST_TMP/secrets.txt; the bridges, replicas and servers the tests start write their logs
to the same directory, and meson keeps each suite's output in BUILD/meson-logs. This reads all of
them. Config files, keys and seed files, which hold secrets on purpose, are not logs and are left
out, and so is meson's dump of the environment the suites ran in. A hit is reported by file and
line with the secret masked.

usage: scan_logs.py BUILD_DIR   (run by meson test, suite secrets, after every other suite)
"""
import os
import sys
import unittest

BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else "build"
TMP = os.environ.get("OUTBOX_TEST_TMP") or f"/tmp/outbox-tests-{os.getuid()}"
LOG_SUFFIXES = (".log", ".txt", ".json", ".out", ".err")


def logs():
    for root in (TMP, os.path.join(BUILD, "meson-logs")):
        for dirpath, _, names in os.walk(root):
            for name in names:
                if name.endswith(LOG_SUFFIXES) and name != "secrets.txt":
                    yield os.path.join(dirpath, name)


def masked(secret):
    return secret[:2] + "*" * max(0, len(secret) - 2)


class SecretScan(unittest.TestCase):
    def test_no_log_of_the_run_contains_a_secret_it_used(self):
        path = os.path.join(TMP, "secrets.txt")
        self.assertTrue(os.path.exists(path), f"{path} is missing: no test noted a secret (did the suites run?)")
        with open(path, encoding="utf-8") as f:
            secrets = sorted({line.strip() for line in f if len(line.strip()) >= 6})
        self.assertTrue(secrets, "no secret was noted")
        scanned = 0
        hits = []
        for log in logs():
            scanned += 1
            with open(log, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    # meson's own dump of the environment the suite ran in (the test stack's
                    # settings), not a line the bridge or a test wrote.
                    if line.startswith("Inherited environment:"):
                        continue
                    for secret in secrets:
                        if secret in line:
                            hits.append(f"{log}:{number}: {masked(secret)}")
        self.assertGreater(scanned, 10, "too few logs to scan: the other suites did not run first")
        self.assertEqual(hits, [], "secrets in logs")
        print(f"{len(secrets)} secrets, {scanned} logs: clean")


if __name__ == "__main__":
    unittest.main(verbosity=2)
