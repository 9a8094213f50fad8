"""The fleet simulator, scenario by scenario: lifecycles, knobs, and the reconciler's staging.

Each test drives the real heuristic planner and reconciler on a tiny fleet and asserts on what
the simulated hosts went through, not on the exact tick log.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from grid.fleet.actions import ActionKind, RecordStatus
from grid.fleet.models import DemandEntry, FleetSnapshot, HostState, ResidencyState
from grid.fleet.snapshot import parse_snapshot
from grid.lab.simulator import Durations, FleetSimulator, SimConfig

pytestmark = pytest.mark.unit

START = 1_785_300_000.0
POLICY = {"heartbeat_stale_s": 12.0, "retry_backoff_base_s": 5.0, "retry_backoff_cap_s": 20.0}


def fleet(hosts: list[dict[str, Any]], models: list[dict[str, Any]], **extra: Any) -> FleetSnapshot:
    for h in hosts:
        h.setdefault("last_heartbeat", START)
    for m in models:
        m.setdefault("min_residency_s", 0.0)
        m.setdefault("scale_down_cooldown_s", 0.0)
    policy: dict[str, Any] = {**POLICY, **extra.pop("policy", {})}
    doc: dict[str, Any] = {"now": START, "hosts": hosts, "models": models, "policy": policy}
    doc.update(extra)
    return parse_snapshot(doc)


def ready(sim: FleetSimulator, host_id: str, model_id: str) -> bool:
    res = sim.hosts[host_id].residencies.get(model_id)
    return res is not None and res.state is ResidencyState.READY


def settle(sim: FleetSimulator, ticks: int = 40) -> None:
    for _ in range(ticks):
        report = sim.step()
        if not report.result.actions and not sim.convergence_gaps(report.plan):
            return
    raise AssertionError(sim.story())


def kinds_for(sim: FleetSimulator, model_id: str) -> list[tuple[str, str, str]]:
    return [
        (r.kind.value, r.host_id, r.status.value)
        for r in sorted(sim.history(), key=lambda r: r.created_at)
        if r.model_id == model_id
    ]


def test_uncached_model_is_loaded_warmed_and_ready() -> None:
    sim = FleetSimulator(
        fleet(
            [{"host_id": "h1", "capacity_mb": 16384}],
            [{"model_id": "m", "memory_mb": 4096, "min_replicas": 1}],
        )
    )
    sim.step()
    assert [(k, s) for k, _h, s in kinds_for(sim, "m")] == [
        ("load", "delivered"),
        ("warm", "delivered"),
    ]
    settle(sim)
    assert ready(sim, "h1", "m")
    assert [s for _k, _h, s in kinds_for(sim, "m")] == ["succeeded", "succeeded"]
    assert not sim.violations


def test_same_scenario_twice_gives_the_same_history() -> None:
    def run() -> list[tuple[str, str]]:
        sim = FleetSimulator(
            fleet(
                [{"host_id": f"h{i}", "capacity_mb": 12288} for i in range(3)],
                [
                    {"model_id": "a", "memory_mb": 4096, "min_replicas": 1},
                    {"model_id": "b", "memory_mb": 6144, "max_replicas": 2},
                ],
                demand={"b": {"offered_concurrency": 1.4}},
            ),
            config=SimConfig(failure_rate=0.3, seed=7),
        )
        sim.run(15)
        return [(r.action_id, r.status.value) for r in sim.history()]

    first = run()
    assert first == run()
    assert any(status == "failed" for _id, status in first)  # the seeded failures happened


def test_failed_warm_is_cleaned_up_and_retried_after_backoff_under_a_new_id() -> None:
    sim = FleetSimulator(
        fleet(
            [{"host_id": "h1", "capacity_mb": 16384, "cached_models": ["m"]}],
            [{"model_id": "m", "memory_mb": 4096, "min_replicas": 1}],
        )
    )
    sim.fail_next(kind=ActionKind.WARM, host_id="h1")
    sim.step()
    sim.step()
    assert sim.hosts["h1"].residencies["m"].state is ResidencyState.FAILED
    settle(sim)
    assert ready(sim, "h1", "m")
    warms = [r for r in sim.history() if r.kind is ActionKind.WARM]
    assert [r.status for r in warms] == [RecordStatus.FAILED, RecordStatus.SUCCEEDED]
    assert warms[0].action_id != warms[1].action_id
    failed_at = warms[0].finished_at
    assert failed_at is not None and warms[1].created_at >= failed_at + 5.0  # after backoff
    assert any(r.kind is ActionKind.UNLOAD for r in sim.history())  # the failed process went
    assert not sim.violations


def test_replica_on_a_paused_host_is_replaced_before_anything_else_changes() -> None:
    snap = fleet(
        [
            {
                "host_id": "h1",
                "capacity_mb": 8192,
                "residencies": [
                    {"model_id": "m", "memory_mb": 4096, "state": "ready", "loaded_at": START - 600}
                ],
            },
            {"host_id": "h2", "capacity_mb": 8192, "cached_models": ["m"]},
        ],
        [{"model_id": "m", "memory_mb": 4096, "min_replicas": 1}],
    )
    sim = FleetSimulator(snap)
    sim.pause_host("h1")
    settle(sim)
    assert ready(sim, "h2", "m")
    assert "m" not in sim.hosts["h1"].residencies  # drained and unloaded from the paused host
    assert not sim.violations


def test_outage_makes_the_host_stale_and_interrupted_work_fails_on_restore() -> None:
    snap = fleet(
        [{"host_id": "h1", "capacity_mb": 8192}, {"host_id": "h2", "capacity_mb": 8192}],
        [{"model_id": "m", "memory_mb": 4096, "min_replicas": 1}],
    )
    sim = FleetSimulator(snap)
    first = sim.step()
    (load,) = [a for a in first.result.actions if a.kind is ActionKind.LOAD]
    sim.outage(load.host_id)
    sim.run(8)  # the heartbeat goes stale: the model is placed on the other host
    other = "h2" if load.host_id == "h1" else "h1"
    assert ready(sim, other, "m")
    assert sim.records[load.action_id].status is RecordStatus.DELIVERED  # no receipt yet
    sim.restore(load.host_id)
    assert sim.records[load.action_id].status is RecordStatus.FAILED
    settle(sim)
    assert not sim.violations


def test_retired_profile_drains_a_host_that_returns_after_the_removal() -> None:
    snap = fleet(
        [
            {
                "host_id": "h1",
                "capacity_mb": 8192,
                "residencies": [
                    {
                        "model_id": "old",
                        "memory_mb": 2048,
                        "state": "ready",
                        "loaded_at": START - 600,
                    }
                ],
            },
            {"host_id": "h2", "capacity_mb": 8192},
        ],
        [
            {"model_id": "old", "memory_mb": 2048, "min_replicas": 1},
            {"model_id": "m", "memory_mb": 2048, "min_replicas": 1},
        ],
    )
    sim = FleetSimulator(snap)
    sim.outage("h1")
    sim.remove_profile("old")
    sim.run(6)
    assert sim.hosts["h1"].residencies["old"].state is ResidencyState.READY  # still away
    sim.restore("h1")
    settle(sim)
    assert "old" not in sim.hosts["h1"].residencies
    assert [k for k, _h, s in kinds_for(sim, "old") if s == "succeeded"] == ["drain", "unload"]
    assert not sim.violations


def test_staged_preemption_frees_memory_before_the_beneficiary_warms() -> None:
    snap = fleet(
        [
            {
                "host_id": "h1",
                "capacity_mb": 10000,
                "residencies": [
                    {
                        "model_id": "batch",
                        "memory_mb": 8000,
                        "state": "ready",
                        "loaded_at": START - 600,
                        "last_used_at": START - 600,
                        "active_requests": 2,
                    }
                ],
            }
        ],
        [
            {"model_id": "batch", "memory_mb": 8000, "priority": 1},
            {
                "model_id": "vip",
                "memory_mb": 8000,
                "priority": 90,
                "min_replicas": 1,
                "artifact_sha256": "e" * 64,
                "artifact_size_mb": 500,
                "artifact_source": "hf://grid/vip.gguf",
            },
        ],
        demand={"batch": {"offered_concurrency": 2.0}},
    )
    sim = FleetSimulator(snap, config=SimConfig(requests_finished_per_tick=1))
    settle(sim)
    assert ready(sim, "h1", "vip") and "batch" not in sim.hosts["h1"].residencies
    history = sorted(sim.history(), key=lambda r: r.created_at)
    done = sorted(
        (r for r in history if r.status is RecordStatus.SUCCEEDED),
        key=lambda r: r.finished_at or 0.0,
    )
    order = [(r.kind.value, r.model_id) for r in done]
    assert order.index(("load", "vip")) < order.index(("drain", "batch"))
    assert order.index(("unload", "batch")) < order.index(("warm", "vip"))
    prefetch = next(r for r in history if r.kind is ActionKind.LOAD and r.model_id == "vip")
    assert prefetch.memory_mb == 0 and prefetch.preemption
    unload = next(r for r in history if r.kind is ActionKind.UNLOAD)
    drain = next(r for r in history if r.kind is ActionKind.DRAIN)
    assert unload.created_at > drain.created_at  # waited for in-flight requests to finish
    assert not sim.violations


def test_delivered_warm_keeps_its_memory_when_the_plan_changes_its_mind() -> None:
    # h1 is busy with a long load of "c" when a warm of "a" queues behind it. The plan then
    # swaps "a" for "b": the delivered warm of "a" still runs, so "b" must wait for the memory.
    snap = fleet(
        [{"host_id": "h1", "capacity_mb": 10000, "cached_models": ["a", "b"]}],
        [
            {"model_id": "a", "memory_mb": 6000},
            {"model_id": "b", "memory_mb": 6000},
            {"model_id": "c", "memory_mb": 2000, "priority": 9, "min_replicas": 1},
        ],
        demand={"a": {"desired_replicas": 1}},
        policy={"max_host_mutations": 4},
    )
    sim = FleetSimulator(snap, config=SimConfig(durations=Durations(load_s=30.0)))
    sim.step()
    running = sim.hosts["h1"].running
    queued = [(a.kind, a.model_id) for a in sim.hosts["h1"].queue]
    assert running is not None and running.action.model_id == "c"
    assert (ActionKind.WARM, "a") in queued
    sim.set_demand("a", DemandEntry(desired_replicas=0))
    sim.set_demand("b", DemandEntry(desired_replicas=1))
    report = sim.step()
    deferral = report.result.deferral(ActionKind.WARM, "h1", "b")
    assert deferral is not None and deferral.code == "insufficient_memory"
    settle(sim, 60)
    assert ready(sim, "h1", "b") and ready(sim, "h1", "c")
    assert not sim.violations


def test_unknown_activity_blocks_unload_until_reported() -> None:
    snap = fleet(
        [
            {
                "host_id": "h1",
                "capacity_mb": 8192,
                "residencies": [
                    {
                        "model_id": "m",
                        "memory_mb": 2048,
                        "state": "draining",
                        "active_requests": None,
                    }
                ],
            }
        ],
        [{"model_id": "m", "memory_mb": 2048}],
    )
    sim = FleetSimulator(snap)
    report = sim.run(3)[-1]
    deferral = report.result.deferral(ActionKind.UNLOAD, "h1", "m")
    assert deferral is not None and deferral.code == "activity_unknown"
    sim.set_activity_unknown("h1", "m", False)
    settle(sim)
    assert "m" not in sim.hosts["h1"].residencies
    assert not sim.violations


def test_external_residency_is_never_touched() -> None:
    snap = fleet(
        [
            {
                "host_id": "h1",
                "capacity_mb": 8192,
                "residencies": [
                    {"model_id": "ext", "memory_mb": 2048, "state": "ready", "managed": False}
                ],
            }
        ],
        [{"model_id": "m", "memory_mb": 2048, "min_replicas": 1}],
    )
    sim = FleetSimulator(snap)
    settle(sim)
    assert all(r.model_id != "ext" for r in sim.history())
    assert sim.hosts["h1"].residencies["ext"].state is ResidencyState.READY


def _one_replica_and_a_spare() -> FleetSnapshot:
    return fleet(
        [
            {
                "host_id": "h1",
                "capacity_mb": 8192,
                "residencies": [
                    {"model_id": "m", "memory_mb": 4096, "state": "ready", "loaded_at": START - 600}
                ],
            },
            {"host_id": "h2", "capacity_mb": 8192},  # uncached: load, then warm
        ],
        [{"model_id": "m", "memory_mb": 4096, "min_replicas": 1}],
    )


def _first(sim: FleetSimulator, kind: ActionKind, host_id: str) -> Any:
    return next(
        r
        for r in sorted(sim.history(), key=lambda r: r.created_at)
        if r.kind is kind and r.host_id == host_id and r.model_id == "m"
    )


@pytest.mark.parametrize("state", [HostState.DRAINING, HostState.PAUSED])
def test_draining_host_hands_its_last_replica_over_make_before_break(state: HostState) -> None:
    # Regression (issue 8, defect 3): local protection drains h1, which holds the only replica.
    sim = FleetSimulator(_one_replica_and_a_spare())
    sim.step()
    sim.set_host_state("h1", state)
    settle(sim)
    assert ready(sim, "h2", "m") and "m" not in sim.hosts["h1"].residencies
    warm = _first(sim, ActionKind.WARM, "h2")
    drain = _first(sim, ActionKind.DRAIN, "h1")
    assert warm.status is RecordStatus.SUCCEEDED and warm.finished_at is not None
    assert drain.created_at >= warm.finished_at  # proven READY before the drain was even issued
    assert not sim.violations, sim.story()


def test_replacement_without_a_route_keeps_the_old_replica_serving() -> None:
    # Invariant 4 in the simulator: h2's child is READY but its route is gone.
    sim = FleetSimulator(_one_replica_and_a_spare())
    sim.step()
    sim.set_host_state("h1", HostState.DRAINING)
    for _ in range(3):
        sim.step()
    sim.drop_route("h2", "m")
    for _ in range(8):
        sim.step()
    assert ready(sim, "h2", "m") and ready(sim, "h1", "m")
    assert not any(r.kind is ActionKind.DRAIN for r in sim.history())
    sim.drop_route("h2", "m", dropped=False)
    settle(sim)
    assert "m" not in sim.hosts["h1"].residencies
    assert not sim.violations, sim.story()


def test_backoff_oracle_follows_the_hand_computed_schedule() -> None:
    # POLICY: base 5 s, cap 20 s -> after 1, 2, 3, 4 consecutive failures: 5, 10, 20, 20 s.
    from grid.fleet.actions import ActionRecord
    from grid.fleet.models import Policy
    from grid.lab.sim_checks import earliest_retry

    policy = Policy(retry_backoff_base_s=5.0, retry_backoff_cap_s=20.0)
    key = (ActionKind.WARM, "h1", "m")

    def rec(attempt: int, status: str, finished: float) -> ActionRecord:
        return ActionRecord(
            action_id=f"warm-{attempt}",
            kind=ActionKind.WARM,
            host_id="h1",
            model_id="m",
            status=RecordStatus(status),
            attempt=attempt,
            created_at=finished - 1,
            finished_at=finished,
        )

    failures = [rec(i, "failed", 100.0 * i) for i in range(1, 5)]
    expected = [100.0 + 5, 200.0 + 10, 300.0 + 20, 400.0 + 20]
    assert [earliest_retry(failures[:n], key, policy) for n in range(1, 5)] == expected
    assert earliest_retry([*failures, rec(5, "succeeded", 500.0)], key, policy) is None
    after_success = [*failures, rec(5, "succeeded", 500.0), rec(6, "failed", 600.0)]
    assert earliest_retry(after_success, key, policy) == 605.0  # the streak restarts
    other_key = (ActionKind.LOAD, "h1", "m")
    assert earliest_retry(failures, other_key, policy) is None  # per kind, host and model


def test_repeated_warm_failures_retry_on_the_spec_schedule() -> None:
    sim = FleetSimulator(
        fleet(
            [{"host_id": "h1", "capacity_mb": 16384, "cached_models": ["m"]}],
            [{"model_id": "m", "memory_mb": 4096, "min_replicas": 1}],
        )
    )
    sim.fail_next(kind=ActionKind.WARM, host_id="h1", times=4)
    settle(sim, ticks=60)
    warms = sorted(
        (r for r in sim.history() if r.kind is ActionKind.WARM), key=lambda r: r.created_at
    )
    assert [r.status for r in warms] == [RecordStatus.FAILED] * 4 + [RecordStatus.SUCCEEDED]
    gaps = [b.created_at - a.finished_at for a, b in pairwise(warms) if a.finished_at is not None]
    # Base 5 s, cap 20 s; a retry is issued on the first 5 s tick at or after its time.
    for gap, wait in zip(gaps, [5.0, 10.0, 20.0, 20.0], strict=True):
        assert wait <= gap < wait + 5.0
    assert not sim.violations
