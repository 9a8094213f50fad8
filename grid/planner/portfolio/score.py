"""The portfolio objective levels and a solver-agnostic scorer (pure).

For a mapping μ: W_a → M (partial) and a placement P ⊇ B (every key of the plan):
    count_m      |P ∩ keys(m)| + fixed replicas of m
    covered      #{w : μ(w) = m, count_m ≥ 1}                                       max
    failures     Σ_{covered w} round(1000 · failure_rate_w)   (restore failing service) max
    pressure     Σ_{covered w} round(100 · offered_w)                               max
    spare_slots  min(R, Σ_{admitting slot-limited h} (desired_cap_h − |P ∩ h|))     max
                 (R = policy.portfolio.spare_slot_reserve; R when some admitting host has
                 no slot limit)
    missing      Σ_m ⌈max(0, N_m − wr_m − Σ_{k ∈ P∖B of m} (g_k − 1))⌉,
                 N_m = Σ_{covered w→m} req(w, m) (what the workloads ask, beyond the model's
                 replica room too: a model at its ceiling does not absorb more workloads for
                 free; 0 for a model with no room at all),
                 wr_m = count_m − base_count_m + surplus_m (idle incumbents the base
                 plan holds only for its scale-down cooldown serve the workload),
                 g_k = weight_k / 10: a new workload replica on a host g× as fast as where m's
                 service time was measured serves g replicas' worth (speed.py)          min
    utility      Σ_{covered w} utility(w, μ(w)) in tenths (with the optimism bonus)  max
    transition   Σ_{new k ∈ P∖B} ⌈startup_s(k)⌉ + Σ_{speculative incumbents k ∉ P} disruption(k)
                                                                                   min
    quality      Σ_{k ∈ P∖B} placement quality (levels.quality_scores)             max (tie-break)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from grid.planner.levels import disruption_cost, quality_scores, startup_seconds
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.speed import UNIT

LEVELS: tuple[tuple[str, str], ...] = (
    ("covered", "max"),
    ("failures", "max"),
    ("pressure", "max"),
    ("spare_slots", "max"),
    ("missing", "min"),
    ("utility", "max"),
    ("transition", "min"),
    ("quality", "max"),
)


def signed(values: Mapping[str, int]) -> tuple[int, ...]:
    """Larger is better, level by level (a lexicographic key)."""
    return tuple(values[n] if s == "max" else -values[n] for n, s in LEVELS)


def compare(a: Mapping[str, int], b: Mapping[str, int]) -> int:
    ka, kb = signed(a), signed(b)
    return (ka > kb) - (ka < kb)


def pressure_of(ctx: PortfolioContext, workload: str) -> int:
    return round(100 * ctx.forecast(workload).offered_concurrency)


def failures_of(ctx: PortfolioContext, workload: str) -> int:
    return round(1000 * ctx.forecast(workload).failure_rate)


def startup_cost(ctx: PortfolioContext, key: Key) -> int:
    return math.ceil(startup_seconds(ctx.problem, ctx.problem.candidates[key]))


def speculative_incumbents(ctx: PortfolioContext) -> list[Key]:
    """Incumbent keys of candidate models that the base plan does not keep (the portfolio may).
    Computed once per context (every evaluated portfolio asks: 60 ms each at 1,000 hosts)."""
    cached = ctx.memo.get("speculative_incumbents")
    if cached is None:
        cached = ctx.memo["speculative_incumbents"] = [
            k
            for k in ctx.variable_keys()
            if k not in ctx.base_keys and ctx.problem.candidates[k].incumbent is not None
        ]
    return list(cached)


def slot_hosts(ctx: PortfolioContext) -> tuple[list[str], bool]:
    """Admitting hosts with a known slot cap, and whether some admitting host has none."""
    limited: list[str] = []
    unlimited = False
    for budget in ctx.problem.hosts:
        if not budget.admitting:
            continue
        if budget.slot_limit > 0 and budget.desired_cap is not None:
            limited.append(budget.host_id)
        else:
            unlimited = True
    return limited, unlimited


def workload_count(ctx: PortfolioContext, model_id: str, count: int) -> int:
    """Workload replicas among `count` replicas of the model: those beyond the base plan plus
    the base plan's idle incumbents beyond its demand level (ctx.surplus)."""
    return count - ctx.base_counts.get(model_id, 0) + ctx.surplus.get(model_id, 0)


def _shortfall(asked: int, replicas: int, extra_tenths: int) -> int:
    """⌈(UNIT·asked − UNIT·replicas − extra_tenths) / UNIT⌉⁺: replicas at measured speed the
    workloads ask beyond what the model's workload replicas serve (speed.py weights)."""
    short = UNIT * asked - UNIT * replicas - extra_tenths
    return max(0, -(-short // UNIT))


def evaluate(
    ctx: PortfolioContext,
    mapping: Mapping[str, str],
    placement: Iterable[Key],
    *,
    with_bonus: bool = True,
) -> dict[str, int]:
    placed = set(placement) | set(ctx.base_keys)
    problem = ctx.problem
    counts: dict[str, int] = {}
    for f in problem.fixed:
        counts[f.model_id] = counts.get(f.model_id, 0) + 1
    for m, _h in placed:
        counts[m] = counts.get(m, 0) + 1
    covered = {w: m for w, m in mapping.items() if counts.get(m, 0) >= 1}
    values = {"covered": len(covered)}
    values["failures"] = sum(failures_of(ctx, w) for w in covered)
    values["pressure"] = sum(pressure_of(ctx, w) for w in covered)
    limited, unlimited = slot_hosts(ctx)
    reserve = ctx.spare_reserve
    if unlimited:
        values["spare_slots"] = reserve
    else:
        per_host: dict[str, int] = {}
        for _m, h in placed:
            per_host[h] = per_host.get(h, 0) + 1
        free = sum(
            max(0, (problem.host_by_id[h].desired_cap or 0) - per_host.get(h, 0)) for h in limited
        )
        values["spare_slots"] = min(reserve, free)
    asked: dict[str, int] = {}
    for w, m in covered.items():
        asked[m] = asked.get(m, 0) + ctx.pairs[(w, m)].need
    extra_weight: dict[str, int] = {}
    for k in placed - set(ctx.base_keys):
        extra_weight[k[0]] = extra_weight.get(k[0], 0) + ctx.weight(k) - UNIT
    values["missing"] = sum(
        _shortfall(n, workload_count(ctx, m, counts.get(m, 0)), extra_weight.get(m, 0))
        if ctx.room.get(m, 0)
        else 0
        for m, n in asked.items()
    )
    values["utility"] = sum(
        ctx.pairs[(w, m)].utility_tenths(with_bonus=with_bonus) for w, m in covered.items()
    )
    extra = [k for k in placed if k not in ctx.base_keys]
    new_cost = sum(startup_cost(ctx, k) for k in extra if problem.candidates[k].is_new)
    dropped = sum(
        disruption_cost(problem, problem.candidates[k])
        for k in speculative_incumbents(ctx)
        if k not in placed
    )
    values["transition"] = new_cost + dropped
    quality = quality_scores(problem)
    values["quality"] = sum(quality[k] for k in extra)
    return values


def workload_replicas(ctx: PortfolioContext, placement: Iterable[Key]) -> dict[str, int]:
    """Placements beyond the base plan, per model."""
    out: dict[str, int] = {}
    for m, _h in set(placement) - set(ctx.base_keys):
        out[m] = out.get(m, 0) + 1
    return out
