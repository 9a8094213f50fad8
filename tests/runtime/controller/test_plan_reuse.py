"""Which plan an idle tick keeps: a budget-limited heuristic fallback is merely feasible (kept
for the resolve interval, as a FEASIBLE plan is); the heuristic after a failed engine is never
kept. Oracle: the count of planner calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.plan import make_plan
from grid.runtime.controller.config import ControllerConfig
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit


def fleet_of(tmp_path: Path) -> Fleet:
    config = ControllerConfig(engine="cpsat", plan_budget_s=1.0, membership_grace_s=0.0)
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2")], config=config)
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    return fleet


def idle_ticks(fleet: Fleet, count: int) -> list[str]:
    sources = []
    for _ in range(count):
        fleet.now += 5
        fleet.register_all()  # identical facts
        sources.append(fleet.ctl.tick(fleet.now).plan_source)
    return sources


def test_a_budget_limited_heuristic_fallback_is_kept_for_the_resolve_interval(
    tmp_path: Path,
) -> None:
    calls: list[float] = []

    def out_of_budget(snap: FleetSnapshot, **kw: Any) -> Plan:
        calls.append(snap.now)
        plan = make_plan(snap, **{**kw, "engine": "heuristic"})
        plan.solver.status = "HEURISTIC_FALLBACK"  # as the planner labels a budget fallback
        plan.solver.message = "the time limit of 1 s left no time for CP-SAT"
        return plan

    fleet = fleet_of(tmp_path)
    fleet.ctl.planner = out_of_budget
    assert fleet.ctl.tick(fleet.now).plan_source == "solved"
    assert idle_ticks(fleet, 3) == ["reused"] * 3 and len(calls) == 1
    fleet.now += fleet.ctl.config.resolve_interval_s
    fleet.register_all()
    assert fleet.ctl.tick(fleet.now).plan_source == "solved" and len(calls) == 2


def test_the_heuristic_after_a_failed_engine_is_solved_again_every_tick(tmp_path: Path) -> None:
    calls: list[str] = []

    def crashing(snap: FleetSnapshot, *, engine: str, **kw: Any) -> Plan:
        calls.append(engine)
        if engine == "cpsat":
            raise RuntimeError("solver crashed")
        return make_plan(snap, engine=engine, **kw)

    fleet = fleet_of(tmp_path)
    fleet.ctl.planner = crashing
    first = fleet.ctl.tick(fleet.now)
    assert first.ok and first.solver_status == "HEURISTIC_FALLBACK"
    assert idle_ticks(fleet, 2) == ["solved", "solved"]
    assert calls == ["cpsat", "heuristic"] * 3
