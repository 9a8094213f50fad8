"""The last check before a drain or unload leaves the controller (pure).

It runs after the delivery marker is durable, against a fresh registry snapshot: every desired
replacement of the model (the plan's other replicas) must still be READY on an admitting host
whose control lease (the node's `ttl_seconds` from its last heartbeat) has strictly more than the
margin left, and, for a Grid-owned replica, a live child route for that host and model must
corroborate the READY row (invariant 4: the row alone is inventory) with strictly more than the
margin left on the route's own lease. The target host must still be reachable, Grid-managed,
and its residency Grid's own. A model that
fails holds its whole destructive batch; availability commands never wait for this.

A route's lease is the one given in `route_leases` for (host, model); without an entry, a route
the host's current envelope lists (`Host.routes`) holds the lease of the heartbeat that carried
it, which is the host's control lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from grid.fleet.actions import DESTRUCTIVE_KINDS
from grid.fleet.models import ADMITTING_STATES, Host, Ownership, Plan, ResidencyState
from grid.runtime.controller.state import Command


@dataclass(frozen=True)
class RouteLease:
    received_at: float
    ttl_s: float

    def remaining(self, now: float) -> float:
        return self.received_at + self.ttl_s - now


@dataclass(frozen=True)
class Hold:
    model_id: str
    action_ids: tuple[str, ...]
    reason: str


def _replacement_problem(
    model_id: str,
    host_id: str,
    hosts: dict[str, Host],
    leases: dict[str, RouteLease],
    route_leases: Mapping[tuple[str, str], RouteLease],
    now: float,
    margin_s: float,
) -> str:
    host = hosts.get(host_id)
    if host is None:
        return f"replacement host {host_id} is no longer registered"
    res = next((r for r in host.residencies if r.model_id == model_id), None)
    if res is None or res.state is not ResidencyState.READY:
        return f"the replacement on {host_id} is not ready"
    if host.state not in ADMITTING_STATES:
        return f"replacement host {host_id} no longer admits work ({host.state.value})"
    lease = leases.get(host_id)
    left = lease.remaining(now) if lease is not None else float("-inf")
    if not left > margin_s:
        return f"the replacement route on {host_id} has {max(left, 0.0):.1f} s of lease left"
    if not res.is_managed:
        return ""  # inventory Grid does not own has no Grid child route to prove
    route = route_leases.get((host_id, model_id))
    if route is None and model_id in (host.routes or ()):
        route = lease
    if route is None:
        return f"the replacement on {host_id} has no live child route (a READY row is not proof)"
    route_left = route.remaining(now)
    if not route_left > margin_s:
        return (
            f"the replacement's child route on {host_id} has {max(route_left, 0.0):.1f} s "
            "of lease left"
        )
    return ""


def _ownership_problem(model_id: str, host: Host) -> str:
    """The same ownership gates as the reconciler's, on the fresh registry: never actuate a
    manual host or a residency Grid does not own, whatever the command says."""
    if host.ownership is Ownership.MANUAL:
        return f"host {host.host_id} is manually managed now"
    res = next((r for r in host.residencies if r.model_id == model_id), None)
    if res is not None and not res.is_managed:
        return f"the residency of {model_id} on {host.host_id} is {res.owner.value}, not Grid's"
    return ""


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
) -> list[Hold]:
    """The destructive batches that must not be sent now (empty: send everything)."""
    routes = route_leases if route_leases is not None else {}
    by_model: dict[str, list[Command]] = {}
    for command in commands:
        if command.action.kind in DESTRUCTIVE_KINDS:
            by_model.setdefault(command.action.model_id, []).append(command)
    holds: list[Hold] = []
    for model_id, batch in sorted(by_model.items()):
        reason = ""
        for command in batch:
            target = command.action.host_id
            lease = leases.get(target)
            if target not in hosts or lease is None or now - lease.received_at > stale_s:
                reason = f"host {target} is no longer reachable"
                break
            reason = _ownership_problem(model_id, hosts[target])
            if reason:
                break
            if plan is None:
                reason = "no plan has been computed since the controller started"
                break
            if model_id in retired or command.action.preemption:
                continue  # retirement and planner-authorized preemption need no replacement
            planned = sorted({a.host_id for a in plan.assignments if a.model_id == model_id})
            for replacement in planned:
                if replacement == target:
                    continue
                reason = _replacement_problem(
                    model_id, replacement, hosts, leases, routes, now, margin_s
                )
                if reason:
                    break
            if reason:
                break
        if reason:
            holds.append(Hold(model_id, tuple(c.action.action_id for c in batch), reason))
    return holds
