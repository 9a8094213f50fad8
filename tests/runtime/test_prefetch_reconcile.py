"""The reconciler's cache-only work (grid/runtime/reconcile/cache.py) on hand-written plans: an
advisory becomes a disk-only predictive LOAD (no memory, no warm, no drain, behind every other
action, inside the predictive reserve), an eviction becomes an exact-SHA EVICT only while the
snapshot still shows that unused predictive entry."""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.actions import ActionKind, Mode, Urgency
from grid.fleet.models import FleetSnapshot, Plan
from grid.fleet.prefetch import CacheEviction, PrefetchAdvisory, PrefetchReport
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import NOW, host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

SHA = "a" * 64
ALL_KINDS = ["load", "warm", "drain", "unload", "evict"]


def video(**fields: Any) -> dict[str, Any]:
    return model(
        "video",
        8192,
        artifact_size_mb=5000,
        artifact_sha256=SHA,
        artifact_source="hf://o/r/video.gguf",
        **fields,
    )


def advisory(host_id: str = "h1", **fields: Any) -> PrefetchAdvisory:
    values: dict[str, Any] = {
        "model_id": "video",
        "host_id": host_id,
        "sha256": SHA,
        "size_mb": 5000,
        "edge": "image->video",
        "confidence": 0.8,
        "pressure": 1.0,
        "transfer_s": 60.0,
        "lead_s": None,
        "counted_s": 60.0,
        "value_s": 48.0,
        "value_per_mb": 48.0 / 5000,
        "disk_left_mb": 0,
        "reason": "learned image->video",
    }
    values.update(fields)
    return PrefetchAdvisory(**values)


def with_report(base: Plan, **report: Any) -> Plan:
    base.prefetch = PrefetchReport(**report)
    return base


def fleet(**host_fields: Any) -> FleetSnapshot:
    fields: dict[str, Any] = {"disk_free_mb": 50_000, "actuator_capabilities": ALL_KINDS}
    fields.update(host_fields)
    return snapshot([host("h1", **fields)], [video()], policy={"predictive_disk_reserve_mb": 10240})


def test_an_advisory_is_a_disk_only_predictive_load_and_nothing_else() -> None:
    result = reconcile(with_report(plan(), advisories=[advisory()]), fleet(), mode=Mode.AUTOMATIC)
    (action,) = result.actions
    assert (action.kind, action.host_id, action.model_id) == (ActionKind.LOAD, "h1", "video")
    assert action.memory_mb == 0 and action.predictive and action.artifact_sha256 == SHA
    assert action.urgency is Urgency.PREDICTIVE and action.priority == 0
    assert action.dependencies == []


def test_a_host_without_disk_telemetry_never_gets_a_predictive_load() -> None:
    result = reconcile(
        with_report(plan(), advisories=[advisory()]), fleet(disk_free_mb=None), mode=Mode.AUTOMATIC
    )
    assert result.actions == []
    assert result.deferral(ActionKind.LOAD, "h1", "video").code == "no_disk_telemetry"  # type: ignore[union-attr]


def test_the_governor_keeps_the_reserve_free_after_demanded_loads() -> None:
    # 20000 MB free. A demanded load of coder (8000 MB, placed) is admitted first; the
    # predictive 5000 MB would leave 20000 - 8000 - 5000 = 7000 < 10240: deferred.
    snap = snapshot(
        [host("h1", capacity_mb=65536, disk_free_mb=20000, actuator_capabilities=ALL_KINDS)],
        [video(), model("coder", 8192, artifact_size_mb=8000)],
        demand={"coder": {"offered_concurrency": 1.0}},
        policy={"predictive_disk_reserve_mb": 10240, "max_host_mutations": 4},
    )
    base = with_report(plan(("coder", "h1")), advisories=[advisory()])
    result = reconcile(base, snap, mode=Mode.AUTOMATIC)
    assert [(a.kind, a.model_id) for a in result.actions] == [
        (ActionKind.LOAD, "coder"),
        (ActionKind.WARM, "coder"),
    ]
    assert result.deferral(ActionKind.LOAD, "h1", "video").code == "predictive_reserve"  # type: ignore[union-attr]
    # with the reserve disabled it fits after the demanded load
    free = snap.model_copy(
        update={"policy": snap.policy.model_copy(update={"predictive_disk_reserve_mb": 0})}
    )
    kinds = [(a.kind, a.model_id) for a in reconcile(base, free, mode=Mode.AUTOMATIC).actions]
    assert (ActionKind.LOAD, "video") in kinds


def test_a_predictive_load_runs_behind_every_other_action_and_yields_its_slot() -> None:
    # One mutation slot on the host: the demanded warm of a cached model wins it.
    snap = snapshot(
        [
            host(
                "h1",
                capacity_mb=65536,
                disk_free_mb=50000,
                actuator_capabilities=ALL_KINDS,
                cached_models=["coder"],
            )
        ],
        [video(), model("coder", 8192, priority=0)],
        demand={"coder": {"offered_concurrency": 1.0}},
        policy={"max_host_mutations": 1},
    )
    base = with_report(plan(("coder", "h1")), advisories=[advisory()])
    result = reconcile(base, snap, mode=Mode.AUTOMATIC)
    assert [(a.kind, a.model_id) for a in result.actions] == [(ActionKind.WARM, "coder")]
    # An undelivered predictive load already holding the slot is withdrawn for it.
    held = record("load", "h1", "video", predictive=True, urgency="predictive", priority=0)
    result = reconcile(base, snap, [held], mode=Mode.AUTOMATIC)
    assert [w.code for w in result.withdrawn] == ["yield_to_higher_class"]
    assert [(a.kind, a.model_id) for a in result.actions] == [(ActionKind.WARM, "coder")]


def test_an_open_predictive_load_is_kept_and_a_placement_reuses_it() -> None:
    held = record("load", "h1", "video", "delivered", predictive=True, urgency="predictive")
    kept = reconcile(
        with_report(plan(), advisories=[advisory()]), fleet(), [held], mode=Mode.AUTOMATIC
    )
    assert kept.actions == [] and kept.in_flight == [held.action_id]
    # The model is placed on that host now: its warm depends on the running prefetch.
    placed = reconcile(
        plan(("video", "h1"), memory_mb=8192), fleet(capacity_mb=32768), [held], mode=Mode.AUTOMATIC
    )
    (warm,) = placed.actions
    assert warm.kind is ActionKind.WARM and warm.dependencies == [held.action_id]


def test_a_cached_artifact_gets_no_second_prefetch_and_no_warm() -> None:
    snap = fleet(residencies=[res("video", "cached", 0, artifact_sha256=SHA)])
    result = reconcile(with_report(plan(), advisories=[advisory()]), snap, mode=Mode.AUTOMATIC)
    assert result.actions == []


def entry(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "model_id": "video",
        "sha256": SHA,
        "size_mb": 5000,
        "cached_at": NOW - 7 * 3600,
    }
    values.update(fields)
    return values


def eviction(**fields: Any) -> CacheEviction:
    values: dict[str, Any] = {
        "model_id": "video",
        "host_id": "h1",
        "sha256": SHA,
        "size_mb": 5000,
        "code": "expired",
        "age_s": 7 * 3600.0,
    }
    values.update(fields)
    return CacheEviction(**values)


def test_an_eviction_is_an_exact_sha_evict_of_the_reported_entry() -> None:
    snap = fleet(
        predictive_cache=[entry()], residencies=[res("video", "cached", 0, artifact_sha256=SHA)]
    )
    result = reconcile(with_report(plan(), evictions=[eviction()]), snap, mode=Mode.AUTOMATIC)
    (action,) = result.actions
    assert (action.kind, action.artifact_sha256, action.memory_mb) == (ActionKind.EVICT, SHA, 0)
    assert action.reason.startswith("predictive cache entry expired")


@pytest.mark.parametrize(
    ("host_fields", "code"),
    [
        ({"predictive_cache": [entry(warmed=True)]}, "artifact_used"),
        (
            {"predictive_cache": [entry()], "residencies": [res("video", "ready", 8192)]},
            "artifact_active",
        ),
        ({"predictive_cache": [entry()], "ownership": "manual"}, "host_manual"),
        (
            {
                "predictive_cache": [entry()],
                "actuator_capabilities": ["load", "warm", "drain", "unload"],
            },
            "evict_unsupported",
        ),
    ],
)
def test_an_eviction_of_a_protected_entry_is_refused(
    host_fields: dict[str, Any], code: str
) -> None:
    result = reconcile(
        with_report(plan(), evictions=[eviction()]), fleet(**host_fields), mode=Mode.AUTOMATIC
    )
    assert [a for a in result.actions if a.kind is ActionKind.EVICT] == []
    assert result.deferral(ActionKind.EVICT, "h1", "video").code == code  # type: ignore[union-attr]


def test_an_eviction_of_an_entry_that_is_gone_or_another_revision_does_nothing() -> None:
    for cache in ([], [entry(sha256="b" * 64)]):
        result = reconcile(
            with_report(plan(), evictions=[eviction()]),
            fleet(predictive_cache=cache),
            mode=Mode.AUTOMATIC,
        )
        assert result.actions == [] and result.deferred == []
