"""Planner benchmark: both engines on generated fleets of growing size (prints figures only).

    .venv/bin/python bench/bench_planner.py [--sizes 8,64,256,1000] [--time-limit 5] [--json]
    .venv/bin/python bench/bench_planner.py --process [--runs 3] [--time-limit 5] [--baseline DIR]

`--process` times the whole `grid plan SNAPSHOT --time-limit S --json` process on a generated
1,000-host x 200-model fleet (snapshot load, problem build, solve, staging, explanations,
validation, output), next to the heuristic engine's process and a bare `python -c pass`.
Each plan process reports its own CLI import time and the command's time after it, so the
promise "the process finishes within the limit plus interpreter start" reads off one table.

Per size it prints the heuristic's and CP-SAT's wall time, CP-SAT's status, whether CP-SAT
proved every replica level (value equals bound), the lexicographic comparison of the two plans'
level values, each level's gap to the solver's bound, and the validator's verdict on both plans.
Numbers depend on the machine; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
# Runs the CLI in a fresh interpreter and reports, on its last stderr line, how long importing
# the CLI took and how long the command ran after that (the part --time-limit promises).
CLI_RUNNER = """
import sys, time
started = time.perf_counter()
from grid.cli.main import main
imported = time.perf_counter()
sys.argv = ["grid", *sys.argv[1:]]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
done = time.perf_counter()
sys.stderr.write(f"\\nBENCH {imported - started:.3f} {done - imported:.3f}\\n")
sys.exit(code)
"""


@dataclass
class ProcessRun:
    wall_s: float
    import_s: float
    command_s: float
    exit_code: int


def _run(argv: list[str], cwd: str | None = None) -> ProcessRun:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, text=True, cwd=cwd)
    wall = time.perf_counter() - started
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    import_s, command_s = (
        (float(x) for x in last.split()[1:3])
        if last.startswith("BENCH")
        else (
            wall,
            0.0,
        )
    )
    return ProcessRun(wall, import_s, command_s, done.returncode)


def _row(name: str, runs: list[ProcessRun]) -> dict[str, object]:
    walls = [r.wall_s for r in runs]
    return {
        "process": name,
        "runs": len(runs),
        "wall_min_s": round(min(walls), 2),
        "wall_median_s": round(statistics.median(walls), 2),
        "wall_max_s": round(max(walls), 2),
        "import_max_s": round(max(r.import_s for r in runs), 2),
        "after_import_max_s": round(max(r.command_s for r in runs), 2),
        "exit_codes": sorted({r.exit_code for r in runs}),
    }


def bench_process(
    seed: int, time_limit_s: float, runs: int, baseline: str | None = None
) -> dict[str, object]:
    """Whole `grid plan` processes at 1000 x 200: wall, CLI import, and the command after it.

    `baseline`: another checkout (e.g. `git worktree` of an older commit); its processes run
    from there (`python -c` imports the `grid` of the working directory), alternating run by run
    with this checkout's, so both see the same machine load.
    """
    python = sys.executable
    here = str(Path(__file__).resolve().parent.parent)
    trees = [("", here)] + ([("baseline: ", baseline)] if baseline else [])
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fleet.json"
        snap = generate_fleet(PROCESS_HOSTS, PROCESS_MODELS, seed)
        path.write_text(json.dumps(snap.model_dump(mode="json")), encoding="utf-8")
        fleets = {"": path}
        if baseline:  # its own generator: an older schema may not read today's fields
            fleets["baseline: "] = Path(folder) / "baseline-fleet.json"
            generate = [python, "-m", "grid", "lab", "generate-fleet", "--hosts"]
            generate += [str(PROCESS_HOSTS), "--models", str(PROCESS_MODELS), "--seed", str(seed)]
            subprocess.run(
                [*generate, "-o", str(fleets["baseline: "])],
                cwd=baseline,
                check=True,
                capture_output=True,
            )

        def commands(fleet: Path) -> list[tuple[str, list[str]]]:
            plan = [python, "-c", CLI_RUNNER, "plan", str(fleet), "--time-limit", str(time_limit_s)]
            return [
                ("python -c pass", [python, "-c", "pass"]),
                (f"grid plan --time-limit {time_limit_s:g} --json", [*plan, "--json"]),
                ("grid plan --engine heuristic --json", [*plan, "--engine", "heuristic", "--json"]),
            ]

        for index, (name, _argv) in enumerate(commands(path)):
            results: dict[str, list[ProcessRun]] = {label: [] for label, _ in trees}
            for _ in range(runs):
                for label, cwd in trees:
                    argv = commands(fleets[label])[index][1]
                    results[label].append(_run(argv, cwd=cwd))
            for label, _cwd in trees:
                if label and name.startswith("python"):
                    continue
                rows.append(_row(label + name, results[label]))
    cpsat = rows[1]
    out: dict[str, object] = {
        "hosts": PROCESS_HOSTS,
        "models": PROCESS_MODELS,
        "seed": seed,
        "time_limit_s": time_limit_s,
        "rows": rows,
        "cpsat_after_import_max_s": cpsat["after_import_max_s"],
        "promise_kept": float(str(cpsat["after_import_max_s"])) <= time_limit_s,
    }
    if baseline:
        out["baseline"] = baseline
        out["baseline_cpsat_after_import_max_s"] = rows[2]["after_import_max_s"]
    return out


def print_process(result: dict[str, object]) -> None:
    print(
        f"whole processes at {result['hosts']} hosts x {result['models']} models "
        f"(seed {result['seed']}, --time-limit {result['time_limit_s']}):"
    )
    print(
        f"{'process':<46} {'runs':>4} {'wall min':>8} {'median':>7} {'max':>6} "
        f"{'import max':>10} {'after import max':>16}  exit"
    )
    rows = result["rows"]
    assert isinstance(rows, list)
    for row in rows:
        print(
            f"{row['process']:<46} {row['runs']:>4} {row['wall_min_s']:>8.2f} "
            f"{row['wall_median_s']:>7.2f} {row['wall_max_s']:>6.2f} {row['import_max_s']:>10.2f} "
            f"{row['after_import_max_s']:>16.2f}  {row['exit_codes']}"
        )
    print(
        f"cpsat command after the CLI import, slowest run: {result['cpsat_after_import_max_s']} s "
        f"against the {result['time_limit_s']} s limit: "
        f"{'kept' if result['promise_kept'] else 'BROKEN'}"
    )
    if "baseline" in result:
        print(
            f"baseline ({result['baseline']}), slowest: "
            f"{result['baseline_cpsat_after_import_max_s']} s"
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
        "--process", action="store_true", help="time whole `grid plan` processes at 1000x200"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per process (--process)")
    parser.add_argument(
        "--baseline",
        help="another checkout to time alternately with this one (--process), e.g. a worktree",
    )
    args = parser.parse_args(argv)
    if args.process:
        result = bench_process(args.seed, args.time_limit, max(1, args.runs), args.baseline)
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
