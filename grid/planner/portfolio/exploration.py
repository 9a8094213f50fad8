"""The fleet exploration budget: at most one model differs from the exploitation-only portfolio.

Given the exploitation-only solution E (the utility stage solved without the optimism bonus):
    d_m ≥ a[w, m]   for every admitted w with E(w) ≠ m
    Σ_m d_m ≤ max_exploration_models
The model with d_m = 1 in the final solution is `exploration_model`.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.portfolio.assign import AssignVars
from grid.planner.portfolio.context import PortfolioContext


def add_exploration_budget(
    model: cp_model.CpModel,
    ctx: PortfolioContext,
    av: AssignVars,
    exploit: dict[str, str],
) -> None:
    flags: list[cp_model.IntVar] = []
    for m in sorted(av.selected):
        differing = [v for (w, mm), v in sorted(av.a.items()) if mm == m and exploit.get(w) != m]
        if not differing:
            continue
        flag = model.new_bool_var(f"explore[{m}]")
        for lit in differing:
            model.add_implication(lit, flag)
        flags.append(flag)
    if len(flags) > ctx.policy.max_exploration_models:
        model.add(cp_model.LinearExpr.sum(flags) <= ctx.policy.max_exploration_models)
