"""Published bin-packing instances (OR-Library, Falkenauer 1996) planned to their optimum.

The oracle is the published, proven optimum (../shared/data/benchmarks/binpack/README.md):
every instance's items fit its optimal number of bins, so a plan with one model per item and
that many identical hosts places every model. First-fit decreasing does not on these two
(t60_00: 53 of 60, u120_00: 117 of 120), and before the exact packing the planner did not
either (57-59 of 60 at --time-limit 10). bench/bench_binpack.py runs all 160 instances.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.snapshot import parse_snapshot
from grid.planner.plan import make_plan
from grid.planner.validate import violations

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "benchmarks" / "binpack"


def _instance(file: str, name: str) -> tuple[int, list[int], int]:
    tokens = [t.strip() for t in (DATA / file).read_text(encoding="utf-8").splitlines()]
    tokens = [t for t in tokens if t]
    at = tokens.index(name)
    capacity, count, best = tokens[at + 1].split()
    raw = [float(x) for x in tokens[at + 2 : at + 2 + int(count)]]
    scale = 1 if float(capacity).is_integer() and all(s.is_integer() for s in raw) else 10
    return round(float(capacity) * scale), [round(s * scale) for s in raw], int(best)


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/benchmarks/ is not on this machine")
@pytest.mark.parametrize(
    ("file", "name"), [("binpack5.txt", "t60_00"), ("binpack1.txt", "u120_00")]
)
def test_instance_is_packed_to_its_optimum(file: str, name: str) -> None:
    capacity, sizes, bins = _instance(file, name)
    snap = parse_snapshot(
        {
            "schema_version": 1,
            "now": 1785300000.0,
            "policy": {"memory_headroom_fraction": 0.0},
            "hosts": [
                {"host_id": f"bin-{j:03d}", "capacity_mb": capacity, "reserved_mb": 0}
                for j in range(bins)
            ],
            "models": [
                {"model_id": f"item-{i:04d}", "memory_mb": s, "min_replicas": 1, "max_replicas": 1}
                for i, s in enumerate(sizes)
            ],
        }
    )
    plan = make_plan(snap, time_limit_s=30.0)
    assert len(plan.assignments) == len(sizes)
    level = next(o for o in plan.solver.objective if o.level.endswith(":baseline:1"))
    assert level.value == level.bound == len(sizes)
    assert violations(snap, plan) == []
