#!/usr/bin/env python3
"""Writes a C++ file holding the schema files, so `outbox-bridge migrate` needs no files at run time.

usage: embed.py OUTPUT.cpp SCOPE=FILE...   (SCOPE is 'bridge' or 'outbox')
"""
import os
import sys


def main() -> int:
    out, items = sys.argv[1], sys.argv[2:]
    lines = ['#include "db/schema_files.h"', "", "namespace outbox::db {", "",
             "const std::vector<SchemaFile>& schemaFiles() {",
             "  static const std::vector<SchemaFile> files = {"]
    for item in sorted(items, key=lambda i: (i.split("=", 1)[0], os.path.basename(i.split("=", 1)[1]))):
        scope, path = item.split("=", 1)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        name = os.path.basename(path)
        lines.append(f'      {{"{scope}", "{name}", R"sql_({text})sql_"}},')
    lines += ["  };", "  return files;", "}", "", "}  // namespace outbox::db", ""]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
