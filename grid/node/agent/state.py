"""The node agent's durable state (`agent.json`, 0600, written atomically) and local overrides.

What must survive an agent restart (spec, "Managed host actuator"):
- the authority fence: the highest controller term accepted and the one controller id allowed in
  it, so a lower-term command is refused even after a restart;
- the latest plan generation accepted (epoch and sequence);
- residencies (what this host runs or has cached), verified artifacts and the provenance of
  predictive downloads (grid/node/artifacts/provenance.py);
- the action in flight and the accepted-but-not-started queue, so that a restart can report the
  interrupted action failed and the queued ones cancelled (their mutation slots are released);
- bounded receipts: every terminal outcome until the controller has acknowledged it, plus the
  newest acknowledged ones (duplicate deliveries are recognized, dependencies are checked);
- the host-protection state (debounce window, committed lifecycle, cooldown anchor) and the
  server's per-model last-used watermarks.

`Keeper` holds the state behind one lock and persists every change before publishing it, so
the agent never acts on a state that a crash could forget.

A state file that cannot be read stops the agent (`agent_state_corrupt`) instead of starting
blank: a blank state would forget the term fence.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet import (
    GridError,
    ReceiptStatus,
    ResidencyState,
    WireAck,
    WireCommand,
    atomic_write_text,
    loads_bounded,
    read_json_file,
)
from grid.node.artifacts import PredictiveRecord
from grid.node.protection import LocalOverride, OverrideKind, ProtectionState

STATE_NAME = "agent.json"
OVERRIDE_NAME = "override.json"
MAX_ACKNOWLEDGED_RECEIPTS = 256
MAX_UNACKNOWLEDGED_RECEIPTS = 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Receipt(_Strict):
    action_id: str
    kind: str
    model_id: str
    status: ReceiptStatus
    code: str = ""  # stable reason code of a failure or cancellation
    message: str = ""
    duration_seconds: float = Field(default=0.0, ge=0)  # monotonic, start to finish
    artifact_fetched: bool = False
    finished_at: float = Field(ge=0)  # wall clock, for display only
    acknowledged: bool = False  # the controller answered a heartbeat that carried it
    plan_epoch: str = ""  # the controller epoch of the command (a receipt never crosses epochs)

    def wire(self) -> WireAck:
        text = f"{self.code}: {self.message}" if self.code else self.message
        return WireAck(
            action_id=self.action_id,
            status=self.status.value,
            message=text[:500],
            duration_seconds=round(self.duration_seconds, 3),
            artifact_fetched=self.artifact_fetched,
        )


class ResidencyRecord(_Strict):
    model_id: str
    state: ResidencyState
    memory_mb: int = Field(default=0, ge=0)
    model_path: str = ""
    artifact_sha256: str | None = None
    loaded_at: float | None = None  # wall clock of READY (reported as an age)
    reason: str = ""


class VerifiedArtifact(_Strict):
    """A GGUF whose complete SHA-256 was checked, and the file facts it was checked at."""

    model_id: str
    path: str
    sha256: str
    size_bytes: int = Field(ge=0)
    mtime_ns: int = 0


class QueuedCommand(_Strict):
    command: WireCommand
    received_at: float = Field(ge=0)  # wall clock, for display only


class AgentState(_Strict):
    schema_version: Literal[1] = 1
    host_id: str
    highest_term: int = Field(default=0, ge=0)
    controller_id: str = ""
    # The controller's attestations (grid.runtime.controller.trust), echoed in heartbeats: the
    # proof of the fence's term, and the grant of each residency's route (by model id).
    term_proof: str = Field(default="", max_length=128)
    grants: dict[str, str] = Field(default_factory=dict)
    plan_epoch: str = ""
    plan_sequence: int = Field(default=0, ge=0)
    residencies: dict[str, ResidencyRecord] = Field(default_factory=dict)
    artifacts: dict[str, VerifiedArtifact] = Field(default_factory=dict)
    # Which artifacts a predictive prefetch downloaded, and whether each was ever warmed.
    predictive: dict[str, PredictiveRecord] = Field(default_factory=dict)
    in_flight: QueuedCommand | None = None
    queue: list[QueuedCommand] = Field(default_factory=list)
    receipts: list[Receipt] = Field(default_factory=list)
    protection: ProtectionState = Field(default_factory=ProtectionState)
    model_last_used_at: dict[str, float] = Field(default_factory=dict)
    saved_at: float = Field(default=0.0, ge=0)

    # -- receipts --------------------------------------------------------------------------
    def receipt(self, action_id: str) -> Receipt | None:
        return next((r for r in reversed(self.receipts) if r.action_id == action_id), None)

    def knows_action(self, action_id: str) -> bool:
        if self.receipt(action_id) is not None:
            return True
        if self.in_flight is not None and self.in_flight.command.action_id == action_id:
            return True
        return any(q.command.action_id == action_id for q in self.queue)

    def add_receipt(self, receipt: Receipt) -> None:
        self.receipts = [r for r in self.receipts if r.action_id != receipt.action_id]
        self.receipts.append(receipt)
        self.trim_receipts()

    def unacknowledged(self) -> list[Receipt]:
        return [r for r in self.receipts if not r.acknowledged]

    def mark_acknowledged(self, action_ids: set[str]) -> None:
        self.receipts = [
            r.model_copy(update={"acknowledged": True}) if r.action_id in action_ids else r
            for r in self.receipts
        ]
        self.trim_receipts()

    def trim_receipts(self) -> None:
        pending = [r for r in self.receipts if not r.acknowledged][-MAX_UNACKNOWLEDGED_RECEIPTS:]
        done = [r for r in self.receipts if r.acknowledged][-MAX_ACKNOWLEDGED_RECEIPTS:]
        keep = {id(r) for r in pending} | {id(r) for r in done}
        self.receipts = [r for r in self.receipts if id(r) in keep]

    def dependency_outcome(self, action_id: str) -> ReceiptStatus | None:
        found = self.receipt(action_id)
        return found.status if found is not None else None


def receipt_for(
    command: WireCommand | Mapping[str, Any],
    status: ReceiptStatus,
    code: str,
    message: str,
    now: float,
    *,
    duration_s: float = 0.0,
    fetched: bool = False,
) -> Receipt:
    """The receipt of one command, typed or as it came off the wire when it did not read
    (artifact_fetched only ever for a successful load)."""
    fields = command.model_dump() if isinstance(command, WireCommand) else command
    return Receipt(
        action_id=str(fields.get("action_id", "")),
        kind=str(fields.get("kind", "")),
        model_id=str(fields.get("model_id", "")),
        status=status,
        code=code,
        message=message[:400],
        duration_seconds=max(0.0, duration_s),
        artifact_fetched=fetched
        and status is ReceiptStatus.SUCCEEDED
        and fields.get("kind") == "load",
        finished_at=now,
        plan_epoch=str(fields.get("plan_generation") or "").split(":", 1)[0][:64],
    )


class Keeper:
    """The agent state behind one lock; every change is persisted before it becomes visible."""

    def __init__(self, store: AgentStateStore, state: AgentState, clock: Callable[[], float]):
        self._store = store
        self._state = state
        self._clock = clock
        self.lock = threading.RLock()
        # Why the last durable write failed ("" once one succeeds): the node reports itself
        # unhealthy with this reason and takes no commands while it is set.
        self.fault = ""

    def read(self) -> AgentState:
        with self.lock:
            return self._state.model_copy(deep=True)

    def update(self, change: Callable[[AgentState], None]) -> None:
        """Apply `change` to a copy, persist it, then publish it (OSError: nothing changed)."""
        with self.lock:
            draft = self._state.model_copy(deep=True)
            change(draft)
            draft.saved_at = self._clock()
            try:
                self._store.save(draft)
            except OSError as exc:
                self.fault = (
                    f"the state folder {self._store.state_dir} cannot be written "
                    f"({exc.strerror or type(exc).__name__})"
                )
                raise
            self.fault = ""
            self._state = draft


def recover_after_restart(state: AgentState, now: float) -> list[Receipt]:
    """A restart ends what was running (failed) and what was queued (cancelled)."""
    made: list[Receipt] = []
    if state.in_flight is not None:
        made.append(_ended(state.in_flight, ReceiptStatus.FAILED, "agent_restarted", now))
        state.in_flight = None
    for queued in state.queue:
        made.append(_ended(queued, ReceiptStatus.CANCELLED, "agent_restarted", now))
    state.queue = []
    for receipt in made:
        if receipt.action_id:
            state.add_receipt(receipt)
    return made


def _ended(queued: QueuedCommand, status: ReceiptStatus, code: str, now: float) -> Receipt:
    verb = "was interrupted by" if status is ReceiptStatus.FAILED else "never started before"
    return receipt_for(queued.command, status, code, f"the action {verb} an agent restart", now)


class AgentStateStore:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / STATE_NAME

    def load(self, host_id: str) -> AgentState:
        """The stored state, or a fresh one; a state of another host or unreadable refuses."""
        if not self.path.exists():
            return AgentState(host_id=host_id)
        try:
            state = AgentState.model_validate(read_json_file(self.path))  # depth-checked
        except (OSError, ValueError, ValidationError) as exc:
            raise GridError(
                "agent_state_corrupt",
                f"the node state {self.path} cannot be read ({type(exc).__name__}); the agent "
                "will not start blank because that would forget its controller-term fence",
                fix="inspect the file; if this host should start over, move it aside",
                path=str(self.path),
                next_command=f"mv {self.path} {self.path}.corrupt",
            ) from None
        if state.host_id != host_id:
            raise GridError(
                "agent_state_host_mismatch",
                f"{self.path} belongs to host {state.host_id!r}, not {host_id!r}",
                fix="use one state folder per host id",
                path=str(self.path),
                next_command="grid allocator node start --node-dir NEW_DIR --host-id ID",
            )
        return state

    def save(self, state: AgentState) -> None:
        """Atomic owner-only write; OSError propagates (callers decide what a failure means)."""
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_text(self.path, state.model_dump_json(indent=1) + "\n")


# ----------------------------------------------------------------------------- overrides


def override_path(state_dir: Path) -> Path:
    return state_dir / OVERRIDE_NAME


def read_override(state_dir: Path) -> LocalOverride | None:
    """The durable local override, or None. An unreadable file fails closed: quarantine."""
    path = override_path(state_dir)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError:
        raw = ""
    try:
        return LocalOverride.model_validate(loads_bounded(raw))
    except (ValueError, ValidationError):
        # An operator fence we cannot read must not silently become "no fence".
        return LocalOverride(kind=OverrideKind.QUARANTINE, reason=f"{OVERRIDE_NAME} is unreadable")


def write_override(state_dir: Path, override: LocalOverride) -> None:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(override_path(state_dir), override.model_dump_json(indent=1) + "\n")


def clear_override(state_dir: Path) -> bool:
    with contextlib.suppress(FileNotFoundError):
        override_path(state_dir).unlink()
        return True
    return False
