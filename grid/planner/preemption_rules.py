"""Who a staged preemption may take: one rule for the planner that stages it and the reconciler
that drains it (pure).

The spec fills higher priority classes first and stages the lowest-priority sufficient victim
set. Work that is never bypassed (the *fences*): external and manually managed residencies, a
manually managed host, a residency on one of its model's pinned hosts, a residency still inside
its minimum residency (an unknown load time protects it), and a managed row whose model has no
profile (Grid does not actuate what it cannot name; a retired model's leftovers are cleanup's).
Beyond the fences a victim must be of a strictly lower priority class than its beneficiary, on
a host whose actuator can drain and unload, and the beneficiary must hold eviction authority:
required baseline replicas, pins, or directly demanded replicas (never inferred-only demand).

A configured minimum of a lower class (`min_replicas`, `min_failure_domains`) is no fence
against a higher class: when `outranks` holds, the reconciler's managed-baseline and
failure-domain floors yield to the preemption, but only for a plan solved for the tick's own
inputs (its generation). A stale plan's preemption keeps every floor. `victims_on`
(preemption_host.py) stages nothing this rule refuses, so the planner never stages what the
reconciler's gates would refuse.
"""

from __future__ import annotations

from grid.fleet import Evidence, Host, ModelProfile, Ownership, Residency
from grid.planner.targets import Target

EVICTION_ACTUATORS = frozenset({"drain", "unload"})


def eviction_authority(target: Target) -> int:
    """How many replicas of the model may evict lower-priority work: all of a directly
    demanded target, else its baseline and pins (inferred-only demand uses spare room)."""
    if target.evidence is Evidence.DIRECT:
        return target.desired
    return min(target.desired, max(target.baseline, target.pins))


def victim_fence(
    host: Host,
    res: Residency,
    victim: ModelProfile | None,
    beneficiary: ModelProfile,
    now: float,
) -> str | None:
    """Why `res` on `host` may not be taken for `beneficiary` (a stable code; None: it may)."""
    if not res.is_managed:
        return "not_managed"
    if victim is None:
        return "unknown_model"
    if host.ownership is Ownership.MANUAL:
        return "host_manual"
    if not set(host.actuator_capabilities) >= EVICTION_ACTUATORS:
        return "actuator_missing"
    if host.host_id in victim.pinned_hosts:
        return "pinned_residency"
    if victim.priority >= beneficiary.priority:
        return "not_outranked"
    if res.loaded_at is None:
        return "minimum_residency" if victim.min_residency_s > 0 else None
    if max(0.0, now - res.loaded_at) < victim.min_residency_s:
        return "minimum_residency"
    return None
