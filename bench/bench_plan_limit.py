"""The time limit on real fleet shapes: whole `grid plan` processes against `--time-limit`.

    .venv/bin/python bench/bench_plan_limit.py [--fleets trace:4278x300@10,...] [--seed 7]
        [--baseline DIR] [--json]

Each fleet is `grid lab generate-fleet --shape SHAPE --hosts H --models M --seed S` written
to a file (the generator's own code path); each row is one whole process a user would run:
`grid plan FILE --time-limit L --json` (fork to exit, so the interpreter start, imports, load,
build, solve, explanations, validation and output all count), and next to it in the same run
the heuristic alone (`grid plan FILE --engine heuristic --json`). Per row: wall (fork to exit)
against the limit, CPU (user + system from wait4: the machine is shared, wall is
pessimistic), the child's peak RSS, the solver's status, assignments, and the replica levels
(levels 1-2: `pinned...` and `pN:...`) whose value is not at the bound the plan reports (open).
`--baseline DIR`: another checkout's `grid plan` on the same files, right after this one's.

The default fleets are issue 20's: the production trace's racked GPU cluster (4,278 nodes,
300 models) at 10 s and 1,213 x 150 at 5 s, a mixed 1,000 x 200 at 2 s; add
`production:10000x500@10` when the machine has the minutes. Numbers depend on the machine;
nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bench_binpack import whole_grid  # the bench folder is the script's: sys.path[0]

HERE = Path(__file__).resolve().parent.parent
DEFAULT_FLEETS = "trace:4278x300@10,trace:1213x150@5,mixed:1000x200@2"
FLEET = re.compile(r"^(mixed|production|trace):(\d+)x(\d+)@([0-9.]+)$")
REPLICA_LEVEL = re.compile(r"^(pinned|p\d+:)")


@dataclass(frozen=True)
class Fleet:
    shape: str
    hosts: int
    models: int
    limit_s: float

    @property
    def name(self) -> str:
        return f"{self.shape} {self.hosts}x{self.models}"


@dataclass
class Row:
    fleet: str
    tree: str
    engine: str
    limit_s: float
    wall_s: float
    cpu_s: float
    rss_mb: int
    status: str
    placed: int
    replica_levels: int
    open_levels: int
    first_open: str


def parse_fleets(text: str) -> list[Fleet]:
    out = []
    for item in (s.strip() for s in text.split(",")):
        match = FLEET.match(item)
        if not match:
            raise SystemExit(f"bad fleet {item!r}: write SHAPE:HOSTSxMODELS@LIMIT")
        shape, hosts, models, limit = match.groups()
        out.append(Fleet(shape, int(hosts), int(models), float(limit)))
    return out


def generate(tree: Path, fleet: Fleet, seed: int, path: Path) -> None:
    """`grid lab generate-fleet` of this checkout, written to `path`."""
    argv = [sys.executable, "-m", "grid", "lab", "generate-fleet", "--shape", fleet.shape]
    argv += ["--hosts", str(fleet.hosts), "--models", str(fleet.models), "--seed", str(seed)]
    argv += ["--out", str(path)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(argv, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)


def plan_process(tree: Path, path: Path, args: list[str], fleet: Fleet, label: str) -> Row:
    """One whole `grid plan` process: wall fork to exit, CPU and peak RSS from wait4."""
    done = whole_grid(str(tree), ["plan", str(path), "--json", *args])
    engine = "heuristic" if "heuristic" in args else "cpsat"
    code = done.exit_code
    row = Row(
        fleet.name,
        label,
        engine,
        fleet.limit_s,
        done.wall_s,
        done.cpu_s,
        done.rss_mb,
        f"exit {code}",
        0,
        0,
        0,
        "",
    )
    if code != 0:
        return row
    plan = json.loads(done.stdout)
    replica = [o for o in plan["solver"]["objective"] if REPLICA_LEVEL.match(o["level"])]
    gaps = [o for o in replica if o.get("bound") is not None and o["bound"] != o["value"]]
    row.status = plan["solver"]["status"]
    row.placed = len(plan["assignments"])
    row.replica_levels = len(replica)
    row.open_levels = len(gaps)
    if gaps:
        first = gaps[0]
        row.first_open = f"{first['level']} {first['value']:g}/{first['bound']:g}"
    return row


def bench(args: argparse.Namespace) -> tuple[list[Row], float, float]:
    trees = [("now", HERE)]
    if args.baseline:
        trees.append(("baseline", Path(args.baseline).resolve()))
    rows: list[Row] = []
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        for fleet in parse_fleets(args.fleets):
            path = Path(folder) / f"{fleet.shape}-{fleet.hosts}x{fleet.models}.json"
            generate(HERE, fleet, args.seed, path)
            for label, tree in trees:
                for extra in (["--time-limit", f"{fleet.limit_s:g}"], ["--engine", "heuristic"]):
                    row = plan_process(tree, path, extra, fleet, label)
                    rows.append(row)
                    if not args.json:
                        print(_line(row), file=sys.stderr, flush=True)
    return rows, before, os.getloadavg()[0]


HEAD = (
    f"{'fleet':<20} {'tree':<8} {'engine':<9} {'limit':>5} {'wall s':>7} {'cpu s':>6} "
    f"{'RSS MB':>6} {'status':<18} {'placed':>6} {'levels':>6} {'open':>4}  first open"
)


def _line(r: Row) -> str:
    limit = f"{r.limit_s:g}" if r.engine == "cpsat" else "-"
    return (
        f"{r.fleet:<20} {r.tree:<8} {r.engine:<9} {limit:>5} {r.wall_s:>7.2f} {r.cpu_s:>6.2f} "
        f"{r.rss_mb:>6} {r.status:<18} {r.placed:>6} {r.replica_levels:>6} {r.open_levels:>4}  "
        f"{r.first_open}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fleets", default=DEFAULT_FLEETS, help="SHAPE:HOSTSxMODELS@LIMIT,...")
    parser.add_argument("--seed", type=int, default=7, help="fleet generator seed")
    parser.add_argument("--baseline", help="another checkout planning the same files")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    rows, before, after = bench(args)
    if args.json:
        document = {"load_before": before, "load_after": after, "rows": [asdict(r) for r in rows]}
        print(json.dumps(document, indent=2))
        return 0
    print(
        f"whole `grid plan` processes; load average {before:.2f} before, {after:.2f} after "
        f"({os.cpu_count()}-core machine, shared)"
    )
    print(HEAD)
    print("-" * len(HEAD))
    for row in rows:
        print(_line(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
