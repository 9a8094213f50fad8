"""The plan view's per-host arithmetic and markers, on a hand-made host."""

from __future__ import annotations

import pytest
from rich.console import Console

from grid.cli.render import (
    MARK_KEPT,
    MARK_LEAVING,
    MARK_NEW,
    MARK_UNMANAGED,
    host_view,
    is_replica_level,
    render_plan,
)
from grid.fleet.models import Assignment, FleetSnapshot, Plan, SolverReport
from grid.fleet.snapshot import parse_snapshot

pytestmark = pytest.mark.unit


def _snapshot() -> FleetSnapshot:
    return parse_snapshot(
        {
            "now": 1000.0,
            "hosts": [
                {
                    "host_id": "h1",
                    "state": "throttled",
                    "throttle_fraction": 0.5,
                    "capacity_mb": 20000,
                    "reserved_mb": 1000,
                    "external_mb": 1000,
                    "max_models": 4,
                    "residencies": [
                        {"model_id": "a", "memory_mb": 2000},
                        {"model_id": "b", "memory_mb": 1000},
                        {"model_id": "ext", "memory_mb": 1500, "managed": False},
                    ],
                },
                {"host_id": "h2", "state": "paused", "capacity_mb": 4000},
            ],
            "models": [
                {"model_id": "a", "memory_mb": 2000},
                {"model_id": "b", "memory_mb": 1000},
                {"model_id": "c", "memory_mb": 3000},
            ],
        }
    )


def _plan() -> Plan:
    return Plan(
        assignments=[
            Assignment(
                model_id="a", host_id="h1", memory_mb=2000, runtime="llama.cpp", existing=True
            ),
            Assignment(model_id="c", host_id="h1", memory_mb=3000, runtime="llama.cpp"),
        ],
        solver=SolverReport(engine="heuristic", status="HEURISTIC", wall_ms=1.0),
    )


def test_host_view_counts_unmanaged_memory_and_marks_every_model() -> None:
    view = host_view(_snapshot(), _plan(), _snapshot().hosts[0])
    # (20000 − 1000 reserved − 1000 external) × 0.5 throttle = 9000 MB allocatable.
    assert view.allocatable_mb == 9000
    # a (kept) 2000 + c (new) 3000 + the unmanaged engine 1500, which Grid cannot stop.
    assert view.used_mb == 6500
    assert view.free_mb == 2500
    assert (view.slots_used, view.slot_limit) == (3, 4)
    marks = {label.split()[0]: mark for mark, label in view.lines}
    assert marks == {"a": MARK_KEPT, "c": MARK_NEW, "ext": MARK_UNMANAGED, "b": MARK_LEAVING}
    assert view.state == "throttled x0.5"
    assert view.refusals == []


def test_host_view_shows_why_a_host_takes_no_work() -> None:
    snap = _snapshot()
    view = host_view(snap, _plan(), snap.hosts[1])
    assert view.refusals == ["host_not_admitting"]
    assert view.lines == []


def test_render_plan_mentions_refusal_and_summary() -> None:
    console = Console(width=120, record=True)
    console.print(render_plan(_snapshot(), _plan()))
    text = console.export_text()
    assert "Plan: 2 replicas (1 existing, 1 new), 0 unmet, 0 preemptions" in text
    assert "host_not_admitting" in text
    assert "Solver: heuristic · HEURISTIC · 1.0 ms" in text


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pinned", True),
        ("p100:baseline", True),
        ("p0:direct:3:harm", True),
        ("p5:inferred", True),
        ("domain_shortfall", False),
        ("disruption", False),
        ("quality", False),
        ("spare_hosts", False),
    ],
)
def test_replica_levels_are_recognised_by_name(name: str, expected: bool) -> None:
    assert is_replica_level(name) is expected
