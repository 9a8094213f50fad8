"""Predictive cache payoff in the scenario lab: smart (workflow learning + cache-only prefetch)
against reactive (no prediction, no prefetch), the baseline, on the same worlds in one run.

    .venv/bin/python bench/bench_prefetch.py [--machines 2,4,8] [--seeds 42,144]
                                             [--models 8] [--users 50] [--duration 7200] [--json]

Every cell is a seeded workday whose creative-campaign phase carries image -> video campaign
sessions (grid/lab/scenario/personas.py, one affinity key per user), the graduate matrix's
cells by default. Per cell both strategies run on the same world (identical demand trace, shown
by its digest) and the bench prints the smart run's prefetch scorecard (the scenario report's
`prefetch` section: downloads, hits, hit rate, unused, expired/replaced with the reclaimed MB,
mean lead, avoided load seconds) beside both strategies' startup seconds and cold starts.
The goal per cell: hit rate >= 60 %, avoided load seconds reported, smart's startup seconds
below reactive's. Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.lab.scenario import ScenarioConfig, build_world, document, run_scenario


def cell(machines: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    cfg = ScenarioConfig(
        machines=machines,
        models=args.models,
        users=args.users,
        duration_s=args.duration,
        seed=seed,
    )
    world = build_world(cfg)
    out: dict[str, Any] = {"machines": machines, "seed": seed}
    for strategy in ("reactive", "smart"):
        started = time.perf_counter()
        doc = document(run_scenario(dataclasses.replace(cfg, strategy=strategy), world))
        out[strategy] = {
            "wall_s": round(time.perf_counter() - started, 1),
            "trace": doc["demand_trace_sha256"][:12],
            "startup_s": doc["summary"]["startup_s"],
            "cold_starts": doc["summary"]["cold_starts"],
            "served_fraction": doc["summary"]["served_fraction"],
            "prefetch": doc["prefetch"],
        }
    smart, reactive = out["smart"], out["reactive"]
    rate = smart["prefetch"]["hit_rate"]
    out["goal_met"] = (
        rate is not None
        and rate >= 0.6
        and smart["prefetch"]["avoided_load_s"] is not None
        and smart["startup_s"] < reactive["startup_s"]
        and smart["trace"] == reactive["trace"]
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machines", default="2,4,8")
    parser.add_argument("--seeds", default="42,144")
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=int, default=7200, help="seconds of simulated day")
    parser.add_argument("--json", action="store_true", help="print the cells as JSON")
    args = parser.parse_args()
    cells = [
        cell(int(m), int(s), args) for m in args.machines.split(",") for s in args.seeds.split(",")
    ]
    if args.json:
        print(json.dumps(cells, indent=2))
        return
    print(
        f"{'mach':>4} {'seed':>4} {'dl':>3} {'hits':>4} {'rate':>5} {'unused':>6} "
        f"{'exp':>3} {'repl':>4} {'recl MB':>7} {'lead s':>6} {'avoid s':>7} "
        f"{'smart st s':>10} {'react st s':>10} {'smart cold':>10} {'react cold':>10}  goal"
    )
    for c in cells:
        p, s, r = c["smart"]["prefetch"], c["smart"], c["reactive"]
        rate = "-" if p["hit_rate"] is None else f"{p['hit_rate']:.0%}"
        lead = "-" if p["mean_lead_s"] is None else f"{p['mean_lead_s']:.0f}"
        print(
            f"{c['machines']:>4} {c['seed']:>4} {p['downloads']:>3} {p['hits']:>4} {rate:>5} "
            f"{p['unused']:>6} {p['expired']:>3} {p['replaced']:>4} {p['reclaimed_mb']:>7} "
            f"{lead:>6} {p['avoided_load_s']:>7.0f} {s['startup_s']:>10.0f} "
            f"{r['startup_s']:>10.0f} {s['cold_starts']:>10} {r['cold_starts']:>10}  "
            f"{'met' if c['goal_met'] else 'MISSED'}"
        )
    print(f"reactive prefetch downloads: {[c['reactive']['prefetch']['downloads'] for c in cells]}")
    print(f"cells meeting the goal: {sum(c['goal_met'] for c in cells)}/{len(cells)}")


if __name__ == "__main__":
    main()
