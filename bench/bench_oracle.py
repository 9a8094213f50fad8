"""Oracle benchmark: CP-SAT next to the greedy baseline on seeded generated workday traces.

    .venv/bin/python bench/bench_oracle.py [--sizes 4x9x240,8x12x480,16x12x480]
        [--time-limit 60] [--seed 42] [--deterministic] [--json]

Per size (hosts × models × minutes) it prints, for the greedy schedule and for the oracle
(`solve_oracle`, whose time covers greedy, bounds, model build and search), the wall time, the
status, served, the proven upper bound, the gap (bound − served) / bound, and mutations. Both
rows share one bound (the oracle's), so the greedy gap reads off the same scale. The goal from
issue 10: 16 × 12 × 480 in ≤ 60 s with gap ≤ 2%. Nothing here asserts on time; the figures
depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.lab.oracle import compile_trace, generate_trace, greedy_schedule, replay, solve_oracle


def _size(text: str) -> tuple[int, int, int]:
    hosts, models, minutes = (int(x) for x in text.lower().split("x"))
    return hosts, models, minutes


def bench(size: tuple[int, int, int], seed: int, limit: float, deterministic: bool) -> dict:
    hosts, models, minutes = size
    trace = generate_trace(hosts, models, minutes, seed)
    problem = compile_trace(trace)
    started = time.perf_counter()
    greedy = replay(problem, greedy_schedule(problem))
    greedy_s = time.perf_counter() - started
    result = solve_oracle(trace, limit, deterministic)
    bound = result.bound
    greedy_served = greedy.total / problem.scale
    return {
        "size": f"{hosts}x{models}x{minutes}",
        "seed": seed,
        "demand": result.demand,
        "bound": bound,
        "greedy": {
            "wall_s": round(greedy_s, 2),
            "served": greedy_served,
            "gap": (bound - greedy_served) / bound if bound else 0.0,
            "mutations": greedy.mutations,
        },
        "oracle": {
            "wall_s": result.wall_s,
            "status": result.status,
            "engine": result.engine,
            "served": result.served,
            "gap": result.gap,
            "mutations": result.mutations,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4x9x240,8x12x480,16x12x480", help="HxMxT,...")
    parser.add_argument("--time-limit", type=float, default=60.0, help="oracle budget, seconds")
    parser.add_argument("--seed", type=int, default=42, help="trace generator seed")
    parser.add_argument("--deterministic", action="store_true", help="deterministic budget")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    rows = [
        bench(_size(s), args.seed, args.time_limit, args.deterministic)
        for s in args.sizes.split(",")
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    head = f"{'size':<11} {'engine':<7} {'wall_s':>7} {'status':<9} {'served':>11} "
    head += f"{'bound':>11} {'gap':>7} {'mutations':>9}"
    print(f"oracle bench, seed {args.seed}, time limit {args.time_limit:g} s")
    print(head)
    for row in rows:
        g, o = row["greedy"], row["oracle"]
        print(
            f"{row['size']:<11} {'greedy':<7} {g['wall_s']:>7.2f} {'-':<9} {g['served']:>11.3f} "
            f"{row['bound']:>11.3f} {g['gap']:>7.2%} {g['mutations']:>9}"
        )
        print(
            f"{'':<11} {'oracle':<7} {o['wall_s']:>7.2f} {o['status']:<9} {o['served']:>11.3f} "
            f"{row['bound']:>11.3f} {o['gap']:>7.2%} {o['mutations']:>9}"
        )


if __name__ == "__main__":
    main()
