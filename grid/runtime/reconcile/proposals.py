"""Work the reconciler would like to do this tick, before the governors decide what runs.

A `Proposal` carries everything the governors order by (service class, replica round, remaining
cold-start path) and its dependency, either on another proposal of this tick or on an open
record. `TickState` collects proposals, deferrals, suppressed in-flight records and withdrawals
while the reconciler's stages run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grid.fleet import ActionKind, ActionRecord, Deferral, Residency, Urgency, Withdrawal
from grid.runtime.reconcile.codes import deferral_text, withdrawal_text
from grid.runtime.reconcile.history import ActionKey

KIND_ORDER = {
    ActionKind.LOAD: 0,
    ActionKind.WARM: 1,
    ActionKind.DRAIN: 2,
    ActionKind.UNLOAD: 3,
    ActionKind.EVICT: 4,
}


def busy_rank(kind: ActionKind, res: Residency) -> int:
    """A destructive step's order among its peers: 0 an unload (already drained and idle),
    1 a drain of an idle replica, 2 a drain of a busy one."""
    if kind is ActionKind.UNLOAD:
        return 0
    return 1 if res.active_requests == 0 else 2


@dataclass
class Proposal:
    kind: ActionKind
    host_id: str
    model_id: str
    memory_mb: int
    reason: str
    priority: int
    urgency: Urgency
    replica_round: int = 1
    cold_start_s: float = 0.0
    busy_rank: int = 0  # destructive: 0 drained and idle, 1 idle, 2 busy
    preemption: bool = False
    artifact_key: str = ""
    artifact_mb: int = 0  # disk a load needs (0: unknown or cached)
    depends_on: Proposal | None = None  # a prerequisite proposed in this tick
    depends_on_record: str | None = None  # ... or an open record's id
    claims_memory: bool = False  # a constructive step of a lifecycle not yet live on the host
    # The predictive cache (cache.py): a cache-only load or an exact evict, the artifact's
    # SHA-256, and the free disk a predictive load must leave (the governors' disk ledger).
    predictive: bool = False
    artifact_sha256: str = ""
    disk_reserve_mb: int = 0

    @property
    def key(self) -> ActionKey:
        return (self.kind, self.host_id, self.model_id)

    @property
    def routine_cleanup(self) -> bool:
        return self.urgency is Urgency.CLEANUP

    def sort_key(self) -> tuple[int, int, int, int, float, int, str, str, int]:
        """Scarce slots go to higher priority across lifecycle phases, then by service class,
        one replica round per model, the shortest remaining cold start, idle victims first;
        routine cleanup after all of that, and predictive prefetches after everything."""
        return (
            2 if self.urgency is Urgency.PREDICTIVE else (1 if self.routine_cleanup else 0),
            -self.priority,
            self.urgency.rank,
            self.replica_round,
            self.cold_start_s,
            self.busy_rank,
            self.model_id,
            self.host_id,
            KIND_ORDER.get(self.kind, 9),
        )


@dataclass
class TickState:
    now: float
    retry_soon: float
    proposals: list[Proposal] = field(default_factory=list)
    deferred: list[Deferral] = field(default_factory=list)
    deferred_keys: set[ActionKey] = field(default_factory=set)
    in_flight: dict[str, ActionRecord] = field(default_factory=dict)  # still wanted, by id
    withdrawn: dict[str, Withdrawal] = field(default_factory=dict)
    blocked_models: set[str] = field(default_factory=set)
    # Hosts per model whose replica is taken out of service this tick (open or proposed drains):
    # every destructive path checks its floors against the same set.
    removing: dict[str, set[str]] = field(default_factory=dict)

    def defer(
        self,
        kind: ActionKind,
        host_id: str,
        model_id: str,
        code: str,
        *,
        retry_at: float | None = None,
        detail: str = "",
    ) -> None:
        if (kind, host_id, model_id) in self.deferred_keys:
            return  # the first reason recorded for this action is the most specific one
        self.deferred_keys.add((kind, host_id, model_id))
        message = deferral_text(code)
        if detail:
            message = f"{message} ({detail})"
        self.deferred.append(
            Deferral(
                kind=kind,
                host_id=host_id,
                model_id=model_id,
                code=code,
                message=message,
                retry_at=retry_at if retry_at is not None else self.retry_soon,
            )
        )

    def withdraw(self, record: ActionRecord, code: str) -> None:
        if record.action_id in self.withdrawn:
            return
        self.in_flight.pop(record.action_id, None)
        self.withdrawn[record.action_id] = Withdrawal(
            action_id=record.action_id,
            kind=record.kind,
            host_id=record.host_id,
            model_id=record.model_id,
            code=code,
            message=withdrawal_text(code),
            delivered=record.was_delivered,
        )

    def removing_of(self, model_id: str) -> frozenset[str]:
        return frozenset(self.removing.get(model_id, ()))

    def note_removal(self, model_id: str, host_id: str) -> None:
        self.removing.setdefault(model_id, set()).add(host_id)

    def keep(self, record: ActionRecord) -> None:
        """An open record whose work is still wanted: its equivalent is not proposed again."""
        if record.action_id not in self.withdrawn:
            self.in_flight[record.action_id] = record

    def keep_open(self, record: ActionRecord | None) -> ActionRecord | None:
        """Keep a key's open record unless this tick withdrew it; None when there is none."""
        if record is None or self.is_withdrawn(record):
            return None
        self.keep(record)
        return record

    def is_withdrawn(self, record: ActionRecord) -> bool:
        return record.action_id in self.withdrawn
