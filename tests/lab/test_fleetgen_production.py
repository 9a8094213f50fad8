"""The production-shaped fleet generator: few shapes, realistic counts, GPU types, skew."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from grid.fleet.models import FleetSnapshot
from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner.plan import make_plan
from grid.planner.targets import compute_targets
from grid.planner.validate import violations

pytestmark = pytest.mark.unit


def _dump(snap: FleetSnapshot) -> str:
    return json.dumps(snap.model_dump(mode="json"), sort_keys=True)


def _shape(snap: FleetSnapshot, host_id: str) -> tuple[object, ...]:
    h = next(h for h in snap.hosts if h.host_id == host_id)
    return (h.capacity_mb, h.reserved_mb, h.max_models, tuple(h.tags), tuple(h.backends))


def test_same_seed_same_fleet_and_another_seed_another() -> None:
    assert _dump(generate_production_fleet(200, 40, 3)) == _dump(
        generate_production_fleet(200, 40, 3)
    )
    assert _dump(generate_production_fleet(200, 40, 3)) != _dump(
        generate_production_fleet(200, 40, 4)
    )


def test_few_shapes_many_small_nodes_fewer_eight_gpu_nodes() -> None:
    snap = generate_production_fleet(1000, 100, 1)
    assert len(snap.hosts) == 1000
    shapes = Counter(_shape(snap, h.host_id) for h in snap.hosts)
    assert len(shapes) <= 8
    one_gpu = sum(n for s, n in shapes.items() if s[0] <= 49152 and "gpu" in s[3])  # type: ignore[operator]
    eight_gpu = sum(n for s, n in shapes.items() if s[0] >= 327680 and "gpu" in s[3])  # type: ignore[operator]
    assert one_gpu > 3 * eight_gpu > 0
    gpu_types = {t for h in snap.hosts for t in h.tags if t.startswith("gpu:")}
    assert len(gpu_types) >= 3


def test_a_share_of_models_asks_for_a_gpu_type_that_exists() -> None:
    snap = generate_production_fleet(500, 200, 2)
    tags = {t for h in snap.hosts for t in h.tags}
    constrained = [m for m in snap.models if any(t.startswith("gpu:") for t in m.required_tags)]
    assert 0.1 * len(snap.models) <= len(constrained) <= 0.5 * len(snap.models)
    assert all(set(m.required_tags) <= tags for m in constrained)


def test_demand_is_skewed_across_models() -> None:
    snap = generate_production_fleet(1000, 200, 5)
    desired = sorted((t.desired for t in compute_targets(snap).values()), reverse=True)
    top = sum(desired[: len(desired) // 10])
    assert top >= 0.4 * sum(desired)  # the top tenth of the models wants at least 40%


def test_the_plan_of_a_production_fleet_is_valid() -> None:
    snap = generate_production_fleet(60, 20, 7)
    plan = make_plan(snap, engine="cpsat", time_limit_s=10, deterministic=True)
    assert [v.code for v in violations(snap, plan)] == []
    assert plan.assignments


def test_cli_generates_a_production_fleet_and_refuses_an_unknown_shape() -> None:
    cmd = [sys.executable, "-m", "grid", "lab", "generate-fleet", "--hosts", "30"]
    done = subprocess.run(
        [*cmd, "--models", "6", "--shape", "production"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert len(doc["hosts"]) == 30
    assert all(not h["residencies"] for h in doc["hosts"])
    bad = subprocess.run([*cmd, "--shape", "tiny"], capture_output=True, text=True)
    assert bad.returncode != 0
    assert "unknown_fleet_shape" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr
