"""Planner benchmark: both engines on generated fleets of growing size (prints figures only).

    .venv/bin/python bench/bench_planner.py [--sizes 8,64,256,1000] [--time-limit 5] [--json]
    .venv/bin/python bench/bench_planner.py --process [--runs 3] [--time-limit 5] [--baseline DIR]
        [--shape mixed|production|trace] [--hosts 1000] [--models 200]

`--process` times whole `grid plan SNAPSHOT --time-limit S --json` processes, fork to exit
(interpreter start, imports, snapshot load, problem build, solve, staging, explanations,
validation, output: what the limit promises, docs/plan-time-limit.md), on a generated fleet
(default mixed 1,000 hosts x 200 models; `--shape production --hosts 10000 --models 500` for
issue 12's goal, `--shape trace --hosts 4278 --models 300` for issue 20's), next to the
heuristic engine's process, the imports alone and a bare `python -c pass`, in the same run.
Each run prints the load average before it, the wall, the process's own peak RSS, the plan's
status and its open replica levels.

Per size it prints the heuristic's and CP-SAT's wall time, CP-SAT's status, whether CP-SAT
proved every replica level (value equals bound), the lexicographic comparison of the two plans'
level values, each level's gap to the solver's bound, and the validator's verdict on both plans.
Numbers depend on the machine; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.fleet.models import FleetSnapshot, Plan
from grid.lab.fleetgen import generate_fleet
from grid.planner.levels import compare, levels
from grid.planner.plan import make_plan
from grid.planner.problem import build_problem
from grid.planner.validate import violations

MODELS_FOR_HOSTS = {8: 6, 64: 32, 256: 96, 1000: 200}
COMPARE_WORDS = {1: "cpsat better", 0: "equal", -1: "cpsat WORSE"}


@dataclass
class SizeResult:
    hosts: int
    models: int
    seed: int
    candidates: int
    desired_replicas: int
    heuristic_ms: float
    cpsat_ms: float
    cpsat_engine: str
    cpsat_status: str
    replica_levels_proven: bool
    comparison: str  # cpsat vs heuristic, all levels
    replica_comparison: str  # cpsat vs heuristic, replica levels only
    placed_heuristic: int
    placed_cpsat: int
    heuristic_violations: list[str]
    cpsat_violations: list[str]
    levels: list[dict[str, object]] = field(default_factory=list)


def models_for(hosts: int) -> int:
    if hosts in MODELS_FOR_HOSTS:
        return MODELS_FOR_HOSTS[hosts]
    return max(2, round(hosts * 0.2 + 4))  # between the published points


def _values(plan: Plan) -> dict[str, int]:
    return {lv.level: round(lv.value) for lv in plan.solver.objective}


def bench_size(hosts: int, seed: int, time_limit_s: float, deterministic: bool) -> SizeResult:
    models = models_for(hosts)
    snap: FleetSnapshot = generate_fleet(hosts, models, seed)
    problem = build_problem(snap)
    started = time.perf_counter()
    heuristic = make_plan(snap, engine="heuristic")
    heuristic_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    cpsat = make_plan(snap, engine="cpsat", time_limit_s=time_limit_s, deterministic=deterministic)
    cpsat_ms = (time.perf_counter() - started) * 1000

    cp_values, h_values = _values(cpsat), _values(heuristic)
    bounds = {lv.level: lv.bound for lv in cpsat.solver.objective}
    level_rows: list[dict[str, object]] = []
    proven = True
    for level in levels(problem):
        value = cp_values.get(level.name, 0)
        bound = bounds.get(level.name, float(value))
        gap = abs(bound - value)
        if level.replica_level and gap != 0:
            proven = False
        level_rows.append(
            {
                "level": level.name,
                "replica_level": level.replica_level,
                "cpsat": value,
                "heuristic": h_values.get(level.name, 0),
                "bound": bound,
                "gap": gap,
            }
        )
    proven = proven and cpsat.solver.engine == "cp-sat"
    return SizeResult(
        hosts=hosts,
        models=models,
        seed=seed,
        candidates=len(problem.candidates),
        desired_replicas=sum(t.desired for t in problem.targets.values()),
        heuristic_ms=round(heuristic_ms, 1),
        cpsat_ms=round(cpsat_ms, 1),
        cpsat_engine=cpsat.solver.engine,
        cpsat_status=cpsat.solver.status,
        replica_levels_proven=proven,
        comparison=COMPARE_WORDS[compare(problem, cp_values, h_values)],
        replica_comparison=COMPARE_WORDS[
            compare(problem, cp_values, h_values, replica_levels_only=True)
        ],
        placed_heuristic=len(heuristic.assignments),
        placed_cpsat=len(cpsat.assignments),
        heuristic_violations=[f"{v.code}: {v.message}" for v in violations(snap, heuristic)],
        cpsat_violations=[f"{v.code}: {v.message}" for v in violations(snap, cpsat)],
        levels=level_rows,
    )


def _verdict(found: list[str]) -> str:
    return "valid" if not found else f"INVALID ({len(found)})"


def print_table(results: list[SizeResult], *, all_levels: bool = False) -> None:
    head = (
        f"{'hosts':>5} {'models':>6} {'cands':>6} {'want':>5} {'heur ms':>8} {'cpsat ms':>9} "
        f"{'status':<18} {'proven':<6} {'vs heuristic':<13} {'replicas vs h':<13} "
        f"{'placed h/c':>10} {'validate h/c'}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.hosts:>5} {r.models:>6} {r.candidates:>6} {r.desired_replicas:>5} "
            f"{r.heuristic_ms:>8.1f} {r.cpsat_ms:>9.1f} {r.cpsat_status:<18} "
            f"{'yes' if r.replica_levels_proven else 'no':<6} {r.comparison:<13} "
            f"{r.replica_comparison:<13} "
            f"{r.placed_heuristic:>4}/{r.placed_cpsat:<5} "
            f"{_verdict(r.heuristic_violations)}/{_verdict(r.cpsat_violations)}"
        )
    for r in results:
        shown = [
            row
            for row in r.levels
            if all_levels or row["gap"] != 0 or row["cpsat"] != row["heuristic"]
        ]
        proven = sum(1 for row in r.levels if row["gap"] == 0)
        print(
            f"\nlevels at {r.hosts} hosts: {proven} of {len(r.levels)} at their bound"
            + ("" if all_levels else f"; {len(shown)} open or differing shown")
            + " (cpsat / heuristic / bound, gap):"
        )
        for row in shown:
            mark = "*" if row["replica_level"] else " "
            print(
                f"  {mark} {row['level']:<22} {row['cpsat']:>9} {row['heuristic']:>9} "
                f"{row['bound']:>11g}  gap {row['gap']:g}"
            )
        for found in r.heuristic_violations + r.cpsat_violations:
            print(f"  violation: {found}")
    print("\n* replica levels (pinned, per-class baseline/direct/inferred)")


PROCESS_HOSTS, PROCESS_MODELS = 1000, 200
# What every `grid plan` process imports before it plans (the CLI, the models, the planner).
IMPORTS = "import grid.cli.main, grid.cli.plan_cmd, grid.planner.plan"


@dataclass
class ProcessRun:
    wall_s: float
    rss_mb: int
    load: float  # 1-minute load average just before the run
    exit_code: int
    status: str = ""
    open_replica_levels: int = 0
    first_gap: str = ""


def _replica_level(name: str) -> bool:
    """levels.py's replica levels: pinned and the per-priority-class ones (pP:...)."""
    return name == "pinned" or re.match(r"p\d+:", name) is not None


def _run(argv: list[str], cwd: str, plan: bool = False) -> ProcessRun:
    """One whole process: wall (fork to exit), its peak RSS (GNU time's %M where installed,
    else wait4, which counts this bench's own ~100 MB too), and for a plan its status and the
    replica levels whose value is below the bound (the first one in plan order)."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as rss:
        env = {**os.environ, "PYTHONPATH": cwd}
        timed = (
            ["/usr/bin/time", "-f", "%M", "-o", rss.name] if Path("/usr/bin/time").exists() else []
        )
        started = time.perf_counter()
        child = subprocess.Popen(
            [*timed, *argv], stdout=out, stderr=subprocess.DEVNULL, cwd=cwd, env=env
        )
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        peak_kb = int(rss.read().strip().splitlines()[-1]) if timed else usage.ru_maxrss
        run = ProcessRun(wall, round(peak_kb / 1024), load, os.waitstatus_to_exitcode(status))
        if plan and run.exit_code == 0:
            out.seek(0)
            solver = json.loads(out.read())["solver"]
            gaps = [
                f"{lv['level']} {lv['value']:g}/{lv['bound']:g}"
                for lv in solver["objective"]
                if _replica_level(lv["level"]) and lv["bound"] != lv["value"]
            ]
            run.status, run.open_replica_levels = solver["status"], len(gaps)
            run.first_gap = gaps[0] if gaps else ""
    return run


def _fleet(folder: Path, shape: str, hosts: int, models: int, seed: int) -> Path:
    """`grid lab generate-fleet` in its own process (this one stays small: see `_run`)."""
    path = folder / f"{shape}-{hosts}.json"
    generate = [sys.executable, "-m", "grid", "lab", "generate-fleet", "--shape", shape]
    generate += ["--hosts", str(hosts), "--models", str(models), "--seed", str(seed)]
    subprocess.run([*generate, "-o", str(path)], check=True, capture_output=True)
    return path


def bench_process(
    seed: int,
    time_limit_s: float,
    runs: int,
    baseline: str | None = None,
    *,
    shape: str = "mixed",
    hosts: int = PROCESS_HOSTS,
    models: int = PROCESS_MODELS,
) -> dict[str, object]:
    """Whole `grid plan FLEET --time-limit S --json` processes, the wall a user sees (fork to
    exit, the interpreter start included, which the limit promises), next to the heuristic
    engine's process, the imports alone and a bare interpreter, in the same run.

    `baseline`: another checkout (e.g. `git archive` of an older commit unpacked there); its
    processes run from there (PYTHONPATH and the working directory), alternating run by run
    with this checkout's, so both see the same machine load. Both plan the same file."""
    python = sys.executable
    here = str(Path(__file__).resolve().parent.parent)
    trees = [("now", here)] + ([("baseline", baseline)] if baseline else [])
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as folder:
        fleet = _fleet(Path(folder), shape, hosts, models, seed)
        plan = [python, "-m", "grid", "plan", str(fleet), "--time-limit", f"{time_limit_s:g}"]
        commands = [
            ("python -c pass", [python, "-c", "pass"], False),
            ("imports (CLI, models, planner)", [python, "-c", IMPORTS], False),
            (
                "grid plan --engine heuristic --json",
                [*plan, "--engine", "heuristic", "--json"],
                True,
            ),
            (f"grid plan --time-limit {time_limit_s:g} --json", [*plan, "--json"], True),
        ]
        for name, argv, is_plan in commands:
            results: dict[str, list[ProcessRun]] = {label: [] for label, _ in trees}
            for _ in range(runs):
                for label, cwd in trees:
                    results[label].append(_run(argv, cwd, is_plan))
            for label, _cwd in trees:
                if label != "now" and not is_plan:
                    continue  # the interpreter and the imports: this tree's only
                rows.append(
                    {"tree": label, "process": name, "runs": [asdict(r) for r in results[label]]}
                )
    cpsat = [r for r in rows if str(r["process"]).startswith("grid plan --time")]
    slowest = {str(r["tree"]): max(run["wall_s"] for run in r["runs"]) for r in cpsat}
    return {
        "shape": shape,
        "hosts": hosts,
        "models": models,
        "seed": seed,
        "time_limit_s": time_limit_s,
        "rows": rows,
        "slowest_wall_s": slowest,
        "promise_kept": {tree: wall <= time_limit_s for tree, wall in slowest.items()},
    }


def print_process(result: dict[str, object]) -> None:
    print(
        f"whole processes, {result['shape']} fleet of {result['hosts']} hosts x "
        f"{result['models']} models (seed {result['seed']}), --time-limit "
        f"{result['time_limit_s']:g}; wall = fork to exit, interpreter start included"
    )
    print(
        f"{'tree':<9} {'process':<38} {'run':>3} {'load':>5} {'wall s':>7} {'RSS MB':>7} "
        f"{'exit':>4}  {'status':<18} {'open':>4}  first gap (value/bound)"
    )
    rows = result["rows"]
    assert isinstance(rows, list)
    for row in rows:
        for index, run in enumerate(row["runs"], 1):
            print(
                f"{row['tree']:<9} {row['process']:<38} {index:>3} {run['load']:>5.2f} "
                f"{run['wall_s']:>7.2f} {run['rss_mb']:>7} {run['exit_code']:>4}  "
                f"{run['status']:<18} {run['open_replica_levels'] if run['status'] else '':>4}  "
                f"{run['first_gap']}"
            )
    slowest = result["slowest_wall_s"]
    kept = result["promise_kept"]
    assert isinstance(slowest, dict) and isinstance(kept, dict)
    for tree, wall in slowest.items():
        verdict = "kept" if kept[tree] else "BROKEN"
        print(
            f"{tree}: slowest cpsat process {wall:.2f} s, limit {result['time_limit_s']:g} s: "
            f"{verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="8,64,256,1000", help="comma-separated host counts")
    parser.add_argument("--seed", type=int, default=7, help="fleet generator seed")
    parser.add_argument("--time-limit", type=float, default=5.0, help="CP-SAT budget (s)")
    parser.add_argument(
        "--deterministic", action="store_true", help="one solver worker, fixed seed"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--all-levels", action="store_true", help="list every level, not only open ones"
    )
    parser.add_argument(
        "--process", action="store_true", help="time whole `grid plan` processes (fork to exit)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per process (--process)")
    parser.add_argument(
        "--baseline",
        help="another checkout to time alternately with this one (--process), e.g. a worktree",
    )
    parser.add_argument(
        "--shape",
        choices=("mixed", "production", "trace"),
        default="mixed",
        help="fleet (--process): grid lab generate-fleet --shape",
    )
    parser.add_argument("--hosts", type=int, default=PROCESS_HOSTS, help="hosts (--process)")
    parser.add_argument("--models", type=int, default=PROCESS_MODELS, help="models (--process)")
    args = parser.parse_args(argv)
    if args.process:
        result = bench_process(
            args.seed,
            args.time_limit,
            max(1, args.runs),
            args.baseline,
            shape=args.shape,
            hosts=args.hosts,
            models=args.models,
        )
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print_process(result)
        return 0
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes takes comma-separated integers, e.g. 8,64,256")
    results = []
    for hosts in sizes:
        if not args.json:
            print(f"planning {hosts} hosts ...", file=sys.stderr, flush=True)
        results.append(bench_size(hosts, args.seed, args.time_limit, args.deterministic))
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print_table(results, all_levels=args.all_levels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
