#!/usr/bin/env python3
"""Counts test cases in a meson testlog.json: prints "PASSED FAILED SKIPPED".

Reads Boost.Test's short report and Python unittest's summary ("Ran N tests" then "OK" or
"FAILED (failures=F, errors=E, skipped=S)"). A test executable that ended without a report (a
crash, a timeout) counts as one failure.
"""
import json
import re
import sys

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
