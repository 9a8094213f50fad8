"""Exclusive-host bound: a replica stage's bound where the models short of it need a host each.

The static bound (bounds.py) counts every model up to its reachable replicas; the LP of the
per-host model is no tighter on the 1,000 × 200 mixed fleet (HiGHS: 43, 42, 40, ... for
p10:direct:1..), where every open level waits on models with a colocation ceiling of 1
(`video-*`) competing for the few hosts that can hold one alone. This relaxation keeps only
what binds those *solo* models:

    solo        models with colocation ceiling 1: a host holding one holds nothing else, so
                two solo replicas never share a host
    pairs       (solo model, host) whose placement alone passes the shared fit rule
                (cpsat/ledger.py on an empty fleet): by downward closure, every feasible
                placement's solo replicas lie on such pairs
    variables   x[s,h] ∈ {0,1} per pair, Σ_s x[s,h] ≤ 1 per host, Σ_h x[s,h] ≤ open(s);
                unary steps y[s,n] = [placed_s ≥ n]
    levels      every replica level below "pinned" is Σ_m f_m(count_m) with f_m nondecreasing
                (levels.replica_values); a non-solo model enters at its reachable count (its
                largest term), a solo model through its steps, each step's increment read from
                replica_values itself
    stages      each earlier stage at least its achieved value (stages with the pinned level,
                which does not depend on counts alone, are dropped: a relaxation may drop
                constraints); the stage itself maximized

Every feasible placement that keeps the earlier stages maps to a solution of this relaxation
with a stage value at least its own, so the relaxation's optimum bounds the stage given the
earlier stages. solve.py asks only while every earlier stage is proven, so a stage whose
incumbent meets the bound is proven optimal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

from ortools.sat.python import cp_model

from grid.planner.cpsat.bounds import reachable_replicas
from grid.planner.cpsat.ledger import Ledger
from grid.planner.cpsat.stages import Stage
from grid.planner.levels import replica_values
from grid.planner.problem import PlacementProblem


class ExclusiveBound:
    """The relaxation's tables for one problem (built on first use, then reused per stage)."""

    def __init__(self, problem: PlacementProblem) -> None:
        self.problem = problem
        self.solo = [m.model_id for m in problem.models if problem.ceiling(m.model_id) == 1]
        self.pairs: dict[str, list[str]] = {}
        self.steps: dict[str, int] = {}
        self.base: dict[str, int] = {}
        self.increments: dict[str, list[dict[str, int]]] = {}
        if self.solo:
            self._tables()

    def _tables(self) -> None:
        problem = self.problem
        empty = Ledger(problem)
        self.pairs = {
            s: [
                c.host_id
                for c in problem.candidates_of_model(s)
                if not empty.blockers((s, c.host_id))
            ]
            for s in self.solo
        }
        self.steps = {s: min(problem.open_replicas(s), len(self.pairs[s])) for s in self.solo}
        reach = reachable_replicas(problem)
        solo = set(self.solo)
        counts = {
            m.model_id: problem.fixed_count(m.model_id) if m.model_id in solo else reach[m.model_id]
            for m in problem.models
        }
        self.base = replica_values(problem, counts)
        # increments[s][n-1][level]: what the n-th placed replica of s adds to the level
        for s in self.solo:
            before, rows = self.base, []
            for n in range(1, self.steps[s] + 1):
                after = replica_values(problem, {**counts, s: counts[s] + n})
                rows.append({k: after[k] - before[k] for k in after if after[k] != before[k]})
                before = after
            self.increments[s] = rows

    def applies(self, stage: Stage) -> bool:
        """A stage of count levels only (the relaxation says nothing about the pinned level)."""
        return bool(self.solo) and all(
            lv.replica_level and lv.sense == "max" and lv.name in self.base for lv in stage.levels
        )

    def stage_bound(
        self,
        stages: Sequence[Stage],
        index: int,
        achieved: dict[int, int],
        solver: cp_model.CpSolver,
    ) -> int | None:
        """An upper bound on stages[index]'s combined value given every earlier stage i at
        least achieved[i]; None where the relaxation does not apply or `solver` (its time
        limit set by the caller) ended without a solution."""
        stage = stages[index]
        if not self.applies(stage):
            return None
        model = cp_model.CpModel()
        steps: dict[tuple[str, int], cp_model.IntVar] = {}
        on_host: dict[str, list[cp_model.IntVar]] = {}
        for s in self.solo:
            xs = [model.new_bool_var(f"x[{s},{h}]") for h in self.pairs[s]]
            for h, x in zip(self.pairs[s], xs, strict=True):
                on_host.setdefault(h, []).append(x)
            ys = [
                steps.setdefault((s, n), model.new_bool_var(f"y[{s},{n}]"))
                for n in range(1, self.steps[s] + 1)
            ]
            if not xs:
                continue
            model.add(sum(ys) == sum(xs))
            for a, b in pairwise(ys):
                model.add(b <= a)
        for xs in on_host.values():
            if len(xs) > 1:
                model.add(sum(xs) <= 1)

        def value(of: Stage) -> cp_model.LinearExprT:
            constant = of.signed(self.base)
            terms = []
            for s in self.solo:
                for n, row in enumerate(self.increments[s], start=1):
                    gain = sum(
                        w * row.get(lv.name, 0) for lv, w in zip(of.levels, of.weights, strict=True)
                    )
                    if gain:
                        terms.append(gain * steps[(s, n)])
            return constant + sum(terms)

        for i in range(index):
            if i in achieved and self.applies(stages[i]):
                model.add(value(stages[i]) >= achieved[i])
        model.maximize(value(stage))
        status = solver.solve(model)
        if status == cp_model.OPTIMAL:
            return round(solver.objective_value)
        if status == cp_model.FEASIBLE:
            return math.floor(solver.best_objective_bound + 1e-6)
        return None
