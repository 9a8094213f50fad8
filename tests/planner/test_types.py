"""Host types (grid/planner/types.py) and the replica levels over them (cpsat/aggregate.py).

Oracles: the independent HiGHS lexicographic MILP of tests/planner/reference.py (per host,
written from the snapshot, no OR-Tools), and validate.py on the disaggregated plan. Fleets are
generated with repeated host shapes, some hosts holding incumbents.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.planner.cpsat.aggregate import solve_aggregated
from grid.planner.cpsat.ledger import repair
from grid.planner.heuristic import heuristic_placement
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.types import PACKINGS, disaggregate, host_types
from grid.planner.validate import violations
from tests.planner.fleets import Doc, host, model, resident, snapshot, want
from tests.planner.reference import reference_optimum, reference_plan
from tests.planner.reference_staged import level_values

pytestmark = pytest.mark.property

SHAPES = (  # capacity MB, slots, tags
    (16384, 1, ["gpu:l4"]),
    (24576, 2, ["gpu:l4"]),
    (49152, 3, ["gpu:l40s"]),
)


def shaped_fleet(seed: int, *, slots_one: bool = False, incumbents: bool = True) -> FleetSnapshot:
    """2-3 shapes of 1-4 identical hosts each, 2-5 models; some hosts with an incumbent."""
    rng = random.Random(seed)
    shapes = rng.sample(SHAPES, rng.randint(2, 3))
    n_models = rng.randint(2, 5)
    models: list[Doc] = []
    for i in range(n_models):
        extra: Doc = {}
        if rng.random() < 0.3:
            extra["required_tags"] = [rng.choice(["gpu:l4", "gpu:l40s"])]
        models.append(
            model(
                f"m{i}",
                rng.choice([3072, 6144, 10240, 14336]),
                priority=rng.choice([10, 50]),
                min_replicas=rng.choice([0, 1]),
                max_replicas=8,
                **extra,
            )
        )
    hosts: list[Doc] = []
    for s, (capacity, slots, tags) in enumerate(shapes):
        for j in range(rng.randint(1, 4)):
            residencies: list[Doc] = []
            if incumbents and rng.random() < 0.25:
                prof = rng.choice(models)
                if prof["memory_mb"] <= capacity and not prof.get("required_tags"):
                    residencies.append(resident(prof["model_id"], prof["memory_mb"], managed=True))
            hosts.append(
                host(
                    f"s{s}-h{j}",
                    capacity,
                    max_models=1 if slots_one else slots,
                    tags=tags,
                    residencies=residencies,
                )
            )
    demand = {m["model_id"]: want(rng.randint(1, 6)) for m in models}
    return snapshot(hosts, models, demand)


def _replica_values(problem: PlacementProblem, placed: set[tuple[str, str]]) -> dict[str, int]:
    return level_values(problem, placed)  # the reference's own scorer, not levels.py


def _lex(order: list[str], a: dict[str, int], b: dict[str, int]) -> int:
    for name in order:
        if a[name] != b[name]:
            return 1 if a[name] > b[name] else -1
    return 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_aggregated_levels_match_the_per_host_reference(seed: int) -> None:
    snap = shaped_fleet(seed)
    problem = build_problem(snap)
    ref = reference_optimum(problem)
    result = solve_aggregated(problem, hint=heuristic_placement(problem), time_limit_s=10)
    order = list(ref.values)
    # The aggregate relaxes the per-host packing: its optimum is never below the reference.
    assert _lex(order, result.values, ref.values) >= 0
    # The disaggregated placement is a valid plan, never better than the optimum ...
    plan = reference_plan(problem, frozenset(result.placed))
    assert [v.code for v in violations(snap, plan)] == []
    reached = {name: _replica_values(problem, result.placed)[name] for name in order}
    assert _lex(order, reached, ref.values) <= 0
    # ... and, where the check proves it, exactly the per-host optimum.
    if result.proven:
        assert reached == ref.values
        assert {n: result.values[n] for n in order} == ref.values


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_one_slot_hosts_aggregate_exactly(seed: int) -> None:
    """With a slot cap of 1 every per-type ledger is exact: always proven, always optimal."""
    snap = shaped_fleet(seed, slots_one=True)
    problem = build_problem(snap)
    ref = reference_optimum(problem)
    result = solve_aggregated(problem, hint=set(), time_limit_s=10)
    assert result.proven
    reached = _replica_values(problem, result.placed)
    assert {name: reached[name] for name in ref.values} == ref.values


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_disaggregation_never_moves_incumbents(seed: int, pick: int) -> None:
    snap = shaped_fleet(seed)
    problem = build_problem(snap)
    types = host_types(problem)
    live = {h.host_id for h in snap.hosts if h.residencies}
    for htype in types:  # a host with a residency is a type of its own
        if set(htype.host_ids) & live:
            assert htype.count == 1
    rng = random.Random(pick)
    incumbents = {k for k, c in problem.candidates.items() if c.incumbent is not None}
    # A feasible set of kept incumbents (as a solver would hand over), then random counts.
    individual = repair(problem, {k for k in incumbents if rng.random() < 0.7})
    counts = {
        (m, t.type_id): rng.randint(0, t.count) for t in types if t.count > 1 for m in t.models
    }
    packing = rng.choice(sorted(PACKINGS))  # first fit, spread, slot balancing
    placed = disaggregate(problem, types, counts, individual, packing=packing)
    assert individual <= placed
    assert [v.code for v in violations(snap, reference_plan(problem, frozenset(placed)))] == []


def test_identical_hosts_form_one_type_and_distinct_ones_do_not() -> None:
    hosts = [host(f"h{i}", 24576, max_models=2) for i in range(4)]
    hosts.append(host("big", 49152, max_models=2))
    hosts.append(host("busy", 24576, max_models=2, residencies=[resident("a", 4096)]))
    snap = snapshot(hosts, [model("a", 4096), model("b", 8192)], {"a": want(3), "b": want(2)})
    types = {t.type_id: t.host_ids for t in host_types(build_problem(snap))}
    assert types == {"big": ("big",), "busy": ("busy",), "h0": ("h0", "h1", "h2", "h3")}
