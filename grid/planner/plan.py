"""The planner's entry point: (snapshot) -> Plan, with either engine (pure but for timing).

`make_plan` checks its arguments and runs the declared pipeline (pipeline.py: PHASES, the only
place the phases' order lives) under one Deadline (deadline.py: the budget owner, with every
calibrated figure). `cpsat` is hinted with the incumbent placement, the heuristic's plan, that
plan improved by vacate moves and, on fleets whose hosts group into types, the host-type
model's placement, whose proven levels become the replica levels' bounds; when CP-SAT finds no
feasible solution within its budget the heuristic's plan is returned and `solver.status` says
so. Every plan has passed validate.py when it is returned. Wall time is read with the
deadline's monotonic clock, never the calendar.
"""

from __future__ import annotations

from typing import Literal

from grid.fleet import FleetSnapshot, GridError, Plan
from grid.planner.deadline import Deadline
from grid.planner.gcpause import gc_paused
from grid.planner.pipeline import Run, run_phases
from grid.planner.prefetch import attach_prefetch
from grid.planner.problem import PlacementProblem
from grid.planner.targets import Target

Engine = Literal["cpsat", "heuristic"]
ENGINES = ("cpsat", "heuristic")


def incumbent_placement(problem: PlacementProblem) -> set[tuple[str, str]]:
    """Keys of every incumbent candidate (a hint, not necessarily feasible)."""
    return {(cand.model_id, cand.host_id) for cand in problem.incumbent_candidates}


def make_plan(
    snap: FleetSnapshot,
    *,
    engine: str = "cpsat",
    time_limit_s: float = 5.0,
    deterministic: bool = False,
    targets: dict[str, Target] | None = None,
    soft_stage_limit_s: float | None = None,
    deadline: Deadline | None = None,
) -> Plan:
    """`deadline`: the whole command's budget when the caller started it earlier (the CLI
    starts it before loading the snapshot); else `time_limit_s` from now."""
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
    run = Run(
        snap,
        engine,
        deadline if deadline is not None else Deadline(time_limit_s),
        deterministic=deterministic,
        targets=targets,
        soft_stage_limit_s=soft_stage_limit_s,
    )
    with gc_paused():
        plan = run_phases(run)
    # The predictive cache's advisories belong to the authoritative plan only (issue 23).
    return attach_prefetch(snap, plan)
