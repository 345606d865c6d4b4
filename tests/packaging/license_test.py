#!/usr/bin/env python3
"""One licence, said the same everywhere a user or a packager reads it: LICENSE at the root (the
licence's own text), meson.build's project(), the TypeScript client's package.json (and the root
entry npm records in its lock file), and debian/copyright (DEP-5, pointing at Debian's copy).

usage: license_test.py   (run by meson test, suite packaging)
"""
import json
import os
import re
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON_LICENSES = "/usr/share/common-licenses"

# The first lines of each licence's text, by SPDX identifier: what LICENSE says it is.
TEXTS = {"Apache-2.0": re.compile(r"^\s*Apache License\s+Version 2\.0, January 2004\s")}


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def license_file():
    """The SPDX identifier of the licence LICENSE holds, or None."""
    text = read("LICENSE")
    return next((spdx for spdx, start in TEXTS.items() if start.match(text)), None)


def meson_license():
    m = re.search(r"\bproject\((?:[^()]|\([^()]*\))*?\blicense\s*:\s*'([^']+)'", read("meson.build"))
    return m.group(1) if m else None


def copyright_paragraphs():
    """debian/copyright's paragraphs (DEP-5), each {field: value}; continuation lines joined."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", read("debian", "copyright").strip()):
        fields, name = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and name:
                fields[name] += "\n" + line.strip()
            else:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
        paragraphs.append(fields)
    return paragraphs


class OneLicence(unittest.TestCase):
    def test_license_holds_the_licence_meson_build_names(self):
        self.assertTrue(os.path.isfile(os.path.join(REPO, "LICENSE")), "no LICENSE at the repository's root")
        spdx = meson_license()
        self.assertIsNotNone(spdx, "meson.build's project() names no license")
        self.assertEqual(license_file(), spdx, "LICENSE is not the text of the licence meson.build names")
        debian_copy = os.path.join(COMMON_LICENSES, spdx)
        if os.path.exists(debian_copy):  # base-files: on every Debian machine
            with open(debian_copy, encoding="utf-8") as f:
                self.assertEqual(read("LICENSE"), f.read(), f"LICENSE differs from {debian_copy}")

    def test_the_typescript_client_names_the_same_licence(self):
        spdx = meson_license()
        package = json.loads(read("clients", "typescript", "package.json"))
        self.assertEqual(package.get("license"), spdx, "clients/typescript/package.json")
        lock = json.loads(read("clients", "typescript", "package-lock.json"))
        root = lock.get("packages", {}).get("", {})
        self.assertEqual(root.get("license"), spdx, "the root entry of clients/typescript/package-lock.json")

    def test_debian_copyright_names_the_same_licence(self):
        spdx = meson_license()
        paragraphs = copyright_paragraphs()
        self.assertIn("copyright-format/1.0", paragraphs[0].get("Format", ""), "debian/copyright is not DEP-5")
        files = [p for p in paragraphs if "Files" in p]
        self.assertTrue(files, "debian/copyright has no Files paragraph")
        self.assertEqual({p.get("License", "").split("\n")[0] for p in files}, {spdx},
                         "debian/copyright's Files paragraphs must name the licence meson.build names")
        standalone = [p for p in paragraphs if "Files" not in p and p.get("License", "").startswith(spdx + "\n")]
        self.assertEqual(len(standalone), 1, f"debian/copyright needs one License: {spdx} paragraph with its text")
        self.assertIn(os.path.join(COMMON_LICENSES, spdx), standalone[0]["License"],
                      "debian/copyright must point at Debian's copy of the licence")


if __name__ == "__main__":
    unittest.main(verbosity=2)
