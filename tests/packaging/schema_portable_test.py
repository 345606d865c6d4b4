#!/usr/bin/env python3
"""Every schema file under sql/ runs on MySQL 8.0/8.4 as well as on MariaDB (issue 19).

`outbox-bridge migrate` stopped on MySQL at the first `ALTER TABLE ... ADD COLUMN IF NOT EXISTS`:
MariaDB takes IF [NOT] EXISTS on a column, an index, a key or a constraint inside ALTER TABLE (and
on CREATE INDEX), MySQL does not. A schema file asks information_schema instead and runs the
statement it builds with PREPARE/EXECUTE (DEVELOPERS.md, "Schema changes"). This is a text check:
comments are skipped; the SQL is checked, and so is every string literal, since a literal in a
schema file is a statement (or a piece of one) that the file runs with PREPARE: outbox 002 had its
DROP INDEX IF EXISTS inside one. `CREATE TABLE IF NOT EXISTS` and `DROP TABLE IF EXISTS` are fine
on both servers.

usage: schema_portable_test.py   (run by meson test, suite packaging)
"""
import os
import re
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SQL = os.path.join(REPO, "sql")

# MariaDB-only forms, on words separated by any whitespace.
_W = r"\s+"
MARIADB_ONLY = [
    ("ADD [COLUMN|INDEX|KEY|...] IF NOT EXISTS",
     re.compile(r"\bADD" + _W + r"(?:(?:COLUMN|UNIQUE|FULLTEXT|SPATIAL|INDEX|KEY|CONSTRAINT|PARTITION|FOREIGN" + _W +
                r"KEY)" + _W + r")*IF" + _W + r"NOT" + _W + r"EXISTS\b", re.I)),
    ("DROP [COLUMN|INDEX|KEY|FOREIGN KEY|CONSTRAINT|PARTITION] IF EXISTS",
     re.compile(r"\bDROP" + _W + r"(?:(?:COLUMN|INDEX|KEY|FOREIGN" + _W + r"KEY|CONSTRAINT|PARTITION)" + _W +
                r")?IF" + _W + r"EXISTS\b", re.I)),
    ("CHANGE/MODIFY/RENAME [COLUMN] IF EXISTS",
     re.compile(r"\b(?:CHANGE|MODIFY|RENAME)" + _W + r"(?:(?:COLUMN|INDEX|KEY)" + _W + r")?IF" + _W + r"EXISTS\b",
                re.I)),
    ("CREATE [UNIQUE] INDEX IF NOT EXISTS",
     re.compile(r"\bCREATE" + _W + r"(?:(?:UNIQUE|FULLTEXT|SPATIAL)" + _W + r")?INDEX" + _W + r"IF" + _W + r"NOT" + _W +
                r"EXISTS\b", re.I)),
]


def pieces(text):
    """The SQL of `text` without its comments, and its string literals' contents, as two strings.

    Comments: `-- ` and `#` to the end of the line, `/* ... */` (but `/*!...*/` and `/*M!...*/`
    are run by the server: their contents count as SQL). Literals: '...' and "..." with doubled
    quotes and backslash escapes; `identifiers` stay SQL."""
    code, literals = [], []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i) and (i + 2 == n or text[i + 2] in " \t\r\n"):
            end = text.find("\n", i)
            i = n if end < 0 else end
            code.append(" ")
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            code.append(" ")
        elif text.startswith("/*", i):
            m = re.match(r"/\*M?!\d*", text[i:])
            if m:  # executable comment: its body is SQL, its markers are not
                i += m.end()
                code.append(" ")
                continue
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            code.append(" ")
        elif text.startswith("*/", i):
            i += 2
            code.append(" ")
        elif c in "'\"":
            j, body = i + 1, []
            while j < n:
                if text[j] == "\\" and j + 1 < n:
                    body.append(text[j:j + 2])
                    j += 2
                elif text[j] == c and text.startswith(c * 2, j):
                    body.append(c)
                    j += 2
                elif text[j] == c:
                    break
                else:
                    body.append(text[j])
                    j += 1
            literals.append("".join(body))
            code.append(" '' ")
            i = j + 1
        elif c == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            code.append(text[i:end])
            i = end
        else:
            code.append(c)
            i += 1
    return "".join(code), literals


def findings(text):
    """(where, form, excerpt) for each MariaDB-only form in `text`'s SQL or string literals."""
    code, literals = pieces(text)
    out = []
    for where, body in [("SQL", code)] + [("string literal", lit) for lit in literals]:
        for form, pattern in MARIADB_ONLY:
            for m in pattern.finditer(body):
                out.append((where, form, " ".join(body[max(0, m.start() - 30):m.end() + 30].split())))
    return out


def schema_files():
    out = []
    for root, _, files in os.walk(SQL):
        out += [os.path.join(root, f) for f in files if f.endswith(".sql")]
    return sorted(out)


class SchemaFilesRunOnMysql(unittest.TestCase):
    def test_no_schema_file_uses_mariadb_only_if_exists_forms(self):
        files = schema_files()
        self.assertTrue(any(f.endswith("002_pause.sql") for f in files), f"no schema files found under {SQL}")
        problems = []
        for path in files:
            with open(path, encoding="utf-8") as f:
                for where, form, excerpt in findings(f.read()):
                    problems.append(f"{os.path.relpath(path, REPO)}: {form} in {where} (MySQL 8 refuses it): "
                                    f"...{excerpt}...")
        self.assertEqual(problems, [], "\n" + "\n".join(problems) +
                         "\nAsk information_schema and PREPARE the statement instead (DEVELOPERS.md, Schema changes)")


class TheCheckItself(unittest.TestCase):
    def test_finds_the_forms_that_stopped_migrate_on_mysql(self):
        for sql in ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT;",
                    "ALTER TABLE t\n  add   column if  not\texists c INT;",
                    "ALTER TABLE t ADD IF NOT EXISTS c INT;",
                    "ALTER TABLE t ADD INDEX IF NOT EXISTS i (c);",
                    "ALTER TABLE t ADD UNIQUE KEY IF NOT EXISTS i (c);",
                    "ALTER TABLE t DROP INDEX IF EXISTS i;",
                    "ALTER TABLE t DROP KEY IF EXISTS i;",
                    "ALTER TABLE t DROP COLUMN IF EXISTS c;",
                    "ALTER TABLE t DROP IF EXISTS c;",
                    "ALTER TABLE t DROP FOREIGN KEY IF EXISTS f;",
                    "ALTER TABLE t MODIFY COLUMN IF EXISTS c BIGINT;",
                    "CREATE UNIQUE INDEX IF NOT EXISTS i ON t (c);",
                    "/*M!100000 ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT */;",
                    # outbox/002 as it shipped: the statement it PREPAREd
                    "SET @s = IF(@v1 > 0, 'ALTER TABLE `t` DROP INDEX IF EXISTS uk_version, DROP COLUMN version', 'DO 0');"):
            self.assertNotEqual(findings(sql), [], sql)

    def test_leaves_what_mysql_takes_and_what_is_not_run(self):
        for sql in ("CREATE TABLE IF NOT EXISTS t (c INT);",
                    "DROP TABLE IF EXISTS t;",
                    "CREATE DATABASE IF NOT EXISTS d;",
                    "ALTER TABLE t ADD COLUMN c INT, DROP INDEX i;",
                    "-- was: ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT;\nDO 0;",
                    "# ADD COLUMN IF NOT EXISTS\nDO 0;",
                    "/* DROP INDEX IF EXISTS i */ DO 0;",
                    "SELECT 'it''s -- not a comment';",
                    "SELECT 1 FROM t WHERE reason = 'poison row id=1' -- DROP COLUMN IF EXISTS x\n;"):
            self.assertEqual(findings(sql), [], sql)

    def test_a_quote_inside_a_literal_does_not_end_it(self):
        code, literals = pieces("SELECT 'a''b -- c', \"d\\\" e\", `x`;")
        self.assertEqual(literals, ["a'b -- c", 'd\\" e'])
        self.assertIn("`x`", code)


if __name__ == "__main__":
    unittest.main(verbosity=2)
