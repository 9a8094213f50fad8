"""The reconciler's vocabulary: actions, deferrals, action records (history), tombstones, modes.

Wire shape (the `grid reconcile --json` contract):
    actions:  [{action_id, kind, host_id, model_id, memory_mb, dependencies, reason, not_before,
                executable, attempt, priority, urgency}]
    deferred: [{kind, host_id, model_id, code, message, retry_at}]

An `ActionRecord` is the controller's durable memory of one issued action: it is created
`pending`, becomes `delivered` when a node takes it, and ends with one terminal receipt
(`succeeded` or `failed`). A controller withdrawal marks it `withdrawn`; a withdrawn record that
had already been delivered may still be running, so it keeps its mutation slot until its receipt
arrives (`finished_at`). Records are parsed from plain dicts so that snapshots can carry them.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet.errors import SnapshotError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ActionKind(StrEnum):
    LOAD = "load"  # acquire or verify the artifact on disk
    WARM = "warm"  # start the engine and wait for a successful readiness probe
    DRAIN = "drain"  # stop routing new requests to the residency
    UNLOAD = "unload"  # release the memory of a drained, idle residency
    EVICT = "evict"  # drop a predictive cache entry (disk only)


CONSTRUCTIVE_KINDS = frozenset({ActionKind.LOAD, ActionKind.WARM})
DESTRUCTIVE_KINDS = frozenset({ActionKind.DRAIN, ActionKind.UNLOAD, ActionKind.EVICT})


class Mode(StrEnum):
    OBSERVE = "observe"  # plan and forecast; drift is recorded as deferred, nothing proposed
    RECOMMEND = "recommend"  # propose actions that nobody executes
    AUTOMATIC = "automatic"  # the same actions, executable within the governors


class Urgency(StrEnum):
    """Service class inside one administrator priority (lower rank runs first)."""

    REQUIRED = "required"  # pins and min_replicas baselines
    DIRECT = "direct"  # directly demanded replicas
    INFERRED = "inferred"  # correlation-only prewarming
    CLEANUP = "cleanup"  # routine destructive work (behind every availability action)
    PREDICTIVE = "predictive"  # a cache-only prefetch advisory (behind everything else)

    @property
    def rank(self) -> int:
        return _URGENCY_RANK[self]


_URGENCY_RANK = {
    Urgency.REQUIRED: 0,
    Urgency.DIRECT: 1,
    Urgency.INFERRED: 2,
    Urgency.CLEANUP: 3,
    Urgency.PREDICTIVE: 4,
}


def action_id(kind: ActionKind, host_id: str, model_id: str, attempt: int) -> str:
    """Stable identity: the same attempt of the same work always gets the same id."""
    digest = hashlib.sha256(f"{kind.value}|{host_id}|{model_id}|{attempt}".encode()).hexdigest()
    return f"{kind.value}-{digest[:16]}"


class Action(_Strict):
    action_id: str
    kind: ActionKind
    host_id: str
    model_id: str
    memory_mb: int = Field(default=0, ge=0)  # memory this lifecycle claims (0: disk or release)
    dependencies: list[str] = Field(default_factory=list)  # action ids that must succeed first
    reason: str = ""
    not_before: float = Field(ge=0)
    executable: bool = False  # True only in automatic mode
    attempt: int = Field(default=1, ge=1)
    priority: int = Field(default=0, ge=0)  # administrator priority the governors order by
    urgency: Urgency = Urgency.DIRECT
    preemption: bool = False  # part of an explicit planner-authorized preemption
    artifact_key: str = ""  # exact artifact identity for the fanout governor (loads)
    # The predictive cache (issue 23): a cache-only load of a prediction, and the exact
    # artifact SHA-256 such a load fetches or an evict removes ("" otherwise).
    predictive: bool = False
    artifact_sha256: str = ""


class Deferral(_Strict):
    kind: ActionKind
    host_id: str
    model_id: str
    code: str
    message: str
    retry_at: float


class RecordStatus(StrEnum):
    PENDING = "pending"  # issued, not yet delivered to its node
    DELIVERED = "delivered"  # taken by the node: treat as possibly running
    RUNNING = "running"  # the node said it started
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    WITHDRAWN = "withdrawn"  # cancelled by the controller; may still run if it was delivered


OPEN_STATUSES = frozenset({RecordStatus.PENDING, RecordStatus.DELIVERED, RecordStatus.RUNNING})


class ActionRecord(_Strict):
    action_id: str
    kind: ActionKind
    host_id: str
    model_id: str
    status: RecordStatus = RecordStatus.PENDING
    attempt: int = Field(default=1, ge=1)
    memory_mb: int = Field(default=0, ge=0)
    dependencies: list[str] = Field(default_factory=list)
    priority: int = Field(default=0, ge=0)
    urgency: Urgency = Urgency.DIRECT
    preemption: bool = False
    artifact_key: str = ""
    predictive: bool = False
    artifact_sha256: str = ""
    reason: str = ""
    created_at: float = Field(default=0.0, ge=0)
    delivered_at: float | None = Field(default=None, ge=0)
    finished_at: float | None = Field(default=None, ge=0)  # when the terminal receipt arrived
    withdrawn_at: float | None = Field(default=None, ge=0)
    outcome: str = ""  # the terminal receipt's message, so status can say why a load failed

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def was_delivered(self) -> bool:
        return self.delivered_at is not None or self.status in {
            RecordStatus.DELIVERED,
            RecordStatus.RUNNING,
        }

    @property
    def holds_slot(self) -> bool:
        """Counts against the mutation governors: open, or withdrawn while possibly running."""
        if self.is_open:
            return True
        return (
            self.status is RecordStatus.WITHDRAWN
            and self.was_delivered
            and self.finished_at is None
        )

    def to_action(self) -> Action:
        """The executable action this record tracks (the inverse of `from_action`)."""
        return Action(
            action_id=self.action_id,
            kind=self.kind,
            host_id=self.host_id,
            model_id=self.model_id,
            memory_mb=self.memory_mb,
            dependencies=list(self.dependencies),
            reason=self.reason,
            not_before=self.created_at,
            executable=True,
            attempt=self.attempt,
            priority=self.priority,
            urgency=self.urgency,
            preemption=self.preemption,
            artifact_key=self.artifact_key,
            predictive=self.predictive,
            artifact_sha256=self.artifact_sha256,
        )

    @classmethod
    def from_action(cls, action: Action, *, now: float) -> ActionRecord:
        return cls(
            action_id=action.action_id,
            kind=action.kind,
            host_id=action.host_id,
            model_id=action.model_id,
            attempt=action.attempt,
            memory_mb=action.memory_mb,
            dependencies=list(action.dependencies),
            priority=action.priority,
            urgency=action.urgency,
            preemption=action.preemption,
            artifact_key=action.artifact_key,
            predictive=action.predictive,
            artifact_sha256=action.artifact_sha256,
            reason=action.reason,
            created_at=now,
        )


class ReceiptStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # the node dropped a withdrawn action before starting it


class Receipt(_Strict):
    """A node's acknowledgement of one action (duplicates and late arrivals are harmless)."""

    action_id: str
    status: ReceiptStatus
    at: float = Field(ge=0)
    message: str = ""


class Tombstone(_Strict):
    """A retired model profile: target zero until the operator creates the profile again."""

    model_id: str = Field(min_length=1)
    created_at: float = Field(default=0.0, ge=0)


def parse_history(
    entries: list[dict[str, Any]], *, field: str = "history"
) -> tuple[list[ActionRecord], list[Tombstone]]:
    """Split a snapshot's `history` list into action records and retirement tombstones.

    An entry with `"type": "tombstone"` is a tombstone; every other entry is an action record.
    A record id listed twice keeps its first terminal outcome (later conflicting copies lose).
    """
    records: dict[str, ActionRecord] = {}
    tombstones: dict[str, Tombstone] = {}
    for index, raw in enumerate(entries):
        path = f"{field}[{index}]"
        if not isinstance(raw, dict):
            raise SnapshotError(
                "invalid_history",
                "every history entry must be an object",
                fix="write each action record as a JSON object",
                path=path,
            )
        body = dict(raw)
        entry_type = body.pop("type", "action")
        try:
            if entry_type == "tombstone":
                tomb = Tombstone.model_validate(body)
                tombstones.setdefault(tomb.model_id, tomb)
                continue
            if entry_type != "action":
                raise SnapshotError(
                    "invalid_history",
                    f"history entry type {entry_type!r} is neither action nor tombstone",
                    fix='use "type": "action" (the default) or "type": "tombstone"',
                    path=f"{path}.type",
                )
            record = ActionRecord.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise SnapshotError(
                "invalid_history",
                f"{first.get('msg', 'invalid value')} (got {first.get('input')!r})",
                fix="give every action record action_id, kind, host_id, model_id and a status",
                path=f"{path}.{where}" if where else path,
            ) from None
        previous = records.get(record.action_id)
        if previous is None or (previous.finished_at is None and record.finished_at is not None):
            records[record.action_id] = record
    return list(records.values()), list(tombstones.values())


def apply_receipt(records: list[ActionRecord], receipt: Receipt) -> list[ActionRecord]:
    """Fold one acknowledgement into the history (pure).

    The first terminal receipt wins: a duplicate or conflicting later one is ignored, and a
    receipt for an unknown id changes nothing. A late success or failure still completes an
    action the controller had withdrawn, which lifts any destructive block that it held.
    """
    out: list[ActionRecord] = []
    for record in records:
        if record.action_id != receipt.action_id or record.finished_at is not None:
            out.append(record)
            continue
        if receipt.status is ReceiptStatus.CANCELLED:
            status = RecordStatus.WITHDRAWN
        elif receipt.status is ReceiptStatus.SUCCEEDED:
            status = RecordStatus.SUCCEEDED
        else:
            status = RecordStatus.FAILED
        update = {"status": status, "finished_at": receipt.at, "outcome": receipt.message[:500]}
        out.append(record.model_copy(update=update))
    return out


class Withdrawal(_Strict):
    """A pending record the controller cancels this tick (delivered ones may still run)."""

    action_id: str
    kind: ActionKind
    host_id: str
    model_id: str
    code: str
    message: str
    delivered: bool = False


class ReconcileResult(_Strict):
    """One reconciliation tick's decision (the `grid reconcile` document, less the plan)."""

    mode: Mode
    now: float
    actions: list[Action] = Field(default_factory=list)
    deferred: list[Deferral] = Field(default_factory=list)
    withdrawn: list[Withdrawal] = Field(default_factory=list)
    in_flight: list[str] = Field(default_factory=list)  # open records the plan still wants
    blocked_models: list[str] = Field(default_factory=list)  # destructive work blocked

    @property
    def withdrawn_destructive(self) -> list[Withdrawal]:
        return [w for w in self.withdrawn if w.delivered and w.kind in DESTRUCTIVE_KINDS]

    def action(self, kind: ActionKind, host_id: str, model_id: str) -> Action | None:
        return next(
            (
                a
                for a in self.actions
                if a.kind is kind and a.host_id == host_id and a.model_id == model_id
            ),
            None,
        )

    def deferral(self, kind: ActionKind, host_id: str, model_id: str) -> Deferral | None:
        return next(
            (
                d
                for d in self.deferred
                if d.kind is kind and d.host_id == host_id and d.model_id == model_id
            ),
            None,
        )
