"""A WARM a node took but has not answered is a replica: no second one starts beside it.

Between a WARM's delivery and the node's next heartbeat, the node still reports the model as
cached (or absent), so the planner, which reads only the fleet snapshot, does not see the
replica starting there. When a fresh plan then prefers another host (a cleanup elsewhere ended
a moment later, a restarted controller solved afresh), the reconciler keeps the delivered
record (it may be running, so it is never withdrawn) and also proposes the new host's WARM:
one replica too many until the extra one is drained. That is how a controller SIGKILL restart
briefly ran 3 replicas of a model with max 2.

The rule, in one place: for every model, each open delivered WARM that this tick's plan no
longer wants (not among the reconciler's `in_flight`), younger than `wait_s`, not drained or
unloaded this tick, on a host that still admits work, heartbeats within its route lease and has
not reported the model failed since, holds back one new WARM of that model (and the LOAD on the
same host), the last in the governors' order. When the node answers, the record closes: a
success is a READY replica the next plan keeps, a failure frees the held one. `wait_s` bounds
the wait for a delivery whose reply never reached the node (the controller died after the
durable marker), which no receipt will ever close. `held_back` applies it after the restart's
holds (`authority.held_after_restart`). Pure: `now` is passed in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Set

from grid.fleet import (
    DESTRUCTIVE_KINDS,
    Action,
    ActionKind,
    ActionRecord,
    Deferral,
    FleetSnapshot,
    ReconcileResult,
    ResidencyState,
)
from grid.planner import host_refusals
from grid.runtime.controller.authority import Grace, held_after_restart
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.planning import grace_deferral

CODE = "replica_in_flight"


def _may_come_up(record: ActionRecord, snap: FleetSnapshot, lease_s: float) -> bool:
    """The WARM's host still admits work and heartbeats within its route lease, and has not
    reported the model FAILED since the delivery (a silent or refusing host serves nothing,
    and its failure receipt is on its way)."""
    host = next((h for h in snap.hosts if h.host_id == record.host_id), None)
    if host is None or host_refusals(host, snap) or host.last_heartbeat is None:
        return False
    if snap.now - host.last_heartbeat > lease_s:
        return False
    delivered = record.delivered_at or record.created_at
    row = next((r for r in host.residencies if r.model_id == record.model_id), None)
    return not (
        row is not None and row.state is ResidencyState.FAILED and host.last_heartbeat > delivered
    )


def unanswered_warms(
    records: Iterable[ActionRecord],
    wanted: Set[str],
    actions: Iterable[Action],
    snap: FleetSnapshot,
    *,
    wait_s: float,
    lease_s: float,
) -> dict[str, list[ActionRecord]]:
    """Per model: the delivered, unanswered WARMs the plan no longer wants (oldest first)."""
    retiring = {(a.host_id, a.model_id) for a in actions if a.kind in DESTRUCTIVE_KINDS}
    out: dict[str, list[ActionRecord]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.delivered_at or 0.0, r.action_id)):
        if record.kind is not ActionKind.WARM or not record.is_open or not record.was_delivered:
            continue
        if record.action_id in wanted or (record.host_id, record.model_id) in retiring:
            continue
        if snap.now - (record.delivered_at or record.created_at) >= wait_s:
            continue  # the reply was lost, or the node is stuck: the plan is followed again
        if _may_come_up(record, snap, lease_s):
            out[record.model_id].append(record)
    return dict(out)


def held_for_unanswered(
    actions: list[Action],
    records: Iterable[ActionRecord],
    wanted: Set[str],
    snap: FleetSnapshot,
    *,
    wait_s: float,
    lease_s: float,
) -> list[tuple[Action, float]]:
    """The new WARMs (with the LOADs on their hosts) that wait for an unanswered one, each
    with when the wait ends at the latest (`snap.now` is now)."""
    waiting = unanswered_warms(records, wanted, actions, snap, wait_s=wait_s, lease_s=lease_s)
    held: list[tuple[Action, float]] = []
    for model_id, pending in sorted(waiting.items()):
        warms = [a for a in actions if a.model_id == model_id and a.kind is ActionKind.WARM]
        chosen = warms[len(warms) - min(len(pending), len(warms)) :]
        hosts = {a.host_id for a in chosen}
        until = max((r.delivered_at or r.created_at) for r in pending) + wait_s
        held += [
            (a, until)
            for a in actions
            if a.model_id == model_id
            and a.host_id in hosts
            and a.kind in (ActionKind.WARM, ActionKind.LOAD)
            and not a.predictive
        ]
    return held


def in_flight_deferral(action: Action, until: float) -> Deferral:
    return Deferral(
        kind=action.kind,
        host_id=action.host_id,
        model_id=action.model_id,
        code=CODE,
        message="a replica of this model is starting on another host (a warm it took and has "
        "not answered yet); this one waits for that answer",
        retry_at=until,
    )


def held_back(
    result: ReconcileResult,
    snap: FleetSnapshot,
    records: list[ActionRecord],
    registered: Set[str],
    grace: Grace,
    config: ControllerConfig,
    now: float,
) -> tuple[list[Action], list[Deferral]]:
    """What a tick does not issue of the reconciler's actions, and its deferrals with theirs:
    the restart's holds (`authority.held_after_restart`), then the unanswered WARMs' here."""
    actions = list(result.actions)
    held = held_after_restart(actions, snap, records, registered, grace, config, now)
    waiting = held_for_unanswered(
        [a for a in actions if a not in held],
        records,
        set(result.in_flight),
        snap,
        wait_s=config.delivered_warm_wait_s,
        lease_s=config.node_ttl_s,
    )
    deferred = list(result.deferred)
    deferred += [grace_deferral(a, grace.anchor, config) for a in held]
    deferred += [in_flight_deferral(a, until) for a, until in waiting]
    return held + [a for a, _until in waiting], deferred
