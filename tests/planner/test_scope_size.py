"""`scope_size` (solve.py decides whether a stage's model can be built from it, without
listing 3.7 M keys at 10,000 hosts) is the length of the listing `scope_keys` makes, for every
scope, on fleets with pins, several priority classes and residencies."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.snapshot import load_snapshot
from grid.lab.fleetgen import generate_fleet
from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner.cpsat.stages import ALL, scope_keys, scope_size
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem

pytestmark = pytest.mark.property

REPO = Path(__file__).resolve().parents[2]


def _check(problem: PlacementProblem) -> None:
    for scope in [*range(len(problem.priorities) + 1), ALL]:  # the scopes stages use
        assert scope_size(problem, scope) == len(scope_keys(problem, scope)), scope


@pytest.mark.parametrize("name", ["office.json", "fleet-64.json"])
def test_the_shipped_fleets(name: str) -> None:
    _check(build_problem(load_snapshot(REPO / "models" / "fleets" / name, now=0.0)))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), production=st.booleans())
def test_generated_fleets(seed: int, production: bool) -> None:
    snap = generate_production_fleet(64, 20, seed) if production else generate_fleet(48, 24, seed)
    _check(build_problem(snap))
