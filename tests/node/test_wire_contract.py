"""The node and the controller speak one wire: what a node agent sends, read by the
controller's own reader, is the host the node described; what the controller answers, read by
the node, is what it sent. The expected values are the node's own inputs, stated here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.fleet.models import ResidencyState
from grid.fleet.wire import NodeReply, NodeUpdate, WireCommand, wire_json
from grid.runtime.controller.wire import build_host
from tests.node.agent_helpers import HOST, FakeControllerClient, command, make_agent

pytestmark = pytest.mark.unit

RECEIPT_TIME = 1_785_300_000.0


def test_what_the_node_sends_is_read_by_the_controller_as_the_host_it_described(
    tmp_path: Path,
) -> None:
    client = FakeControllerClient()
    agent = make_agent(tmp_path, client=client)
    try:
        agent.cycle()
    finally:
        agent.worker.stop()
    assert client.bodies, "the agent sent no heartbeat"
    assert agent.decision is not None
    # Through real JSON, as on the wire.
    update = NodeUpdate.model_validate_json(json.dumps(client.bodies[-1]))
    assert update.host_id == HOST and update.role == "allocator"
    assert update.resources is not None and update.allocator is not None
    host, problems = build_host(HOST, update.resources, update.allocator, now=RECEIPT_TIME)
    assert problems == []
    assert host.host_id == HOST
    assert host.capacity_mb == 8192  # node_config's capacity
    assert host.last_heartbeat == RECEIPT_TIME  # the controller's clock, never the node's
    assert host.state is agent.decision.lifecycle  # the node's own protection verdict
    assert host.cached_models == ["m1"]  # the catalog file node_config wrote
    assert host.residencies == []
    first = NodeUpdate.model_validate_json(json.dumps(client.bodies[0]))
    assert first.request_commands is False  # the early heartbeat takes no commands


def test_residency_ages_become_controller_timestamps(tmp_path: Path) -> None:
    row = {
        "model_id": "m1",
        "memory_mb": 300,
        "state": "ready",
        "managed": True,
        "active_requests": None,
        "loaded_age_s": 30.0,
    }
    update = NodeUpdate.model_validate(
        {
            "host_id": HOST,
            "resources": {"capacity_mb": 4096},
            "allocator": {"state": "accepting", "residencies": [row]},
        }
    )
    assert update.resources is not None
    host, problems = build_host(HOST, update.resources, update.allocator, now=RECEIPT_TIME)
    assert problems == []
    (residency,) = host.residencies
    assert residency.state is ResidencyState.READY
    assert residency.loaded_at == RECEIPT_TIME - 30.0
    assert residency.active_requests is None  # unknown stays unknown (never idle)


def test_a_reply_travels_as_sent_and_its_commands_read_as_typed_commands() -> None:
    sent = command("warm", memory_mb=700, dependencies=["load-1"])
    reply = {
        "node_id": "n",
        "host_id": HOST,
        "ttl_seconds": 60.0,
        "model_last_used_at": {"m1": 17.5},
        "acknowledgements": [{"action_id": "a1", "result": "applied"}],
        "allocator": {
            "schema_version": 1,
            "mode": "automatic",
            "controller_lease_ttl_seconds": 14.8,
            "revision": 3,
            "commands": [sent],
            "held_destructive": [],
        },
    }
    read = NodeReply.model_validate_json(json.dumps(reply))
    assert wire_json(read) == reply  # nothing added, nothing lost
    typed = WireCommand.model_validate(read.allocator.commands[0])
    assert (typed.kind, typed.model_id, typed.memory_mb, typed.dependencies) == (
        "warm",
        "m1",
        700,
        ["load-1"],
    )
    assert typed.target_host == HOST and typed.executable is True
