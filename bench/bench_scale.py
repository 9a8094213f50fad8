"""Planner scaling table: both engines, mixed and production-shaped fleets, 64 → 10,000 hosts.

    .venv/bin/python bench/bench_scale.py [--mixed 64,256,1000] [--production 1000,10000]
        [--trace 1213,4278]
        [--time-limit 5] [--limit-at 5000=10,10000=10] [--baseline DIR] [--reference-max 64]
        [--json] [--phases 1000,10000]

`--phases N,...`: instead of whole plans, time the phases outside the solver on production
fleets of N hosts (problem build, quality table, heuristic, vacate), one process per tree,
with a hash of the heuristic's and the vacate pass's placements (equal hashes: same result).

Every row is one fresh process (`--one`) planning one snapshot file with one engine, so its
peak RSS (resource.getrusage) is that plan's alone; the heuristic's row is measured in the
same run next to CP-SAT's. `--baseline DIR`: another checkout (e.g. `git archive` of an older
commit unpacked there) plans the same snapshot files in its own processes, for before/after
figures under the same machine load. Columns: candidates (the per-host model's x variables),
host types and the host-type model's variables (`aggvar`, when the fleet aggregates), wall
(`plan s`: make_plan after the load; `proc s`: the whole child process), status,
whether every replica level is at its bound, and, up to --reference-max hosts, whether the
replica levels equal those of the independent HiGHS lexicographic MILP
(tests/planner/reference.py). Numbers depend on the machine; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
if "--one" not in sys.argv:  # a --one child imports the `grid` of its PYTHONPATH's tree
    sys.path.insert(0, str(HERE))

MIXED_MODELS = {64: 32, 256: 96, 1000: 200, 5000: 400, 10000: 500}
PRODUCTION_MODELS = {64: 20, 256: 60, 1000: 200, 5000: 400, 10000: 500}
# `--trace`: grid lab generate-fleet --shape trace (racks of 32 as failure domains, ten GPU
# types, a third of the models on one type, a third needing two domains): issue 20's fleets.
TRACE_MODELS = {1213: 150, 4278: 300}


def plan_one(path: str, engine: str, time_limit_s: float) -> dict[str, Any]:
    """Plan one snapshot file in this process (the --one child): figures as a dict."""
    started = time.perf_counter()
    from grid.fleet.snapshot import parse_snapshot
    from grid.planner.levels import levels
    from grid.planner.plan import make_plan
    from grid.planner.problem import build_problem

    snap = parse_snapshot(json.loads(Path(path).read_text(encoding="utf-8")))
    loaded = time.perf_counter()
    plan = make_plan(snap, engine=engine, time_limit_s=time_limit_s)
    wall = time.perf_counter() - loaded
    problem = build_problem(snap)
    replica = {lv.name for lv in levels(problem) if lv.replica_level}
    values = {o.level: round(o.value) for o in plan.solver.objective}
    bounds = {o.level: o.bound for o in plan.solver.objective}
    gaps = {
        n: (values[n], bounds[n])
        for n in replica
        if n in values and bounds.get(n) is not None and bounds[n] != values[n]
    }
    out: dict[str, Any] = {
        "engine": engine,
        "status": plan.solver.status,
        "plan_s": round(wall, 2),
        "load_s": round(loaded - started, 2),
        "candidates": len(problem.candidates),
        "placed": len(plan.assignments),
        "replica_levels_proven": engine != "heuristic" and not gaps,
        "open_replica_levels": len(gaps),
        "first_gap": min(gaps.items(), key=lambda kv: _order(problem, kv[0]), default=None),
        "values": {n: values[n] for n in replica if n in values},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    try:  # the host-type model exists from this change on
        from grid.planner.cpsat.aggregate import aggregation_pays
        from grid.planner.types import host_types

        out["types"] = len(host_types(problem))
        out["aggregates"] = aggregation_pays(problem)
        if out["aggregates"]:  # the host-type model's size (built again, after the timing)
            from grid.planner.cpsat.aggregate import _AggregateModel

            built = _AggregateModel(problem, host_types(problem))
            out["agg_vars"] = len(built.model.proto.variables)
    except ImportError:
        pass
    return out


def phases_one(path: str) -> dict[str, Any]:
    """Time the phases outside the solver on one snapshot file (the --phases child)."""
    import hashlib

    from grid.fleet.snapshot import parse_snapshot
    from grid.planner.heuristic import heuristic_placement
    from grid.planner.levels import quality_scores
    from grid.planner.problem import build_problem
    from grid.planner.vacate import vacate_improve

    snap = parse_snapshot(json.loads(Path(path).read_text(encoding="utf-8")))
    out: dict[str, Any] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        out[f"{name}_s"] = round(now - clock, 2)
        clock = now

    try:  # make_plan pauses the cyclic collector from this change on: so do the phases
        from grid.planner.gcpause import gc_paused
    except ImportError:
        gc_paused = contextlib.nullcontext
    with gc_paused():
        problem = build_problem(snap)
        lap("build")
        quality_scores(problem)
        lap("quality")
        greedy = heuristic_placement(problem)
        lap("heuristic")
        improved = vacate_improve(problem, greedy)
        lap("vacate")

    def digest(keys: set[tuple[str, str]]) -> str:
        return hashlib.sha1(repr(sorted(keys)).encode()).hexdigest()[:12]

    out.update(
        candidates=len(problem.candidates),
        placed=f"{len(greedy)}/{len(improved)}",
        digest=f"{digest(greedy)}/{digest(improved)}",
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    )
    return out


def run_phases(args: argparse.Namespace) -> None:
    from grid.lab.fleetgen_production import generate_production_fleet

    trees = [("now", HERE)] + ([("baseline", Path(args.baseline))] if args.baseline else [])
    print(
        f"{'hosts':>6} {'models':>6} {'tree':<8} {'cands':>8} {'build':>6} {'quality':>7} "
        f"{'heur':>6} {'vacate':>6} {'RSS MB':>6} placed (heuristic/vacate) digest"
    )
    with tempfile.TemporaryDirectory() as folder:
        for hosts in (int(h) for h in args.phases.split(",") if h.strip()):
            models = PRODUCTION_MODELS.get(hosts, max(2, hosts // 20))
            path = Path(folder) / f"production-{hosts}.json"
            snap = generate_production_fleet(hosts, models, args.seed)
            path.write_text(
                json.dumps(snap.model_dump(mode="json", exclude_defaults=True)), encoding="utf-8"
            )
            for label, tree in trees:
                argv = [sys.executable, str(HERE / "bench" / "bench_scale.py")]
                argv += ["--one", str(path), "--engine", "phases"]
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    cwd=str(tree),
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    check=False,
                )
                if done.returncode != 0:
                    print(f"{hosts:>6} {models:>6} {label:<8} ERROR {done.stderr[-300:]}")
                    continue
                r = json.loads(done.stdout.strip().splitlines()[-1])
                print(
                    f"{hosts:>6} {models:>6} {label:<8} {r['candidates']:>8} "
                    f"{r['build_s']:>6.2f} {r['quality_s']:>7.2f} {r['heuristic_s']:>6.2f} "
                    f"{r['vacate_s']:>6.2f} {r['peak_rss_mb']:>6} {r['placed']} {r['digest']}",
                    flush=True,
                )


def _order(problem: Any, name: str) -> int:
    from grid.planner.levels import levels

    names = [lv.name for lv in levels(problem)]
    return names.index(name) if name in names else len(names)


def _child(tree: Path, path: Path, engine: str, limit: float) -> dict[str, Any]:
    argv = [sys.executable, str(HERE / "bench" / "bench_scale.py"), "--one", str(path)]
    argv += ["--engine", engine, "--time-limit", str(limit)]
    env_cwd = str(tree)
    started = time.perf_counter()
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=env_cwd,
        env={**os.environ, "PYTHONPATH": env_cwd},
        check=False,
    )
    if done.returncode != 0:
        return {"engine": engine, "error": done.stderr.strip().splitlines()[-1:]}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    row["process_s"] = round(time.perf_counter() - started, 2)
    return row


def _reference(path: Path) -> dict[str, int] | None:
    from grid.fleet.snapshot import parse_snapshot
    from grid.planner.problem import build_problem
    from tests.planner.reference import reference_optimum

    snap = parse_snapshot(json.loads(path.read_text(encoding="utf-8")))
    return dict(reference_optimum(build_problem(snap)).values)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from grid.lab.fleetgen import generate_fleet
    from grid.lab.fleetgen_production import generate_production_fleet
    from grid.lab.fleetgen_trace import generate_trace_fleet

    sizes = [("mixed", int(s)) for s in args.mixed.split(",") if s.strip()]
    sizes += [("production", int(s)) for s in args.production.split(",") if s.strip()]
    sizes += [("trace", int(s)) for s in args.trace.split(",") if s.strip()]
    generators = {
        "mixed": generate_fleet,
        "production": generate_production_fleet,
        "trace": generate_trace_fleet,
    }
    trees = [("now", HERE)] + ([("baseline", Path(args.baseline))] if args.baseline else [])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for shape, hosts in sizes:
            table = {"mixed": MIXED_MODELS, "trace": TRACE_MODELS}.get(shape, PRODUCTION_MODELS)
            models = table.get(hosts, max(2, hosts // 20))
            print(f"{shape} {hosts} x {models} ...", file=sys.stderr, flush=True)
            snap = generators[shape](hosts, models, args.seed)
            path = Path(folder) / f"{shape}-{hosts}.json"
            path.write_text(
                json.dumps(snap.model_dump(mode="json", exclude_defaults=True)), encoding="utf-8"
            )
            ref = _reference(path) if hosts <= args.reference_max else None
            limits = dict(
                (int(h), float(v))
                for h, v in (kv.split("=") for kv in args.limit_at.split(",") if kv.strip())
            )
            limit = limits.get(hosts, args.time_limit)
            for label, tree in trees:
                for engine in ("heuristic", "cpsat"):
                    row = _child(tree, path, engine, limit)
                    row["limit_s"] = limit
                    row.update({"shape": shape, "hosts": hosts, "models": models, "tree": label})
                    if ref is not None and "values" in row:
                        row["equals_reference"] = all(
                            row["values"].get(n) == v for n, v in ref.items()
                        )
                    rows.append(row)
    return rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'shape':<10} {'hosts':>5} {'models':>6} {'tree':<8} {'engine':<9} {'cands':>8} "
        f"{'types':>5} {'aggvar':>6} {'limit':>5} {'plan s':>7} {'proc s':>7} {'RSS MB':>7} "
        f"{'status':<18} "
        f"{'proven':<6} {'open':>4} {'=ref':<5} first gap (value/bound)"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f} (2-core machine, shared)")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:<10} {r['hosts']:>5} {r['models']:>6} {r['tree']:<8} ERROR {r}")
            continue
        ref = r.get("equals_reference")
        gap = r.get("first_gap")
        print(
            f"{r['shape']:<10} {r['hosts']:>5} {r['models']:>6} {r['tree']:<8} {r['engine']:<9} "
            f"{r['candidates']:>8} {r.get('types', '-')!s:>5} {r.get('agg_vars', '-')!s:>6} "
            f"{r['limit_s']:>5g} "
            f"{r['plan_s']:>7.2f} "
            f"{r['process_s']:>7.2f} {r['peak_rss_mb']:>7} {r['status']:<18} "
            f"{'yes' if r['replica_levels_proven'] else 'no':<6} {r['open_replica_levels']:>4} "
            f"{'-' if ref is None else ('yes' if ref else 'NO'):<5} "
            f"{'' if gap is None else f'{gap[0]} {gap[1][0]}/{gap[1][1]:g}'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mixed", default="64,256,1000", help="host counts, generated fleets")
    parser.add_argument(
        "--production", default="1000", help="host counts, production-shaped fleets"
    )
    parser.add_argument(
        "--trace", default="", help="host counts, trace-shaped fleets (racks, GPU types)"
    )
    parser.add_argument("--time-limit", type=float, default=5.0, help="grid plan budget (s)")
    parser.add_argument(
        "--limit-at",
        default="5000=10,10000=10",
        help="HOSTS=SECONDS,...: a --time-limit for fleets of that many hosts",
    )
    parser.add_argument("--seed", type=int, default=7, help="fleet generator seed")
    parser.add_argument("--baseline", help="another checkout planning the same files")
    parser.add_argument(
        "--reference-max", type=int, default=64, help="largest fleet given the HiGHS reference"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--phases", help="production host counts: time build/quality/heuristic/vacate only"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="cpsat", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        if args.engine == "phases":
            print(json.dumps(phases_one(args.one)))
        else:
            print(json.dumps(plan_one(args.one, args.engine, args.time_limit)))
        return 0
    if args.phases:
        run_phases(args)
        return 0
    rows = run(args)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_rows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
