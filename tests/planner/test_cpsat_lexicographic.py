"""solve_lexicographic against brute force on tiny fleets, and its budget and hint behaviour.

Brute force enumerates every placement within the replica bounds, keeps those the independent
validator accepts (explanation codes aside: no plan text exists yet), scores each with the
independently written scorer of every level (reference_levels.py: levels 1-6, domain
shortfall, disruption, quality and spare hosts included) and picks the lexicographic best.
The solver must reach the same value on every level; its own report must say the same.
"""

from __future__ import annotations

import itertools

import pytest

from grid.planner.cpsat.solve import solve_lexicographic
from grid.planner.levels import levels, score_placement
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.cpsat_support import plan_of, random_fleet
from tests.planner.fleets import NOW, host, model, resident, snapshot, want
from tests.planner.reference_levels import all_levels, better

pytestmark = pytest.mark.unit

Key = tuple[str, str]
SEEDS = range(30)
EXPLANATION_CODES = {"unexplained_shortfall", "unexplained_pin"}


def brute_force_best(problem: PlacementProblem) -> dict[str, int]:
    """The best reference score over every feasible placement."""
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
        values = all_levels(problem, placed)
        if best is None or better(problem, values, best) > 0:
            best = values
    assert best is not None, "the empty placement is always valid"
    return best


@pytest.mark.parametrize("seed", SEEDS)
def test_every_level_matches_brute_force(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 4, 5))
    result = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert result.status == "OPTIMAL", result.message
    assert result.placed is not None
    assert all_levels(problem, result.placed) == brute_force_best(problem)
    values = score_placement(problem, result.placed)
    assert values == all_levels(problem, result.placed), "the planner's report agrees"
    for level in levels(problem):
        assert result.bounds[level.name] == values[level.name], "proven levels report the value"


@pytest.mark.parametrize("seed", range(15))
def test_dense_fleets_match_brute_force(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 3, 4, loose=True))
    result = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert result.status == "OPTIMAL", result.message
    assert result.placed is not None
    assert all_levels(problem, result.placed) == brute_force_best(problem)


@pytest.mark.parametrize("seed", range(10))
def test_an_infeasible_hint_is_repaired_not_trusted(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 4, 4))
    everything = set(problem.candidates) | {("no-such-model", "h0")}
    hinted = solve_lexicographic(problem, hints=[everything], time_limit_s=20, deterministic=True)
    plain = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert hinted.placed is not None and plain.placed is not None
    assert all_levels(problem, hinted.placed) == all_levels(problem, plain.placed)
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


def test_the_reference_scorer_on_a_hand_worked_fleet() -> None:
    # One 10,000 MB host (no headroom), a ready priority-2 incumbent of 4,000 MB (warm 20 s,
    # load 60 s, not cached) and a cold 2,000 MB model whose weights are cached elsewhere.
    snap = snapshot(
        [
            host(
                "h1",
                10_000,
                failure_domain="rack-a",
                residencies=[resident("inc", 4000, loaded_at=NOW - 9000)],
            ),
            host("h2", 10_000, failure_domain="rack-a", compute_gflops=50_000),
        ],
        [
            model("inc", 4000, priority=2, warm_estimate_s=20, load_estimate_s=60),
            model("new", 2000, min_failure_domains=2, max_replicas=2),
        ],
        {"inc": want(1), "new": want(2)},
        {"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    kept = all_levels(problem, {("inc", "h1"), ("new", "h1"), ("new", "h2")})
    # disruption 0; quality: inc 1000 - 0 + 0 + round(50 * 0.4) = 1020; new on h1 cold:
    # 0 - 80 + 0 + round(50 * 0.2) = -70; new on h2: -80 + round(min(100, 50) * 1) + 10 = -20
    assert kept["disruption"] == 0
    assert kept["quality"] == 1020 - 70 - 20
    assert kept["domain_shortfall"] == 1  # two replicas of `new`, both in rack-a
    assert kept["spare_hosts"] == 0
    dropped = all_levels(problem, {("new", "h2")})
    assert dropped["disruption"] == (2 + 1) * 2 * (10 + 80)  # ready: weight 2, warm-back 80 s
    assert dropped["spare_hosts"] == 1 and dropped["domain_shortfall"] == 0
    assert better(problem, kept, dropped) == 1  # the replica levels decide first
