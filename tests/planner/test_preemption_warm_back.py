"""Victims ranked by learned warm-back time; planned loads of a lower class yield (issue 19).

The spec: among equally low-priority choices the allocator prefers failed, draining and idle
victims, "then prefers the set with the lowest learned warm-back cost", and priority preemption
uses "the fastest eligible learned load-plus-warm path"; a host without samples keeps the
configured estimates. Warm-back is read as the time to warm the victim again on the host it
leaves (its warm, plus its load unless the host lists the weights as cached).

Oracles: hand-worked warm-back times in each test's comment.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.models import FleetSnapshot
from grid.planner.heuristic import heuristic_placement
from grid.planner.plan import make_plan
from grid.planner.preemption import stage_preemptions
from grid.planner.problem_build import build_problem
from tests.planner.fleets import NOW, host, model, resident, snapshot

pytestmark = pytest.mark.unit

OLD = NOW - 10_000


def _full(host_id: str, victim: str) -> dict[str, Any]:
    rows = [resident(victim, 8000, loaded_at=OLD, active_requests=0, managed=True)]
    return host(host_id, 10_000, residencies=rows)


def _fleet(learned: dict[str, Any] | None = None) -> FleetSnapshot:
    # Two full hosts, each with one idle priority-0 victim; vip (priority 100, baseline 1)
    # needs one of them. Configured estimates: load 60 s, warm 20 s for both victims.
    snap = snapshot(
        [_full("h1", "a"), _full("h2", "b")],
        [
            model("vip", 6000, priority=100, min_replicas=1),
            model("a", 8000, load_estimate_s=60.0, warm_estimate_s=20.0),
            model("b", 8000, load_estimate_s=60.0, warm_estimate_s=20.0),
        ],
    )
    if learned:
        doc = snap.model_dump(mode="json") | {"learned_startup": learned}
        snap = FleetSnapshot.model_validate(doc)
    return snap


def _staged(snap: FleetSnapshot) -> list[tuple[str, str]]:
    problem = build_problem(snap)
    preemptions, _removed = stage_preemptions(problem, heuristic_placement(problem))
    return [(p.victim_model_id, p.host_id) for p in preemptions]


def test_equal_configured_warm_back_ties_by_victim_name() -> None:
    # a: 60 + 20 = 80 s, b: 80 s: the lower victim name goes.
    assert _staged(_fleet()) == [("a", "h1")]


def test_a_learned_slow_warm_back_spares_that_victim() -> None:
    # h1 learned a's warm at 400 s: a = 60 + 400 = 460 s > b = 80 s, so b goes instead.
    learned = {"a": {"h1": {"warm_s": 400.0}}}
    assert _staged(_fleet(learned)) == [("b", "h2")]


def test_a_learned_fast_load_elsewhere_does_not_lend_its_speed() -> None:
    # A sample of b on h1 (another host) says nothing of b on h2: b keeps its 80 s, and a's
    # learned 10 s load on h1 makes a = 10 + 20 = 30 s the cheaper victim.
    learned = {"a": {"h1": {"load_s": 10.0}}, "b": {"h1": {"load_s": 1.0, "warm_s": 1.0}}}
    assert _staged(_fleet(learned)) == [("a", "h1")]


def test_a_lower_class_planned_load_yields_the_room_of_a_staged_beneficiary() -> None:
    # h0 (8,192 MB, 5% headroom: 7,782 MB for new work) holds m3 (2,048 MB, READY); the engine
    # put m2 (priority 0, 2,048 MB) there as a new load, and vip (priority 50, 6,144 MB) fits
    # only once m3 is gone *and* m2's planned load is dropped: 6,144 + 2,048 > 7,782. Higher
    # classes fill first, so the plan stages m3's eviction and drops m2's load (nothing drains).
    snap = snapshot(
        [
            host(
                "h0",
                8192,
                residencies=[resident("m3", 2048, loaded_at=OLD, active_requests=0, managed=True)],
            )
        ],
        [
            model("vip", 6144, priority=50, min_replicas=1, min_residency_s=0),
            model("m2", 2048, min_replicas=1, min_residency_s=0),
            model("m3", 2048, min_replicas=1, min_residency_s=0),
        ],
    )
    problem = build_problem(snap)
    placed = {("m3", "h0"), ("m2", "h0")}
    preemptions, removed = stage_preemptions(problem, placed)
    assert [(p.victim_model_id, p.beneficiary_model_id) for p in preemptions] == [("m3", "vip")]
    assert removed == {("m3", "h0"), ("m2", "h0")}


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_warm_back_ranking_holds_for_both_engines(engine: str) -> None:
    learned = {"a": {"h1": {"warm_s": 400.0}}}
    plan = make_plan(_fleet(learned), engine=engine, time_limit_s=5.0, deterministic=True)
    named = [(p.victim_model_id, p.host_id, p.beneficiary_model_id) for p in plan.preemptions]
    assert named == [("b", "h2", "vip")]
