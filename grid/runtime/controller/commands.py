"""The command book: action records, the envelope of every issued command, acknowledgements.

A record is created `pending` when automatic mode issues an action, becomes `delivered` when a
node takes it (the marker is made durable by the caller before the response leaves), and ends
with the first terminal receipt. Acknowledgements are idempotent: a duplicate changes nothing, a
conflicting later one is ignored, a late success or failure still completes a withdrawn action,
and an acknowledgement from any host but the action's own is rejected. Pure: `now` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from grid.fleet import (
    Action,
    ActionRecord,
    Receipt,
    ReceiptStatus,
    RecordStatus,
    apply_receipt,
)
from grid.runtime.controller.state import Command, bound_records
from grid.runtime.controller.wire import ACK_STATUSES, WireAck
from grid.runtime.reconcile import dangling_destructive


def epoch_scoped(action_id: str, epoch: str) -> str:
    """The command id a node sees: the reconciler's stable id qualified by the controller
    state's epoch (a random identity a lost or quarantined state never reuses), so ids are
    unique across controller epochs and a node can never answer new work with an old receipt.
    Idempotent: an id already scoped to `epoch` (an open record's) is returned unchanged."""
    if not epoch:
        return action_id
    suffix = f".{epoch[:EPOCH_CHARS]}"
    return action_id if action_id.endswith(suffix) else action_id + suffix


EPOCH_CHARS = 16


class AckResult(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    CONFLICT_IGNORED = "conflict_ignored"
    UNKNOWN_ACTION = "unknown_action"
    WRONG_HOST = "wrong_host"
    INVALID_STATUS = "invalid_status"


_TERMINAL_OF = {
    ReceiptStatus.SUCCEEDED: RecordStatus.SUCCEEDED,
    ReceiptStatus.FAILED: RecordStatus.FAILED,
    ReceiptStatus.CANCELLED: RecordStatus.WITHDRAWN,
}


@dataclass(frozen=True)
class AckOutcome:
    action_id: str
    result: AckResult
    record: ActionRecord | None = None  # the record after the acknowledgement, when applied


@dataclass(frozen=True)
class Marker:
    """What a delivery changed, so that a failed revalidation can be compensated exactly."""

    action_id: str
    previous: ActionRecord
    previous_command: Command


class CommandBook:
    def __init__(
        self, records: list[ActionRecord], commands: list[Command], issued_seq: int = 0
    ) -> None:
        self.records: dict[str, ActionRecord] = {r.action_id: r for r in records}
        self.commands: dict[str, Command] = {
            c.action.action_id: c for c in commands if c.action.action_id in self.records
        }
        self.issued_seq = max([issued_seq, *(c.issued_seq for c in self.commands.values())])

    # -- reading ---------------------------------------------------------------------------
    def history(self) -> list[ActionRecord]:
        return list(self.records.values())

    def open_records(self) -> list[ActionRecord]:
        return [r for r in self.records.values() if r.is_open]

    def pending_commands(self) -> list[tuple[ActionRecord, Command]]:
        return [
            (r, self.commands[r.action_id])
            for r in self.records.values()
            if r.is_open and r.action_id in self.commands
        ]

    def delivered_open_ids(self) -> list[str]:
        return sorted(r.action_id for r in self.records.values() if r.is_open and r.was_delivered)

    def withdrawn_destructive(self) -> list[ActionRecord]:
        """Delivered destructive actions withdrawn later and still without a terminal receipt."""
        return dangling_destructive(self.records.values())

    # -- issuing and withdrawing ------------------------------------------------------------
    def issue(self, action: Action, plan_generation: str, now: float) -> str:
        """Record a new executable action under its epoch-scoped id (returned); "" when that id
        is already known (idempotent)."""
        epoch = plan_generation.split(":", 1)[0]
        scoped = action.model_copy(
            update={
                "action_id": epoch_scoped(action.action_id, epoch),
                "dependencies": [epoch_scoped(d, epoch) for d in action.dependencies],
            }
        )
        if scoped.action_id in self.records:
            return ""
        self.issued_seq += 1
        self.records[scoped.action_id] = ActionRecord.from_action(scoped, now=now)
        self.commands[scoped.action_id] = Command(
            action=scoped, plan_generation=plan_generation, issued_seq=self.issued_seq
        )
        return scoped.action_id

    def withdraw(self, action_id: str, now: float) -> bool:
        record = self.records.get(action_id)
        if record is None or not record.is_open:
            return False
        self.records[action_id] = record.model_copy(
            update={"status": RecordStatus.WITHDRAWN, "withdrawn_at": now}
        )
        return True

    def withdraw_undelivered(self, now: float) -> list[str]:
        """Leaving automatic mode: cancel every command no node has taken yet."""
        ids = [r.action_id for r in self.open_records() if not r.was_delivered]
        for action_id in ids:
            self.withdraw(action_id, now)
        return ids

    # -- delivery --------------------------------------------------------------------------
    def deliverable(self, host_id: str, now: float) -> list[Command]:
        """Pending commands of one host, in service order (class first, then issue order).

        A higher service class issued on a later tick precedes an older lower-class entry;
        FIFO breaks ties within a class. Commands not yet due wait.
        """
        out = [
            self.commands[r.action_id]
            for r in self.records.values()
            if r.status is RecordStatus.PENDING
            and r.host_id == host_id
            and r.action_id in self.commands
            and self.commands[r.action_id].action.not_before <= now
        ]
        out.sort(key=lambda c: (-c.action.priority, c.action.urgency.rank, c.issued_seq))
        return out

    def mark_delivered(
        self,
        commands: list[Command],
        *,
        term: int,
        controller_id: str,
        expires_at: float,
        now: float,
    ) -> list[Marker]:
        markers: list[Marker] = []
        for command in commands:
            action_id = command.action.action_id
            record = self.records[action_id]
            markers.append(Marker(action_id, record, command))
            self.records[action_id] = record.model_copy(
                update={"status": RecordStatus.DELIVERED, "delivered_at": now}
            )
            self.commands[action_id] = command.model_copy(
                update={
                    "controller_term": term,
                    "controller_id": controller_id,
                    "controller_lease_expires_at": expires_at,
                }
            )
        return markers

    def unmark(self, markers: list[Marker]) -> None:
        """Undo delivery markers whose commands will not be sent after all."""
        for marker in markers:
            current = self.records.get(marker.action_id)
            if current is None or current.finished_at is not None:
                continue  # a receipt arrived meanwhile: it wins
            self.records[marker.action_id] = marker.previous
            self.commands[marker.action_id] = marker.previous_command

    # -- acknowledgements --------------------------------------------------------------------
    def acknowledge(self, host_id: str, ack: WireAck, now: float) -> AckOutcome:
        if ack.status not in ACK_STATUSES:
            return AckOutcome(ack.action_id, AckResult.INVALID_STATUS)
        record = self.records.get(ack.action_id)
        if record is None:
            return AckOutcome(ack.action_id, AckResult.UNKNOWN_ACTION)
        if record.host_id != host_id:
            return AckOutcome(ack.action_id, AckResult.WRONG_HOST)
        status = ReceiptStatus(ack.status)
        if record.finished_at is not None:
            same = record.status is _TERMINAL_OF[status]
            return AckOutcome(
                ack.action_id, AckResult.DUPLICATE if same else AckResult.CONFLICT_IGNORED
            )
        receipt = Receipt(action_id=ack.action_id, status=status, at=now, message=ack.message)
        (updated,) = apply_receipt([record], receipt)
        self.records[ack.action_id] = updated
        return AckOutcome(ack.action_id, AckResult.APPLIED, updated)

    # -- bounds -----------------------------------------------------------------------------
    def trim(self) -> None:
        kept = bound_records(list(self.records.values()))
        self.records = {r.action_id: r for r in kept}
        self.commands = {
            action_id: command
            for action_id, command in self.commands.items()
            if action_id in self.records and self.records[action_id].holds_slot
        }
