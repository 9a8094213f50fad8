"""The spec's reconciliation examples, one small test each (hand-written plans)."""

from __future__ import annotations

import pytest

from grid.fleet.actions import ActionKind, Mode, Tombstone, action_id
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import NOW, host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

LOAD, WARM, DRAIN, UNLOAD = ActionKind.LOAD, ActionKind.WARM, ActionKind.DRAIN, ActionKind.UNLOAD
SHA_OLD = "a" * 64
SHA_NEW = "b" * 64


def test_uncached_target_emits_load_then_warm_that_depends_on_it() -> None:
    snap = snapshot([host("h1")], [model("m")])
    result = reconcile(plan(("m", "h1")), snap, mode="automatic")
    load = result.action(LOAD, "h1", "m")
    warm = result.action(WARM, "h1", "m")
    assert load is not None and warm is not None
    assert warm.dependencies == [load.action_id]
    assert load.dependencies == []
    assert [a.kind for a in result.actions] == [LOAD, WARM]
    assert load.memory_mb == 4096 and warm.executable and load.not_before == NOW


def test_cached_target_emits_warm_only() -> None:
    snap = snapshot([host("h1", cached_models=["m"])], [model("m")])
    result = reconcile(plan(("m", "h1")), snap)
    assert [a.kind for a in result.actions] == [WARM]
    assert result.actions[0].dependencies == []
    assert result.actions[0].executable is False  # recommend mode proposes only


def test_cached_residency_with_another_digest_needs_a_load() -> None:
    snap = snapshot(
        [host("h1", residencies=[res("m", "cached", 0, artifact_sha256=SHA_OLD)])],
        [model("m", artifact_sha256=SHA_NEW)],
    )
    result = reconcile(plan(("m", "h1")), snap)
    assert [a.kind for a in result.actions] == [LOAD, WARM]


def test_last_ready_replica_waits_while_its_replacement_needs_warming() -> None:
    # The old revision serves on h1; the plan moved the model to h2, where weights are cached.
    snap = snapshot(
        [
            host("h1", residencies=[res("m", artifact_sha256=SHA_OLD)]),
            host("h2", cached_models=["m"]),
        ],
        [model("m", artifact_sha256=SHA_NEW, min_replicas=1)],
    )
    result = reconcile(plan(("m", "h2")), snap)
    assert [(a.kind, a.host_id) for a in result.actions] == [(WARM, "h2")]
    drain = result.deferral(DRAIN, "h1", "m")
    assert drain is not None and drain.code == "replacement_not_ready"
    assert drain.retry_at == NOW + snap.policy.reconcile_interval_s


def test_replacement_warming_emits_nothing_and_still_defers_the_drain() -> None:
    snap = snapshot(
        [
            host("h1", residencies=[res("m", artifact_sha256=SHA_OLD)]),
            host("h2", residencies=[res("m", "warming", artifact_sha256=SHA_NEW)]),
        ],
        [model("m", artifact_sha256=SHA_NEW, min_replicas=1)],
    )
    result = reconcile(plan(("m", "h2")), snap)
    assert result.actions == []
    drain = result.deferral(DRAIN, "h1", "m")
    assert drain is not None and drain.code == "replacement_not_ready"


def test_ready_replacement_lets_the_old_revision_drain() -> None:
    snap = snapshot(
        [
            host("h1", residencies=[res("m", artifact_sha256=SHA_OLD)]),
            host("h2", residencies=[res("m", artifact_sha256=SHA_NEW)]),
        ],
        [model("m", artifact_sha256=SHA_NEW, min_replicas=1)],
    )
    result = reconcile(plan(("m", "h2")), snap)
    assert [(a.kind, a.host_id) for a in result.actions] == [(DRAIN, "h1")]


def test_ready_replacement_on_a_paused_host_does_not_count() -> None:
    snap = snapshot(
        [
            host("h1", residencies=[res("m")]),
            host("h2", state="paused", residencies=[res("m")]),
        ],
        [model("m", min_replicas=1)],
    )
    # A plan from before h2 paused still names h2 as the replica to keep.
    result = reconcile(plan(("m", "h2")), snap)
    drain_h1 = result.deferral(DRAIN, "h1", "m")
    assert drain_h1 is not None and drain_h1.code == "replacement_not_ready"
    assert result.action(DRAIN, "h1", "m") is None


def test_external_replica_never_authorizes_draining_the_last_managed_baseline() -> None:
    snap = snapshot(
        [
            host("h1", residencies=[res("m")]),
            host("ext", residencies=[res("m", managed=False)]),
        ],
        [model("m", min_replicas=1)],
    )
    # The plan counts the external replica as the model's only desired replica.
    result = reconcile(plan(("m", "ext")), snap)
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "managed_baseline_floor"
    assert result.actions == []


def test_failure_domain_floor_holds_during_the_change() -> None:
    # A drain of b1 is pending when the plan takes b1 back: draining it now would leave the
    # model in rack-a only, below the two domains the target spans.
    pending = record("drain", "b1", "m", "pending")
    snap = snapshot(
        [
            host("a1", failure_domain="rack-a", residencies=[res("m")]),
            host("b1", failure_domain="rack-b", residencies=[res("m")]),
            host("a2", failure_domain="rack-a", residencies=[res("m")]),
        ],
        [model("m", min_failure_domains=2, max_replicas=3)],
    )
    result = reconcile(plan(("m", "a1"), ("m", "b1")), snap, [pending])
    assert [(w.action_id, w.code) for w in result.withdrawn] == [
        (pending.action_id, "unsafe_destructive_batch")
    ]
    deferral = result.deferral(DRAIN, "b1", "m")
    assert deferral is not None and deferral.code == "failure_domain_floor"
    # a2 is outside the plan, but destructive work for the model is blocked this tick.
    assert result.action(DRAIN, "a2", "m") is None


def test_target_with_fewer_domains_is_reachable() -> None:
    # The plan itself accepts a domain shortfall (both replicas in rack-a): b1 may go.
    snap = snapshot(
        [
            host("a1", failure_domain="rack-a", residencies=[res("m")]),
            host("b1", failure_domain="rack-b", residencies=[res("m")]),
            host("a2", failure_domain="rack-a", residencies=[res("m")]),
        ],
        [model("m", min_failure_domains=2, max_replicas=3)],
    )
    result = reconcile(plan(("m", "a1"), ("m", "a2")), snap)
    assert [(a.kind, a.host_id) for a in result.actions] == [(DRAIN, "b1")]


def test_draining_residency_with_requests_in_flight_defers_unload() -> None:
    snap = snapshot(
        [host("h1", residencies=[res("m", "draining", active_requests=3)])], [model("m")]
    )
    result = reconcile(plan(), snap)
    deferral = result.deferral(UNLOAD, "h1", "m")
    assert deferral is not None and deferral.code == "requests_in_flight"
    assert result.actions == []


def test_unknown_activity_fails_safe() -> None:
    snap = snapshot(
        [host("h1", residencies=[res("m", "draining", active_requests=None)])], [model("m")]
    )
    result = reconcile(plan(), snap)
    deferral = result.deferral(UNLOAD, "h1", "m")
    assert deferral is not None and deferral.code == "activity_unknown"


def test_idle_draining_residency_unloads_and_other_models_work_does_not_block_it() -> None:
    snap = snapshot(
        [
            host(
                "h1",
                residencies=[res("m", "draining"), res("busy", active_requests=9)],
            )
        ],
        [model("m"), model("busy")],
    )
    result = reconcile(plan(("busy", "h1")), snap)
    assert [(a.kind, a.model_id) for a in result.actions] == [(UNLOAD, "m")]


def test_ready_obsolete_replica_is_drained_never_unloaded_directly() -> None:
    snap = snapshot([host("h1", residencies=[res("m")])], [model("m")])
    result = reconcile(plan(), snap)
    assert [a.kind for a in result.actions] == [DRAIN]


def test_future_loaded_at_counts_as_age_zero() -> None:
    snap = snapshot(
        [host("h1", residencies=[res("m", loaded_at=NOW + 500, last_used_at=NOW - 3600)])],
        [model("m", min_residency_s=300.0)],
    )
    result = reconcile(plan(), snap)
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "minimum_residency"
    assert deferral.retry_at == NOW + 300.0


def test_scale_down_waits_for_the_cooldown_after_last_use() -> None:
    snap = snapshot(
        [host("h1", residencies=[res("m", last_used_at=NOW - 100)])],
        [model("m", scale_down_cooldown_s=600.0)],
    )
    result = reconcile(plan(), snap)
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "scale_down_cooldown"
    assert deferral.retry_at == NOW - 100 + 600.0


def test_failed_attempt_retries_exactly_at_its_backoff_time_under_a_new_id() -> None:
    failed = record("load", "h1", "m", "failed", finished_at=NOW - 5)
    snap = snapshot([host("h1")], [model("m")], policy={"retry_backoff_base_s": 15.0})
    early = reconcile(plan(("m", "h1")), snap, [failed], mode="automatic")
    load_deferral = early.deferral(LOAD, "h1", "m")
    assert load_deferral is not None and load_deferral.code == "backoff"
    assert load_deferral.retry_at == NOW + 10
    warm_deferral = early.deferral(WARM, "h1", "m")
    assert warm_deferral is not None and warm_deferral.code == "dependency_deferred"
    assert early.actions == []

    just_before = reconcile(plan(("m", "h1")), snap, [failed], now=NOW + 9.999)
    assert just_before.actions == []
    on_time = reconcile(plan(("m", "h1")), snap, [failed], now=NOW + 10)
    load = on_time.action(LOAD, "h1", "m")
    assert load is not None
    assert load.attempt == 2
    assert load.action_id == action_id(LOAD, "h1", "m", 2) != failed.action_id


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    failures = [
        record("warm", "h1", "m", "failed", attempt=i, created_at=NOW - 100 + i, finished_at=NOW)
        for i in range(1, 8)
    ]
    snap = snapshot(
        [host("h1", cached_models=["m"])],
        [model("m")],
        policy={"retry_backoff_base_s": 10.0, "retry_backoff_cap_s": 300.0},
    )
    result = reconcile(plan(("m", "h1")), snap, failures)
    deferral = result.deferral(WARM, "h1", "m")
    assert deferral is not None and deferral.retry_at == NOW + 300.0  # 10 * 2**6 capped
    three = reconcile(plan(("m", "h1")), snap, failures[:3])
    deferral3 = three.deferral(WARM, "h1", "m")
    assert deferral3 is not None and deferral3.retry_at == NOW + 40.0  # 10 * 2**2


def test_identical_pending_action_keeps_its_id_and_is_not_reissued() -> None:
    snap = snapshot([host("h1", cached_models=["m"])], [model("m")])
    first = reconcile(plan(("m", "h1")), snap, mode="automatic")
    (warm,) = first.actions
    pending = record("warm", "h1", "m", "delivered")
    assert pending.action_id == warm.action_id
    second = reconcile(plan(("m", "h1")), snap, [pending], mode="automatic")
    assert second.actions == []
    assert second.in_flight == [warm.action_id]
    assert second.withdrawn == []


def test_success_newer_than_the_heartbeat_is_not_repeated() -> None:
    done = record("drain", "h1", "m", "succeeded", created_at=NOW - 20, finished_at=NOW - 5)
    stale_view = snapshot(
        [host("h1", last_heartbeat=NOW - 10, residencies=[res("m")])], [model("m")]
    )
    assert reconcile(plan(), stale_view, [done]).actions == []
    fresh_view = snapshot([host("h1", last_heartbeat=NOW, residencies=[res("m")])], [model("m")])
    again = reconcile(plan(), fresh_view, [done]).action(DRAIN, "h1", "m")
    assert again is not None and again.attempt == 2


def test_observe_mode_emits_no_actions_and_records_drift() -> None:
    snap = snapshot([host("h1"), host("h2", residencies=[res("old")])], [model("m"), model("old")])
    result = reconcile(plan(("m", "h1")), snap, mode=Mode.OBSERVE)
    assert result.actions == []
    codes = {(d.kind, d.host_id, d.model_id): d.code for d in result.deferred}
    assert codes == {
        (LOAD, "h1", "m"): "observe_mode",
        (WARM, "h1", "m"): "observe_mode",
        (DRAIN, "h2", "old"): "observe_mode",
    }
    assert all(d.retry_at > NOW and d.message for d in result.deferred)


def test_recommend_and_automatic_propose_the_same_actions() -> None:
    snap = snapshot([host("h1"), host("h2", residencies=[res("old")])], [model("m"), model("old")])
    rec = reconcile(plan(("m", "h1")), snap, mode="recommend")
    auto = reconcile(plan(("m", "h1")), snap, mode="automatic")
    assert [a.action_id for a in rec.actions] == [a.action_id for a in auto.actions]
    assert not any(a.executable for a in rec.actions)
    assert all(a.executable for a in auto.actions)


def test_removed_profile_tombstone_drains_a_host_that_returns_later() -> None:
    tomb = Tombstone(model_id="gone", created_at=NOW - 86400)
    snap = snapshot(
        [host("h1", residencies=[res("gone", loaded_at=NOW - 1, last_used_at=NOW - 1)])],
        [model("m")],
    )
    result = reconcile(plan(), snap, tombstones=[tomb])
    drain = result.action(DRAIN, "h1", "gone")
    assert drain is not None and "retired" in drain.reason
    without = reconcile(plan(), snap)
    assert without.actions == []
    unknown = without.deferral(DRAIN, "h1", "gone")
    assert unknown is not None and unknown.code == "unknown_model"


def test_tombstone_cancels_pending_availability_work() -> None:
    tomb = Tombstone(model_id="gone")
    pending_load = record("load", "h1", "gone", "pending")
    snap = snapshot([host("h1")], [model("m")])
    result = reconcile(plan(), snap, [pending_load], tombstones=[tomb])
    assert [(w.action_id, w.code) for w in result.withdrawn] == [
        (pending_load.action_id, "model_retired")
    ]


def test_recreated_profile_clears_its_tombstone() -> None:
    tomb = Tombstone(model_id="m")
    snap = snapshot([host("h1", residencies=[res("m")])], [model("m")])
    result = reconcile(plan(("m", "h1")), snap, tombstones=[tomb])
    assert result.actions == [] and result.deferred == []


def test_pending_drain_whose_replacement_stops_being_ready_withdraws_the_whole_batch() -> None:
    drain_h1 = record("drain", "h1", "m", "delivered", created_at=NOW - 10)
    drain_h3 = record("drain", "h3", "m", "pending", created_at=NOW - 10)
    snap = snapshot(
        [
            host("h1", residencies=[res("m", artifact_sha256=SHA_OLD)]),
            host("h2", residencies=[res("m", "failed", artifact_sha256=SHA_NEW)]),
            host("h3", residencies=[res("m", artifact_sha256=SHA_OLD)]),
        ],
        [model("m", artifact_sha256=SHA_NEW, max_replicas=2, min_replicas=1)],
    )
    result = reconcile(plan(("m", "h2")), snap, [drain_h1, drain_h3], mode="automatic")
    withdrawn = {w.action_id: w for w in result.withdrawn}
    assert set(withdrawn) == {drain_h1.action_id, drain_h3.action_id}
    assert {w.code for w in withdrawn.values()} == {"unsafe_destructive_batch"}
    assert [w.action_id for w in result.withdrawn_destructive] == [drain_h1.action_id]
    assert result.blocked_models == ["m"]
    assert not any(a.kind in (DRAIN, UNLOAD) for a in result.actions)


def test_withdrawn_delivered_drain_blocks_until_receipt_or_proof() -> None:
    dangling = record("drain", "h1", "m", "withdrawn", created_at=NOW - 60, withdrawn_at=NOW - 50)
    dangling = dangling.model_copy(update={"delivered_at": NOW - 55})
    # h3's old copy is obsolete and safe to drain, but model m is blocked.
    base_hosts = [
        host("h2", residencies=[res("m", artifact_sha256=SHA_NEW)]),
        host("h3", residencies=[res("m", artifact_sha256=SHA_OLD)]),
    ]
    models = [model("m", artifact_sha256=SHA_NEW)]
    still_ready = snapshot(
        [host("h1", residencies=[res("m", artifact_sha256=SHA_OLD)]), *base_hosts], models
    )
    blocked = reconcile(plan(("m", "h2")), still_ready, [dangling])
    assert blocked.blocked_models == ["m"]
    assert blocked.action(DRAIN, "h3", "m") is None
    deferral = blocked.deferral(DRAIN, "h3", "m")
    assert deferral is not None and deferral.code == "destructive_blocked"

    proven = snapshot(
        [host("h1", residencies=[res("m", "draining", artifact_sha256=SHA_OLD)]), *base_hosts],
        models,
    )
    unblocked = reconcile(plan(("m", "h2")), proven, [dangling])
    assert unblocked.blocked_models == []
    assert unblocked.action(DRAIN, "h3", "m") is not None

    receipt = dangling.model_copy(update={"status": "failed", "finished_at": NOW - 1})
    after_receipt = reconcile(plan(("m", "h2")), still_ready, [receipt])
    assert after_receipt.blocked_models == []


def test_external_manual_and_pinned_residencies_are_never_actuated() -> None:
    snap = snapshot(
        [
            host(
                "h1",
                residencies=[
                    res("ext", managed=False),
                    res("man", ownership="manual"),
                    res("pin", "draining"),
                    res("pin2"),
                ],
            )
        ],
        [
            model("ext"),
            model("man"),
            model("pin", pinned_hosts=["h1"]),
            model("pin2", pinned_hosts=["h1"]),
        ],
    )
    result = reconcile(plan(), snap, mode="automatic")
    assert result.actions == []
    codes = {(d.model_id, d.code) for d in result.deferred}
    assert ("pin", "pinned_residency") in codes and ("pin2", "pinned_residency") in codes


def test_manual_host_receives_no_placement() -> None:
    snap = snapshot([host("h1", ownership="manual")], [model("m")])
    result = reconcile(plan(("m", "h1")), snap)
    assert result.actions == []
    deferral = result.deferral(WARM, "h1", "m")
    assert deferral is not None and deferral.code == "host_ineligible"


def test_stale_host_gets_no_command() -> None:
    snap = snapshot([host("h1", last_heartbeat=NOW - 1000, residencies=[res("m")])], [model("m")])
    result = reconcile(plan(), snap)
    deferral = result.deferral(DRAIN, "h1", "m")
    assert result.actions == [] and deferral is not None and deferral.code == "host_unreachable"


def test_make_before_break_migration_stages_over_ticks() -> None:
    models = [model("m", min_replicas=1, artifact_sha256=SHA_NEW)]
    old = res("m", artifact_sha256=SHA_OLD)
    target = plan(("m", "h2"))
    tick1 = reconcile(target, snapshot([host("h1", residencies=[old]), host("h2")], models))
    assert [(a.kind, a.host_id) for a in tick1.actions] == [(LOAD, "h2"), (WARM, "h2")]
    tick2 = reconcile(
        target,
        snapshot(
            [
                host("h1", residencies=[old]),
                host("h2", residencies=[res("m", artifact_sha256=SHA_NEW)]),
            ],
            models,
        ),
    )
    assert [(a.kind, a.host_id) for a in tick2.actions] == [(DRAIN, "h1")]
    tick3 = reconcile(
        target,
        snapshot(
            [
                host("h1", residencies=[res("m", "draining", artifact_sha256=SHA_OLD)]),
                host("h2", residencies=[res("m", artifact_sha256=SHA_NEW)]),
            ],
            models,
        ),
    )
    assert [(a.kind, a.host_id) for a in tick3.actions] == [(UNLOAD, "h1")]


def test_records_and_plans_naming_unknown_hosts_are_harmless() -> None:
    ghost_drain = record("drain", "gone-host", "m", "withdrawn", withdrawn_at=NOW - 5)
    ghost_drain = ghost_drain.model_copy(update={"delivered_at": NOW - 9})
    ghost_warm = record("warm", "gone-host", "m", "delivered")
    snap = snapshot([host("h1", residencies=[res("m")])], [model("m", min_replicas=1)])
    result = reconcile(plan(("m", "h1"), ("m", "gone-host")), snap, [ghost_drain, ghost_warm])
    assert result.actions == []
    assert result.blocked_models == ["m"]  # the lost drain never reported back
