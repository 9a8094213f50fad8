"""The node agent against a real controller process over HTTP (engines faked)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grid.node.agent.loop import AgentDeps, NodeAgent
from grid.node.agent.state import clear_override, write_override
from grid.node.artifacts import ArtifactStore
from grid.node.protection import LocalOverride, OverrideKind, ProtectionPolicy
from grid.wire import AllocatorClient
from tests.node.agent_helpers import FakeTelemetry, node_config
from tests.service.harness import ControllerProcess, mint, node_client
from tests.support.fake_engine import FakeEngineSupervisor

pytestmark = pytest.mark.service

PROFILE = {"memory_mb": 256, "min_replicas": 1, "max_replicas": 1, "min_residency_s": 0}


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerProcess]:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Node:
    def __init__(self, tmp_path: Path, server: ControllerProcess, host_id: str) -> None:
        self.supervisor = FakeEngineSupervisor()
        self.client = node_client(server.url, mint(server, host_id))
        config = node_config(tmp_path / host_id, host_id=host_id, grid_url=server.url)
        deps = AgentDeps(
            self.supervisor,
            ArtifactStore(tmp_path / host_id / "artifacts"),
            FakeTelemetry(),
            self.client,
        )
        self.agent = NodeAgent(
            config, tmp_path / host_id / "state", deps, policy=ProtectionPolicy(debounce_samples=1)
        )
        self.agent.start_worker()

    def close(self) -> None:
        self.agent.worker.stop()
        self.client.close()


def run_until(
    nodes: list[Node], done: Callable[[], bool], timeout_s: float = 30.0, what: str = ""
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for node in nodes:
            node.agent.cycle()
        if done():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def residency(admin: AllocatorClient, host_id: str, model_id: str) -> dict[str, Any] | None:
    for host in admin.status(history=0).model_dump(mode="json")["hosts"]:
        if host["host_id"] == host_id:
            return next((r for r in host["residencies"] if r["model_id"] == model_id), None)
    return None


def test_a_real_controller_drives_the_agent_through_a_whole_lifecycle(
    tmp_path: Path, controller: ControllerProcess
) -> None:
    node = Node(tmp_path, controller, "host-a")
    try:
        with controller.admin() as admin:
            node.agent.cycle()
            assert (
                admin.status(history=0).model_dump(mode="json")["hosts"][0]["state"] == "accepting"
            )
            admin.put_model("m1", PROFILE)
            admin.set_mode("automatic")

            def ready() -> bool:
                row = residency(admin, "host-a", "m1")
                return row is not None and row["state"] == "ready"

            run_until([node], ready, what="m1 ready")
            history = admin.status().model_dump(mode="json")["history"]
            assert {(r["kind"], r["status"]) for r in history} == {("warm", "succeeded")}
            assert admin.status().model_dump(mode="json")["counters"]["acknowledgements"] == {
                "applied": 1
            }
            assert node.supervisor.calls[0] == ("warm", "m1")

            admin.delete_model("m1")  # retire it: drain, then unload

            def released() -> bool:
                row = residency(admin, "host-a", "m1")
                return row is not None and row["state"] == "cached"

            run_until([node], released, what="m1 unloaded")
            kinds = [
                (r["kind"], r["status"]) for r in admin.status().model_dump(mode="json")["history"]
            ]
            assert ("drain", "succeeded") in kinds and ("unload", "succeeded") in kinds
            assert kinds.index(("drain", "succeeded")) < kinds.index(("unload", "succeeded"))
            assert ("signal", "m1", "SIGTERM") in node.supervisor.calls
    finally:
        node.close()


def test_a_local_override_fences_the_host_until_resumed(
    tmp_path: Path, controller: ControllerProcess
) -> None:
    node = Node(tmp_path, controller, "host-a")
    try:
        write_override(node.agent.state_dir, LocalOverride(kind=OverrideKind.PAUSE, reason="x"))
        with controller.admin() as admin:
            admin.put_model("m1", PROFILE)
            admin.set_mode("automatic")
            for _ in range(5):
                node.agent.cycle()
            status = admin.status(history=0).model_dump(mode="json")
            assert status["hosts"][0]["state"] == "paused"
            assert status["plan"]["assignments"] == []
            assert node.supervisor.calls == []
            clear_override(node.agent.state_dir)

            def ready() -> bool:
                row = residency(admin, "host-a", "m1")
                return row is not None and row["state"] == "ready"

            run_until([node], ready, what="m1 ready after resume")
    finally:
        node.close()
