"""Desired replica counts per model from the demand forecast (pure).

For a model with demand:
    load      = offered_concurrency x (1 + demand_headroom) + queue_depth
                + positive trend projected over the fastest eligible, cache-aware cold-start
                  path (each host's own learned timings; capped at 5 min and 2x)
    replicas  = ceil(load / (replica_concurrency x target_utilization))
Queue, latency-SLO or error pressure asks for at least one replica beyond the ready set.
Recently used ready replicas stay desired for the model's scale-down cooldown (hysteresis).
The result is clamped to the replica bounds, with pins as a floor; a failure-domain goal raises
a model with any desired replica to that many replicas. `desired_replicas` in the demand entry
overrides the forecast (what-if analysis) but still respects the bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grid.demand.smoothing import lookahead_concurrency
from grid.fleet.models import (
    LIVE_STATES,
    DemandEntry,
    Evidence,
    FleetSnapshot,
    ModelProfile,
    ResidencyState,
)
from grid.planner.eligibility import host_refusals, pair_refusals

LOOKAHEAD_CAP_S = 300.0  # cold-start lookahead never projects more than five minutes
LOOKAHEAD_MAX_FACTOR = 2.0  # ... nor more than doubles the current load


@dataclass(frozen=True)
class Target:
    model_id: str
    desired: int
    baseline: int  # required replicas (min_replicas), part of `desired`
    pins: int
    evidence: Evidence  # of the replicas beyond the baseline
    reason: str


def next_replica_startup_s(model: ModelProfile, snap: FleetSnapshot) -> float:
    """The fastest eligible, cache-aware path to the model's next replica (each host's own
    learned timings); the configured load-plus-warm path when no host can take it."""
    best: float | None = None
    for host in snap.hosts:
        held = [r for r in host.residencies if r.model_id == model.model_id]
        if any(r.state in LIVE_STATES for r in held) or host_refusals(host, snap):
            continue  # one replica per host; a host that takes no new work
        cached = model.model_id in host.cached_models or bool(held)  # held: a CACHED copy
        if pair_refusals(model, host, cached=cached):
            continue
        path = snap.startup_s(model, host.host_id, cached=cached)
        best = path if best is None else min(best, path)
    return model.load_estimate_s + model.warm_estimate_s if best is None else best


def _projected_load(model: ModelProfile, demand: DemandEntry, snap: FleetSnapshot) -> float:
    load = demand.offered_concurrency * (1.0 + snap.policy.demand_headroom_fraction)
    load += demand.queue_depth
    if demand.trend <= 0 or load <= 0:
        return load  # negative trends never accelerate scale-down
    return lookahead_concurrency(
        load,
        demand.trend,
        next_replica_startup_s(model, snap),
        cap_s=LOOKAHEAD_CAP_S,
        max_factor=LOOKAHEAD_MAX_FACTOR,
    )


def _under_pressure(model: ModelProfile, demand: DemandEntry, error_threshold: float) -> bool:
    slo_missed = model.latency_slo_ms is not None and demand.p95_ms > model.latency_slo_ms
    return demand.queue_depth >= 1 or slo_missed or demand.error_rate > error_threshold


def model_target(model: ModelProfile, snap: FleetSnapshot) -> Target:
    demand = snap.demand.get(model.model_id)
    pins = len(set(model.pinned_hosts))
    ready = 0
    recently_used = 0
    for host in snap.hosts:
        for res in host.residencies:
            if res.model_id != model.model_id or res.state is not ResidencyState.READY:
                continue
            ready += 1
            last = res.last_used_at if res.last_used_at is not None else res.loaded_at
            if last is not None and snap.now - last <= model.scale_down_cooldown_s:
                recently_used += 1

    reason = "baseline"
    if demand is not None and demand.desired_replicas is not None:
        wanted = demand.desired_replicas
        reason = "override"
    else:
        wanted = 0
        if demand is not None:
            load = _projected_load(model, demand, snap)
            per_replica = model.replica_concurrency * model.target_utilization
            if load > 0:
                wanted = math.ceil(load / per_replica - 1e-9)
                reason = "demand"
            elif demand.rpm > 0:
                wanted = 1
                reason = "demand"
            if _under_pressure(model, demand, snap.policy.error_rate_threshold):
                wanted = max(wanted, ready + 1)
                reason = "pressure"
        if recently_used > wanted:
            wanted = recently_used
            reason = "cooldown"

    floor = max(model.min_replicas, pins)
    ceiling = max(model.max_replicas, pins)
    desired = min(max(wanted, floor), ceiling)
    if desired >= 1 and model.min_failure_domains > 1:
        desired = max(desired, min(model.min_failure_domains, ceiling))
    evidence = demand.evidence if demand is not None else Evidence.DIRECT
    return Target(
        model_id=model.model_id,
        desired=desired,
        baseline=min(model.min_replicas, desired),
        pins=pins,
        evidence=evidence,
        reason=reason,
    )


def compute_targets(snap: FleetSnapshot) -> dict[str, Target]:
    return {m.model_id: model_target(m, snap) for m in snap.models}
