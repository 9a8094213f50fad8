#!/usr/bin/env python3
"""Check the commit convention (CONTRIBUTING.md) on every commit after the convention's base.

Usage: scripts/check-commits.py [BASE]   (BASE defaults to the commit named in
.ci/commit-convention-base; merge commits are exempt, their subject is git's own).

A commit passes when its subject is at most 72 characters, starts with a capital letter, has no
trailing period, its first word is an imperative verb (not "Added", "Adding", "Adds"), and a
body follows a blank line. Exit 0 when every commit passes, 1 with one line per failure, 2 when
the base commit is not in this clone (a shallow clone: then only HEAD is checked).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
# Words that end like a past tense or a third person but are imperatives.
IMPERATIVE_EXCEPTIONS = {
    "embed", "feed", "heed", "need", "seed", "shed", "speed", "proceed", "succeed", "exceed",
    "bring", "string", "ring", "sing", "process", "pass", "press", "address", "access",
    "guess", "discuss", "focus", "bless", "dress", "toss", "miss", "cross", "express",
    "bias", "canvas", "alias", "harness", "redress", "unless", "bus",
}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], check=True, capture_output=True, text=True
    ).stdout


def problems(subject: str, body: str) -> list[str]:
    found: list[str] = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject is {len(subject)} characters (at most {MAX_SUBJECT})")
    if not subject[:1].isupper():
        found.append("subject does not start with a capital letter")
    if subject.endswith("."):
        found.append("subject ends with a period")
    first = subject.split(" ", 1)[0].rstrip(":").lower()
    if first not in IMPERATIVE_EXCEPTIONS and (
        first.endswith("ed") or first.endswith("ing") or (first.endswith("s") and len(first) > 3)
    ):
        found.append(f"first word {first!r} is not an imperative verb (write 'Add', 'Fix', ...)")
    if not body.strip():
        found.append("no body: say why (and the figures) after a blank line")
    return found


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    base_file = root / ".ci" / "commit-convention-base"
    base = argv[1] if len(argv) > 1 else base_file.read_text().strip()
    try:
        _git("rev-parse", "--git-dir")
    except (OSError, subprocess.CalledProcessError):
        print("check-commits: not a git checkout; nothing to check")
        return 0
    try:
        _git("cat-file", "-e", f"{base}^{{commit}}")
        span = f"{base}..HEAD"
        status = 0
    except subprocess.CalledProcessError:
        print(f"check-commits: base {base} is not in this clone; checking HEAD only")
        span, status = "HEAD^!", 0
    log = _git("log", "--no-merges", "--format=%H%x1f%s%x1f%b%x1e", span)
    failures = 0
    for record in filter(None, (r.strip("\n") for r in log.split("\x1e"))):
        sha, subject, body = [*record.split("\x1f"), "", ""][:3]
        for problem in problems(subject, body):
            print(f"{sha[:10]} {subject[:60]!r}: {problem}")
            failures += 1
    if failures:
        print(f"check-commits: {failures} problem(s). To fix: reword the commits "
              "(git rebase -i), see CONTRIBUTING.md")
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
