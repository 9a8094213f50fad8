"""The exclusive-host bound (grid/planner/cpsat/exclusive.py) and the proofs solve.py draws
from it.

Oracles: a hand-worked optimum (worked out in the docstring) and the independent HiGHS
lexicographic MILP of tests/planner/reference.py: the bound of every stage, given the earlier
stages at the reference's optimal values, is never below the reference's value of the stage.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from ortools.sat.python import cp_model

import grid.planner.deadline as budget
from grid.fleet.models import FleetSnapshot
from grid.planner.cpsat.bounds import static_bounds
from grid.planner.cpsat.exclusive import ExclusiveBound
from grid.planner.cpsat.solve import solve_lexicographic
from grid.planner.cpsat.stages import Stage, fold_stages, stages_of
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.planner.reference import reference_optimum, reference_plan
from tests.planner.reference_staged import level_values, lexicographic
from tests.planner.test_vacate_chain import _stuck_start, solo_fleets

pytestmark = pytest.mark.property

GB = 1024


def _three_solos() -> FleetSnapshot:
    """Hosts a and b (40 GB) each hold one 30 GB model; c (8 GB) holds none of them. Three
    models need a host to themselves (colocation ceiling 1), one small model fits anywhere.
    Hand-worked optimum of p10:direct:1: two solo models (one per big host) and the small
    one on c: 3. The static bound counts all four (each has a candidate)."""
    return snapshot(
        [host("a", 40 * GB), host("b", 40 * GB), host("c", 8 * GB)],
        [
            model("s1", 30 * GB, priority=10, max_colocated_models=1),
            model("s2", 30 * GB, priority=10, max_colocated_models=1),
            model("s3", 30 * GB, priority=10, max_colocated_models=1),
            model("small", 4 * GB, priority=10),
        ],
        {"s1": want(1), "s2": want(1), "s3": want(1), "small": want(1)},
    )


def _solver() -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 5.0
    solver.parameters.num_workers = 1
    return solver


def _direct_stage(stages: list[Stage]) -> int:
    return next(i for i, s in enumerate(stages) if "p10:direct:1" in s.names)


def test_two_big_hosts_bound_three_solo_models_to_two(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _three_solos()
    problem = build_problem(snap)
    static = static_bounds(problem)
    assert static["p10:direct:1"] == 4  # capacity-blind: too loose
    stages = fold_stages(stages_of(problem), static)
    index = _direct_stage(stages)
    placed = {("s1", "a"), ("s2", "b"), ("small", "c")}
    values = level_values(problem, placed)
    assert values["p10:direct:1"] == 3 == reference_optimum(problem).values["p10:direct:1"]
    achieved = {i: stages[i].signed(values) for i in range(index)}
    bound = ExclusiveBound(problem).stage_bound(stages, index, achieved, _solver())
    assert bound == stages[index].signed(values)  # the hand-worked optimum, exactly
    # solve.py proves the level without any full model (none fits the budget here).
    monkeypatch.setattr(budget, "CALIBRATION", replace(budget.CALIBRATION, model_build_share=0.0))
    result = solve_lexicographic(problem, hints=[placed], time_limit_s=10, deterministic=True)
    assert result.placed == placed
    assert result.bounds["p10:direct:1"] == 3
    assert [v.code for v in violations(snap, reference_plan(problem, frozenset(placed)))] == []


def test_without_solo_models_the_bound_does_not_apply() -> None:
    snap = snapshot([host("a", 16 * GB)], [model("m", 4 * GB)], {"m": want(2)})
    problem = build_problem(snap)
    stages = fold_stages(stages_of(problem), static_bounds(problem))
    assert not any(ExclusiveBound(problem).applies(s) for s in stages)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(solo_fleets())
def test_the_bound_never_cuts_off_the_reference_optimum(drawn) -> None:  # type: ignore[no-untyped-def]
    snap, _pick = drawn
    problem = build_problem(snap)
    ref = reference_optimum(problem).values
    stages = fold_stages(stages_of(problem), static_bounds(problem))
    relaxation = ExclusiveBound(problem)
    for index, stage in enumerate(stages):
        if not all(name in ref for name in stage.names):
            break  # levels 3-6: not the reference's
        if not relaxation.applies(stage):
            continue
        achieved = {i: stages[i].signed(ref) for i in range(index)}
        bound = relaxation.stage_bound(stages, index, achieved, _solver())
        assert bound is not None and bound >= stage.signed(ref)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(drawn=solo_fleets())
def test_proofs_from_the_bound_are_the_reference_optimum(drawn, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """From a stuck start and no full model: every level the solve reports at its bound in
    the proven prefix is the reference optimum."""
    monkeypatch.setattr(budget, "CALIBRATION", replace(budget.CALIBRATION, model_build_share=0.0))
    snap, pick = drawn
    problem = build_problem(snap)
    ref = reference_optimum(problem).values
    order = list(ref)
    start = _stuck_start(problem, pick)
    result = solve_lexicographic(problem, hints=[start], time_limit_s=10, deterministic=True)
    assert result.placed is not None
    reached = level_values(problem, result.placed)
    assert lexicographic(order, {n: reached[n] for n in order}, ref) <= 0
    for name in order:
        if result.bounds.get(name) != reached[name]:
            break  # the proven prefix ends here
        assert reached[name] == ref[name]
