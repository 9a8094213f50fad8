"""At most one preemption-only model per tick: replace stale speculative capacity, reclaim an
excess replica to end a whole-workload starvation, or let a mature beneficiary replace an
incumbent (pure).

After the portfolio is decided, an admitted workload that is still uncovered may claim one host
whose only obstacle is *stale speculative capacity*: live managed residencies that the final
plan no longer keeps (so no baseline, pinned or directly demanded replica, and no model of the
new portfolio), that are idle (no active request), past their minimum residency and not pinned
to the host. Workloads are tried by pressure (highest first), candidates by exploitation-only
utility (the optimism bonus buys no eviction authority). The feasibility scan (paths.py) ranks
up to sixteen paths over every compatible host and the first acceptable one is staged (a victim
keeps its model's required READY floor elsewhere). At most `max_preemption_models` models are
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
unloads). The reclaimed replica leaves the plan's assignments (attach.py) and is reported as
`portfolio_reclaimed`.

Mature-beneficiary replacement (replace.py): when neither finds a path for a starved workload,
a mature beneficiary with at least 1.5× the incumbent's confidence-weighted pressure may
replace an incumbent (even its model's only replica); the plan authorizes it in
`portfolio.replacements`, carried by the controller until it is served. A workload whose
authorization is in effect is staged again from it, never re-scanned.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import Preemption, ResidencyState
from grid.planner.portfolio.context import Key, PairInfo, PortfolioContext
from grid.planner.portfolio.paths import PathOption, Victims, acceptable, scan
from grid.planner.portfolio.replace import beats, mature_victims, movable_on, served_by
from grid.planner.portfolio.score import pressure_of


@dataclass(frozen=True)
class StagedWorkload:
    workload: str
    model_id: str
    host_id: str
    victims: tuple[str, ...]
    reclaimed: tuple[str, ...] = ()  # victims the plan kept: excess replicas (they leave it)
    authorized: bool = False  # a mature-beneficiary replacement (portfolio.replacements)
    replaced: tuple[str, ...] = ()  # workloads whose model the replacement takes away


@dataclass
class Scan:
    """What stage_preemptions found: the staged paths, and every ranked path it scanned per
    (workload, model) candidate (the candidate rows' `preemption_paths`)."""

    staged: list[StagedWorkload]
    paths: dict[tuple[str, str], list[PathOption]]


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
    out: list[tuple[int, bool, str]] = []
    for res, profile in movable_on(ctx, host_id):
        if (res.model_id, host_id) not in placement:
            continue
        if not _protected_copy(ctx, res.model_id, host_id, placement):
            continue
        out.append((profile.priority, res.active_requests != 0, res.model_id))
    return [m for _p, _busy, m in sorted(out)]


def _restaged(ctx: PortfolioContext, placement: set[Key]) -> list[StagedWorkload]:
    """Authorizations in effect whose victims are still live: staged again."""
    out = []
    for w, auth in sorted(ctx.authorized.items()):
        if not auth.live or auth.placed:
            continue
        kept = tuple(v for v in auth.live if (v, auth.host_id) in placement)
        out.append(
            StagedWorkload(w, auth.model_id, auth.host_id, auth.live, kept, True, auth.replaced)
        )
    return out


def stage_preemptions(ctx: PortfolioContext, mapping: dict[str, str], placement: set[Key]) -> Scan:
    budget = ctx.policy.max_preemption_models
    staged = _restaged(ctx, placement)
    used: set[Key] = {(v, s.host_id) for s in staged for v in s.victims}
    kept_now = set(placement) - {(v, s.host_id) for s in staged for v in s.reclaimed}
    found: dict[tuple[str, str], list[PathOption]] = {}
    uncovered = [w for w in ctx.admitted if w not in mapping and w not in ctx.authorized]
    for w in sorted(uncovered, key=lambda w: (-pressure_of(ctx, w), w)):
        if len(staged) >= budget:
            break
        pairs = sorted(
            (p for (ww, _m), p in ctx.pairs.items() if ww == w and not p.feasible),
            key=lambda p: (-p.exploit_utility, p.model_id),
        )
        item = _first_path(ctx, w, pairs, mapping, kept_now, used, found, "stale")
        if item is None and w in ctx.starved:
            item = _first_path(ctx, w, pairs, mapping, kept_now, used, found, "reclaim")
        if item is None and w in ctx.starved and not ctx.held_rooms:
            # (a room already draining for a starved workload is its path: wait for it)
            mature = [p for p in pairs if not p.weak]
            item = _first_path(ctx, w, mature, mapping, kept_now, used, found, "mature")
        if item is None:
            continue
        used |= {(v, item.host_id) for v in item.victims}
        kept_now -= {(v, item.host_id) for v in item.reclaimed}
        staged.append(item)
    return Scan(staged, found)


def _victims_of(
    ctx: PortfolioContext, w: str, mapping: dict[str, str], placement: set[Key], kind: str
) -> Victims:
    def victims(host_id: str) -> list[str]:
        stale = _stale(ctx, host_id, placement)
        if kind == "stale":
            return stale
        if kind == "reclaim":
            return [*stale, *_excess(ctx, host_id, placement)]
        return [*stale, *[v for v in mature_victims(ctx, w, host_id, mapping) if v not in stale]]

    return victims


def _first_path(
    ctx: PortfolioContext,
    w: str,
    pairs: list[PairInfo],
    mapping: dict[str, str],
    placement: set[Key],
    used: set[Key],
    found: dict[tuple[str, str], list[PathOption]],
    kind: str,
) -> StagedWorkload | None:
    for pair in pairs:
        paths = scan(ctx, pair.model_id, placement, _victims_of(ctx, w, mapping, placement, kind))
        if paths:
            found.setdefault((w, pair.model_id), paths)
        for path in paths:
            if used & {(v, path.host_id) for v in path.victims}:
                continue
            if kind == "mature":
                if not beats(ctx, w, path.victims, mapping):
                    continue
                replaced = tuple(sorted({x for v in path.victims for x in served_by(mapping, v)}))
                floor_map = {k: m for k, m in mapping.items() if k not in replaced}
                if not acceptable(ctx, path, floor_map):
                    continue
                kept = tuple(v for v in path.victims if (v, path.host_id) in placement)
                return StagedWorkload(
                    w, pair.model_id, path.host_id, path.victims, kept, True, replaced
                )
            if not acceptable(ctx, path, mapping):
                continue
            kept = tuple(v for v in path.victims if (v, path.host_id) in placement)
            return StagedWorkload(w, pair.model_id, path.host_id, path.victims, kept)
    return None


def preemptions_of(staged: list[StagedWorkload]) -> list[Preemption]:
    return [
        Preemption(
            victim_model_id=victim,
            host_id=s.host_id,
            beneficiary_model_id=s.model_id,
            reason=(
                f"portfolio: a mature beneficiary replaces {victim} for workload {s.workload}"
                if s.authorized
                else f"portfolio: stale speculative capacity makes room for workload {s.workload}"
            ),
        )
        for s in staged
        for victim in s.victims
    ]
