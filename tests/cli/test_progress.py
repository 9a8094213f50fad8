"""Progress of long commands (issue 14, item 11): the planner stage spinner."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from grid.cli.progress import current_stage

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.unit
@pytest.mark.smoke
def test_current_stage_follows_the_recorded_phases() -> None:
    assert current_stage({}) == "loading the snapshot"
    assert current_stage({"load": 0.1}) == "building the placement model"
    assert current_stage({"load": 0.1, "build": 0.2}).startswith("heuristic placement")
    assert current_stage({"load": 0.1, "build": 0.2, "heuristic": 0.1}) == "CP-SAT search"
    done = {"load": 0.1, "build": 0.2, "heuristic": 0.1, "solve": 1.0}
    assert current_stage(done).startswith("explanations")


def _run_on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run `python -m grid ARGS` with stderr on a pseudo-terminal; stdout on a pipe."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "grid", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, seen.decode(errors="replace")


@pytest.mark.service
def test_plan_shows_a_stage_spinner_on_a_terminal_only() -> None:
    fleet = str(REPO / "models" / "fleets" / "fleet-64.json")
    code, out, err = _run_on_a_terminal(["plan", fleet, "--time-limit", "4"])
    assert code == 0
    assert "Planning fleet-64.json:" in err
    assert any(stage in err for stage in ("building the placement", "heuristic", "CP-SAT"))
    assert out.startswith("Plan: ")  # stdout carries the plan and no spinner
    piped = subprocess.run(
        [sys.executable, "-m", "grid", "plan", fleet, "--time-limit", "4", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert piped.returncode == 0 and "Planning" not in piped.stderr
