"""Staged preemption: release a victim's memory first, place the beneficiary on a later tick.

The plan names each victim and its beneficiary; the victim is not in the plan's assignments and
the beneficiary stays unsatisfied until a later heartbeat proves the memory free. Here:
- when the beneficiary's profile has an operator-authorized artifact source, its weights are
  fetched to disk first (a disk-only LOAD: no memory, no slot) and the victim's drain depends on
  that fetch; a fetch in failure backoff does not hold the drain back (the drain is no less safe);
- the victim drains, inheriting the beneficiary's priority and service class, and unloads once it
  reports no requests in flight;
- already-drained and idle victims are released before busy ones (`busy_rank`).
Every victim passes the one gate list of `gates.py` (the `preemption` path): pinned, manual-host
and external victims are never actuated, whatever a plan says; only the wait for a READY
replacement is left out (the planner's explicit exception to make-before-break: the victim
drains first). The managed baseline and failure-domain floors of a lower priority class yield to
a preemption that the planner's rule (`grid/planner/preemption_rules.py`) authorizes, and only
when the plan is current (solved for this tick's inputs); a stale plan's preemption keeps them.
"""

from __future__ import annotations

from grid.fleet import LIVE_STATES, ActionKind, Preemption, ResidencyState
from grid.planner import pair_refusals
from grid.runtime.reconcile.constructive import artifact_key, replica_urgency, startup_s
from grid.runtime.reconcile.gates import (
    Candidate,
    GateContext,
    Path,
    admitted_after_standing,
    refused_standing,
)
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import Proposal, TickState, busy_rank
from grid.runtime.reconcile.safety import awaiting_heartbeat, backoff_blocker, defer_blocked
from grid.runtime.reconcile.view import FleetView, Key


def preemption_victims(view: FleetView) -> dict[Key, Preemption]:
    """One entry per victim residency: the highest-priority beneficiary that names it.

    A repack (`relocated_to`) names no victim: the moving incumbent's old copy is an ordinary
    obsolete replica, drained by cleanup only once its new replica is READY.
    """
    out: dict[Key, Preemption] = {}
    for p in view.plan.preemptions:
        if p.relocated_to is not None:
            continue
        key = (p.victim_model_id, p.host_id)
        current = out.get(key)
        if current is None or _priority(view, p) > _priority(view, current):
            out[key] = p
    return out


def _priority(view: FleetView, p: Preemption) -> int:
    prof = view.profiles.get(p.beneficiary_model_id)
    return prof.priority if prof is not None else 0


def propose_preemptions(
    view: FleetView, history: HistoryIndex, tick: TickState, victims: dict[Key, Preemption]
) -> None:
    ctx = GateContext(view, history, tick.blocked_models)
    beneficiaries_noted: set[Key] = set()
    for p in view.plan.preemptions:
        ben_key = (p.beneficiary_model_id, p.host_id)
        if p.relocated_to is not None and ben_key not in view.desired:
            beneficiaries_noted.add(ben_key)
            tick.defer(
                ActionKind.WARM,
                p.host_id,
                p.beneficiary_model_id,
                "repack_staged",
                detail=f"{p.victim_model_id} moves to {p.relocated_to} first",
            )
    for (victim_id, host_id), p in sorted(victims.items()):
        host = view.hosts.get(host_id)
        beneficiary = view.profiles.get(p.beneficiary_model_id)
        res = view.residency(victim_id, host_id)
        if host is None or beneficiary is None:
            continue
        ben_key = (beneficiary.model_id, host_id)
        if ben_key not in beneficiaries_noted and ben_key not in view.desired:
            beneficiaries_noted.add(ben_key)
            tick.defer(
                ActionKind.WARM,
                host_id,
                beneficiary.model_id,
                "preemption_staged",
                detail=f"victim {victim_id} on {host_id}",
            )
        if res is None or res.state not in LIVE_STATES:
            continue  # already released: a later plan assigns the beneficiary
        kind = ActionKind.DRAIN if res.state is ResidencyState.READY else ActionKind.UNLOAD
        candidate = Candidate(
            kind,
            victim_id,
            host_id,
            res,
            Path.PREEMPTION,
            tick.removing_of(victim_id),
            beneficiary=beneficiary.model_id,
        )
        victim_detail = f"named as a preemption victim for {beneficiary.model_id}"
        if refused_standing(ctx, tick, candidate, detail=victim_detail):
            continue
        ben_round = len(view.counted_hosts(beneficiary.model_id)) + 1
        urgency = replica_urgency(view, beneficiary.model_id, host_id, ben_round)
        cached = view.exact_cached(beneficiary.model_id, host_id)
        prefetch, prefetch_record = _prefetch(view, history, tick, p, cached)
        if not admitted_after_standing(ctx, tick, candidate):
            continue
        tick.proposals.append(
            Proposal(
                kind=kind,
                host_id=host_id,
                model_id=victim_id,
                memory_mb=res.memory_mb,
                reason=f"preemption: release memory for {beneficiary.model_id}",
                priority=beneficiary.priority,
                urgency=urgency,
                replica_round=ben_round,
                cold_start_s=startup_s(view, beneficiary, host_id, cached),
                busy_rank=busy_rank(kind, res),
                preemption=True,
                depends_on=prefetch if kind is ActionKind.DRAIN else None,
                depends_on_record=prefetch_record if kind is ActionKind.DRAIN else None,
            )
        )


def _prefetch(
    view: FleetView, history: HistoryIndex, tick: TickState, p: Preemption, cached: bool
) -> tuple[Proposal | None, str | None]:
    """A disk-only LOAD of the beneficiary's weights before its victim drains."""
    beneficiary = view.profiles[p.beneficiary_model_id]
    host = view.hosts[p.host_id]
    model_id = beneficiary.model_id
    if beneficiary.artifact_source is None or cached or view.is_live(model_id, p.host_id):
        return None, None
    key = (ActionKind.LOAD, p.host_id, model_id)
    open_record = tick.keep_open(history.open_record(key))
    if open_record is not None:
        return None, open_record.action_id
    if awaiting_heartbeat(view, history, key):
        return None, None
    refusals = view.refusals[p.host_id] + pair_refusals(beneficiary, host, cached=False)
    if refusals:
        return None, None  # the beneficiary could not use this host anyway
    if host.disk_free_mb is not None and host.disk_free_mb < beneficiary.artifact_size_mb:
        tick.defer(
            ActionKind.LOAD,
            p.host_id,
            model_id,
            "insufficient_disk",
            detail=f"needs {beneficiary.artifact_size_mb} MB, {host.disk_free_mb} MB free",
        )
        return None, None
    blocker = backoff_blocker(view, history, key)
    if blocker is not None:
        defer_blocked(tick, key, blocker)
        return None, None
    ben_round = len(view.counted_hosts(model_id)) + 1
    proposal = Proposal(
        kind=ActionKind.LOAD,
        host_id=p.host_id,
        model_id=model_id,
        memory_mb=0,
        reason=f"preemption: fetch weights to disk before {p.victim_model_id} drains",
        priority=beneficiary.priority,
        urgency=replica_urgency(view, model_id, p.host_id, ben_round),
        replica_round=ben_round,
        cold_start_s=startup_s(view, beneficiary, p.host_id, False),
        preemption=True,
        artifact_key=artifact_key(beneficiary),
        artifact_mb=beneficiary.artifact_size_mb,
    )
    tick.proposals.append(proposal)
    return proposal, None
