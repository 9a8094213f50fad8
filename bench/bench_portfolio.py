"""Portfolio benchmark: joint CP-SAT portfolio + placement vs the bounded coordinate search.

    .venv/bin/python bench/bench_portfolio.py [--sizes 16x12,64x32] [--seeds 1,2,3] [--json]

Fleets come from grid.lab.fleetgen (seeded); each model gets its generated workload score plus,
seeded, one or two more words, and the nine workloads of the default vocabulary get seeded
forecasts (some below the evidence gate, one image workload in the canary band) and outcomes.
Per fleet it prints the base plan's wall time, then, on the same portfolio context, the
coordinate search's and CP-SAT's wall time and status, and the lexicographic comparison of the
two portfolios' level values (score.evaluate). Numbers depend on the machine; nothing asserts.

    .venv/bin/python bench/bench_portfolio.py --production 256x60,1000x200 --seeds 64

Production-shaped fleets (grid/lab/fleetgen_production.py, direct demand scaled by
PRODUCTION_DEMAND_SHARE, workloads added as above): per fleet the per-host CP-SAT model, the
host-type model (grid/planner/portfolio/typed.py) and the coordinate search in one run, each
with its model size (variables), wall time, status and level values; the load average before
and after each fleet (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.fleet.snapshot import parse_snapshot
from grid.fleet.workloads import DEFAULT_WORKLOAD_VOCABULARY
from grid.lab.fleetgen import fleet_document
from grid.lab.fleetgen_production import production_document
from grid.planner.plan import make_plan
from grid.planner.portfolio import build_context, compare, coordinate_search, evaluate
from grid.planner.portfolio.hosttypes import aggregation_pays, portfolio_types
from grid.planner.portfolio.solve import CpsatResult, solve_after_search, solve_portfolio

WORDS = {1: "cpsat better", 0: "equal", -1: "cpsat WORSE"}
PRODUCTION_DEMAND_SHARE = 0.25  # of the generated direct demand: the base plan leaves room


def workload_document(hosts: int, models: int, seed: int) -> dict[str, Any]:
    return with_workloads(fleet_document(hosts, models, seed), hosts, seed)


def production_workload_document(
    hosts: int, models: int, seed: int, demand_share: float = PRODUCTION_DEMAND_SHARE
) -> dict[str, Any]:
    """A production-shaped fleet (grid/lab/fleetgen_production.py: few machine shapes, so
    hosts aggregate) with its direct demand scaled by `demand_share` (the generator asks for
    more replicas than the fleet holds, which would leave the portfolio no room), and
    workloads added as for the generated fleets."""
    doc = production_document(hosts, models, seed)
    for entry in doc["demand"].values():
        entry["offered_concurrency"] = round(entry["offered_concurrency"] * demand_share, 2)
        entry["rpm"] = round(entry["rpm"] * demand_share, 1)
    return with_workloads(doc, hosts, seed)


def with_workloads(doc: dict[str, Any], hosts: int, seed: int) -> dict[str, Any]:
    """Seeded workload scores (one or two more words per model), forecasts for the nine words
    of the default vocabulary (some below the evidence gate, image in the canary band) and
    outcomes."""
    rng = random.Random(seed * 7919 + 1)
    vocabulary = list(DEFAULT_WORKLOAD_VOCABULARY)
    for m in doc["models"]:
        scores = m.setdefault("workload_scores", {})
        for word in rng.sample(vocabulary, rng.choice([1, 1, 2])):
            scores.setdefault(word, round(rng.uniform(0.2, 0.9), 2))
    workloads: dict[str, Any] = {}
    for i, word in enumerate(vocabulary):
        observations = rng.choice([0, 1, 2, 3, 5, 12, 40])
        offered = round(rng.uniform(0.1, 3.0) * max(1.0, hosts / 32), 2)
        if word == "image":
            observations, offered = 2, 1.2  # the media canary band
        workloads[word] = {
            "offered_concurrency": offered,
            "observations": observations,
            "rpm": round(observations / 5, 2),
            "queue_depth": rng.choice([0, 0, 0, 1]) if i % 3 else 0,
            "modality": "image" if word == "image" else "video" if word == "video" else "text",
        }
    doc["workloads"] = workloads
    outcomes = []
    for m in doc["models"]:
        for word in sorted(m["workload_scores"]):
            if rng.random() < 0.3:
                requests = rng.choice([2, 8, 25])
                outcomes.append(
                    {
                        "model_id": m["model_id"],
                        "workload": word,
                        "artifact_sha256": m.get("artifact_sha256"),
                        "requests": requests,
                        "successes": requests - rng.choice([0, 0, 1]),
                        "mean_latency_ms": 900,
                        "age_s": rng.choice([30, 4000, 400000]),
                        "quality": round(rng.uniform(0.4, 1.0), 2),
                        "quality_samples": rng.choice([0, 3, 8]),
                        "quality_age_s": 60,
                    }
                )
    doc["outcomes"] = outcomes
    return doc


def run_one(hosts: int, models: int, seed: int, time_limit: float) -> dict[str, Any]:
    snap = parse_snapshot(workload_document(hosts, models, seed))
    base_snap = snap.model_copy(update={"workloads": {}})
    started = time.perf_counter()
    base = make_plan(base_snap, time_limit_s=5.0, deterministic=True)
    base_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    ctx = build_context(snap, base)
    context_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    search = coordinate_search(ctx)
    search_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    result = solve_after_search(ctx, search, time_limit, aggregate=False)
    cpsat_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    cold = solve_portfolio(  # the same model without the search's hint
        ctx,
        hint_mapping={},
        hint_placement=set(ctx.base_keys),
        time_limit_s=time_limit,
        deterministic=True,
    )
    cold_ms = (time.perf_counter() - started) * 1000
    search_values = evaluate(ctx, search.mapping, search.placement)
    cold_cmp = (
        "n/a"
        if cold is None
        else WORDS[compare(evaluate(ctx, cold.mapping, cold.placement), search_values)]
    )
    if result is None:
        status, comparison, cp_values = "NONE", "n/a", {}
    else:
        cp_values = evaluate(ctx, result.mapping, result.placement)
        status, comparison = result.status, WORDS[compare(cp_values, search_values)]
    return {
        "hosts": hosts,
        "models": models,
        "workloads": len(snap.workloads),
        "seed": seed,
        "admitted": len(ctx.admitted),
        "variables": len(ctx.variable_keys()),
        "base_ms": round(base_ms, 1),
        "context_ms": round(context_ms, 1),
        "search_ms": round(search_ms, 1),
        "search_portfolios": search.evaluated,
        "cpsat_ms": round(cpsat_ms, 1),
        "cpsat_status": status,
        "comparison": comparison,
        "unhinted_ms": round(cold_ms, 1),
        "unhinted_status": "NONE" if cold is None else cold.status,
        "unhinted_comparison": cold_cmp,
        "search_levels": search_values,
        "cpsat_levels": cp_values,
    }


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _engine(ctx: Any, result: CpsatResult | None, wall_s: float) -> dict[str, Any]:
    if result is None:
        return {"status": "NONE", "wall_s": round(wall_s, 2), "variables": 0, "levels": {}}
    note = "" if not result.aggregated_hosts else "packed" if result.exact else "NOT packed"
    if result.fallback:
        note = "fallback"
    proven = sum(1 for _stage, status in result.stage_status if status == "OPTIMAL")
    note = f"{note} {proven}/{len(result.stage_status)}".strip()
    return {
        "status": result.status,
        "wall_s": round(wall_s, 2),
        "variables": result.variables,
        "note": note,
        "levels": evaluate(ctx, result.mapping, result.placement),
    }


def run_production(hosts: int, models: int, seed: int, time_limit: float) -> dict[str, Any]:
    """Per-host model, host-type model and coordinate search on one production-shaped fleet."""
    load_before = _load()
    snap = parse_snapshot(production_workload_document(hosts, models, seed))
    started = time.perf_counter()
    base = make_plan(
        snap.model_copy(update={"workloads": {}}), time_limit_s=10.0, deterministic=True
    )
    base_s = time.perf_counter() - started
    ctx = build_context(snap, base)
    started = time.perf_counter()
    types = portfolio_types(ctx)
    types_s = time.perf_counter() - started
    started = time.perf_counter()
    search = coordinate_search(ctx)
    search_s = time.perf_counter() - started
    engines: dict[str, Any] = {
        "search": {
            "status": "HEURISTIC",
            "wall_s": round(search_s, 2),
            "variables": 0,
            "note": f"{search.evaluated} portfolios",
            "levels": search.values,
        }
    }
    for name, aggregate in (("per-host", False), ("host-types", True)):
        started = time.perf_counter()
        result = solve_after_search(ctx, search, time_limit, aggregate=aggregate)
        engines[name] = _engine(ctx, result, time.perf_counter() - started)
    return {
        "shape": "production",
        "hosts": hosts,
        "models": models,
        "seed": seed,
        "admitted": len(ctx.admitted),
        "candidate_models": len(ctx.candidate_models),
        "free_keys": sum(1 for k in ctx.variable_keys() if k not in ctx.base_keys),
        "types": len(types),
        "aggregated_hosts": sum(t.count for t in types),
        "pays": aggregation_pays(ctx, types),
        "base_s": round(base_s, 2),
        "types_s": round(types_s, 3),
        "engines": engines,
        "load": f"{load_before} -> {_load()}",
    }


def print_production(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'fleet':>16} {'seed':>4} {'adm':>3} {'cand':>4} {'keys':>6} {'types':>5} "
        f"{'agg':>5} {'engine':>10} {'vars':>6} {'wall s':>7} {'status':>9} {'note':>14}  "
        "levels (covered failures pressure spare missing utility) / vs per-host"
    )
    for r in rows:
        fleet = f"prod {r['hosts']}x{r['models']}"
        ref = r["engines"]["per-host"]["levels"]
        for name, e in r["engines"].items():
            lv = e["levels"]
            shown = " ".join(str(lv.get(k, "-")) for k in LEVEL_NAMES)
            cmp = WORDS[compare(lv, ref)] if lv and ref else "n/a"
            print(
                f"{fleet:>16} {r['seed']:>4} {r['admitted']:>3} {r['candidate_models']:>4} "
                f"{r['free_keys']:>6} {r['types']:>5} {r['aggregated_hosts']:>5} {name:>10} "
                f"{e['variables']:>6} {e['wall_s']:>7} {e['status']:>9} {e.get('note', ''):>14}  "
                f"{shown} / {cmp.replace('cpsat', 'this')}"
            )
        print(
            f"{'':>16} base plan {r['base_s']} s, grouping {r['types_s']} s, pays {r['pays']}, "
            f"load average {r['load']}"
        )


LEVEL_NAMES = ("covered", "failures", "pressure", "spare_slots", "missing", "utility")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16x12,64x32", help="HOSTSxMODELS, comma separated")
    parser.add_argument("--seeds", default="1,2,3", help="fleet seeds, comma separated")
    parser.add_argument("--time-limit", type=float, default=5.0, help="CP-SAT budget (s)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--production",
        default="",
        help="HOSTSxMODELS production-shaped fleets (e.g. 256x60,1000x200): per-host model, "
        "host-type model and coordinate search; skips the generated fleets",
    )
    args = parser.parse_args()
    if args.production:
        sizes = [tuple(int(x) for x in size.split("x")) for size in args.production.split(",")]
        found = [
            run_production(hosts, models, seed, args.time_limit)
            for hosts, models in sizes
            for seed in (int(s) for s in args.seeds.split(","))
        ]
        if args.json:
            print(json.dumps(found, indent=2))
        else:
            print_production(found)
        return
    rows = []
    for size in args.sizes.split(","):
        hosts, models = (int(x) for x in size.split("x"))
        for seed in (int(s) for s in args.seeds.split(",")):
            rows.append(run_one(hosts, models, seed, args.time_limit))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    head = (
        f"{'fleet':>12} {'seed':>4} {'adm':>3} {'vars':>5} {'base ms':>8} {'ctx ms':>7} "
        f"{'search ms':>9} {'n':>3} {'cpsat ms':>9} {'status':>8} {'unhinted':>9} "
        f"{'status':>8}  cpsat vs search (hinted / unhinted)"
    )
    print(head)
    for r in rows:
        fleet = f"{r['hosts']}x{r['models']}x{r['workloads']}"
        print(
            f"{fleet:>12} {r['seed']:>4} {r['admitted']:>3} {r['variables']:>5} "
            f"{r['base_ms']:>8} {r['context_ms']:>7} {r['search_ms']:>9} "
            f"{r['search_portfolios']:>3} {r['cpsat_ms']:>9} {r['cpsat_status']:>8} "
            f"{r['unhinted_ms']:>9} {r['unhinted_status']:>8}  "
            f"{r['comparison']} / {r['unhinted_comparison']}"
        )
        diff = [k for k in r["search_levels"] if r["search_levels"][k] != r["cpsat_levels"].get(k)]
        if diff:
            parts = [
                f"{k}: search {r['search_levels'][k]} cpsat {r['cpsat_levels'].get(k)}"
                for k in diff
            ]
            print(" " * 14 + "; ".join(parts))


if __name__ == "__main__":
    main()
