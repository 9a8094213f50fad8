"""Issue 8 regressions in the pure reconciler: route proof (invariant 4) and make-before-break
evacuation of a host that stops admitting work. Plans are hand-written; expectations are the
spec's sentences turned into kinds and codes by hand."""

from __future__ import annotations

import pytest

from grid.fleet.actions import ActionKind
from grid.fleet.models import FleetSnapshot
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

WARM, DRAIN = ActionKind.WARM, ActionKind.DRAIN
SHA_OLD, SHA_NEW = "a" * 64, "b" * 64


def _migration(routes_on_h2: list[str] | None) -> FleetSnapshot:
    extra = {} if routes_on_h2 is None else {"routes": routes_on_h2}
    return snapshot(
        [
            host("h1", residencies=[res("m", artifact_sha256=SHA_OLD)], routes=["m"]),
            host("h2", residencies=[res("m", artifact_sha256=SHA_NEW)], **extra),
        ],
        [model("m", artifact_sha256=SHA_NEW, min_replicas=1)],
    )


def test_ready_row_without_a_child_route_is_not_replacement_proof() -> None:
    # h2's envelope says READY, but no live child route corroborates it: inventory only.
    result = reconcile(plan(("m", "h2")), _migration([]), mode="automatic")
    assert result.action(DRAIN, "h1", "m") is None
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "replacement_not_ready"
    assert "child route" in deferral.message
    assert result.action(WARM, "h2", "m") is None  # the row is a lifecycle in progress


def test_corroborated_replacement_lets_the_old_replica_drain() -> None:
    result = reconcile(plan(("m", "h2")), _migration(["m"]), mode="automatic")
    assert [(a.kind, a.host_id) for a in result.actions] == [(DRAIN, "h1")]


def test_route_of_another_model_corroborates_nothing() -> None:
    result = reconcile(plan(("m", "h2")), _migration(["other"]), mode="automatic")
    assert result.action(DRAIN, "h1", "m") is None


def test_uncorroborated_replica_counts_toward_no_floor() -> None:
    # Two managed READY rows, only h1 routed: draining h1 would leave no proven replica.
    snap = snapshot(
        [
            host("h1", residencies=[res("m")], routes=["m"]),
            host("h2", residencies=[res("m")], routes=[]),
        ],
        [model("m", min_replicas=1, max_replicas=2)],
    )
    result = reconcile(plan(("m", "h2")), snap, mode="automatic")
    assert result.action(DRAIN, "h1", "m") is None


def _evacuation(host_state: str, *, h2_ready: bool) -> FleetSnapshot:
    h2 = host("h2", residencies=[res("m")]) if h2_ready else host("h2", cached_models=["m"])
    return snapshot(
        [host("h1", state=host_state, residencies=[res("m")]), h2],
        [model("m", min_replicas=1)],
    )


@pytest.mark.parametrize("state", ["draining", "paused", "unhealthy", "quarantined"])
def test_last_replica_on_a_host_that_stops_admitting_waits_for_its_replacement(
    state: str,
) -> None:
    # Regression (defect 3): the warm on h2 and the drain on h1 used to leave in the same tick.
    result = reconcile(plan(("m", "h2")), _evacuation(state, h2_ready=False), mode="automatic")
    assert [(a.kind, a.host_id) for a in result.actions] == [(WARM, "h2")]
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "replacement_not_ready"


def test_evacuation_drains_once_the_replacement_is_ready() -> None:
    result = reconcile(plan(("m", "h2")), _evacuation("draining", h2_ready=True), mode="automatic")
    assert [(a.kind, a.host_id) for a in result.actions] == [(DRAIN, "h1")]


def test_evacuation_without_any_planned_replacement_keeps_the_last_replica() -> None:
    snap = snapshot(
        [host("h1", state="draining", residencies=[res("m")])], [model("m", min_replicas=1)]
    )
    result = reconcile(plan(), snap, mode="automatic")
    assert result.actions == []
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "replacement_not_ready"


def test_evacuation_is_immediate_when_another_replica_serves() -> None:
    snap = snapshot(
        [
            host("h1", state="draining", residencies=[res("m")]),
            host("h3", residencies=[res("m")]),
            host("h2", cached_models=["m"]),
        ],
        [model("m", min_replicas=1, max_replicas=2)],
    )
    result = reconcile(plan(("m", "h3"), ("m", "h2")), snap, mode="automatic")
    assert (DRAIN, "h1") in [(a.kind, a.host_id) for a in result.actions]


def test_optional_model_on_a_draining_host_is_released_at_once() -> None:
    snap = snapshot(
        [host("h1", state="draining", residencies=[res("m")]), host("h2", cached_models=["m"])],
        [model("m", min_replicas=0)],
    )
    result = reconcile(plan(("m", "h2")), snap, mode="automatic")
    assert {(a.kind, a.host_id) for a in result.actions} == {(WARM, "h2"), (DRAIN, "h1")}


def test_an_open_drain_counts_against_the_floor_of_every_later_drain() -> None:
    # m needs two managed replicas; a drain of h1 is already pending, so h2 must stay.
    pending = record("drain", "h1", "m", "pending")
    snap = snapshot(
        [host(h, residencies=[res("m")]) for h in ("h1", "h2", "h3")],
        [model("m", min_replicas=2, max_replicas=3)],
    )
    result = reconcile(plan(("m", "h3")), snap, [pending], mode="automatic")
    assert result.action(DRAIN, "h2", "m") is None
    deferral = result.deferral(DRAIN, "h2", "m")
    assert deferral is not None and deferral.code == "managed_baseline_floor"
    assert pending.action_id in result.in_flight


def test_pending_drain_is_withdrawn_when_its_replacement_stops_being_routable() -> None:
    pending = record("drain", "h1", "m", "pending")
    result = reconcile(plan(("m", "h2")), _migration([]), [pending], mode="automatic")
    assert [(w.action_id, w.code) for w in result.withdrawn] == [
        (pending.action_id, "unsafe_destructive_batch")
    ]
    assert result.blocked_models == ["m"]
