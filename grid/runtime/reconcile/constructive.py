"""Availability work: LOAD and WARM for every managed replica the plan wants but the fleet lacks.

A warm depends on a preceding load when the exact artifact is not cached; a deferred load
defers its warm. New replicas of one model are numbered in rounds (after the replicas already
serving or starting), so the governors can give every model its k-th replica before any model
its (k+1)-th. Pins and the min_replicas baseline are `required`; further replicas carry the
demand's evidence (direct or inferred); replicas beyond the demand target (the portfolio's
workload replicas) are speculative and run as `inferred`, behind direct demand.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import LIVE_STATES, ActionKind, Evidence, ModelProfile, Urgency
from grid.planner import explain_reasons, pair_refusals
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import Proposal, TickState
from grid.runtime.reconcile.safety import awaiting_heartbeat, backoff_blocker, defer_blocked
from grid.runtime.reconcile.view import FleetView


def artifact_key(prof: ModelProfile) -> str:
    return prof.artifact_sha256 or f"model:{prof.model_id}"


def replica_urgency(view: FleetView, model_id: str, host_id: str, replica_round: int) -> Urgency:
    target = view.targets.get(model_id)
    if view.is_pinned(model_id, host_id):
        return Urgency.REQUIRED
    if target is None:
        return Urgency.DIRECT
    if replica_round <= max(target.baseline, target.pins):
        return Urgency.REQUIRED
    if replica_round > target.desired:
        # Beyond what baseline and direct demand ask for: a portfolio (workload) replica, which
        # is speculative: ranked behind direct demand, with no more authority than inference.
        return Urgency.INFERRED
    return Urgency.INFERRED if target.evidence is Evidence.INFERRED else Urgency.DIRECT


def startup_s(view: FleetView, prof: ModelProfile, host_id: str, cached: bool) -> float:
    """The replica's remaining cold-start path on that host (its own learned timings)."""
    return view.snap.startup_s(prof, host_id, cached=cached)


@dataclass(frozen=True)
class _Shape:
    """What the load and the warm of one planned replica share."""

    prof: ModelProfile
    host_id: str
    memory_mb: int
    urgency: Urgency
    replica_round: int
    cached: bool
    cold_start_s: float

    def make(self, kind: ActionKind, reason: str) -> Proposal:
        return Proposal(
            kind=kind,
            host_id=self.host_id,
            model_id=self.prof.model_id,
            memory_mb=self.memory_mb,
            reason=reason,
            priority=self.prof.priority,
            urgency=self.urgency,
            replica_round=self.replica_round,
            cold_start_s=self.cold_start_s,
            artifact_key=artifact_key(self.prof),
            claims_memory=True,
        )


def propose_constructive(view: FleetView, history: HistoryIndex, tick: TickState) -> None:
    for model_id, hosts in sorted(view.desired_hosts.items()):
        prof = view.profiles.get(model_id)
        if prof is None:
            continue
        in_service = 0
        missing: list[str] = []
        for host_id in hosts:
            res = view.residency(model_id, host_id)
            if res is not None and not res.is_managed:
                in_service += 1  # an external or manual replica: inventory, never actuated
                continue
            if view.reusable_incumbent(model_id, host_id):
                in_service += 1
                for record in history.open_constructive(model_id, host_id):
                    tick.keep(record)
                continue
            missing.append(host_id)

        def started_first(host_id: str, model_id: str = model_id) -> tuple[int, int, str]:
            started = bool(history.open_constructive(model_id, host_id))
            cached = view.exact_cached(model_id, host_id)
            return (0 if started else 1, 0 if cached else 1, host_id)

        for index, host_id in enumerate(sorted(missing, key=started_first)):
            replica_round = in_service + index + 1
            urgency = replica_urgency(view, model_id, host_id, replica_round)
            propose_replica(view, history, tick, prof, host_id, replica_round, urgency)


def propose_replica(
    view: FleetView,
    history: HistoryIndex,
    tick: TickState,
    prof: ModelProfile,
    host_id: str,
    replica_round: int,
    urgency: Urgency,
) -> None:
    model_id = prof.model_id
    host = view.hosts.get(host_id)
    if host is None:
        return
    res = view.residency(model_id, host_id)
    if res is not None and res.state in LIVE_STATES:
        # Draining, failed or another revision: never warmed over in place.
        tick.defer(ActionKind.WARM, host_id, model_id, "residency_not_reusable")
        return
    cached = view.exact_cached(model_id, host_id)
    refusals = view.refusals[host_id] + pair_refusals(prof, host, cached=cached)
    if refusals:
        tick.defer(
            ActionKind.WARM, host_id, model_id, "host_ineligible", detail=explain_reasons(refusals)
        )
        return
    memory = view.desired.get((model_id, host_id), prof.memory_mb)
    cold = startup_s(view, prof, host_id, cached)
    shape = _Shape(prof, host_id, memory, urgency, replica_round, cached, cold)
    load: Proposal | None = None
    load_record: str | None = None
    if not cached:
        load_key = (ActionKind.LOAD, host_id, model_id)
        open_load = tick.keep_open(history.open_record(load_key))
        if open_load is not None:
            load_record = open_load.action_id
        elif not awaiting_heartbeat(view, history, load_key):
            blocker = backoff_blocker(view, history, load_key)
            if blocker is not None:
                defer_blocked(tick, load_key, blocker)
                tick.defer(
                    ActionKind.WARM,
                    host_id,
                    model_id,
                    "dependency_deferred",
                    retry_at=blocker.retry_at,
                    detail="its load is in failure backoff",
                )
                return
            load = shape.make(
                ActionKind.LOAD, "fetch and verify the exact artifact for a planned replica"
            )
            load.artifact_mb = prof.artifact_size_mb
            tick.proposals.append(load)
    warm_key = (ActionKind.WARM, host_id, model_id)
    if tick.keep_open(history.open_record(warm_key)) is not None:
        return
    if awaiting_heartbeat(view, history, warm_key):
        return
    blocker = backoff_blocker(view, history, warm_key)
    if blocker is not None:
        defer_blocked(tick, warm_key, blocker)
        return
    warm = shape.make(ActionKind.WARM, "start the planned replica and wait for its readiness probe")
    warm.depends_on = load
    warm.depends_on_record = load_record
    tick.proposals.append(warm)
