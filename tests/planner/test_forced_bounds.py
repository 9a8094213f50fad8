"""Bounds of the soft levels under forced replica counts (cpsat/forced.py) and Martello-Toth L2.

Oracles: brute-force bin packing (every assignment of a few items), tests/planner/brute_force.py
(every placement with the forced counts against reference.py's rows) scored by the independent
reference_levels.all_levels, and hand-worked instances.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.planner.cpsat.forced import forced_counts, forced_soft_bounds, martello_toth_l2
from grid.planner.levels import quality_scores
from grid.planner.plan import make_plan
from grid.planner.problem_build import build_problem
from tests.planner.brute_force import feasible_placements
from tests.planner.fleets import host, model, snapshot
from tests.planner.reference_levels import all_levels
from tests.planner.test_arcflow import symmetric_fleet

pytestmark = pytest.mark.property


def _bins_needed(sizes: list[int], capacity: int) -> int:
    """The optimum number of bins, by trying every assignment to k bins."""
    for k in range(1, len(sizes) + 1):
        for assignment in itertools.product(range(k), repeat=len(sizes)):
            loads = [0] * k
            for size, b in zip(sizes, assignment, strict=True):
                loads[b] += size
            if max(loads) <= capacity:
                return k
    return len(sizes)


@settings(max_examples=60, deadline=None)
@given(st.integers(5, 20), st.lists(st.integers(1, 20), min_size=1, max_size=6))
def test_l2_is_a_lower_bound_at_least_the_continuous_one(capacity: int, raw: list[int]) -> None:
    sizes = [min(s, capacity) for s in raw]
    bound = martello_toth_l2(sizes, capacity)
    assert math.ceil(sum(sizes) / capacity) <= bound <= _bins_needed(sizes, capacity)


@pytest.mark.parametrize(
    ("sizes", "capacity", "l2"),
    [
        ([6, 6, 6], 10, 3),  # L1 = 2: no two fit together
        ([7, 7, 3, 3, 3], 10, 3),  # L1 = 3 already
        ([51, 51, 51, 10, 10], 100, 3),  # L1 = 2: the three 51s need a host each
        ([5, 5, 5, 5], 10, 2),
    ],
)
def test_l2_hand_worked(sizes: list[int], capacity: int, l2: int) -> None:
    assert martello_toth_l2(sizes, capacity) == l2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_forced_bounds_hold_for_every_placement_with_the_forced_counts(seed: int) -> None:
    problem = build_problem(symmetric_fleet(seed, hosts=3, models=4))
    counts = forced_counts(problem)
    placements = feasible_placements(problem, counts)
    if not placements:
        return  # the counts are not reachable: the bounds are never used
    bounds = forced_soft_bounds(problem, quality_scores(problem))
    scored = [all_levels(problem, p) for p in placements]
    assert max(v["quality"] for v in scored) <= bounds["quality"]
    assert max(v["spare_hosts"] for v in scored) <= bounds["spare_hosts"]


def test_full_hosts_leave_no_spare_host_and_the_plan_proves_it() -> None:
    """Three 100 MB hosts, items 50+30+20, 45+35+20, 60+40 (300 MB: every host full). Every
    model is required, so the counts are forced; L1 = 3 hosts, so no host stays spare: the
    plan proves every level (OPTIMAL) instead of searching for a spare host."""
    sizes = [50, 30, 20, 45, 35, 20, 60, 40]
    snap = snapshot(
        [host(f"h{j}", 100) for j in range(3)],
        [model(f"m{i}", mb, min_replicas=1, max_replicas=1) for i, mb in enumerate(sizes)],
        policy={"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    assert forced_soft_bounds(problem, quality_scores(problem))["spare_hosts"] == 0
    plan = make_plan(snap, time_limit_s=10.0)
    assert plan.solver.status == "OPTIMAL"
    assert len(plan.assignments) == len(sizes)
