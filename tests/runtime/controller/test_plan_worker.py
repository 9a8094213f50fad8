"""Planning off the tick's critical path (`plan_worker`): carry, adopt, fence, solve inline.

Oracles: a from-scratch `make_plan` of the same snapshot (what an inline tick would act on),
hand-worked placements on two hosts, and host memory re-added by hand.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.plan import make_plan
from grid.planner.targets import compute_targets
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.generation import input_digest
from grid.runtime.controller.plan_worker import carry_blockers
from grid.runtime.controller.planning import plan_inputs
from tests.planner.fleets import want
from tests.runtime.builders import host, model, plan, snapshot
from tests.runtime.controller.harness import FAST, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

WAIT_S = 60.0


def fleet_with(tmp_path: Path, worker: str, *nodes: FakeNode) -> Fleet:
    config = replace(FAST, plan_worker=worker)
    fleet = Fleet(tmp_path, list(nodes or (FakeNode("h1"), FakeNode("h2"))), config=config)
    fleet.register_all()
    return fleet


def hosts_of(plan: Plan | None, model_id: str) -> list[str]:
    assert plan is not None
    return sorted(a.host_id for a in plan.assignments if a.model_id == model_id)


def from_scratch(fleet: Fleet) -> Plan:
    snap = fleet.ctl.snapshot(fleet.now)
    return make_plan(snap, engine="heuristic", time_limit_s=FAST.plan_budget_s)


def settle_worker(fleet: Fleet) -> None:
    worker = fleet.ctl.plan_worker
    assert worker is not None and worker.wait(WAIT_S)


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_the_plan_adopted_once_inputs_stop_changing_is_the_from_scratch_plan(
    tmp_path: Path, worker: str
) -> None:
    fleet = fleet_with(tmp_path, worker)
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=2), fleet.now)
    first = fleet.ctl.tick(fleet.now)
    assert first.plan_source == "solved" and len(hosts_of(fleet.ctl.last_plan, "m")) == 1
    try:
        for step in range(3):  # inputs change every tick: the tick does not wait for a solve
            fleet.now += 5
            fleet.nodes["h2"].capacity_mb = 16384 - 256 * (step + 1)
            fleet.register_all()
            if step == 0:
                fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
            report = fleet.ctl.tick(fleet.now)
            assert report.ok and report.plan_source in ("carried", "adopted")
            if step == 0:  # the plan in use is still valid, only short of the new target
                assert report.plan_source == "carried" and not report.new_generation
                assert report.plan_age_s == 5.0  # solved at the first tick, 5 s earlier
                assert len(hosts_of(fleet.ctl.last_plan, "m")) == 1
        settle_worker(fleet)
        fleet.now += 5
        fleet.ctl.request_tick()
        caught_up = fleet.ctl.tick(fleet.now)
        assert caught_up.ok and caught_up.plan_source == "adopted" and caught_up.new_generation
        oracle = from_scratch(fleet)
        assert fleet.ctl.last_plan is not None
        assert fleet.ctl.last_plan.assignments == oracle.assignments
        assert hosts_of(fleet.ctl.last_plan, "m") == ["h1", "h2"]  # hand-worked: both hosts
        snap = fleet.ctl.snapshot(fleet.now)
        assert fleet.ctl.last_plan_digest == input_digest(plan_inputs(snap))
        fleet.now += 5
        fleet.ctl.request_tick()
        assert fleet.ctl.tick(fleet.now).plan_source == "reused"
    finally:
        fleet.ctl.close()


def test_a_plan_that_no_longer_fits_is_never_carried_the_tick_solves_inline(
    tmp_path: Path,
) -> None:
    fleet = fleet_with(tmp_path, "thread")
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.tick(fleet.now)
    (placed,) = hosts_of(fleet.ctl.last_plan, "m")
    other = "h2" if placed == "h1" else "h1"
    try:
        fleet.now += 5
        fleet.nodes[placed].capacity_mb = 2048  # below the 4,096 MB model: the plan breaks
        fleet.register_all()
        report = fleet.ctl.tick(fleet.now)
        assert report.ok and report.plan_source == "solved"
        assert hosts_of(fleet.ctl.last_plan, "m") == [other]
        assert all(a.host_id != placed for a in fleet.ctl.proposed)
    finally:
        fleet.ctl.close()


def test_a_background_result_older_than_an_inline_solve_is_fenced_off(tmp_path: Path) -> None:
    gate = threading.Event()
    background: list[float] = []

    def gated(snap: FleetSnapshot, **kw: Any) -> Plan:
        if threading.current_thread() is not threading.main_thread():
            background.append(snap.now)
            assert gate.wait(WAIT_S)
        return make_plan(snap, **kw)

    fleet = fleet_with(tmp_path, "thread", FakeNode("h1"), FakeNode("h2"), FakeNode("h3"))
    fleet.ctl.planner = gated
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.tick(fleet.now)
    (placed,) = hosts_of(fleet.ctl.last_plan, "m")
    try:
        fleet.now += 5
        fleet.nodes[placed].capacity_mb = 16000  # benign: carried, a solve starts and blocks
        fleet.register_all()
        assert fleet.ctl.tick(fleet.now).plan_source == "carried" and len(background) == 1
        fleet.now += 5
        fleet.nodes[placed].capacity_mb = 2048  # the plan in use breaks: solved inline
        fleet.register_all()
        inline = fleet.ctl.tick(fleet.now)
        assert inline.plan_source == "solved"
        acted = fleet.ctl.last_plan
        assert placed not in hosts_of(acted, "m")
        gate.set()  # the blocked solve of the older inputs finishes now
        settle_worker(fleet)
        fleet.now += 5
        fleet.nodes[placed].capacity_mb = 16384  # recovered: the older result fits again
        fleet.register_all()
        later = fleet.ctl.tick(fleet.now)  # ... yet it is older than the inline plan
        assert later.plan_source == "carried" and fleet.ctl.last_plan is acted
        assert later.generation == inline.generation
    finally:
        gate.set()
        fleet.ctl.close()


def dies_in_a_worker_process(snap: FleetSnapshot, **kw: Any) -> Plan:
    """A planner whose background process crashes (module-level: a process pool pickles it)."""
    if multiprocessing.parent_process() is not None:
        os._exit(3)
    return make_plan(snap, **kw)


def test_a_crashed_planner_process_leaves_the_plan_in_use_and_a_new_process_takes_over(
    tmp_path: Path,
) -> None:
    fleet = fleet_with(tmp_path, "process")
    fleet.ctl.planner = dies_in_a_worker_process
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=2), fleet.now)
    assert fleet.ctl.tick(fleet.now).plan_source == "solved"
    acted = fleet.ctl.last_plan
    try:
        fleet.now += 5
        fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
        assert fleet.ctl.tick(fleet.now).plan_source == "carried"
        settle_worker(fleet)  # the process died: the solve ends without a plan
        fleet.now += 5
        fleet.ctl.request_tick()
        report = fleet.ctl.tick(fleet.now)
        assert report.ok and report.plan_source == "carried" and fleet.ctl.last_plan is acted
        fleet.ctl.planner = make_plan
        settle_worker(fleet)  # the crashing planner's retry dies too; the next one does not
        fleet.now += 5
        fleet.ctl.request_tick()
        fleet.ctl.tick(fleet.now)
        settle_worker(fleet)
        fleet.now += 5
        fleet.ctl.request_tick()
        assert fleet.ctl.tick(fleet.now).plan_source == "adopted"
        assert hosts_of(fleet.ctl.last_plan, "m") == ["h1", "h2"]
    finally:
        fleet.ctl.close()


def test_after_repeated_background_failures_the_tick_solves_inline_and_warns(
    tmp_path: Path,
) -> None:
    from grid.runtime.controller.plan_worker import MAX_FAILURES

    def fails_off_the_tick(snap: FleetSnapshot, **kw: Any) -> Plan:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("no memory for the solver")
        return make_plan(snap, **kw)

    fleet = fleet_with(tmp_path, "thread")
    fleet.ctl.planner = fails_off_the_tick
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=2), fleet.now)
    fleet.ctl.tick(fleet.now)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    try:
        sources = []
        for _ in range(MAX_FAILURES + 1):
            fleet.now += 5
            fleet.ctl.request_tick()
            sources.append(fleet.ctl.tick(fleet.now).plan_source)
            settle_worker(fleet)
        assert sources == ["carried"] * MAX_FAILURES + ["solved"]
        assert "background_plan_failed" in fleet.ctl.warnings
        assert hosts_of(fleet.ctl.last_plan, "m") == ["h1", "h2"]  # the new target, inline
        fleet.ctl.planner = make_plan  # the background recovers
        fleet.now += 5
        fleet.nodes["h1"].capacity_mb = 16000
        fleet.register_all()
        assert fleet.ctl.tick(fleet.now).plan_source == "carried"  # tried in the background
        settle_worker(fleet)
        fleet.now += 5
        fleet.ctl.request_tick()
        assert fleet.ctl.tick(fleet.now).plan_source == "adopted"
        assert "background_plan_failed" not in fleet.ctl.warnings
    finally:
        fleet.ctl.close()


def test_unknown_plan_worker_is_a_clear_config_error() -> None:
    from grid.fleet.errors import GridError

    with pytest.raises(GridError) as err:
        ControllerConfig(plan_worker="cluster")
    assert err.value.code == "invalid_controller_config"
    assert "inline" in err.value.message and err.value.fix


# -- which findings make a plan of older inputs unusable (hand-written snapshots and plans) ----
def two_host_snapshot(capacity_h1: int = 16384, desired: int = 1) -> FleetSnapshot:
    return snapshot(
        [host("h1", capacity_h1), host("h2")],
        [model("m", max_replicas=2), model("v", priority=1)],
        demand={"m": want(desired)},
    )


def test_a_scale_down_since_the_solve_does_not_stop_a_plan_without_evictions() -> None:
    snap = two_host_snapshot(desired=1)  # the plan was solved when m wanted two replicas
    stale = plan(("m", "h1"), ("m", "h2"))
    assert carry_blockers(stale, snap, compute_targets(snap)) == []


def test_evictions_staged_for_a_target_that_dropped_are_never_acted_on() -> None:
    snap = two_host_snapshot(desired=1)
    stale = plan(("m", "h1"), ("m", "h2"), preemptions=[("v", "h2", "m")])
    stale.desired_replicas = {"m": 2, "v": 1}  # solved when m wanted two replicas
    blockers = carry_blockers(stale, snap, compute_targets(snap))
    assert [b.split(":")[0] for b in blockers] == ["preemption_target_dropped"]
    same_target = two_host_snapshot(desired=2)
    assert carry_blockers(stale, same_target, compute_targets(same_target)) == []
    # Another model's target dropping leaves an eviction for m wanted.
    other = plan(("m", "h1"), preemptions=[("v", "h2", "m")])
    other.desired_replicas = {"m": 1, "v": 2}
    assert carry_blockers(other, snap, compute_targets(snap)) == []


def test_a_replica_the_host_can_no_longer_hold_blocks_the_plan() -> None:
    snap = two_host_snapshot(capacity_h1=2048)  # 2,048 MB left for a 4,096 MB model
    blockers = carry_blockers(plan(("m", "h1")), snap, compute_targets(snap))
    assert any(b.startswith("memory: h1") for b in blockers)
    missing = snapshot([host("h2")], [model("m")], demand={"m": want(1)})  # h1 left the fleet
    assert carry_blockers(plan(("m", "h1")), missing, compute_targets(missing))


def test_auto_plans_inline_below_the_host_threshold_and_in_a_process_from_it() -> None:
    from grid.runtime.controller.config import AUTO_BACKGROUND_HOSTS

    auto = ControllerConfig()
    assert auto.plan_worker == "auto"
    assert auto.plan_worker_for(2) == "inline"
    assert auto.plan_worker_for(AUTO_BACKGROUND_HOSTS - 1) == "inline"
    assert auto.plan_worker_for(AUTO_BACKGROUND_HOSTS) == "process"
    assert ControllerConfig(plan_worker="thread").plan_worker_for(1) == "thread"


def test_the_service_adopts_a_finished_background_plan_without_waiting_for_its_period(
    tmp_path: Path,
) -> None:
    from grid.runtime.controller.service import ControllerService

    config = replace(FAST, plan_worker="thread", periodic_interval_s=3600.0)
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2")], config=config)
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=2), fleet.now)
    fleet.ctl.tick(fleet.now)
    service = ControllerService(fleet.ctl, clock=lambda: fleet.now)
    service.start()
    try:
        fleet.now += 5
        fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
        assert fleet.ctl.tick(fleet.now).plan_source == "carried"
        deadline = threading.Event()
        for _ in range(600):  # the service's own pass adopts it (woken by the worker)
            last = fleet.ctl.last_tick
            if last is not None and last.plan_source == "adopted":
                break
            deadline.wait(0.05)
        assert fleet.ctl.last_tick is not None and fleet.ctl.last_tick.plan_source == "adopted"
        assert hosts_of(fleet.ctl.last_plan, "m") == ["h1", "h2"]
    finally:
        service.stop()
