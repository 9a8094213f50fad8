"""A real controller, node agent processes and real llama-server children with real weights."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest

from grid.node.agent.config import CatalogEntry
from grid.node.engines.proc import is_alive
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import chat, completion_text, host_row, kinds, wait_for
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.engine

MIB = 1024 * 1024


def _baseline(entry: CatalogEntry, **extra: object) -> dict[str, object]:
    return {
        "memory_mb": 256,
        "min_replicas": 1,
        "max_replicas": 1,
        "artifact_sha256": entry.sha256,
        "min_residency_s": 0,
        "scale_down_cooldown_s": 0,
        **extra,
    }


def _state(server: ControllerProcess, host_id: str, model_id: str) -> str | None:
    with server.admin() as admin:
        row = host_row(admin.status(history=0).model_dump(mode="json"), host_id, model_id)
    return row["state"] if row else None


def _proc_text(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def test_demand_loads_and_warms_gemma_serves_then_drains_and_unloads(
    controller: ControllerProcess, make_node: NodeFactory, gemma_entry: CatalogEntry
) -> None:
    # The node has no file for gemma: the LOAD must fetch it from the profile's exact source.
    node = make_node("host-a", [])
    node.start()
    model = gemma_entry.model_id
    size_mb = math.ceil(Path(gemma_entry.path).stat().st_size / MIB)
    with controller.admin() as admin:
        admin.put_model(
            model,
            {
                "memory_mb": 512,
                "min_replicas": 0,
                "max_replicas": 1,
                "artifact_sha256": gemma_entry.sha256,
                "artifact_source": f"file://{gemma_entry.path}",
                "artifact_size_mb": size_mb,
                "min_residency_s": 0,
                "scale_down_cooldown_s": 0,
            },
        )
        admin.set_mode("automatic")
        admin.tick()
        assert (
            admin.status(history=0).model_dump(mode="json")["plan"]["assignments"] == []
        )  # no demand, no replica

        def demanded_and_ready() -> bool:
            now = time.time()
            admin.observe([{"model_id": model, "timestamp": now, "service_time_s": 1.0}])
            row = host_row(admin.status(history=0).model_dump(mode="json"), "host-a", model)
            return row is not None and row["state"] == "ready"

        wait_for(demanded_and_ready, 120, "gemma ready under demand", step_s=0.3)
        residency = node.ready_residency(model)
        port, pid = residency["port"], residency["pid"]
        key = node.engine_key()
        reply = chat(port, key, model)
        assert reply.status_code == 200, reply.text
        assert completion_text(reply).strip()  # a real answer from the real child
        assert chat(port, None, model).status_code == 401  # the key fences direct use
        for holder in (pid, node.agent_pid()):
            assert holder is not None
            assert key.encode() not in _proc_text(holder, "cmdline")
            assert key.encode() not in _proc_text(holder, "environ")

        # No more requests: demand expires, the replica is drained, then unloaded.
        wait_for(
            lambda: _state(controller, "host-a", model) == "cached",
            90,
            "gemma drained and unloaded",
        )
        history = admin.status().model_dump(mode="json")["history"]
    assert not is_alive(pid)
    done = kinds(history)
    assert done == [
        ("load", "succeeded"),
        ("warm", "succeeded"),
        ("drain", "succeeded"),
        ("unload", "succeeded"),
    ]
    receipts = {r["kind"]: r for r in node.status()["receipts"]}
    assert receipts["load"]["artifact_fetched"] is True
    assert receipts["warm"]["artifact_fetched"] is False
    assert receipts["warm"]["duration_seconds"] > 0


def test_a_killed_child_is_detected_and_recovered(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    node = make_node("host-a", [smollm2_entry])
    node.start()
    model = smollm2_entry.model_id
    with controller.admin() as admin:
        admin.put_model(model, _baseline(smollm2_entry))
        admin.set_mode("automatic")
    wait_for(lambda: _state(controller, "host-a", model) == "ready", 60, "first replica")
    first = node.ready_residency(model)
    os.kill(first["pid"], signal.SIGKILL)

    def replaced() -> bool:
        now = node.residency(model)
        return (
            now is not None
            and now["state"] == "ready"
            and now["pid"] not in (None, first["pid"])
            and _state(controller, "host-a", model) == "ready"
        )

    wait_for(replaced, 60, "a replacement child")
    second = node.residency(model)
    assert second is not None
    reply = chat(second["port"], node.engine_key(), model)
    assert reply.status_code == 200 and completion_text(reply).strip()
    with controller.admin() as admin:
        done = kinds(admin.status().model_dump(mode="json")["history"])
    # The crash was reported FAILED, the dead residency was released, and a new warm ran.
    assert done.count(("warm", "succeeded")) == 2
    assert ("unload", "succeeded") in done
    assert done.index(("unload", "succeeded")) < len(done) - 1


def test_a_restarted_agent_adopts_the_exact_live_child_and_can_retire_it(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    node = make_node("host-a", [smollm2_entry])
    first_agent = node.start()
    model = smollm2_entry.model_id
    with controller.admin() as admin:
        admin.put_model(model, _baseline(smollm2_entry))
        admin.set_mode("automatic")
    wait_for(lambda: _state(controller, "host-a", model) == "ready", 60, "replica ready")
    residency = node.ready_residency(model)
    child = residency["pid"]

    os.kill(first_agent, signal.SIGKILL)  # no shutdown code runs
    wait_for(lambda: not is_alive(first_agent), 10, "the agent to die")
    assert is_alive(child)  # the child outlives its agent

    second_agent = node.start()
    assert second_agent != first_agent

    def adopted() -> bool:
        now = node.residency(model)
        return now is not None and now["pid"] == child and now["engine"] == "ready"

    wait_for(adopted, 30, "the restarted agent to adopt the child")
    reply = chat(residency["port"], node.engine_key(), model)
    assert reply.status_code == 200 and completion_text(reply).strip()

    with controller.admin() as admin:
        admin.delete_model(model)  # retire: the adopted child must drain and unload
    wait_for(lambda: _state(controller, "host-a", model) == "cached", 60, "retirement")
    assert not is_alive(child)
    with controller.admin() as admin:
        done = kinds(admin.status().model_dump(mode="json")["history"])
    assert done.count(("warm", "succeeded")) == 1  # adopted, never started twice
    assert ("drain", "succeeded") in done and ("unload", "succeeded") in done
