"""The portfolio model over host types (hosttypes.py): integer columns n[m,T] for aggregated hosts.

Variables
    x[m,h] ∈ {0,1}            the per-host model's keys on individual hosts (base keys fixed)
    n[m,T] ∈ 0..min(|T|, open(m))   new replicas of m on the hosts of portfolio type T
                              (0 when one replica does not fit a host's room alone)
    The base plan's placements on aggregated hosts are constants (`outside` of PlacementVars).
Hard constraints
    individual hosts: the per-host families of build.py (memory, slots, colocation, disk);
    types: the per-type ledgers, packing and conflict cuts of cpsat/type_ledgers.py on each
        host's room;
    replica bounds over both kinds (replicas.py's rule, the columns' reach counted):
        Σ x[m,·] + Σ n[m,·] ≤ open(m) − outside(m),
        Σ_{off pins} (x + n) ≤ unpinned_allowance(m) − outside off the pins(m).
Levels
    TypedVars answers PlacementVars' per-model questions (models, keys_of_model, total) over
    both kinds, the column key (m, T) standing for its first host (m, type_id): every host of
    a type has the same weight, startup cost and quality, so link.py and objective.py build
    the same expressions with n in place of the sum of x over the type; spare slots subtract
    the columns of slot-limited types (objective.py).
Exactness: with one model slot per host (or one replica per host) the type ledgers are exact;
otherwise they relax bin packing, and a solution's counts are only reached when hosttypes.
disaggregate packs them all (solve.py checks, and falls back to the per-host model).
Symmetry: a type's hosts are not variables, so there is none within a type to break; the
disaggregation's host order (by ID) is the canonical choice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ortools.sat.python import cp_model

from grid.planner.cpsat import (
    Expr,
    PlacementVars,
    add_colocation,
    add_conflict_cuts,
    add_disk,
    add_gpus,
    add_memory,
    add_slots,
    add_type_ledgers,
    fits_alone,
    pinned_hosts,
    unpinned_allowance,
)
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.hosttypes import PortfolioType, counts_of


class TypedVars(PlacementVars):
    """x on individual hosts (PlacementVars) plus the columns n[m, type_id]."""

    def __init__(
        self, model: cp_model.CpModel, ctx: PortfolioContext, types: list[PortfolioType]
    ) -> None:
        grouped = {h for t in types for h in t.host_ids}
        keys = [k for k in ctx.variable_keys() if k[1] not in grouped]
        outside = [*ctx.outside_keys(), *sorted(k for k in ctx.base_keys if k[1] in grouped)]
        super().__init__(model, ctx.problem, keys=keys, outside=outside)
        problem = ctx.problem
        self.types = types
        self.n: dict[Key, cp_model.IntVar] = {}
        self.top: dict[Key, int] = {}
        self._columns: dict[str, list[Key]] = {}
        for ptype in types:
            for model_id in ptype.models:
                cand = problem.candidates[(model_id, ptype.type_id)]
                fits = fits_alone(cand, ptype.room)
                top = min(ptype.count, problem.open_replicas(model_id)) if fits else 0
                key = (model_id, ptype.type_id)
                self.n[key] = model.new_int_var(0, top, "")
                self.top[key] = top
                self._columns.setdefault(model_id, []).append(key)

    # -- PlacementVars' per-model questions over both kinds --------------------------------
    def models(self) -> list[str]:
        return sorted(set(super().models()) | set(self._columns))

    def keys_of_model(self, model_id: str) -> list[Key]:
        return [*super().keys_of_model(model_id), *self._columns.get(model_id, [])]

    def total(self, keys: Iterable[Key], weight: Callable[[Key], int] | None = None) -> Expr:
        chosen = list(keys)
        terms = [self.x[k] if k in self.x else self.n[k] for k in chosen]
        if weight is None:
            return cp_model.LinearExpr.sum(terms)
        return cp_model.LinearExpr.weighted_sum(terms, [weight(k) for k in chosen])

    def reach(self, key: Key) -> int:
        """The most replicas one decision key may stand for."""
        return self.top[key] if key in self.n else 1

    def slot_columns(self) -> list[cp_model.IntVar]:
        """The columns of types whose hosts have a known slot cap (spare_slots)."""
        problem = self.problem
        out: list[cp_model.IntVar] = []
        for ptype in self.types:
            budget = problem.host_by_id[ptype.type_id]
            if budget.admitting and budget.slot_limit > 0 and budget.desired_cap is not None:
                out.extend(self.n[(m, ptype.type_id)] for m in ptype.models)
        return out

    # -- solutions and hints ---------------------------------------------------------------
    def solution(self, solver: cp_model.CpSolver) -> tuple[set[Key], dict[Key, int]]:
        """The individual placements and the columns' counts of a solution."""
        counts = {k: solver.value(v) for k, v in self.n.items()}
        return self.placement(solver), {k: c for k, c in counts.items() if c > 0}

    def of_placement(self, placement: Iterable[Key]) -> tuple[set[Key], dict[Key, int]]:
        """A concrete placement in the model's terms."""
        placed = set(placement)
        return {k for k in placed if k in self.x}, counts_of(self.types, placed)

    def hint_solution(self, singles: set[Key], counts: dict[Key, int]) -> None:
        self.hint(singles)  # x and the registered auxiliaries (they read individual hosts)
        hint = self.model.proto.solution_hint
        hint.vars.extend([var.index for var in self.n.values()])
        hint.values.extend([min(counts.get(k, 0), self.top[k]) for k in self.n])


def add_typed_constraints(model: cp_model.CpModel, xs: TypedVars, ctx: PortfolioContext) -> None:
    """The hard constraints of the module docstring."""
    problem = ctx.problem
    add_memory(model, xs, problem)
    add_slots(model, xs, problem)
    add_colocation(model, xs, problem)
    add_disk(model, xs, problem)
    add_gpus(model, xs, problem)
    for model_id in xs.models():
        keys = xs.keys_of_model(model_id)
        room = problem.open_replicas(model_id) - xs.outside_count(model_id)
        if sum(xs.reach(k) for k in keys) > room:
            model.add(xs.total(keys) <= room)
        pins = pinned_hosts(problem, model_id)
        if not pins:
            continue
        off = [k for k in keys if k[1] not in pins]  # a column's hosts share their pin flag
        outside_off = sum(1 for m, h in xs.outside if m == model_id and h not in pins)
        allowance = unpinned_allowance(problem, model_id) - outside_off
        if sum(xs.reach(k) for k in off) > allowance:
            model.add(xs.total(off) <= allowance)
    for ptype in xs.types:
        cands = [problem.candidates[(m, ptype.type_id)] for m in ptype.models]
        ns = [xs.n[(m, ptype.type_id)] for m in ptype.models]
        add_type_ledgers(model, ns, cands, ptype.room, ptype.count, problem.excluded_pairs)
        add_conflict_cuts(model, ns, cands, ptype.room, ptype.count)
