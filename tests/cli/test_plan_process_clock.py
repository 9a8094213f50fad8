"""`grid plan --time-limit S` counts from the process start (docs/plan-time-limit.md).

In a process that runs one `grid` command the interpreter start and the imports are part of
the promise; `app` invoked in-process (CliRunner, this test process) counts from the command.
The oracle is a `time.sleep` before the command: it puts a known lower bound on the time
already spent, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.models import Plan

pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[2]
OFFICE = REPO / "models" / "fleets" / "office.json"
TICK_S = 0.05  # /proc's start time is in clock ticks (10 ms); slack for that rounding


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_the_process_age_counts_the_time_before_it_is_read() -> None:
    code = (
        "import time; time.sleep(0.4)\n"
        "from grid.cli.plan_cmd import process_age_s\n"
        "print(process_age_s())"
    )
    began = time.perf_counter()
    done = _python(code)
    wall = time.perf_counter() - began
    assert done.returncode == 0, done.stderr
    age = float(done.stdout.strip())
    # at least the sleep; at most the child's whole life as the parent saw it
    assert 0.4 <= age <= wall + TICK_S


def test_a_plan_process_spends_its_limit_on_what_ran_before_the_command() -> None:
    """1.5 s asleep before `main()` with --time-limit 1: the limit is spent before the plan
    starts, so CP-SAT gets no time and the plan says so (it is still valid). Counted from the
    command instead, the office fleet plans OPTIMAL in well under a second."""
    code = (
        "import sys, time; time.sleep(1.5)\n"
        f"sys.argv = ['grid', 'plan', {str(OFFICE)!r}, '--time-limit', '1', '--json']\n"
        "from grid.cli.main import main\n"
        "main()"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    plan = Plan.model_validate(json.loads(done.stdout))
    assert plan.solver.status == "HEURISTIC_FALLBACK"
    assert "the time limit of 1 s left no time for CP-SAT" in plan.solver.message
    assert "explanation(s) shortened" in plan.solver.message


def test_an_in_process_command_counts_from_the_command() -> None:
    """This test process is older than the limit (psutil's own reading, slept up to it when
    needed); `app` called in-process must not count that, so CP-SAT still runs."""
    age = time.time() - psutil.Process().create_time()
    time.sleep(max(0.0, 3.5 - age))
    result = CliRunner().invoke(app, ["plan", str(OFFICE), "--json", "--time-limit", "3"])
    assert result.exit_code == 0, result.output
    plan = Plan.model_validate(json.loads(result.stdout))
    assert plan.solver.engine == "cp-sat"
