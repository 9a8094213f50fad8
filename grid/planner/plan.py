"""The planner's entry point: (snapshot) -> Plan, with either engine (pure but for timing).

`cpsat` is hinted with the incumbent placement and the heuristic's plan; when it finds no
feasible solution within its budget the heuristic's plan is returned and `solver.status`
says so. Wall time is measured with a monotonic counter only for the report.
"""

from __future__ import annotations

import time
from typing import Literal

from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.assemble import assemble_plan
from grid.planner.heuristic import heuristic_placement
from grid.planner.levels import compare, score_placement
from grid.planner.preemption import stage_changes
from grid.planner.problem import PlacementProblem, build_problem
from grid.planner.targets import Target

Engine = Literal["cpsat", "heuristic"]
Key = tuple[str, str]
ENGINES = ("cpsat", "heuristic")


def incumbent_placement(problem: PlacementProblem) -> set[tuple[str, str]]:
    """Keys of every incumbent candidate (a hint, not necessarily feasible)."""
    return {key for key, cand in problem.candidates.items() if cand.incumbent is not None}


def make_plan(
    snap: FleetSnapshot,
    *,
    engine: str = "cpsat",
    time_limit_s: float = 5.0,
    deterministic: bool = False,
    targets: dict[str, Target] | None = None,
    soft_stage_limit_s: float | None = None,
) -> Plan:
    if engine not in ENGINES:
        raise GridError(
            "unknown_engine",
            f"engine {engine!r} is not one of {', '.join(ENGINES)}",
            fix="use --engine cpsat or --engine heuristic",
        )
    if not time_limit_s > 0:
        raise GridError(
            "invalid_time_limit",
            f"time limit {time_limit_s} must be a positive number of seconds",
            fix="pass --time-limit with a value such as 2.5",
        )
    started = time.perf_counter()
    problem = build_problem(snap, targets)
    greedy = heuristic_placement(problem)
    if engine == "heuristic":
        wall = (time.perf_counter() - started) * 1000
        return assemble_plan(problem, greedy, engine="heuristic", status="HEURISTIC", wall_ms=wall)

    from grid.planner.cpsat.solve import solve_lexicographic

    remaining = max(0.05, time_limit_s - (time.perf_counter() - started))
    result = solve_lexicographic(
        problem,
        hints=[greedy, incumbent_placement(problem)],
        time_limit_s=remaining,
        deterministic=deterministic,
        soft_stage_limit_s=soft_stage_limit_s,
    )
    wall = (time.perf_counter() - started) * 1000
    if result.placed is None:
        return assemble_plan(
            problem,
            greedy,
            engine="heuristic",
            status="HEURISTIC_FALLBACK",
            wall_ms=wall,
            message=result.message or "CP-SAT found no feasible solution within the time limit",
        )
    placed, message = result.placed, result.message
    if placed != greedy and _after_preemption_better(problem, greedy, placed):
        # Staged evictions depend on where everything else sits: a solver placement that is
        # at least as good before staging can lose replicas to a larger victim set after it.
        placed = greedy
        message = (message + " " if message else "") + (
            "kept the heuristic's placement: it needs fewer evictions once preemption is staged"
        )
    return assemble_plan(
        problem,
        placed,
        engine="cp-sat",
        status=result.status,
        wall_ms=(time.perf_counter() - started) * 1000,
        bounds=result.bounds,
        message=message,
    )


def _after_preemption_better(
    problem: PlacementProblem, candidate: set[Key], incumbent: set[Key]
) -> bool:
    """Is `candidate` lexicographically better than `incumbent` once victims leave the plan?"""

    def final_values(placed: set[Key]) -> dict[str, int]:
        _preemptions, final = stage_changes(problem, placed)
        return score_placement(problem, final)

    return compare(problem, final_values(candidate), final_values(incumbent)) > 0
