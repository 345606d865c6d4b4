#!/usr/bin/env python3
"""Counts test cases in a meson testlog.json: prints "PASSED FAILED SKIPPED".

Reads Boost.Test's short report and Python unittest's summary ("Ran N tests" then "OK" or
"FAILED (failures=F, errors=E, skipped=S)"). A test executable that ended without a report (a
crash, a timeout) counts as one failure.

With a second argument, appends to that file what each failed test printed about its failure
(Boost.Test's "error: in" lines, TAP's "not ok", Go's "--- FAIL", Python unittest's "ERROR:" and
"FAIL:" and the exceptions they end with, at most 20 lines a test), so the run's end can name the
failed checks: meson's error log keeps only the last 100 lines of a test that may print thousands.
"""
import json
import re
import sys

FAILURE = re.compile(r'(fatal )?error: in "|^\s*not ok |--- FAIL|AssertionError|^\s*✖ |^(ERROR|FAIL): |^\w*Error: ')
failures = []

passed = failed = skipped = 0
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    entry = json.loads(line)
    result = entry.get("result", "")
    out = (entry.get("stdout") or "") + (entry.get("stderr") or "")
    p = sum(int(n) for n in re.findall(r"(\d+) test cases? out of \d+ passed", out))
    f = sum(int(n) for n in re.findall(r"(\d+) test cases? out of \d+ failed", out))
    s = sum(int(n) for n in re.findall(r"(\d+) test cases? out of \d+ skipped", out))
    ran = re.search(r"^Ran (\d+) tests? in ", out, re.M)
    if ran:  # Python unittest
        bad = sum(int(n) for n in re.findall(r"(?:failures|errors|unexpected successes)=(\d+)", out))
        s = sum(int(n) for n in re.findall(r"skipped=(\d+)", out))
        p, f = int(ran.group(1)) - bad - s, bad
    if result not in ("OK", "EXPECTEDFAIL", "SKIP"):
        lines = [l.strip() for l in out.splitlines() if FAILURE.search(l)][:20]
        failures.append(f"{entry.get('name', '?')}: {result}" + "".join(f"\n  {l}" for l in lines))
    if result == "SKIP":
        skipped += 1
        continue
    if p + f == 0:
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        else:
            failed += 1
        continue
    passed += p
    failed += f
    skipped += s
    if result not in ("OK", "EXPECTEDFAIL") and f == 0:
        failed += 1  # the executable failed after its cases passed (crash at exit, timeout)
print(passed, failed, skipped)
if len(sys.argv) > 2 and failures:
    with open(sys.argv[2], "a", encoding="utf-8") as f:
        f.write("\n".join(failures) + "\n")
