"""`python -m grid plan ... --json` as a real process: stdout is one plan, exit code 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grid.fleet.models import Plan

pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GRID_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "grid", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_m_grid_plans_the_office_fleet() -> None:
    proc = _run(
        "plan", "models/fleets/office.json", "--json", "--deterministic", "--time-limit", "20"
    )
    assert proc.returncode == 0, proc.stderr
    plan = Plan.model_validate(json.loads(proc.stdout))
    assert plan.schema_version == 1
    assert plan.assignments
    assert "Traceback" not in proc.stderr


def test_python_m_grid_refuses_a_bad_file_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    proc = _run("plan", str(bad), "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Error [invalid_syntax]" in proc.stderr
    assert "Traceback" not in proc.stderr
