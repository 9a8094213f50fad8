"""Vacate moves (grid/planner/vacate.py): a whole host freed for a replica that needs one.

Oracles: the independent HiGHS lexicographic MILP (tests/planner/reference.py), the reference
level scorer (reference_staged.level_values) and validate.py on the resulting plan.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from grid.planner.heuristic import heuristic_placement
from grid.planner.problem import build_problem
from grid.planner.vacate import vacate_improve
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.planner.reference import reference_optimum, reference_plan
from tests.planner.reference_staged import level_values
from tests.planner.strategies import fleets

pytestmark = pytest.mark.property


def _lex(order: list[str], a: dict[str, int], b: dict[str, int]) -> int:
    for name in order:
        if a[name] != b[name]:
            return 1 if a[name] > b[name] else -1
    return 0


def test_an_exclusive_model_gets_a_host_once_its_occupant_moves() -> None:
    # "small" (high priority) fits both hosts; "solo" needs a host to itself and only fits
    # "big". A greedy that puts small on big first leaves solo out; vacating big moves small.
    snap = snapshot(
        [host("a-big", 32768, max_models=4), host("b-small", 8192, max_models=4)],
        [
            model("small", 4096, priority=100, min_replicas=1),
            model("solo", 24576, priority=10, min_replicas=1, max_colocated_models=1),
        ],
        {"small": want(1), "solo": want(1)},
    )
    problem = build_problem(snap)
    stuck = {("small", "a-big")}
    improved = vacate_improve(problem, stuck)
    assert improved == {("small", "b-small"), ("solo", "a-big")}
    ref = reference_optimum(problem)
    got = level_values(problem, improved)
    assert {n: got[n] for n in ref.values} == ref.values
    assert [v.code for v in violations(snap, reference_plan(problem, frozenset(improved)))] == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_vacate_never_worsens_the_replica_levels_and_stays_valid(snap) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    greedy = heuristic_placement(problem)
    improved = vacate_improve(problem, greedy)
    order = list(reference_optimum(problem).values)
    before, after = level_values(problem, greedy), level_values(problem, improved)
    assert _lex(order, after, before) >= 0
    plan = reference_plan(problem, frozenset(improved))
    assert [v.code for v in violations(snap, plan)] == []
