#!/usr/bin/env python3
"""`dirthara lint` against squawk on the PostgreSQL projects of bench/lint-corpus: the findings
side by side. Every blocking finding squawk makes must be made by dirthara too (same file,
same rule, the same statement), unless dirthara knows better, which is then said (a table
created in the same migration, a CONCURRENTLY build in a file that runs outside a
transaction); and the noise a runner makes moot (timeouts dirthara sets itself, re-runnable
statements a history makes unnecessary) is not made.

    python3 bench/lint_vs_squawk.py DIRTHARA SQUAWK

Exit 1 when a blocking finding of squawk's is missing from dirthara's without a reason.
"""

import json
import os
import subprocess
import sys
from collections import Counter

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lint-corpus")
PROJECTS = ["pg/diesel", "pg/django", "pg/flyway", "pg/golang-migrate", "pg/goose"]

# squawk's rules about locks, rewrites and scans: dirthara has each under the same name.
BLOCKING = {
    "changing-column-type",
    "adding-field-with-default",
    "adding-not-nullable-field",
    "adding-required-field",
    "setting-not-nullable-field",
    "adding-foreign-key-constraint",
    "constraint-missing-not-valid",
    "require-concurrent-index-creation",
    "disallowed-unique-constraint",
    "adding-serial-primary-key-field",
    "ban-concurrent-index-creation-in-transaction",
}
SAME_AS = {"adding-required-field": "adding-not-nullable-field"}
# The rolling-deploy hazards, under dirthara's names.
HAZARDS = {
    "ban-drop-column": "dropping-column",
    "renaming-column": "renaming-column",
    "renaming-table": "renaming-table",
    "ban-drop-table": "dropping-table",
}
# What a runner that sets lock_timeout itself, wraps files in transactions and keeps a
# history makes moot.
MOOT = {
    "require-timeout-settings",
    "require-lock-timeout",
    "require-statement-timeout",
    "prefer-robust-stmts",
    "transaction-nesting",
}


def up_files(project):
    """The files squawk is given: each migration's up step as its tool lays it out."""
    root = os.path.join(CORPUS, project)
    found = []
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith(".sql") or name.endswith(".down.sql") or name == "down.sql":
                continue
            found.append(os.path.join(dirpath, name))
    return sorted(found)


def dirthara_findings(binary, project):
    out = subprocess.run(
        [binary, "lint", "--offline", "--dir", os.path.join(CORPUS, project), "--output", "json"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("DIRTHARA_") and k != "DATABASE_URL"},
    )
    document = json.loads(out.stdout)
    return [
        (os.path.realpath(f["file"]), f["line"], f["rule"], f["severity"])
        for f in document["findings"]
    ]


def squawk_findings(binary, files):
    out = subprocess.run(
        [binary, "--reporter", "json", *files], capture_output=True, text=True
    )
    # squawk's JSON counts lines from 0.
    return [
        (os.path.realpath(f["file"]), f["line"] + 1, f["rule_name"])
        for f in json.loads(out.stdout or "[]")
    ]


def statement_lines(path):
    """The line each statement starts on, by a plain scan for `;` ends (good enough to tell
    whether two findings are in the same statement of these files)."""
    starts, line, fresh = [], 1, True
    with open(path, encoding="utf-8") as f:
        for text in f:
            stripped = text.strip()
            if fresh and stripped and not stripped.startswith("--"):
                starts.append(line)
                fresh = False
            if stripped.endswith(";"):
                fresh = True
            line += 1
    return starts


def statement_of(path, line):
    starts = [s for s in statement_lines(path) if s <= line]
    return starts[-1] if starts else 1


def main():
    dirthara, squawk = sys.argv[1], sys.argv[2]
    missing, explained, made, moot_said, style = [], [], 0, Counter(), Counter()
    renamed = []
    ours_by_rule = Counter()
    for project in PROJECTS:
        ours = dirthara_findings(dirthara, project)
        theirs = squawk_findings(squawk, up_files(project))
        for _, _, rule, _ in ours:
            ours_by_rule[rule] += 1
        for path, line, rule in theirs:
            if rule in MOOT:
                moot_said[rule] += 1
                continue
            wanted = SAME_AS.get(rule, HAZARDS.get(rule, rule))
            if rule not in BLOCKING and rule not in HAZARDS:
                style[rule] += 1
                continue
            where = statement_of(path, line)
            match = [
                o for o in ours
                if o[0] == path and o[2] == wanted and statement_of(path, o[1]) == where
            ]
            if match:
                made += 1
                continue
            # The same statement flagged under dirthara's more exact rule (squawk calls a
            # `SET NOT NULL` adding-not-nullable-field, a stored generated column a field with
            # a default, a UNIQUE constraint missing NOT VALID, which it cannot have).
            other = [
                o for o in ours
                if o[0] == path and o[3] != "warning" and statement_of(path, o[1]) == where
                and rule in BLOCKING
            ]
            if other:
                made += 1
                renamed.append(f"{os.path.relpath(path, CORPUS)}:{line} {rule} -> {other[0][2]}")
                continue
            reason = why_not(path, line, rule)
            entry = f"{os.path.relpath(path, CORPUS)}:{line} {rule}"
            (explained if reason else missing).append(entry + (f": {reason}" if reason else ""))
    ours_moot = sum(ours_by_rule[r] for r in MOOT)
    print(f"squawk's blocking and rolling-deploy findings made by dirthara too: {made}")
    print(f"  of which under dirthara's more exact rule: {len(renamed)}")
    for entry in renamed:
        print(f"    {entry}")
    print(f"not made, for a reason dirthara knows: {len(explained)}")
    for entry in explained:
        print(f"  {entry}")
    print(f"not made, without a reason: {len(missing)}")
    for entry in missing:
        print(f"  MISSING {entry}")
    print(f"squawk's noise that a runner makes moot: {sum(moot_said.values())} "
          f"({', '.join(f'{r} {n}' for r, n in sorted(moot_said.items()))}); dirthara: {ours_moot}")
    print(f"squawk's style rules dirthara does not have: {sum(style.values())} "
          f"({', '.join(f'{r} {n}' for r, n in sorted(style.items()))})")
    print(f"dirthara's findings: {sum(ours_by_rule.values())} "
          f"({', '.join(f'{r} {n}' for r, n in sorted(ours_by_rule.items()))})")
    sys.exit(1 if missing or ours_moot else 0)


def why_not(path, line, rule):
    """Why dirthara rightly makes no such finding here, read from the file itself."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    statement = " ".join(lines[statement_of(path, line) - 1:line]).upper()
    whole = text.upper()
    down = [i + 1 for i, l in enumerate(lines) if l.strip().upper() == "-- +GOOSE DOWN"]
    if down and line > down[0]:
        return "in the file's down section: lint reads the up steps, which a deploy runs"
    if rule == "ban-concurrent-index-creation-in-transaction" and (
        "NO TRANSACTION" in whole or "NO-TRANSACTION" in whole
        or "EXECUTEINTRANSACTION=FALSE" in whole.replace(" ", "")
    ):
        return "the file runs outside a transaction (its layout's marker)"
    # A table created earlier in the same file is new: nobody queues behind it.
    target = table_of(statement)
    created = whole.replace('"', "").replace("IF NOT EXISTS ", "")
    for kind in ("TABLE", "MATERIALIZED VIEW"):
        if target and f"CREATE {kind} {target}" in created:
            return f"`{target.lower()}` is created in the same migration"
    return None


def table_of(statement):
    words = statement.replace('"', "").replace(";", " ").split()
    for keyword in ("TABLE", "ON"):
        if keyword in words:
            i = words.index(keyword)
            rest = [w for w in words[i + 1:] if w not in ("ONLY", "IF", "EXISTS")]
            if rest:
                return rest[0].split("(")[0]
    return None


if __name__ == "__main__":
    main()
