#!/usr/bin/env python3
"""tools/count-tests.py, which turns each group's meson testlog.json into the counts behind a run's
"N passed, N failed" line, and names what failed at the run's end: Boost.Test's cases, Python
unittest's, a crashed executable as one failure, and the failed checks a test printed.

usage: test_counts_test.py   (run by meson test, suite packaging)
"""
import json
import os
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COUNT = os.path.join(REPO, "tools", "count-tests.py")

BOOST_FAILED = """Entering test case "a_trickle"
../tests/unit/relay_test.cpp(176): error: in "a_trickle": check took->count() >= 490 has failed [12 ms]
Leaving test case "a_trickle"
Test module "relay" has failed with:
  33 test cases out of 34 passed
  1 test case out of 34 failed
"""


def count(entries, failures=None):
    """What count-tests.py prints for a testlog of `entries` (and writes to `failures`)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as log:
        log.write("".join(json.dumps(e) + "\n" for e in entries))
    try:
        args = [COUNT, log.name] + ([failures] if failures else [])
        out = subprocess.run(["python3"] + args, check=True, capture_output=True, text=True).stdout
        return tuple(int(n) for n in out.split())
    finally:
        os.unlink(log.name)


class Counts(unittest.TestCase):
    def test_boost_cases_are_counted_one_by_one(self):
        self.assertEqual(count([{"name": "relay", "result": "FAIL", "stdout": BOOST_FAILED},
                                {"name": "lease", "result": "OK",
                                 "stdout": "*** No errors detected\n  7 test cases out of 7 passed\n"}]),
                         (40, 1, 0))

    def test_python_unittest_summaries_are_counted(self):
        out = "Ran 12 tests in 0.3s\n\nFAILED (failures=1, errors=1, skipped=2)\n"
        self.assertEqual(count([{"name": "packages", "result": "FAIL", "stdout": out}]), (8, 2, 2))

    def test_an_executable_that_died_without_a_report_is_one_failure(self):
        self.assertEqual(count([{"name": "crash", "result": "TIMEOUT", "stdout": "Entering test case"}]), (0, 1, 0))

    def test_a_crash_after_every_case_passed_is_one_more_failure(self):
        out = "  3 test cases out of 3 passed\n"
        self.assertEqual(count([{"name": "exit", "result": "FAIL", "stderr": out}]), (3, 1, 0))

    def test_the_failed_checks_are_named_and_a_passed_run_names_none(self):
        with tempfile.TemporaryDirectory() as d:
            failures = os.path.join(d, "failures")
            count([{"name": "lease", "result": "OK", "stdout": "  7 test cases out of 7 passed\n"}], failures)
            self.assertFalse(os.path.exists(failures))
            count([{"name": "relay", "result": "FAIL", "stdout": BOOST_FAILED},
                   {"name": "typescript_client", "result": "FAIL",
                    "stdout": "ok 1 - bootstraps\nnot ok 2 - verifies past the watermark\n"}], failures)
            with open(failures, encoding="utf-8") as f:
                text = f.read()
        self.assertIn('relay: FAIL\n  ../tests/unit/relay_test.cpp(176): error: in "a_trickle": check', text)
        self.assertIn("typescript_client: FAIL\n  not ok 2 - verifies past the watermark", text)
        self.assertNotIn("ok 1 - bootstraps", text)

    def test_python_unittest_errors_are_named(self):
        out = ("test_man_page (__main__.Commands.test_man_page) ... ERROR\n"
               "ERROR: test_man_page (__main__.Commands.test_man_page)\nTraceback (most recent call last):\n"
               "FileNotFoundError: [Errno 2] No such file or directory: 'build/outbox-bridge.1'\n"
               "Ran 3 tests in 0.1s\n\nFAILED (errors=1)\n")
        with tempfile.TemporaryDirectory() as d:
            failures = os.path.join(d, "failures")
            self.assertEqual(count([{"name": "commands", "result": "FAIL", "stdout": out}], failures), (2, 1, 0))
            with open(failures, encoding="utf-8") as f:
                text = f.read()
        self.assertIn("commands: FAIL\n  ERROR: test_man_page (__main__.Commands.test_man_page)\n"
                      "  FileNotFoundError: [Errno 2] No such file or directory: 'build/outbox-bridge.1'", text)
        self.assertNotIn("... ERROR", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
