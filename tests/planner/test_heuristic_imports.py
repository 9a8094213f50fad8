"""A heuristic plan loads no OR-Tools unless an explanation runs a CP-SAT core.

OR-Tools' import is about a second of a `grid plan --engine heuristic` process; the plan
document, the explanations and the host-type phases' conditions import it only on the CP-SAT
paths. A fresh interpreter: this test process may have loaded it already.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
from grid.lab.fleetgen import generate_fleet
from grid.planner import make_plan

plan = make_plan(generate_fleet({hosts}, {models}, 3), engine="heuristic", time_limit_s=5)
print(len(plan.unsatisfied), "ortools" in sys.modules)
"""


def test_a_heuristic_plan_that_places_everything_loads_no_ortools() -> None:
    run = subprocess.run(
        [sys.executable, "-c", CODE.format(hosts=16, models=3)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert run.stdout.split() == ["0", "False"]
