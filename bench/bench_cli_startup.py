#!/usr/bin/env python3
"""CLI start-up: `grid --version`, bare `grid` and `grid validate` as processes, against the
baseline of the same run: a process that imports every sub-command module eagerly, as
grid/cli/main.py did before the nouns loaded lazily (grid/cli/lazy.py).

    .venv/bin/python bench/bench_cli_startup.py [--repeat 5]

Prints the median and best wall time of each, in seconds. Figures only, no assertion.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EAGER = (
    "import grid.cli.plan_cmd, grid.cli.reconcile_cmd, grid.cli.server_cmd, grid.cli.node_cmd, "
    "grid.cli.allocator_cmd, grid.cli.profiles_cmd, grid.cli.test_cmd, grid.cli.scenario_cmd, "
    "grid.cli.demo_cmd, grid.cli.lab_cmd, grid.cli.capacity_cmd"
)
CASES = {
    "baseline: eager import of every noun": ["-c", EAGER],
    "grid --version": ["-m", "grid", "--version"],
    "grid (help)": ["-m", "grid"],
    "grid validate office.json": ["-m", "grid", "validate", "models/fleets/office.json"],
}


def _time(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="Runs per case.")
    repeat = parser.parse_args().repeat
    for case in CASES.values():  # warm the bytecode caches once
        _time(case)
    print(f"{'case':40} {'median s':>9} {'best s':>8}")
    for name, case in CASES.items():
        runs = [_time(case) for _ in range(repeat)]
        print(f"{name:40} {statistics.median(runs):9.3f} {min(runs):8.3f}")


if __name__ == "__main__":
    main()
