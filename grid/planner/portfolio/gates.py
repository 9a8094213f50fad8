"""Evidence gates, the weak-evidence canary cap and per-workload replica needs (pure).

Gate      admitted(w)  ⇔  observations ≥ min_observations  ∨  offered ≥ min_offered_concurrency
Resident  an image/video word below the gate but with observations stays admitted while a
          candidate model is READY and has a fresh success on w (the gate bounds starting a
          model, not keeping one through the gaps of a sparse burst)
Media     w ∈ media_workloads with media_canary_min ≤ offered < min_offered and too few
          observations: admitted as a canary only when `spare_capacity_proof` holds
Weak      (w, m) is weak unless observations ≥ min_observations (repeated arrivals), m has
          direct named demand, or a fresh successful response of m/w/artifact exists
Need      req(w, m) = max(1, ⌈arrival(w)·(1 + headroom) / (replica_concurrency·target_util)⌉),
          arrival(w) = offered − queue (an unbound queue is not projected onto a model), plus
          the queue when m is READY with a fresh success on w (it is the queue of m's traffic);
          weak ⇒ req ≤ canary_max_replicas
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from grid.fleet import Evidence as DemandEvidence
from grid.fleet import FleetSnapshot, ModelProfile, PortfolioPolicy, WorkloadForecast


class Gate(StrEnum):
    ORDINARY = "ordinary"  # passed the evidence gate
    MEDIA_CANARY = "media-canary"  # image/video band, after the spare-capacity proof
    MEDIA_UNPROVEN = "media-unproven"  # image/video band, the proof failed
    RESIDENT = "resident"  # below the gate, but a READY incumbent has fresh success serving it
    BELOW = "below"  # deferred: below_evidence_gate


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    reason: str  # starts with a stable code

    @property
    def admitted(self) -> bool:
        return self.gate in (Gate.ORDINARY, Gate.MEDIA_CANARY, Gate.RESIDENT)


def ordinary_gate(forecast: WorkloadForecast, policy: PortfolioPolicy) -> bool:
    return (
        forecast.observations >= policy.min_observations
        or forecast.offered_concurrency >= policy.min_offered_concurrency
    )


def in_media_band(word: str, forecast: WorkloadForecast, policy: PortfolioPolicy) -> bool:
    return (
        word in policy.media_workloads
        and policy.media_canary_min_concurrency
        <= forecast.offered_concurrency
        < policy.min_offered_concurrency
    )


def gate_of(
    word: str,
    forecast: WorkloadForecast,
    policy: PortfolioPolicy,
    spare_proof: bool,
    *,
    has_candidate: bool = True,
    resident_incumbent: str | None = None,
) -> GateResult:
    """`has_candidate`: some feasible model could take the canary (else the band is moot);
    `resident_incumbent`: a candidate model that is READY now and has a fresh success on this
    workload. The gate keeps a one-off request from churning a model *into* memory; it does not
    evict the model already serving a workload whose bursts thin out (after a justified start,
    the incumbent stays while the workload has observations)."""
    if ordinary_gate(forecast, policy):
        return GateResult(Gate.ORDINARY, "admitted: evidence gate passed")
    if resident_incumbent is not None and forecast.observations > 0:
        return GateResult(
            Gate.RESIDENT,
            f"admitted: {resident_incumbent} is resident and served it recently "
            f"({forecast.observations} of {policy.min_observations} observations)",
        )
    if in_media_band(word, forecast, policy) and has_candidate:
        if spare_proof:
            return GateResult(
                Gate.MEDIA_CANARY,
                f"media_canary: {forecast.offered_concurrency:g} units earn one canary after "
                "the fleet spare-capacity proof",
            )
        return GateResult(
            Gate.MEDIA_UNPROVEN,
            f"spare_capacity_unproven: {forecast.offered_concurrency:g} units earn a canary "
            "only when the fleet proves spare capacity",
        )
    return GateResult(
        Gate.BELOW,
        f"below_evidence_gate: {forecast.observations} of {policy.min_observations} observations",
    )


def has_direct_demand(snap: FleetSnapshot, model_id: str) -> bool:
    d = snap.demand.get(model_id)
    return (
        d is not None
        and d.evidence is DemandEvidence.DIRECT
        and (d.offered_concurrency > 0 or d.rpm > 0 or d.queue_depth > 0)
    )


def weak_evidence(
    forecast: WorkloadForecast,
    policy: PortfolioPolicy,
    *,
    direct_demand: bool,
    fresh_success: bool,
) -> bool:
    repeated = forecast.observations >= policy.min_observations
    return not (repeated or direct_demand or fresh_success)


def replicas_needed(
    model: ModelProfile,
    forecast: WorkloadForecast,
    policy: PortfolioPolicy,
    headroom: float,
    *,
    weak: bool,
    serving: bool = False,
) -> int:
    """`serving`: the model is READY and has a fresh success on this workload, so the workload's
    queue is work that real traffic brought to this very model (the spec's "queue-driven
    scale-out comes from model-specific observations after real traffic reaches the selected
    model"): the queue counts, as it does for a named model's target. For any other candidate
    the queue has not been served by it and is left out (one unroutable request is not counted
    both as backlog and as several speculative replicas)."""
    per_replica = model.replica_concurrency * model.target_utilization
    arrival = forecast.arrival_concurrency
    load = (arrival + (forecast.queue_depth if serving else 0.0)) * (1.0 + headroom)
    need = max(1, math.ceil(load / per_replica - 1e-9))
    return min(need, policy.canary_max_replicas) if weak else need
