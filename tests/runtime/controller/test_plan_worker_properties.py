"""Property: whichever plan a background-planning tick acts on (solved, carried or adopted), it
fits the fleet that tick saw.

The fleet changes at random between ticks (host memory, host state) while background solves are
held back or let through at random, so ticks act on plans solved for older inputs. The oracle
re-adds every host's planned memory by hand against the capacity the fake node reported for
that tick, and checks that nothing is planned on a host that does not take work; it shares no
code with the controller's carry check (grid/planner/validate.py).
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.plan import make_plan
from tests.runtime.controller.harness import FAST, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.property

HOSTS = ("h1", "h2", "h3")
TAKES_WORK = {"accepting", "throttled"}
step = st.one_of(
    st.tuples(
        st.just("capacity"), st.sampled_from(HOSTS), st.sampled_from([2048, 6144, 12288, 16384])
    ),
    st.tuples(st.just("state"), st.sampled_from(HOSTS), st.sampled_from(["accepting", "draining"])),
    st.tuples(st.just("release"), st.just(""), st.just(0)),
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=8))
def test_every_plan_a_tick_acts_on_fits_the_fleet_it_saw(steps: list[tuple[str, str, Any]]) -> None:
    gate = threading.Event()

    def gated(snap: FleetSnapshot, **kw: Any) -> Plan:
        if threading.current_thread() is not threading.main_thread():
            assert gate.wait(60.0)
        return make_plan(snap, **kw)

    with tempfile.TemporaryDirectory() as folder:
        nodes = [FakeNode(h) for h in HOSTS]
        fleet = Fleet(Path(folder), nodes, config=replace(FAST, plan_worker="thread"))
        fleet.ctl.planner = gated
        fleet.register_all()
        fleet.ctl.put_profile(
            "big", profile(memory_mb=8192, min_replicas=2, max_replicas=3), fleet.now
        )
        fleet.ctl.put_profile(
            "small", profile(memory_mb=4096, min_replicas=2, max_replicas=3), fleet.now
        )
        try:
            fleet.ctl.tick(fleet.now)
            for kind, host_id, value in steps:
                if kind == "release":  # the held solves finish; the next tick may adopt one
                    gate.set()
                    worker = fleet.ctl.plan_worker
                    assert worker is not None and worker.wait(60.0)
                    gate.clear()
                elif kind == "capacity":
                    fleet.nodes[host_id].capacity_mb = value
                else:
                    fleet.nodes[host_id].state = str(value)
                fleet.now += 5
                fleet.register_all()
                report = fleet.ctl.tick(fleet.now)
                assert report.ok, report.error
                plan = fleet.ctl.last_plan
                assert plan is not None
                used: dict[str, int] = {}
                for a in plan.assignments:
                    node = fleet.nodes[a.host_id]
                    assert node.state in TAKES_WORK, (report.plan_source, a.host_id, node.state)
                    used[a.host_id] = used.get(a.host_id, 0) + a.memory_mb
                for host_id, total in used.items():
                    capacity = fleet.nodes[host_id].capacity_mb
                    assert total <= capacity, (report.plan_source, host_id, total, capacity)
        finally:
            gate.set()
            fleet.ctl.close()
