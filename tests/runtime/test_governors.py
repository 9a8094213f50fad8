"""Governors: concurrent-mutation limits, service ordering, fanout, ledger, yielding."""

from __future__ import annotations

import pytest

from grid.fleet.actions import ActionKind, Urgency
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

LOAD, WARM, DRAIN, UNLOAD = ActionKind.LOAD, ActionKind.WARM, ActionKind.DRAIN, ActionKind.UNLOAD


def test_global_limit_caps_new_actions_and_defers_the_rest() -> None:
    hosts = [host(f"h{i}", cached_models=["m"]) for i in range(4)]
    snap = snapshot(hosts, [model("m", max_replicas=4)], policy={"max_concurrent_mutations": 2})
    result = reconcile(plan(*[("m", f"h{i}") for i in range(4)]), snap)
    assert len(result.actions) == 2
    codes = sorted(d.code for d in result.deferred)
    assert codes == ["governor_global_limit", "governor_global_limit"]


def test_pending_and_running_records_count_toward_the_limits() -> None:
    hosts = [host("h1", cached_models=["a", "b"]), host("h2", cached_models=["c"])]
    busy = [record("load", "h9", "x", "delivered"), record("unload", "h9", "y", "running")]
    snap = snapshot(
        [*hosts, host("h9")],
        [model("a"), model("b"), model("c"), model("x"), model("y")],
        policy={"max_concurrent_mutations": 3},
    )
    result = reconcile(plan(("a", "h1"), ("b", "h1"), ("c", "h2"), ("x", "h9")), snap, busy)
    assert len(result.actions) == 1  # 3 slots, 2 taken by the open records


def test_per_host_limit() -> None:
    snap = snapshot(
        [host("h1", capacity_mb=65536, cached_models=["a", "b", "c"])],
        [model("a"), model("b"), model("c")],
        policy={"max_host_mutations": 2},
    )
    result = reconcile(plan(("a", "h1"), ("b", "h1"), ("c", "h1")), snap)
    assert [a.model_id for a in result.actions] == ["a", "b"]
    deferral = result.deferral(WARM, "h1", "c")
    assert deferral is not None and deferral.code == "governor_host_limit"


def test_higher_priority_wins_scarce_slots_across_lifecycle_phases() -> None:
    # A low-priority cleanup drain and a high-priority warm compete for one slot.
    snap = snapshot(
        [host("h1", residencies=[res("low")]), host("h2", cached_models=["high"])],
        [model("low", priority=1), model("high", priority=50)],
        policy={"max_concurrent_mutations": 1},
    )
    result = reconcile(plan(("high", "h2")), snap)
    assert [(a.kind, a.model_id) for a in result.actions] == [(WARM, "high")]
    deferral = result.deferral(DRAIN, "h1", "low")
    assert deferral is not None and deferral.code == "governor_global_limit"


def test_routine_cleanup_waits_behind_availability_of_any_priority() -> None:
    snap = snapshot(
        [host("h1", residencies=[res("big")]), host("h2", cached_models=["small"])],
        [model("big", priority=90), model("small", priority=1)],
        policy={"max_concurrent_mutations": 1},
    )
    result = reconcile(plan(("small", "h2")), snap)
    assert [(a.kind, a.model_id) for a in result.actions] == [(WARM, "small")]


def test_baseline_and_direct_before_inferred_prewarming() -> None:
    snap = snapshot(
        [
            host("h1", cached_models=["guess"]),
            host("h2", cached_models=["real"]),
            host("h3", cached_models=["base"]),
        ],
        [
            model("guess", max_replicas=2),
            model("real", max_replicas=2),
            model("base", min_replicas=1),
        ],
        demand={
            "guess": {"desired_replicas": 1, "evidence": "inferred"},
            "real": {"desired_replicas": 1, "evidence": "direct"},
        },
        policy={"max_concurrent_mutations": 2},
    )
    result = reconcile(plan(("guess", "h1"), ("real", "h2"), ("base", "h3")), snap)
    assert [a.model_id for a in result.actions] == ["base", "real"]
    assert [a.urgency for a in result.actions] == [Urgency.REQUIRED, Urgency.DIRECT]
    deferral = result.deferral(WARM, "h1", "guess")
    assert deferral is not None and deferral.code == "governor_global_limit"


def test_one_replica_round_per_model() -> None:
    hosts = [host(f"h{i}", cached_models=["a", "b"]) for i in range(3)]
    snap = snapshot(
        hosts,
        [model("a", max_replicas=2), model("b", max_replicas=2)],
        policy={"max_concurrent_mutations": 2},
    )
    # "a" sorts first by name, but "b" gets its first replica before "a" its second.
    result = reconcile(plan(("a", "h0"), ("a", "h1"), ("b", "h2")), snap)
    assert sorted((a.model_id, a.host_id) for a in result.actions) == [("a", "h0"), ("b", "h2")]


def test_ready_replica_counts_as_the_first_round() -> None:
    hosts = [host("h0", residencies=[res("a")]), host("h1", cached_models=["a", "b"])]
    snap = snapshot(
        [*hosts, host("h2", cached_models=["b"])],
        [model("a", max_replicas=2), model("b", max_replicas=2)],
        policy={"max_concurrent_mutations": 1},
    )
    result = reconcile(plan(("a", "h0"), ("a", "h1"), ("b", "h2")), snap)
    assert [(a.model_id, a.host_id) for a in result.actions] == [("b", "h2")]


def test_cached_model_is_not_stranded_behind_an_unrelated_download() -> None:
    snap = snapshot(
        [host("h1"), host("h2", cached_models=["quick"])],
        [model("cold"), model("quick")],
        policy={"max_concurrent_mutations": 1},
    )
    result = reconcile(plan(("cold", "h1"), ("quick", "h2")), snap)
    assert [(a.kind, a.model_id) for a in result.actions] == [(WARM, "quick")]


def test_at_most_two_concurrent_loads_of_one_artifact() -> None:
    sha = "c" * 64
    hosts = [host(f"h{i}") for i in range(3)] + [host("hx")]
    snap = snapshot(
        hosts,
        [model("m", max_replicas=3, artifact_sha256=sha), model("other")],
        policy={"max_concurrent_mutations": 20, "max_host_mutations": 4},
    )
    result = reconcile(plan(("m", "h0"), ("m", "h1"), ("m", "h2"), ("other", "hx")), snap)
    loads_m = [a for a in result.actions if a.kind is LOAD and a.model_id == "m"]
    assert len(loads_m) == 2
    fanned = [d for d in result.deferred if d.code == "artifact_fanout"]
    assert len(fanned) == 1 and fanned[0].kind is LOAD
    blocked_warm = result.deferral(WARM, fanned[0].host_id, "m")
    assert blocked_warm is not None and blocked_warm.code == "dependency_deferred"
    assert result.action(LOAD, "hx", "other") is not None  # another artifact proceeds


def test_running_loads_count_toward_the_fanout() -> None:
    sha = "c" * 64
    snap = snapshot(
        [host(f"h{i}") for i in range(3)],
        [model("m", max_replicas=3, artifact_sha256=sha)],
    )
    running = [
        record("load", "h0", "m", "running", artifact_key=sha),
        record("load", "h1", "m", "delivered", artifact_key=sha),
    ]
    result = reconcile(plan(("m", "h0"), ("m", "h1"), ("m", "h2")), snap, running)
    deferral = result.deferral(LOAD, "h2", "m")
    assert deferral is not None and deferral.code == "artifact_fanout"


def test_in_flight_lifecycle_reserves_memory_against_a_plan_that_forgot_it() -> None:
    # A warm of "a" is delivered but not yet visible; the plan now puts "b" in that memory.
    snap = snapshot(
        [host("h1", capacity_mb=10000, cached_models=["a", "b"])],
        [model("a", 6000), model("b", 6000)],
    )
    warm_a = record("warm", "h1", "a", "delivered", memory_mb=6000)
    result = reconcile(plan(("b", "h1"), memory_mb=6000), snap, [warm_a])
    assert result.actions == []
    deferral = result.deferral(WARM, "h1", "b")
    assert deferral is not None and deferral.code == "insufficient_memory"


def test_higher_class_takes_the_slot_of_an_undelivered_lower_class_action() -> None:
    snap = snapshot(
        [host("h1", cached_models=["low"]), host("h2", cached_models=["high"])],
        [model("low", priority=1), model("high", priority=9)],
        policy={"max_concurrent_mutations": 1},
    )
    queued = record("warm", "h1", "low", "pending", priority=1)
    result = reconcile(plan(("low", "h1"), ("high", "h2")), snap, [queued])
    assert [(w.action_id, w.code) for w in result.withdrawn] == [
        (queued.action_id, "yield_to_higher_class")
    ]
    assert [a.model_id for a in result.actions] == ["high"]


def test_delivered_lower_class_action_keeps_its_slot() -> None:
    snap = snapshot(
        [host("h1", cached_models=["low"]), host("h2", cached_models=["high"])],
        [model("low", priority=1), model("high", priority=9)],
        policy={"max_concurrent_mutations": 1},
    )
    delivered = record("warm", "h1", "low", "delivered", priority=1)
    result = reconcile(plan(("low", "h1"), ("high", "h2")), snap, [delivered])
    assert result.withdrawn == [] and result.actions == []
    deferral = result.deferral(WARM, "h2", "high")
    assert deferral is not None and deferral.code == "governor_global_limit"


def test_equal_class_work_is_not_churned() -> None:
    queued = record("warm", "h1", "b", "pending", priority=5)
    snap = snapshot(
        [host("h1", cached_models=["b"]), host("h2", cached_models=["a"])],
        [model("a", priority=5), model("b", priority=5)],
        policy={"max_concurrent_mutations": 1},
    )
    # "a" sorts before "b" but is the same class: the queued "b" keeps its slot.
    result = reconcile(plan(("b", "h1"), ("a", "h2")), snap, [queued])
    assert result.withdrawn == [] and result.actions == []
    assert result.in_flight == [queued.action_id]


def test_leaf_warm_yields_before_its_load() -> None:
    snap = snapshot(
        [host("h1"), host("h2", cached_models=["high"])],
        [model("low", priority=1), model("high", priority=9)],
        policy={"max_concurrent_mutations": 2},
    )
    load = record("load", "h1", "low", "delivered", priority=1, memory_mb=4096)
    warm = record("warm", "h1", "low", "pending", priority=1, dependencies=[load.action_id])
    result = reconcile(plan(("low", "h1"), ("high", "h2")), snap, [load, warm])
    assert [w.action_id for w in result.withdrawn] == [warm.action_id]
    assert [a.model_id for a in result.actions] == ["high"]


def test_undelivered_action_the_plan_dropped_is_withdrawn() -> None:
    snap = snapshot([host("h1", cached_models=["m"])], [model("m")])
    queued = record("warm", "h1", "m", "pending")
    delivered = record("load", "h1", "x", "delivered")
    result = reconcile(plan(), snap, [queued, delivered])
    assert [(w.action_id, w.code) for w in result.withdrawn] == [(queued.action_id, "plan_changed")]
    assert result.in_flight == []  # the delivered one runs on but is no longer wanted
