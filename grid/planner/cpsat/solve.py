"""Lexicographic CP-SAT solve of the placement problem, hinted, within a time budget.

Formulation (sets and ledgers as in problem.py's docstring):
    variables   x[m,h] ∈ {0,1} for every candidate (m,h) ∈ C; exact auxiliaries: unary replica
                steps [count_m ≥ k], failure-domain indicators, host-used flags, ceiling
                indicators (variables.py, domains.py, objective.py, colocation.py)
    constraints memory (both ledgers), slots (desired_cap, new_cap), colocation (own ceilings,
                pairwise exclusions), disk (known free disk), replicas (≤ open(m); pins never
                substituted) — one module per family, see build.py
    levels      levels.levels(problem), highest first, each a linear expression equal to
                levels.score_placement (objective.py)

Stages (stages.py). Levels are optimized in order; after each stage its expression is fixed at
the achieved value (≥ for max, ≤ for min). A direct:{k} count and its :harm tie-break share one
stage, as do quality and spare_hosts (dominating weights). A stage is proven with no solve when
the incumbent already meets the capacity-blind bound of bounds.py. A stage that needs a solve
runs on the model of its scope (pinned candidates; classes down to its own; or everything),
built on first need with every earlier fixing, and hinted with the incumbent: first the best
feasible hint (hints are repaired by dropping what no longer fits), then each stage's result.
An improved partial-scope solution keeps the incumbent's other placements that still fit. A
model whose estimated build time exceeds its share of the remaining budget is not built: its
stages stay unproven.

Status: OPTIMAL when every level was proven; FEASIBLE when the budget ran out first (later
levels keep the incumbent, never worse than the best hint); placed=None only when the solver
rejected the model, which the caller answers with the heuristic's plan. Wall time is read with
perf_counter to split the budget across the stages still to solve; a reserve of the budget is
left for the caller's preemption staging and explanations.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.planner.cpsat.bounds import static_bounds
from grid.planner.cpsat.build import add_hard_constraints
from grid.planner.cpsat.exclusive import ExclusiveBound
from grid.planner.cpsat.forced import forced_soft_bounds
from grid.planner.cpsat.ledger import Ledger, placement_problems, repair_order
from grid.planner.cpsat.neighbourhood import improve_stage
from grid.planner.cpsat.objective import level_expressions
from grid.planner.cpsat.scoring import Scorer
from grid.planner.cpsat.stages import (
    ALL,
    Stage,
    fold_stages,
    scope_keys,
    scope_size,
    stages_of,
)
from grid.planner.cpsat.variables import Key, PlacementVars
from grid.planner.levels import Level, compare
from grid.planner.problem import PlacementProblem

SEED = 20240611
# Presolve never paid for itself on these models: above ~3,000 candidates it can use a stage's
# whole slice (~0.35 s on 9,500 variables) and leave it UNKNOWN; below, it roughly doubled the
# wall time of a 64-host plan (measured 300 ms with it, 170 ms without, same levels proven).
PRESOLVE_MAX_KEYS = 0
# A full model this large that leaves a replica stage unproven is followed by neighbourhood
# solves on that stage (the 1,000 × 200 mixed fleet at 10 s: 79,106 candidates).
NEIGHBOURHOOD_MIN_KEYS = 20_000


@dataclass
class StageReport:
    levels: list[str]
    status: str  # OPTIMAL, FEASIBLE, UNKNOWN, BOUND (proven without a solve), SKIPPED
    wall_s: float


@dataclass
class SolveResult:
    placed: set[Key] | None
    status: str
    bounds: dict[str, int]
    message: str
    stages: list[StageReport] = field(default_factory=list)


def best_hint(problem: PlacementProblem, hints: Sequence[set[Key]], scorer: Scorer) -> set[Key]:
    """The lexicographically best hint after repair (the empty placement is always feasible)."""
    best: set[Key] = set()
    best_values = scorer.score(best)
    for hint in hints:
        candidate = Ledger(problem).extend(repair_order(problem, hint))
        values = scorer.score(candidate)
        if compare(problem, values, best_values) > 0:
            best, best_values = candidate, values
    return best


class _Model:
    """One CP-SAT model over a scope's candidates with the expressions its stages need."""

    def __init__(
        self,
        problem: PlacementProblem,
        scope: int,
        keys: list[Key],
        names: list[str],
        scorer: Scorer,
    ) -> None:
        self.scope = scope
        self.presolve = len(keys) <= PRESOLVE_MAX_KEYS
        self.model = cp_model.CpModel()
        self.vars = PlacementVars(self.model, problem, keys=keys)
        add_hard_constraints(self.model, self.vars, problem)
        self.exprs = level_expressions(
            self.model, self.vars, problem, names=names, quality=scorer.quality
        )

    def fix(self, stage: Stage, achieved: int) -> None:
        self.model.add(stage.expression(self.exprs) >= achieved)


def _solver(limit_s: float, deterministic: bool, presolve: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.001, limit_s)
    # Measured on generated 64- and 256-host fleets: one worker with the full LP relaxation
    # (linearization level 2) proves every stage sooner than two workers at the default level
    # (64 hosts: 120-185 ms against 165-310 ms; 256 hosts: 3.4 s against 4.4 s). A single worker
    # keeps runs repeatable whenever no stage stops on the wall clock.
    solver.parameters.num_workers = 1
    solver.parameters.linearization_level = 2
    solver.parameters.random_seed = SEED
    solver.parameters.cp_model_presolve = presolve
    if deterministic:  # a cut-off in deterministic time lands on the same solution every run
        solver.parameters.max_deterministic_time = max(0.001, limit_s)
    return solver


def _is_soft(stage: Stage) -> bool:
    """Levels 4–6: below the replica levels and failure-domain diversity."""
    return all(not lv.replica_level and lv.name != "domain_shortfall" for lv in stage.levels)


def solve_lexicographic(
    problem: PlacementProblem,
    *,
    hints: list[set[tuple[str, str]]],
    time_limit_s: float,
    deterministic: bool,
    soft_stage_limit_s: float | None = None,
    reserve_s: float | None = None,
    build_s_per_key: float = 0.0,
    proven_bounds: dict[str, int] | None = None,
    prove_only: bool = False,
) -> SolveResult:
    """`soft_stage_limit_s` caps each stage below the failure-domain level (disruption, quality,
    spare hosts): a latency-bound caller (the controller's tick) may act on a placement whose
    soft levels are unproven, reported FEASIBLE with their bounds. `reserve_s`: the part of
    `time_limit_s` the caller keeps for the phases after the solve (default: the assembly
    reserve below). `build_s_per_key`: the expected model-build cost per candidate, raised by a
    caller that measured a slow machine. `proven_bounds`: optimal values of some levels proven
    elsewhere (the host-type model, aggregate.py), replacing their static bounds: a stage whose
    hint meets them is proven without a solve. `prove_only`: no model is built and no stage
    searched: the best hint is kept, and each stage it proves by a bound (static, proven,
    exclusive-host or forced) is reported proven (a budget that leaves no solve its setup)."""
    run = _Run(problem, hints, time_limit_s, deterministic, soft_stage_limit_s, reserve_s)
    run.prove_only = prove_only
    if proven_bounds:
        run.static.update(proven_bounds)
    run.build_s_per_key = max(budget.CALIBRATION.model_build_s_per_key, build_s_per_key)
    failure = run.execute()
    if failure is not None:
        return failure
    broken = placement_problems(problem, run.incumbent)
    if broken:
        return SolveResult(
            None,
            "MODEL_MISMATCH",
            {},
            "the CP-SAT placement breaks a hard constraint: " + "; ".join(broken[:3]),
            run.reports,
        )
    message = "" if run.proven else _unproven_message(run.reports)
    status = "OPTIMAL" if run.proven else "FEASIBLE"
    return SolveResult(run.incumbent, status, run.bounds, message, run.reports)


class _Run:
    """One lexicographic solve: the incumbent only ever improves, stage by stage."""

    def __init__(
        self,
        problem: PlacementProblem,
        hints: Sequence[set[Key]],
        time_limit_s: float,
        deterministic: bool,
        soft_stage_limit_s: float | None = None,
        reserve_s: float | None = None,
    ) -> None:
        self.problem = problem
        self.deterministic = deterministic
        self.soft_stage_limit_s = soft_stage_limit_s
        self.build_s_per_key = budget.CALIBRATION.model_build_s_per_key
        reserve = (
            reserve_s
            if reserve_s is not None
            else min(
                budget.CALIBRATION.assembly_reserve_s,
                budget.CALIBRATION.assembly_reserve_share * max(0.0, time_limit_s),
            )
        )
        self.deadline = time.perf_counter() + max(0.0, time_limit_s - reserve)
        self.scorer = Scorer(problem)
        self.static = static_bounds(problem, self.scorer.quality)
        self.stages = fold_stages(stages_of(problem), self.static)
        self.incumbent = best_hint(problem, hints, self.scorer)
        self.values = self.scorer.score(self.incumbent)
        self.bounds: dict[str, int] = {}
        self.reports: list[StageReport] = []
        self.proven = True  # every stage so far proven: later bounds stay lexicographic
        self._fixings: list[tuple[Stage, int]] = []
        self._model: _Model | None = None
        self._scope_keys: dict[int, list[Key]] = {}
        self._exclusive: ExclusiveBound | None = None
        self.prove_only = False

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    def meets_bound(self, stage: Stage) -> bool:
        return stage.signed(self.values) >= stage.signed(self.static)

    def fix(self, stage: Stage) -> None:
        achieved = stage.signed(self.values)
        self._fixings.append((stage, achieved))
        # A model of a narrower scope never serves this or any later stage again.
        if self._model is not None and stage.scope <= self._model.scope:
            self._model.fix(stage, achieved)

    def unproven(self, stage: Stage, status: str) -> None:
        self.proven = False
        self.bounds.update({n: self.static[n] for n in stage.names})
        self.reports.append(StageReport(stage.names, status, 0.0))

    def model_for(self, stage: Stage) -> _Model | None:
        """The model of the stage's scope, built now if the budget allows (else None)."""
        if self._model is not None and self._model.scope == stage.scope:
            return self._model
        keys = self._scope_keys.get(stage.scope)
        size = len(keys) if keys is not None else scope_size(self.problem, stage.scope)
        if self.build_s_per_key * size > budget.CALIBRATION.model_build_share * self.remaining():
            return None  # the keys are listed only for a model that will be built
        if keys is None:
            keys = self._scope_keys[stage.scope] = scope_keys(self.problem, stage.scope)
        names = [n for s in self.stages if s.scope <= stage.scope for n in s.names]
        self._model = _Model(self.problem, stage.scope, keys, names, self.scorer)
        for done, achieved in self._fixings:
            self._model.fix(done, achieved)
        return self._model

    def execute(self) -> SolveResult | None:
        forced = False
        for index, stage in enumerate(self.stages):
            if not forced and not all(lv.replica_level for lv in stage.levels):
                forced = True
                self.force_soft_bounds()
            if self.meets_bound(stage):
                self.bounds.update({n: self.values[n] for n in stage.names})
                self.reports.append(StageReport(stage.names, "BOUND", 0.0))
                self.fix(stage)
                continue
            if self.remaining() <= 0.001:
                self.unproven(stage, "SKIPPED")
                continue
            started = time.perf_counter()
            if self.meets_exclusive_bound(index):
                self.bounds.update({n: self.values[n] for n in stage.names})
                self.reports.append(
                    StageReport(stage.names, "BOUND", time.perf_counter() - started)
                )
                self.fix(stage)
                continue
            if self.prove_only:
                self.unproven(stage, "SKIPPED")
                self.fix(stage)
                continue
            built = self.model_for(stage)
            if built is None:
                self.search_neighbourhoods(index, started)
                continue
            failure = self.solve_stage(built, stage, self.stages[index:], started)
            if failure is not None:
                return failure
            self.fix(stage)
        return None

    def force_soft_bounds(self) -> None:
        """Every replica level proven at its static bound forces each model's count: the
        soft levels get forced.py's bounds (quality, spare hosts), valid under those fixings."""
        replica = [lv.name for s in self.stages for lv in s.levels if lv.replica_level]
        if self.proven and all(self.values[n] == self.static[n] for n in replica):
            for name, bound in forced_soft_bounds(self.problem, self.scorer.quality).items():
                self.static[name] = min(self.static[name], bound)

    def meets_exclusive_bound(self, index: int) -> bool:
        """Does the incumbent meet the exclusive-host bound (exclusive.py) of a replica stage
        whose earlier stages are all proven? Then the stage is proven without a solve."""
        stage = self.stages[index]
        if not self.proven or self.remaining() < budget.CALIBRATION.exclusive_min_s:
            return False
        if self._exclusive is None:
            self._exclusive = ExclusiveBound(self.problem)
        if not self._exclusive.applies(stage):
            return False
        position = {id(s): i for i, s in enumerate(self.stages)}
        achieved = {position[id(s)]: value for s, value in self._fixings}
        limit = min(budget.CALIBRATION.exclusive_max_s, self.remaining())
        solver = _solver(limit, self.deterministic, True)
        bound = self._exclusive.stage_bound(self.stages, index, achieved, solver)
        return bound is not None and stage.signed(self.values) >= bound

    def neighbourhood_solves(self, index: int) -> int:
        """Raise a replica stage by neighbourhood solves (neighbourhood.py) within half of
        what is left at most (earlier stages weigh more); returns the number of solves."""
        stage = self.stages[index]
        to_solve = sum(1 for s in self.stages[index:] if not self.meets_bound(s))
        limit = self.remaining() / max(1, min(2, to_solve))
        self.incumbent, self.values, solves = improve_stage(
            self.problem,
            self.stages,
            index,
            self.incumbent,
            self.values,
            score=self.scorer.score,
            quality=self.scorer.quality,
            bound=stage.signed(self.static),
            limit_s=limit,
            solver=lambda s: _solver(s, self.deterministic, False),
            build_s_per_key=self.build_s_per_key,
        )
        return solves

    def search_neighbourhoods(self, index: int, started: float) -> None:
        """A replica stage whose model is too large to build: neighbourhood solves
        (neighbourhood.py) may raise it; it stays unproven unless it reaches its bound."""
        stage = self.stages[index]
        if not all(lv.replica_level for lv in stage.levels):
            self.unproven(stage, "SKIPPED")
            return
        solves = self.neighbourhood_solves(index)
        status = "NEIGHBOURHOOD" if solves else "SKIPPED"
        if self.meets_bound(stage):
            self.bounds.update({n: self.values[n] for n in stage.names})
            self.reports.append(StageReport(stage.names, "BOUND", time.perf_counter() - started))
        else:
            self.proven = False
            self.bounds.update({n: self.static[n] for n in stage.names})
            self.reports.append(StageReport(stage.names, status, time.perf_counter() - started))
        self.fix(stage)

    def solve_stage(
        self, built: _Model, stage: Stage, rest: Sequence[Stage], started: float
    ) -> SolveResult | None:
        remaining = self.remaining()
        to_solve = sum(1 for s in rest if not self.meets_bound(s))
        limit = min(remaining, max(budget.CALIBRATION.min_stage_s, remaining / max(1, to_solve)))
        if self.soft_stage_limit_s is not None and _is_soft(stage):
            limit = min(limit, self.soft_stage_limit_s)
        built.model.maximize(stage.expression(built.exprs))
        built.vars.hint(self.incumbent)
        solver = _solver(limit, self.deterministic, built.presolve)
        status = solver.solve(built.model)
        name = solver.status_name(status)
        self.reports.append(StageReport(stage.names, name, time.perf_counter() - started))
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
            return SolveResult(
                None,
                name,
                {},
                f"CP-SAT answered {name} at level {stage.names[0]}, which a feasible hint rules "
                "out: the model and the hint disagree",
                self.reports,
            )
        if status != cp_model.UNKNOWN:
            self.adopt(built, stage, built.vars.placement(solver))
        if status == cp_model.OPTIMAL and self.proven:
            self.bounds.update({n: self.values[n] for n in stage.names})
        elif status == cp_model.FEASIBLE and self.proven:
            combined = math.floor(solver.best_objective_bound + 1e-6)
            split = stage.split_bound(combined, self.values, self.static)
            for level in stage.levels:
                self.bounds[level.name] = _tighter(level, split[level.name], self.static)
        else:
            # Stages after an unproven one optimize under non-optimal fixings.
            self.bounds.update({n: self.static[n] for n in stage.names})
        if status != cp_model.OPTIMAL:
            self.proven = False
            index = len(self.stages) - len(rest)
            if (
                len(built.vars.x) > NEIGHBOURHOOD_MIN_KEYS
                and all(lv.replica_level for lv in stage.levels)
                and not self.meets_bound(stage)
            ):  # the full model ran out of its slice on a large fleet: neighbourhoods may
                # still raise the stage (its bounds above stay valid: same fixings)
                self.neighbourhood_solves(index)
        return None

    def adopt(self, built: _Model, stage: Stage, found: set[Key]) -> None:
        """Take a stage's solution if it improves the stage (keeping what else still fits)."""
        if built.scope < ALL:
            if stage.signed(self.scorer.score(found)) <= stage.signed(self.values):
                return
            others = [
                k for k in repair_order(self.problem, self.incumbent) if k not in built.vars.x
            ]
            found = Ledger(self.problem, found).extend(others)
        values = self.scorer.score(found)
        if stage.signed(values) >= stage.signed(self.values):
            self.incumbent, self.values = found, values


def _tighter(level: Level, bound: int, static: dict[str, int]) -> int:
    if level.sense == "max":
        return min(bound, static[level.name])
    return max(bound, static[level.name])


def _unproven_message(reports: list[StageReport]) -> str:
    first = next((r for r in reports if r.status not in ("OPTIMAL", "BOUND")), None)
    if first is None:
        return ""
    return f"time limit reached before level {first.levels[0]} was proven optimal"
