"""Generation fencing of a staged preemption in the controller (issue 19).

A lower class's baseline replica may be taken only by the staged preemption of a plan solved for
the tick's own inputs. With a background planner, a tick whose inputs changed acts on a plan
solved for older ones (adopted or carried): its preemption keeps the managed baseline floor, and
the drain starts on the first tick whose plan is current. Then the fleet converges over
heartbeats: drain, unload, warm (hand-worked order), with real controller state and fake nodes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from grid.fleet.actions import ActionKind
from tests.runtime.controller.harness import FAST, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

WAIT_S = 60.0
LO = profile(memory_mb=4096, priority=10, min_replicas=1, max_replicas=1)
HI = profile(memory_mb=4096, priority=200, min_replicas=1, max_replicas=1)


def _one_slot_node() -> FakeNode:
    # 6,000 MB holds one 4,096 MB model (with headroom), never two.
    node = FakeNode("h1", capacity_mb=6000, cached={"lo", "hi"})
    node.residencies["lo"] = {
        "model_id": "lo",
        "memory_mb": 4096,
        "state": "ready",
        "managed": True,
        "loaded_age_s": 3600.0,
        "active_requests": 0,
    }
    return node


def _lo_warmed_before(fleet: Fleet) -> Fleet:
    """The seeded "lo" replica was warmed by a controller of this fleet: like a real node, h1
    keeps that WARM's route grant and echoes it (a route without one is not believed)."""
    fleet.nodes["h1"].grants["lo"] = fleet.attestor.grant("h1", "lo")
    return fleet


def _deferral(fleet: Fleet, kind: ActionKind, model_id: str) -> str | None:
    for d in fleet.ctl.last_deferred:
        if d.kind is kind and d.model_id == model_id:
            return d.code
    return None


def _issued(fleet: Fleet) -> list[tuple[str, str]]:
    result = fleet.ctl.last_result
    assert result is not None
    return [(a.kind.value, a.model_id) for a in result.actions]


def test_a_stale_plans_preemption_keeps_the_floor_and_a_current_one_drains(
    tmp_path: Path,
) -> None:
    spare = FakeNode("h2", capacity_mb=1024)  # too small for either model: a benign input
    fleet = _lo_warmed_before(
        Fleet(tmp_path, [_one_slot_node(), spare], config=replace(FAST, plan_worker="thread"))
    )
    fleet.register_all()
    fleet.ctl.put_profile("lo", LO, fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    worker_ready = fleet.ctl.tick(fleet.now)
    assert worker_ready.plan_source == "solved"
    try:
        fleet.now += 5
        fleet.ctl.put_profile("hi", HI, fleet.now)
        carried = fleet.ctl.tick(fleet.now)  # the lo-only plan, carried: nothing to preempt
        assert carried.plan_source == "carried"
        assert fleet.ctl.plan_worker is not None and fleet.ctl.plan_worker.wait(WAIT_S)

        # The background plan stages the preemption, but the inputs moved on meanwhile.
        fleet.now += 5
        spare.capacity_mb = 1000
        fleet.register_all()
        stale = fleet.ctl.tick(fleet.now)
        assert stale.plan_source == "adopted"
        assert fleet.ctl.last_plan is not None and fleet.ctl.last_plan.preemptions
        assert ("drain", "lo") not in _issued(fleet)
        assert _deferral(fleet, ActionKind.DRAIN, "lo") == "managed_baseline_floor"

        # The plan solved for these inputs is current: the drain goes out.
        assert fleet.ctl.plan_worker.wait(WAIT_S)
        fleet.now += 5
        fleet.ctl.request_tick()
        current = fleet.ctl.tick(fleet.now)
        assert current.plan_source == "adopted"
        assert ("drain", "lo") in _issued(fleet)
        assert _deferral(fleet, ActionKind.WARM, "hi") == "preemption_staged"
    finally:
        fleet.ctl.close()


def test_the_controller_converges_the_livelock_fleet_over_heartbeats(tmp_path: Path) -> None:
    fleet = _lo_warmed_before(Fleet(tmp_path, [_one_slot_node()]))
    fleet.register_all()
    fleet.ctl.put_profile("lo", LO, fleet.now)
    fleet.ctl.put_profile("hi", HI, fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    node = fleet.nodes["h1"]
    order: list[tuple[str, str]] = []
    for _ in range(12):
        for command in fleet.step():
            order.append((command["kind"], command["model_id"]))
        if node.residencies.get("hi", {}).get("state") == "ready":
            break
    assert order == [("drain", "lo"), ("unload", "lo"), ("warm", "hi")]
    assert "lo" not in node.residencies
    fleet.step()
    assert fleet.step() == []  # converged: nothing else moves
