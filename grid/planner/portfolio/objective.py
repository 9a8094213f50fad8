"""One linear expression per portfolio level, equal to score.evaluate (see its docstring).

covered          Σ a[w, m]
pressure         Σ round(100·offered_w) · a[w, m]
spare_slots      s ≤ R,  s ≤ Σ_{slot-limited admitting h} (desired_cap_h − count_h)
                 (typed.py: an aggregated host counts its base placements; the columns of
                 slot-limited types are subtracted)
missing          Σ_m miss_m (link.py)
utility_exploit  Σ u⁰(w, m) · a[w, m]     (no optimism bonus: defines E)
utility          Σ u(w, m) · a[w, m]      (with the bonus)
transition       Σ_{new k ∉ B} ⌈startup_k⌉ · x_k + Σ_{speculative incumbents k} cost_k · (1 − x_k)
quality          Σ_{k ∉ B} quality_k · x_k
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat import Expr, PlacementVars
from grid.planner.levels import disruption_cost, quality_scores
from grid.planner.portfolio.assign import AssignVars
from grid.planner.portfolio.context import PortfolioContext
from grid.planner.portfolio.score import (
    failures_of,
    pressure_of,
    slot_hosts,
    speculative_incumbents,
    startup_cost,
)
from grid.planner.portfolio.typed import TypedVars


def _spare_slots(model: cp_model.CpModel, xs: PlacementVars, ctx: PortfolioContext) -> Expr:
    limited, unlimited = slot_hosts(ctx)
    reserve = ctx.spare_reserve
    if unlimited:
        return cp_model.LinearExpr.constant(reserve)
    terms: list[Expr] = []
    constant = 0
    for h in limited:
        cap = ctx.problem.host_by_id[h].desired_cap or 0
        if xs.keys_on_host(h):
            terms.append(cap - xs.host_count(h))
        else:
            constant += max(0, cap - sum(1 for k in ctx.base_keys if k[1] == h))
    if isinstance(xs, TypedVars):  # the aggregated hosts' new replicas take their slots
        terms.extend(-var for var in xs.slot_columns())
    # Per host free slots are ≥ 0 by the slot constraint whenever the host has variables.
    spare = model.new_int_var(0, reserve, "spare_slots")
    model.add(spare <= cp_model.LinearExpr.sum(terms) + constant)
    return spare


def level_expressions(
    model: cp_model.CpModel,
    xs: PlacementVars,
    ctx: PortfolioContext,
    av: AssignVars,
    missing: dict[str, cp_model.IntVar],
) -> dict[str, Expr]:
    items = sorted(av.a.items())
    lits = [v for _k, v in items]

    def weighted(weights: list[int]) -> Expr:
        return cp_model.LinearExpr.weighted_sum(lits, weights)

    out: dict[str, Expr] = {
        "covered": cp_model.LinearExpr.sum(lits),
        "failures": weighted([failures_of(ctx, w) for (w, _m), _v in items]),
        "pressure": weighted([pressure_of(ctx, w) for (w, _m), _v in items]),
        "spare_slots": _spare_slots(model, xs, ctx),
        "missing": cp_model.LinearExpr.sum(list(missing.values())),
        "utility_exploit": weighted(
            [ctx.pairs[k].utility_tenths(with_bonus=False) for k, _v in items]
        ),
        "utility": weighted([ctx.pairs[k].utility_tenths(with_bonus=True) for k, _v in items]),
    }
    problem = ctx.problem
    # Every decision key, by model (TypedVars: its columns too; PlacementVars: xs.x's order).
    free = [k for m in xs.models() for k in xs.keys_of_model(m) if k not in ctx.base_keys]
    new = [k for k in free if problem.candidates[k].is_new]
    spec = [k for k in speculative_incumbents(ctx) if k in xs.x]
    costs = {k: disruption_cost(problem, problem.candidates[k]) for k in spec}
    out["transition"] = (
        xs.total(new, lambda k: startup_cost(ctx, k))
        + sum(costs.values())
        - xs.total(spec, costs.__getitem__)
    )
    quality = quality_scores(problem)
    out["quality"] = xs.total(free, quality.__getitem__)
    return out
