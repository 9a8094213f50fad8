"""solve_lexicographic against brute force on tiny fleets, and its budget and hint behaviour.

Brute force enumerates every placement within the replica bounds, keeps those the independent
validator accepts (explanation codes aside: no plan text exists yet), and picks the
lexicographic best with levels.compare. The solver must reach the same value on every level.
"""

from __future__ import annotations

import itertools

import pytest

from grid.planner.cpsat.solve import solve_lexicographic
from grid.planner.levels import compare, levels, score_placement
from grid.planner.problem import PlacementProblem, build_problem
from grid.planner.validate import violations
from tests.planner.cpsat_support import plan_of, random_fleet
from tests.planner.fleets import host, model, snapshot, want

pytestmark = pytest.mark.unit

Key = tuple[str, str]
SEEDS = range(30)
EXPLANATION_CODES = {"unexplained_shortfall", "unexplained_pin"}


def brute_force_best(problem: PlacementProblem) -> dict[str, int]:
    per_model: list[list[tuple[Key, ...]]] = []
    for profile in problem.models:
        keys = sorted(
            (c.model_id, c.host_id) for c in problem.candidates_of_model(profile.model_id)
        )
        room = min(len(keys), problem.open_replicas(profile.model_id))
        per_model.append(
            [combo for r in range(room + 1) for combo in itertools.combinations(keys, r)]
        )
    best: dict[str, int] | None = None
    for parts in itertools.product(*per_model):
        placed = {key for part in parts for key in part}
        plan = plan_of(problem, placed)
        found = violations(problem.snapshot, plan, problem.targets)
        if any(v.code not in EXPLANATION_CODES for v in found):
            continue
        values = score_placement(problem, placed)
        if best is None or compare(problem, values, best) > 0:
            best = values
    assert best is not None, "the empty placement is always valid"
    return best


@pytest.mark.parametrize("seed", SEEDS)
def test_every_level_matches_brute_force(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 4, 5))
    result = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert result.status == "OPTIMAL", result.message
    assert result.placed is not None
    values = score_placement(problem, result.placed)
    assert values == brute_force_best(problem)
    for level in levels(problem):
        assert result.bounds[level.name] == values[level.name], "proven levels report the value"


@pytest.mark.parametrize("seed", range(15))
def test_dense_fleets_match_brute_force(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 3, 4, loose=True))
    result = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert result.status == "OPTIMAL", result.message
    assert result.placed is not None
    assert score_placement(problem, result.placed) == brute_force_best(problem)


@pytest.mark.parametrize("seed", range(10))
def test_an_infeasible_hint_is_repaired_not_trusted(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 4, 4))
    everything = set(problem.candidates) | {("no-such-model", "h0")}
    hinted = solve_lexicographic(problem, hints=[everything], time_limit_s=20, deterministic=True)
    plain = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert hinted.placed is not None and plain.placed is not None
    assert score_placement(problem, hinted.placed) == score_placement(problem, plain.placed)
    plan = plan_of(problem, hinted.placed)
    assert [v for v in violations(problem.snapshot, plan) if v.code not in EXPLANATION_CODES] == []


def test_no_time_keeps_the_best_hint_and_says_feasible() -> None:
    snap = snapshot(
        [host("h1", 10000), host("h2", 10000)],
        [model("a", 6000, max_replicas=2), model("b", 6000)],
        {"a": want(2), "b": want(1)},
    )
    problem = build_problem(snap)
    weak, strong = {("a", "h1")}, {("a", "h1"), ("b", "h2")}
    result = solve_lexicographic(
        problem, hints=[weak, strong], time_limit_s=0.0, deterministic=True
    )
    assert result.placed == strong, "the better hint is kept when nothing can be solved"
    assert result.status == "FEASIBLE"
    values = score_placement(problem, strong)
    for level in levels(problem):
        bound, value = result.bounds[level.name], values[level.name]
        assert bound >= value if level.sense == "max" else bound <= value


def test_the_solver_improves_on_a_poor_hint() -> None:
    # the hint puts a where b must go: only a swap gives both models a replica
    snap = snapshot(
        [host("big", 10000), host("small", 5000)],
        [model("a", 4000), model("b", 8000)],
        {"a": want(1), "b": want(1)},
        {"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    result = solve_lexicographic(
        problem, hints=[{("a", "big")}], time_limit_s=20, deterministic=True
    )
    assert result.placed == {("a", "small"), ("b", "big")}
    assert result.status == "OPTIMAL"


def test_max_min_fair_round_goes_to_the_most_harmed_model() -> None:
    # three slots, two equal models wanting three each: 2 + 1, and the queue decides who gets 2
    snap = snapshot(
        [host("h1", 5000), host("h2", 5000), host("h3", 5000)],
        [model("a", 4000, max_replicas=3), model("b", 4000, max_replicas=3)],
        {"a": want(3), "b": want(3, queue_depth=4)},
    )
    problem = build_problem(snap)
    result = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert result.placed is not None
    counts = {m: sum(1 for mm, _h in result.placed if mm == m) for m in ("a", "b")}
    assert counts == {"a": 1, "b": 2}


@pytest.mark.parametrize("seed", range(5))
def test_deterministic_mode_repeats_itself(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 6, 8))
    first = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    again = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert (first.placed, first.status, first.bounds) == (again.placed, again.status, again.bounds)
