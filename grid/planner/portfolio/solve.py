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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from grid.planner.cpsat.build import add_hard_constraints
from grid.planner.cpsat.variables import Expr, PlacementVars
from grid.planner.portfolio.assign import AssignVars
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.exploration import add_exploration_budget
from grid.planner.portfolio.link import add_links, fix_base
from grid.planner.portfolio.objective import level_expressions
from grid.planner.portfolio.score import evaluate, failures_of, pressure_of
from grid.planner.portfolio.search import place

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


def _solver(limit_s: float, deterministic: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.001, limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.001, limit_s)
    return solver


def solve_portfolio(
    ctx: PortfolioContext,
    *,
    hint_mapping: dict[str, str],
    hint_placement: set[Key],
    time_limit_s: float,
    deterministic: bool = True,
    hint_exploit: dict[str, str] | None = None,
) -> CpsatResult | None:
    """`hint_exploit`: the coordinate search's exploitation-only map. When it ties the CP-SAT
    exploitation optimum (same upper levels, same utility without the bonus) it is kept as E, so
    ties between equally good exploitation portfolios do not move the exploration budget."""
    deadline = time.perf_counter() + time_limit_s
    model = cp_model.CpModel()
    xs = PlacementVars(model, ctx.problem, keys=ctx.variable_keys(), outside=ctx.outside_keys())
    add_hard_constraints(model, xs, ctx.problem)
    fix_base(model, xs, ctx)
    av = AssignVars(model, ctx)
    missing = add_links(model, xs, ctx, av)
    exprs = level_expressions(model, xs, ctx, av, missing)
    mapping, placement = dict(hint_mapping), set(hint_placement)
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
        expr = _stage_expression(levels, exprs, bounds)
        model.maximize(expr)
        xs.hint(placement)
        av.hint(model, mapping)
        solver = _solver(remaining, deterministic)
        status = solver.solve(model)
        label = solver.status_name(status)
        statuses.append((name, label))
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if status == cp_model.UNKNOWN:
                proven = False
                continue
            return None  # INFEASIBLE / MODEL_INVALID: the fixed base and the model disagree
        solved_any = True
        if status != cp_model.OPTIMAL:
            proven = False
        found_map = av.mapping(solver)
        found_place = xs.placement(solver) | set(ctx.outside_keys())
        achieved = round(solver.objective_value)
        if name == "utility_exploit":
            exploit = _canonical_exploit(ctx, found_map, found_place, hint_exploit)
            mapping, placement = found_map, found_place
            add_exploration_budget(model, ctx, av, exploit)
            continue
        model.add(expr >= achieved)
        mapping, placement = found_map, found_place
    if not solved_any:
        return None
    return CpsatResult(
        mapping=mapping,
        placement=placement,
        exploit_mapping=exploit,
        status="OPTIMAL" if proven else "FEASIBLE",
        stage_status=statuses,
    )
