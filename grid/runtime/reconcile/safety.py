"""Safety rules for destructive work; `gates.py` orders them into the one gate list (pure).

- Last-replica protection: removing a set of replicas of a model is safe only when every desired
  replacement the plan names is counted READY (admitting host, live child route, exact
  artifact), the managed baseline is not left to external or unauthenticated replicas, and the
  failure-domain floor holds during the change.
- Last-replica floor: the last serving replica of a model the plan wants but cannot place
  (an unmet shortfall) is never cleaned up; only a staged preemption may take it.
- Make before break: the last ready replica of a required model on a host that stopped
  admitting work drains only once a replacement elsewhere is counted READY.
- Drain before unload: UNLOAD only once the residency no longer serves (draining, or a lifecycle
  that never became ready) and reports zero requests in flight; unknown activity fails safe.
- Minimum residency and scale-down cooldown, with future timestamps clamped to age zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import ActionKind, ActionRecord, Residency, ResidencyState
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


def replacement_blocker(view: FleetView, model_id: str, removing: set[str]) -> Blocker | None:
    """Every replica the plan keeps outside `removing` must be counted READY first."""
    if model_id not in view.profiles:
        return None  # a retired model converges to zero
    for host_id in view.desired_hosts.get(model_id, []):
        if host_id in removing or view.counted_ready(model_id, host_id):
            continue
        res = view.residency(model_id, host_id)
        if res is None:
            why = "absent"
        elif res.state is ResidencyState.READY and not view.admitting.get(host_id, False):
            why = "paused or ineligible host"
        elif res.state is ResidencyState.READY and not view.route_corroborated(model_id, host_id):
            why = "ready row without a live child route"
        elif res.state is ResidencyState.READY:
            why = "another artifact revision"
        else:
            why = res.state.value
        return Blocker("replacement_not_ready", f"replacement on {host_id}: {why}")
    return None


def last_replica_blocker(view: FleetView, model_id: str, removing: set[str]) -> Blocker | None:
    """The last serving replica of a model the plan wants but leaves short stays (invariant 5).

    When the plan places fewer replicas than it wants (an unmet shortfall), no replacement can
    ever become ready, so a cleanup would take the model's last serving replica (any owner or
    revision) away and leave nothing. A planner-staged preemption is the one exception.
    """
    wanted = view.plan.desired_replicas.get(model_id, 0)
    placed = len(view.desired_hosts.get(model_id, []))
    if model_id not in view.profiles or wanted < 1 or placed >= wanted:
        return None
    serving = [h for h, _r in view.by_model.get(model_id, []) if view.serving(model_id, h)]
    if any(h not in removing for h in serving):
        return None
    return Blocker(
        "last_replica_floor",
        f"the last serving replica; the plan wants {wanted} and places {placed}",
    )


def evacuation_blocker(
    view: FleetView, model_id: str, host_id: str, removing: set[str]
) -> Blocker | None:
    """Make before break for a READY replica on a host that stopped admitting work.

    When that replica is the last ready one of a required model (no managed replica serves
    outside `removing`), it drains only after a replacement elsewhere is counted READY.
    """
    prof = view.profiles.get(model_id)
    if prof is None or prof.min_replicas <= 0:
        return None
    remaining = [h for h in view.managed_serving_hosts(model_id) if h not in removing]
    if remaining:
        return None
    planned = [h for h in view.desired_hosts.get(model_id, []) if h != host_id]
    blocker = replacement_blocker(view, model_id, removing)
    if blocker is not None:
        return blocker
    detail = "no replacement is planned elsewhere" if not planned else "no replacement serves"
    return Blocker("replacement_not_ready", f"{host_id} holds the last ready replica; {detail}")


def managed_floor_blocker(view: FleetView, model_id: str, removing: set[str]) -> Blocker | None:
    """The managed baseline is never left to external or unauthenticated replicas."""
    prof = view.profiles.get(model_id)
    if prof is None:
        return None
    managed_before = set(view.managed_counted_hosts(model_id))
    managed_after = managed_before - removing
    floor = min(prof.min_replicas, len(managed_before))
    if len(managed_after) < floor:
        return Blocker(
            "managed_baseline_floor",
            f"{len(managed_after)} managed ready replica(s) would remain, baseline {floor}",
        )
    return None


def domain_floor_blocker(view: FleetView, model_id: str, removing: set[str]) -> Blocker | None:
    """The change never dips below the required spread, capped by what the fleet has now and
    by what the plan's target itself will have."""
    prof = view.profiles.get(model_id)
    if prof is None:
        return None
    counted = set(view.counted_hosts(model_id))
    domains_before = {view.domain(h) for h in counted}
    domains_after = {view.domain(h) for h in counted - removing}
    target_domains = {view.domain(h) for h in view.desired_hosts.get(model_id, [])}
    domain_floor = min(prof.min_failure_domains, len(domains_before), len(target_domains))
    if len(domains_after) < domain_floor:
        return Blocker(
            "failure_domain_floor",
            f"{len(domains_after)} failure domain(s) would remain, floor {domain_floor}",
        )
    return None


def residency_age_blocker(
    view: FleetView, model_id: str, res: Residency, *, scale_down: bool
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
