#!/usr/bin/env python3
"""Writes the man page from its template and README's "Commands" block, so that a command is
listed in one place a person writes (README) besides the binary's own table (src/cli/commands.cpp),
and the packaging test `commands` holds README to the binary.

usage: manpage.py TEMPLATE README OUTPUT

The template (debian/outbox-bridge.1.in) is troff with two lines the script fills:
  @SYNOPSIS@   one entry a command: `.B outbox-bridge COMMAND`, then its options
  @COMMANDS@   one `.TP` entry a command: its name in bold, then what README says it does
The block's lines are `outbox-bridge COMMAND OPTIONS   WHAT IT DOES`, three spaces or more before
what it does, which may go on over the lines below, indented; a line without a command (`--help |
--version`) is left to the template.
"""
import re
import sys


def commands_block(readme):
    section = re.search(r"^## Commands\n(.*?)^## ", readme, re.M | re.S)
    block = re.search(r"^```\n(.*?)^```", section.group(1), re.M | re.S) if section else None
    if block is None:
        raise SystemExit('manpage.py: README.md has no code block under "## Commands"')
    return block.group(1)


def entries(block):
    """(command, options, what it does) for each `outbox-bridge COMMAND` line of the block."""
    found = []
    for line in block.splitlines():
        if line.startswith("outbox-bridge "):
            match = re.match(r"((?:[a-z][a-z0-9-]*(?: +|$))+)(.*)$", line[len("outbox-bridge "):])
            if match is None:
                found.append(None)  # `--help | --version`: the template says it
                continue
            options, _, what = re.split(r"( {3,})", match.group(2).strip() + "   ", maxsplit=1)
            found.append([" ".join(match.group(1).split()), options, what.strip()])
        elif line.strip() and found and found[-1] is not None:
            found[-1][2] = (found[-1][2] + " " + line.strip()).strip()
    return [e for e in found if e is not None]


def troff(text):
    """Text as troff sees it: hyphens of options and backslashes escaped."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def options_line(options):
    """README's option syntax in troff: flags bold, what they take italic, the rest roman."""
    out = []
    for token in re.findall(r"[\[\]|]|[^\s\[\]|]+", options):
        if token in "[]|":
            out.append(token)
        elif token.startswith("-"):
            out.append(rf"\fB{troff(token)}\fR")
        else:
            out.append(rf"\fI{troff(token)}\fR")
    text = " ".join(out)
    return re.sub(r"\[ ", "[", re.sub(r" \]", "]", text))


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    template_path, readme_path, output_path = sys.argv[1:]
    with open(template_path, encoding="utf-8") as f:
        template = f.read()
    with open(readme_path, encoding="utf-8") as f:
        commands = entries(commands_block(f.read()))
    if not commands:
        raise SystemExit('manpage.py: README.md\'s "Commands" block names no command')
    synopsis = []
    for command, options, _ in commands:
        synopsis.append(f".B outbox-bridge {troff(command)}")
        if options:
            synopsis.append(options_line(options))
        synopsis.append(".br")
    described = []
    for command, _, what in commands:
        if not what:
            raise SystemExit(f"manpage.py: README.md's \"Commands\" block does not say what `{command}` does")
        described += [".TP", f".B {troff(command)}", troff(what[0].upper() + what[1:]) + "."]
    page = template.replace("@SYNOPSIS@\n", "\n".join(synopsis[:-1]) + "\n")
    page = page.replace("@COMMANDS@\n", "\n".join(described) + "\n")
    if "@SYNOPSIS@" in page or "@COMMANDS@" in page or page == template:
        raise SystemExit(f"manpage.py: {template_path} lacks a line @SYNOPSIS@ or @COMMANDS@")
    with open(output_path, "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()
