"""Stable deferral and withdrawal codes, each with the one sentence a person reads.

Codes are part of the `grid reconcile --json` contract: never rename one; add new ones.
"""

from __future__ import annotations

DEFERRAL_TEXT: dict[str, str] = {
    # modes
    "observe_mode": "observe mode records this drift but proposes no action",
    # availability and safety
    "replacement_not_ready": (
        "a desired replacement of this model is not yet ready on an admitting host, so the old "
        "replica keeps serving"
    ),
    "last_replica_floor": (
        "this is the model's last serving replica and the plan still wants the model but "
        "cannot place it (an unmet shortfall), so the replica keeps serving"
    ),
    "managed_baseline_floor": (
        "draining this replica would leave fewer managed ready replicas than the model's "
        "required baseline (external or unauthenticated replicas do not count)"
    ),
    "failure_domain_floor": (
        "draining this replica would leave the model in fewer failure domains than it needs"
    ),
    "minimum_residency": "the residency has not yet stayed loaded for its minimum residency",
    "scale_down_cooldown": "the model was used recently, so scale-down waits for its cooldown",
    "requests_in_flight": "the draining residency still reports requests in flight",
    "activity_unknown": (
        "the residency's activity is unknown, so unloading it fails safe until a heartbeat "
        "reports it idle"
    ),
    "preemption_staged": (
        "the model waits for a staged preemption: it is placed only after a later heartbeat "
        "proves the victim's memory was released"
    ),
    "repack_staged": (
        "the model waits for a staged repack: the incumbent first becomes ready on its new "
        "host, then drains here, and a later heartbeat proves the memory was released"
    ),
    "destructive_blocked": (
        "an earlier drain or unload of this model was withdrawn after delivery; destructive "
        "work for it waits for that action's receipt or a heartbeat proving its outcome"
    ),
    "destructive_batch_withdrawn": (
        "fresh evidence made another destructive action of this model unsafe, so its whole "
        "destructive batch was withdrawn"
    ),
    "constructive_in_flight": (
        "a load or warm of this residency is still running; it is cleaned up after it ends"
    ),
    # ownership
    "pinned_residency": "the residency is on one of the model's pinned hosts; Grid never drains it",
    "unknown_model": (
        "the managed residency names a model with no profile and no retirement tombstone, so "
        "Grid leaves it alone"
    ),
    "not_managed": "the residency is externally or manually managed; Grid never actuates it",
    "host_manual": "the host is manually managed; Grid does not act on it",
    # hosts and resources
    "host_ineligible": "the host may not take this model now (lifecycle, heartbeat or policy)",
    "host_unreachable": "the host's heartbeat is stale or missing, so no command can be trusted",
    "actuator_missing": "the host's actuator does not offer this kind of action",
    "residency_not_reusable": (
        "a draining, failed or other-revision copy of the model occupies this host"
    ),
    "insufficient_memory": (
        "the host's free memory is promised to actions still in flight; the action waits"
    ),
    "insufficient_slots": "the host's model slots are promised to actions still in flight",
    "insufficient_disk": "the host's reported free disk cannot hold the artifact",
    # the predictive cache (cache.py)
    "predictive_reserve": (
        "a predictive transfer must leave the policy's predictive disk reserve free "
        "(policy.predictive_disk_reserve_mb)"
    ),
    "no_disk_telemetry": (
        "the host reports no free disk, and missing disk telemetry never authorizes a "
        "predictive transfer"
    ),
    "advisory_stale": (
        "the plan's advisory names another artifact revision than the model's profile now does"
    ),
    "evict_unsupported": "the node does not offer the evict actuator (an older node)",
    "not_predictive": "the node holds no predictive download of exactly this artifact",
    "artifact_used": "the download was warmed once: a used artifact is never evicted",
    "artifact_active": "a residency of the model is live on the host",
    "pinned_artifact": "the model is pinned to the host, so its artifact stays",
    "planned_here": "the plan places the model on this host, so its artifact stays",
    # retries and governors
    "backoff": "the previous attempt failed; the next one waits for its backoff time",
    "dependency_deferred": "the action it depends on was deferred, so it waits too",
    "governor_global_limit": "the fleet-wide limit of concurrent mutations is reached",
    "governor_host_limit": "the host's limit of concurrent mutations is reached",
    "artifact_fanout": (
        "two loads of the same artifact are already running; a third waits instead of joining "
        "a download stampede"
    ),
}

WITHDRAWAL_TEXT: dict[str, str] = {
    "plan_changed": "the plan no longer asks for this action, and it was never delivered",
    "yield_to_higher_class": (
        "an undelivered lower-class action gave its mutation slot to higher-priority service"
    ),
    "unsafe_destructive_batch": (
        "fresh evidence made a destructive action of this model unsafe, so its whole "
        "destructive batch is withdrawn"
    ),
    "model_retired": "the model's profile was removed; its pending availability work is cancelled",
}


def deferral_text(code: str) -> str:
    return DEFERRAL_TEXT.get(code, code.replace("_", " "))


def withdrawal_text(code: str) -> str:
    return WITHDRAWAL_TEXT.get(code, code.replace("_", " "))
