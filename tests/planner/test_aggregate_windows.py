"""Windows of the host-type model (cpsat/aggregate.py): runs of stages proven by one solution
that meets all their static bounds, and the relaxation of a window that is not reached.

Oracles: the independent HiGHS lexicographic MILP of tests/planner/reference.py (per host)
and hand-worked optima; the stage-by-stage pass (no windows) as a second, differential path.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from grid.planner.cpsat.aggregate import _AggregateModel, _Attempt, _reach_bounds
from grid.planner.cpsat.bounds import static_bounds
from grid.planner.cpsat.scoring import Scorer
from grid.planner.heuristic import heuristic_placement
from grid.planner.problem_build import build_problem
from grid.planner.types import host_types
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.planner.reference import reference_optimum, reference_plan
from tests.planner.reference_staged import level_values
from tests.planner.test_types import shaped_fleet

pytestmark = pytest.mark.property


def _two_hosts_three_models() -> object:
    """Two identical one-slot hosts, three models wanting two replicas each: at most two
    replicas fit in all, so the static bounds (every model at 1, then at 2) are unreachable."""
    hosts = [host(f"h{i}", 16384, max_models=1) for i in range(2)]
    models = [model(f"m{i}", 6144, priority=10, min_replicas=1, max_replicas=2) for i in range(3)]
    return snapshot(hosts, models, {m["model_id"]: want(2) for m in models})


def _solve_first_stage(built: _AggregateModel, attempt: _Attempt) -> int:
    built.model.maximize(attempt.stages[0].expression(attempt.exprs))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(built.model) == cp_model.OPTIMAL
    return round(solver.objective_value)


def test_an_unreached_window_leaves_the_model_as_it_was() -> None:
    problem = build_problem(_two_hosts_three_models())  # type: ignore[arg-type]
    types = host_types(problem)
    assert [t.count for t in types] == [2]  # the two hosts aggregate into one type
    scorer = Scorer(problem)
    static = static_bounds(problem, scorer.quality)
    attempt = _Attempt(problem, types, scorer, static)
    targets = [(s.expression(attempt.exprs), s.signed(static)) for s in attempt.stages]
    reached, status = _reach_bounds(attempt.built, targets, 5.0)
    assert reached is None and status == cp_model.INFEASIBLE
    fresh = _Attempt(problem, types, scorer, static)
    # After the relaxation the first stage reaches what a fresh model reaches: two models at
    # one replica each (hand-worked: two one-slot hosts).
    relaxed_value = _solve_first_stage(attempt.built, attempt)
    assert relaxed_value == _solve_first_stage(fresh.built, fresh)
    result = _Attempt(problem, types, scorer, static).run(set(), 1e18, windows=True)
    ref = reference_optimum(problem)
    assert {n: result.values[n] for n in ref.values} == ref.values
    assert sum(1 for m in ("m0", "m1", "m2") if any(k[0] == m for k in result.placed)) == 2


def test_a_reached_window_proves_every_stage_in_one_solve() -> None:
    """Three hosts, three models wanting one replica each: every static bound is reached."""
    hosts = [host(f"h{i}", 16384, max_models=1) for i in range(3)]
    models = [model(f"m{i}", 6144, priority=10, min_replicas=1, max_replicas=1) for i in range(3)]
    problem = build_problem(snapshot(hosts, models, {m["model_id"]: want(1) for m in models}))
    types = host_types(problem)
    scorer = Scorer(problem)
    static = static_bounds(problem, scorer.quality)
    attempt = _Attempt(problem, types, scorer, static)
    solves: list[int] = []
    original = cp_model.CpSolver.solve

    def counted(self: cp_model.CpSolver, *args: object, **kwargs: object) -> object:
        solves.append(1)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    cp_model.CpSolver.solve = counted  # type: ignore[method-assign,assignment]
    try:
        result = attempt.run(set(), 1e18, windows=True)
    finally:
        cp_model.CpSolver.solve = original  # type: ignore[method-assign]
    assert result.proven and len(solves) == 1
    assert sorted(k[0] for k in result.placed) == ["m0", "m1", "m2"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_windows_and_stage_by_stage_agree_and_match_the_reference(seed: int) -> None:
    snap = shaped_fleet(seed)
    problem = build_problem(snap)
    types = host_types(problem)
    scorer = Scorer(problem)
    static = static_bounds(problem, scorer.quality)
    greedy = heuristic_placement(problem)
    windowed = _Attempt(problem, types, scorer, static).run(greedy, 1e18, windows=True)
    staged = _Attempt(problem, types, scorer, static).run(greedy, 1e18, windows=False)
    assert all(s == "OPTIMAL" for s in windowed.statuses + staged.statuses)
    # Both are the aggregate's lexicographic optimum over every replica level.
    assert windowed.values == staged.values
    plan = reference_plan(problem, frozenset(windowed.placed))
    assert [v.code for v in violations(snap, plan)] == []
    if windowed.proven:
        ref = reference_optimum(problem)
        reached = level_values(problem, windowed.placed)
        assert {n: reached[n] for n in ref.values} == ref.values
