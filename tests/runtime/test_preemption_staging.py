"""Staged preemption: prefetch, victim drain with the beneficiary's priority, unload, no warm."""

from __future__ import annotations

import pytest

from grid.fleet.actions import ActionKind, ActionRecord, Urgency
from grid.fleet.models import FleetSnapshot
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import NOW, host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

LOAD, WARM, DRAIN, UNLOAD = ActionKind.LOAD, ActionKind.WARM, ActionKind.DRAIN, ActionKind.UNLOAD
SHA = "d" * 64
SOURCE = "hf://owner/repo/vip.gguf"


def _fleet(
    victim_state: str = "ready", *, source: bool = True, **host_fields: object
) -> FleetSnapshot:
    vip = model("vip", 8000, priority=90, min_replicas=1)
    if source:
        vip.update(artifact_source=SOURCE, artifact_sha256=SHA, artifact_size_mb=3000)
    return snapshot(
        [host("h1", 10000, residencies=[res("batch", victim_state, 8000)], **host_fields)],
        [vip, model("batch", 8000, priority=1)],
    )


PREEMPT = plan(preemptions=[("batch", "h1", "vip")])


def test_prefetch_then_drain_inheriting_the_beneficiarys_priority() -> None:
    result = reconcile(PREEMPT, _fleet(), mode="automatic")
    prefetch = result.action(LOAD, "h1", "vip")
    drain = result.action(DRAIN, "h1", "batch")
    assert prefetch is not None and drain is not None
    assert prefetch.memory_mb == 0  # disk only: CACHED, no memory, no slot
    assert drain.dependencies == [prefetch.action_id]
    assert drain.priority == 90 and drain.urgency is Urgency.REQUIRED and drain.preemption
    assert result.action(WARM, "h1", "vip") is None
    staged = result.deferral(WARM, "h1", "vip")
    assert staged is not None and staged.code == "preemption_staged"


def test_without_an_artifact_source_the_victim_just_drains() -> None:
    result = reconcile(PREEMPT, _fleet(source=False))
    assert [(a.kind, a.model_id) for a in result.actions] == [(DRAIN, "batch")]
    assert result.actions[0].dependencies == []


def test_cached_beneficiary_needs_no_prefetch() -> None:
    result = reconcile(PREEMPT, _fleet(cached_models=["vip"]))
    assert [(a.kind, a.model_id) for a in result.actions] == [(DRAIN, "batch")]


def test_drained_idle_victim_is_unloaded() -> None:
    result = reconcile(PREEMPT, _fleet("draining", cached_models=["vip"]))
    assert [(a.kind, a.model_id) for a in result.actions] == [(UNLOAD, "batch")]
    assert result.actions[0].priority == 90


def test_busy_draining_victim_waits() -> None:
    snap = snapshot(
        [host("h1", 10000, residencies=[res("batch", "draining", 8000, active_requests=2)])],
        [model("vip", 8000, priority=90), model("batch", 8000, priority=1)],
    )
    result = reconcile(PREEMPT, snap)
    deferral = result.deferral(UNLOAD, "h1", "batch")
    assert result.actions == [] and deferral is not None
    assert deferral.code == "requests_in_flight"


def test_failed_prefetch_does_not_hold_back_the_drain() -> None:
    failed = record("load", "h1", "vip", "failed", finished_at=NOW - 1)
    result = reconcile(PREEMPT, _fleet(), [failed])
    drain = result.action(DRAIN, "h1", "batch")
    assert drain is not None and drain.dependencies == []
    backoff = result.deferral(LOAD, "h1", "vip")
    assert backoff is not None and backoff.code == "backoff"


def test_prefetch_needs_room_on_a_known_disk() -> None:
    result = reconcile(PREEMPT, _fleet(disk_free_mb=1000))
    deferral = result.deferral(LOAD, "h1", "vip")
    assert deferral is not None and deferral.code == "insufficient_disk"
    assert [a.kind for a in result.actions] == [DRAIN]


def test_pinned_victim_is_never_actuated() -> None:
    snap = snapshot(
        [host("h1", 10000, residencies=[res("batch", memory_mb=8000)])],
        [model("vip", 8000, priority=90), model("batch", 8000, pinned_hosts=["h1"])],
    )
    result = reconcile(PREEMPT, snap)
    assert result.actions == []
    deferral = result.deferral(DRAIN, "h1", "batch")
    assert deferral is not None and deferral.code == "pinned_residency"


def test_preemption_drain_outranks_lower_priority_availability_work() -> None:
    snap = snapshot(
        [
            host("h1", 10000, residencies=[res("batch", memory_mb=8000)]),
            host("h2", cached_models=["mid"]),
        ],
        [
            model("vip", 8000, priority=90),
            model("batch", 8000, priority=1),
            model("mid", priority=50),
        ],
        policy={"max_concurrent_mutations": 1},
    )
    result = reconcile(plan(("mid", "h2"), preemptions=[("batch", "h1", "vip")]), snap)
    assert [(a.kind, a.model_id) for a in result.actions] == [(DRAIN, "batch")]


def test_victim_released_means_nothing_left_to_do_but_wait_for_the_next_plan() -> None:
    snap = snapshot(
        [host("h1", 10000, cached_models=["batch", "vip"])],
        [model("vip", 8000, priority=90), model("batch", 8000, priority=1)],
    )
    result = reconcile(PREEMPT, snap)
    assert result.actions == []
    staged = result.deferral(WARM, "h1", "vip")
    assert staged is not None and staged.code == "preemption_staged"


# -- the unload that completes a preemption drain ------------------------------------------
# Two hosts, one victim drained on each for `vip`; a later plan names only one of them (the
# beneficiary's forecast asks for one replica now): the other drained victim is obsolete, and
# its unload still records the preemption it completes (the e2e burst test reads that flag).


def _drained_pair() -> FleetSnapshot:
    drained = [res("batch", "draining", 8000)]
    return snapshot(
        [host(h, 10000, residencies=list(drained), cached_models=["vip"]) for h in ("h1", "h2")],
        [model("vip", 8000, priority=90), model("batch", 8000, priority=1)],
    )


def _drain_record(host_id: str, *, preemption: bool = True) -> ActionRecord:
    return record(
        "drain",
        host_id,
        "batch",
        "succeeded",
        created_at=NOW - 20,
        finished_at=NOW - 19,
        priority=90,
        preemption=preemption,
        reason="preemption: release memory for vip" if preemption else "drain an obsolete replica",
    )


def test_an_unnamed_drained_victim_is_unloaded_as_part_of_its_preemption() -> None:
    named_one = plan(preemptions=[("batch", "h1", "vip")])
    history = [_drain_record("h1"), _drain_record("h2")]
    result = reconcile(named_one, _drained_pair(), history, mode="automatic")
    unloads = {a.host_id: a for a in result.actions if a.kind is UNLOAD}
    assert set(unloads) == {"h1", "h2"}
    assert unloads["h1"].preemption and unloads["h2"].preemption
    assert unloads["h2"].priority == 90  # the beneficiary's, as its drain had
    assert "vip" in unloads["h2"].reason


def test_a_cleanup_drain_keeps_its_unload_a_cleanup() -> None:
    history = [_drain_record("h1"), _drain_record("h2", preemption=False)]
    result = reconcile(plan(), _drained_pair(), history, mode="automatic")
    unloads = {a.host_id: a for a in result.actions if a.kind is UNLOAD}
    assert set(unloads) == {"h1", "h2"}
    assert unloads["h1"].preemption and not unloads["h2"].preemption
    assert unloads["h2"].priority == 1


def test_a_warm_after_the_preemption_drain_ends_its_claim() -> None:
    history = [
        _drain_record("h2"),
        record("warm", "h2", "batch", "succeeded", created_at=NOW - 10, finished_at=NOW - 9),
    ]
    result = reconcile(plan(), _drained_pair(), history, mode="automatic")
    unload = result.action(UNLOAD, "h2", "batch")
    assert unload is not None and not unload.preemption
