"""Max-min fairness inside a priority class covers required baseline replicas too (issue 8, #5).

Every model's k-th baseline replica comes before any model's (k+1)-th, exactly as for directly
demanded replicas. The fleets are small enough to work out by hand; each test states the fair
placement and why it is the only one.
"""

from __future__ import annotations

from collections import Counter

import pytest

from grid.fleet.models import FleetSnapshot
from grid.planner.plan import make_plan
from grid.planner.validate import violations
from tests.planner.fleets import NOW, host, model, resident, snapshot

pytestmark = pytest.mark.unit

ENGINES = ("heuristic", "cpsat")


def _two_for_one_fleet() -> FleetSnapshot:
    """Two equal one-model hosts; `big` (min_replicas 2) and `small` (min_replicas 1).

    `big` fits either host and scores better on both (it fills more of the host), so an
    objective that only counts baseline replicas (2 either way) prefers big, big. The fair
    plan gives each model one host: big's second replica ranks below small's first.
    """
    return snapshot(
        [host("h1", 8192, max_models=1), host("h2", 8192, max_models=1)],
        [
            model("big", 7000, priority=10, min_replicas=2, max_replicas=2),
            model("small", 1000, priority=10, min_replicas=1, max_replicas=1),
        ],
    )


def _blocked_peer_fleet() -> FleetSnapshot:
    """The greedy round gives `big` its cached host h1 first (equal candidate counts, larger
    model first); `small` then finds h1 full and h3 held by a higher-class incumbent, and
    big's second replica takes h2. Only moving big off h1 (it cannot go anywhere else: h2
    already holds it) lets small in, which costs big its second replica: fair, and the only
    fair plan, since small fits nowhere but h1 and h3.
    """
    return snapshot(
        [
            host("h1", 8192, tags=["x"], cached_models=["big"]),
            host("h2", 8192),
            host(
                "h3",
                8192,
                tags=["x", "y"],
                residencies=[resident("keeper", 8000, loaded_at=NOW - 9000)],
            ),
        ],
        [
            model("keeper", 8000, priority=100, min_replicas=1, max_replicas=1),
            model(
                "big",
                6000,
                priority=10,
                min_replicas=2,
                max_replicas=2,
                forbidden_tags=["y"],
            ),
            model("small", 3000, priority=10, min_replicas=1, max_replicas=1, required_tags=["x"]),
        ],
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_every_models_first_baseline_replica_before_any_second(engine: str) -> None:
    snap = _two_for_one_fleet()
    plan = make_plan(snap, engine=engine, time_limit_s=5, deterministic=True)
    assert violations(snap, plan) == []
    counts = Counter(a.model_id for a in plan.assignments)
    assert counts == {"big": 1, "small": 1}
    short = {u.model_id: u.missing_replicas for u in plan.unsatisfied}
    assert short == {"big": 1}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_blocked_peer_gets_its_first_replica_from_a_seconds_host(engine: str) -> None:
    snap = _blocked_peer_fleet()
    plan = make_plan(snap, engine=engine, time_limit_s=5, deterministic=True)
    assert violations(snap, plan) == []
    placed = {(a.model_id, a.host_id) for a in plan.assignments}
    assert placed == {("keeper", "h3"), ("big", "h2"), ("small", "h1")}


def test_the_baseline_levels_are_reported_round_by_round() -> None:
    plan = make_plan(_two_for_one_fleet(), engine="cpsat", time_limit_s=5, deterministic=True)
    values = {lv.level: lv.value for lv in plan.solver.objective}
    # Hand-worked: round 1 has two members (both placed), round 2 only big (not placed).
    assert values["p10:baseline:1"] == 2
    assert values["p10:baseline:2"] == 0
    assert "p10:baseline" not in values
