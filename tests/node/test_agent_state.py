"""Durable node state: atomic owner-only file, restart recovery, bounded receipts, overrides."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.fleet.models import ResidencyState
from grid.node.agent.state import (
    MAX_ACKNOWLEDGED_RECEIPTS,
    AgentState,
    AgentStateStore,
    QueuedCommand,
    Receipt,
    ReceiptStatus,
    ResidencyRecord,
    clear_override,
    read_override,
    recover_after_restart,
    write_override,
)
from grid.node.protection import LocalOverride, OverrideKind
from tests.node.agent_helpers import HOST, command

pytestmark = pytest.mark.unit


def _receipt(action_id: str, *, acknowledged: bool = False) -> Receipt:
    return Receipt(
        action_id=action_id,
        kind="warm",
        model_id="m1",
        status=ReceiptStatus.SUCCEEDED,
        finished_at=1.0,
        acknowledged=acknowledged,
    )


def test_state_round_trips_owner_only(tmp_path: Path) -> None:
    store = AgentStateStore(tmp_path)
    state = AgentState(host_id=HOST, highest_term=7, controller_id="c7", plan_sequence=3)
    state.residencies["m1"] = ResidencyRecord(
        model_id="m1", state=ResidencyState.READY, memory_mb=300, loaded_at=5.0
    )
    store.save(state)
    assert stat.S_IMODE((tmp_path / "agent.json").stat().st_mode) == 0o600
    loaded = store.load(HOST)
    assert (loaded.highest_term, loaded.controller_id) == (7, "c7")
    assert loaded.residencies["m1"].state is ResidencyState.READY


def test_a_missing_state_starts_fresh_but_a_corrupt_one_refuses(tmp_path: Path) -> None:
    store = AgentStateStore(tmp_path)
    assert store.load(HOST).highest_term == 0
    (tmp_path / "agent.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(GridError) as err:
        store.load(HOST)
    assert err.value.code == "agent_state_corrupt"  # never forget the term fence silently


def test_a_state_of_another_host_is_refused(tmp_path: Path) -> None:
    store = AgentStateStore(tmp_path)
    store.save(AgentState(host_id="host-b"))
    with pytest.raises(GridError) as err:
        store.load(HOST)
    assert err.value.code == "agent_state_host_mismatch"


def test_restart_fails_the_interrupted_action_and_cancels_the_queue() -> None:
    running, queued = command("warm"), command("drain")
    state = AgentState(
        host_id=HOST,
        in_flight=QueuedCommand(command=running, received_at=1.0),
        queue=[QueuedCommand(command=queued, received_at=1.0)],
    )
    made = recover_after_restart(state, now=9.0)
    assert state.in_flight is None and state.queue == []
    outcome = {r.action_id: (r.status, r.code) for r in made}
    assert outcome == {
        running["action_id"]: (ReceiptStatus.FAILED, "agent_restarted"),
        queued["action_id"]: (ReceiptStatus.CANCELLED, "agent_restarted"),
    }
    assert [r.action_id for r in state.unacknowledged()] == [
        running["action_id"],
        queued["action_id"],
    ]
    assert state.knows_action(running["action_id"])  # a redelivery is recognized


def test_receipts_keep_every_unanswered_one_and_bound_the_answered() -> None:
    state = AgentState(host_id=HOST)
    for i in range(MAX_ACKNOWLEDGED_RECEIPTS + 40):
        state.add_receipt(_receipt(f"a{i}", acknowledged=True))
    state.add_receipt(_receipt("pending"))
    assert len(state.receipts) == MAX_ACKNOWLEDGED_RECEIPTS + 1
    assert state.receipt("a0") is None and state.receipt("pending") is not None
    state.mark_acknowledged({"pending"})
    assert state.unacknowledged() == []


def test_a_repeated_receipt_replaces_the_older_copy() -> None:
    state = AgentState(host_id=HOST)
    state.add_receipt(_receipt("x", acknowledged=True))
    state.add_receipt(_receipt("x"))
    assert [r.acknowledged for r in state.receipts] == [False]


def test_overrides_are_durable_and_clearable(tmp_path: Path) -> None:
    assert read_override(tmp_path) is None
    write_override(tmp_path, LocalOverride(kind=OverrideKind.PAUSE, reason="battery", set_at=1))
    assert stat.S_IMODE((tmp_path / "override.json").stat().st_mode) == 0o600
    again = read_override(tmp_path)
    assert again is not None and (again.kind, again.reason) == (OverrideKind.PAUSE, "battery")
    assert clear_override(tmp_path) and read_override(tmp_path) is None
    assert not clear_override(tmp_path)


def test_an_unreadable_override_fails_closed(tmp_path: Path) -> None:
    (tmp_path / "override.json").write_text('{"kind": "vacation"}', encoding="utf-8")
    fenced = read_override(tmp_path)
    assert fenced is not None and fenced.kind is OverrideKind.QUARANTINE
