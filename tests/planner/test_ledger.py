"""The one per-host ledger (grid/planner/ledger.py): its fast `admits` and its per-family
`blockers` give one answer, and both equal reference.py's rows (written from the snapshot)
on every state a random sequence of placements reaches; validate.py, which runs the same
rules, accepts exactly the placements the reference accepts."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.planner.ledger import HostLoad, Rules, admits, blockers
from grid.planner.problem_build import build_problem
from tests.planner.brute_force import feasible_contents
from tests.planner.fleets import snapshot, want
from tests.planner.strategies import fleets
from tests.planner.test_gpus import GB, _assignable, _gpu_host, _gpu_model

pytestmark = pytest.mark.property


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.integers(0, 10**6))
def test_admits_equals_no_blocker_and_the_reference_rows(snap, seed: int) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    rules = Rules.of(problem)
    rng = random.Random(seed)
    for budget in problem.hosts:
        cands = list(problem.candidates_of_host(budget.host_id))
        if not cands:
            continue
        feasible = feasible_contents(problem, budget.host_id)
        load = HostLoad(budget)
        rng.shuffle(cands)
        for cand in cands:
            fast = admits(load, cand, rules)
            slow = not blockers(load, cand, rules)
            assert fast == (slow and cand.model_id not in load.placed), (cand, blockers)
            grown = frozenset({*load.placed, cand.model_id})
            assert fast == (grown in feasible), (cand, sorted(grown))
            if fast:
                load.add(cand, rules.ceilings.get(cand.model_id, 0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.integers(0, 10**6))
def test_remove_restores_the_totals_of_a_load_built_without_it(snap, seed: int) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    rules = Rules.of(problem)
    rng = random.Random(seed)
    for budget in problem.hosts:
        load = HostLoad(budget)
        kept = []
        for cand in problem.candidates_of_host(budget.host_id):
            if admits(load, cand, rules):
                load.add(cand, rules.ceilings.get(cand.model_id, 0))
                kept.append(cand)
        if not kept:
            continue
        gone = rng.choice(kept)
        load.remove(gone, rules.ceilings)
        fresh = HostLoad(budget)
        for cand in kept:
            if cand is not gone:
                fresh.add(cand, rules.ceilings.get(cand.model_id, 0))
        totals = ("footprint_mb", "new_mb", "disk_mb", "min_ceiling", "min_new_ceiling")
        assert [getattr(load, t) for t in totals] == [getattr(fresh, t) for t in totals]
        assert load.placed == fresh.placed and load.new_models == fresh.new_models


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([24, 48, 80]), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(1, 3), st.sampled_from([16, 40, 70])), min_size=1, max_size=5),
    st.integers(0, 10**6),
)
def test_the_gpu_rule_admits_what_a_brute_force_device_assignment_allows(
    devices_gb: list[int], demands: list[tuple[int, int]], seed: int
) -> None:
    """One host with GPUs, models needing k devices of at least g GB (tests/planner/test_gpus.py
    builders): adding models in a random order, the ledger admits a model exactly when some
    assignment of distinct devices to every placed model and it exists (brute force)."""
    snap = snapshot(
        [_gpu_host("g", [d * GB for d in devices_gb])],
        [_gpu_model(f"m{i}", k, g) for i, (k, g) in enumerate(demands)],
        {f"m{i}": want(1) for i in range(len(demands))},
        policy={"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    rules = Rules.of(problem)
    load = HostLoad(problem.host_by_id["g"])
    cands = list(problem.candidates_of_host("g"))
    random.Random(seed).shuffle(cands)
    devices = [d * GB for d in devices_gb]
    need = {f"m{i}": (k, g * GB) for i, (k, g) in enumerate(demands)}
    for cand in cands:
        fast = admits(load, cand, rules)
        assert fast == (not blockers(load, cand, rules))
        assert fast == _assignable(devices, [need[m] for m in [*load.placed, cand.model_id]])
        if fast:
            load.add(cand, rules.ceilings.get(cand.model_id, 0))
