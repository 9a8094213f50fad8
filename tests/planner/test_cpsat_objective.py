"""The CP-SAT level expressions equal an independently written scorer on feasible placements.

Placements come from the heuristic and from random subsets made feasible by dropping what does
not fit; the independent validator confirms each is feasible before it is compared. The model
pins every x to the placement, so each expression (auxiliaries included) has one value. The
oracle is reference_levels.all_levels (every level, 1-6, restated from the level definitions);
levels.score_placement and the solver's cached Scorer must both agree with it.
"""

from __future__ import annotations

import random

import pytest
from ortools.sat.python import cp_model

from grid.planner.cpsat.build import add_hard_constraints
from grid.planner.cpsat.ledger import placement_problems, repair
from grid.planner.cpsat.objective import level_expressions
from grid.planner.cpsat.scoring import Scorer
from grid.planner.cpsat.variables import PlacementVars
from grid.planner.heuristic import heuristic_placement
from grid.planner.levels import levels, score_placement
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.cpsat_support import plan_of, random_fleet
from tests.planner.reference_levels import all_levels

pytestmark = pytest.mark.unit

Key = tuple[str, str]
SEEDS = range(25)
EXPLANATION_CODES = {"unexplained_shortfall", "unexplained_pin"}


def _expression_values(problem: PlacementProblem, placed: set[Key]) -> dict[str, int]:
    model = cp_model.CpModel()
    xs = PlacementVars(model, problem)
    add_hard_constraints(model, xs, problem)
    exprs = level_expressions(model, xs, problem)
    for key, var in xs.x.items():
        model.add(var == int(key in placed))
    xs.hint(placed)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    assert status == cp_model.OPTIMAL, "a feasible placement satisfies the model"
    return {name: solver.value(expr) for name, expr in exprs.items()}


def _placements(seed: int, problem: PlacementProblem) -> list[set[Key]]:
    rng = random.Random(seed)
    keys = sorted(problem.candidates)
    out = [heuristic_placement(problem)]
    for share in (0.3, 0.7, 1.0):
        out.append(repair(problem, [k for k in keys if rng.random() < share]))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_level_expressions_equal_the_scorer(seed: int) -> None:
    snap = random_fleet(seed, 6, 8)
    problem = build_problem(snap)
    names = [lv.name for lv in levels(problem)]
    for placed in _placements(seed, problem):
        found = [v for v in violations(snap, plan_of(problem, placed), problem.targets)]
        assert [v for v in found if v.code not in EXPLANATION_CODES] == []
        expected = all_levels(problem, placed)
        values = _expression_values(problem, placed)
        assert list(values) == names, "one expression per level, in level order"
        assert values == expected
        assert score_placement(problem, placed) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_cached_scorer_equals_the_scorer(seed: int) -> None:
    problem = build_problem(random_fleet(seed, 6, 8))
    scorer = Scorer(problem)
    rng = random.Random(seed)
    keys = sorted(problem.candidates)
    for _ in range(5):
        placed = {k for k in keys if rng.random() < 0.5}  # need not be feasible
        expected = all_levels(problem, placed)
        assert scorer.score(placed) == expected
        assert score_placement(problem, placed) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_the_python_ledger_agrees_with_the_validator(seed: int) -> None:
    snap = random_fleet(seed, 6, 8)
    problem = build_problem(snap)
    rng = random.Random(seed)
    keys = sorted(problem.candidates)
    for share in (0.1, 0.1, 0.2, 0.2, 0.3, 0.5, 0.8):
        placed = {k for k in keys if rng.random() < share}
        found = [v for v in violations(snap, plan_of(problem, placed), problem.targets)]
        hard = [v for v in found if v.code not in EXPLANATION_CODES]
        assert (placement_problems(problem, placed) == []) == (hard == []), (placed, hard)
