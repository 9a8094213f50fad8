"""One host as a preemption target: who could be evicted, and would that let a model fit (pure).

The beneficiary is never placed by the plan that stages the preemption; it must fit a *future*
snapshot of the host in which the victims are gone and everything else the plan asks for is
live. `HostView.fits_after` therefore checks, from the snapshot rather than the engines' caps:

    desired footprint  plan footprint + staged beneficiaries + new model ≤ allocatable − fixed
    make-before-break  live (not evicted) + plan's new loads + staged + new ≤ allocatable − headroom
    slots, colocation  occupants = live (not evicted) ∪ plan ∪ staged ∪ {new} within max_models
                       and every occupant's ceiling; no excluded pair with the new model
    disk (known only)  plan's uncached fetches + staged ones + new model's (unless cached)

Victims are the live residencies that `preemption_rules.victim_fence` lets the beneficiary take
(managed, configured, strictly lower priority, not pinned there, past minimum residency, on a
managed host whose actuator drains and unloads), ranked by priority, then idle before busy, then
learned warm-back time (`warm_back_s`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from grid.fleet import (
    LIVE_STATES,
    FleetSnapshot,
    Host,
    ModelProfile,
    Residency,
    ResidencyState,
)
from grid.planner.preemption_rules import victim_fence
from grid.planner.problem import Candidate, HostBudget, PlacementProblem, choose_runtime
from grid.planner.problem import footprint_mb as profile_footprint_mb


@dataclass(frozen=True)
class Victim:
    model_id: str
    host_id: str
    memory_mb: int
    priority: int
    preferred: bool  # failed, draining or idle: releasing it costs no live work
    warm_back_s: float  # time to restore it on this host: `warm_back_s` below


@dataclass(frozen=True)
class Staged:
    model_id: str
    memory_mb: int
    disk_mb: int
    cached: bool  # exact weights already on the host's disk


@dataclass
class HostView:
    host: Host
    budget: HostBudget
    live: dict[str, Residency]  # live residencies not yet evicted, by model
    plan: dict[str, Candidate]  # the plan's placements here, not yet evicted
    staged: list[Staged] = field(default_factory=list)  # beneficiaries staged here

    def occupied_by(self, model_id: str) -> bool:
        return (
            model_id in self.live
            or model_id in self.plan
            or any(s.model_id == model_id for s in self.staged)
        )


def build_view(
    problem: PlacementProblem,
    host: Host,
    placed: set[tuple[str, str]],
    on_host: Iterable[str] | None = None,
) -> HostView:
    """`on_host`: the models of `placed` on this host, when the caller grouped them already
    (else every configured model is looked up)."""
    live = {r.model_id: r for r in host.residencies if r.state in LIVE_STATES}
    models = sorted(problem.model_by_id) if on_host is None else sorted(on_host)
    plan = {
        model_id: problem.candidates[(model_id, host.host_id)]
        for model_id in models
        if (model_id, host.host_id) in placed
    }
    return HostView(host=host, budget=problem.host_by_id[host.host_id], live=live, plan=plan)


def victims_on(
    problem: PlacementProblem, view: HostView, beneficiary: ModelProfile
) -> list[Victim]:
    """Residencies on the host that this beneficiary may evict, least valuable first.

    Which ones: `preemption_rules.victim_fence`, the rule the reconciler's gates use too.
    """
    host = view.host
    now = problem.snapshot.now
    out: list[Victim] = []
    for model_id in sorted(view.live):
        res = view.live[model_id]
        if model_id == beneficiary.model_id:
            continue
        profile = problem.model_by_id.get(model_id)
        if victim_fence(host, res, profile, beneficiary, now) is not None or profile is None:
            continue
        preferred = res.state in (ResidencyState.FAILED, ResidencyState.DRAINING) or (
            res.active_requests == 0
        )
        out.append(
            Victim(
                model_id=model_id,
                host_id=host.host_id,
                memory_mb=res.memory_mb,
                priority=profile.priority,
                preferred=preferred,
                warm_back_s=warm_back_s(problem.snapshot, profile, host),
            )
        )
    out.sort(key=lambda v: (v.priority, not v.preferred, v.warm_back_s, v.model_id))
    return out


def warm_back_s(snap: FleetSnapshot, profile: ModelProfile, host: Host) -> float:
    """Seconds to warm a victim back on the host it leaves once the burst is over: the host's
    own learned warm time (configured estimate without samples), plus its learned load time
    unless the host lists the weights as cached (`FleetSnapshot.startup_s`, the one rule)."""
    cached = profile.model_id in host.cached_models
    return snap.startup_s(profile, host.host_id, cached=cached)


def beneficiary_demand(host: Host, model: ModelProfile) -> Staged | None:
    """The beneficiary's footprint and artifact fetch on this host (None: no runtime)."""
    runtime = choose_runtime(model, host)
    if runtime is None:
        return None
    cached = model.model_id in host.cached_models or any(
        r.model_id == model.model_id and r.state is ResidencyState.CACHED for r in host.residencies
    )
    return Staged(
        model_id=model.model_id,
        memory_mb=profile_footprint_mb(model, runtime),
        disk_mb=0 if cached else model.artifact_size_mb,
        cached=cached,
    )


def fits_after(
    problem: PlacementProblem, view: HostView, incoming: Staged, victims: frozenset[str]
) -> bool:
    """Would `incoming` fit once `victims` (model_ids live here) are gone?"""
    budget = view.budget
    plan = [c for m, c in view.plan.items() if m not in victims]
    live = [r for m, r in view.live.items() if m not in victims]
    staged = [*view.staged, incoming]
    footprint = sum(c.memory_mb for c in plan) + sum(s.memory_mb for s in staged)
    if footprint > budget.footprint_budget_mb:
        return False
    loads = sum(c.new_mb for c in plan if c.is_new) + sum(s.memory_mb for s in staged)
    live_mb = sum(r.memory_mb for r in live)
    if live_mb + loads > budget.allocatable_mb - budget.headroom_mb:
        return False
    occupants = {r.model_id for r in live} | {c.model_id for c in plan}
    occupants |= {s.model_id for s in staged}
    if view.host.max_models and len(occupants) > view.host.max_models:
        return False
    for model_id in occupants:
        profile = problem.model_by_id.get(model_id)
        ceiling = profile.max_colocated_models if profile is not None else 0
        if ceiling and len(occupants) > ceiling:
            return False
    if any(problem.excluded(incoming.model_id, other) for other in occupants - {incoming.model_id}):
        return False
    free_disk = view.host.disk_free_mb
    if free_disk is not None:
        fetches = sum(c.disk_mb for c in plan if c.is_new) + sum(s.disk_mb for s in staged)
        if fetches > free_disk:
            return False
    return True
