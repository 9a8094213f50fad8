"""Desired replica counts per model from the demand forecast (pure).

For a model with demand:
    load      = offered_concurrency x (1 + demand_headroom) + queue_depth
                + positive trend projected over the fastest eligible, cache-aware cold-start
                  path (each host's own learned timings; capped at 5 min and 2x)
    replicas  = ceil(load / (replica_concurrency x target_utilization))
Queue, latency-SLO or error pressure asks for at least one replica beyond the ready set.
Recently used ready replicas stay desired for the model's scale-down cooldown (hysteresis);
replicas on a silent, unhealthy or quarantined host are neither ready nor held.
The result is clamped to the replica bounds, with pins as a floor; a failure-domain goal raises
a model with any desired replica to that many replicas. `desired_replicas` in the demand entry
overrides the forecast (what-if analysis) but still respects the bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from grid.demand import lookahead_concurrency
from grid.fleet import (
    LIVE_STATES,
    DemandEntry,
    Evidence,
    FleetSnapshot,
    Host,
    HostState,
    ModelProfile,
    Residency,
    ResidencyState,
)
from grid.planner.eligibility import host_refusals, pair_refusals

LOOKAHEAD_CAP_S = 300.0  # cold-start lookahead never projects more than five minutes
LOOKAHEAD_MAX_FACTOR = 2.0  # ... nor more than doubles the current load
SILENT = frozenset({"heartbeat_missing", "heartbeat_stale"})
DEAD_STATES = frozenset({HostState.UNHEALTHY, HostState.QUARANTINED})


def host_serves(host: Host, snap: FleetSnapshot) -> bool:
    """Whether the host's READY replicas serve: it heartbeats (eligibility's rule) and its
    protection loop has not declared it unhealthy or quarantined. A down host still reports its
    last residencies; they are neither ready capacity nor held by the scale-down cooldown."""
    return host.state not in DEAD_STATES and not SILENT.intersection(host_refusals(host, snap))


@dataclass(frozen=True)
class Target:
    model_id: str
    desired: int
    baseline: int  # required replicas (min_replicas), part of `desired`
    pins: int
    evidence: Evidence  # of the replicas beyond the baseline
    reason: str


class HostIndex:
    """Per snapshot, built on first use: the hosts that take new work, and per model the hosts
    where it is live or cached (admitting ones)."""

    def __init__(self, snap: FleetSnapshot) -> None:
        self.snap = snap

    @cached_property
    def admitting(self) -> dict[str, Host]:
        return {h.host_id: h for h in self.snap.hosts if not host_refusals(h, self.snap)}

    @cached_property
    def live(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for host in self.snap.hosts:
            for res in host.residencies:
                if res.state in LIVE_STATES:
                    out.setdefault(res.model_id, set()).add(host.host_id)
        return out

    @cached_property
    def cached(self) -> dict[str, list[Host]]:
        out: dict[str, list[Host]] = {}
        for host in self.admitting.values():
            on_disk = set(host.cached_models)
            on_disk.update(r.model_id for r in host.residencies if r.state is ResidencyState.CACHED)
            for model_id in sorted(on_disk):
                out.setdefault(model_id, []).append(host)
        return out

    @cached_property
    def ready(self) -> dict[str, list[Residency]]:
        """Per model, its READY residencies on hosts that serve (`host_serves`), host order."""
        out: dict[str, list[Residency]] = {}
        for host in self.snap.hosts:
            if host.residencies and host_serves(host, self.snap):
                for res in host.residencies:
                    if res.state is ResidencyState.READY:
                        out.setdefault(res.model_id, []).append(res)
        return out


def next_replica_startup_s(
    model: ModelProfile, snap: FleetSnapshot, index: HostIndex | None = None
) -> float:
    """The fastest eligible, cache-aware path to the model's next replica: over the hosts that
    take new work, hold no live copy and pass the pair filters, each by its own learned timings
    (`FleetSnapshot.startup_s`); the configured load-plus-warm path when no host can take it.

    Only hosts with learned timings can differ from the configured paths, so the rest are
    visited only until one eligible cached and one eligible uncached host are found.
    """
    index = index or HostIndex(snap)
    model_id = model.model_id
    live = index.live.get(model_id, set())
    learned = snap.learned_startup.get(model_id, {})
    cached_hosts = index.cached.get(model_id, [])
    cached_ids = {h.host_id for h in cached_hosts}
    prior = model.load_estimate_s + model.warm_estimate_s
    paths: list[float] = []

    def eligible(host: Host, cached: bool) -> bool:
        return host.host_id not in live and not pair_refusals(model, host, cached=cached)

    for host_id in sorted(learned):
        host = index.admitting.get(host_id)
        cached = host_id in cached_ids
        if host is not None and eligible(host, cached):
            paths.append(snap.startup_s(model, host_id, cached=cached))
    for host in cached_hosts:
        if host.host_id not in learned and eligible(host, True):
            paths.append(model.warm_estimate_s)
            break
    if not paths or min(paths) > prior:
        for host_id, host in index.admitting.items():
            if host_id not in learned and host_id not in cached_ids and eligible(host, False):
                paths.append(prior)
                break
    return min(paths) if paths else prior


def _projected_load(
    model: ModelProfile, demand: DemandEntry, snap: FleetSnapshot, index: HostIndex | None
) -> float:
    load = demand.offered_concurrency * (1.0 + snap.policy.demand_headroom_fraction)
    load += demand.queue_depth
    if demand.trend <= 0 or load <= 0:
        return load  # negative trends never accelerate scale-down
    return lookahead_concurrency(
        load,
        demand.trend,
        next_replica_startup_s(model, snap, index),
        cap_s=LOOKAHEAD_CAP_S,
        max_factor=LOOKAHEAD_MAX_FACTOR,
    )


def _under_pressure(model: ModelProfile, demand: DemandEntry, error_threshold: float) -> bool:
    slo_missed = model.latency_slo_ms is not None and demand.p95_ms > model.latency_slo_ms
    return demand.queue_depth >= 1 or slo_missed or demand.error_rate > error_threshold


def model_target(
    model: ModelProfile, snap: FleetSnapshot, index: HostIndex | None = None
) -> Target:
    demand = snap.demand.get(model.model_id)
    pins = len(set(model.pinned_hosts))
    index = index or HostIndex(snap)
    ready = 0
    recently_used = 0
    for res in index.ready.get(model.model_id, ()):
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
            load = _projected_load(model, demand, snap, index)
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
    index = HostIndex(snap)
    return {m.model_id: model_target(m, snap, index) for m in snap.models}
