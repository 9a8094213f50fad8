"""Assignment literals: a[w, m] ∈ {0, 1} for admitted w and feasible (w, m); one model per workload.

Σ_m a[w, m] ≤ 1                    (a workload may be deferred: no model)
sel_m ≥ a[w, m],  sel_m ≤ Σ_w a[w, m]   (sel_m: m is in the portfolio)
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.portfolio.context import PortfolioContext


class AssignVars:
    def __init__(self, model: cp_model.CpModel, ctx: PortfolioContext) -> None:
        self.a: dict[tuple[str, str], cp_model.IntVar] = {}
        for w in ctx.admitted:
            for pair in ctx.feasible_pairs(w):
                self.a[(w, pair.model_id)] = model.new_bool_var(f"a[{w},{pair.model_id}]")
        for w in ctx.admitted:
            lits = [v for (ww, _m), v in self.a.items() if ww == w]
            if len(lits) > 1:
                model.add_at_most_one(lits)
        self.selected: dict[str, cp_model.IntVar] = {}
        for m in sorted({m for _w, m in self.a}):
            lits = self.of_model(m)
            sel = model.new_bool_var(f"sel[{m}]")
            for lit in lits:
                model.add_implication(lit, sel)
            model.add_bool_or(lits).only_enforce_if(sel)
            self.selected[m] = sel

    def of_model(self, model_id: str) -> list[cp_model.IntVar]:
        return [v for (_w, m), v in sorted(self.a.items()) if m == model_id]

    def mapping(self, solver: cp_model.CpSolver) -> dict[str, str]:
        return {w: m for (w, m), v in sorted(self.a.items()) if solver.boolean_value(v)}

    def hint(self, model: cp_model.CpModel, mapping: dict[str, str]) -> None:
        for (w, m), v in sorted(self.a.items()):
            model.add_hint(v, int(mapping.get(w) == m))
        for m, sel in sorted(self.selected.items()):
            model.add_hint(sel, int(m in mapping.values()))
