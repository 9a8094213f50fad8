"""The feasibility scan's preemption paths (pure): every host where a candidate model would fit
once a victim set is gone, ranked, at most MAX_PATHS of them.

The spec: "When several occupied compatible hosts exist, the feasibility scan retains up to
sixteen ranked preemption paths instead of treating the first host as the whole fleet. The
controller selects the first path that preserves direct/baseline work and the active victim's
required ready-replica floor."

A path is (host, victims): on an admitting host outside the plan's staged preemptions, repacks
and held rooms, compatible with the model and not already holding it, the cheapest victim set
(smallest first, up to MAX_VICTIMS) among the host's eligible victims (the caller says which:
stale speculative capacity, excess replicas, or an incumbent a mature beneficiary may replace)
after which the model fits the host's future state (preemption_host.fits_after: both memory
ledgers, slots, colocation, disk). Rank, best first: the highest victim priority, busy victims,
the victims' warm-back seconds (learned per host when known: FleetSnapshot.startup_s), the
number of victims, then the beneficiary's replica worth on the host at measured speed (faster
first), then the host id. `acceptable` is the selection rule: a victim's model keeps at least
its required floor of READY replicas on other admitting hosts — its configured minimum, and one
when the model serves a workload of the decided mapping or has direct named demand.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from grid.fleet import ResidencyState
from grid.planner.eligibility import pair_refusals
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.gates import has_direct_demand
from grid.planner.preemption_host import beneficiary_demand, build_view, fits_after

MAX_PATHS = 16
MAX_VICTIMS = 3
STATIC_OK = frozenset({"colocation_or_slots_full", "colocation_excluded"})

Victims = Callable[[str], list[str]]  # host id -> eligible victims there, least valuable first


@dataclass(frozen=True)
class PathOption:
    host_id: str
    victims: tuple[str, ...]
    rank: tuple[float | int | str, ...]


def _victim_cost(ctx: PortfolioContext, host_id: str, victims: Iterable[str]) -> tuple[int, ...]:
    snap = ctx.snapshot
    host = snap.host(host_id)
    assert host is not None
    live = {r.model_id: r for r in host.residencies}
    priority, busy, warm = -1, 0, 0.0
    for v in victims:
        profile = snap.model(v)
        priority = max(priority, profile.priority if profile is not None else -1)
        res = live.get(v)
        busy += int(res is not None and res.active_requests != 0)
        if profile is not None:
            warm += snap.startup_s(profile, host_id, cached=True)
    return priority, busy, round(warm)


def scan(
    ctx: PortfolioContext, model_id: str, placement: set[Key], victims_of: Victims
) -> list[PathOption]:
    """The ranked paths of `model_id` (at most MAX_PATHS)."""
    problem = ctx.problem
    profile = problem.model_by_id[model_id]
    found: list[PathOption] = []
    kept = {k for k in placement if k in problem.candidates}
    for budget in problem.hosts:
        h = budget.host_id
        if not budget.admitting or h in ctx.outside_hosts:
            continue
        host = ctx.snapshot.host(h)
        assert host is not None
        if any(r.model_id == model_id for r in host.residencies):
            continue
        if pair_refusals(profile, host, cached=model_id in host.cached_models):
            continue
        if set(problem.refusals.get((model_id, h), [])) - STATIC_OK:
            continue
        incoming = beneficiary_demand(host, profile)
        if incoming is None:
            continue
        eligible = victims_of(h)
        if not eligible:
            continue
        view = build_view(problem, host, kept)
        best: PathOption | None = None
        for size in range(1, min(MAX_VICTIMS, len(eligible)) + 1):
            for victims in itertools.combinations(eligible, size):
                if not fits_after(problem, view, incoming, frozenset(victims)):
                    continue
                cost = _victim_cost(ctx, h, victims)
                worth = ctx.weight((model_id, h))
                option = PathOption(h, victims, (*cost, size, -worth, h))
                if best is None or option.rank < best.rank:
                    best = option
            if best is not None:
                break  # the smallest sufficient set on this host
        if best is not None:
            found.append(best)
            if len(found) >= MAX_PATHS:
                break  # the scan retains at most MAX_PATHS hosts' paths
    found.sort(key=lambda p: p.rank)
    return found


def ready_elsewhere(ctx: PortfolioContext, model_id: str, not_on: set[str]) -> int:
    """READY replicas of the model on admitting hosts outside `not_on`."""
    count = 0
    for budget in ctx.problem.hosts:
        if not budget.admitting or budget.host_id in not_on:
            continue
        host = ctx.snapshot.host(budget.host_id)
        if host is not None and any(
            r.model_id == model_id and r.state is ResidencyState.READY for r in host.residencies
        ):
            count += 1
    return count


def floor_of(ctx: PortfolioContext, model_id: str, mapping: dict[str, str]) -> int:
    """READY replicas the model must keep: its minimum, and one while it serves a workload of
    the decided mapping or has direct named demand."""
    profile = ctx.snapshot.model(model_id)
    minimum = profile.min_replicas if profile is not None else 0
    active = model_id in mapping.values() or has_direct_demand(ctx.snapshot, model_id)
    return max(minimum, 1 if active else 0)


def acceptable(ctx: PortfolioContext, path: PathOption, mapping: dict[str, str]) -> bool:
    """The path keeps every victim's required ready-replica floor."""
    for v in set(path.victims):
        if ready_elsewhere(ctx, v, {path.host_id}) < floor_of(ctx, v, mapping):
            return False
    return True


def first_acceptable(
    ctx: PortfolioContext, paths: list[PathOption], mapping: dict[str, str], used: set[Key]
) -> PathOption | None:
    for path in paths:
        if used & {(v, path.host_id) for v in path.victims}:
            continue
        if acceptable(ctx, path, mapping):
            return path
    return None
