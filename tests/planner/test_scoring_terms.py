"""Placement quality (level 5): host priority, load, latency, failed starts and the 8x boost.

The spec: "Load, latency, host priority, cold-start time, and throttling lower a candidate's
score"; a failed warm/load applies "a bounded per-model penalty, allowing a healthy peer to be
tried after backoff ... the failed node remains a fallback when it is the only feasible
target"; and "as offered concurrency exceeds one replica's target capacity, Grid increases the
value of measured performance and hardware speed by a bounded factor (at most 8x)", for new
placement only.

Oracles: hand-worked scores (worked in each test's comment) and the independently written
scorer `tests/planner/reference_levels.py` on random fleets with these host figures, against
the CP-SAT level expressions, `levels.score_placement` and the solver's cached `Scorer`.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.cpsat.scoring import Scorer
from grid.planner.levels import score_placement
from grid.planner.plan import make_plan
from grid.planner.problem_build import build_problem
from tests.planner.cpsat_support import random_fleet
from tests.planner.fleets import NOW, host, model, resident, snapshot
from tests.planner.reference_levels import all_levels
from tests.planner.test_cpsat_objective import _expression_values as expression_values
from tests.planner.test_cpsat_objective import _placements as placements

pytestmark = pytest.mark.unit

ENGINES = ["cpsat", "heuristic"]


def _plan(snap: FleetSnapshot, engine: str) -> Plan:
    return make_plan(snap, engine=engine, time_limit_s=5.0, deterministic=True)


def _hosts_of(plan: Plan, model_id: str = "m") -> list[str]:
    return sorted(a.host_id for a in plan.assignments if a.model_id == model_id)


def _quality(plan: Plan) -> float:
    return next(v.value for v in plan.solver.objective if v.level == "quality")


def _two(
    a: dict[str, Any] | None = None, b: dict[str, Any] | None = None, **m: Any
) -> FleetSnapshot:
    # Two identical empty hosts; m (4,096 MB, min_replicas 1) goes to exactly one of them.
    return snapshot(
        [host("a", 16384, **(a or {})), host("b", 16384, **(b or {}))],
        [model("m", 4096, **{"min_replicas": 1, "max_replicas": 1, **m})],
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_higher_host_priority_wins_an_otherwise_equal_placement(engine: str) -> None:
    # Equal hosts tie (the lower host ID wins); b's priority 3 adds 10 x 3 = 30 points there.
    assert _hosts_of(_plan(_two(), engine)) == ["a"]
    assert _hosts_of(_plan(_two(b={"priority": 3}), engine)) == ["b"]


@pytest.mark.parametrize("engine", ENGINES)
def test_load_and_latency_lower_a_hosts_score(engine: str) -> None:
    # a carries 2 active tasks and 1 queued request: -min(100, 20 x 3) = -60 there.
    assert _hosts_of(_plan(_two(a={"active_tasks": 2, "queue_depth": 1}), engine)) == ["b"]
    # m's measured latency on a is 3,000 ms: -ceil(3000 / 50) = -60 there.
    assert _hosts_of(_plan(_two(a={"measured_latency_ms": {"m": 3000.0}}), engine)) == ["b"]
    # Another model's latency on a says nothing about m.
    assert _hosts_of(_plan(_two(a={"measured_latency_ms": {"x": 3000.0}}), engine)) == ["a"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_start_sends_the_next_placement_to_a_healthy_peer(engine: str) -> None:
    # a has m's weights (cached: +400, warm 20 s) and b is cold (load 60 + warm 20 = 80 s):
    # a = 400 - 20 + fit, b = 0 - 80 + fit, so a wins by 460 ...
    cached = {"cached_models": ["m"]}
    assert _hosts_of(_plan(_two(a=cached), engine)) == ["a"]
    # ... until one failed start there costs 1,000 points: b (460 - 1000 < 0).
    broken = {"cached_models": ["m"], "start_failures": {"m": 1}}
    assert _hosts_of(_plan(_two(a=broken), engine)) == ["b"]
    # The failed host stays the fallback when it is the only feasible one.
    alone = snapshot(
        [host("a", 16384, **broken)], [model("m", 4096, min_replicas=1, max_replicas=1)]
    )
    assert _hosts_of(_plan(alone, engine)) == ["a"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_failure_penalty_is_bounded(engine: str) -> None:
    # One host, m cached: quality = 400 (cached) - 20 (warm) + 0 (no speed figures)
    # + round(50 x 4096 / 16384) = 12, so 392; ten failures cost the cap, 2,000: -1,608.
    def alone(failures: int, **policy: Any) -> FleetSnapshot:
        fields: dict[str, Any] = {"cached_models": ["m"], "start_failures": {"m": failures}}
        return snapshot(
            [host("a", 16384, **fields)],
            [model("m", 4096, min_replicas=1, max_replicas=1)],
            policy=policy or None,
        )

    assert _quality(_plan(alone(0), engine)) == 392
    assert _quality(_plan(alone(1), engine)) == 392 - 1000
    assert _quality(_plan(alone(10), engine)) == 392 - 2000
    tuned = alone(10, start_failure_penalty=300, start_failure_penalty_cap=900)
    assert _quality(_plan(tuned, engine)) == 392 - 900


def _boost_fleet(offered: float, *, ready: bool = False, **policy: Any) -> FleetSnapshot:
    # near: m cached (or READY), 100 GB/s (10 tok/s prior); fast: cold, 1,000 GB/s (100 tok/s).
    rows = [resident("m", 4096, loaded_at=NOW - 3600, managed=True)] if ready else []
    return snapshot(
        [
            host("fast", 16384, memory_bandwidth_gbps=1000.0),
            host("near", 16384, memory_bandwidth_gbps=100.0, cached_models=["m"], residencies=rows),
        ],
        [model("m", 4096, min_replicas=1, max_replicas=1)],
        {"m": {"offered_concurrency": offered, "rpm": 60}},
        policy=policy or None,
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_hot_demand_moves_a_new_placement_to_a_faster_host(engine: str) -> None:
    # One replica's target capacity: 1.0 x 0.75. Boost = offered / 0.75, clamped to [1, 8].
    # Light (0.5: boost 1): near 400 - 20 + 10 = 390, fast 0 - 80 + 100 = 20: near.
    assert _hosts_of(_plan(_boost_fleet(0.5), engine)) == ["near"]
    # Hot (6.0: boost 8): near 380 + 80 = 460, fast -80 + 800 = 720: the faster host.
    assert _hosts_of(_plan(_boost_fleet(6.0), engine)) == ["fast"]
    # The boost is bounded by policy: at most 2x, near 380 + 20 = 400 beats fast -80 + 200.
    assert _hosts_of(_plan(_boost_fleet(6.0, max_performance_boost=2.0), engine)) == ["near"]


@pytest.mark.parametrize("engine", ENGINES)
def test_hot_demand_never_migrates_a_healthy_replica(engine: str) -> None:
    # New placement only: near's READY replica (+1000) stays; nothing moves to fast.
    plan = _plan(_boost_fleet(6.0, ready=True), engine)
    assert _hosts_of(plan) == ["near"]
    assert plan.preemptions == []


def _with_host_terms(seed: int) -> FleetSnapshot:
    snap = random_fleet(seed, 6, 8)
    rng = random.Random(seed * 7919 + 1)
    hosts = []
    model_ids = [m.model_id for m in snap.models]
    for h in snap.hosts:
        update: dict[str, Any] = {
            "priority": rng.choice([0, 0, 2, 10]),
            "active_tasks": rng.choice([0, 0, 1, 9]),
            "queue_depth": rng.choice([0, 3]),
            "measured_latency_ms": {
                m: rng.choice([40.0, 1234.0, 99999.0]) for m in rng.sample(model_ids, 2)
            },
            "start_failures": {m: rng.choice([1, 2, 5]) for m in rng.sample(model_ids, 2)},
        }
        hosts.append(h.model_copy(update=update))
    return snap.model_copy(update={"hosts": hosts})


@pytest.mark.parametrize("seed", range(12))
def test_every_engine_scores_the_host_terms_as_the_reference_does(seed: int) -> None:
    snap = _with_host_terms(seed)
    problem = build_problem(snap)
    scorer = Scorer(problem)
    for placed in placements(seed, problem):
        expected = all_levels(problem, placed)
        assert expression_values(problem, placed) == expected  # CP-SAT's level expressions
        assert score_placement(problem, placed) == expected  # the validator's scorer
        assert scorer.score(placed) == expected  # the solver's cached scorer
