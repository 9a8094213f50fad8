"""Chain moves of the vacate pass (grid/planner/vacate.py): an evicted replica that fits no
other host by first fit vacates a host of its own, or moves back to its own incumbent.

Oracles: hand-worked optima of tiny fleets (worked out in each docstring), the independent
HiGHS lexicographic MILP (tests/planner/reference.py) with its own level scorer
(reference_staged.level_values), and validate.py on the resulting plan. Without the chain
pass (MAX_CHAIN_TRIALS = 0) each hand-worked case keeps its stuck placement.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.planner import vacate
from grid.planner.cpsat.ledger import Ledger
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.vacate import vacate_improve
from grid.planner.validate import violations
from tests.planner.fleets import host, model, resident, snapshot, want
from tests.planner.reference import reference_optimum, reference_plan
from tests.planner.reference_staged import level_values, lexicographic
from tests.planner.test_scale_vacate import _vacate_from_scratch

pytestmark = pytest.mark.property

Key = tuple[str, str]
GB = 1024


def _solos(residents_on_b: list[dict[str, object]]) -> FleetSnapshot:
    """Host a (40 GB) is the only one that fits `solo2` (36 GB); `solo1` (28 GB, one
    required replica) fits a and b (32 GB); `small` (4 GB) fits b and c (8 GB). Both solos
    need a host to themselves (colocation ceiling 1)."""
    return snapshot(
        [
            host("a", 40 * GB, max_models=4),
            host("b", 32 * GB, max_models=4, residencies=residents_on_b),
            host("c", 8 * GB, max_models=4),
        ],
        [
            model("solo1", 28 * GB, priority=10, min_replicas=1, max_colocated_models=1),
            model("solo2", 36 * GB, priority=10, max_colocated_models=1),
            model("small", 4 * GB, priority=10),
        ],
        {"solo1": want(1), "solo2": want(1), "small": want(1)},
    )


def _check_optimal(snap: FleetSnapshot, problem: PlacementProblem, placed: set[Key]) -> None:
    ref = reference_optimum(problem)
    got = level_values(problem, placed)
    assert {n: got[n] for n in ref.values} == ref.values
    assert [v.code for v in violations(snap, reference_plan(problem, frozenset(placed)))] == []


def test_an_evicted_solo_model_vacates_a_host_of_small_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stuck: solo1 on a, small on b, solo2 out. One step (vacate a for solo2) loses solo1's
    required replica: b holds small and c is too small for solo1. Hand-worked optimum, two
    steps: small moves to c, solo1 takes b, solo2 takes a (all three placed)."""
    snap = _solos([])
    problem = build_problem(snap)
    stuck = {("solo1", "a"), ("small", "b")}
    monkeypatch.setattr(vacate, "MAX_CHAIN_TRIALS", 0)
    assert vacate_improve(problem, stuck) == stuck  # one-step moves alone: stuck
    monkeypatch.setattr(vacate, "MAX_CHAIN_TRIALS", 96)
    improved = vacate_improve(problem, stuck)
    assert improved == {("solo2", "a"), ("solo1", "b"), ("small", "c")}
    _check_optimal(snap, problem, improved)


def test_an_evicted_solo_model_returns_to_its_own_incumbent_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same fleet with solo1 and small both live on b (b cannot be vacated for a new
    placement: its live residencies bind new ones). Stuck: solo1 new on a, small kept on b.
    Hand-worked optimum: solo1 keeps its incumbent on b alone, small moves to c, solo2 takes
    a (the 1,000 x 200 mixed fleet's case: video-197 back on its own host)."""
    snap = _solos([resident("solo1", 28 * GB), resident("small", 4 * GB)])
    problem = build_problem(snap)
    stuck = {("solo1", "a"), ("small", "b")}
    assert not problem.candidates[("small", "b")].is_new
    monkeypatch.setattr(vacate, "MAX_CHAIN_TRIALS", 0)
    assert vacate_improve(problem, stuck) == stuck
    monkeypatch.setattr(vacate, "MAX_CHAIN_TRIALS", 96)
    improved = vacate_improve(problem, stuck)
    assert improved == {("solo2", "a"), ("solo1", "b"), ("small", "c")}
    _check_optimal(snap, problem, improved)


def test_the_desired_chain_pass_asks_round_by_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four 40 GB hosts and an 8 GB one; `a` (3 wanted) and `b` (2 wanted) need a host to
    themselves (30 GB each), `small` (4 GB) fits anywhere. Start: a on h1 and h2, b on h3,
    small on h4. With one chain trial (and no one-step passes), asking round by round tries
    b's second replica (p10:direct:2) before a's third (p10:direct:3): small moves to t and
    the free host goes to a second solo replica of round 2. Hand-worked optimum: a 2, b 2,
    small 1 (the fifth solo replica has no host); asking a's third first would leave b at 1."""
    snap = snapshot(
        [host(f"h{i}", 40 * GB, max_models=4) for i in range(1, 5)]
        + [host("t", 8 * GB, max_models=4)],
        [
            model("a", 30 * GB, priority=10, max_colocated_models=1, max_replicas=3),
            model("b", 30 * GB, priority=10, max_colocated_models=1, max_replicas=2),
            model("small", 4 * GB, priority=10),
        ],
        {"a": want(3), "b": want(2), "small": want(1)},
    )
    problem = build_problem(snap)
    start = {("a", "h1"), ("a", "h2"), ("b", "h3"), ("small", "h4")}
    monkeypatch.setattr(vacate, "MAX_TRIALS", 0)
    monkeypatch.setattr(vacate, "MAX_CHAIN_TRIALS", 1)
    improved = vacate_improve(problem, start)
    counts = {m: sum(1 for k in improved if k[0] == m) for m in ("a", "b", "small")}
    assert counts == {"a": 2, "b": 2, "small": 1}
    _check_optimal(snap, problem, improved)


# ----------------------------------------------------------------------------- random fleets


@st.composite
def solo_fleets(draw: st.DrawFn) -> tuple[FleetSnapshot, int]:
    """Big (40 GB), middle (32 GB) and small (8 GB) hosts; models that need a host to
    themselves, the `large*` ones (36 GB) only on big hosts, the `solo*` ones (20-30 GB) on
    big or middle hosts, next to small models; some live where they run. And a seed for the
    starting placement."""
    rng = random.Random(draw(st.integers(min_value=0, max_value=10**6)))

    def solo(name: str, gb: int) -> dict[str, object]:
        return model(
            name,
            gb * GB,
            priority=rng.choice([10, 10, 50]),
            min_replicas=rng.choice([0, 1]),
            max_colocated_models=1,
        )

    models = [solo(f"large{i}", 36) for i in range(rng.randint(1, 2))]
    models += [solo(f"solo{i}", rng.choice([20, 28, 30])) for i in range(rng.randint(1, 3))]
    models += [
        model(f"small{i}", rng.choice([2, 4, 6]) * GB, priority=rng.choice([0, 10]))
        for i in range(rng.randint(1, 4))
    ]
    hosts = []
    for i, size in enumerate([40] * rng.randint(1, 2) + [32] * rng.randint(1, 2) + [8, 8]):
        fits = [m for m in models if int(str(m["memory_mb"])) <= size * GB]
        live = rng.sample(fits, min(len(fits), rng.choice([0, 0, 0, 1])))
        hosts.append(
            host(
                f"h{i}",
                size * GB,
                max_models=3,
                residencies=[resident(str(m["model_id"]), int(str(m["memory_mb"]))) for m in live],
            )
        )
    demand = {str(m["model_id"]): want(rng.randint(1, 2)) for m in models}
    return snapshot(hosts, models, demand), rng.randint(0, 10**6)


def _stuck_start(problem: PlacementProblem, pick: int) -> set[Key]:
    """A random feasible packing that places the large models last (first come, first
    placed): they tend to find their hosts taken."""
    rng = random.Random(pick)
    keys = sorted(problem.candidates)
    rng.shuffle(keys)
    keys.sort(key=lambda k: k[0].startswith("large"))
    return Ledger(problem).extend(keys)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(solo_fleets())
def test_chain_moves_never_lose_levels_nor_pass_the_optimum(drawn) -> None:  # type: ignore[no-untyped-def]
    snap, pick = drawn
    problem = build_problem(snap)
    start = _stuck_start(problem, pick)
    improved = vacate_improve(problem, start)
    ref = reference_optimum(problem)
    order = list(ref.values)
    got = level_values(problem, improved)
    assert lexicographic(order, got, level_values(problem, start)) >= 0
    assert lexicographic(order, {n: got[n] for n in order}, ref.values) <= 0
    assert [v.code for v in violations(snap, reference_plan(problem, frozenset(improved)))] == []
    # The incremental pass (copy-on-write ledgers, cached per-host answers) equals the rule
    # restated from scratch: every trial rebuilds its ledgers and scores with the reference.
    assert improved == _vacate_from_scratch(problem, start, list(level_values(problem, set())))
