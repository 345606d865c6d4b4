#!/usr/bin/env python3
"""What the repository cites, a clone can read. The team's design folder (the contract and its
conventions, kept beside the checkout) is not in the repository: a comment, a document or a
message an operator sees that sends the reader there sends them nowhere. So no tracked file names
it; they cite README, docs/design.md or docs/consumers.md by heading instead, and every heading so
cited exists (a heading, a bold paragraph lead, or the words a paragraph begins with).

usage: citations_test.py   (run by meson test, suite packaging)
"""
import os
import re
import subprocess
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SELF = os.path.relpath(os.path.abspath(__file__), REPO)

# Where the private folder shows: its files by name, and the paths that lead to it. (Spelt in
# pieces, so that this file does not cite what it forbids.)
PRIVATE = re.compile(
    "|".join([r"\bARCHITECTURE" + r"(?:\.md)?\b", r"\bCONVENTIONS" + r"\.md\b", r"\.\./" + r"shared\b",
              r"\bshared" + r"/design\b", r"(?<![\w.-])" + r"seeds/"]))

# Kept as they were written, if the project ever keeps such a record: not citations to follow.
HISTORY = ("docs/history/",)

# Cited by heading: (README, "Heading"), docs/design.md, "Heading", docs/consumers.md ("Heading").
DOCS = {"README": "README.md", "docs/design.md": "docs/design.md", "docs/consumers.md": "docs/consumers.md"}
CITATION = re.compile(r"(?<![\w/.])(?<!its )(README|docs/design\.md|docs/consumers\.md)`?(?:\.md)?`?(?:,| \()\s*\"([^\"]+)\"")
# Only files whose README is the repository's own (the clients have theirs).
CITING = ("src/", "sql/", "tests/", "tools/", "docs/", "README.md", "DEVELOPERS.md")


def tracked():
    """The repository's files: git's list in a checkout, else every file but build output."""
    try:
        out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True, check=True)
        return [p for p in out.stdout.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "node_modules", "packagecache"}
        files = []
        for root, dirs, names in os.walk(REPO):
            dirs[:] = [d for d in dirs if d not in skip and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(root, n), REPO) for n in names]
        return files


def text(path):
    try:
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return None  # binary, or a submodule


def anchors(path):
    """What a citation of the document may name: its headings (a numbered one with or without its
    number), its bold paragraph leads and the first words of its paragraphs, backquotes dropped."""
    body = text(path) or ""
    found = []
    previous = ""
    for line in body.splitlines():
        heading = re.match(r"#+ +(.*)", line)
        if heading:
            found += [heading.group(1), re.sub(r"^\d+[a-z]?\. +", "", heading.group(1))]
        elif not previous.strip() and line.strip():
            found.append(line.strip())
        previous = line
    found += re.findall(r"\*\*([^*]+)\*\*", body)
    return [a.replace("`", "").strip() for a in found]


def citations(body, path):
    """(document, heading) of each citation by heading in `body`, its lines joined (comment
    leaders dropped, C and C++ string literals that continue on the next line joined)."""
    if path.endswith((".cpp", ".h", ".cc")):
        body = re.sub(r'"\s*\n\s*"', "", body.replace('\\"', '"'))
    body = re.sub(r"\s*\n\s*(?://+|#+|--|\*)?\s*", " ", body)
    return [(m.group(1), m.group(2).replace("`", "").strip()) for m in CITATION.finditer(body)]


class Citations(unittest.TestCase):
    maxDiff = None

    def test_no_file_cites_the_private_design_folder(self):
        offenders = []
        for path in tracked():
            if path == SELF or path.startswith(HISTORY):
                continue
            body = text(path)
            if body is None:
                continue
            for number, line in enumerate(body.splitlines(), 1):
                if PRIVATE.search(line):
                    offenders.append(f"{path}:{number}: {line.strip()}")
        self.assertEqual(offenders, [], "cite README, docs/design.md or docs/consumers.md by heading instead "
                         "(a clone has no design folder):\n" + "\n".join(offenders))

    def test_every_heading_cited_exists(self):
        known = {doc: anchors(path) for doc, path in DOCS.items()}
        missing = []
        for path in tracked():
            if path == SELF or not path.startswith(CITING) or path.startswith(HISTORY):
                continue
            body = text(path)
            if body is None:
                continue
            for doc, heading in citations(body, path):
                if not heading or not any(a.startswith(heading) for a in known[doc]):
                    missing.append(f'{path}: {doc}, "{heading}"')
        self.assertEqual(missing, [], "cited headings the documents do not have:\n" + "\n".join(missing))

    def test_the_newcomers_map_names_files_and_code_that_exist(self):
        """docs/design.md's "A map for a newcomer": every file it names exists, and every function,
        class or member it names (Scanner::next, readNew, AckWindow, ...) is defined or declared in
        src/ — a rename that leaves the map behind fails here."""
        body = text("docs/design.md")
        block = re.search(r"## A map for a newcomer[^\n]*\n+```\n(.*?)```", body, re.S)
        self.assertIsNotNone(block, "docs/design.md has no map")
        block = block.group(1)
        sources = {p: text(p) or "" for p in tracked() if p.startswith("src/") and p.endswith((".cpp", ".h"))}
        missing = []
        for name in set(re.findall(r"(?:src/)?[\w/]+\.(?:cpp|h)\b", block)) - {"nats.h", "mysql.h"}:  # the libraries'
            if not (name in sources or any(p.endswith("/" + name) for p in sources)):
                missing.append(f"file {name}")
        # Code: a qualified name, a camel-case one (readNew, AckWindow), a word an arrow joins
        # (→ count →) or the word after a file's name (publisher.cpp  publish:), but prose; its
        # last part must be defined or declared somewhere in src/.
        words = set(re.findall(r"\b[A-Za-z_]\w*::\w+\b", block))
        words |= {w for w in re.findall(r"\b[A-Za-z_]\w*\b", block) if re.search(r"[a-z][A-Z]", w)}
        words |= set(re.findall(r"→\s+([a-z]\w*)\b", block))
        words |= set(re.findall(r"\.(?:cpp|h):?\s+([a-z]\w*)\b", block))
        words -= {"in", "writes", "reads", "one", "and", "the"}
        for word in sorted(words):
            last = word.split("::")[-1]
            pattern = re.compile(r"\b(?:class|struct)\s+" + last + r"\b|\b" + last + r"\s*\(")
            if not any(pattern.search(code) for code in sources.values()):
                missing.append(word)
        self.assertEqual(missing, [], "docs/design.md's map names what src/ does not have:\n" + "\n".join(missing))

if __name__ == "__main__":
    unittest.main(verbosity=2)
