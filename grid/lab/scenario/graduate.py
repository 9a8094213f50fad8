"""`grid test graduate`: every strategy on every (fleet size, seed) cell, then the gates.

`gates(cells)` is pure: it reads only the cells' numbers (tests feed it hand-made cells).
A cell is `{"machines", "seed", "strategies": {name: {served_fraction, score,
least_workload_service, churn, loads, unloads, startup_s, safety_violations,
demand_trace_sha256}}}` (`loads` and `unloads` are the raw counts, for the reader; churn is
churn.py's measure).

Gates (name: value; passes when):
- smart_safety: smart safety violations over all cells; <= 0
- identical_demand_traces: cells whose strategies saw different arrival digests; <= 0
- score_regression: worst (best other score - smart score), points; <= 5.0
- service_regression: worst (best other served - smart served fraction); <= 0.03
- median_service_gain_over_static: median of (smart - static served fraction); >= 0.02
- churn_vs_greedy: sum of smart churn / sum of greedy churn (churn: the allocator's changes of
  mind, not the first fill or outage reloads; churn.py); <= 0.5
- least_workload_largest_fleet: worst (smart - best other least-workload service) on the
  largest fleet; >= -0.05
- startup_savings_over_reactive: sum of reactive startup s - sum of smart startup s; > 0
- median_score_gain_over_static: median of (smart score - static score), points; >= 0
- median_score_gain_over_greedy: median of (smart score - greedy score), points; >= 0
- served_vs_oracle_largest_fleet: worst smart served / the oracle's served (the hindsight
  oracle on the cell's own trace and physics, grid/lab/scenario/oracle_strategy.py) on the
  largest fleet; >= 0.9 (a cell's `oracle` entry: its served and bound fractions, status)
- mapping_changes_per_hour: smart's mapping changes per simulated hour on the largest fleet
  (its cells' changes over their hours); <= 10
A gate whose inputs a cell set lacks (hand-made cells without `oracle` or `duration_s`) is
left out of the list.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from grid.lab.oracle import compile_trace, parse_trace, solve_problem
from grid.lab.scenario.lab import run_scenario
from grid.lab.scenario.oracle_bridge import world_document
from grid.lab.scenario.report import document
from grid.lab.scenario.strategies import STRATEGIES
from grid.lab.scenario.world import ScenarioConfig, build_world

CELL_KEYS = (
    "served_fraction",
    "score",
    "least_workload_service",
    "churn",
    "mapping_changes",
    "loads",
    "unloads",
    "startup_s",
    "safety_violations",
)
# name, comparison, threshold
GATES: tuple[tuple[str, str, float], ...] = (
    ("smart_safety", "<=", 0.0),
    ("identical_demand_traces", "<=", 0.0),
    ("score_regression", "<=", 5.0),
    ("service_regression", "<=", 0.03),
    ("median_service_gain_over_static", ">=", 0.02),
    ("churn_vs_greedy", "<=", 0.5),
    ("least_workload_largest_fleet", ">=", -0.05),
    ("startup_savings_over_reactive", ">", 0.0),
    ("median_score_gain_over_static", ">=", 0.0),
    ("median_score_gain_over_greedy", ">=", 0.0),
    ("served_vs_oracle_largest_fleet", ">=", 0.9),
    ("mapping_changes_per_hour", "<=", 10.0),
)
DEFAULT_ORACLE_TIME_LIMIT_S = 10.0


def run_cell(
    machines: int,
    seed: int,
    *,
    models: int,
    users: int,
    duration_s: int,
    oracle_time_limit_s: float | None = None,
) -> dict[str, Any]:
    """Each strategy builds its own world from the seed (no shared state), so the identical-
    trace gate compares what four independent runs actually routed. With
    `oracle_time_limit_s`, the hindsight oracle is solved on the cell's trace too."""
    out: dict[str, Any] = {
        "machines": machines,
        "seed": seed,
        "duration_s": duration_s,
        "strategies": {},
    }
    for name in STRATEGIES:
        cfg = ScenarioConfig(
            machines=machines,
            models=models,
            users=users,
            duration_s=duration_s,
            seed=seed,
            strategy=name,
        )
        doc = document(run_scenario(cfg))
        row = {k: doc["summary"][k] for k in CELL_KEYS}
        row["demand_trace_sha256"] = doc["demand_trace_sha256"]
        out["strategies"][name] = row
    if oracle_time_limit_s is not None:
        cfg = ScenarioConfig(
            machines=machines, models=models, users=users, duration_s=duration_s, seed=seed
        )
        world = build_world(cfg)
        problem = compile_trace(parse_trace(world_document(world)))
        result = solve_problem(problem, oracle_time_limit_s, deterministic=True, mutations=False)
        demand = result.demand or 1.0
        out["oracle"] = {
            "status": result.status,
            "served_fraction": round(result.served / demand, 4),
            "bound_fraction": round(result.bound / demand, 4),
        }
    return out


def _others(cell: dict[str, Any], key: str) -> float:
    return float(max(v[key] for n, v in cell["strategies"].items() if n != "smart"))


def _values(cells: Sequence[dict[str, Any]]) -> dict[str, float]:
    smart = [c["strategies"]["smart"] for c in cells]
    largest = max(c["machines"] for c in cells)
    greedy_churn = sum(c["strategies"]["greedy"]["churn"] for c in cells)
    smart_churn = sum(s["churn"] for s in smart)
    return {
        "smart_safety": float(sum(s["safety_violations"] for s in smart)),
        "identical_demand_traces": float(
            sum(
                len({v["demand_trace_sha256"] for v in c["strategies"].values()}) > 1 for c in cells
            )
        ),
        "score_regression": max(
            _others(c, "score") - c["strategies"]["smart"]["score"] for c in cells
        ),
        "service_regression": max(
            _others(c, "served_fraction") - c["strategies"]["smart"]["served_fraction"]
            for c in cells
        ),
        "median_service_gain_over_static": statistics.median(
            c["strategies"]["smart"]["served_fraction"]
            - c["strategies"]["static"]["served_fraction"]
            for c in cells
        ),
        "churn_vs_greedy": (smart_churn / greedy_churn)
        if greedy_churn
        else (0.0 if smart_churn == 0 else float("inf")),
        "least_workload_largest_fleet": min(
            c["strategies"]["smart"]["least_workload_service"]
            - _others(c, "least_workload_service")
            for c in cells
            if c["machines"] == largest
        ),
        "startup_savings_over_reactive": sum(
            c["strategies"]["reactive"]["startup_s"] - c["strategies"]["smart"]["startup_s"]
            for c in cells
        ),
        "median_score_gain_over_static": statistics.median(
            c["strategies"]["smart"]["score"] - c["strategies"]["static"]["score"] for c in cells
        ),
        "median_score_gain_over_greedy": statistics.median(
            c["strategies"]["smart"]["score"] - c["strategies"]["greedy"]["score"] for c in cells
        ),
        **_oracle_gate(cells, largest),
        **_mapping_gate(cells, largest),
    }


def _oracle_gate(cells: Sequence[dict[str, Any]], largest: int) -> dict[str, float]:
    ratios = [
        c["strategies"]["smart"]["served_fraction"] / c["oracle"]["served_fraction"]
        for c in cells
        if c["machines"] == largest and c.get("oracle", {}).get("served_fraction", 0) > 0
    ]
    return {"served_vs_oracle_largest_fleet": min(ratios)} if ratios else {}


def _mapping_gate(cells: Sequence[dict[str, Any]], largest: int) -> dict[str, float]:
    mine = [c for c in cells if c["machines"] == largest and c.get("duration_s")]
    hours = sum(c["duration_s"] for c in mine) / 3600.0
    if not mine or hours <= 0:
        return {}
    changes = sum(c["strategies"]["smart"].get("mapping_changes", 0) for c in mine)
    return {"mapping_changes_per_hour": changes / hours}


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda v, t: v <= t,
    ">=": lambda v, t: v >= t,
    ">": lambda v, t: v > t,
}


def gates(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if not cells:
        return []
    values = _values(cells)
    out = []
    for name, op, threshold in GATES:
        if name not in values:
            continue
        value = values[name]
        passed = _OPS[op](value, threshold)
        out.append(
            {
                "name": name,
                "passed": passed,
                "value": round(value, 4) if value != float("inf") else "inf",
                "threshold": threshold,
                "comparison": op,
                "miss": 0.0
                if passed or value == float("inf")
                else round(abs(value - threshold), 4),
            }
        )
    return out


def graduate(
    machines: Sequence[int],
    seeds: Sequence[int],
    *,
    models: int,
    users: int,
    duration_s: int,
    progress: Callable[[dict[str, Any]], None] | None = None,
    oracle_time_limit_s: float = DEFAULT_ORACLE_TIME_LIMIT_S,
) -> dict[str, Any]:
    """The oracle is solved on the largest fleet's cells (its gate's input)."""
    cells = []
    largest = max(machines, default=0)
    for n in machines:
        for seed in seeds:
            limit = oracle_time_limit_s if n == largest else None
            cell = run_cell(
                n,
                seed,
                models=models,
                users=users,
                duration_s=duration_s,
                oracle_time_limit_s=limit,
            )
            cells.append(cell)
            if progress is not None:
                progress(cell)
    found = gates(cells)
    return {"passed": all(g["passed"] for g in found), "gates": found, "cells": cells}
