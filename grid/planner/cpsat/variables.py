"""The decision variables of one CP-SAT placement model, and the explanation guard.

`PlacementVars` owns x[m,h] (one BoolVar per candidate pair it is given) and every auxiliary
variable derived from them. Each auxiliary variable is registered with the function that
computes its value from a placement, so any placement (a hint, a previous stage's solution)
can be turned into a complete, consistent hint.

A model may cover only some hosts (the explainer's local models): placements on the other
hosts are then constants (`outside`), counted in the per-model expressions but never varied.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from ortools.sat.python import cp_model

from grid.planner.problem import PlacementProblem

Key = tuple[str, str]
Placement = frozenset[Key]
Expr = cp_model.LinearExpr


def any_placed(members: Iterable[Key]) -> Callable[[Placement], int]:
    """Value function of an OR indicator over some candidates."""
    chosen = frozenset(members)

    def value(placement: Placement) -> int:
        return int(bool(placement & chosen))

    return value


class Guard:
    """Explanation literals: one assumption BoolVar per (family, scope), made on first use.

    A scope is a host ID for host families and a model ID for model families. Constraints
    built with a guard hold only while their literal is true, so the solver's infeasibility
    core names the families (and hosts) that block a placement.
    """

    def __init__(self, model: cp_model.CpModel) -> None:
        self._model = model
        self.literals: dict[tuple[str, str], cp_model.IntVar] = {}
        self._by_index: dict[int, tuple[str, str]] = {}

    def literal(self, family: str, scope: str) -> cp_model.IntVar:
        key = (family, scope)
        lit = self.literals.get(key)
        if lit is None:
            lit = self._model.new_bool_var(f"assume[{family}@{scope}]")
            self.literals[key] = lit
            self._by_index[lit.index] = key
        return lit

    def describe(self, index: int) -> tuple[str, str] | None:
        return self._by_index.get(index)


def guarded(
    constraint: cp_model.Constraint,
    guard: Guard | None,
    family: str,
    scope: str,
    *also: cp_model.IntVar,
) -> None:
    """Make a constraint conditional on its explanation literal (and any extra literals)."""
    literals = list(also)
    if guard is not None:
        literals.append(guard.literal(family, scope))
    if literals:
        constraint.only_enforce_if(literals)


class PlacementVars:
    """x[m,h] for the given candidate keys plus registered auxiliary variables."""

    def __init__(
        self,
        model: cp_model.CpModel,
        problem: PlacementProblem,
        keys: Iterable[Key] | None = None,
        outside: Iterable[Key] = (),
    ) -> None:
        self.model = model
        self.problem = problem
        chosen = sorted(problem.candidates) if keys is None else sorted(set(keys))
        self.x: dict[Key, cp_model.IntVar] = {}
        self._by_host: dict[str, list[Key]] = {}
        self._new_by_host: dict[str, list[Key]] = {}
        self._by_model: dict[str, list[Key]] = {}
        candidates = problem.candidates
        for key in chosen:
            self.x[key] = model.new_bool_var("")  # unnamed: names cost time on large fleets
            self._by_host.setdefault(key[1], []).append(key)
            if candidates[key].incumbent is None:
                self._new_by_host.setdefault(key[1], []).append(key)
            self._by_model.setdefault(key[0], []).append(key)
        self.outside: frozenset[Key] = frozenset(k for k in outside if k not in self.x)
        self._outside_count: dict[str, int] = {}
        for model_id, _host in self.outside:
            self._outside_count[model_id] = self._outside_count.get(model_id, 0) + 1
        self._aux: list[tuple[cp_model.IntVar, Callable[[Placement], int]]] = []
        self._steps: dict[str, list[cp_model.IntVar]] = {}
        self._host_counts: dict[tuple[str, bool], cp_model.IntVar] = {}

    # -- lookups -------------------------------------------------------------------------
    def hosts(self) -> list[str]:
        """Hosts with at least one variable, sorted."""
        return sorted(self._by_host)

    def models(self) -> list[str]:
        return sorted(self._by_model)

    def keys_on_host(self, host_id: str) -> list[Key]:
        return self._by_host.get(host_id, [])

    def new_keys_on_host(self, host_id: str) -> list[Key]:
        return self._new_by_host.get(host_id, [])

    def keys_of_model(self, model_id: str) -> list[Key]:
        return self._by_model.get(model_id, [])

    def outside_count(self, model_id: str) -> int:
        return self._outside_count.get(model_id, 0)

    def host_count(self, host_id: str, *, new_only: bool = False) -> cp_model.IntVar:
        """An integer variable equal to the number of (new) placements on the host.

        Slot caps and colocation ceilings then bound one variable instead of repeating the
        host's whole sum once per cap.
        """
        cached = self._host_counts.get((host_id, new_only))
        if cached is not None:
            return cached
        keys = self.new_keys_on_host(host_id) if new_only else self.keys_on_host(host_id)
        count = self.model.new_int_var(0, len(keys), "")
        self.model.add(count == self.total(keys))
        self._host_counts[(host_id, new_only)] = count
        self.register(count, self._count_of(keys))
        return count

    def _count_of(self, keys: Iterable[Key]) -> Callable[[Placement], int]:
        chosen = frozenset(keys)

        def value(placement: Placement) -> int:
            return len(placement & chosen)

        return value

    # -- expressions ---------------------------------------------------------------------
    def total(self, keys: Iterable[Key], weight: Callable[[Key], int] | None = None) -> Expr:
        chosen = list(keys)
        if weight is None:
            return cp_model.LinearExpr.sum([self.x[k] for k in chosen])
        return cp_model.LinearExpr.weighted_sum(
            [self.x[k] for k in chosen], [weight(k) for k in chosen]
        )

    def placed_expr(self, model_id: str) -> Expr:
        """Variable placements of the model (outside constants included, fixed excluded)."""
        return self.total(self.keys_of_model(model_id)) + self.outside_count(model_id)

    def replica_count(self, model_id: str) -> Expr:
        """Every replica of the model: fixed (unmanaged) ones plus placements."""
        return self.placed_expr(model_id) + self.problem.fixed_count(model_id)

    def constant_replicas(self, model_id: str) -> int:
        return self.problem.fixed_count(model_id) + self.outside_count(model_id)

    def at_least(self, model_id: str, k: int) -> cp_model.IntVar | int:
        """Literal (or constant) equal to [replica_count(model) ≥ k].

        Unary steps r_1 ≥ r_2 ≥ … with Σ r_j = Σ x[m,·] make each literal exact, so the
        replica levels are linear in them. Steps stop at the model's open replicas.
        """
        base = self.constant_replicas(model_id)
        if k <= base:
            return 1
        steps = self._steps.get(model_id)
        if steps is None:
            steps = self._make_steps(model_id)
        index = k - base - 1
        return steps[index] if index < len(steps) else 0

    def _make_steps(self, model_id: str) -> list[cp_model.IntVar]:
        keys = self.keys_of_model(model_id)
        room = max(0, self.problem.open_replicas(model_id) - self.outside_count(model_id))
        count = min(len(keys), room)
        steps = [self.model.new_bool_var("") for _ in range(count)]
        for earlier, later in itertools.pairwise(steps):
            self.model.add_implication(later, earlier)
        self.model.add(self.total(keys) == cp_model.LinearExpr.sum(steps))
        base = self.constant_replicas(model_id)
        for j, step in enumerate(steps):
            self.register(step, self._reaches(model_id, base + j + 1))
        self._steps[model_id] = steps
        return steps

    def _reaches(self, model_id: str, threshold: int) -> Callable[[Placement], int]:
        keys = frozenset(self.keys_of_model(model_id))
        base = self.constant_replicas(model_id)

        def value(placement: Placement) -> int:
            return int(base + len(placement & keys) >= threshold)

        return value

    # -- hints ---------------------------------------------------------------------------
    def register(self, var: cp_model.IntVar, value_of: Callable[[Placement], int]) -> None:
        """Declare an auxiliary variable and how its value follows from a placement."""
        self._aux.append((var, value_of))

    def hint(self, placement: Iterable[Key]) -> None:
        """Replace the model's hint with this placement (keys without a variable ignored)."""
        chosen = frozenset(placement)
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        hint = self.model.proto.solution_hint
        hint.vars.extend([var.index for var in self.x.values()])
        hint.values.extend([int(key in chosen) for key in self.x])
        hint.vars.extend([var.index for var, _value_of in self._aux])
        hint.values.extend([value_of(chosen) for _var, value_of in self._aux])

    def placement(self, solver: cp_model.CpSolver) -> set[Key]:
        return {key for key, var in self.x.items() if solver.boolean_value(var)}
