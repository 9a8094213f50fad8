"""A failed warm/load penalizes its (model, host) pair so a healthy peer is tried (issue 19).

The spec: "Persisted failed warm/load attempts apply a bounded per-model penalty, allowing a
healthy peer to be tried after backoff instead of selecting the same broken cache forever; the
failed node remains a fallback when it is the only feasible target."

Oracles: hand-counted failure streaks over hand-written records; in the controller, the host
the next replica goes to after a failed warm (with real controller state and fake nodes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.models import Policy
from grid.runtime.reconcile import start_failures
from tests.runtime.builders import NOW, record
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

POLICY = Policy(start_failure_window_s=600.0)


def test_failure_streaks_count_back_to_the_last_successful_warm() -> None:
    rows = [
        record(
            "warm", "h1", "m", "succeeded", attempt=1, created_at=NOW - 500, finished_at=NOW - 490
        ),
        record("warm", "h1", "m", "failed", attempt=2, created_at=NOW - 300, finished_at=NOW - 290),
        record("load", "h1", "m", "failed", attempt=1, created_at=NOW - 200, finished_at=NOW - 190),
        record("warm", "h1", "m", "failed", attempt=3, created_at=NOW - 100, finished_at=NOW - 90),
        record("load", "h2", "m", "succeeded", created_at=NOW - 100, finished_at=NOW - 90),
        record("drain", "h2", "x", "failed", created_at=NOW - 100, finished_at=NOW - 90),
        record("warm", "h3", "m", "withdrawn", created_at=NOW - 50),
    ]
    # h1: three failures since its last successful warm; h2's load succeeded and a drain is
    # no start; h3 was only withdrawn.
    assert start_failures(rows, NOW, POLICY) == {"h1": {"m": 3}}


def test_old_failures_expire_with_the_window() -> None:
    rows = [
        record("warm", "h1", "m", "failed", attempt=1, created_at=NOW - 900, finished_at=NOW - 890),
        record("warm", "h1", "m", "failed", attempt=2, created_at=NOW - 60, finished_at=NOW - 50),
    ]
    assert start_failures(rows, NOW, POLICY) == {"h1": {"m": 1}}  # 890 s ago is past 600 s
    assert start_failures(rows, NOW + 600, POLICY) == {}


def _cached_node(host_id: str) -> FakeNode:
    return FakeNode(host_id, cached={"m"} if host_id == "h1" else set())


def test_the_controller_moves_the_target_to_a_healthy_peer_after_a_failed_warm(
    tmp_path: Path,
) -> None:
    # h1 holds m's weights (its cache wins the first placement); its warm fails. The snapshot
    # then carries the failure on (m, h1), and the next plan places m on h2 instead.
    fleet = Fleet(tmp_path, [_cached_node("h1"), _cached_node("h2")])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    first = fleet.ctl.last_plan
    assert first is not None and [a.host_id for a in first.assignments] == ["h1"]
    fleet.now += 5
    h1 = fleet.nodes["h1"]
    delivery = fleet.poll(h1)
    warms = [c for c in delivery.commands if c["kind"] == "warm"]
    assert [c["model_id"] for c in warms] == ["m"]
    fleet.acks["h1"].append(
        {"action_id": warms[0]["action_id"], "status": "failed", "message": "broken cache"}
    )
    fleet.now += 5
    fleet.poll(h1)  # the failure is acknowledged
    fleet.register_all()
    fleet.ctl.request_tick()
    fleet.ctl.tick(fleet.now)
    snap = fleet.ctl.snapshot(fleet.now)
    assert {h.host_id: h.start_failures for h in snap.hosts} == {"h1": {"m": 1}, "h2": {}}
    plan = fleet.ctl.last_plan
    assert plan is not None and [a.host_id for a in plan.assignments] == ["h2"]
    issued = {(r.kind.value, r.host_id) for r in fleet.ctl.book.history() if r.is_open}
    assert issued == {("load", "h2"), ("warm", "h2")}  # no retry on h1, the peer starts
