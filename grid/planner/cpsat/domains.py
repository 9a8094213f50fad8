"""Failure-domain indicators and the domain_shortfall objective term.

For a model m with min_failure_domains f_m ≥ 2 (smaller goals can never fall short):
    d[m,D]  = OR_{h ∈ D} x[m,h]                      (exact: x ⇒ d and d ⇒ OR x)
    t[m]    = min(f_m, replicas(m))
    s[m]    = max(0, t[m] − |constant domains| − Σ_D d[m,D])
    domain_shortfall = Σ_m s[m]
Domains already covered by fixed replicas (or, in a local model, by placements outside it)
are constants. Every auxiliary variable is exact, so the term equals levels.score_placement.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Expr, Key, Placement, PlacementVars, any_placed
from grid.planner.problem import PlacementProblem


def constant_domains(xs: PlacementVars, problem: PlacementProblem, model_id: str) -> set[str]:
    hosts = {f.host_id for f in problem.fixed if f.model_id == model_id}
    hosts |= {h for m, h in xs.outside if m == model_id}
    return {problem.host_by_id[h].domain for h in hosts}


def add_domain_shortfall(
    model: cp_model.CpModel, xs: PlacementVars, problem: PlacementProblem
) -> Expr:
    terms: list[Expr] = []
    constant = 0
    for profile in problem.models:
        goal = profile.min_failure_domains
        if goal < 2:
            continue
        model_id = profile.model_id
        fixed_domains = constant_domains(xs, problem, model_id)
        by_domain: dict[str, list[Key]] = {}
        for key in xs.keys_of_model(model_id):
            domain = problem.host_by_id[key[1]].domain
            if domain not in fixed_domains:
                by_domain.setdefault(domain, []).append(key)
        if not xs.keys_of_model(model_id):
            count = xs.constant_replicas(model_id)
            constant += max(0, min(goal, count) - len(fixed_domains))
            continue
        indicators = [
            _domain_indicator(model, xs, keys) for _domain, keys in sorted(by_domain.items())
        ]
        floor = model.new_int_var(0, goal, "")
        model.add_min_equality(floor, [goal, xs.replica_count(model_id)])
        short = model.new_int_var(0, goal, "")
        spread = cp_model.LinearExpr.sum(indicators) + len(fixed_domains)
        model.add_max_equality(short, [0, floor - spread])
        keys = frozenset(xs.keys_of_model(model_id))
        base = xs.constant_replicas(model_id)

        def floor_value(
            p: Placement, keys: frozenset[Key] = keys, base: int = base, goal: int = goal
        ) -> int:
            return min(goal, base + len(p & keys))

        def short_value(
            p: Placement,
            keys: frozenset[Key] = keys,
            base: int = base,
            goal: int = goal,
            fixed: frozenset[str] = frozenset(fixed_domains),
        ) -> int:
            domains = fixed | {problem.host_by_id[h].domain for _m, h in p & keys}
            return max(0, min(goal, base + len(p & keys)) - len(domains))

        xs.register(floor, floor_value)
        xs.register(short, short_value)
        terms.append(short)
    return cp_model.LinearExpr.sum(terms) + constant


def _domain_indicator(
    model: cp_model.CpModel, xs: PlacementVars, keys: list[Key]
) -> cp_model.IntVar:
    if len(keys) == 1:
        return xs.x[keys[0]]
    indicator = model.new_bool_var("")
    spread = xs.total(keys)
    model.add(spread >= indicator)
    model.add(spread <= len(keys) * indicator)
    xs.register(indicator, any_placed(keys))
    return indicator
