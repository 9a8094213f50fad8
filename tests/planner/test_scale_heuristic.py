"""The heuristic's per-domain candidate lists (heuristic_order.CandidateOrder): every greedy
pick equals a brute-force argmax; the quality table (memoized per host shape) equals the score
restated candidate by candidate (`_quality_by_hand`).

Oracle: for each pick, every candidate of the model is checked with the placement ledger's
own `allowed`/`fits` questions (the state under test is not changed by the check), scored
with the static quality plus the domain bonus the spec orders, and the highest total wins,
the earliest in (quality, host ID) order on ties. The pick of the indexed scan must be that
candidate (or None when none is feasible); the whole placement must also pass validate.py.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from grid.fleet.models import HostState, ResidencyState
from grid.lab.fleetgen import generate_fleet
from grid.lab.fleetgen_production import generate_production_fleet
from grid.lab.fleetgen_trace import generate_trace_fleet
from grid.planner.heuristic import heuristic_placement
from grid.planner.heuristic_ledger import PlacementState
from grid.planner.heuristic_order import (
    DOMAIN_REQUIRED_BONUS,
    DOMAIN_SPREAD_BONUS,
    CandidateOrder,
)
from grid.planner.levels import quality_scores
from grid.planner.problem import Candidate, PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
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


@pytest.mark.parametrize(
    ("fleet", "domains"),
    [
        (lambda: generate_production_fleet(600, 60, 7), 3),  # three pods
        (lambda: generate_trace_fleet(800, 40, 5), 21),  # racks of 32
    ],
    ids=["production-pods", "trace-racks"],
)
def test_every_greedy_pick_on_a_generated_fleet_is_the_brute_force_best(
    monkeypatch: pytest.MonkeyPatch, fleet: Any, domains: int
) -> None:
    """Failure domains as pods or racks (a third of the trace's models asking for two): the
    per-domain heads in heaps pick what the brute force over every candidate picks."""
    snap = fleet()
    problem = build_problem(snap)
    assert len({h.domain for h in problem.hosts}) >= domains
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


def _quality_by_hand(problem: PlacementProblem) -> dict[tuple[str, str], int]:
    """The static quality score restated candidate by candidate, nothing shared between
    hosts: state (READY 1000, other incumbent 800, cached 400), minus the startup seconds
    (capped at 300), plus throughput (capped at 100) times the demand boost, plus up to 50
    for filling the host, minus 30 per scarce peer, minus 50 when throttled."""
    snap = problem.snapshot
    hosts = {h.host_id: h for h in snap.hosts}
    by_model = [problem.candidates_of_model(p.model_id) for p in problem.models]
    peers = Counter(c.host_id for cands in by_model if len(cands) <= 2 for c in cands)
    out = {}
    for key, c in problem.candidates.items():
        prof = problem.model_by_id[c.model_id]
        host = hosts[c.host_id]
        score = {ResidencyState.READY: 1000, None: 400 if c.cached else 0}.get(c.incumbent, 800)
        if c.incumbent is not ResidencyState.READY:
            learned = snap.learned_startup.get(c.model_id, {}).get(c.host_id)
            warm, load = prof.warm_estimate_s, prof.load_estimate_s
            if learned is not None:
                warm = learned.warm_s if learned.warm_s is not None else warm
                load = learned.load_s if learned.load_s is not None else load
            cached = c.incumbent is not None or c.cached
            score -= min(300, math.ceil(warm + (0.0 if cached else load)))
        demand = snap.demand.get(c.model_id)
        boost = 1.0
        if demand is not None:
            per_replica = prof.replica_concurrency * prof.target_utilization
            ratio = demand.offered_concurrency / per_replica if per_replica > 0 else 1.0
            boost = max(1.0, min(snap.policy.max_performance_boost, ratio))
        perf = host.measured_tokens_per_s.get(c.model_id, host.hardware_tokens_per_s)
        score += round(min(100.0, perf) * boost)
        allocatable = problem.host_by_id[c.host_id].allocatable_mb
        if allocatable > 0:
            score += round(50 * min(1.0, c.memory_mb / allocatable))
        if len(problem.candidates_of_model(c.model_id)) > 2:
            score -= 30 * peers.get(c.host_id, 0)
        if host.state is HostState.THROTTLED:
            score -= 50
        out[key] = score
    return out


def test_quality_table_on_generated_fleets_equals_the_score_by_hand() -> None:
    for snap in (generate_production_fleet(600, 60, 7), generate_fleet(256, 96, 7)):
        problem = build_problem(snap)
        assert quality_scores(problem) == _quality_by_hand(problem)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_quality_table_equals_the_score_by_hand(snap) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    assert quality_scores(problem) == _quality_by_hand(problem)


def test_hosts_of_one_shape_keep_their_own_measured_learned_and_scarce_scores() -> None:
    # Four hosts alike but for h-b's measured throughput, h-c's learned startup, h-d's scarce
    # peer (the only host of "rare") and h-e's throttled state: their scores must differ.
    hosts = [host(h, 32768) for h in ("h-a", "h-b", "h-c", "h-d", "h-e")]
    hosts[1]["measured_tokens_per_s"] = {"m": 90.0}
    hosts[4]["state"] = "throttled"
    snap = snapshot(
        hosts,
        [model("m", 4096), model("rare", 2048, allowed_hosts=["h-d"])],
        {"m": want(1), "rare": want(1)},
    )
    doc = snap.model_dump(mode="json")
    doc["learned_startup"] = {"m": {"h-c": {"warm_s": 250.0, "load_s": 40.0}}}
    snap = type(snap).model_validate(doc)
    problem = build_problem(snap)
    got = quality_scores(problem)
    assert got == _quality_by_hand(problem)
    plain = got[("m", "h-a")]
    assert all(got[("m", h)] != plain for h in ("h-b", "h-c", "h-d", "h-e"))
