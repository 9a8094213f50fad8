"""The one rule of what a predictive eviction may touch (pure), used by every path: the
planner choosing expiries and replacement victims, the reconciler proposing an `evict`, and the
controller's last check before an `evict` leaves it (against the latest heartbeat).

An entry may be evicted only when all of these hold:
- the host is managed by Grid (never a manually managed node) and lists the `evict` actuator
  (an older node without it is left untouched);
- the host reports the entry in its predictive provenance with exactly this SHA-256 (an
  operator cache, a catalog file or a demanded download is not a predictive entry);
- the entry was never warmed (a used download stays);
- no residency of the model is live on the host (loading, warming, ready, draining, failed);
- the model is not pinned to the host, and the plan does not place it there.
"""

from __future__ import annotations

from grid.fleet import LIVE_STATES, Host, ModelProfile, Ownership, PredictiveEntry

EVICT_CAPABILITY = "evict"

REFUSAL_TEXT: dict[str, str] = {
    "host_manual": "the host is manually managed; Grid never deletes its files",
    "evict_unsupported": "the node does not offer the evict actuator (an older node)",
    "not_predictive": "the node holds no predictive download of exactly this artifact",
    "artifact_used": "the download was warmed once: a used artifact is never evicted",
    "artifact_active": "a residency of the model is live on the host",
    "pinned_artifact": "the model is pinned to the host",
    "planned_here": "the plan places the model on this host",
}


def predictive_entry(host: Host, model_id: str, sha256: str) -> PredictiveEntry | None:
    """The host's predictive entry for exactly this artifact, or None."""
    return next(
        (e for e in host.predictive_cache if e.model_id == model_id and e.sha256 == sha256),
        None,
    )


def eviction_refusal(
    host: Host,
    model_id: str,
    sha256: str,
    *,
    profile: ModelProfile | None,
    planned_here: bool,
) -> str | None:
    """Why this exact predictive entry may not be evicted from `host` (None: it may)."""
    if host.ownership is not Ownership.MANAGED:
        return "host_manual"
    if EVICT_CAPABILITY not in host.actuator_capabilities:
        return "evict_unsupported"
    entry = predictive_entry(host, model_id, sha256)
    if entry is None:
        return "not_predictive"
    if entry.warmed:
        return "artifact_used"
    if any(r.model_id == model_id and r.state in LIVE_STATES for r in host.residencies):
        return "artifact_active"
    if profile is not None and host.host_id in profile.pinned_hosts:
        return "pinned_artifact"
    if planned_here:
        return "planned_here"
    return None
