"""Scenario lab speed: one large run and the graduate matrix, with the planning share measured.

    .venv/bin/python bench/bench_scenario.py [--skip-graduate] [--json]

Figures (all measured in this run):
    run     `--machines 16 --models 9 --users 500 --duration 2h`, smart strategy (the production
            CP-SAT planner, deterministic): wall seconds,
            ticks, requests, and the planner + reconciler share of the wall (the production code
            the lab exists to exercise); goal <= 60 s
    heuristic  the same smart run on the heuristic engine (the lab's engine before), baseline
    static  the same run with the static strategy (one plan, then reconcile only): the cost of
            the lab itself without per-tick planning, the baseline of the run above
    matrix  `grid test graduate --machines 2,4,8 --seeds 42,144 --duration 2h` (models 8,
            users 50): wall seconds (goal <= 600 s), the gates and the cell matrix
Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout

import grid.lab.scenario.strategies as strategies  # noqa: E402
from grid.lab.scenario import ScenarioConfig, document, graduate, run_scenario  # noqa: E402
from grid.lab.simulator import FleetSimulator  # noqa: E402


def timed_run(strategy: str, engine: str = "cpsat") -> dict[str, float]:
    spent = {"plan": 0.0, "reconcile_step": 0.0}
    engine_was, strategies.ENGINE = strategies.ENGINE, engine
    plan_fn = strategies.plan_snapshot
    step_fn = FleetSimulator.step

    def plan(snap):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return plan_fn(snap)
        finally:
            spent["plan"] += time.perf_counter() - t

    def step(self):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return step_fn(self)
        finally:
            spent["reconcile_step"] += time.perf_counter() - t

    strategies.plan_snapshot = plan  # type: ignore[assignment]
    FleetSimulator.step = step  # type: ignore[method-assign]
    try:
        cfg = ScenarioConfig(
            machines=16, models=9, users=500, duration_s=7200, seed=42, strategy=strategy
        )
        started = time.perf_counter()
        run = run_scenario(cfg)
        wall = time.perf_counter() - started
    finally:
        strategies.plan_snapshot = plan_fn
        strategies.ENGINE = engine_was
        FleetSimulator.step = step_fn  # type: ignore[method-assign]
    doc = document(run)
    return {
        "wall_s": round(wall, 2),
        "ticks": cfg.minutes,
        "requests": doc["summary"]["requests"],
        "plan_s": round(spent["plan"], 2),
        "tick_s": round(spent["reconcile_step"], 2),
        "served_fraction": doc["summary"]["served_fraction"],
        "score": doc["summary"]["score"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-graduate", action="store_true", help="Only the large run.")
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    args = parser.parse_args()
    out: dict[str, object] = {
        "run": timed_run("smart"),
        "heuristic": timed_run("smart", engine="heuristic"),
        "static": timed_run("static"),
    }
    if not args.skip_graduate:
        engine_was, strategies.ENGINE = strategies.ENGINE, "heuristic"
        started = time.perf_counter()
        graduate([2, 4, 8], [42, 144], models=8, users=50, duration_s=7200)
        heuristic_wall = time.perf_counter() - started
        strategies.ENGINE = engine_was
        started = time.perf_counter()
        matrix = graduate([2, 4, 8], [42, 144], models=8, users=50, duration_s=7200)
        out["graduate"] = {
            "heuristic_wall_s": round(heuristic_wall, 2),
            "wall_s": round(time.perf_counter() - started, 2),
            "passed": matrix["passed"],
            "gates": matrix["gates"],
            "cells": matrix["cells"],
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name in ("run", "heuristic", "static"):
        r = out[name]
        assert isinstance(r, dict)
        print(
            f"{name:<7} 16 machines, 9 models, 500 users, 2 h: wall {r['wall_s']:.1f} s "
            f"({r['ticks']} ticks, {r['requests']} requests; planner {r['plan_s']:.1f} s, "
            f"planner+reconciler tick {r['tick_s']:.1f} s) served {r['served_fraction']:.1%} "
            f"score {r['score']:.1f}"
        )
    g = out.get("graduate")
    if isinstance(g, dict):
        print(
            f"graduate 2,4,8 x 42,144 x 2 h (4 strategies each): wall {g['wall_s']:.1f} s "
            f"(cpsat; the heuristic engine: {g['heuristic_wall_s']:.1f} s)"
        )
        print("machines seed  " + "  ".join(f"{s:>26}" for s in strategies.STRATEGIES))
        for c in g["cells"]:
            cols = []
            for s in strategies.STRATEGIES:
                v = c["strategies"][s]
                cols.append(
                    f"{v['served_fraction']:6.1%} {v['score']:5.1f} "
                    f"ch{v['churn']:3d} st{v['startup_s']:5.0f}"
                )
            print(f"{c['machines']:>8} {c['seed']:>4}  " + "  ".join(f"{x:>26}" for x in cols))
        for gate in g["gates"]:
            mark = "pass" if gate["passed"] else f"FAIL by {gate['miss']}"
            print(
                f"  {gate['name']:<32} {gate['value']!s:>8} {gate['comparison']} "
                f"{gate['threshold']:<6} {mark}"
            )


if __name__ == "__main__":
    main()
