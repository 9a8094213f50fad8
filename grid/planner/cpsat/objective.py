"""One linear expression per objective level of levels.py, equal to levels.score_placement.

    pinned                 Σ_{pinned candidates} x + fixed replicas on pinned hosts
    p{P}:baseline:{k}      Σ_{m with baseline_m ≥ k} [count_m ≥ k]
    p{P}:direct:{k}        Σ_{m in round k} [count_m ≥ k]
    p{P}:direct:{k}:harm   Σ_{m in round k} harm_rank(m)·[count_m ≥ k]
    p{P}:inferred          Σ_m Σ_{baseline_m < k ≤ desired_m} [count_m ≥ k]   (inferred models)
    domain_shortfall       domains.add_domain_shortfall
    disruption             Σ_{incumbents} cost − Σ cost·x
    quality                Σ quality·x
    spare_hosts            Σ_{admitting hosts without fixed replicas} (1 − used_h),
                           used_h = OR_m x[m,h] (exact)
[count_m ≥ k] is PlacementVars.at_least: exact unary steps, so min(count, baseline) and the
round indicators are linear. Built over the full candidate set (the solve model).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from ortools.sat.python import cp_model

from grid.planner.cpsat.domains import add_domain_shortfall
from grid.planner.cpsat.variables import Expr, PlacementVars, any_placed
from grid.planner.levels import (
    baseline_members,
    baseline_rounds,
    direct_rounds,
    disruption_cost,
    inferred_members,
    quality_scores,
    round_members,
)
from grid.planner.problem import PlacementProblem


def level_expressions(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    *,
    names: Collection[str] | None = None,
    quality: dict[tuple[str, str], int] | None = None,
) -> dict[str, Expr]:
    """Expressions of the named levels (all when names is None); quality: a cached table."""
    out: dict[str, Expr] = {"pinned": _pinned(xs, problem)}
    harm = problem.harm_rank
    wanted = set(names) if names is not None else None
    lowest = (
        min(
            (int(n[1:].split(":")[0]) for n in wanted if n.startswith("p") and n != "pinned"),
            default=None,
        )
        if wanted is not None
        else None
    )
    for p in problem.priorities:
        if wanted is not None and (lowest is None or p < lowest):
            break
        for k in baseline_rounds(problem, p):
            ids = baseline_members(problem, p, k)
            out[f"p{p}:baseline:{k}"] = _sum(xs.at_least(m, k) for m in ids)
        for k in direct_rounds(problem, p):
            ids = round_members(problem, p, k)
            out[f"p{p}:direct:{k}"] = _sum(xs.at_least(m, k) for m in ids)
            out[f"p{p}:direct:{k}:harm"] = _weighted([(xs.at_least(m, k), harm[m]) for m in ids])
        inferred = inferred_members(problem, p)
        if inferred:
            out[f"p{p}:inferred"] = _sum(
                xs.at_least(m, k)
                for m in inferred
                for k in range(problem.targets[m].baseline + 1, problem.targets[m].desired + 1)
            )
    if wanted is None or "domain_shortfall" in wanted:
        out["domain_shortfall"] = add_domain_shortfall(model, xs, problem)
    if wanted is None or "disruption" in wanted:
        out["disruption"] = _disruption(xs, problem)
    if wanted is None or "quality" in wanted:
        scores = quality if quality is not None else quality_scores(problem)
        out["quality"] = xs.total(xs.x, scores.__getitem__)
    if wanted is None or "spare_hosts" in wanted:
        out["spare_hosts"] = _spare_hosts(model, xs, problem)
    return out


def _sum(items: Iterable[cp_model.IntVar | int]) -> Expr:
    return _weighted([(item, 1) for item in items])


def _weighted(pairs: list[tuple[cp_model.IntVar | int, int]]) -> Expr:
    variables = [v for v, w in pairs if not isinstance(v, int) and w]
    weights = [w for v, w in pairs if not isinstance(v, int) and w]
    constant = sum(v * w for v, w in pairs if isinstance(v, int))
    return cp_model.LinearExpr.weighted_sum(variables, weights) + constant


def _pinned(xs: PlacementVars, problem: PlacementProblem) -> Expr:
    keys = [k for k in xs.x if problem.candidates[k].pinned]
    fixed = sum(
        1 for f in problem.fixed if f.host_id in problem.model_by_id[f.model_id].pinned_hosts
    )
    return xs.total(keys) + fixed


def _disruption(xs: PlacementVars, problem: PlacementProblem) -> Expr:
    costs = {
        key: disruption_cost(problem, cand)
        for key, cand in problem.candidates.items()
        if cand.incumbent is not None
    }
    kept = [k for k in costs if k in xs.x]
    dropped_outside = sum(c for k, c in costs.items() if k not in xs.x and k not in xs.outside)
    return dropped_outside + sum(costs[k] for k in kept) - xs.total(kept, costs.__getitem__)


def _spare_hosts(model: cp_model.CpModel, xs: PlacementVars, problem: PlacementProblem) -> Expr:
    fixed_hosts = {f.host_id for f in problem.fixed}
    outside_hosts = {h for _m, h in xs.outside}
    free_hosts = [
        h.host_id
        for h in problem.hosts
        if h.admitting and h.host_id not in fixed_hosts and h.host_id not in outside_hosts
    ]
    used: list[cp_model.IntVar] = []
    for host_id in free_hosts:
        keys = xs.keys_on_host(host_id)
        if not keys:
            continue
        if len(keys) == 1:
            used.append(xs.x[keys[0]])
            continue
        flag = model.new_bool_var("")
        count = xs.host_count(host_id)
        model.add(count >= 1).only_enforce_if(flag)
        model.add(count == 0).only_enforce_if(flag.Not())
        xs.register(flag, any_placed(keys))
        used.append(flag)
    return len(free_hosts) - cp_model.LinearExpr.sum(used)
