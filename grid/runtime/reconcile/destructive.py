"""Destructive work: drain and unload obsolete or retired managed residencies, safely.

Every drain or unload here passes the one gate list of `gates.py` (the same list preemption
uses): first its standing gates (ownership, pins, manual host, reachability, a destructive block
left by an earlier withdrawal, a lifecycle still running on it), then, unless the same action is
already open, its timing gates (minimum residency, scale-down cooldown, last-replica and
make-before-break protection, managed baseline and failure-domain floors, drain before unload,
backoff). The old copy of an incumbent the plan relocates (a repack) is the `repack` path of the
same list. A retired model (tombstone, no profile) converges to zero: its copies drain without
availability checks, even on hosts that return long after the profile was removed.

Before any of that, `revalidate_open_batches` re-checks the drains already issued against the
list's availability floors: if fresh evidence makes one unsafe, every open destructive record of
that model is withdrawn and further destructive work for it waits (see
`safety.destructive_postcondition`).
"""

from __future__ import annotations

from grid.fleet import (
    DESTRUCTIVE_KINDS,
    LIVE_STATES,
    ActionKind,
    ActionRecord,
    Preemption,
    Residency,
    ResidencyState,
    Urgency,
)
from grid.runtime.reconcile.gates import (
    Candidate,
    GateContext,
    Path,
    admitted_after_standing,
    floor_blocker,
    refused_standing,
)
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import Proposal, TickState, busy_rank
from grid.runtime.reconcile.safety import Blocker, destructive_postcondition
from grid.runtime.reconcile.view import FleetView, Key


def ready_here(view: FleetView, model_id: str, host_id: str) -> bool:
    """A READY process on the host (whatever its admission): draining it ends a replica."""
    res = view.residency(model_id, host_id)
    return res is not None and res.state is ResidencyState.READY


def cleanup_path(view: FleetView, model_id: str, host_id: str) -> Path:
    return Path.REPACK if (model_id, host_id) in view.relocating else Path.CLEANUP


def block_dangling(view: FleetView, history: HistoryIndex, tick: TickState) -> None:
    """Withdrawn-after-delivery destructive records without a receipt block their model."""
    for record in history.dangling_destructive():
        if not destructive_postcondition(view, record):
            tick.blocked_models.add(record.model_id)


def note_open_drains(view: FleetView, history: HistoryIndex, tick: TickState) -> None:
    """Open drains of READY replicas take them out of service: every path's floors see them."""
    for record in history.open_records():
        if (
            record.kind is ActionKind.DRAIN
            and not tick.is_withdrawn(record)
            and ready_here(view, record.model_id, record.host_id)
        ):
            tick.note_removal(record.model_id, record.host_id)


def revalidate_open_batches(
    view: FleetView, history: HistoryIndex, tick: TickState, victims: dict[Key, Preemption]
) -> None:
    ctx = GateContext(view, history, tick.blocked_models)
    batches: dict[str, list[ActionRecord]] = {}
    for record in history.open_records():
        if record.kind in DESTRUCTIVE_KINDS:
            batches.setdefault(record.model_id, []).append(record)
    for model_id, records in sorted(batches.items()):
        if model_id in view.retired:
            continue
        drains = [
            r
            for r in records
            if r.kind is ActionKind.DRAIN and ready_here(view, model_id, r.host_id)
        ]
        removing = frozenset(r.host_id for r in drains)
        blocker: Blocker | None = None
        for r in sorted(drains, key=lambda r: r.host_id):
            res = view.residency(model_id, r.host_id)
            if res is None:
                continue
            staged = victims.get((model_id, r.host_id))  # a preemption needs no replacement
            path = Path.PREEMPTION if staged else cleanup_path(view, model_id, r.host_id)
            beneficiary = staged.beneficiary_model_id if staged else None
            candidate = Candidate(
                ActionKind.DRAIN, model_id, r.host_id, res, path, removing, beneficiary=beneficiary
            )
            blocker = floor_blocker(ctx, candidate)
            if blocker is not None:
                break
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
    ctx = GateContext(view, history, tick.blocked_models)
    work: list[tuple[tuple[int, int, int, str, str], str, Residency]] = []
    for host in view.snap.hosts:
        for res in host.residencies:
            key = (res.model_id, host.host_id)
            if res.state not in LIVE_STATES or key in victims or not res.is_managed:
                continue  # Grid cleans up only what it owns (the gates refuse the rest anyway)
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
        _cleanup_one(ctx, tick, host_id, res)


def _cleanup_one(ctx: GateContext, tick: TickState, host_id: str, res: Residency) -> None:
    view = ctx.view
    model_id = res.model_id
    prof = view.profiles.get(model_id)
    retired = model_id in view.retired
    kind = ActionKind.DRAIN if res.state is ResidencyState.READY else ActionKind.UNLOAD
    desired = len(view.desired_hosts.get(model_id, []))
    scale_down = desired < len(view.counted_hosts(model_id)) and view.quiet(model_id)
    candidate = Candidate(
        kind,
        model_id,
        host_id,
        res,
        cleanup_path(view, model_id, host_id),
        tick.removing_of(model_id),
        scale_down=scale_down,
    )
    if refused_standing(ctx, tick, candidate):
        return
    if not admitted_after_standing(ctx, tick, candidate):
        return
    why = "the model was retired" if retired else "no longer in the plan"
    if candidate.path is Path.REPACK:
        why = "the plan relocates it and its new replica is ready"
    reason = f"{kind.value} an obsolete replica: {why}"
    priority = prof.priority if prof is not None else 0
    # The unload that completes a preemption drain belongs to that preemption, also once the
    # plan no longer names the victim (its beneficiary went elsewhere or needs fewer replicas).
    drained_for = None
    if kind is ActionKind.UNLOAD and res.state is ResidencyState.DRAINING and not retired:
        drained_for = ctx.history.preemption_drain(model_id, host_id)
    if drained_for is not None:
        reason = f"unload a preemption victim: {drained_for.reason.removeprefix('preemption: ')}"
        priority = max(priority, drained_for.priority)
    tick.proposals.append(
        Proposal(
            kind=kind,
            host_id=host_id,
            model_id=model_id,
            memory_mb=res.memory_mb,
            reason=reason,
            priority=priority,
            urgency=Urgency.CLEANUP,
            busy_rank=busy_rank(kind, res),
            preemption=drained_for is not None,
        )
    )
