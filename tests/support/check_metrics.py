#!/usr/bin/python3
"""Parses a /metrics page with the Prometheus Python client's own parser (Debian's
python3-prometheus-client) and checks what scrapers rely on: every family typed, each sample name
in exactly one family. Prints one line per family: NAME TYPE SAMPLES SOURCES(comma-separated).

usage: check_metrics.py FILE   exit 0 when the page is well-formed, 1 with the reasons otherwise
"""
import sys
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

text = open(sys.argv[1], encoding="utf-8").read()
problems = []
families = list(text_string_to_metric_families(text))
owners = defaultdict(set)
for family in families:
    if family.type in ("unknown", "untyped"):
        problems.append(f"family {family.name} has no TYPE")
    for sample in family.samples:
        owners[sample.name].add(family.name)
names = [f.name for f in families]
for name in sorted(set(names)):
    if names.count(name) > 1:
        problems.append(f"family {name} appears {names.count(name)} times (its samples are not grouped)")
for sample, fams in sorted(owners.items()):
    if len(fams) > 1:
        problems.append(f"sample {sample} belongs to {len(fams)} families")
for family in families:
    sources = sorted({s.labels.get("source", "") for s in family.samples} - {""})
    print(family.name, family.type, len(family.samples), ",".join(sources) or "-")
for p in problems:
    print("PROBLEM:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
