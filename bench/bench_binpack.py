"""Packing against published optima: OR-Library's bin-packing sets as placement problems.

    .venv/bin/python bench/bench_binpack.py [--sets u120,t60,...] [--instances 20]
        [--only u250_01,...] [--time-limit 10] [--hosts-delta 0] [--baseline DIR] [--json]

Reads `../shared/data/benchmarks/binpack/` (Falkenauer 1996, OR-Library's binpack1-8.txt:
u120, u250, u500, u1000, t60, t120, t249, t501; every optimum proven, see its README: u250_07
and u250_12 are 103 and 105, not the file's 104 and 106). Each instance becomes the snapshot a
new user would write: one model per item (memory = the item's size, in tenths for the triplet
sets, exactly one replica, equal priority), as many identical hosts as the optimum (plus
`--hosts-delta`), each with the bin's capacity, no reserve and no admission headroom.

Per instance, in the same run: one whole `grid plan SNAPSHOT --time-limit S --json` process
(fork to exit: what the limit promises), one `grid plan --engine heuristic --json` process,
and first-fit decreasing into the same hosts (computed here, independent of the planner).
`--baseline DIR`: another checkout's `grid plan` on the same files, alternating with this one.
It prints one line per instance (items: what the optimum places; hosts; what FFD and each
plan place, the plan's status and wall), then per set the instances fully placed (every model
placed: the optimum) by each, the
CP-SAT process's wall (median, max) and CPU time (user + system, median: the machine is shared,
wall time is pessimistic), how many plans prove their replica level (value = bound), and for
each instance left short the replica level's value and the bound the plan reports. With
`--hosts-delta -1` no instance fits: the column then reads how many plans prove their shortfall.
Numbers depend on the machine; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
DATA = HERE.parent / "shared" / "data" / "benchmarks" / "binpack"
SETS = {
    "u120": "binpack1.txt",
    "u250": "binpack2.txt",
    "u500": "binpack3.txt",
    "u1000": "binpack4.txt",
    "t60": "binpack5.txt",
    "t120": "binpack6.txt",
    "t249": "binpack7.txt",
    "t501": "binpack8.txt",
}
# The README's proven optima where the file's `best` is not the optimum.
OPTIMA = {"u250_07": 103, "u250_12": 105}


@dataclass(frozen=True)
class Instance:
    name: str
    capacity: int  # in the snapshot's units (tenths for the triplet sets)
    sizes: tuple[int, ...]
    optimum: int  # bins


def read_set(path: Path) -> list[Instance]:
    """OR-Library's format: P; then per problem a name, `capacity n best`, n sizes."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    tokens = [line for line in lines if line]
    out: list[Instance] = []
    at = 1
    for _ in range(int(tokens[0])):
        name = tokens[at]
        capacity, count, best = tokens[at + 1].split()
        raw = [float(x) for x in tokens[at + 2 : at + 2 + int(count)]]
        at += 2 + int(count)
        scale = 1 if float(capacity).is_integer() and all(s.is_integer() for s in raw) else 10
        out.append(
            Instance(
                name,
                round(float(capacity) * scale),
                tuple(round(s * scale) for s in raw),
                OPTIMA.get(name, int(best)),
            )
        )
    return out


def snapshot_document(instance: Instance, hosts: int) -> dict[str, object]:
    """The placement problem of one instance (module docstring), schema v1."""
    return {
        "schema_version": 1,
        "now": 1785300000.0,
        "policy": {"memory_headroom_fraction": 0.0},
        "hosts": [
            {
                "host_id": f"bin-{j:04d}",
                "capacity_mb": instance.capacity,
                "reserved_mb": 0,
                "runtimes": ["llama.cpp"],
                "backends": ["cpu"],
                "max_models": 0,
            }
            for j in range(hosts)
        ],
        "models": [
            {
                "model_id": f"item-{i:04d}",
                "memory_mb": size,
                "runtimes": ["llama.cpp"],
                "priority": 50,
                "min_replicas": 1,
                "max_replicas": 1,
            }
            for i, size in enumerate(instance.sizes)
        ],
        "demand": {},
    }


def first_fit_decreasing(sizes: tuple[int, ...], capacity: int, bins: int) -> int:
    """Items placed by first-fit decreasing into `bins` bins (an item that fits none is left)."""
    loads = [0] * bins
    placed = 0
    for size in sorted(sizes, reverse=True):
        for j in range(bins):
            if loads[j] + size <= capacity:
                loads[j] += size
                placed += 1
                break
    return placed


@dataclass
class PlanRun:
    placed: int
    status: str
    value: int  # the replica level's value
    bound: int  # ... and the bound the plan reports
    wall_s: float
    cpu_s: float
    exit_code: int


@dataclass(frozen=True)
class Process:
    wall_s: float  # fork to exit
    cpu_s: float  # user + system, from wait4
    rss_mb: int  # the child's peak RSS
    exit_code: int
    stdout: bytes


def whole_grid(tree: str, argv: list[str]) -> Process:
    """One whole `python -m grid ARGV` process of checkout `tree` (bench_plan_limit.py too)."""
    env = {**os.environ, "PYTHONPATH": tree}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "grid", *argv],
            stdout=out,
            stderr=subprocess.DEVNULL,
            cwd=tree,
            env=env,
        )
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        return Process(
            wall,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss // 1024,  # kB on Linux
            os.waitstatus_to_exitcode(status),
            out.read(),
        )


def run_plan(tree: str, snapshot: Path, args: list[str]) -> PlanRun:
    """One whole `grid plan` process from `tree`."""
    done = whole_grid(tree, ["plan", str(snapshot), "--json", *args])
    wall, cpu, code = done.wall_s, done.cpu_s, done.exit_code
    if code != 0:
        return PlanRun(0, f"exit {code}", 0, 0, wall, cpu, code)
    plan = json.loads(done.stdout)
    level = next(o for o in plan["solver"]["objective"] if o["level"].endswith(":baseline:1"))
    return PlanRun(
        len(plan["assignments"]),
        plan["solver"]["status"],
        round(level["value"]),
        round(level["bound"]),
        wall,
        cpu,
        code,
    )


@dataclass
class InstanceRow:
    name: str
    items: int
    hosts: int
    ffd: int
    runs: dict[str, PlanRun] = field(default_factory=dict)  # "cpsat", "heuristic", "baseline"


def bench(args: argparse.Namespace) -> tuple[list[InstanceRow], float, float]:
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        raise SystemExit(f"unknown set(s) {', '.join(unknown)}; known: {', '.join(SETS)}")
    limit = ["--time-limit", f"{args.time_limit:g}"]
    trees = [("cpsat", str(HERE), limit), ("heuristic", str(HERE), ["--engine", "heuristic"])]
    if args.baseline:
        trees.append(("baseline", str(Path(args.baseline).resolve()), limit))
    rows: list[InstanceRow] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        for name in sets:
            chosen = read_set(Path(args.data) / SETS[name])[: args.instances]
            if args.only:
                chosen = [i for i in chosen if i.name in args.only.split(",")]
            for instance in chosen:
                hosts = instance.optimum + args.hosts_delta
                path = Path(folder) / f"{instance.name}.json"
                path.write_text(json.dumps(snapshot_document(instance, hosts)), encoding="utf-8")
                ffd = first_fit_decreasing(instance.sizes, instance.capacity, hosts)
                row = InstanceRow(instance.name, len(instance.sizes), hosts, ffd)
                for label, tree, extra in trees:
                    row.runs[label] = run_plan(tree, path, extra)
                rows.append(row)
                if not args.json:
                    print(_progress(row), file=sys.stderr, flush=True)
    return rows, load_before, os.getloadavg()[0]


def _progress(row: InstanceRow) -> str:
    runs = " ".join(
        f"{label} {run.placed} {run.status} {run.wall_s:.2f}s" for label, run in row.runs.items()
    )
    return f"{row.name}: {row.items} items, {row.hosts} hosts; ffd {row.ffd}; {runs}"


def summary(rows: list[InstanceRow]) -> list[dict[str, object]]:
    """Per set (the instance name's prefix), the figures of the module docstring."""
    out = []
    for prefix in dict.fromkeys(r.name.split("_")[0] for r in rows):
        mine = [r for r in rows if r.name.split("_")[0] == prefix]
        entry: dict[str, object] = {"set": prefix, "instances": len(mine), "ffd": 0}
        entry["ffd"] = sum(1 for r in mine if r.ffd == r.items)
        for label in mine[0].runs:
            runs = [r.runs[label] for r in mine]
            walls = [run.wall_s for run in runs]
            entry[label] = {
                "at_optimum": sum(1 for r in mine if r.runs[label].placed == r.items),
                "proven": sum(1 for run in runs if run.value == run.bound and run.exit_code == 0),
                "wall_median_s": round(statistics.median(walls), 2),
                "wall_max_s": round(max(walls), 2),
                "cpu_median_s": round(statistics.median(run.cpu_s for run in runs), 2),
                "short": [
                    f"{r.name} {r.runs[label].value}/{r.runs[label].bound}"
                    for r in mine
                    if r.runs[label].placed < r.items
                ],
            }
        out.append(entry)
    return out


def print_instances(rows: list[InstanceRow]) -> None:
    """One line per instance: the optimum, then what each plan and FFD placed, and walls."""
    labels = list(rows[0].runs) if rows else []
    head = f"{'instance':<9} {'items':>5} {'hosts':>5} {'ffd':>5}"
    for label in labels:
        head += f" | {label:>9} {'status':<9} {'wall s':>6}"
    print(head)
    print("-" * len(head))
    for row in rows:
        line = f"{row.name:<9} {row.items:>5} {row.hosts:>5} {row.ffd:>5}"
        for label in labels:
            run = row.runs[label]
            line += f" | {run.placed:>9} {run.status[:9]:<9} {run.wall_s:>6.2f}"
        print(line)
    print()


def print_summary(
    table: list[dict[str, object]], before: float, after: float, limit: float
) -> None:
    print(
        f"whole `grid plan --time-limit {limit:g}` processes; load average {before:.2f} before, "
        f"{after:.2f} after (2-core machine, shared)"
    )
    labels = [k for k in table[0] if isinstance(table[0][k], dict)] if table else []
    head = f"{'set':<6} {'n':>3} {'ffd':>4}"
    for label in labels:
        head += f" | {label + ' opt':>14} {'proven':>6} {'wall med':>8} {'max':>6} {'cpu med':>7}"
    print(head)
    print("-" * len(head))
    shorts: list[str] = []
    for entry in table:
        line = f"{entry['set']:<6} {entry['instances']:>3} {entry['ffd']:>4}"
        for label in labels:
            figures = entry[label]
            assert isinstance(figures, dict)
            line += (
                f" | {figures['at_optimum']:>14} {figures['proven']:>6} "
                f"{figures['wall_median_s']:>8.2f} {figures['wall_max_s']:>6.2f} "
                f"{figures['cpu_median_s']:>7.2f}"
            )
            if figures["short"] and label != "heuristic":
                shorts.append(
                    f"  {entry['set']} {label} short (value/bound): " + ", ".join(figures["short"])
                )
        print(line)
    print("\n".join(shorts) if shorts else "  no plan short of the optimum")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated set names")
    parser.add_argument("--instances", type=int, default=20, help="first N instances per set")
    parser.add_argument("--only", help="comma-separated instance names (e.g. u250_01)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="grid plan budget (s)")
    parser.add_argument(
        "--hosts-delta", type=int, default=0, help="hosts = optimum + this (-1: none fits)"
    )
    parser.add_argument("--baseline", help="another checkout planning the same files")
    parser.add_argument("--data", default=str(DATA), help="folder of binpack1-8.txt")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    rows, before, after = bench(args)
    table = summary(rows)
    if args.json:
        document = {
            "time_limit_s": args.time_limit,
            "load_before": before,
            "load_after": after,
            "sets": table,
            "instances": [asdict(r) for r in rows],
        }
        print(json.dumps(document, indent=2))
    else:
        print_instances(rows)
        print_summary(table, before, after, args.time_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
