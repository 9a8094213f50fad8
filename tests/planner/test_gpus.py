"""GPUs as the spec counts them (issue 21, part 6): devices per host, tensor-parallel replicas.

Oracles: a brute-force assignment of replicas to devices (`_assignable`), never the GPU rows of
grid/planner/gpus.py; hand-worked tiny fleets; and an exhaustive search of every placement of a
tiny fleet for the most replicas (`_best_count`).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from grid.fleet.models import Assignment, Plan, SolverReport
from grid.planner.cpsat.gpus import add_gpus
from grid.planner.cpsat.variables import Guard, PlacementVars
from grid.planner.gpus import fits
from grid.planner.plan import make_plan
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import host, model, resident, snapshot, want

pytestmark = pytest.mark.unit
GB = 1024


def _assignable(devices: list[int], demands: list[tuple[int, int]]) -> bool:
    """Brute force: give each demand (k, g) k distinct devices of at least g MB."""
    demands = [d for d in demands if d[0] > 0]

    def place(i: int, free: frozenset[int]) -> bool:
        if i == len(demands):
            return True
        k, g = demands[i]
        usable = [j for j in free if devices[j] >= g]
        return any(place(i + 1, free - set(c)) for c in itertools.combinations(usable, k))

    return place(0, frozenset(range(len(devices))))


MEMORIES = st.sampled_from([0, 8 * GB, 24 * GB, 40 * GB, 48 * GB, 80 * GB])


@pytest.mark.property
@settings(max_examples=300, deadline=None)
@given(
    st.lists(MEMORIES, max_size=6),
    st.lists(st.tuples(st.integers(0, 3), MEMORIES), max_size=4),
)
def test_gpu_rows_agree_with_a_brute_force_device_assignment(
    devices: list[int], demands: list[tuple[int, int]]
) -> None:
    assert fits(devices, demands) == _assignable(devices, demands)


# ----------------------------------------------------------------------------- tiny fleets


def _gpu_host(host_id: str, devices: list[int], **fields: Any) -> dict[str, Any]:
    return host(host_id, 400 * GB, gpu_memory_mb=devices, runtimes=["vllm"], **fields)


def _gpu_model(model_id: str, count: int, per_device_gb: int, **fields: Any) -> dict[str, Any]:
    return model(
        model_id,
        8 * GB,
        runtimes=["vllm"],
        min_gpu_count=count,
        min_gpu_memory_mb=per_device_gb * GB,
        **fields,
    )


def _solved(problem: Any, keys: list[tuple[str, str]]) -> tuple[str, list[Any]]:
    m = cp_model.CpModel()
    guard = Guard(m)
    xs = PlacementVars(m, problem)
    add_gpus(m, xs, problem, guard)
    for key in keys:
        m.add(xs.x[key] == 1)
    m.add_assumptions(list(guard.literals.values()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    status = solver.solve(m)
    core = [guard.describe(i) for i in solver.sufficient_assumptions_for_infeasibility()]
    return solver.status_name(status), sorted(c for c in core if c is not None)


def test_family_feasible_two_tensor_parallel_replicas_on_four_devices() -> None:
    snap = snapshot(
        [_gpu_host("gpu-01", [48 * GB] * 4)],
        [_gpu_model("a", 2, 40), _gpu_model("b", 2, 40)],
        {"a": want(1), "b": want(1)},
    )
    assert _solved(build_problem(snap), [("a", "gpu-01"), ("b", "gpu-01")])[0] == "OPTIMAL"


def test_family_infeasible_when_the_replicas_need_more_devices_than_exist() -> None:
    # 3 devices: a takes 2, b needs 2 more; the big device row (>= 40 GB) binds
    snap = snapshot(
        [_gpu_host("gpu-01", [48 * GB, 48 * GB, 48 * GB])],
        [_gpu_model("a", 2, 40), _gpu_model("b", 2, 24)],
        {"a": want(1), "b": want(1)},
    )
    status, core = _solved(build_problem(snap), [("a", "gpu-01"), ("b", "gpu-01")])
    assert status == "INFEASIBLE"
    assert core == [("gpu", "gpu-01")]


def test_family_counts_devices_held_by_an_external_replica() -> None:
    # an unmanaged replica of c holds 2 of the 4 devices: only one more 2-GPU replica fits
    snap = snapshot(
        [
            _gpu_host(
                "gpu-01",
                [48 * GB] * 4,
                residencies=[resident("c", 8 * GB, managed=False)],
            )
        ],
        [_gpu_model("a", 2, 40), _gpu_model("b", 2, 40), _gpu_model("c", 2, 40)],
        {"a": want(1), "b": want(1), "c": want(1)},
    )
    status, core = _solved(build_problem(snap), [("a", "gpu-01"), ("b", "gpu-01")])
    assert status == "INFEASIBLE" and core == [("gpu", "gpu-01")]


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_a_host_without_enough_devices_is_explained(engine: str) -> None:
    snap = snapshot(
        [_gpu_host("gpu-02", [48 * GB])],
        [_gpu_model("big", 2, 40)],
        {"big": want(1)},
    )
    plan = make_plan(snap, engine=engine, time_limit_s=5)
    assert plan.assignments == []
    (entry,) = plan.unsatisfied
    details = [b.detail for b in entry.binding]
    assert "needs 2 GPUs of ≥ 40 GB; gpu-02 has 1 of 48 GB" in details
    assert {b.constraint for b in entry.binding} == {"gpu_shortfall"}
    assert "gpu-02 had 2 GPUs of at least 40960 MB each" in entry.would_fit_if


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_a_tensor_parallel_replica_consumes_its_devices(engine: str) -> None:
    # 4 x 48 GB on one host, 2 x 80 GB on another: each 2-GPU replica takes a pair, so three
    # 2-GPU models place on three pairs and the fourth has no devices left anywhere
    snap = snapshot(
        [_gpu_host("gpu-01", [48 * GB] * 4), _gpu_host("gpu-02", [80 * GB] * 2)],
        [_gpu_model(m, 2, 40) for m in ("a", "b", "c", "d")],
        {m: want(1) for m in ("a", "b", "c", "d")},
    )
    plan = make_plan(snap, engine=engine, time_limit_s=5)
    per_host: dict[str, int] = {}
    for a in plan.assignments:
        per_host[a.host_id] = per_host.get(a.host_id, 0) + 1
    assert per_host == {"gpu-01": 2, "gpu-02": 1}
    assert sum(u.missing_replicas for u in plan.unsatisfied) == 1
    assert violations(snap, plan) == []


def test_the_validator_refuses_a_plan_that_oversubscribes_devices() -> None:
    snap = snapshot(
        [_gpu_host("gpu-01", [48 * GB] * 2)],
        [_gpu_model("a", 2, 40), _gpu_model("b", 1, 40)],
        {"a": want(1), "b": want(1)},
    )
    plan = Plan(
        assignments=[
            Assignment(model_id=m, host_id="gpu-01", memory_mb=8 * GB, runtime="vllm")
            for m in ("a", "b")
        ],
        desired_replicas={"a": 1, "b": 1},
        solver=SolverReport(engine="hand", status="HAND", wall_ms=0),
    )
    assert [v.code for v in violations(snap, plan)] == ["gpu"]


def test_a_host_lists_its_devices_or_one_size_for_all() -> None:
    snap = snapshot(
        [host("a", 1000, gpu_count=2, gpu_memory_mb=40 * GB), host("b", 1000)],
        [model("m", 10)],
        {},
    )
    assert snap.hosts[0].devices_mb == [40 * GB, 40 * GB]
    assert snap.hosts[1].devices_mb == []


# ----------------------------------------------------------------------------- property


def _best_count(devices: dict[str, list[int]], demands: dict[str, tuple[int, int]]) -> int:
    """Exhaustive: the most (model, host) replicas (one per pair) whose devices fit."""
    hosts, models = sorted(devices), sorted(demands)
    best = 0
    for choice in itertools.product([0, 1], repeat=len(hosts) * len(models)):
        ok, count = True, 0
        for i, h in enumerate(hosts):
            on = [demands[m] for j, m in enumerate(models) if choice[i * len(models) + j]]
            if not _assignable(devices[h], on):
                ok = False
                break
            count += len(on)
        if ok:
            best = max(best, count)
    return best


@pytest.mark.property
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(MEMORIES, min_size=0, max_size=4), min_size=1, max_size=2),
    st.lists(st.tuples(st.integers(1, 3), MEMORIES), min_size=1, max_size=3),
)
def test_cpsat_places_the_brute_force_maximum_and_both_engines_fit_the_devices(
    host_devices: list[list[int]], model_demands: list[tuple[int, int]]
) -> None:
    hosts = {f"h{i}": d for i, d in enumerate(host_devices)}
    demands = {f"m{j}": d for j, d in enumerate(model_demands)}
    snap = snapshot(
        [_gpu_host(h, d) for h, d in hosts.items()],
        [
            model(m, GB, runtimes=["vllm"], min_gpu_count=k, min_gpu_memory_mb=g, max_replicas=2)
            for m, (k, g) in demands.items()
        ],
        {m: want(len(hosts)) for m in demands},
    )
    best = _best_count(hosts, demands)
    for engine in ("cpsat", "heuristic"):
        plan = make_plan(snap, engine=engine, time_limit_s=5, deterministic=True)
        for h, devices in hosts.items():
            on = [demands[a.model_id] for a in plan.assignments if a.host_id == h]
            assert _assignable(devices, on), (engine, h)
        assert violations(snap, plan) == []
        if engine == "cpsat":
            assert len(plan.assignments) == best


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_devices_held_by_a_higher_priority_replica_are_the_binding_constraint(engine: str) -> None:
    snap = snapshot(
        [_gpu_host("gpu-01", [48 * GB] * 2)],
        [_gpu_model("a", 2, 40, priority=10), _gpu_model("b", 2, 40, priority=5)],
        {"a": want(1), "b": want(1)},
    )
    plan = make_plan(snap, engine=engine, time_limit_s=5)
    assert [(a.model_id, a.host_id) for a in plan.assignments] == [("a", "gpu-01")]
    (entry,) = plan.unsatisfied
    gpu = [b for b in entry.binding if b.constraint == "gpu"]
    assert gpu and gpu[0].host_id == "gpu-01"
    assert gpu[0].detail.startswith("needs 2 GPUs of ≥ 40 GB; gpu-01 has 2 of 48 GB")
