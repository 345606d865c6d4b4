#!/usr/bin/env python3
"""Snapshot checksum test vectors, computed independently of the C++ code with hashlib.

docs/consumers.md, "4. The checksum": canonical(record) = for each column in order, 0x00 for NULL,
else 0x01, the value's byte length as 4-byte big-endian, then its UTF-8 text. h(record) = the first
8 bytes of SHA-256(canonical) as a big-endian uint64. checksum = "sha256-sum64:" + 16 lower-case hex
digits of the sum of h over all records, mod 2^64.

Run: python3 tests/vectors/make_checksum_vectors.py > tests/vectors/checksum_vectors.json
"""
import hashlib
import json
import struct


def canonical(record):
    out = b""
    for value in record:
        if value is None:
            out += b"\x00"
        else:
            data = value.encode("utf-8")
            out += b"\x01" + struct.pack(">I", len(data)) + data
    return out


def h(record):
    return struct.unpack(">Q", hashlib.sha256(canonical(record)).digest()[:8])[0]


def checksum(records):
    return "sha256-sum64:%016x" % (sum(h(r) for r in records) % (1 << 64))


SETS = {
    "empty": [],
    "one": [["42", "Acme"]],
    "accounts": [["1", "Acme"], ["2", "Globex"], ["3", "Initech"]],
    "nulls_and_empty": [["7", None], ["8", ""], [None, None]],
    "unicode": [["1", "Zürich ☃ 東京"], ["2", "emoji 😀"], ["3", "quote \" backslash \\ tab \t nl \n"]],
    "numbers": [["-5", "0.25", "1e3"], ["18446744073709551615", "3.14159", "0"]],
    "many": [[str(i), "name-%d" % i] for i in range(1000)],
}

print(json.dumps({
    "sets": {
        name: {
            "records": records,
            "hashes": ["%016x" % h(r) for r in records],
            "checksum": checksum(records),
        }
        for name, records in SETS.items()
    }
}, indent=1, ensure_ascii=False))
