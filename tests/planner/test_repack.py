"""Proactive repack: a demanded model's host is freed by moving its incumbent, not evicting it.

Planner side (both engines) and the whole staged convergence on the fleet simulator: the moving
incumbent becomes READY on its new host before its old copy drains, so it never stops serving,
and the demanded model then warms on the released host.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.actions import ActionKind
from grid.fleet.models import ResidencyState
from grid.fleet.snapshot import parse_snapshot
from grid.lab.simulator import FleetSimulator, planner_for
from grid.planner.plan import make_plan
from grid.planner.validate import violations
from grid.runtime.reconcile import reconcile

pytestmark = pytest.mark.unit

NOW = 1_785_300_000.0
ENGINES = ["cpsat", "heuristic"]


def office(*, mover_priority: int = 10, spare_mb: int = 16384, gpu_hosts: int = 1) -> Any:
    """`gpu` hosts are the only ones the demanded model can use; `flex` fits anywhere."""
    hosts: list[dict[str, Any]] = [
        {
            "host_id": f"gpu-{i}",
            "capacity_mb": 16384,
            "tags": ["gpu"],
            "failure_domain": "rack-a",
            "residencies": [
                {
                    "model_id": "flex",
                    "memory_mb": 12288,
                    "state": "ready",
                    "loaded_at": NOW - 3600,
                    "active_requests": 0,
                }
            ]
            if i == 1
            else [],
        }
        for i in range(1, gpu_hosts + 1)
    ]
    hosts.append({"host_id": "spare", "capacity_mb": spare_mb, "failure_domain": "rack-b"})
    for h in hosts:
        h["last_heartbeat"] = NOW
    return {
        "now": NOW,
        "hosts": hosts,
        "models": [
            {
                "model_id": "vision",
                "memory_mb": 12288,
                "priority": 50,
                "min_replicas": 1,
                "required_tags": ["gpu"],
                "min_residency_s": 0,
            },
            {
                "model_id": "flex",
                "memory_mb": 12288,
                "priority": mover_priority,
                "min_replicas": 1,
                "min_residency_s": 0,
                "scale_down_cooldown_s": 0,
            },
        ],
    }


def where(plan: Any, model_id: str) -> set[str]:
    return {a.host_id for a in plan.assignments if a.model_id == model_id}


@pytest.mark.parametrize("engine", ENGINES)
def test_incumbent_moves_to_the_spare_host_instead_of_being_evicted(engine: str) -> None:
    snap = parse_snapshot(office())
    plan = make_plan(snap, engine=engine, deterministic=True)
    assert violations(snap, plan) == []
    assert where(plan, "flex") == {"spare"}  # the replacement is planned on the spare host
    assert where(plan, "vision") == set()  # waits for gpu-1's memory to be proven free
    [move] = plan.preemptions
    assert (move.victim_model_id, move.host_id, move.beneficiary_model_id) == (
        "flex",
        "gpu-1",
        "vision",
    )
    assert move.relocated_to == "spare"
    [unmet] = [u for u in plan.unsatisfied if u.model_id == "vision"]
    assert unmet.code == "preemption_staged"


@pytest.mark.parametrize("engine", ENGINES)
def test_without_room_elsewhere_the_lower_priority_incumbent_is_evicted(engine: str) -> None:
    snap = parse_snapshot(office(spare_mb=4096))
    plan = make_plan(snap, engine=engine, deterministic=True)
    [evict] = plan.preemptions
    assert evict.relocated_to is None
    assert (evict.victim_model_id, evict.host_id) == ("flex", "gpu-1")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_more_important_incumbent_moves_only_off_the_sole_compatible_host(engine: str) -> None:
    sole = make_plan(parse_snapshot(office(mover_priority=90)), engine=engine, deterministic=True)
    assert [p.relocated_to for p in sole.preemptions] == ["spare"]
    # With a second GPU host free, vision simply goes there: nothing moves or is evicted.
    two = make_plan(
        parse_snapshot(office(mover_priority=90, gpu_hosts=2)), engine=engine, deterministic=True
    )
    assert two.preemptions == []
    assert where(two, "vision") == {"gpu-2"}
    assert where(two, "flex") == {"gpu-1"}


def test_reconciler_warms_the_replacement_and_holds_the_old_copy_until_it_is_ready() -> None:
    snap = parse_snapshot(office())
    plan = make_plan(snap, engine="heuristic", deterministic=True)
    result = reconcile(plan, snap, [], mode="automatic", now=NOW)
    kinds = {(a.kind, a.host_id, a.model_id) for a in result.actions}
    assert (ActionKind.WARM, "spare", "flex") in kinds
    assert not any(a.kind is ActionKind.DRAIN for a in result.actions)
    codes = {(d.kind, d.host_id, d.model_id): d.code for d in result.deferred}
    assert codes[(ActionKind.WARM, "gpu-1", "vision")] == "repack_staged"
    assert codes[(ActionKind.DRAIN, "gpu-1", "flex")] == "replacement_not_ready"


def test_whole_repack_converges_without_flex_ever_losing_its_last_ready_replica() -> None:
    sim = FleetSimulator(parse_snapshot(office()), planner=planner_for("heuristic"))
    history: list[tuple[bool, bool]] = []
    for _ in range(60):
        sim.step()
        flex_ready = any(
            (r := h.residencies.get("flex")) is not None and r.state is ResidencyState.READY
            for h in sim.hosts.values()
        )
        vision = sim.hosts["gpu-1"].residencies.get("vision")
        history.append((flex_ready, vision is not None and vision.state is ResidencyState.READY))
        if history[-1][1] and "flex" not in sim.hosts["gpu-1"].residencies:
            break
    assert all(flex_ready for flex_ready, _ in history), sim.story()
    assert history[-1][1], sim.story()  # vision is READY on the released GPU host
    flex = sim.hosts["spare"].residencies["flex"]
    assert flex.state is ResidencyState.READY
    order = [
        (r.kind, r.host_id, r.model_id) for r in sorted(sim.history(), key=lambda r: r.created_at)
    ]
    warm_spare = order.index((ActionKind.WARM, "spare", "flex"))
    drain_gpu = order.index((ActionKind.DRAIN, "gpu-1", "flex"))
    warm_vision = order.index((ActionKind.WARM, "gpu-1", "vision"))
    assert warm_spare < drain_gpu < warm_vision
    assert not sim.violations
