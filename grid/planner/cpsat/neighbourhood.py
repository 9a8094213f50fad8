"""Large-neighbourhood search for a replica stage whose full model is too large to build.

On a fleet where the per-host model would take longer to build than the budget allows (the
generated 1,000 × 200 mixed fleet: 79,106 candidates, every host distinct) solve.py used to
leave such a stage at the incumbent. Here small CP-SAT models improve it instead, each over a
*neighbourhood* of the incumbent:

    short       the models of the stage's levels below their round (count < k for
                baseline:k and direct:k, < desired for inferred)
    vacated     NEIGHBOURHOOD_HOSTS candidate hosts of one short model, among those holding a
                placement (an empty candidate host that does not hold the model keeps it out
                by itself), fewest placements first; the short models take turns
    movers      that short model plus every model the incumbent places on the vacated hosts
    variables   x over the incumbent's placements, every candidate on the vacated hosts and
                every candidate of the movers (any host); every other candidate is 0
    protected   every model but the movers keeps at least its replica count (it may move);
                the tie-break keeps the most movers' replicas and incumbent placements

Every hard constraint is downward closed and the incumbent is one assignment of the variables,
so the neighbourhood model is exact for what it covers: each constraint family of build.py on
the real ledgers, the level expressions equal to levels.score_placement. Every earlier stage is
constrained to at least the incumbent's value, so a solution never loses an earlier level; the
stage itself is maximized from the incumbent's hint. A solution is kept when it raises the
stage (after re-adding the incumbent placements that still fit). Neighbourhoods are tried in
order until the stage meets its static bound or the stage's time is spent (solve.py gives a
stage half of what is left). A neighbourhood's OPTIMAL proves nothing about the whole fleet:
the stage stays unproven (its bound is the static one) unless it reaches the static bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ortools.sat.python import cp_model

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.planner.cpsat.build import add_hard_constraints
from grid.planner.cpsat.ledger import Ledger, repair_order
from grid.planner.cpsat.objective import level_expressions
from grid.planner.cpsat.stages import Stage
from grid.planner.cpsat.variables import Expr, Key, PlacementVars
from grid.planner.levels import (
    baseline_members,
    inferred_members,
    placed_counts,
    round_members,
)
from grid.planner.problem import PlacementProblem

NEIGHBOURHOOD_HOSTS = 10  # hosts vacated per neighbourhood (1,000 mixed: ~5,000 variables)
EXACT_LIMIT = 2**50

Solver = Callable[[float], cp_model.CpSolver]


def short_models(problem: PlacementProblem, stage: Stage, placed: set[Key]) -> list[str]:
    """Models of the stage's replica levels that are below the level's round."""
    counts = placed_counts(problem, placed)
    out: set[str] = set()
    for level in stage.levels:
        parts = level.name.split(":")
        if not level.replica_level or len(parts) < 2 or not parts[0].startswith("p"):
            continue
        priority = int(parts[0][1:])
        if parts[1] == "inferred":
            out.update(
                m
                for m in inferred_members(problem, priority)
                if counts[m] < problem.targets[m].desired
            )
            continue
        k = int(parts[2])
        members = (
            baseline_members(problem, priority, k)
            if parts[1] == "baseline"
            else round_members(problem, priority, k)
        )
        out.update(m for m in members if counts[m] < k)
    return sorted(out)


def neighbourhoods(
    problem: PlacementProblem, short: Sequence[str], placed: set[Key]
) -> list[tuple[str, list[str]]]:
    """(short model, hosts to vacate): each short model's candidate hosts, emptiest first, in
    groups of NEIGHBOURHOOD_HOSTS; the models take turns group by group."""
    on_host: dict[str, int] = {}
    for _model, host in placed:
        on_host[host] = on_host.get(host, 0) + 1
    per_model = []
    for model_id in short:
        # A short model not placed on an empty candidate host is kept out by that host alone:
        # vacating it cannot help.
        hosts = sorted(
            {c.host_id for c in problem.candidates_of_model(model_id) if c.host_id in on_host},
            key=lambda h: (on_host[h], h),
        )
        per_model.append(
            [
                (model_id, hosts[i : i + NEIGHBOURHOOD_HOSTS])
                for i in range(0, len(hosts), NEIGHBOURHOOD_HOSTS)
            ]
        )
    turns = max((len(groups) for groups in per_model), default=0)
    return [groups[t] for t in range(turns) for groups in per_model if t < len(groups)]


def neighbourhood_keys(
    problem: PlacementProblem, movers: set[str], vacated: Sequence[str], placed: set[Key]
) -> set[Key]:
    keys = set(placed)
    keys.update((c.model_id, c.host_id) for m in movers for c in problem.candidates_of_model(m))
    keys.update((c.model_id, c.host_id) for h in vacated for c in problem.candidates_of_host(h))
    return keys


def _objective(
    stage: Expr, xs: PlacementVars, movers: set[str], placed: set[Key], bound: int
) -> Expr:
    """The stage first; among its optima, the most movers' replicas and incumbent placements
    kept (a tie-break only
    where its weight stays exact in the solver's double arithmetic)."""
    kept = sorted({k for m in movers for k in xs.keys_of_model(m)} | (placed & xs.x.keys()))
    weight = len(kept) + 1
    if abs(bound) * weight + weight >= EXACT_LIMIT:
        return stage
    return stage * weight + xs.total(kept)


class _Search:
    def __init__(
        self,
        problem: PlacementProblem,
        stages: Sequence[Stage],
        index: int,
        quality: dict[Key, int],
        bound: int,
    ) -> None:
        self.problem = problem
        self.stages = stages
        self.index = index
        self.quality = quality
        self.bound = bound
        self.names = [n for s in stages[: index + 1] for n in s.names]

    def model(
        self,
        short: str,
        vacated: Sequence[str],
        placed: set[Key],
        values: dict[str, int],
        max_keys: float,
    ) -> tuple[cp_model.CpModel, PlacementVars] | None:
        """The neighbourhood's model, or None when it has more than max_keys variables."""
        problem = self.problem
        hosts = set(vacated)
        movers = {short} | {m for m, h in placed if h in hosts}
        keys = neighbourhood_keys(problem, movers, vacated, placed)
        if len(keys) > max_keys:
            return None
        model = cp_model.CpModel()
        xs = PlacementVars(model, problem, keys=keys)
        add_hard_constraints(model, xs, problem)
        exprs = level_expressions(model, xs, problem, names=self.names, quality=self.quality)
        for earlier in self.stages[: self.index]:
            model.add(earlier.expression(exprs) >= earlier.signed(values))
        # Every other model keeps its replica count (it may move): no later level loses it.
        counts = placed_counts(problem, placed)
        for model_id in xs.models():
            if model_id not in movers:
                model.add(xs.replica_count(model_id) >= counts[model_id])
        stage = self.stages[self.index]
        model.maximize(_objective(stage.expression(exprs), xs, movers, placed, self.bound))
        xs.hint(placed)
        return model, xs


def improve_stage(
    problem: PlacementProblem,
    stages: Sequence[Stage],
    index: int,
    placed: set[Key],
    values: dict[str, int],
    *,
    score: Callable[[set[Key]], dict[str, int]],
    quality: dict[Key, int],
    bound: int,
    limit_s: float,
    solver: Solver,
    build_s_per_key: float,
) -> tuple[set[Key], dict[str, int], int]:
    """Raise stages[index] by neighbourhood solves within limit_s: (placement, values, solves).

    `bound`: the stage's static bound (signed); the search stops once the stage reaches it.
    `build_s_per_key`: the expected build cost per variable; a neighbourhood that would take
    more than neighbourhood_build_share of the stage's time left to build is passed over.
    """
    stage = stages[index]
    search = _Search(problem, stages, index, quality, bound)
    ends = time.perf_counter() + limit_s
    solves = 0
    tried: set[tuple[str, str]] = set()
    while stage.signed(values) < bound:
        short = short_models(problem, stage, placed)
        groups = [
            (m, hosts)
            for m, hosts in neighbourhoods(problem, short, placed)
            if (m, hosts[0]) not in tried
        ]
        improved = False
        for short_model, vacated in groups:
            if ends - time.perf_counter() < budget.CALIBRATION.neighbourhood_min_s:
                return placed, values, solves
            tried.add((short_model, vacated[0]))
            max_keys = (
                budget.CALIBRATION.neighbourhood_build_share
                * (ends - time.perf_counter())
                / build_s_per_key
            )
            built = search.model(short_model, vacated, placed, values, max_keys)
            if built is None:
                continue
            model, xs = built
            left = ends - time.perf_counter()
            if left < budget.CALIBRATION.neighbourhood_min_s:
                return placed, values, solves
            run = solver(min(left, budget.CALIBRATION.neighbourhood_max_s))
            status = run.solve(model)
            solves += 1
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                continue
            found = Ledger(problem, xs.placement(run)).extend(repair_order(problem, placed))
            found_values = score(found)
            if stage.signed(found_values) > stage.signed(values):
                placed, values = found, found_values
                improved = True
                break  # the short models changed: new neighbourhoods
        if not improved:
            break
    return placed, values, solves
