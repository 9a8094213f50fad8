"""Helpers for node agent tests: commands as a controller issues them, and fakes of the outside
things the agent talks to (the controller's HTTP API, the machine's sensors)."""

from __future__ import annotations

import hashlib
import itertools
import threading
from pathlib import Path
from typing import Any

from grid.fleet.errors import GridError
from grid.fleet.wire import AckAnswer, NodeReply, NodeUpdate, ReplyAllocator, wire_json
from grid.node.agent.config import CatalogEntry, NodeConfig
from grid.node.agent.loop import AgentDeps, NodeAgent
from grid.node.artifacts import ArtifactStore
from grid.node.protection import LocalOverride, ProtectionPolicy, Telemetry
from tests.support.fake_engine import FakeEngineSupervisor

HOST = "host-a"
EPOCH = "e1"
_ids = itertools.count(1)


def command(
    kind: str,
    model_id: str = "m1",
    *,
    host_id: str = HOST,
    term: int = 1,
    controller_id: str = "ctl-1",
    sequence: int = 1,
    epoch: str = EPOCH,
    memory_mb: int = 512,
    dependencies: list[str] | None = None,
    executable: bool = True,
    action_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "action_id": action_id or f"{kind}-{next(_ids):04d}",
        "kind": kind,
        "node_id": host_id,
        "host_id": host_id,
        "model_id": model_id,
        "memory_mb": memory_mb,
        "plan_generation": f"{epoch}:{sequence:020d}:abc",
        "controller_term": term,
        "controller_id": controller_id,
        "controller_lease_expires_at": 0.0,
        "dependencies": dependencies or [],
        "executable": executable,
        **extra,
    }


class FakeControllerClient:
    """Stands in for the controller's HTTP API (`AllocatorClient`) in pure agent tests."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.outbox: list[dict[str, Any]] = []  # delivered on the next control heartbeat
        self.ttl_s = 10.0
        self.unreachable = False

    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply:
        if self.unreachable:
            raise GridError("controller_unreachable", "no controller answers")
        body = wire_json(update)  # what would travel: the JSON the agent's models produce
        self.bodies.append(body)
        commands: list[dict[str, Any]] = []
        if body["request_commands"]:
            commands, self.outbox = self.outbox, []
        return NodeReply(
            node_id=node_id,
            ttl_seconds=60,
            model_last_used_at={},
            acknowledgements=[
                AckAnswer(action_id=a["action_id"], result="applied")
                for a in body["acknowledgements"]
            ],
            allocator=ReplyAllocator(
                mode="automatic", controller_lease_ttl_seconds=self.ttl_s, commands=commands
            ),
        )

    def close(self) -> None:
        pass

    # -- reading what the agent sent ---------------------------------------------------------
    def acks(self) -> dict[str, dict[str, Any]]:
        return {a["action_id"]: a for body in self.bodies for a in body["acknowledgements"]}

    def last_residency(self, model_id: str) -> dict[str, Any] | None:
        rows = self.bodies[-1]["allocator"]["residencies"]
        return next((r for r in rows if r["model_id"] == model_id), None)


class FakeTelemetry:
    """Stands in for the machine's sensors: a fixed sample, changed by the test."""

    def __init__(self, **readings: Any) -> None:
        self.readings: dict[str, Any] = {"user_active": False, "memory_percent": 10.0}
        self.readings.update(readings)

    def read(self, override: LocalOverride | None) -> Telemetry:
        return Telemetry(**self.readings, override=override)


def gguf(
    folder: Path, name: str = "m1.gguf", payload: bytes = b"GGUF fake weights"
) -> tuple[Path, str]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(payload)
    return path, hashlib.sha256(payload).hexdigest()


def node_config(tmp_path: Path, **overrides: Any) -> NodeConfig:
    path, digest = gguf(tmp_path / "weights")
    settings: dict[str, Any] = {
        "grid_url": "http://127.0.0.1:9",
        "host_id": HOST,
        "capacity_mb": 8192,
        "external_memory": "none",
        "catalog": [CatalogEntry(model_id="m1", path=str(path), sha256=digest)],
        "heartbeat_interval_s": 0.05,
        "drain_timeout_s": 0.0,
    }
    settings.update(overrides)
    return NodeConfig(**settings)


def make_agent(
    tmp_path: Path,
    *,
    config: NodeConfig | None = None,
    supervisor: FakeEngineSupervisor | None = None,
    client: FakeControllerClient | None = None,
    telemetry: FakeTelemetry | None = None,
    clock: Any = None,
) -> NodeAgent:
    cfg = config or node_config(tmp_path)
    deps = AgentDeps(
        supervisor=supervisor or FakeEngineSupervisor(),
        artifacts=ArtifactStore(tmp_path / "state" / "artifacts"),
        telemetry=telemetry or FakeTelemetry(),
        client=client or FakeControllerClient(),  # type: ignore[arg-type]
    )
    kwargs: dict[str, Any] = {"policy": ProtectionPolicy(debounce_samples=1)}
    if clock is not None:
        kwargs["clock"] = clock
    return NodeAgent(cfg, tmp_path / "state", deps, **kwargs)


class BlockingFakeSupervisor(FakeEngineSupervisor):
    """A fake engine whose warm blocks until the test releases it (a slow model start)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def warm(
        self, model_id: str, model_path: Path, *, chat_template: str | None = None, spec: Any = None
    ) -> Any:
        self.entered.set()
        self.release.wait(30)
        return super().warm(model_id, model_path, chat_template=chat_template, spec=spec)
