"""Reciprocal colocation ceilings and exclusions, per host.

Own ceiling c_m (max_colocated_models, counting the model itself), both ledgers:
    x[m,h]      ⇒ fixed_cnt(h) + Σ_m' x[m',h]   ≤ c_m
    new x[m,h]  ⇒ live_cnt(h)  + Σ_new x[m',h]  ≤ c_m
Models sharing one ceiling value share one indicator b[h,c] ≥ x[m,h], so a host costs one
constraint per distinct ceiling instead of one per model (no O(M²) terms).
Exclusions (family `colocation_exclusion`): x[a,h] + x[b,h] ≤ 1 for every excluded pair with
both candidates on h (pairs with inventory that stays were refused by problem.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Guard, Key, PlacementVars, any_placed, guarded
from grid.planner.problem import PlacementProblem

CEILING = "colocation"
EXCLUSION = "colocation_exclusion"


def add_colocation(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None = None,
) -> None:
    pairs = sorted(tuple(sorted(p)) for p in problem.excluded_pairs if len(p) == 2)
    for host_id in xs.hosts():
        budget = problem.host_by_id[host_id]
        keys = xs.keys_on_host(host_id)
        _add_ceilings(model, xs, problem, guard, host_id, len(budget.fixed_models), new_only=False)
        _add_ceilings(model, xs, problem, guard, host_id, len(budget.live_models), new_only=True)
        _add_exclusions(model, xs, problem, guard, host_id, keys, pairs)


def _add_ceilings(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None,
    host_id: str,
    occupied: int,
    *,
    new_only: bool,
) -> None:
    keys = xs.new_keys_on_host(host_id) if new_only else xs.keys_on_host(host_id)
    by_ceiling: dict[int, list[Key]] = {}
    for key in keys:
        ceiling = problem.ceiling(key[0])
        if ceiling and occupied + len(keys) > ceiling:
            by_ceiling.setdefault(ceiling, []).append(key)
    for ceiling, members in sorted(by_ceiling.items()):
        if len(members) == 1:
            indicator = xs.x[members[0]]
        else:
            indicator = model.new_bool_var("")
            for key in members:
                model.add_implication(xs.x[key], indicator)
            xs.register(indicator, any_placed(members))
        count = xs.host_count(host_id, new_only=new_only)
        guarded(model.add(count <= ceiling - occupied), guard, CEILING, host_id, indicator)


def _add_exclusions(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None,
    host_id: str,
    keys: Sequence[Key],
    pairs: Sequence[tuple[str, ...]],
) -> None:
    if not pairs:
        return
    present = {key[0]: key for key in keys}
    for pair in pairs:
        if pair[0] in present and pair[1] in present:
            first, second = xs.x[present[pair[0]]], xs.x[present[pair[1]]]
            guarded(model.add_bool_or([first.Not(), second.Not()]), guard, EXCLUSION, host_id)
