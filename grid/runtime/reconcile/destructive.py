"""Destructive work: drain and unload obsolete or retired managed residencies, safely.

Order of the checks for one residency: ownership (managed, not pinned, not on a manual host),
reachability, a destructive block left by an earlier withdrawal, a lifecycle still running on
it, then for a serving replica minimum residency, scale-down cooldown and last-replica
protection, and for an UNLOAD drain-before-unload. A retired model (tombstone, no profile)
converges to zero: its copies drain without availability checks, even on hosts that return
long after the profile was removed.

Before any of that, `revalidate_open_batches` re-checks the drains already issued: if fresh
evidence makes one unsafe, every open destructive record of that model is withdrawn and further
destructive work for it waits (see `safety.destructive_postcondition`).
"""

from __future__ import annotations

from grid.fleet.actions import DESTRUCTIVE_KINDS, ActionKind, ActionRecord, Urgency
from grid.fleet.models import LIVE_STATES, Preemption, Residency, ResidencyState
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import Proposal, TickState
from grid.runtime.reconcile.safety import (
    Blocker,
    awaiting_heartbeat,
    backoff_blocker,
    defer_blocked,
    destructive_postcondition,
    removal_blocker,
    residency_age_blocker,
    unload_blocker,
)
from grid.runtime.reconcile.view import FleetView, Key


def serving(view: FleetView, model_id: str, host_id: str) -> bool:
    """READY on an admitting host: it carries traffic (whatever its artifact revision)."""
    res = view.residency(model_id, host_id)
    return (
        res is not None and res.state is ResidencyState.READY and view.admitting.get(host_id, False)
    )


def block_dangling(view: FleetView, history: HistoryIndex, tick: TickState) -> None:
    """Withdrawn-after-delivery destructive records without a receipt block their model."""
    for record in history.dangling_destructive():
        if not destructive_postcondition(view, record):
            tick.blocked_models.add(record.model_id)


def revalidate_open_batches(
    view: FleetView, history: HistoryIndex, tick: TickState, victims: dict[Key, Preemption]
) -> None:
    batches: dict[str, list[ActionRecord]] = {}
    for record in history.open_records():
        if record.kind in DESTRUCTIVE_KINDS:
            batches.setdefault(record.model_id, []).append(record)
    for model_id, records in sorted(batches.items()):
        if model_id in view.retired:
            continue
        removing = {
            r.host_id
            for r in records
            if r.kind is ActionKind.DRAIN
            and serving(view, model_id, r.host_id)
            and (model_id, r.host_id) not in victims  # a staged preemption is exempt
        }
        blocker = removal_blocker(view, model_id, removing) if removing else None
        if blocker is None:
            blocker = _unload_of_serving(view, records)
        if blocker is None:
            continue
        for record in sorted(records, key=lambda r: r.action_id):
            tick.withdraw(record, "unsafe_destructive_batch")
            unsafe = record.kind is ActionKind.DRAIN and record.host_id in removing
            tick.defer(
                record.kind,
                record.host_id,
                model_id,
                blocker.code if unsafe else "destructive_batch_withdrawn",
                detail=blocker.detail if unsafe else f"{blocker.code}: {blocker.detail}",
            )
        tick.blocked_models.add(model_id)


def _unload_of_serving(view: FleetView, records: list[ActionRecord]) -> Blocker | None:
    """A pending UNLOAD whose residency a newer heartbeat shows serving again is unsafe."""
    for record in records:
        if record.kind is not ActionKind.UNLOAD:
            continue
        res = view.residency(record.model_id, record.host_id)
        newer = view.heartbeat(record.host_id) > record.created_at
        if newer and res is not None and res.state is ResidencyState.READY:
            return Blocker("requests_in_flight", f"{record.host_id} reports the replica ready")
    return None


def propose_cleanup(
    view: FleetView, history: HistoryIndex, tick: TickState, victims: dict[Key, Preemption]
) -> None:
    removing: dict[str, set[str]] = {}
    for record in history.open_records():
        if (
            record.kind is ActionKind.DRAIN
            and not tick.is_withdrawn(record)
            and serving(view, record.model_id, record.host_id)
        ):
            removing.setdefault(record.model_id, set()).add(record.host_id)
    work: list[tuple[tuple[int, int, int, str, str], str, Residency]] = []
    for host in view.snap.hosts:
        for res in host.residencies:
            key = (res.model_id, host.host_id)
            if res.state not in LIVE_STATES or key in victims or not res.is_managed:
                continue
            retired = res.model_id in view.retired
            if not retired and key in view.desired and view.reusable_incumbent(*key):
                continue
            order = (
                0 if view.admitting.get(host.host_id, False) is False else 1,
                0 if res.state is not ResidencyState.READY else 1,
                0 if res.active_requests == 0 else 1,
                res.model_id,
                host.host_id,
            )
            work.append((order, host.host_id, res))
    for _order, host_id, res in sorted(work, key=lambda item: item[0]):
        _cleanup_one(view, history, tick, host_id, res, removing)


def _cleanup_one(
    view: FleetView,
    history: HistoryIndex,
    tick: TickState,
    host_id: str,
    res: Residency,
    removing: dict[str, set[str]],
) -> None:
    model_id = res.model_id
    prof = view.profiles.get(model_id)
    retired = model_id in view.retired
    kind = ActionKind.DRAIN if res.state is ResidencyState.READY else ActionKind.UNLOAD
    if prof is None and not retired:
        tick.defer(kind, host_id, model_id, "unknown_model")
        return
    if view.is_pinned(model_id, host_id):
        tick.defer(kind, host_id, model_id, "pinned_residency")
        return
    if view.host_manual(host_id):
        tick.defer(kind, host_id, model_id, "host_manual")
        return
    if not view.reachable.get(host_id, False):
        tick.defer(kind, host_id, model_id, "host_unreachable")
        return
    if model_id in tick.blocked_models:
        tick.defer(kind, host_id, model_id, "destructive_blocked")
        return
    if history.running_constructive(model_id, host_id):
        tick.defer(kind, host_id, model_id, "constructive_in_flight")
        return
    key = (kind, host_id, model_id)
    if tick.keep_open(history.open_record(key)) is not None:
        return
    if awaiting_heartbeat(view, history, key):
        return
    blocker: Blocker | None
    if kind is ActionKind.DRAIN:
        blocker = None
        if not retired and serving(view, model_id, host_id):
            desired = len(view.desired_hosts.get(model_id, []))
            scale_down = desired < len(view.counted_hosts(model_id)) and view.quiet(model_id)
            blocker = residency_age_blocker(view, model_id, host_id, res, scale_down=scale_down)
            if blocker is None:
                blocker = removal_blocker(view, model_id, removing.get(model_id, set()) | {host_id})
    else:
        blocker = unload_blocker(res)
    if blocker is None:
        blocker = backoff_blocker(view, history, key)
    if blocker is not None:
        defer_blocked(tick, key, blocker)
        return
    if kind is ActionKind.DRAIN:
        removing.setdefault(model_id, set()).add(host_id)
    why = "the model was retired" if retired else "no longer in the plan"
    tick.proposals.append(
        Proposal(
            kind=kind,
            host_id=host_id,
            model_id=model_id,
            memory_mb=res.memory_mb,
            reason=f"{kind.value} an obsolete replica: {why}",
            priority=prof.priority if prof is not None else 0,
            urgency=Urgency.CLEANUP,
            busy_rank=0 if kind is ActionKind.UNLOAD else (1 if res.active_requests == 0 else 2),
        )
    )
