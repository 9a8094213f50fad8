"""The heuristic's per-domain candidate lists (heuristic_order.CandidateOrder): every greedy
pick equals a brute-force argmax.

Oracle: for each pick, every candidate of the model is checked with the placement ledger's
own `allowed`/`fits` questions (the state under test is not changed by the check), scored
with the static quality plus the domain bonus the spec orders, and the highest total wins,
the earliest in (quality, host ID) order on ties. The pick of the indexed scan must be that
candidate (or None when none is feasible); the whole placement must also pass validate.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner import heuristic_order
from grid.planner.heuristic import heuristic_placement
from grid.planner.heuristic_ledger import PlacementState
from grid.planner.heuristic_order import (
    DOMAIN_REQUIRED_BONUS,
    DOMAIN_SPREAD_BONUS,
    CandidateOrder,
)
from grid.planner.problem import Candidate, build_problem
from grid.planner.validate import violations
from tests.planner.reference import reference_plan
from tests.planner.strategies import fleets

pytestmark = pytest.mark.property


def _brute_best(order: CandidateOrder, state: PlacementState, model_id: str) -> Candidate | None:
    if not state.has_room_for_model(model_id):
        return None
    problem = state.problem
    goal = problem.model_by_id[model_id].min_failure_domains
    covered = set(state.domains[model_id])
    bonus = DOMAIN_REQUIRED_BONUS if len(covered) < goal else DOMAIN_SPREAD_BONUS
    feasible = [
        c for c in problem.candidates_of_model(model_id) if state.allowed(c) and state.fits(c)
    ]
    if not feasible:
        return None

    def key(c: Candidate) -> tuple[int, int, str]:
        static = order.scores[(c.model_id, c.host_id)]
        new = problem.host_by_id[c.host_id].domain not in covered
        return (-(static + (bonus if new else 0)), -static, c.host_id)

    return min(feasible, key=key)


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap CandidateOrder.best: every greedy pick is compared with the brute force."""
    real = CandidateOrder.best
    picks = [0]

    def best(self: CandidateOrder, state: PlacementState, model_id: str, **kw: Any) -> Any:
        got = real(self, state, model_id, **kw)
        if kw.get("greedy") and kw.get("skip_host") is None:
            want = _brute_best(self, state, model_id)
            assert got == want, (model_id, got, want)
            picks[0] += 1
        return got

    monkeypatch.setattr(CandidateOrder, "best", best)
    return picks


def test_every_greedy_pick_on_a_production_fleet_is_the_brute_force_best(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snap = generate_production_fleet(600, 60, 7)  # three pods: three failure domains
    problem = build_problem(snap)
    assert 1 < len({h.domain for h in problem.hosts}) <= heuristic_order.DOMAIN_INDEX_MAX
    picks = _checked(monkeypatch)
    placed = heuristic_placement(problem)
    assert picks[0] > 100
    plan = reference_plan(problem, frozenset(placed))
    assert [v.code for v in violations(snap, plan)] == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_every_greedy_pick_is_the_brute_force_best(snap) -> None:  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as monkeypatch:
        _checked(monkeypatch)
        problem = build_problem(snap)
        placed = heuristic_placement(problem)
    plan = reference_plan(problem, frozenset(placed))
    assert [v.code for v in violations(snap, plan)] == []
