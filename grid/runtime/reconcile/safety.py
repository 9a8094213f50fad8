"""Safety rules for destructive work, shared by cleanup, batch re-validation and retries (pure).

- Last-replica protection: removing a set of replicas of a model is safe only when every desired
  replacement the plan names is counted READY (admitting host, exact artifact), the managed
  baseline is not left to external or unauthenticated replicas, and the failure-domain floor
  holds during the change.
- Drain before unload: UNLOAD only once the residency no longer serves (draining, or a lifecycle
  that never became ready) and reports zero requests in flight; unknown activity fails safe.
- Minimum residency and scale-down cooldown, with future timestamps clamped to age zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet.actions import ActionKind, ActionRecord
from grid.fleet.models import Residency, ResidencyState
from grid.runtime.reconcile.history import ActionKey, HistoryIndex
from grid.runtime.reconcile.proposals import TickState
from grid.runtime.reconcile.view import FleetView, clamped_age

UNLOADABLE_STATES = frozenset(
    {
        ResidencyState.DRAINING,
        ResidencyState.LOADING,
        ResidencyState.WARMING,
        ResidencyState.FAILED,
    }
)


@dataclass(frozen=True)
class Blocker:
    code: str
    detail: str = ""
    retry_at: float | None = None


def removal_blocker(view: FleetView, model_id: str, removing: set[str]) -> Blocker | None:
    """Why taking the replicas on `removing` out of service is unsafe now (None: it is safe)."""
    prof = view.profiles.get(model_id)
    if prof is None:
        return None  # a retired model converges to zero
    for host_id in view.desired_hosts.get(model_id, []):
        if host_id in removing:
            continue
        if not view.counted_ready(model_id, host_id):
            res = view.residency(model_id, host_id)
            state = res.state.value if res is not None else "absent"
            why = (
                "paused or ineligible host"
                if res is not None and (res.state is ResidencyState.READY)
                else state
            )
            return Blocker("replacement_not_ready", f"replacement on {host_id}: {why}")
    managed_before = set(view.managed_counted_hosts(model_id))
    managed_after = managed_before - removing
    floor = min(prof.min_replicas, len(managed_before))
    if len(managed_after) < floor:
        return Blocker(
            "managed_baseline_floor",
            f"{len(managed_after)} managed ready replica(s) would remain, baseline {floor}",
        )
    counted = set(view.counted_hosts(model_id))
    domains_before = {view.domain(h) for h in counted}
    domains_after = {view.domain(h) for h in counted - removing}
    # The floor is what the change must never dip below: the required spread, capped by what
    # the fleet has now and by what the plan's target itself will have.
    target_domains = {view.domain(h) for h in view.desired_hosts.get(model_id, [])}
    domain_floor = min(prof.min_failure_domains, len(domains_before), len(target_domains))
    if len(domains_after) < domain_floor:
        return Blocker(
            "failure_domain_floor",
            f"{len(domains_after)} failure domain(s) would remain, floor {domain_floor}",
        )
    return None


def residency_age_blocker(
    view: FleetView, model_id: str, host_id: str, res: Residency, *, scale_down: bool
) -> Blocker | None:
    """Minimum residency, then (for a scale-down in a quiet spell) the cooldown since last use."""
    prof = view.profiles.get(model_id)
    if prof is None:
        return None
    now = view.now
    age = clamped_age(now, res.loaded_at)
    if age is not None and age < prof.min_residency_s:
        loaded = min(res.loaded_at or now, now)  # a future loaded_at is age zero: now
        return Blocker(
            "minimum_residency",
            f"loaded {age:.0f} s ago, minimum {prof.min_residency_s:.0f} s",
            retry_at=loaded + prof.min_residency_s,
        )
    if scale_down:
        last = res.last_used_at if res.last_used_at is not None else res.loaded_at
        idle = clamped_age(now, last)
        if idle is not None and idle < prof.scale_down_cooldown_s:
            used = min(last or now, now)
            return Blocker(
                "scale_down_cooldown",
                f"used {idle:.0f} s ago, cooldown {prof.scale_down_cooldown_s:.0f} s",
                retry_at=used + prof.scale_down_cooldown_s,
            )
    return None


def unload_blocker(res: Residency) -> Blocker | None:
    """UNLOAD needs a residency that no longer serves and reports no request in flight."""
    if res.state not in UNLOADABLE_STATES:
        return Blocker("requests_in_flight", f"state {res.state.value} still serves")
    if res.active_requests is None:
        return Blocker("activity_unknown")
    if res.active_requests > 0:
        return Blocker("requests_in_flight", f"{res.active_requests} request(s) in flight")
    return None


def destructive_postcondition(view: FleetView, record: ActionRecord) -> bool:
    """An authoritative heartbeat, newer than the withdrawal, proves the action's outcome."""
    stamp = record.withdrawn_at if record.withdrawn_at is not None else record.created_at
    if not view.reachable.get(record.host_id, False) or view.heartbeat(record.host_id) <= stamp:
        return False
    res = view.residency(record.model_id, record.host_id)
    if res is None or res.state is ResidencyState.CACHED:
        return True
    return record.kind is ActionKind.DRAIN and res.state is ResidencyState.DRAINING


def backoff_blocker(view: FleetView, history: HistoryIndex, key: ActionKey) -> Blocker | None:
    retry = history.retry_at(key, view.policy)
    if retry is not None and view.now < retry:
        return Blocker("backoff", f"retry at {retry:.0f}", retry_at=retry)
    return None


def awaiting_heartbeat(view: FleetView, history: HistoryIndex, key: ActionKey) -> bool:
    """The key's latest success is newer than its host's heartbeat: do not repeat it yet."""
    heartbeat = view.heartbeat(key[1])
    return history.awaiting_observation(key, heartbeat, view.now, view.policy) is not None


def defer_blocked(tick: TickState, key: ActionKey, blocker: Blocker) -> None:
    kind, host_id, model_id = key
    tick.defer(
        kind, host_id, model_id, blocker.code, retry_at=blocker.retry_at, detail=blocker.detail
    )
