"""`solve_oracle`: greedy schedules, proven bounds, then CP-SAT (served first, mutations second).

1. The best of several greedy schedules (greedy.py) is the hint, the fallback and the baseline.
2. Bounds (bound.py): per-minute configuration LPs B_t, and LPs coupled across minutes; the
   B_t also become cuts Σ_m served[m, t] ≤ B_t in every CP-SAT model.
3. Traces up to FULL_MODEL_CELLS replica variables: the whole trace as one model, two
   lexicographic stages: maximise Σ served (exact scaled integers), then, with Σ served ≥ the
   stage-1 value, minimise loads + unloads. OPTIMAL only when both stages are proven.
   Larger traces: the time-window search (search.py), always FEASIBLE.
4. `tidy.py` removes churn a cut-short search left (never lowering served).
Every schedule reported is replayed by `replay.replay`; served and mutations are the replay's,
never the solver's objective. The bound is the smallest proven one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from grid.lab.oracle.bound import coupled_bounds, minute_bounds
from grid.lab.oracle.flow import flow_total, minute_flow
from grid.lab.oracle.greedy import best_greedy
from grid.lab.oracle.model import ResidencyModel, identical_host_groups
from grid.lab.oracle.replay import Action, Replay, replay, schedule_from_residency
from grid.lab.oracle.search import Budget, Rows, window_search
from grid.lab.oracle.tidy import tidy
from grid.lab.oracle.trace import Problem, Trace, compile_trace

STAGE1_SHARE = 0.75  # of the budget; stage 2 also gets whatever stage 1 leaves unused
FULL_MODEL_CELLS = 30_000  # replica variables up to which the whole trace is one model


class OracleModelMismatch(RuntimeError):
    """The solver's schedule does not replay to its own objective (a bug in the model)."""


@dataclass
class OracleResult:
    """The oracle's answer. `to_dict()` is the contract's JSON document."""

    status: str  # OPTIMAL | FEASIBLE
    served: float
    demand: float
    bound: float
    mutations: int
    schedule: list[Action]
    wall_s: float
    engine: str = "cp-sat"  # or "greedy" when CP-SAT found nothing better in time
    greedy_served: float = 0.0
    greedy_mutations: int = 0
    stages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def service_ceiling(self) -> float:
        return self.served / self.demand if self.demand > 0 else 1.0

    @property
    def gap(self) -> float:
        return (self.bound - self.served) / self.bound if self.bound > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "status": self.status,
            "served": self.served,
            "demand": self.demand,
            "service_ceiling": self.service_ceiling,
            "bound": self.bound,
            "gap": self.gap,
            "mutations": self.mutations,
            "schedule": [a.to_dict() for a in self.schedule],
            "wall_s": self.wall_s,
        }


def static_bound(problem: Problem) -> int:
    """Σ over minutes of what the minute serves with every replica that could be ready there."""
    total = 0
    since = problem.load
    pairs = problem.pairs()
    for t in range(problem.minutes):
        lo = max(0, t - since)
        capacity = [0] * len(problem.model_ids)
        for m, h in pairs:
            if all(problem.up[h][lo : t + 1]) and (t >= since or (m, h) in problem.initial):
                capacity[m] += problem.cap(m, h, t)
        total += flow_total(minute_flow(problem, t, capacity))
    return total


def _ordered_for_symmetry(problem: Problem, rows: list[list[set[int]]]) -> list[list[set[int]]]:
    """Permute identical hosts so that their residency-minutes decrease (the model's order)."""
    out = [list(row) for row in rows]
    for group in identical_host_groups(problem):
        busy = {h: sum(len(row[h]) for row in rows) for h in group}
        ranked = sorted(group, key=lambda h: (-busy[h], h))
        for row, orig in zip(out, rows, strict=True):
            for slot, h in zip(group, ranked, strict=True):
                row[slot] = orig[h]
    return out


def _check(problem: Problem, rows: Rows) -> tuple[list[Action], Replay]:
    schedule = schedule_from_residency(problem, rows)
    result = replay(problem, schedule)
    if not result.valid:
        raise OracleModelMismatch("; ".join(result.violations[:3]))
    return schedule, result


def _report(stage: str, name: str, solver: cp_model.CpSolver, started: float) -> dict[str, Any]:
    found = name in ("OPTIMAL", "FEASIBLE")
    return {
        "stage": stage,
        "status": name,
        "objective": round(solver.objective_value) if found else None,
        "bound": solver.best_objective_bound if found else None,
        "wall_s": round(time.perf_counter() - started, 3),
    }


def _two_stages(
    problem: Problem,
    rm: ResidencyModel,
    rows: Rows,
    bound: int,
    budget: Budget,
    mutations: bool = True,
) -> tuple[Rows, int, bool, list[dict[str, Any]]]:
    """The whole-trace model: (rows, bound, proven, reports); without `mutations` the second
    stage is skipped (then the mutation level is not proven)."""
    reports = []
    best_served = _check(problem, rows)[1].total
    proven = best_served >= bound
    if not proven:
        rm.model.maximize(rm.served_expr())
        started = time.perf_counter()
        solver, name, got = budget.run(rm, max(0.01, budget.left() * STAGE1_SHARE), rows)
        reports.append(_report("served", name, solver, started))
        if got is not None:
            bound = min(bound, int(solver.best_objective_bound + 1e-6))
            total = _check(problem, got)[1].total
            if total < round(solver.objective_value):
                raise OracleModelMismatch(f"replay serves {total}, the model said more")
            if total > best_served:
                rows, best_served = got, total
        proven = name == "OPTIMAL" or best_served >= bound
    if not mutations:
        return rows, bound, False, reports
    rm.model.add(rm.served_expr() >= best_served)
    rm.model.minimize(rm.mutations_expr())
    started = time.perf_counter()
    solver, name, got = budget.run(rm, max(0.01, budget.left()), rows)
    reports.append(_report("mutations", name, solver, started))
    if got is not None and _check(problem, got)[1].total >= best_served:
        rows = got
    return rows, bound, proven and name == "OPTIMAL", reports


def solve_problem(
    problem: Problem, time_limit_s: float, deterministic: bool, *, mutations: bool = True
) -> OracleResult:
    """`mutations=False`: served only (the mutation stage and the window search's are skipped;
    the status is then FEASIBLE), for callers that read only served, e.g. the graduate gate."""
    started = time.perf_counter()
    budget = Budget(time_limit_s, deterministic)
    greedy_rows = best_greedy(problem)
    greedy_plan, greedy = _check(problem, greedy_rows)
    hint_rows = tidy(problem, greedy_rows)  # the baseline stays the plain greedy schedule
    if _check(problem, hint_rows)[1].total < greedy.total:
        hint_rows = greedy_rows
    hint_rows = _ordered_for_symmetry(problem, hint_rows)
    bound = static_bound(problem)
    if greedy.total >= bound:  # the greedy already serves all that could be ready: proven
        caps = [sum(series[t] for series in problem.demand) for t in range(problem.minutes)]
    else:
        caps = minute_bounds(problem)
        bound = min(bound, sum(caps), coupled_bounds(problem, caps))
    cells = len(problem.pairs()) * problem.minutes
    if cells <= FULL_MODEL_CELLS:
        rm = ResidencyModel(problem)
        rm.add_minute_caps(caps)
        rows, bound, proven, reports = _two_stages(problem, rm, hint_rows, bound, budget, mutations)
    else:
        rows, reports = window_search(problem, hint_rows, caps, budget)
        proven = False  # windows never prove the mutation level
    schedule, final = _check(problem, rows)
    tidied, after = _check(problem, tidy(problem, rows))
    if (after.total, -after.mutations) > (final.total, -final.mutations):
        schedule, final = tidied, after
    if final.total < greedy.total:  # cannot happen: every accepted step only improves
        schedule, final = greedy_plan, greedy
    engine = "greedy" if schedule == greedy_plan else "cp-sat"
    scale = problem.scale
    return OracleResult(
        status="OPTIMAL" if proven else "FEASIBLE",
        served=final.total / scale,
        demand=sum(map(sum, problem.demand)) / scale,
        bound=max(bound, final.total) / scale,
        mutations=final.mutations,
        schedule=schedule,
        wall_s=round(time.perf_counter() - started, 3),
        engine=engine,
        greedy_served=greedy.total / scale,
        greedy_mutations=greedy.mutations,
        stages=reports,
    )


def solve_oracle(
    trace: Trace, time_limit_s: float = 60.0, deterministic: bool = True
) -> OracleResult:
    """The hindsight optimum (or the best schedule and an honest bound) for a validated trace.

    `time_limit_s` covers both stages (wall seconds; with `deterministic`, CP-SAT deterministic
    time, so the same trace gives the same schedule on any machine load)."""
    return solve_problem(compile_trace(trace), time_limit_s, deterministic)
