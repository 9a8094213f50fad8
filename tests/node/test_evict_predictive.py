"""A real evict of a real download on a node agent: the SmolLM2 GGUF (the PyPI package's file)
served by a local HTTP mirror, fetched by a predictive load through the real artifact store
(real transfer, real SHA-256 check), reported with its provenance in the heartbeat, and deleted
by an exact-SHA evict; refusals with a code delete nothing. The warm in the last test runs a
real llama-server child."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grid.node.agent.loop import AgentDeps, NodeAgent
from grid.node.artifacts import SMOLLM2_SHA256, ArtifactStore, sha256_file
from grid.node.protection import ProtectionPolicy
from tests.node.agent_helpers import FakeControllerClient, FakeTelemetry, command, node_config
from tests.node.artifact_server import FakeMirror, MirrorServer
from tests.support.fake_engine import FakeEngineSupervisor

pytestmark = pytest.mark.service

MODEL = "smollm2-135m"
HF_SOURCE = "hf://HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf"
URL_PATH = "/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"
MIB = 1024 * 1024


class Node:
    def __init__(self, tmp_path: Path, base_url: str, supervisor: Any) -> None:
        self.client = FakeControllerClient()
        self.store = ArtifactStore(tmp_path / "cache", hf_base_url=base_url)
        deps = AgentDeps(
            supervisor=supervisor,
            artifacts=self.store,
            telemetry=FakeTelemetry(),
            client=self.client,  # type: ignore[arg-type]
        )
        config = node_config(tmp_path, capacity_mb=4096, drain_timeout_s=5.0)
        self.agent = NodeAgent(
            config, tmp_path / "state", deps, policy=ProtectionPolicy(debounce_samples=1)
        )
        self.agent.start_worker()

    def deliver(self, *commands: dict[str, Any]) -> dict[str, dict[str, Any]]:
        self.client.outbox = list(commands)
        self.agent.cycle()
        assert self.agent.wait_idle(120.0)
        self.agent.cycle()
        return self.client.acks()

    def allocator(self) -> dict[str, Any]:
        self.agent.cycle()
        doc: dict[str, Any] = self.client.bodies[-1]["allocator"]
        return doc

    def stop(self) -> None:
        self.agent.worker.stop()
        self.store.close()


@pytest.fixture
def mirror(smollm2: Path) -> Iterator[tuple[FakeMirror, str]]:
    fake = FakeMirror(files={URL_PATH: smollm2})
    with MirrorServer(fake) as server:
        yield fake, server.base_url


@pytest.fixture
def node(tmp_path: Path, mirror: tuple[FakeMirror, str]) -> Iterator[Node]:
    made = Node(tmp_path, mirror[1], FakeEngineSupervisor())
    try:
        yield made
    finally:
        made.stop()


def artifact(smollm2: Path, **extra: Any) -> dict[str, Any]:
    return {
        "artifact_source": HF_SOURCE,
        "artifact_sha256": SMOLLM2_SHA256,
        "artifact_size_mb": math.ceil(smollm2.stat().st_size / MIB) + 1,
        **extra,
    }


def load(smollm2: Path, *, predictive: bool) -> dict[str, Any]:
    return command("load", MODEL, memory_mb=0, predictive=predictive, **artifact(smollm2))


def evict(sha: str | None, model_id: str = MODEL) -> dict[str, Any]:
    fields: dict[str, Any] = {"memory_mb": 0}
    if sha is not None:
        fields["artifact_sha256"] = sha
    return command("evict", model_id, **fields)


def published(node: Node) -> Path:
    files = list((node.store.cache_dir / "models").rglob("*.gguf"))
    assert len(files) <= 1
    return files[0] if files else Path("/nonexistent")


def test_a_predictive_download_is_reported_and_a_real_evict_deletes_exactly_it(
    node: Node, mirror: tuple[FakeMirror, str], smollm2: Path
) -> None:
    fake, _ = mirror
    first = load(smollm2, predictive=True)
    ack = node.deliver(first)[first["action_id"]]
    assert ack["status"] == "succeeded" and ack["artifact_fetched"] is True
    assert fake.body_bytes_sent == smollm2.stat().st_size  # a real transfer
    path = published(node)
    assert sha256_file(path) == SMOLLM2_SHA256  # checked independently of the store
    envelope = node.allocator()
    assert "evict" in envelope["actuator_capabilities"]
    (row,) = envelope["predictive_cache"]
    assert row["model_id"] == MODEL and row["sha256"] == SMOLLM2_SHA256
    assert row["size_mb"] == math.ceil(path.stat().st_size / MIB) and row["warmed"] is False
    assert MODEL in envelope["cached_models"]
    assert all(
        r["state"] == "cached" and r["memory_mb"] == 0
        for r in envelope["residencies"]
        if r["model_id"] == MODEL
    )

    # Refused with a code, nothing deleted: another SHA, no SHA, a model the node never fetched.
    other = hashlib.sha256(b"another revision").hexdigest()
    for cmd, code in (
        (evict(other), "evict_not_held"),
        (evict(None), "evict_sha_missing"),
        (evict(SMOLLM2_SHA256, "m1"), "evict_not_held"),
    ):
        refused = node.deliver(cmd)[cmd["action_id"]]
        assert refused["status"] == "failed" and refused["message"].startswith(code)
        assert sha256_file(path) == SMOLLM2_SHA256

    size = path.stat().st_size
    done = evict(SMOLLM2_SHA256)
    ack = node.deliver(done)[done["action_id"]]
    assert ack["status"] == "succeeded" and f"{size} bytes reclaimed" in ack["message"]
    assert not path.exists()
    after = node.allocator()
    assert after.get("predictive_cache", []) == []
    assert MODEL not in after["cached_models"]
    assert all(r["model_id"] != MODEL for r in after["residencies"])
    # ... and evicting it again is refused: the node no longer holds it
    again = evict(SMOLLM2_SHA256)
    assert node.deliver(again)[again["action_id"]]["message"].startswith("evict_not_held")


def test_a_demanded_download_and_an_operator_file_have_no_predictive_provenance(
    tmp_path: Path, node: Node, smollm2: Path
) -> None:
    demanded = load(smollm2, predictive=False)
    assert node.deliver(demanded)[demanded["action_id"]]["artifact_fetched"] is True
    assert node.allocator().get("predictive_cache", []) == []
    path = published(node)
    cmd = evict(SMOLLM2_SHA256)
    assert node.deliver(cmd)[cmd["action_id"]]["message"].startswith("evict_not_held")
    assert sha256_file(path) == SMOLLM2_SHA256
    # A predictive load of an artifact already on disk downloads nothing: still no provenance.
    again = load(smollm2, predictive=True)
    ack = node.deliver(again)[again["action_id"]]
    assert ack["status"] == "succeeded" and ack["artifact_fetched"] is False
    assert node.allocator().get("predictive_cache", []) == []
    # The catalog's own file (m1, the operator's) is never a predictive entry either.
    catalog = evict(hashlib.sha256(b"GGUF fake weights").hexdigest(), "m1")
    assert node.deliver(catalog)[catalog["action_id"]]["message"].startswith("evict_not_held")
    assert (tmp_path / "weights" / "m1.gguf").exists()


@pytest.mark.engine
def test_a_warmed_download_is_never_evicted(
    tmp_path: Path, mirror: tuple[FakeMirror, str], smollm2: Path, make_supervisor: Any
) -> None:
    node = Node(tmp_path, mirror[1], make_supervisor())
    try:
        first = load(smollm2, predictive=True)
        node.deliver(first)
        path = published(node)
        warm = command("warm", MODEL, memory_mb=400, **artifact(smollm2))
        assert node.deliver(warm)[warm["action_id"]]["status"] == "succeeded"
        (row,) = node.allocator()["predictive_cache"]
        assert row["warmed"] is True  # ever warmed: a used download
        live = evict(SMOLLM2_SHA256)
        assert node.deliver(live)[live["action_id"]]["message"].startswith("evict_active")
        drain = command("drain", MODEL, memory_mb=0)
        unload = command("unload", MODEL, memory_mb=0)
        node.deliver(drain)
        assert node.deliver(unload)[unload["action_id"]]["status"] == "succeeded"
        used = evict(SMOLLM2_SHA256)
        assert node.deliver(used)[used["action_id"]]["message"].startswith("evict_used")
        assert sha256_file(path) == SMOLLM2_SHA256
    finally:
        node.stop()
