#!/usr/bin/env python3
"""One list of commands, said the same everywhere a user reads it: the binary's own (`outbox-bridge
--help`, built from the subcommand table in src/cli/commands.cpp, and each command's --help for
its own subcommands), the block of README, "Commands" and the man page built from it (BUILD_DIR/
outbox-bridge.1, by tools/manpage.py from debian/outbox-bridge.1.in: its SYNOPSIS, and COMMANDS
naming each in bold).

usage: commands_test.py BUILD_DIR   (run by meson test, suite packaging)
"""
import os
import re
import subprocess
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(REPO, "build")
BRIDGE = os.path.join(BUILD, "src", "outbox-bridge")
MAN_PAGE = os.path.join(BUILD, "outbox-bridge.1")
sys.path.insert(0, os.path.join(REPO, "tools"))
import manpage  # noqa: E402  (tools/manpage.py: how the page reads README)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def command_of(words):
    """The command a usage line names: its words up to the first option or argument."""
    command = []
    for word in words:
        if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
            break
        command.append(word)
    return " ".join(command)


def listed_subcommands(help_text):
    """The names CLI11's "Subcommands:" section of a --help lists."""
    _, found, rest = help_text.partition("\nSubcommands:\n")
    names = []
    for line in rest.splitlines() if found else []:
        if not line.startswith("  "):
            break
        names.append(line.split()[0])
    return names


def binary_commands(prefix=()):
    """Every command the binary runs (those without subcommands of their own), asked of it."""
    r = subprocess.run([BRIDGE, *prefix, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"outbox-bridge {' '.join(prefix)} --help exited {r.returncode}: {r.stderr}")
    subs = listed_subcommands(r.stdout)
    if not subs:
        return [" ".join(prefix)]
    return [c for sub in subs for c in binary_commands((*prefix, sub))]


def readme_commands():
    """The commands README.md's "Commands" block shows, one `outbox-bridge COMMAND ...` line each."""
    section = re.search(r"^## Commands\n(.*?)^## ", read(os.path.join(REPO, "README.md")), re.M | re.S)
    block = re.search(r"^```\n(.*?)^```", section.group(1), re.M | re.S) if section else None
    if block is None:
        raise AssertionError('README.md has no code block under "## Commands"')
    lines = [line.split()[1:] for line in block.group(1).splitlines() if line.startswith("outbox-bridge ")]
    return [c for c in (command_of(words) for words in lines) if c]


def man_sections():
    """The man page's sections by name, their troff text with "\\-" read as "-"."""
    parts = re.split(r"^\.SH +(.+)$", read(MAN_PAGE).replace("\\-", "-"), flags=re.M)
    return {name.strip('"'): text for name, text in zip(parts[1::2], parts[2::2])}


def man_synopsis_commands():
    lines = re.findall(r"^\.B +outbox-bridge +(.*)$", man_sections().get("SYNOPSIS", ""), re.M)
    return [command_of(line.split()) for line in lines]


class OneListOfCommands(unittest.TestCase):
    def setUp(self):
        self.commands = binary_commands()
        self.assertIn("run", self.commands, "outbox-bridge --help lists no run: is it the binary?")

    def test_readme_lists_the_commands_the_binary_has(self):
        self.assertEqual(sorted(readme_commands()), sorted(self.commands),
                         'README.md "Commands" against outbox-bridge --help')

    def test_the_man_page_synopsis_lists_the_commands_the_binary_has(self):
        self.assertEqual(sorted(man_synopsis_commands()), sorted(self.commands),
                         "the man page's SYNOPSIS against outbox-bridge --help")

    def test_the_man_page_describes_every_command(self):
        described = man_sections().get("COMMANDS", "")
        for command in self.commands:
            bold = re.search(rf"^\.TP\n\.B +{re.escape(command)}\n\S", described, re.M)
            self.assertIsNotNone(bold, f"the man page's COMMANDS does not say what {command} does")

    def test_the_man_page_generator_reads_what_readme_writes(self):
        block = ("outbox-bridge run          --config FILE     the service\n"
                 "outbox-bridge epoch bump   --config FILE --source S\n"
                 "                                             start a new epoch\n"
                 "                                             (after a restore)\n"
                 "outbox-bridge healthcheck [--url URL]\n"
                 "outbox-bridge --help | --version             and --help on every command\n")
        self.assertEqual(manpage.entries(block), [
            ["run", "--config FILE", "the service"],
            ["epoch bump", "--config FILE --source S", "start a new epoch (after a restore)"],
            ["healthcheck", "[--url URL]", ""],
        ])
        self.assertEqual(manpage.options_line("[--keep 1h]"), r"[\fB\-\-keep\fR \fI1h\fR]")

    def test_the_command_parser_reads_what_the_lists_write(self):
        self.assertEqual(command_of("epoch bump --config FILE".split()), "epoch bump")
        self.assertEqual(command_of("--help | --version".split()), "")
        self.assertEqual(listed_subcommands("x\nSubcommands:\n  a   A\n  b-c  B\n\nmore\n"), ["a", "b-c"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
