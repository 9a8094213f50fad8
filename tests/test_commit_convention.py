"""The commit convention checker (scripts/check-commits.py) on hand-written messages."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = ROOT / "scripts" / "check-commits.py"
_SPEC = importlib.util.spec_from_file_location("check_commits", _SCRIPT)
assert _SPEC is not None and _SPEC.loader is not None
check_commits = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_commits)


@pytest.mark.parametrize(
    ("subject", "body", "expected"),
    [
        ("Add the relay tunnel", "Why: engines stay private.", 0),
        ("Embed the pooling flag", "Because.", 0),
        ("Process heartbeats off the request path", "Why.", 0),
        ("Added the relay tunnel", "Why.", 1),
        ("Adding the relay tunnel", "Why.", 1),
        ("Adds the relay tunnel", "Why.", 1),
        ("add the relay tunnel", "Why.", 1),
        ("Add the relay tunnel.", "Why.", 1),
        ("Add " + "x" * 69, "Why.", 1),
        ("Add " + "x" * 68, "Why.", 0),
        ("Add the relay tunnel", "", 1),
        ("added " + "x" * 80 + ".", "", 5),
    ],
)
def test_problems_counts_each_broken_rule(subject: str, body: str, expected: int) -> None:
    assert len(check_commits.problems(subject, body)) == expected


def _commit(repo: Path, message: str) -> str:
    (repo / "f.txt").write_text(message)
    subprocess.run(["git", "add", "f.txt"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_script_fails_on_a_bad_commit_after_the_base_and_passes_otherwise(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", *env_args, "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "config", "user.name", "t"], cwd=repo, check=True)
    subprocess.run(["git", "config", "user.email", "t@example.invalid"], cwd=repo, check=True)
    base = _commit(repo, "whatever came before the convention")
    _commit(repo, "Add a good commit\n\nWith a body that says why.")
    script = str(ROOT / "scripts" / "check-commits.py")
    good = subprocess.run(["python3", script, base], cwd=repo, capture_output=True, text=True)
    assert good.returncode == 0, good.stdout
    _commit(repo, "fixed stuff")
    bad = subprocess.run(["python3", script, base], cwd=repo, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "fixed stuff" in bad.stdout and "no body" in bad.stdout
