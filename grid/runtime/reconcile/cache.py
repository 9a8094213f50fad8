"""Cache-only work of the predictive artifact cache: advisory prefetches and exact evictions.

The plan's `prefetch` report (grid/planner/prefetch) names at most a few cache-only advisories
and the exact evictions of unused predictive entries. Here:
- an advisory becomes a disk-only LOAD marked `predictive`: no memory, no model slot, no warm
  after it, no drain before it; it runs behind every other action (urgency `predictive`,
  administrator priority 0, so it yields its mutation slot to anything else), and the
  governors' disk ledger refuses it unless it leaves the predictive reserve free. A host
  without disk telemetry never gets one. A later placement of the model reuses the cached
  artifact (or the open load) and skips the transfer.
- an eviction becomes an EVICT of exactly the entry's SHA-256, only while the snapshot still
  shows that predictive entry and the one eviction rule (grid/planner/prefetch/protect.py)
  lets it go: a managed node with the evict actuator, never warmed, not live, not pinned, not
  placed there by the plan. The controller checks the same rule again against the latest
  heartbeat before the command leaves it.
An open record of either keeps its id while the plan still asks for it; otherwise the tick's
ordinary withdrawal of unwanted undelivered records applies.
"""

from __future__ import annotations

from grid.fleet import ActionKind, CacheEviction, Ownership, PrefetchAdvisory, Urgency
from grid.planner.prefetch import eviction_refusal
from grid.runtime.reconcile.constructive import artifact_key
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import Proposal, TickState
from grid.runtime.reconcile.safety import awaiting_heartbeat, backoff_blocker, defer_blocked
from grid.runtime.reconcile.view import FleetView

LOAD_CAPABILITY = "load"
# How an evict's reason starts, by the plan's eviction code (the lab's scorecard reads it).
EXPIRED_REASON = "predictive cache entry expired"
REPLACED_REASON = "predictive cache entry replaced"


def propose_cache_work(view: FleetView, history: HistoryIndex, tick: TickState) -> None:
    report = view.plan.prefetch
    if report is None:
        return
    for advisory in report.advisories:
        _prefetch(view, history, tick, advisory)
    for eviction in report.evictions:
        _evict(view, history, tick, eviction)


def _prefetch(
    view: FleetView, history: HistoryIndex, tick: TickState, advisory: PrefetchAdvisory
) -> None:
    model_id, host_id = advisory.model_id, advisory.host_id
    host = view.hosts.get(host_id)
    prof = view.profiles.get(model_id)
    if host is None or prof is None or model_id in view.retired:
        return
    if (model_id, host_id) in view.desired:
        return  # placed there after all: availability work loads it
    key = (ActionKind.LOAD, host_id, model_id)
    if tick.keep_open(history.open_record(key)) is not None:
        return
    if view.exact_cached(model_id, host_id) or view.is_live(model_id, host_id):
        return
    if awaiting_heartbeat(view, history, key):
        return
    if prof.artifact_sha256 != advisory.sha256 or not prof.artifact_source:
        tick.defer(ActionKind.LOAD, host_id, model_id, "advisory_stale")
        return
    if view.refusals[host_id]:
        tick.defer(ActionKind.LOAD, host_id, model_id, "host_ineligible")
        return
    if host.ownership is not Ownership.MANAGED or LOAD_CAPABILITY not in (
        host.actuator_capabilities
    ):
        tick.defer(ActionKind.LOAD, host_id, model_id, "actuator_missing")
        return
    if host.disk_free_mb is None:
        tick.defer(ActionKind.LOAD, host_id, model_id, "no_disk_telemetry")
        return
    blocker = backoff_blocker(view, history, key)
    if blocker is not None:
        defer_blocked(tick, key, blocker)
        return
    tick.proposals.append(
        Proposal(
            kind=ActionKind.LOAD,
            host_id=host_id,
            model_id=model_id,
            memory_mb=0,
            reason=f"predictive prefetch (cache only): {advisory.reason}",
            priority=0,
            urgency=Urgency.PREDICTIVE,
            cold_start_s=advisory.transfer_s,
            artifact_key=artifact_key(prof),
            artifact_mb=prof.artifact_size_mb,
            predictive=True,
            artifact_sha256=advisory.sha256,
            disk_reserve_mb=view.policy.predictive_disk_reserve_mb,
        )
    )


def _evict(
    view: FleetView, history: HistoryIndex, tick: TickState, eviction: CacheEviction
) -> None:
    model_id, host_id = eviction.model_id, eviction.host_id
    host = view.hosts.get(host_id)
    if host is None:
        return
    key = (ActionKind.EVICT, host_id, model_id)
    refusal = eviction_refusal(
        host,
        model_id,
        eviction.sha256,
        profile=view.profiles.get(model_id),
        planned_here=(model_id, host_id) in view.desired,
    )
    if refusal == "not_predictive":
        return  # gone already (or never there): nothing to evict
    if refusal is not None:
        tick.defer(ActionKind.EVICT, host_id, model_id, refusal)
        return
    open_record = history.open_record(key)
    if open_record is not None and open_record.artifact_sha256 == eviction.sha256:
        tick.keep_open(open_record)
        return
    if not view.reachable.get(host_id, False):
        tick.defer(ActionKind.EVICT, host_id, model_id, "host_unreachable")
        return
    if model_id in tick.blocked_models:
        tick.defer(ActionKind.EVICT, host_id, model_id, "destructive_blocked")
        return
    if awaiting_heartbeat(view, history, key):
        return
    blocker = backoff_blocker(view, history, key)
    if blocker is not None:
        defer_blocked(tick, key, blocker)
        return
    what = (
        f"{REPLACED_REASON} by {eviction.beneficiary_model_id}"
        if eviction.code == "replaced"
        else EXPIRED_REASON
    )
    tick.proposals.append(
        Proposal(
            kind=ActionKind.EVICT,
            host_id=host_id,
            model_id=model_id,
            memory_mb=0,
            reason=f"{what}: {eviction.reason}",
            priority=0,
            urgency=Urgency.CLEANUP,
            predictive=True,
            artifact_sha256=eviction.sha256,
        )
    )
