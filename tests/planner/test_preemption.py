"""Staged preemption: who may be evicted for whom, and how many.

The usual stage: one 10,000 MB host (headroom 500 MB) held by an 8,000 MB low-priority
incumbent, and a high-priority 6,000 MB model that needs the host. Without an eviction the
make-before-break ledger admits 1,500 MB; with it, 9,500 MB.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.models import FleetSnapshot, Preemption
from grid.planner.heuristic import heuristic_placement
from grid.planner.preemption import stage_preemptions
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import NOW, host, model, resident, snapshot, want
from tests.planner.test_heuristic import plan_of

pytestmark = pytest.mark.unit

OLD = NOW - 10_000  # loaded long ago: past every minimum residency


def _stage(snap: FleetSnapshot) -> tuple[list[Preemption], set[tuple[str, str]], set[Any]]:
    problem = build_problem(snap)
    placed = heuristic_placement(problem)
    preemptions, removed = stage_preemptions(problem, placed)
    assert removed <= placed
    found = violations(snap, plan_of(problem, placed - removed, preemptions))
    assert found == [], found
    return preemptions, removed, placed


def _named(preemptions: list[Preemption]) -> list[tuple[str, str, str]]:
    return [(p.victim_model_id, p.host_id, p.beneficiary_model_id) for p in preemptions]


def _full_host(
    host_id: str = "h1",
    victim: str = "batch",
    victim_fields: dict[str, Any] | None = None,
    **host_fields: Any,
) -> dict[str, Any]:
    fields = {"loaded_at": OLD, "active_requests": 0, **(victim_fields or {})}
    return host(host_id, 10_000, residencies=[resident(victim, 8000, **fields)], **host_fields)


def _vip(**fields: Any) -> dict[str, Any]:
    return model("vip", 6000, priority=100, min_replicas=1, **fields)


def test_baseline_model_preempts_a_low_priority_idle_incumbent() -> None:
    snap = snapshot([_full_host()], [_vip(), model("batch", 8000, priority=0)], {"batch": want(1)})
    preemptions, removed, placed = _stage(snap)
    assert _named(preemptions) == [("batch", "h1", "vip")]
    assert removed == {("batch", "h1")}, "the victim leaves the plan"
    assert ("vip", "h1") not in placed, "the beneficiary waits for a later snapshot"
    assert "vip" in preemptions[0].reason and "batch" in preemptions[0].reason


def test_a_victim_the_engine_already_dropped_is_still_named() -> None:
    # batch is not desired at all, so no engine keeps it, but it is live and in the way
    snap = snapshot([_full_host()], [_vip(), model("batch", 8000, priority=0)])
    preemptions, removed, _ = _stage(snap)
    assert _named(preemptions) == [("batch", "h1", "vip")]
    assert removed == set()


@pytest.mark.parametrize(
    ("victim_fields", "victim_profile", "why"),
    [
        ({"loaded_at": NOW - 100}, {}, "younger than its minimum residency"),
        ({"loaded_at": NOW + 5000}, {}, "a future load time counts as age zero"),
        ({"loaded_at": None}, {}, "an unknown load time protects it"),
        ({}, {"pinned_hosts": ["h1"]}, "pinned to the host"),
        ({"managed": False}, {}, "external"),
        ({"ownership": "manual"}, {}, "manually managed"),
        ({}, {"priority": 100}, "same priority"),
        ({}, {"priority": 200}, "higher priority"),
    ],
)
def test_protected_victims_are_never_chosen(
    victim_fields: dict[str, Any], victim_profile: dict[str, Any], why: str
) -> None:
    profile = {"priority": 0, **victim_profile}
    snap = snapshot(
        [_full_host(victim_fields=victim_fields)],
        [_vip(), model("batch", 8000, **profile)],
        {"batch": want(1)},
    )
    preemptions, removed, _ = _stage(snap)
    assert preemptions == [], why
    assert removed == set()


def test_inferred_demand_never_preempts_but_a_direct_one_does() -> None:
    models = [model("vip", 6000, priority=100), model("batch", 8000, priority=0)]
    inferred = snapshot([_full_host()], models, {"vip": want(1, evidence="inferred")})
    assert _stage(inferred)[0] == []
    direct = snapshot([_full_host()], models, {"vip": want(1)})
    assert _named(_stage(direct)[0]) == [("batch", "h1", "vip")]


def test_at_most_max_evictions_per_plan() -> None:
    hosts = [_full_host(f"h{i}") for i in range(5)]
    models = [model("vip", 6000, priority=100, max_replicas=5), model("batch", 8000)]
    demand = {"vip": want(5)}
    assert len(_stage(snapshot(hosts, models, demand))[0]) == 5
    capped = snapshot(hosts, models, demand, policy={"max_evictions_per_plan": 2})
    preemptions = _stage(capped)[0]
    assert len(preemptions) == 2
    assert len({p.host_id for p in preemptions}) == 2, "one victim per host, never twice"


def test_one_freed_host_serves_one_beneficiary() -> None:
    # Two important models, one host that frees room for only one of them: the second must not
    # count the same released memory again, nor name the same victim twice.
    snap = snapshot(
        [_full_host()],
        [_vip(), model("vip2", 6000, priority=90, min_replicas=1), model("batch", 8000)],
    )
    assert _named(_stage(snap)[0]) == [("batch", "h1", "vip")]


def test_idle_victims_before_busy_ones_then_lower_warm_back_cost() -> None:
    def fleet(busy_fields: dict[str, Any], idle_profile: dict[str, Any]) -> FleetSnapshot:
        return snapshot(
            [
                _full_host("h1", "busy", {"active_requests": 3, **busy_fields}),
                _full_host("h2", "idle"),
            ],
            [_vip(), model("busy", 8000), model("idle", 8000, **idle_profile)],
        )

    assert _named(_stage(fleet({}, {}))[0]) == [("idle", "h2", "vip")]
    # both idle: the one that warms back faster goes (busy's weights are cached on h1)
    both_idle = snapshot(
        [
            _full_host("h1", "cheap", cached_models=["cheap"]),
            _full_host("h2", "dear"),
        ],
        [_vip(), model("cheap", 8000), model("dear", 8000)],
    )
    assert _named(_stage(both_idle)[0]) == [("cheap", "h1", "vip")]


def test_lowest_priority_victim_set_and_fewest_victims() -> None:
    # h1: one priority-50 victim suffices; h2: two priority-0 victims are needed
    h1 = host("h1", 10_000, residencies=[resident("mid", 8000, loaded_at=OLD)])
    h2 = host(
        "h2",
        10_000,
        residencies=[
            resident("small-a", 4000, loaded_at=OLD),
            resident("small-b", 4000, loaded_at=OLD),
        ],
    )
    models = [
        _vip(),
        model("mid", 8000, priority=50),
        model("small-a", 4000),
        model("small-b", 4000),
    ]
    preemptions = _stage(snapshot([h1, h2], models))[0]
    assert sorted(_named(preemptions)) == [("small-a", "h2", "vip"), ("small-b", "h2", "vip")]
    # a single low-priority victim is preferred to a pair of equally low ones
    h3 = host("h3", 10_000, residencies=[resident("big", 8000, loaded_at=OLD)])
    preemptions = _stage(snapshot([h2, h3], [*models, model("big", 8000)]))[0]
    assert _named(preemptions) == [("big", "h3", "vip")]


def test_only_as_many_victims_as_needed() -> None:
    # 6,000 MB needed, 2,500 MB free: evicting one 3,500 MB residency is exactly enough
    h1 = host(
        "h1",
        10_000,
        residencies=[resident("a", 3500, loaded_at=OLD), resident("b", 3500, loaded_at=OLD)],
    )
    preemptions = _stage(snapshot([h1], [_vip(), model("a", 3500), model("b", 3500)]))[0]
    assert _named(preemptions) == [("a", "h1", "vip")], "one suffices; model_id breaks the tie"


def test_within_a_host_lower_priority_then_idle_victims_go_first() -> None:
    # one of two 3,500 MB residencies must go; model_id order alone would pick "a"
    def fleet(a_fields: dict[str, Any], a_priority: int = 0) -> FleetSnapshot:
        h1 = host(
            "h1",
            10_000,
            residencies=[
                resident("a", 3500, loaded_at=OLD, **a_fields),
                resident("b", 3500, loaded_at=OLD, active_requests=0),
            ],
        )
        return snapshot([h1], [_vip(), model("a", 3500, priority=a_priority), model("b", 3500)])

    assert _named(_stage(fleet({}))[0]) == [("a", "h1", "vip")], "a tie: model_id decides"
    assert _named(_stage(fleet({}, a_priority=10))[0]) == [("b", "h1", "vip")]
    assert _named(_stage(fleet({"active_requests": 1}))[0]) == [("b", "h1", "vip")]
    assert _named(_stage(fleet({"active_requests": None}))[0]) == [("b", "h1", "vip")]
    for state in ("failed", "draining"):
        # requests on record do not make a failed or draining replica busy
        found = _named(_stage(fleet({"state": state, "active_requests": 1}))[0])
        assert found == [("a", "h1", "vip")], state


def test_room_freed_for_one_beneficiary_is_not_counted_again() -> None:
    # 20,000 MB host, two 9,000 MB victims, 1,000 MB headroom: one eviction admits vip; vip2
    # needs the second, because vip will occupy what the first one frees.
    h1 = host(
        "h1",
        20_000,
        residencies=[resident("a", 9000, loaded_at=OLD), resident("b", 9000, loaded_at=OLD)],
    )
    models = [
        _vip(),
        model("vip2", 6000, priority=90, min_replicas=1),
        model("a", 9000),
        model("b", 9000),
    ]
    assert _named(_stage(snapshot([h1], models))[0]) == [("a", "h1", "vip"), ("b", "h1", "vip2")]


def test_missing_pin_targets_only_its_pinned_host() -> None:
    # h2's victim is cheaper, but only h1 satisfies the pin
    hosts = [
        _full_host("h1", "dear", {"active_requests": 2}),
        _full_host("h2", "cheap", cached_models=["cheap"]),
    ]
    models = [
        model("vip", 6000, priority=100, pinned_hosts=["h1"]),
        model("dear", 8000),
        model("cheap", 8000),
    ]
    assert _named(_stage(snapshot(hosts, models))[0]) == [("dear", "h1", "vip")]


def test_slot_limit_and_colocation_ceiling_can_be_freed_by_eviction() -> None:
    # memory is plentiful; the slot (and an exclusive tenant's ceiling) block the newcomer
    slots = host("h1", residencies=[resident("batch", 2000, loaded_at=OLD)], max_models=1)
    preemptions = _stage(snapshot([slots], [_vip(), model("batch", 2000)]))[0]
    assert _named(preemptions) == [("batch", "h1", "vip")]
    alone = host("h1", residencies=[resident("hermit", 2000, loaded_at=OLD)])
    models = [_vip(), model("hermit", 2000, max_colocated_models=1)]
    assert _named(_stage(snapshot([alone], models))[0]) == [("hermit", "h1", "vip")]


def test_no_preemption_when_eviction_cannot_help() -> None:
    # the host is too small even when empty, or the model may not run there at all
    tiny = host("h1", 5000, residencies=[resident("batch", 4000, loaded_at=OLD)])
    assert _stage(snapshot([tiny], [_vip(), model("batch", 4000)]))[0] == []
    laptop = _full_host(tags=["laptop"])
    models = [_vip(forbidden_tags=["laptop"]), model("batch", 8000)]
    assert _stage(snapshot([laptop], models))[0] == []
    paused = _full_host(state="paused")
    assert _stage(snapshot([paused], [_vip(), model("batch", 8000)]))[0] == []
