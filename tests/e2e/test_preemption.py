"""Preemption on real processes: a high-priority burst displaces a low-priority model everywhere.

Two logical nodes whose capacity shares hold one model each (SmolLM2 256 MB or gemma 512 MB, not
both). SmolLM2 (priority 0) has demand for a replica on every node; then a high-priority burst
for gemma asks for both nodes. The incumbents must really be drained and unloaded (their
processes gone) before gemma warms on the released memory and answers; once the burst expires,
SmolLM2 warms back onto both nodes and answers again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from grid.node.agent.config import CatalogEntry
from grid.node.engines.proc import is_alive
from grid.wire import AllocatorClient
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import EngineNode, chat, completion_text, dump, host_row, wait_for
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.engine

HOSTS = ("host-a", "host-b")
# 640 MB holds gemma (512 MB + 5% admission headroom) or SmolLM2, never both (768 MB).
SHARE_MB = 640


def _profile(entry: CatalogEntry, memory_mb: int, priority: int) -> dict[str, Any]:
    return {
        "memory_mb": memory_mb,
        "priority": priority,
        "min_replicas": 0,
        "max_replicas": len(HOSTS),
        "artifact_sha256": entry.sha256,
        "min_residency_s": 0,
        "scale_down_cooldown_s": 0,
    }


def _demand(admin: AllocatorClient, models: list[str]) -> None:
    # One second of service per 0.5 s over the last 2.5 s, for every model, at every poll: far
    # more than one replica can carry in each demand bucket, so the forecast asks for
    # max_replicas (one per node) from the first poll on and never dips between polls (a dip to
    # one replica would hand a drained victim's host back to SmolLM2 mid-burst).
    now = time.time()
    admin.observe(
        [
            {"model_id": m, "timestamp": now - 0.5 * k, "service_time_s": 1.0}
            for m in models
            for k in range(6)
        ]
    )


def _states(admin: AllocatorClient, model_id: str) -> dict[str, str | None]:
    status = admin.status(history=0).model_dump(mode="json")
    rows = {h: host_row(status, h, model_id) for h in HOSTS}
    return {h: row["state"] if row else None for h, row in rows.items()}


def _until(
    admin: AllocatorClient, demanded: list[str], done: Callable[[], bool], what: str
) -> None:
    def step() -> bool:
        _demand(admin, demanded)
        return done()

    wait_for(step, 90, what, step_s=0.3)


def _serves(node: EngineNode, model_id: str) -> int:
    residency = node.ready_residency(model_id)
    reply = chat(residency["port"], node.engine_key(), model_id)
    assert reply.status_code == 200, reply.text
    assert completion_text(reply).strip()  # a real answer from the real child
    pid: int = residency["pid"]
    return pid


def _assert_staged(history: list[dict[str, Any]], host_id: str, low: str, high: str) -> None:
    """Staged preemption on `host_id`: the victim drained and unloaded (both planner-authorized,
    not cleanup), and only then was the beneficiary warmed."""
    record = {
        (r["kind"], r["model_id"]): r
        for r in history
        if r["host_id"] == host_id and r["status"] == "succeeded"
    }
    drain, unload = record.get(("drain", low)), record.get(("unload", low))
    warm = record.get(("warm", high))
    assert drain and unload and warm, dump(history)
    assert drain["preemption"] and unload["preemption"], dump(history)
    assert drain["finished_at"] <= unload["delivered_at"]
    assert unload["finished_at"] <= warm["delivered_at"]


def test_a_high_priority_burst_preempts_everywhere_and_the_displaced_model_returns(
    controller: ControllerProcess,
    make_node: NodeFactory,
    smollm2_entry: CatalogEntry,
    gemma_entry: CatalogEntry,
) -> None:
    low, high = smollm2_entry.model_id, gemma_entry.model_id
    nodes = {h: make_node(h, [smollm2_entry, gemma_entry], capacity_mb=SHARE_MB) for h in HOSTS}
    for node in nodes.values():
        node.start()
    with controller.admin() as admin:
        admin.put_model(low, _profile(smollm2_entry, 256, priority=0))
        admin.put_model(high, _profile(gemma_entry, 512, priority=10))
        admin.set_mode("automatic")

        def everywhere(model_id: str, state: str) -> Callable[[], bool]:
            return lambda: set(_states(admin, model_id).values()) == {state}

        _until(admin, [low], everywhere(low, "ready"), "SmolLM2 ready on both nodes")
        incumbents = {h: _serves(n, low) for h, n in nodes.items()}

        # The burst: gemma is demanded too, and outranks SmolLM2 on every node.
        _until(admin, [low, high], everywhere(high, "ready"), "gemma ready on both nodes")
        assert all(not is_alive(pid) for pid in incumbents.values())
        assert set(_states(admin, low).values()) <= {"cached", None}
        for node in nodes.values():
            _serves(node, high)
        burst = admin.status(history=200).model_dump(mode="json")["history"]

        # The burst is retired (no more gemma requests): SmolLM2 warms back everywhere.
        _until(admin, [low], everywhere(low, "ready"), "SmolLM2 back on both nodes")
        assert set(_states(admin, high).values()) <= {"cached", None}
        returned = {h: _serves(n, low) for h, n in nodes.items()}
        final = admin.status(history=200).model_dump(mode="json")["history"]

    assert set(returned.values()).isdisjoint(incumbents.values())  # new children, not survivors
    for host_id in HOSTS:
        _assert_staged(burst, host_id, low, high)
        back = [
            r
            for r in final
            if r["host_id"] == host_id
            and r["model_id"] == low
            and r["kind"] == "warm"
            and r["status"] == "succeeded"
        ]
        assert len(back) == 2, dump(final)  # the first warm and the warm-back


def test_a_higher_class_baseline_preempts_a_lower_class_last_baseline_replica(
    controller: ControllerProcess,
    make_node: NodeFactory,
    smollm2_entry: CatalogEntry,
    gemma_entry: CatalogEntry,
) -> None:
    # Issue 19's livelock on real processes: one node holds one model; SmolLM2 (priority 0,
    # min_replicas 1) serves there, then gemma (priority 10, min_replicas 1) is configured.
    # No demand at all: baselines alone. A lower class's minimum is no fence against a higher
    # class, so SmolLM2 drains and unloads (its child exits) and only then gemma warms.
    low, high = smollm2_entry.model_id, gemma_entry.model_id
    node = make_node("host-a", [smollm2_entry, gemma_entry], capacity_mb=SHARE_MB)
    node.start()
    with controller.admin() as admin:
        admin.put_model(low, {**_profile(smollm2_entry, 256, priority=0), "min_replicas": 1})
        admin.set_mode("automatic")

        def state(model_id: str) -> str | None:
            row = host_row(admin.status(history=0).model_dump(mode="json"), "host-a", model_id)
            return row["state"] if row else None

        wait_for(lambda: state(low) == "ready", 90, "SmolLM2 ready", step_s=0.3)
        incumbent = _serves(node, low)
        admin.put_model(high, {**_profile(gemma_entry, 512, priority=10), "min_replicas": 1})
        wait_for(lambda: state(high) == "ready", 90, "gemma ready after the preemption", step_s=0.3)
        assert not is_alive(incumbent)
        assert state(low) in {"cached", None}
        _serves(node, high)
        history = admin.status(history=200).model_dump(mode="json")["history"]
    _assert_staged(history, "host-a", low, high)
