"""Safety invariants the simulator checks on every tick and at every action start.

Each check returns `SimViolation`s instead of raising, so a property test can print the whole
story of a failing scenario. The checks read the simulator's ground truth, not the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import (
    ADMITTING_STATES,
    CONSTRUCTIVE_KINDS,
    DESTRUCTIVE_KINDS,
    Action,
    ActionKind,
    ActionRecord,
    FleetSnapshot,
    ModelProfile,
    Ownership,
    Policy,
    ReconcileResult,
    RecordStatus,
    ResidencyState,
)
from grid.lab.sim_host import SimHost
from grid.planner import host_refusals, pair_refusals
from grid.runtime.reconcile import DEFERRAL_TEXT

ActionKey = tuple[ActionKind, str, str]  # (kind, host_id, model_id)


@dataclass(frozen=True)
class SimViolation:
    at: float
    code: str
    detail: str


def memory_violations(now: float, hosts: dict[str, SimHost]) -> list[SimViolation]:
    out = []
    for host in hosts.values():
        live, allocatable = host.live_mb(), host.allocatable_raw_mb()
        if live > allocatable:
            detail = f"{host.host_id}: {live} MB live, {allocatable} MB"
            out.append(SimViolation(now, "memory_overcommitted", detail))
    return out


def placement_violations(
    now: float, snap: FleetSnapshot, result: ReconcileResult
) -> list[SimViolation]:
    """Constructive work only on hosts that may take it, as the snapshot shows them."""
    out = []
    hosts = {h.host_id: h for h in snap.hosts}
    profiles = {m.model_id: m for m in snap.models}
    for action in result.actions:
        if action.kind not in CONSTRUCTIVE_KINDS:
            continue
        host, prof = hosts.get(action.host_id), profiles.get(action.model_id)
        if host is None or prof is None:
            out.append(SimViolation(now, "unknown_target", action.action_id))
            continue
        cached = action.model_id in host.cached_models
        why = host_refusals(host, snap) + pair_refusals(prof, host, cached=cached)
        if why:
            out.append(
                SimViolation(
                    now,
                    "ineligible_host",
                    f"{action.kind.value} {action.model_id} on {action.host_id}: {', '.join(why)}",
                )
            )
    return out


def deferral_violations(now: float, result: ReconcileResult) -> list[SimViolation]:
    """Every deferral carries a documented code, a sentence, and a retry time not in the past."""
    out = []
    for d in result.deferred:
        if d.code not in DEFERRAL_TEXT or not d.message or d.retry_at < now:
            out.append(SimViolation(now, "bad_deferral", f"{d.code} {d.retry_at} {d.message!r}"))
    return out


def ownership_violations(
    now: float, snap: FleetSnapshot, hosts: dict[str, SimHost], actions: list[Action]
) -> list[SimViolation]:
    out = []
    profiles = {m.model_id: m for m in snap.models}
    for action in actions:
        host = hosts[action.host_id]
        if host.template.ownership is Ownership.MANUAL:
            out.append(SimViolation(now, "manual_host_actuated", action.action_id))
        if action.kind not in DESTRUCTIVE_KINDS:
            continue
        res = host.residencies.get(action.model_id)
        prof = profiles.get(action.model_id)
        if res is not None and res.ownership is not Ownership.MANAGED:
            out.append(SimViolation(now, "unmanaged_actuated", action.action_id))
        if prof is not None and action.host_id in prof.pinned_hosts:
            out.append(SimViolation(now, "pinned_actuated", action.action_id))
    return out


def governor_violations(
    now: float, snap: FleetSnapshot, records: list[ActionRecord]
) -> list[SimViolation]:
    out = []
    policy = snap.policy
    holders = [r for r in records if r.holds_slot]
    if len(holders) > policy.max_concurrent_mutations:
        out.append(SimViolation(now, "global_limit", f"{len(holders)} open mutations"))
    per_host: dict[str, int] = {}
    per_artifact: dict[str, int] = {}
    for r in holders:
        per_host[r.host_id] = per_host.get(r.host_id, 0) + 1
        if r.kind is ActionKind.LOAD:
            per_artifact[r.artifact_key] = per_artifact.get(r.artifact_key, 0) + 1
    for host_id, count in per_host.items():
        if count > policy.max_host_mutations:
            out.append(SimViolation(now, "host_limit", f"{host_id}: {count} open mutations"))
    for artifact, count in per_artifact.items():
        if count > policy.artifact_fanout:
            out.append(SimViolation(now, "artifact_fanout", f"{artifact}: {count} loads"))
    return out


def earliest_retry(records: list[ActionRecord], key: ActionKey, policy: Policy) -> float | None:
    """When the spec allows the next attempt of `key`, restated from the records alone.

    Deliberately independent of the reconciler's history index: after n consecutive failures
    (counted back from the newest terminal record to the last success) the next attempt waits
    min(cap, base * 2**(n - 1)) seconds from the latest failure's finish. With the defaults
    (base 15 s, cap 600 s) the schedule is 15, 30, 60, 120, 240, 480, 600, 600, ... seconds.
    """
    terminal = sorted(
        (
            r
            for r in records
            if (r.kind, r.host_id, r.model_id) == key
            and r.status in (RecordStatus.FAILED, RecordStatus.SUCCEEDED)
        ),
        key=lambda r: (r.created_at, r.attempt),
    )
    failures = 0
    for r in reversed(terminal):
        if r.status is not RecordStatus.FAILED:
            break
        failures += 1
    if failures == 0:
        return None
    last = terminal[-1]
    failed_at = last.finished_at if last.finished_at is not None else last.created_at
    delay = policy.retry_backoff_base_s
    for _ in range(failures - 1):
        delay = min(delay * 2, policy.retry_backoff_cap_s)
    return failed_at + min(delay, policy.retry_backoff_cap_s)


def retry_violations(
    now: float, snap: FleetSnapshot, before: list[ActionRecord], actions: list[Action]
) -> list[SimViolation]:
    """Stable ids, pending equivalents suppressed, retries only after their backoff."""
    out = []
    known = {r.action_id for r in before}
    open_keys = {(r.kind, r.host_id, r.model_id) for r in before if r.is_open}
    for action in actions:
        key = (action.kind, action.host_id, action.model_id)
        if action.action_id in known:
            out.append(SimViolation(now, "reused_action_id", action.action_id))
        if key in open_keys:
            out.append(SimViolation(now, "duplicate_open_action", action.action_id))
        retry = earliest_retry(before, key, snap.policy)
        if retry is not None and now < retry:
            out.append(SimViolation(now, "retry_before_backoff", f"{action.action_id} < {retry}"))
    return out


def start_violations(
    now: float,
    profiles: dict[str, ModelProfile],
    policy: Policy,
    hosts: dict[str, SimHost],
    host: SimHost,
    action: Action,
) -> list[SimViolation]:
    """Checked the moment a node starts a destructive action."""
    out = []
    res = host.residencies.get(action.model_id)
    if action.kind is ActionKind.UNLOAD and res is not None:
        if res.state is ResidencyState.READY:
            out.append(SimViolation(now, "unloaded_before_drain", action.action_id))
        if res.activity_unknown or res.active_requests is None or res.active_requests > 0:
            out.append(SimViolation(now, "unloaded_with_requests", action.action_id))
    if action.kind is ActionKind.DRAIN and res is not None and not action.preemption:
        prof = profiles.get(action.model_id)

        def observed_admitting(h: SimHost) -> bool:
            # What a heartbeat shows: an unreported outage still looks admitting until stale.
            hb = h.last_heartbeat
            return (
                h.state in ADMITTING_STATES
                and hb is not None
                and now - hb <= policy.heartbeat_stale_s
            )

        if prof is None or prof.min_replicas <= 0 or res.state is not ResidencyState.READY:
            return out
        # Ground truth of the spec's "ready": a managed READY child with its live route, on a
        # host that admits work, proving the configured artifact.
        ready = [
            h.host_id
            for h in hosts.values()
            if observed_admitting(h)
            and (r := h.residencies.get(action.model_id)) is not None
            and r.state is ResidencyState.READY
            and r.ownership is Ownership.MANAGED
            and h.routed(action.model_id)
            and (prof.artifact_sha256 is None or r.artifact_sha256 == prof.artifact_sha256)
        ]
        if (
            observed_admitting(host)
            and host.host_id in ready
            and len(ready) - 1 < prof.min_replicas
        ):
            out.append(
                SimViolation(
                    now,
                    "floor_broken",
                    f"drain of {action.model_id} on {host.host_id} leaves {len(ready) - 1} "
                    f"ready, floor {prof.min_replicas}",
                )
            )
        if not observed_admitting(host) and not [h for h in ready if h != host.host_id]:
            # Make before break: the last ready replica leaves a host that stopped admitting
            # work only once a replacement elsewhere is ready.
            out.append(
                SimViolation(
                    now,
                    "evacuated_before_replacement",
                    f"drain of {action.model_id} on {host.host_id} with no ready replica elsewhere",
                )
            )
    return out


# ---------------------------------------------------------------------- from the event timeline
@dataclass(frozen=True)
class LifeEvent:
    """One entry of a run's replica timeline, from ground truth (not the reconciler's view).

    kind: "ready" (a replica became READY on the host at `at`), "drain" (a drain of it was
    decided at `at` and took effect), "lost" (the host went down or rebooted: everything on it
    is gone). A drain carries `preemption` (the planner's named victim), `admitting` (its host
    admitted work then) and `wanted` (replicas the plan of that tick wanted for the model).
    """

    at: float
    kind: str
    host_id: str
    model_id: str = ""
    preemption: bool = False
    admitting: bool = True
    wanted: int = 0


_ORDER = {"lost": 0, "ready": 1, "drain": 2}


def timeline_violations(
    events: list[LifeEvent], min_residency_s: dict[str, float]
) -> list[SimViolation]:
    """Minimum residency and make-before-break, restated from the timeline alone.

    - `minimum_residency_broken`: a READY replica on an admitting host drained less than its
      model's min_residency_s after it became READY.
    - `last_ready_replica_drained`: a drain (not a preemption) on an admitting host that leaves
      no READY replica of the model anywhere while the plan still wants it (wanted > 0): make
      before break means the replacement is READY first.
    Events at the same instant apply in the order lost, ready, drain.
    """
    out: list[SimViolation] = []
    ready: dict[tuple[str, str], float] = {}  # (host, model) -> READY since
    for e in sorted(events, key=lambda e: (e.at, _ORDER.get(e.kind, 3), e.host_id, e.model_id)):
        key = (e.host_id, e.model_id)
        if e.kind == "lost":
            ready = {k: v for k, v in ready.items() if k[0] != e.host_id}
        elif e.kind == "ready":
            ready.setdefault(key, e.at)
        elif e.kind == "drain" and key in ready:
            since = ready.pop(key)
            if not e.admitting:
                continue
            floor = min_residency_s.get(e.model_id, 0.0)
            if e.at - since < floor:
                out.append(
                    SimViolation(
                        e.at,
                        "minimum_residency_broken",
                        f"drain of {e.model_id} on {e.host_id} {e.at - since:.0f} s after it "
                        f"became ready, minimum {floor:.0f} s",
                    )
                )
            others = [k for k in ready if k[1] == e.model_id]
            if not others and e.wanted > 0 and not e.preemption:
                out.append(
                    SimViolation(
                        e.at,
                        "last_ready_replica_drained",
                        f"drain of {e.model_id} on {e.host_id} left no ready replica while the "
                        f"plan wanted {e.wanted}",
                    )
                )
    return out
