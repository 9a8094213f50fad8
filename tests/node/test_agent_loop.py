"""The node agent's loop against a fake controller API and the fake engine supervisor."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grid.fleet.wire import WireCommand
from grid.node.agent.admission import order_by_dependencies
from grid.node.agent.loop import NodeAgent
from grid.node.agent.state import write_override
from grid.node.engines.probes import Activity, ActivityState
from grid.node.protection import LocalOverride, OverrideKind
from tests.node.agent_helpers import (
    BlockingFakeSupervisor,
    FakeControllerClient,
    FakeTelemetry,
    command,
    gguf,
    make_agent,
    node_config,
)
from tests.support.fake_engine import FakeEngineSupervisor

pytestmark = pytest.mark.unit


class Rig:
    def __init__(self, tmp_path: Path, *, worker: bool = True, **config: Any) -> None:
        self.tmp_path = tmp_path
        self.worker = worker
        self.client = FakeControllerClient()
        self.supervisor = FakeEngineSupervisor()
        self.telemetry = FakeTelemetry()
        self.config = node_config(tmp_path, **config)
        self.agents: list[NodeAgent] = []
        self.agent = self.new_agent()

    def new_agent(self) -> NodeAgent:
        agent = make_agent(
            self.tmp_path,
            config=self.config,
            supervisor=self.supervisor,
            client=self.client,
            telemetry=self.telemetry,
        )
        if self.worker:
            agent.start_worker()
        self.agents.append(agent)
        return agent

    def deliver(self, *commands: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Hand commands to the next control heartbeat, let the worker run, report receipts."""
        self.client.outbox = list(commands)
        self.agent.cycle()
        assert self.agent.wait_idle(10.0)
        self.agent.cycle()
        return self.client.acks()

    def stop(self) -> None:
        for agent in self.agents:
            agent.worker.stop()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path)
    try:
        yield made
    finally:
        made.stop()


RigFactory = Callable[..., Rig]


@pytest.fixture
def make_rig(tmp_path: Path) -> Iterator[RigFactory]:
    made: list[Rig] = []

    def factory(*, worker: bool = True, **config: Any) -> Rig:
        made.append(Rig(tmp_path, worker=worker, **config))
        return made[-1]

    try:
        yield factory
    finally:
        for one in made:
            one.stop()


def test_first_cycle_registers_with_an_early_lease_then_polls(rig: Rig) -> None:
    rig.agent.cycle()
    first, second = rig.client.bodies
    assert first["request_commands"] is False and second["request_commands"] is True
    assert first["host_id"] == "host-a" and first["role"] == "allocator"
    assert first["resources"]["capacity_mb"] == 8192
    assert first["allocator"]["state"] == "accepting"
    assert first["allocator"]["cached_models"] == ["m1"]  # the catalog file is on disk
    rig.agent.cycle()
    assert [b["request_commands"] for b in rig.client.bodies[2:]] == [True]  # no change: no fence


def test_load_warm_drain_unload_lifecycle(rig: Rig) -> None:
    load = command("load")
    warm = command("warm", memory_mb=300, dependencies=[load["action_id"]])
    acks = rig.deliver(warm, load)  # the warm is listed first; the node runs the load first
    assert acks[load["action_id"]]["status"] == "succeeded"
    assert acks[load["action_id"]]["artifact_fetched"] is False  # a catalog file: no transfer
    assert acks[warm["action_id"]]["status"] == "succeeded"
    assert acks[warm["action_id"]]["duration_seconds"] >= 0.0
    row = rig.client.last_residency("m1")
    assert row is not None and (row["state"], row["memory_mb"]) == ("ready", 300)
    assert row["artifact_sha256"] == rig.config.catalog[0].sha256
    assert rig.client.bodies[-1]["models"] == ["m1"]

    drain = command("drain")
    assert rig.deliver(drain)[drain["action_id"]]["status"] == "succeeded"
    assert rig.client.last_residency("m1")["state"] == "draining"  # type: ignore[index]
    assert rig.client.bodies[-1]["models"] == []  # draining is not routable

    unload = command("unload")
    assert rig.deliver(unload)[unload["action_id"]]["status"] == "succeeded"
    row = rig.client.last_residency("m1")
    assert row is not None and (row["state"], row["memory_mb"]) == ("cached", 0)
    assert ("signal", "m1", "SIGTERM") in rig.supervisor.calls


def test_unload_refuses_a_busy_engine_and_an_undrained_one(rig: Rig) -> None:
    rig.deliver(command("warm"))
    early = command("unload")
    acks = rig.deliver(early)
    assert acks[early["action_id"]]["status"] == "failed"
    assert acks[early["action_id"]]["message"].startswith("not_drained")
    rig.deliver(command("drain"))
    rig.supervisor.set_activity("m1", Activity(ActivityState.BUSY, processing=2, slots=2))
    busy = command("unload")
    acks = rig.deliver(busy)
    assert acks[busy["action_id"]]["status"] == "failed"
    assert acks[busy["action_id"]]["message"].startswith("engine_busy")
    row = rig.client.last_residency("m1")
    assert row is not None and (row["state"], row["active_requests"]) == ("draining", 2)


def test_a_crashed_child_is_reported_failed_then_released_by_unload(rig: Rig) -> None:
    rig.deliver(command("warm"))
    rig.supervisor.crash("m1")
    rig.agent.cycle()
    row = rig.client.last_residency("m1")
    assert row is not None and (row["state"], row["active_requests"]) == ("failed", 0)
    unload = command("unload")
    assert rig.deliver(unload)[unload["action_id"]]["status"] == "succeeded"
    assert rig.client.last_residency("m1")["state"] == "cached"  # type: ignore[index]


def test_local_protection_cancels_queued_load_and_warm(make_rig: RigFactory) -> None:
    rig = make_rig(worker=False)  # nothing starts: the commands stay queued
    load, drain = command("load"), command("drain", model_id="m2")
    rig.client.outbox = [load, drain]
    rig.agent.cycle()
    assert [q.command.action_id for q in rig.agent.keeper.read().queue] == [
        load["action_id"],
        drain["action_id"],
    ]
    rig.telemetry.readings["user_active"] = True
    rig.agent.cycle()
    fence = next(b for b in rig.client.bodies[2:] if b["allocator"]["state"] == "paused")
    assert fence["request_commands"] is False  # the fence goes out before anything else
    cancelled = rig.client.acks()[load["action_id"]]
    assert cancelled["status"] == "cancelled" and "local_protection" in cancelled["message"]
    assert [q.command.action_id for q in rig.agent.keeper.read().queue] == [drain["action_id"]]


def test_a_durable_override_fences_the_host_and_cancels_new_warms(rig: Rig) -> None:
    rig.agent.cycle()
    write_override(rig.agent.state_dir, LocalOverride(kind=OverrideKind.DRAIN, reason="home"))
    warm = command("warm")
    acks = rig.deliver(warm)
    assert rig.client.bodies[-1]["allocator"]["state"] == "draining"
    assert acks[warm["action_id"]]["status"] == "cancelled"
    assert ("warm", "m1") not in rig.supervisor.calls


def test_an_expired_override_is_removed(tmp_path: Path, make_rig: RigFactory) -> None:
    rig = make_rig()
    write_override(
        rig.agent.state_dir,
        LocalOverride(kind=OverrideKind.PAUSE, set_at=1.0, expires_at=2.0),
    )
    rig.agent.cycle()
    assert rig.client.bodies[-1]["allocator"]["state"] == "accepting"
    assert not (rig.agent.state_dir / "override.json").exists()


def test_a_warm_local_memory_no_longer_admits_fails_before_launch(make_rig: RigFactory) -> None:
    rig = make_rig(capacity_mb=1000, reserved_mb=200)
    warm = command("warm", memory_mb=900)
    acks = rig.deliver(warm)
    assert acks[warm["action_id"]]["status"] == "failed"
    assert acks[warm["action_id"]]["message"].startswith("insufficient_local_memory")
    assert ("warm", "m1") not in rig.supervisor.calls


def test_a_redelivered_command_runs_once_and_its_receipt_is_repeated(rig: Rig) -> None:
    warm = command("warm")
    rig.deliver(warm, dict(warm))  # listed twice in one response
    rig.deliver(dict(warm))  # and delivered again later
    assert rig.supervisor.calls.count(("warm", "m1")) == 1
    sent = [a for b in rig.client.bodies for a in b["acknowledgements"]]
    assert [a["action_id"] for a in sent].count(warm["action_id"]) == 2


def test_receipts_wait_for_a_reachable_controller(rig: Rig) -> None:
    warm = command("warm")
    rig.client.outbox = [warm]
    rig.agent.cycle()
    assert rig.agent.wait_idle(10)
    rig.client.unreachable = True
    rig.agent.cycle()
    assert [r.action_id for r in rig.agent.keeper.read().unacknowledged()] == [warm["action_id"]]
    rig.client.unreachable = False
    rig.agent.cycle()
    assert rig.client.acks()[warm["action_id"]]["status"] == "succeeded"
    assert rig.agent.keeper.read().unacknowledged() == []


def test_the_term_fence_survives_a_restart(rig: Rig) -> None:
    rig.deliver(command("drain", term=5, controller_id="c5"))
    rig.stop()
    rig.agent = rig.new_agent()  # a new process reading the same state folder
    stale = command("drain", term=4, controller_id="c4")
    acks = rig.deliver(stale)
    assert acks[stale["action_id"]]["status"] == "failed"
    assert acks[stale["action_id"]]["message"].startswith("stale_term")


def test_a_changed_weights_file_is_refused_before_launch(rig: Rig) -> None:
    Path(rig.config.catalog[0].path).write_bytes(b"tampered")
    warm = command("warm")
    acks = rig.deliver(warm)
    assert acks[warm["action_id"]]["message"].startswith("artifact_digest_mismatch")
    assert ("warm", "m1") not in rig.supervisor.calls


def _declared(source: Path, digest: str, size_mb: int = 1) -> dict[str, Any]:
    """The artifact facts of a profile, as the controller puts them on every command."""
    return {
        "artifact_source": f"file://{source}",
        "artifact_sha256": digest,
        "artifact_size_mb": size_mb,
    }


def test_load_fetches_only_what_the_command_authorizes(rig: Rig, tmp_path: Path) -> None:
    source, digest = gguf(tmp_path / "mirror", "m2.gguf", b"GGUF other weights" * 100)
    unknown = command("load", model_id="m2")
    acks = rig.deliver(unknown)
    assert acks[unknown["action_id"]]["message"].startswith("artifact_unknown")
    partial = command("load", model_id="m2", artifact_source=f"file://{source}")
    acks = rig.deliver(partial)
    assert acks[partial["action_id"]]["message"].startswith("artifact_source_not_authorized")
    first = command("load", model_id="m2", **_declared(source, digest))
    second = command("load", model_id="m2", **_declared(source, digest))
    acks = rig.deliver(first)
    assert acks[first["action_id"]]["artifact_fetched"] is True
    acks = rig.deliver(second)
    assert acks[second["action_id"]]["artifact_fetched"] is False  # cache hit
    assert "m2" in rig.client.bodies[-1]["allocator"]["cached_models"]
    warm = command("warm", model_id="m2", **_declared(source, digest))
    assert rig.deliver(warm)[warm["action_id"]]["status"] == "succeeded"
    assert rig.client.last_residency("m2")["artifact_sha256"] == digest  # type: ignore[index]


def test_a_catalog_file_of_another_revision_is_never_launched(rig: Rig, tmp_path: Path) -> None:
    source, digest = gguf(tmp_path / "mirror", "m1-v2.gguf", b"GGUF revision two" * 100)
    load, warm = command("load", artifact_sha256=digest), command("warm", artifact_sha256=digest)
    acks = rig.deliver(load, warm)
    assert acks[load["action_id"]]["message"].startswith("artifact_digest_mismatch")
    assert acks[warm["action_id"]]["status"] != "succeeded"
    assert ("warm", "m1") not in rig.supervisor.calls
    # With the revision's source declared, the node fetches it instead of the catalog file.
    load, warm = (
        command("load", **_declared(source, digest)),
        command("warm", **_declared(source, digest)),
    )
    acks = rig.deliver(load, warm)
    assert acks[load["action_id"]]["artifact_fetched"] is True
    assert acks[warm["action_id"]]["status"] == "succeeded"
    assert rig.client.last_residency("m1")["artifact_sha256"] == digest  # type: ignore[index]


def test_malformed_artifact_fields_fail_the_command_closed(rig: Rig) -> None:
    bad = command("load", artifact_size_mb="1")
    acks = rig.deliver(bad)
    assert acks[bad["action_id"]]["status"] == "failed"
    assert acks[bad["action_id"]]["message"].startswith("artifact_spec_invalid")


def test_shutdown_stops_owned_children_and_reports_them_released(rig: Rig) -> None:
    rig.deliver(command("warm"))
    outcomes = rig.agent.shutdown()
    assert [o.status.value for o in outcomes] == ["succeeded"]
    last = rig.client.bodies[-1]
    assert last["allocator"]["state"] == "draining" and last["request_commands"] is False
    assert rig.client.last_residency("m1")["state"] == "cached"  # type: ignore[index]
    assert rig.supervisor.poll() == {}


def test_dependencies_are_ordered_first_within_a_batch() -> None:
    a, b, c = (command("load"), command("warm"), command("drain"))
    b["dependencies"] = [a["action_id"]]
    typed = {x["action_id"]: WireCommand.model_validate(x) for x in (a, b, c)}
    ordered = order_by_dependencies(
        [typed[b["action_id"]], typed[c["action_id"]], typed[a["action_id"]]]
    )
    assert [x.action_id for x in ordered] == [c["action_id"], a["action_id"], b["action_id"]]


def test_heartbeats_stay_responsive_while_a_side_effect_runs(tmp_path: Path) -> None:
    client, supervisor = FakeControllerClient(), BlockingFakeSupervisor()
    agent = make_agent(tmp_path, supervisor=supervisor, client=client)
    agent.start_worker()
    try:
        warm, drain = command("warm"), command("drain", model_id="m2")
        client.outbox = [warm]
        agent.cycle()
        assert supervisor.entered.wait(10)
        client.outbox = [drain]  # would be handed out by a control heartbeat
        started = time.monotonic()
        agent.cycle()
        assert time.monotonic() - started < 1.0
        last = client.bodies[-1]
        assert last["request_commands"] is False  # a lease heartbeat: nothing more is taken
        assert last["load"]["active_tasks"] == 1
        assert client.last_residency("m1")["state"] == "warming"  # type: ignore[index]
        assert client.outbox == [drain]
        supervisor.release.set()
        assert agent.wait_idle(10)
        agent.cycle()
        assert client.acks()[warm["action_id"]]["status"] == "succeeded"
        assert client.outbox == []  # idle again: the control heartbeat took the drain
    finally:
        supervisor.release.set()
        agent.worker.stop()
