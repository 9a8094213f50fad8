"""Hard eligibility filters shared by every engine, the validator and the explainer.

A host either may or may not take *new* work (lifecycle, heartbeat, ownership); a (model, host)
pair is compatible or not (runtime, backend, data tier, tags, allow/deny lists, actuator).
Every refusal is a stable reason code; `REASON_TEXT` gives the human sentence.
"""

from __future__ import annotations

from grid.fleet import (
    ADMITTING_STATES,
    FleetSnapshot,
    Host,
    ModelProfile,
    Ownership,
)
from grid.planner.gpus import pair_refusal as gpu_refusal

REASON_TEXT: dict[str, str] = {
    "host_not_admitting": "the host's lifecycle state does not admit new work",
    "heartbeat_missing": "the host has never sent a heartbeat",
    "heartbeat_stale": "the host's last heartbeat is too old",
    "heartbeat_future": "the host's heartbeat is implausibly far in the future",
    "host_manual": "the host is manually managed, so Grid does not place work on it",
    "runtime_mismatch": "the host offers none of the model's runtimes",
    "backend_mismatch": "the host offers none of the model's backends",
    "data_tier": "the host is not cleared for the model's data tier",
    "missing_tag": "the host lacks a tag the model requires",
    "forbidden_tag": "the host carries a tag the model forbids",
    "host_not_allowed": "the host is not on the model's allow list",
    "host_denied": "the host is on the model's deny list",
    "actuator_missing": "the host's actuator cannot load or warm models",
    "gpu_shortfall": "the host has too few GPUs with the memory the model needs",
    "residency_not_reusable": (
        "a draining, failed, unmanaged or other-revision copy of the model is live on the host"
    ),
    "colocation_excluded": "a model the profile may not share a host with is live there",
    "colocation_or_slots_full": "the host's model slots or a colocation ceiling are used up",
    "not_desired": "the model has no desired replicas",
}


def host_refusals(host: Host, snap: FleetSnapshot) -> list[str]:
    """Why a host takes no new work at all (empty list: it may)."""
    reasons: list[str] = []
    if host.state not in ADMITTING_STATES:
        reasons.append("host_not_admitting")
    if host.last_heartbeat is None:
        reasons.append("heartbeat_missing")
    else:
        age = snap.now - host.last_heartbeat
        if age > snap.policy.heartbeat_stale_s:
            reasons.append("heartbeat_stale")
        elif -age > snap.policy.heartbeat_future_skew_s:
            reasons.append("heartbeat_future")
    if host.ownership is Ownership.MANUAL:
        reasons.append("host_manual")
    return reasons


def compatible_runtimes(model: ModelProfile, host: Host) -> list[str]:
    """Runtimes both sides support; an empty model list means any runtime the host has."""
    if not model.runtimes:
        return sorted(host.runtimes)
    if len(model.runtimes) == 1:  # the common case, without building sets
        return list(model.runtimes) if model.runtimes[0] in host.runtimes else []
    return sorted(set(model.runtimes) & set(host.runtimes))


def pair_refusals(
    model: ModelProfile, host: Host, *, cached: bool, runtimes: list[str] | None = None
) -> list[str]:
    """Why this model can never run on this host, independent of current memory.

    `runtimes` may pass `compatible_runtimes(model, host)` when the caller has it already.
    """
    reasons: list[str] = []
    if not (runtimes if runtimes is not None else compatible_runtimes(model, host)):
        reasons.append("runtime_mismatch")
    if model.backends and not set(model.backends) & set(host.backends):
        reasons.append("backend_mismatch")
    if model.data_tier not in host.data_tiers:
        reasons.append("data_tier")
    if model.required_tags and not set(model.required_tags) <= set(host.tags):
        reasons.append("missing_tag")
    if model.forbidden_tags and not set(model.forbidden_tags).isdisjoint(host.tags):
        reasons.append("forbidden_tag")
    if model.allowed_hosts and host.host_id not in model.allowed_hosts:
        reasons.append("host_not_allowed")
    if host.host_id in model.denied_hosts:
        reasons.append("host_denied")
    if gpu_refusal(model, host):
        reasons.append("gpu_shortfall")
    caps = host.actuator_capabilities
    if "warm" not in caps or not (cached or "load" in caps):
        reasons.append("actuator_missing")
    return reasons


def explain_reasons(codes: list[str]) -> str:
    return "; ".join(REASON_TEXT.get(code, code) for code in codes)
