"""At most one preemption-only model per tick: replace stale speculative capacity (pure).

After the portfolio is decided, an admitted workload that is still uncovered may claim one host
whose only obstacle is *stale speculative capacity*: live managed residencies that the final
plan no longer keeps (so no baseline, pinned or directly demanded replica, and no model of the
new portfolio), that are idle (no active request), past their minimum residency and not pinned
to the host. Workloads are tried by pressure (highest first), candidates by exploitation-only
utility (the optimism bonus buys no eviction authority); per host the smallest victim set, least
valuable first, that lets the model fit the host's future state (preemption_host.fits_after:
both memory ledgers, slots, colocation, disk). At most `max_preemption_models` models are
staged per tick. The beneficiary is not placed now: the plan names the victims, the workload row
reads `awaiting-plan`, and a later snapshot with the memory free places it normally.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from grid.fleet.models import Preemption, ResidencyState
from grid.planner.eligibility import pair_refusals
from grid.planner.portfolio.context import Key, PairInfo, PortfolioContext
from grid.planner.portfolio.score import pressure_of
from grid.planner.preemption_host import beneficiary_demand, build_view, fits_after

MAX_VICTIMS = 3
STATIC_OK = frozenset({"colocation_or_slots_full", "colocation_excluded"})


@dataclass(frozen=True)
class StagedWorkload:
    workload: str
    model_id: str
    host_id: str
    victims: tuple[str, ...]


def _stale(ctx: PortfolioContext, host_id: str, placement: set[Key]) -> list[str]:
    snap = ctx.snapshot
    host = snap.host(host_id)
    assert host is not None
    out: list[tuple[int, str]] = []
    for res in host.residencies:
        key = (res.model_id, host_id)
        if key in placement or not res.is_managed or res.active_requests != 0:
            continue
        if res.state not in (ResidencyState.READY, ResidencyState.WARMING, ResidencyState.FAILED):
            continue
        profile = snap.model(res.model_id)
        min_residency = profile.min_residency_s if profile is not None else 0.0
        if res.loaded_at is None or snap.now - res.loaded_at < min_residency:
            continue  # an unknown or young load is protected
        if profile is not None and host_id in profile.pinned_hosts:
            continue
        out.append((profile.priority if profile is not None else -1, res.model_id))
    return [m for _p, m in sorted(out)]


def _path(
    ctx: PortfolioContext, pair: PairInfo, placement: set[Key]
) -> tuple[str, tuple[str, ...]] | None:
    problem = ctx.problem
    profile = problem.model_by_id[pair.model_id]
    for budget in problem.hosts:
        h = budget.host_id
        if not budget.admitting or h in ctx.outside_hosts:
            continue
        host = ctx.snapshot.host(h)
        assert host is not None
        if any(r.model_id == pair.model_id for r in host.residencies):
            continue
        if pair_refusals(profile, host, cached=pair.model_id in host.cached_models):
            continue
        if set(problem.refusals.get((pair.model_id, h), [])) - STATIC_OK:
            continue
        incoming = beneficiary_demand(host, profile)
        if incoming is None:
            continue
        stale = _stale(ctx, h, placement)
        view = build_view(problem, host, {k for k in placement if k in problem.candidates})
        for size in range(1, min(MAX_VICTIMS, len(stale)) + 1):
            for victims in itertools.combinations(stale, size):
                if fits_after(problem, view, incoming, frozenset(victims)):
                    return h, victims
    return None


def stage_preemptions(
    ctx: PortfolioContext, mapping: dict[str, str], placement: set[Key]
) -> list[StagedWorkload]:
    budget = ctx.policy.max_preemption_models
    staged: list[StagedWorkload] = []
    used: set[str] = set()
    uncovered = [w for w in ctx.admitted if w not in mapping]
    for w in sorted(uncovered, key=lambda w: (-pressure_of(ctx, w), w)):
        if len(staged) >= budget:
            break
        pairs = sorted(
            (p for (ww, _m), p in ctx.pairs.items() if ww == w and not p.feasible),
            key=lambda p: (-p.exploit_utility, p.model_id),
        )
        for pair in pairs:
            path = _path(ctx, pair, placement)
            if path is None:
                continue
            host_id, victims = path
            if used & set(victims):
                continue
            used |= set(victims)
            staged.append(StagedWorkload(w, pair.model_id, host_id, victims))
            break
    return staged


def preemptions_of(staged: list[StagedWorkload]) -> list[Preemption]:
    return [
        Preemption(
            victim_model_id=victim,
            host_id=s.host_id,
            beneficiary_model_id=s.model_id,
            reason=f"portfolio: stale speculative capacity makes room for workload {s.workload}",
        )
        for s in staged
        for victim in s.victims
    ]
