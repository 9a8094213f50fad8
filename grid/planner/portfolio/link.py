"""Assignments linked to the placement's replica variables x[m, h] (PlacementVars).

    a[w, m] ⇒ count_m ≥ 1                         (a covered workload has a replica of m)
    wr_m  = Σ_{k ∈ keys(m) ∖ B} x_k                (workload replicas beyond the base plan)
    s_m   = ctx.surplus[m]                         (base idle incumbents held by the cooldown:
                                                    they already serve the workload)
    N_m   = Σ_w req(w, m) · a[w, m]
    D_m   = min(N_m, room_m)                       (desired workload replicas)
    wr_m + s_m ≤ max(D_m, s_m)                     (no new replica without a workload asking)
    10·miss_m ≥ 10·N_m − Σ_{k ∈ keys(m) ∖ B} g_k x_k − 10·s_m,  miss_m ≥ 0
                                                 (minimised at its level: the shortfall in
                                                  replicas at measured speed, rounded up,
                                                  what the workloads ask beyond the model's
                                                  replica room included; g_k = ctx.weight,
                                                  tenths of a replica, speed.py)
    Σ_{h ∉ pins(m)} x[m, h] ≤ max(0, max(base_desired_m, base_level_m + D_m) − |pins(m)|
                                      − fixed_off(m))
                                                  (pins never substituted, against the final
                                                  desired count)
Base keys are fixed: x_k = 1 for k ∈ B, so the base plan's replicas stay where they are.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat import PlacementVars
from grid.planner.portfolio.assign import AssignVars
from grid.planner.portfolio.context import PortfolioContext
from grid.planner.portfolio.speed import UNIT


def fix_base(model: cp_model.CpModel, xs: PlacementVars, ctx: PortfolioContext) -> None:
    for key in sorted(ctx.base_keys):
        if key in xs.x:
            model.add(xs.x[key] == 1)


def add_links(
    model: cp_model.CpModel, xs: PlacementVars, ctx: PortfolioContext, av: AssignVars
) -> dict[str, cp_model.IntVar]:
    """Constraints above; returns miss_m per candidate model."""
    missing: dict[str, cp_model.IntVar] = {}
    for m in sorted(set(xs.models()) | set(av.selected)):
        free = [k for k in xs.keys_of_model(m) if k not in ctx.base_keys]
        wr = xs.total(free)
        room = ctx.room.get(m, 0)
        lits = [(v, ctx.pairs[(w, mm)].need) for (w, mm), v in sorted(av.a.items()) if mm == m]
        for lit, _need in lits:
            model.add(xs.replica_count(m) >= 1).only_enforce_if(lit)
        if not lits or room == 0:
            if free:
                model.add(wr == 0)
            continue
        asked = cp_model.LinearExpr.weighted_sum([v for v, _n in lits], [n for _v, n in lits])
        ceiling = sum(n for _v, n in lits)
        surplus = ctx.surplus.get(m, 0)
        demand = model.new_int_var(0, min(room, ceiling), f"D[{m}]")
        asked_var = model.new_int_var(0, ceiling, f"N[{m}]")
        model.add(asked_var == asked)
        model.add_min_equality(demand, [asked_var, room])
        top = model.new_int_var(surplus, max(surplus, min(room, ceiling)), f"top[{m}]")
        model.add_max_equality(top, [demand, surplus])
        model.add(wr + surplus <= top)
        miss = model.new_int_var(0, ceiling, f"miss[{m}]")
        served = xs.total(free, ctx.weight) + UNIT * surplus
        model.add(UNIT * miss >= UNIT * asked_var - served)
        missing[m] = miss
        pins = set(ctx.problem.model_by_id[m].pinned_hosts)
        if pins:
            fixed_off = sum(
                1 for f in ctx.problem.fixed if f.model_id == m and f.host_id not in pins
            )
            final = model.new_int_var(0, ctx.final_desired(m, min(room, ceiling)), f"F[{m}]")
            model.add_max_equality(
                final, [ctx.base_desired.get(m, 0), ctx.base_level.get(m, 0) + demand]
            )
            off = [k for k in xs.keys_of_model(m) if k[1] not in pins]
            outside_off = sum(1 for mm, h in xs.outside if mm == m and h not in pins)
            # Clamped at 0 as validate.py reads the rule: unplaced pins and fixed replicas off
            # them can exceed the final count, which must not make every mapping infeasible.
            top_off = max(0, ctx.final_desired(m, min(room, ceiling)) - len(pins) - fixed_off)
            allowed = model.new_int_var(0, top_off, f"off[{m}]")
            model.add_max_equality(allowed, [final - len(pins) - fixed_off, 0])
            model.add(xs.total(off) + outside_off <= allowed)
    return missing
