"""Issue 15, defect 1 (node side): a node never replays a receipt for a command of another
controller epoch; the same command of the same epoch still gets its receipt again (harmless)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from grid.fleet.actions import ReceiptStatus
from grid.node.agent.inbox import CommandInbox
from grid.node.agent.state import AgentState, AgentStateStore, Keeper, receipt_for
from tests.node.agent_helpers import HOST, command

pytestmark = pytest.mark.unit


def _inbox_with_old_success(tmp_path: Path) -> tuple[CommandInbox, Keeper]:
    old = command(
        "warm",
        action_id="warm-0123456789abcdef",
        term=23,
        controller_id="ctl-old",
        epoch="oldepoch",
    )
    state = AgentState(
        host_id=HOST,
        highest_term=23,
        controller_id="ctl-old",
        plan_epoch="oldepoch",
        plan_sequence=1,
    )
    receipt = receipt_for(old, ReceiptStatus.SUCCEEDED, "", "warmed", time.time())
    state.add_receipt(receipt.model_copy(update={"acknowledged": True}))
    store = AgentStateStore(tmp_path)
    store.save(state)
    keeper = Keeper(store, state, time.time)
    return CommandInbox(keeper, HOST), keeper


def test_a_command_of_another_epoch_is_never_answered_with_an_old_receipt(
    tmp_path: Path,
) -> None:
    inbox, keeper = _inbox_with_old_success(tmp_path)
    new = command(
        "warm",
        action_id="warm-0123456789abcdef",
        term=24,
        controller_id="ctl-new",
        epoch="newepoch",
    )
    accepted = inbox.accept([new], ttl_remaining_s=10.0)
    state = keeper.read()
    # Not a replayed "succeeded": the new epoch's command is new work, queued to run.
    assert [c.action_id for c in accepted] == [new["action_id"]]
    assert [q.command.action_id for q in state.queue] == [new["action_id"]]
    assert not [r for r in state.unacknowledged() if r.status is ReceiptStatus.SUCCEEDED]


def test_the_same_command_of_the_same_epoch_gets_its_receipt_again(tmp_path: Path) -> None:
    inbox, keeper = _inbox_with_old_success(tmp_path)
    again = command(
        "warm",
        action_id="warm-0123456789abcdef",
        term=24,
        controller_id="ctl-new",
        epoch="oldepoch",
    )
    assert inbox.accept([again], ttl_remaining_s=10.0) == []
    state = keeper.read()
    assert state.queue == []
    (replayed,) = state.unacknowledged()
    assert replayed.status is ReceiptStatus.SUCCEEDED
