"""Neighbourhood solves (grid/planner/cpsat/neighbourhood.py) for stages too large to build.

With no budget share for a full model solve.py builds none (the 1,000 × 200 case), so each
replica stage below its bound goes through the neighbourhood search. Oracles: the independent
HiGHS lexicographic MILP of tests/planner/reference.py, its own level scorer
(reference_staged.level_values) and validate.py; the hand-worked case is worked out below.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grid.planner.deadline as budget
from grid.fleet.models import FleetSnapshot
from grid.planner.cpsat import solve
from grid.planner.cpsat.ledger import repair
from grid.planner.cpsat.solve import solve_lexicographic
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.planner.reference import ReferenceResult, reference_optimum, reference_plan
from tests.planner.reference_staged import level_values, lexicographic
from tests.planner.test_types import shaped_fleet

pytestmark = pytest.mark.property


def _fleet_and_hint(
    seed: int, pick: int
) -> tuple[FleetSnapshot, PlacementProblem, ReferenceResult, set[tuple[str, str]]]:
    """A shaped fleet, its problem, the HiGHS reference and a random feasible hint (a random
    half of the candidates, repaired): the search has something to raise."""
    snap = shaped_fleet(seed)
    problem = build_problem(snap)
    rng = random.Random(pick)
    hint = repair(problem, {k for k in sorted(problem.candidates) if rng.random() < 0.5})
    return snap, problem, reference_optimum(problem), hint


@pytest.fixture(autouse=True)
def _no_full_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """No full model fits any budget (solve.py builds one within BUILD_SHARE of it)."""
    monkeypatch.setattr(budget, "CALIBRATION", replace(budget.CALIBRATION, model_build_share=0.0))


def test_a_vacated_host_takes_the_model_that_needs_it_alone() -> None:
    """Host big (48 GB) is the only one that fits `video` (40 GB, alone on its host); the hint
    puts `chat` (4 GB) there. Hand-worked optimum: chat moves to small, video takes big:
    direct:1 = 2 (the hint: 1)."""
    hosts = [host("big", 49152, max_models=2), host("small", 8192, max_models=2)]
    models = [
        model("video", 40960, priority=10, max_colocated_models=1),
        model("chat", 4096, priority=10),
    ]
    snap = snapshot(hosts, models, {"video": want(1), "chat": want(1)})
    problem = build_problem(snap)
    hint = {("chat", "big")}
    assert level_values(problem, hint)["p10:direct:1"] == 1
    result = solve_lexicographic(problem, hints=[hint], time_limit_s=10, deterministic=True)
    assert result.placed == {("video", "big"), ("chat", "small")}
    assert level_values(problem, result.placed)["p10:direct:1"] == 2
    assert [
        v.code for v in violations(snap, reference_plan(problem, frozenset(result.placed)))
    ] == []
    # Every replica stage reached its static bound: proven without a full model.
    assert all(r.status == "BOUND" for r in result.stages if r.levels[0] != "quality")


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_neighbourhoods_never_lose_levels_and_stay_below_the_optimum(seed: int, pick: int) -> None:
    """From a random feasible hint (a random half of the candidates, repaired): the search
    has something to raise."""
    snap, problem, ref, hint = _fleet_and_hint(seed, pick)
    order = list(ref.values)
    result = solve_lexicographic(problem, hints=[hint], time_limit_s=10, deterministic=True)
    assert result.placed is not None
    plan = reference_plan(problem, frozenset(result.placed))
    assert [v.code for v in violations(snap, plan)] == []
    reached = level_values(problem, result.placed)
    started = level_values(problem, hint)
    assert lexicographic(order, {n: reached[n] for n in order}, started) >= 0
    assert lexicographic(order, {n: reached[n] for n in order}, ref.values) <= 0
    # A level reported at its bound is a valid one: never above the optimum, and where every
    # level is proven the plan is the optimum itself.
    proven_prefix = True
    for name in order:
        bound = result.bounds.get(name)
        if bound is None:
            break
        if proven_prefix:
            assert bound >= ref.values[name]
        proven_prefix = proven_prefix and bound == reached[name] == ref.values[name]
    if result.status == "OPTIMAL":
        assert {n: reached[n] for n in order} == ref.values


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(min_value=0, max_value=10**6), pick=st.integers(min_value=0, max_value=10**6)
)
def test_neighbourhoods_after_an_unproven_full_model_stay_valid(
    seed: int, pick: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full model built and cut short (a tiny deterministic budget per stage), then
    neighbourhood solves on the stage: still a valid plan, never below the hint, never above
    the optimum."""
    figures = replace(budget.CALIBRATION, model_build_share=1.0, min_stage_s=0.001)
    monkeypatch.setattr(budget, "CALIBRATION", figures)
    monkeypatch.setattr(solve, "NEIGHBOURHOOD_MIN_KEYS", 0)
    snap, problem, ref, hint = _fleet_and_hint(seed, pick)
    order = list(ref.values)
    result = solve_lexicographic(
        problem, hints=[hint], time_limit_s=0.003, reserve_s=0.0, deterministic=True
    )
    assert result.placed is not None
    assert [
        v.code for v in violations(snap, reference_plan(problem, frozenset(result.placed)))
    ] == []
    reached = {n: level_values(problem, result.placed)[n] for n in order}
    assert lexicographic(order, reached, level_values(problem, hint)) >= 0
    assert lexicographic(order, reached, ref.values) <= 0
