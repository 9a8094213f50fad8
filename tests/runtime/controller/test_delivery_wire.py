"""A delivered command is the typed `WireCommand`, and the profile vocabulary refuses what the
wire could not carry (a model id above 256 characters), so building a command never fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.actions import Action, ActionKind
from grid.fleet.errors import GridError, SnapshotError
from grid.fleet.models import ModelProfile
from grid.fleet.snapshot import parse_snapshot
from grid.fleet.wire import WireCommand
from grid.runtime.controller.profiles import validate_profile
from grid.runtime.controller.state import Command
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

NOW = 1_785_300_000.0
LONGEST = "m" * 256  # the wire's limit, hand-counted
TOO_LONG = "m" * 257


def _command(model_id: str) -> Command:
    action = Action(
        action_id="warm-0123456789abcdef",
        kind=ActionKind.WARM,
        host_id="h1",
        model_id=model_id,
        memory_mb=4096,
        not_before=NOW,
    )
    return Command(action=action, plan_generation="g1", issued_seq=3, controller_term=2)


def test_wire_is_the_typed_command_with_the_profiles_facts() -> None:
    prof = ModelProfile(
        model_id=LONGEST, memory_mb=4096, artifact_size_mb=12, chat_template="gemma"
    )
    wire = _command(LONGEST).wire(created_at=NOW - 1.0, profile=prof)
    assert isinstance(wire, WireCommand)
    body = wire.model_dump(mode="json")
    assert WireCommand.model_validate(body) == wire  # round-trips through the node's reader
    assert (body["kind"], body["host_id"], body["node_id"], body["model_id"]) == (
        "warm",
        "h1",
        "h1",
        LONGEST,
    )
    assert (body["controller_term"], body["artifact_size_mb"], body["chat_template"]) == (
        2,
        12,
        "gemma",
    )
    assert body["artifact_sha256"] is None and body["created_at"] == NOW - 1.0


def test_a_profile_id_above_the_wire_limit_is_refused_with_a_code() -> None:
    with pytest.raises(SnapshotError) as err:
        parse_snapshot(
            {"schema_version": 1, "now": NOW, "models": [{"model_id": TOO_LONG, "memory_mb": 1024}]}
        )
    assert err.value.code == "value_too_long"
    assert err.value.path == "models[0].model_id"
    assert "256 characters" in (err.value.fix or "")
    with pytest.raises(GridError) as api:
        validate_profile(TOO_LONG, {"memory_mb": 1024}, now=NOW)
    assert api.value.code == "invalid_model_id"


def test_delivered_commands_read_as_wire_commands_on_the_node(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [FakeNode("h1")])
    fleet.register_all()
    fleet.ctl.put_profile(LONGEST, profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    kinds = [WireCommand.model_validate(c).kind for c in fleet.delivered]
    assert kinds[:2] == ["load", "warm"]
    assert fleet.ready_hosts(LONGEST) == ["h1"]
