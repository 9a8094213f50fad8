"""The last check before a drain or unload leaves the controller (pure).

It runs after the delivery marker is durable, against a fresh registry snapshot. The target
host must still be reachable (a fresh control lease), a plan must exist, and then every gate of
the one destructive gate list that is marked for delivery (`reconcile/gates.py`,
`delivery_gates()`) must let the command pass: ownership (a residency Grid does not own), a
manually managed host, a pinned residency, and the replacements' route proof — every desired
replacement of the model (the plan's other replicas) must still be READY on an admitting host
whose control lease (the node's `ttl_seconds` from its last heartbeat) has strictly more than the
margin left, and, for a Grid-owned replica, a live child route for that host and model must
corroborate the READY row (invariant 4: the row alone is inventory) with strictly more than the
margin left on the route's own lease. A model that fails holds its whole destructive batch;
availability commands never wait for this.

A route's lease is the one given in `route_leases` for (host, model) (the controller passes the
lease of the heartbeat whose envelope last listed the route); without an entry, a route the
host's current envelope lists (`Host.routes`) holds the host's control lease.

A target row the fresh registry no longer reports is no foreign inventory: the host-level gates
(manual host, pinned) still apply to it, the residency's ownership gate has nothing to refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from grid.fleet import (
    DESTRUCTIVE_KINDS,
    ActionKind,
    FleetSnapshot,
    Host,
    ModelProfile,
    Plan,
    Policy,
    Residency,
    Tombstone,
)
from grid.planner.prefetch import REFUSAL_TEXT, eviction_refusal
from grid.runtime.controller.state import Command
from grid.runtime.reconcile import (
    Candidate,
    DeliveryLeases,
    FleetView,
    GateContext,
    HistoryIndex,
    Path,
    delivery_blocker,
)
from grid.runtime.reconcile import Lease as RouteLease

__all__ = ["Hold", "RouteLease", "revalidate_destructive", "revalidate_evictions"]


@dataclass(frozen=True)
class Hold:
    model_id: str
    action_ids: tuple[str, ...]
    reason: str
    code: str = ""


def _view(
    plan: Plan,
    hosts: dict[str, Host],
    profiles: Mapping[str, ModelProfile],
    retired: set[str],
    now: float,
) -> FleetView:
    """The fresh registry as the gates read it (built without re-validating the hosts)."""
    snap = FleetSnapshot.model_construct(
        now=now,
        policy=Policy(),
        hosts=[hosts[h] for h in sorted(hosts)],
        models=[profiles[m] for m in sorted(profiles) if m not in retired],
    )
    return FleetView(snap, plan, [Tombstone(model_id=m) for m in sorted(retired)])


def _candidate(command: Command, host: Host) -> Candidate:
    a = command.action
    res = next((r for r in host.residencies if r.model_id == a.model_id), None)
    if res is None:  # nothing reported there: no foreign inventory to protect
        res = Residency(model_id=a.model_id, memory_mb=a.memory_mb)
    path = Path.PREEMPTION if a.preemption else Path.CLEANUP
    return Candidate(a.kind, a.model_id, a.host_id, res, path)


def revalidate_destructive(
    commands: list[Command],
    *,
    plan: Plan | None,
    hosts: dict[str, Host],
    leases: dict[str, RouteLease],
    retired: set[str],
    now: float,
    stale_s: float,
    margin_s: float,
    route_leases: Mapping[tuple[str, str], RouteLease] | None = None,
    profiles: Mapping[str, ModelProfile] | None = None,
) -> list[Hold]:
    """The destructive batches that must not be sent now (empty: send everything)."""
    by_model: dict[str, list[Command]] = {}
    for command in commands:
        kind = command.action.kind
        if kind in DESTRUCTIVE_KINDS and kind is not ActionKind.EVICT:  # evicts: below
            by_model.setdefault(command.action.model_id, []).append(command)
    if not by_model:
        return []
    ctx: GateContext | None = None
    if plan is not None:
        view = _view(plan, hosts, profiles or {}, retired, now)
        facts = DeliveryLeases(now, leases, route_leases or {}, margin_s)
        ctx = GateContext(view, HistoryIndex([]), frozenset(), leases=facts)
    holds: list[Hold] = []
    for model_id, batch in sorted(by_model.items()):
        code, reason = "", ""
        for command in batch:
            target = command.action.host_id
            lease = leases.get(target)
            if target not in hosts or lease is None or now - lease.received_at > stale_s:
                code, reason = "host_unreachable", f"host {target} is no longer reachable"
                break
            if ctx is None:
                code = "no_plan"
                reason = "no plan has been computed since the controller started"
                break
            blocker = delivery_blocker(ctx, _candidate(command, hosts[target]))
            if blocker is not None:
                code = blocker.code
                reason = blocker.detail or f"{blocker.code} on {target}"
                break
        if code:
            ids = tuple(c.action.action_id for c in batch)
            holds.append(Hold(model_id, ids, reason, code))
    return holds


def revalidate_evictions(
    commands: list[Command],
    *,
    plan: Plan | None,
    hosts: dict[str, Host],
    leases: dict[str, RouteLease],
    profiles: Mapping[str, ModelProfile],
    now: float,
    stale_s: float,
) -> list[Hold]:
    """The queued evicts that must not be sent now, against the latest heartbeat: the host is
    reachable and its newest report still shows exactly that unused predictive entry, and the
    one eviction rule (grid/planner/prefetch/protect.py) still lets it go."""
    holds: list[Hold] = []
    planned = {(a.model_id, a.host_id) for a in plan.assignments} if plan is not None else set()
    for command in commands:
        a = command.action
        if a.kind is not ActionKind.EVICT:
            continue
        host, lease = hosts.get(a.host_id), leases.get(a.host_id)
        code = ""
        if host is None or lease is None or now - lease.received_at > stale_s:
            code = "host_unreachable"
        elif plan is None:
            code = "no_plan"
        else:
            code = (
                eviction_refusal(
                    host,
                    a.model_id,
                    a.artifact_sha256,
                    profile=profiles.get(a.model_id),
                    planned_here=(a.model_id, a.host_id) in planned,
                )
                or ""
            )
        if code:
            reason = REFUSAL_TEXT.get(code, code.replace("_", " "))
            holds.append(Hold(a.model_id, (a.action_id,), f"evict on {a.host_id}: {reason}", code))
    return holds
