"""What-if capacity benchmark: `grid capacity` and the notebook, against planning the fleet once.

    .venv/bin/python bench/bench_capacity.py [--repeat 3] [--no-notebook] [--json]

Figures, all measured in this run:
    baseline      planning fleet-64 once with the real planner (in process, cpsat)
    capacity      grid.lab.capacity on fleet-64 with two templates (in process)
    cli           `grid capacity fleet-64.json --add gpu-server --add gpu-workstation --json`
                  as a subprocess: the user's wall time, interpreter start included (goal ≤ 5 s)
    drill         the N−1 drill on fleet-64 (in process)
    notebook      notebooks/capacity_whatif.ipynb executed with nbclient (goal ≤ 90 s)
Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout

from grid.lab import whatif  # noqa: E402
from grid.lab.capacity import capacity  # noqa: E402
from grid.lab.capacity_templates import load_templates  # noqa: E402
from grid.lab.whatif_drill import drill  # noqa: E402

NOW = 1_785_300_000.0
FLEET_64 = ROOT / "models" / "fleets" / "fleet-64.json"
TEMPLATES = [ROOT / "models" / "templates" / n for n in ("gpu-server.json", "gpu-workstation.json")]
NOTEBOOK = ROOT / "notebooks" / "capacity_whatif.ipynb"


def timed(fn: Callable[[], object], repeat: int) -> tuple[list[float], object]:
    walls: list[float] = []
    result: object = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - started)
    return walls, result


def cli_run() -> dict[str, object]:
    grid = Path(sys.executable).with_name("grid")
    command = [str(grid), "capacity", str(FLEET_64), "--json"]
    for t in TEMPLATES:
        command += ["--add", str(t)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def notebook_run() -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GRID_FIGURES_DIR"] = tmp
        started = time.perf_counter()
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp}}
        ).execute()
        return time.perf_counter() - started


def summary(walls: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(walls), 3),
        "max_s": round(max(walls), 3),
        "runs": len(walls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per in-process figure.")
    parser.add_argument("--no-notebook", action="store_true", help="Skip the notebook run.")
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    args = parser.parse_args()

    snap = whatif.load(FLEET_64, now=NOW)
    templates = load_templates(TEMPLATES)
    figures: dict[str, object] = {}
    walls, _ = timed(lambda: whatif.plan(snap, deterministic=False), args.repeat)
    figures["baseline_plan_fleet64"] = summary(walls)
    walls, answer = timed(lambda: capacity(snap, templates), args.repeat)
    figures["capacity_fleet64_two_templates"] = summary(walls) | {
        "answer": answer.to_dict()["added"],  # type: ignore[attr-defined]
        "status": answer.status,  # type: ignore[attr-defined]
    }
    walls, doc = timed(cli_run, args.repeat)
    figures["cli_fleet64_two_templates"] = summary(walls) | {"goal_s": 5.0}
    walls, _ = timed(lambda: drill(snap), 1)
    figures["drill_fleet64"] = summary(walls)
    if not args.no_notebook:
        figures["notebook"] = summary([notebook_run()]) | {"goal_s": 90.0}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    base = figures["baseline_plan_fleet64"]["median_s"]  # type: ignore[index]
    print(f"{'figure':34} {'median s':>9} {'max s':>8} {'x baseline':>11}")
    for name, fig in figures.items():
        assert isinstance(fig, dict)
        ratio = fig["median_s"] / base if base else 0.0
        goal = f"  (goal ≤ {fig['goal_s']:g} s)" if "goal_s" in fig else ""
        print(f"{name:34} {fig['median_s']:9.3f} {fig['max_s']:8.3f} {ratio:10.1f}x{goal}")
    print(f"answer: {doc['added']} {doc['status']}")  # type: ignore[index]


if __name__ == "__main__":
    main()
