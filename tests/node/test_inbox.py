"""The command inbox: what one heartbeat's commands become, durably, before any may start."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.actions import ReceiptStatus
from grid.node.agent.inbox import CommandInbox
from grid.node.agent.state import AgentState, AgentStateStore, Keeper
from tests.node.agent_helpers import HOST, command

pytestmark = pytest.mark.unit

NOW_MONO = 500.0


class _WatchingStore(AgentStateStore):
    """A real state file; at each durable write it notes which queued commands the inbox
    already holds a deadline for (what a worker could see the moment the write lands)."""

    inbox: CommandInbox | None = None

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.seen: list[tuple[str, bool]] = []
        self.fail = False

    def save(self, state: AgentState) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        assert self.inbox is not None
        for queued in state.queue:
            action_id = queued.command.action_id
            self.seen.append((action_id, action_id in self.inbox._deadlines))
        super().save(state)


def _inbox(tmp_path: Path) -> tuple[CommandInbox, Keeper, _WatchingStore]:
    store = _WatchingStore(tmp_path)
    keeper = Keeper(store, AgentState(host_id=HOST), clock=lambda: 1000.0)
    inbox = CommandInbox(keeper, HOST, clock=lambda: 1000.0, monotonic=lambda: NOW_MONO)
    store.inbox = inbox
    return inbox, keeper, store


def test_accepted_commands_are_queued_in_dependency_order_with_their_deadline(
    tmp_path: Path,
) -> None:
    inbox, keeper, store = _inbox(tmp_path)
    load, warm = command("load"), command("warm")
    warm["dependencies"] = [load["action_id"]]
    queued = inbox.accept([warm, load], ttl_remaining_s=12.0)
    assert [c.action_id for c in queued] == [warm["action_id"], load["action_id"]]
    state = keeper.read()
    assert [q.command.action_id for q in state.queue] == [load["action_id"], warm["action_id"]]
    assert (state.highest_term, state.controller_id) == (1, "ctl-1")  # the fence is durable
    # Every queued command had its deadline before the write that makes it visible.
    assert store.seen and all(known for _id, known in store.seen)
    assert inbox.take_deadline(load["action_id"]) == NOW_MONO + 12.0
    assert inbox.take_deadline(load["action_id"]) == float("-inf")  # taken once


def test_a_refused_command_becomes_a_receipt_in_the_same_write(tmp_path: Path) -> None:
    inbox, keeper, _store = _inbox(tmp_path)
    foreign = command("warm", host_id="another-host")
    assert inbox.accept([foreign], ttl_remaining_s=12.0) == []
    receipt = keeper.read().receipt(foreign["action_id"])
    assert receipt is not None
    assert (receipt.status, receipt.code) == (ReceiptStatus.FAILED, "wrong_host")
    assert keeper.read().queue == []


def test_nothing_is_queued_and_no_deadline_is_kept_when_the_write_fails(tmp_path: Path) -> None:
    inbox, keeper, store = _inbox(tmp_path)
    store.fail = True
    warm = command("warm")
    assert inbox.accept([warm], ttl_remaining_s=12.0) == []
    assert keeper.read().queue == [] and keeper.read().highest_term == 0
    assert inbox.take_deadline(warm["action_id"]) == float("-inf")


def test_cancel_queued_ends_only_the_selected_work(tmp_path: Path) -> None:
    inbox, keeper, _store = _inbox(tmp_path)
    load, drain = command("load"), command("drain", model_id="m2")
    inbox.accept([load, drain], ttl_remaining_s=12.0)
    inbox.cancel_queued(lambda c: c.kind == "load", "local_protection", "paused")
    state = keeper.read()
    assert [q.command.action_id for q in state.queue] == [drain["action_id"]]
    receipt = state.receipt(load["action_id"])
    assert receipt is not None and (receipt.status, receipt.code) == (
        ReceiptStatus.CANCELLED,
        "local_protection",
    )
