"""The trace-shaped fleet generator: racks of 32 as failure domains, ten GPU types, the
trace's node counts, a third of the models on one GPU type, a third needing two domains."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

from grid.lab.fleetgen_trace import generate_trace_fleet
from grid.planner.plan import make_plan
from grid.planner.problem_build import build_problem
from grid.planner.types import host_types
from grid.planner.validate import violations

pytestmark = pytest.mark.unit


def _gpu(tags: list[str]) -> str:
    return next(t for t in tags if t.startswith("gpu:"))


def test_the_trace_cluster_racks_of_32_ten_gpu_types_and_its_node_counts() -> None:
    snap = generate_trace_fleet()  # 4,278 hosts, 300 models
    assert len(snap.hosts) == 4278 and len(snap.models) == 300
    per_type = Counter(_gpu(h.tags) for h in snap.hosts)
    assert len(per_type) == 10
    # The trace: 1,424 A100-SXM4-80GB nodes; A10 and the unnamed series about 1,427 and
    # 1,423 (four nodes go to the rare types here); every rare type present.
    assert per_type["gpu:a100-80g"] == 1424
    assert abs(per_type["gpu:a10"] - 1427) <= 4 and abs(per_type["gpu:series-1"] - 1423) <= 4
    assert min(per_type.values()) >= 1
    racks: dict[str, list[tuple[object, ...]]] = defaultdict(list)
    for h in snap.hosts:
        assert h.failure_domain is not None
        racks[h.failure_domain].append((h.capacity_mb, h.max_models, tuple(h.tags)))
    assert max(len(members) for members in racks.values()) == 32
    assert all(len(set(members)) == 1 for members in racks.values())  # one configuration
    configurations = {(h.capacity_mb, h.max_models, _gpu(h.tags)) for h in snap.hosts}
    assert len(configurations) == 12  # 13 configurations, one of them empty at 4,278


def test_a_third_on_one_gpu_type_that_fits_and_a_third_needing_two_domains() -> None:
    snap = generate_trace_fleet(1000, 90, 3)
    largest: dict[str, int] = {}
    for h in snap.hosts:
        g = _gpu(h.tags)
        largest[g] = max(largest.get(g, 0), h.capacity_mb - h.reserved_mb)
    constrained = [m for m in snap.models if m.required_tags]
    assert 20 <= len(constrained) <= 30
    assert all(m.memory_mb <= largest[m.required_tags[0]] for m in constrained)
    assert sum(1 for m in snap.models if m.min_failure_domains == 2) == 30


def test_deterministic_and_hosts_group_by_rack() -> None:
    a = generate_trace_fleet(640, 30, 9).model_dump(mode="json")
    assert a == generate_trace_fleet(640, 30, 9).model_dump(mode="json")
    assert a != generate_trace_fleet(640, 30, 10).model_dump(mode="json")
    problem = build_problem(generate_trace_fleet(640, 30, 9))
    grouped = [t for t in host_types(problem) if t.count > 1]
    domains = {problem.host_by_id[t.host_ids[0]].domain for t in grouped}
    assert len(domains) == len(grouped)  # one type per rack (the domain is in the signature)


def test_a_plan_of_a_trace_fleet_passes_the_validator() -> None:
    snap = generate_trace_fleet(256, 40, 2)
    plan = make_plan(snap, time_limit_s=10.0)
    assert violations(snap, plan) == []
    assert plan.assignments


def test_the_cli_writes_a_trace_fleet(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "trace.json"
    argv = [sys.executable, "-m", "grid", "lab", "generate-fleet", "--shape", "trace"]
    done = subprocess.run(
        [*argv, "--hosts", "96", "--models", "12", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert len(doc["hosts"]) == 96 and {h["failure_domain"] for h in doc["hosts"]} >= {"rack-0001"}
