"""The controller's state object: what it knows between calls, durable and not.

`ControllerState` holds the durable facts (mode, policy, profiles, tombstones, the generation
counter, the highest term, the command book, learned timings, the demand tracker, last-used
watermarks) beside the live ones (revisions, the last tick's results, counters, warnings).
`restore_state` builds it from a store (quarantining a document that does not match the schema)
and `ControllerState.document` is the inverse: the schema-v1 document `state.py` defines.
It decides nothing and touches no clock; the collaborators in this package act on it.
"""

from __future__ import annotations

import secrets
from collections.abc import Container
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, overload

from pydantic import ValidationError

from grid.demand import DemandConfig, DemandTracker, WorkloadTracker
from grid.fleet import (
    ADMITTING_STATES,
    Action,
    Deferral,
    GridError,
    Host,
    HostState,
    Mode,
    ModelProfile,
    Plan,
    PlanGeneration,
    Policy,
    ReconcileResult,
    Tombstone,
)
from grid.runtime.controller.commands import CommandBook
from grid.runtime.controller.engine_restarts import Grants
from grid.runtime.controller.evidence_store import EvidenceKeeper, RequestSignals
from grid.runtime.controller.externals import ExternalInventory
from grid.runtime.controller.generation import GenerationCounter
from grid.runtime.controller.reports import Counters, TickReport
from grid.runtime.controller.state import ClientKeyRecord, ControllerDocument
from grid.runtime.controller.store import Store
from grid.runtime.controller.timings import TimingTable

MAX_WARNINGS = 32


class Warnings(dict[str, str]):
    """Operator-visible warnings by code, bounded (a new code beyond the bound is dropped)."""

    def warn(self, code: str, message: str) -> None:
        if not code:
            return
        if code not in self and len(self) >= MAX_WARNINGS:
            return
        self[code] = message


@dataclass
class Revisions:
    """Causal revisions (see `core.py`): every input advances `dirty`, safety inputs `safety`."""

    dirty: int = 1
    safety: int = 1
    processed: int = 0
    success: int = 0
    success_safety: int = 0

    def bump(self, *, safety: bool) -> int:
        self.dirty += 1
        if safety:
            self.safety += 1
        return self.dirty


@dataclass
class LastTick:
    """What the last ticks left behind for reuse, delivery and status."""

    plan: Plan | None = None
    result: ReconcileResult | None = None
    generation: PlanGeneration | None = None
    plan_digest: str = ""
    solved_at: float = 0.0
    report: TickReport | None = None
    success_at: float | None = None
    deferred: list[Deferral] = field(default_factory=list)
    proposed: list[Action] = field(default_factory=list)


@dataclass
class ControllerState:
    mode: Mode
    policy: Policy
    profiles: dict[str, ModelProfile]
    tombstones: dict[str, Tombstone]
    generation: GenerationCounter
    max_term: int
    book: CommandBook
    timings: TimingTable
    model_last_used_at: dict[str, float]
    tracker: DemandTracker
    restored: bool
    signals: RequestSignals  # workload demand, outcome evidence, workflows (issue 9)
    warnings: Warnings = field(default_factory=Warnings)
    revisions: Revisions = field(default_factory=Revisions)
    last: LastTick = field(default_factory=LastTick)
    counters: Counters = field(default_factory=Counters)
    host_drains: dict[str, str] = field(default_factory=dict)  # operator drains: id -> reason

    def planning_hosts(self, live: list[Host], registered: Container[str]) -> list[Host]:
        """The planner's hosts: the live ones with operator drains applied, then the external
        endpoints (a name a registered node already uses is skipped)."""
        return self.drained(live) + self.externals.hosts(registered)

    def drained(self, hosts: list[Host]) -> list[Host]:
        """`hosts` with every operator-drained host that admits work shown as draining."""
        if not self.host_drains:
            return hosts
        return [
            h.model_copy(update={"state": HostState.DRAINING})
            if h.host_id in self.host_drains and h.state in ADMITTING_STATES
            else h
            for h in hosts
        ]

    externals: ExternalInventory = field(default_factory=ExternalInventory)  # issue 21
    # Replaced (never changed in place) on every change: readers index it by identity.
    client_keys: list[ClientKeyRecord] = field(default_factory=list)
    restart_grants: Grants = field(default_factory=dict)  # live only (engine_restarts.py)

    def configure_tracking(self) -> None:
        """After a profile change: demand series, learned timings and outcome evidence follow
        the profiles."""
        self.tracker.configure(self.profiles, retiring=self.tombstones)
        self.signals.evidence.forget(self.profiles)
        self.timings.forget_other_revisions(
            {m: p.artifact_sha256 or "" for m, p in self.profiles.items()}
        )

    def document(self, now: float) -> dict[str, Any]:
        book = self.book
        book.trim()
        doc = ControllerDocument(
            saved_at=now,
            mode=self.mode,
            policy=self.policy,
            profiles=[self.profiles[m] for m in sorted(self.profiles)],
            tombstones=[self.tombstones[m] for m in sorted(self.tombstones)],
            generation=self.generation.to_state(),
            max_term=self.max_term,
            issued_seq=book.issued_seq,
            records=book.history(),
            commands=[c for _r, c in book.pending_commands()]
            + [
                book.commands[r.action_id]
                for r in book.withdrawn_destructive()
                if r.action_id in book.commands
            ],
            timings=self.timings.to_state(),
            demand=self.tracker.to_state(),
            model_last_used_at=self.model_last_used_at,
            workloads=self.signals.workloads.to_state(),
            evidence=self.signals.evidence.to_state(),
            workflow=self.signals.workflow.to_state(),
            host_drains=dict(sorted(self.host_drains.items())),
            externals=self.externals.to_state(),
            client_keys=self.client_keys,
        )
        return doc.model_dump(mode="json")


def restore_state(store: Store, demand: DemandConfig) -> ControllerState:
    """The state a store holds, or a fresh one (with the reason among its warnings)."""
    warnings = Warnings()
    loaded = store.load()
    warnings.warn(loaded.warning_code, loaded.warning)
    doc: ControllerDocument | None = None
    if loaded.document is not None:
        try:
            doc = ControllerDocument.model_validate(loaded.document)
        except ValidationError:
            again = store.quarantine("it does not match the controller state schema")
            warnings.warn(again.warning_code, again.warning)
    restored = doc is not None
    doc = doc or ControllerDocument()
    profiles = {p.model_id: p for p in doc.profiles}
    tombstones = {t.model_id: t for t in doc.tombstones if t.model_id not in profiles}
    state = ControllerState(
        mode=doc.mode,
        policy=doc.policy,
        profiles=profiles,
        tombstones=tombstones,
        generation=(
            GenerationCounter.from_state(doc.generation)
            if doc.generation
            else GenerationCounter.fresh()
        ),
        max_term=doc.max_term,
        book=CommandBook(doc.records, doc.commands, doc.issued_seq),
        timings=TimingTable.from_state(doc.timings),
        model_last_used_at=dict(doc.model_last_used_at),
        tracker=_restore_tracker(doc.demand, demand, warnings),
        restored=restored,
        signals=restore_signals(doc, demand, warnings),
        warnings=warnings,
        host_drains=dict(doc.host_drains),
        externals=ExternalInventory.from_state(doc.externals),
        client_keys=list(doc.client_keys),
    )
    state.tracker.configure(state.profiles, retiring=state.tombstones)
    return state


def _restore_tracker(
    saved: dict[str, Any], config: DemandConfig, warnings: Warnings
) -> DemandTracker:
    if saved:
        try:
            return DemandTracker.from_state(saved, config)
        except GridError as err:
            warnings.warn("demand_state_dropped", f"the demand history was dropped: {err.message}")
    return DemandTracker(config=config)


def workload_config(demand: DemandConfig, policy: Policy) -> DemandConfig:
    """One vocabulary: the workload tracker counts exactly the policy's words (the ones the
    snapshot accepts), with the demand tracker's buckets and smoothing."""
    return replace(demand, workloads=tuple(policy.workload_vocabulary))


def restore_signals(
    doc: ControllerDocument, demand: DemandConfig, warnings: Warnings
) -> RequestSignals:
    """Workload tracker, evidence store and workflow transitions from the document; a part
    that does not load is dropped with a warning and starts empty (the others stay)."""
    config = workload_config(demand, doc.policy)
    evidence, workloads = EvidenceKeeper(), WorkloadTracker(config)
    try:
        evidence = EvidenceKeeper.from_state(doc.evidence)
    except GridError as err:
        warnings.warn("evidence_state_dropped", f"the outcome evidence was dropped: {err.message}")
    if doc.workloads:
        try:
            workloads = WorkloadTracker.from_state(doc.workloads, config)
        except GridError as err:
            warnings.warn(
                "workload_state_dropped", f"the workload history was dropped: {err.message}"
            )
    signals = RequestSignals(
        config, secret=secrets.token_bytes(32), evidence=evidence, workloads=workloads
    )
    try:
        signals.workflow.restore(doc.workflow)
    except GridError as err:
        warnings.warn("workflow_state_dropped", f"learned workflows were dropped: {err.message}")
    evidence.forget({p.model_id: p for p in doc.profiles})
    return signals


T = TypeVar("T")


class StateField(Generic[T]):
    """An owner attribute that lives in a nested object by `path` (the controller keeps its
    public attribute names while the state object and collaborators hold the values)."""

    def __init__(self, *path: str) -> None:
        self.path = path

    @overload
    def __get__(self, obj: None, owner: type) -> StateField[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object | None, owner: type) -> T | StateField[T]:
        if obj is None:
            return self
        target: Any = obj
        for part in self.path:
            target = getattr(target, part)
        return target  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: T) -> None:
        target: Any = obj
        for part in self.path[:-1]:
            target = getattr(target, part)
        setattr(target, self.path[-1], value)
