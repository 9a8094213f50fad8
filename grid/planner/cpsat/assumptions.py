"""Which constraints keep one more replica out: a feasibility model with assumption literals.

For a model m and a set of hosts H (its candidate hosts, capped), the local model has x over
every candidate on H; placements elsewhere stay as `placed` has them (constants). Literals:
    (family, h)            the host families of build.py on each host h ∈ H
    (relation, m')         every other model m' with candidates on H keeps its replica count
                           and its pinned replicas (relation: higher_priority, equal_priority
                           or lower_priority), i.e. levels 1–2 stay at what `placed` achieves
Hard: replica bounds; m keeps its pinned replicas; and one more replica of m (or, for a pin,
a replica on the pinned host). INFEASIBLE under all assumptions yields a core: the families,
hosts and protected models that together block the replica; it is shrunk by deletion within
a small budget. The search is deterministic: one worker, a fixed seed, and a budget in CP-SAT's
deterministic time (a wall-clock limit is only a safety net).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ortools.sat.python import cp_model

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.planner.cpsat.build import add_hard_constraints
from grid.planner.cpsat.variables import Guard, Key, PlacementVars
from grid.planner.levels import placed_counts
from grid.planner.problem import PlacementProblem

Outcome = Literal["infeasible", "feasible", "unknown"]
SEED = 20240611
MAX_SHRINK_SOLVES = 1  # one deletion pass: cores stay the same on the bench fleets at half the cost


@dataclass(frozen=True)
class Core:
    outcome: Outcome
    blockers: list[tuple[str, str]] = field(default_factory=list)  # (family, host or model)
    work: float = 0.0  # CP-SAT deterministic time spent


def relation(problem: PlacementProblem, model_id: str, other: str) -> str:
    mine = problem.model_by_id[model_id].priority
    theirs = problem.model_by_id[other].priority
    if theirs > mine:
        return "higher_priority"
    return "equal_priority" if theirs == mine else "lower_priority"


def binding_core(
    problem: PlacementProblem,
    placed: set[Key],
    model_id: str,
    *,
    hosts: list[str],
    required_host: str | None = None,
    work_limit: float = 0.2,
) -> Core:
    model = cp_model.CpModel()
    guard = Guard(model)
    local = set(hosts)
    keys = [(c.model_id, c.host_id) for h in sorted(local) for c in problem.candidates_of_host(h)]
    xs = PlacementVars(model, problem, keys=keys, outside=[k for k in placed if k[1] not in local])
    add_hard_constraints(model, xs, problem, host_guard=guard)
    counts = placed_counts(problem, placed)
    for other in xs.models():
        if other == model_id:
            continue
        literal = guard.literal(relation(problem, model_id, other), other)
        model.add(xs.replica_count(other) >= counts[other]).only_enforce_if(literal)
        for key in xs.keys_of_model(other):
            if key in placed and problem.candidates[key].pinned:
                model.add(xs.x[key] == 1).only_enforce_if(literal)
    for key in xs.keys_of_model(model_id):
        if key in placed and problem.candidates[key].pinned:
            model.add(xs.x[key] == 1)
    if required_host is not None:
        target = (model_id, required_host)
        if target not in xs.x:
            return Core("unknown")
        model.add(xs.x[target] == 1)
        model.add(xs.replica_count(model_id) >= counts[model_id])
    else:
        model.add(xs.replica_count(model_id) >= counts[model_id] + 1)
    literals = list(guard.literals.values())
    xs.hint(placed)
    return _shrink(model, guard, literals, work_limit)


def _solve(
    model: cp_model.CpModel, literals: list[cp_model.IntVar], work_limit: float
) -> tuple[cp_model.CpSolverStatus, cp_model.CpSolver]:
    model.clear_assumptions()
    model.add_assumptions(literals)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    solver.parameters.max_deterministic_time = max(0.001, work_limit)
    solver.parameters.max_time_in_seconds = budget.CALIBRATION.core_wall_safety_s
    # Small local models: presolve costs more than it saves, and cores stay the same.
    solver.parameters.cp_model_presolve = False
    return solver.solve(model), solver


def _shrink(
    model: cp_model.CpModel, guard: Guard, literals: list[cp_model.IntVar], work_limit: float
) -> Core:
    status, solver = _solve(model, literals, work_limit)
    spent = solver.deterministic_time
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Core("feasible", work=spent)
    if status != cp_model.INFEASIBLE:
        return Core("unknown", work=spent)
    by_index = {lit.index: lit for lit in literals}
    core = [by_index[i] for i in solver.sufficient_assumptions_for_infeasibility() if i in by_index]
    if not core:
        return Core("infeasible", [], spent)
    # Deletion: drop a literal whenever the rest still cannot hold the replica.
    kept = list(core)
    for literal in core[:MAX_SHRINK_SOLVES]:
        if spent >= work_limit or len(kept) == 1:
            break
        if all(lit.index != literal.index for lit in kept):
            continue
        trial = [lit for lit in kept if lit.index != literal.index]
        status, solver = _solve(model, trial, work_limit - spent)
        spent += solver.deterministic_time
        if status == cp_model.INFEASIBLE:
            narrowed = set(solver.sufficient_assumptions_for_infeasibility())
            kept = [lit for lit in trial if lit.index in narrowed] or trial
    blockers = [b for b in (guard.describe(lit.index) for lit in kept) if b is not None]
    return Core("infeasible", sorted(blockers), spent)
