"""Decision quality of the scenario lab's strategies against the hindsight oracle.

    .venv/bin/python bench/bench_decisions.py [--machines 2,4,8,16] [--seeds 42,144,7,99,2026]
        [--users 100,300,500] [--duration 2h] [--models 8] [--oracle-time-limit 10]
        [--jobs 2] [--json]

For every cell (machines × seed × users) it runs smart, reactive, greedy and static (and, where
the tree has it, the `oracle` strategy: the oracle's schedule replayed through the lab's
physics) and solves the hindsight oracle on the run's exact trace. Per strategy: served
fraction, score, least-workload service, churn and mapping changes; for the oracle: its served
fraction and its proven bound (as fractions of demand). Then the goals of issue 19:

- smart's score >= static's and >= greedy's, and smart's served >= static's: share of cells;
- median of smart served / oracle served (the oracle on the same physics);
- mapping changes per hour of simulated work at 8 machines (mean and worst cell).

Prints figures only; asserts nothing. Cells run in `--jobs` worker processes (the figures do
not depend on it: every run is deterministic by seed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout

from grid.lab.scenario import (  # noqa: E402
    STRATEGIES,
    ScenarioConfig,
    document,
    run_cell,
    run_oracle,
    run_scenario,
)

try:  # the oracle strategy (issue 19); a baseline tree may not have it
    from grid.lab.scenario import ORACLE as ORACLE_STRATEGY
    from grid.lab.scenario import run_oracle_strategy
except ImportError:  # pragma: no cover - only on an older tree
    ORACLE_STRATEGY = None

KEYS = ("served_fraction", "score", "least_workload_service", "churn", "mapping_changes")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _duration(text: str) -> int:
    text = text.strip().lower()
    unit = {"h": 3600, "m": 60, "s": 1}.get(text[-1:], 1)
    return int(float(text.rstrip("hms")) * unit)


def cell(args: tuple[int, int, int, int, int, float]) -> dict[str, Any]:
    machines, seed, users, models, duration_s, limit = args
    started = time.perf_counter()
    out = run_cell(machines, seed, models=models, users=users, duration_s=duration_s)
    out["users"] = users
    cfg = ScenarioConfig(
        machines=machines, models=models, users=users, duration_s=duration_s, seed=seed
    )
    if ORACLE_STRATEGY is not None:  # the oracle's schedule replayed through the physics
        replayed = run_oracle_strategy(cfg, time_limit_s=limit)
        result = replayed.result
        summary = document(replayed.run)["summary"]
        out["oracle"] = {k: summary[k] for k in KEYS}
    else:  # a tree without the oracle strategy: the oracle's figures only
        result = None
        report = run_oracle(run_scenario(cfg), limit)
    demand = (result.demand if result is not None else report["demand"]) or 1.0
    served = result.served if result is not None else report["served"]
    bound = result.bound if result is not None else report["bound"]
    out.setdefault("oracle", {}).update(
        {
            "status": result.status if result is not None else report["status"],
            "oracle_served_fraction": round(served / demand, 4),
            "bound_fraction": round(bound / demand, 4),
        }
    )
    out["wall_s"] = round(time.perf_counter() - started, 2)
    return out


def summarise(cells: list[dict[str, Any]], duration_s: int) -> dict[str, Any]:
    def share(pred: Any) -> float:
        return round(sum(1 for c in cells if pred(c)) / max(1, len(cells)), 4)

    def st(c: dict[str, Any], name: str, key: str) -> float:
        return float(c["strategies"][name][key])

    ratios = [
        st(c, "smart", "served_fraction") / c["oracle"]["oracle_served_fraction"]
        for c in cells
        if c["oracle"]["oracle_served_fraction"] > 0
    ]
    hours = duration_s / 3600.0
    at8 = [st(c, "smart", "mapping_changes") / hours for c in cells if c["machines"] == 8]
    by_size: dict[int, dict[str, Any]] = {}
    for n in sorted({c["machines"] for c in cells}):
        mine = [c for c in cells if c["machines"] == n]
        by_size[n] = {
            name: {
                k: round(statistics.fmean(st(c, name, k) for c in mine), 4)
                for k in ("served_fraction", "score", "least_workload_service")
            }
            for name in STRATEGIES
        }
        by_size[n]["oracle_served_fraction"] = round(
            statistics.fmean(c["oracle"]["oracle_served_fraction"] for c in mine), 4
        )
    return {
        "cells": len(cells),
        "smart_score_ge_static": share(
            lambda c: st(c, "smart", "score") >= st(c, "static", "score")
        ),
        "smart_score_ge_greedy": share(
            lambda c: st(c, "smart", "score") >= st(c, "greedy", "score")
        ),
        "smart_served_ge_static": share(
            lambda c: st(c, "smart", "served_fraction") >= st(c, "static", "served_fraction")
        ),
        "median_smart_over_oracle_served": round(statistics.median(ratios), 4) if ratios else None,
        "run_served_le_bound": share(
            lambda c: all(
                float(v["served_fraction"]) <= c["oracle"]["bound_fraction"] + 1e-4
                for v in c["strategies"].values()
            )
        ),
        "mapping_changes_per_hour_8": {
            "mean": round(statistics.fmean(at8), 2) if at8 else None,
            "max": round(max(at8), 2) if at8 else None,
        },
        "by_machines": by_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machines", default="2,4,8,16")
    parser.add_argument("--seeds", default="42,144,7,99,2026")
    parser.add_argument("--users", default="100,300,500")
    parser.add_argument("--duration", default="2h")
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--oracle-time-limit", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    duration_s = _duration(args.duration)
    work = [
        (n, seed, users, args.models, duration_s, args.oracle_time_limit)
        for n in _ints(args.machines)
        for seed in _ints(args.seeds)
        for users in _ints(args.users)
    ]
    started = time.perf_counter()
    cells: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for one in pool.map(cell, work):
            cells.append(one)
            print(_row(one), file=sys.stderr if args.json else sys.stdout, flush=True)
    summary = summarise(cells, duration_s)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps({"cells": cells, "summary": summary}, indent=2))
        return
    print(json.dumps(summary, indent=2))


def _row(c: dict[str, Any]) -> str:
    cols = []
    for name in STRATEGIES:
        v = c["strategies"][name]
        cols.append(
            f"{name[:2]} {v['served_fraction']:.3f}/{v['score']:5.1f}/"
            f"{v['least_workload_service']:.2f}/c{v['churn']}/m{v['mapping_changes']}"
        )
    o = c["oracle"]
    if "score" in o:  # the oracle's schedule replayed: its report's figures
        cols.append(
            f"or {o['served_fraction']:.3f}/{o['score']:5.1f}/{o['least_workload_service']:.2f}"
            f"/c{o['churn']}/m{o['mapping_changes']}"
        )
    cols.append(
        f"oracle {o['oracle_served_fraction']:.3f} (bound {o['bound_fraction']:.3f} {o['status']})"
    )
    return f"{c['machines']:>2} x {c['seed']:>4} x {c['users']:>3}: " + "  ".join(cols)


if __name__ == "__main__":
    main()
