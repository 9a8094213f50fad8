"""At most one preemption-only model per tick: replace stale speculative capacity, or reclaim
an excess replica to end a whole-workload starvation (pure).

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

Starvation reclaim (the spec: "one copy of each active model remains protected while an excess
replica may be reclaimed to end whole-workload starvation"). When no stale set opens any host,
a *starved* workload (admitted by the ordinary evidence gate, and no candidate model of it is
feasible at all) may also take an *excess replica*: a READY managed replica the plan keeps (a
cooldown hold or a portfolio replica) of a model with no pins, no configured minimum and no
direct named demand, past its minimum residency, whose model keeps another READY replica in
the plan on another admitting host (the protected copy, so every workload it serves stays
covered). Idle excess replicas go before busy ones (the reconciler drains a busy one before it
unloads). The reading of the spec's "clean structural plan" proof: the staged path itself is
the proof, constructive and exact — the beneficiary fits the host once the victims are gone
(fits_after), and every other covered workload keeps its model. The reclaimed replica leaves
the plan's assignments (attach.py) and is reported as `portfolio_reclaimed`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from grid.fleet.models import Preemption, ResidencyState
from grid.planner.eligibility import pair_refusals
from grid.planner.portfolio.context import Key, PairInfo, PortfolioContext
from grid.planner.portfolio.gates import has_direct_demand
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
    reclaimed: tuple[str, ...] = ()  # victims the plan kept: excess replicas (they leave it)


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


def _protected_copy(
    ctx: PortfolioContext, model_id: str, host_id: str, placement: set[Key]
) -> bool:
    """Another READY replica of the model that the plan keeps, on another admitting host."""
    for budget in ctx.problem.hosts:
        other = budget.host_id
        if other == host_id or not budget.admitting or (model_id, other) not in placement:
            continue
        host = ctx.snapshot.host(other)
        if host is not None and any(
            r.model_id == model_id and r.state is ResidencyState.READY for r in host.residencies
        ):
            return True
    return False


def _excess(ctx: PortfolioContext, host_id: str, placement: set[Key]) -> list[str]:
    """Kept replicas on the host that a starved workload may reclaim, least valuable first."""
    snap = ctx.snapshot
    host = snap.host(host_id)
    assert host is not None
    out: list[tuple[int, bool, str]] = []
    for res in host.residencies:
        key = (res.model_id, host_id)
        if key not in placement or not res.is_managed or res.state is not ResidencyState.READY:
            continue
        profile = snap.model(res.model_id)
        if profile is None or profile.pinned_hosts or profile.min_replicas > 0:
            continue
        if has_direct_demand(snap, res.model_id):
            continue
        if res.loaded_at is None or snap.now - res.loaded_at < profile.min_residency_s:
            continue
        if not _protected_copy(ctx, res.model_id, host_id, placement):
            continue
        out.append((profile.priority, res.active_requests != 0, res.model_id))
    return [m for _p, _busy, m in sorted(out)]


def _path(
    ctx: PortfolioContext, pair: PairInfo, placement: set[Key], *, reclaim: bool = False
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
        if reclaim:
            stale = [*stale, *_excess(ctx, h, placement)]
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
    used: set[Key] = set()
    kept_now = set(placement)  # reclaimed replicas leave it: a later path keeps their copies
    uncovered = [w for w in ctx.admitted if w not in mapping]
    for w in sorted(uncovered, key=lambda w: (-pressure_of(ctx, w), w)):
        if len(staged) >= budget:
            break
        pairs = sorted(
            (p for (ww, _m), p in ctx.pairs.items() if ww == w and not p.feasible),
            key=lambda p: (-p.exploit_utility, p.model_id),
        )
        found = _first_path(ctx, pairs, kept_now, used, reclaim=False)
        if found is None and w in ctx.starved:
            found = _first_path(ctx, pairs, kept_now, used, reclaim=True)
        if found is None:
            continue
        pair, host_id, victims = found
        used |= {(v, host_id) for v in victims}
        kept = tuple(v for v in victims if (v, host_id) in kept_now)
        kept_now -= {(v, host_id) for v in kept}
        staged.append(StagedWorkload(w, pair.model_id, host_id, victims, kept))
    return staged


def _first_path(
    ctx: PortfolioContext,
    pairs: list[PairInfo],
    placement: set[Key],
    used: set[Key],
    *,
    reclaim: bool,
) -> tuple[PairInfo, str, tuple[str, ...]] | None:
    for pair in pairs:
        path = _path(ctx, pair, placement, reclaim=reclaim)
        if path is None:
            continue
        host_id, victims = path
        if used & {(v, host_id) for v in victims}:
            continue
        return pair, host_id, victims
    return None


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
