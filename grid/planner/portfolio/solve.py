"""Lexicographic CP-SAT solve of the portfolio model joint with placement.

Model     PlacementVars x over ctx.variable_keys() with every hard constraint family of
          grid/planner/cpsat (build.add_hard_constraints: memory ledgers, slots, colocation,
          disk, replica bounds of the augmented targets); base keys fixed at 1 (link.fix_base);
          assignment literals (assign.py) linked to the replica variables (link.py).
Stages    (covered, failures, pressure) as one dominating weighted sum, spare_slots, missing,
          utility_exploit → E, then the exploration budget against E (exploration.py), utility,
          transition, quality; each stage's optimum is fixed (≥ for max, ≤ for min) before the
          next, except utility_exploit, which only defines E. Hinted with the coordinate
          search's portfolio, then with each stage's solution. One worker, fixed seed:
          deterministic when no stage stops on time.
Status    OPTIMAL when every stage was proven; FEASIBLE when the budget cut a stage short;
          None when no stage produced a solution (the caller keeps the coordinate search).
Types     Where many hosts are interchangeable (hosttypes.aggregation_pays), the same stages
          run on the typed model (typed.py: integer n[m,T] for a type's hosts); the solutions
          of the utility_exploit stage (E) and of the last stage are disaggregated onto hosts
          (hosttypes.disaggregate). When both pack every count, the typed optimum is the
          per-host one (the type ledgers are a relaxation whose lexicographic optimum is then
          reached by a concrete placement); otherwise the per-host model solves with what is
          left of the budget (`fallback`), or, with none left, the packed part is FEASIBLE.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from grid.planner.cpsat import Expr, PlacementVars, add_hard_constraints
from grid.planner.deadline import CALIBRATION
from grid.planner.portfolio.assign import AssignVars
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.exploration import add_exploration_budget
from grid.planner.portfolio.hosttypes import (
    PortfolioType,
    aggregation_pays,
    disaggregate,
    portfolio_types,
)
from grid.planner.portfolio.link import add_links, fix_base
from grid.planner.portfolio.objective import level_expressions
from grid.planner.portfolio.score import evaluate, failures_of, pressure_of
from grid.planner.portfolio.search import SearchResult, place
from grid.planner.portfolio.typed import TypedVars, add_typed_constraints

SEED = 20240611
# (stage label, levels); a stage of several max levels is solved as one weighted sum whose
# weights dominate (each weight exceeds the largest value of everything after it).
STAGES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("coverage", (("covered", "max"), ("failures", "max"), ("pressure", "max"))),
    ("spare_slots", (("spare_slots", "max"),)),
    ("missing", (("missing", "min"),)),
    ("utility_exploit", (("utility_exploit", "max"),)),
    ("utility", (("utility", "max"),)),
    ("transition", (("transition", "min"),)),
    ("quality", (("quality", "max"),)),
)


def _upper_bounds(ctx: PortfolioContext) -> dict[str, int]:
    admitted = ctx.admitted
    return {
        "covered": len(admitted),
        "failures": sum(failures_of(ctx, w) for w in admitted),
        "pressure": sum(pressure_of(ctx, w) for w in admitted),
    }


def _stage_expression(
    levels: tuple[tuple[str, str], ...], exprs: dict[str, Expr], bounds: dict[str, int]
) -> Expr:
    if len(levels) == 1:
        name, sense = levels[0]
        return exprs[name] if sense == "max" else -exprs[name]
    terms: list[Expr] = []
    weights: list[int] = []
    weight = 1
    for name, _sense in reversed(levels):  # max levels with known non-negative upper bounds
        terms.append(exprs[name])
        weights.append(weight)
        weight *= bounds[name] + 1
    return cp_model.LinearExpr.weighted_sum(terms, weights)


@dataclass
class CpsatResult:
    mapping: dict[str, str]
    placement: set[Key]
    exploit_mapping: dict[str, str]
    status: str
    stage_status: list[tuple[str, str]] = field(default_factory=list)
    variables: int = 0  # of the CP-SAT model that decided
    aggregated_hosts: int = 0  # hosts in portfolio types (0: the per-host model)
    types: int = 0
    exact: bool = True  # the typed model's counts packed onto their hosts (per-host: always)
    fallback: bool = False  # the per-host model decided after the typed one's counts did not pack


UPPER_LEVELS = ("covered", "failures", "pressure", "spare_slots", "missing", "utility")


def _canonical_exploit(
    ctx: PortfolioContext,
    found: dict[str, str],
    placement: set[Key],
    hint: dict[str, str] | None,
) -> dict[str, str]:
    if hint is None or hint == found:
        return found
    mine = evaluate(ctx, found, placement, with_bonus=False)
    theirs = evaluate(ctx, hint, place(ctx, hint), with_bonus=False)
    return hint if all(mine[n] == theirs[n] for n in UPPER_LEVELS) else found


def _solver(limit_s: float, deterministic: bool, *, presolve: bool = True) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.001, limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.001, limit_s)
    if not presolve:
        solver.parameters.cp_model_presolve = False
        solver.parameters.cp_model_probing_level = 0
    return solver


def solve_portfolio(
    ctx: PortfolioContext,
    *,
    hint_mapping: dict[str, str],
    hint_placement: set[Key],
    time_limit_s: float,
    deterministic: bool = True,
    hint_exploit: dict[str, str] | None = None,
    aggregate: bool | None = None,
) -> CpsatResult | None:
    """`hint_exploit`: the coordinate search's exploitation-only map. When it ties the CP-SAT
    exploitation optimum (same upper levels, same utility without the bonus) it is kept as E, so
    ties between equally good exploitation portfolios do not move the exploration budget.

    `aggregate`: solve over portfolio host types (typed.py): True where any type exists,
    False never, None (default) where it pays (hosttypes.aggregation_pays). When a typed
    solution's counts do not pack onto their hosts (the type ledgers relax bin packing), the
    per-host model solves with what is left of the budget, hinted with the typed placement,
    when that is at least CALIBRATION.portfolio_fallback_builds estimated builds of it
    (deadline.py); otherwise the typed
    placement (valid, its levels as evaluated) is FEASIBLE, or None when it has none."""
    deadline = time.perf_counter() + time_limit_s
    types = portfolio_types(ctx) if aggregate is not False else []
    if types and (aggregate or aggregation_pays(ctx, types)):
        args = (deadline, deterministic, hint_exploit)
        typed = _solve(ctx, hint_mapping, hint_placement, *args, types)
        if typed is not None and typed.exact:
            return typed
        if typed is not None:
            hint_mapping, hint_placement = typed.mapping, typed.placement
        remaining = deadline - time.perf_counter()
        exact = None
        # The per-host model only where its build leaves it time to solve (its build is not
        # cut by the deadline).
        build_s = CALIBRATION.portfolio_build_s_per_key * len(ctx.variable_keys())
        if remaining > CALIBRATION.portfolio_fallback_builds * build_s:
            exact = _solve(ctx, hint_mapping, hint_placement, *args, [])
        if exact is not None:
            exact.fallback = True
            return exact
        if typed is not None:
            typed.status = "FEASIBLE"
        return typed
    return _solve(ctx, hint_mapping, hint_placement, deadline, deterministic, hint_exploit, [])


def solve_after_search(
    ctx: PortfolioContext,
    search: SearchResult,
    time_limit_s: float,
    *,
    deterministic: bool = True,
    aggregate: bool | None = None,
) -> CpsatResult | None:
    """solve_portfolio hinted with the coordinate search's portfolio and its exploitation map."""
    return solve_portfolio(
        ctx,
        hint_mapping=search.mapping,
        hint_placement=search.placement,
        time_limit_s=time_limit_s,
        deterministic=deterministic,
        hint_exploit=search.exploit_mapping,
        aggregate=aggregate,
    )


@dataclass
class _Joint:
    """The joint model of one solve: placement variables (per host, or typed), assignment
    literals and the level expressions."""

    model: cp_model.CpModel
    xs: PlacementVars
    typed: TypedVars | None
    av: AssignVars
    exprs: dict[str, Expr]

    def hint(
        self, state: tuple[set[Key], dict[Key, int]], placement: set[Key], mapping: dict[str, str]
    ) -> None:
        if self.typed is not None:
            self.typed.hint_solution(*state)
        else:
            self.xs.hint(placement)
        self.av.hint(self.model, mapping)


def _joint(ctx: PortfolioContext, types: list[PortfolioType]) -> _Joint:
    """The per-host model (`types` empty) or the typed one, base fixed, links added."""
    model = cp_model.CpModel()
    typed: TypedVars | None = None
    xs: PlacementVars
    if types:
        xs = typed = TypedVars(model, ctx, types)
        add_typed_constraints(model, typed, ctx)
    else:
        xs = PlacementVars(model, ctx.problem, keys=ctx.variable_keys(), outside=ctx.outside_keys())
        add_hard_constraints(model, xs, ctx.problem)
    fix_base(model, xs, ctx)
    av = AssignVars(model, ctx)
    missing = add_links(model, xs, ctx, av)
    return _Joint(model, xs, typed, av, level_expressions(model, xs, ctx, av, missing))


def _solve(
    ctx: PortfolioContext,
    hint_mapping: dict[str, str],
    hint_placement: set[Key],
    deadline: float,
    deterministic: bool,
    hint_exploit: dict[str, str] | None,
    types: list[PortfolioType],
) -> CpsatResult | None:
    """The lexicographic stages on the per-host model (`types` empty) or the typed one."""
    j = _joint(ctx, types)
    model, xs, typed, av = j.model, j.xs, j.typed, j.av
    mapping, placement = dict(hint_mapping), set(hint_placement)
    state = typed.of_placement(placement) if typed is not None else (placement, {})
    exploit: dict[str, str] = dict(hint_mapping)
    statuses: list[tuple[str, str]] = []
    proven = True
    solved_any = False
    bounds = _upper_bounds(ctx)
    for name, levels in STAGES:
        remaining = deadline - time.perf_counter()
        if remaining <= 0.001:
            statuses.append((name, "SKIPPED"))
            proven = False
            continue
        expr = _stage_expression(levels, j.exprs, bounds)
        model.maximize(expr)
        j.hint(state, placement, mapping)
        # The typed model solves without presolve and probing (both repeat for every stage of
        # a growing model; cpsat/aggregate.py measured the same for presolve). 1,000 production
        # hosts, 10 s budget: with both, quality UNKNOWN after 7.9 s of solves; without
        # presolve, all seven stages OPTIMAL in 5.9 s; without both, in 2.1 s (3.5 s in all).
        # With 1.5 s, probing alone (0.33 s) left the first stage UNKNOWN; without, two stages
        # are proven.
        solver = _solver(remaining, deterministic, presolve=typed is None)
        status = solver.solve(model)
        statuses.append((name, solver.status_name(status)))
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if status == cp_model.UNKNOWN:
                proven = False
                continue
            return None  # INFEASIBLE / MODEL_INVALID: the fixed base and the model disagree
        solved_any = True
        proven = proven and status == cp_model.OPTIMAL
        found_map = av.mapping(solver)
        if typed is not None:
            state = typed.solution(solver)
            found_place = set(ctx.outside_keys())  # concrete only where it is read (below)
        else:
            found_place = xs.placement(solver) | set(ctx.outside_keys())
        if name == "utility_exploit":
            if typed is not None:
                found_place, short = disaggregate(ctx, types, state[1], state[0])
                if short:  # E must be a per-host exploitation optimum: its counts must pack
                    return _result(found_map, found_place, found_map, statuses, False, xs, typed)
            exploit = _canonical_exploit(ctx, found_map, found_place, hint_exploit)
            mapping, placement = found_map, found_place
            add_exploration_budget(model, ctx, av, exploit)
            continue
        model.add(expr >= round(solver.objective_value))
        mapping, placement = found_map, found_place
    if not solved_any:
        return None
    exact = True
    if typed is not None:
        placement, short = disaggregate(ctx, types, state[1], state[0])
        exact = short == 0
    return _result(mapping, placement, exploit, statuses, proven and exact, xs, typed, exact)


def _result(
    mapping: dict[str, str],
    placement: set[Key],
    exploit: dict[str, str],
    statuses: list[tuple[str, str]],
    proven: bool,
    xs: PlacementVars,
    typed: TypedVars | None,
    exact: bool = False,
) -> CpsatResult:
    return CpsatResult(
        mapping=mapping,
        placement=placement,
        exploit_mapping=exploit,
        status="OPTIMAL" if proven else "FEASIBLE",
        stage_status=statuses,
        variables=len(xs.model.proto.variables),
        aggregated_hosts=0 if typed is None else sum(t.count for t in typed.types),
        types=0 if typed is None else len(typed.types),
        exact=exact or typed is None,
    )
