"""Mutation governors: who gets the scarce execution slots, in what order (pure).

Limits, all counting records that hold a slot (open, or withdrawn after delivery without a
receipt) plus what this tick admits:
- `policy.max_concurrent_mutations` fleet-wide and `policy.max_host_mutations` per host;
- `policy.artifact_fanout` concurrent loads of one exact artifact: a third load of the same SHA
  waits while a different artifact may use the remaining budget;
- a memory, slot and disk ledger per host: memory promised to lifecycles still in flight (not
  yet visible in a heartbeat) is not offered again, so in-flight work never overcommits a host.
Order: `Proposal.sort_key` (priority across lifecycle phases, service class, replica round,
cold start, idle victims first; routine cleanup last). A dependent action waits for its
prerequisite. When a slot limit stops a proposal, an undelivered open action of a strictly
lower class yields its slot (a leaf warm before its load, the newest first); equal classes are
never churned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from grid.fleet import CONSTRUCTIVE_KINDS, Action, ActionKind, ActionRecord, Policy
from grid.planner import allocatable_mb
from grid.runtime.reconcile.constructive import artifact_key
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import Proposal, TickState
from grid.runtime.reconcile.view import FleetView

ServiceClass = tuple[int, int]  # (-priority, urgency rank): lower sorts first, runs first


def service_class(priority: int, urgency_rank: int) -> ServiceClass:
    return (-priority, urgency_rank)


@dataclass
class Governor:
    view: FleetView
    history: HistoryIndex
    tick: TickState
    allow_yield: bool = True
    global_used: int = 0
    host_used: dict[str, int] = field(default_factory=dict)
    artifact_used: dict[str, int] = field(default_factory=dict)
    reserved_mb: dict[str, int] = field(default_factory=dict)
    reserved_models: dict[str, set[str]] = field(default_factory=dict)
    reserved_disk: dict[str, int] = field(default_factory=dict)
    yieldable: list[ActionRecord] = field(default_factory=list)

    @property
    def policy(self) -> Policy:
        return self.view.policy

    def __post_init__(self) -> None:
        for record in self.history.slot_holders():
            if self.tick.is_withdrawn(record) and not record.was_delivered:
                continue  # withdrawn before delivery: it will never run
            self._count(record.host_id, record.kind, self._artifact_of(record), +1)
            if record.kind not in CONSTRUCTIVE_KINDS:
                continue
            self._reserve(record.host_id, record.model_id, record.memory_mb)
            if record.kind is ActionKind.LOAD:
                self._reserve_disk(record.host_id, record.model_id)
            if record.is_open and not record.was_delivered:
                # Undelivered and still wanted (one withdrawn this tick was skipped above).
                self.yieldable.append(record)

    # -- bookkeeping -------------------------------------------------------------------------
    def _artifact_of(self, record: ActionRecord) -> str:
        if record.artifact_key:
            return record.artifact_key
        prof = self.view.profiles.get(record.model_id)
        return artifact_key(prof) if prof is not None else f"model:{record.model_id}"

    def _count(self, host_id: str, kind: ActionKind, artifact: str, delta: int) -> None:
        self.global_used += delta
        self.host_used[host_id] = self.host_used.get(host_id, 0) + delta
        if kind is ActionKind.LOAD:
            self.artifact_used[artifact] = self.artifact_used.get(artifact, 0) + delta

    def _reserve(self, host_id: str, model_id: str, memory_mb: int) -> None:
        """Promise memory to a lifecycle that a heartbeat does not show yet (once per model)."""
        if memory_mb <= 0 or self.view.is_live(model_id, host_id) or host_id not in self.view.hosts:
            return
        models = self.reserved_models.setdefault(host_id, set())
        if model_id in models:
            return
        models.add(model_id)
        self.reserved_mb[host_id] = self.reserved_mb.get(host_id, 0) + memory_mb

    def _reserve_disk(self, host_id: str, model_id: str) -> None:
        prof = self.view.profiles.get(model_id)
        if prof is None or host_id not in self.view.hosts:
            return
        if self.view.exact_cached(model_id, host_id):
            return
        self.reserved_disk[host_id] = self.reserved_disk.get(host_id, 0) + prof.artifact_size_mb

    # -- checks --------------------------------------------------------------------------------
    def _ledger_refusal(self, p: Proposal) -> tuple[str, str] | None:
        host = self.view.hosts[p.host_id]
        if p.claims_memory and p.memory_mb > 0 and not self.view.is_live(p.model_id, p.host_id):
            promised = self.reserved_models.get(p.host_id, set())
            if p.model_id not in promised:
                alloc = allocatable_mb(host)
                headroom = math.ceil(self.policy.memory_headroom_fraction * alloc)
                free = alloc - headroom - self.view.live_mb(p.host_id)
                free -= self.reserved_mb.get(p.host_id, 0)
                if p.memory_mb > free:
                    return "insufficient_memory", f"needs {p.memory_mb} MB, {max(0, free)} MB free"
                if host.max_models:
                    models = self.view.live_models(p.host_id) | promised | {p.model_id}
                    if len(models) > host.max_models:
                        return "insufficient_slots", f"{host.max_models} model slot(s)"
        if p.kind is ActionKind.LOAD and host.disk_free_mb is not None and p.artifact_mb:
            free_disk = host.disk_free_mb - self.reserved_disk.get(p.host_id, 0)
            if p.artifact_mb > free_disk:
                return "insufficient_disk", f"needs {p.artifact_mb} MB, {max(0, free_disk)} free"
            if p.artifact_mb + p.disk_reserve_mb > free_disk:  # a predictive load's reserve
                return "predictive_reserve", (
                    f"needs {p.artifact_mb} MB and leaves {p.disk_reserve_mb} MB free; "
                    f"{max(0, free_disk)} MB free"
                )
        if p.predictive and p.kind is ActionKind.LOAD and host.disk_free_mb is None:
            return "no_disk_telemetry", "the host reports no free disk"
        return None

    def _slot_refusal(self, p: Proposal) -> str | None:
        if self.global_used >= self.policy.max_concurrent_mutations:
            return "governor_global_limit"
        if self.host_used.get(p.host_id, 0) >= self.policy.max_host_mutations:
            return "governor_host_limit"
        return None

    def _try_yield(self, p: Proposal, refusal: str) -> bool:
        """Withdraw one undelivered, strictly lower-class constructive record to free a slot."""
        if not self.allow_yield or p.routine_cleanup:
            return False
        mine = service_class(p.priority, p.urgency.rank)
        candidates = [
            r
            for r in self.yieldable
            if service_class(r.priority, r.urgency.rank) > mine
            and (refusal == "governor_global_limit" or r.host_id == p.host_id)
        ]
        if not candidates:
            return False
        victim = max(
            candidates,
            key=lambda r: (
                service_class(r.priority, r.urgency.rank),
                1 if r.kind is ActionKind.WARM else 0,  # a leaf before its prerequisite
                r.created_at,
                r.action_id,
            ),
        )
        self._withdraw(victim)
        if victim.kind is ActionKind.LOAD:
            for dependent in [r for r in self.yieldable if victim.action_id in r.dependencies]:
                self._withdraw(dependent)
        return True

    def _withdraw(self, record: ActionRecord) -> None:
        self.tick.withdraw(record, "yield_to_higher_class")
        self.yieldable.remove(record)
        self._count(record.host_id, record.kind, self._artifact_of(record), -1)
        if record.model_id in self.reserved_models.get(record.host_id, set()):
            others = [
                r
                for r in self.history.slot_holders()
                if r.host_id == record.host_id
                and r.model_id == record.model_id
                and r.action_id != record.action_id
                and not self.tick.is_withdrawn(r)
            ]
            if not others:
                self.reserved_models[record.host_id].discard(record.model_id)
                self.reserved_mb[record.host_id] -= record.memory_mb

    # -- the pass ------------------------------------------------------------------------------
    def admit(self, proposals: list[Proposal]) -> list[Action]:
        accepted: dict[int, Action] = {}
        actions: list[Action] = []
        for p in sorted(proposals, key=Proposal.sort_key):
            dependencies: list[str] = []
            if p.depends_on is not None:
                prerequisite = accepted.get(id(p.depends_on))
                if prerequisite is not None:
                    dependencies.append(prerequisite.action_id)
                elif not (p.preemption and p.kind is ActionKind.DRAIN):
                    # A preemption drain does not wait on a deferred prefetch: the fetch only
                    # speeds the beneficiary up, and the drain is no less safe without it.
                    self.tick.defer(
                        p.kind,
                        p.host_id,
                        p.model_id,
                        "dependency_deferred",
                        detail=f"{p.depends_on.kind.value} on {p.host_id} was deferred",
                    )
                    continue
            if p.depends_on_record is not None:
                dependencies.append(p.depends_on_record)
            ledger = self._ledger_refusal(p)
            if ledger is not None:
                self.tick.defer(p.kind, p.host_id, p.model_id, ledger[0], detail=ledger[1])
                continue
            if (
                p.kind is ActionKind.LOAD
                and self.artifact_used.get(p.artifact_key, 0) >= self.policy.artifact_fanout
            ):
                self.tick.defer(p.kind, p.host_id, p.model_id, "artifact_fanout")
                continue
            refusal = self._slot_refusal(p)
            while refusal is not None and self._try_yield(p, refusal):
                refusal = self._slot_refusal(p)
            if refusal is not None:
                self.tick.defer(p.kind, p.host_id, p.model_id, refusal)
                continue
            action_id, attempt = self.history.next_id(p.key)
            action = Action(
                action_id=action_id,
                kind=p.kind,
                host_id=p.host_id,
                model_id=p.model_id,
                memory_mb=p.memory_mb,
                dependencies=dependencies,
                reason=p.reason,
                not_before=self.view.now,
                attempt=attempt,
                priority=p.priority,
                urgency=p.urgency,
                preemption=p.preemption,
                artifact_key=p.artifact_key,
                predictive=p.predictive,
                artifact_sha256=p.artifact_sha256,
            )
            accepted[id(p)] = action
            actions.append(action)
            self._count(p.host_id, p.kind, p.artifact_key, +1)
            if p.claims_memory:
                self._reserve(p.host_id, p.model_id, p.memory_mb)
            if p.kind is ActionKind.LOAD and p.artifact_mb:
                self.reserved_disk[p.host_id] = self.reserved_disk.get(p.host_id, 0) + (
                    p.artifact_mb
                )
        return actions
