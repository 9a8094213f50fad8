"""Turn a staged placement into the Plan document (shared by every engine; pipeline.py's
explain phase): the assignments (fixed replicas and placed candidates with their reasons),
every level's value and bound on the final placement, an explanation of every unmet replica.
Staging (preemption.py) and the workload portfolio (portfolio/attach.py) are phases of their
own, before and after this one.
"""

from __future__ import annotations

from grid.fleet import (
    Assignment,
    LevelValue,
    Plan,
    Preemption,
    ResidencyState,
    SolverReport,
)
from grid.planner.cpsat import static_bounds
from grid.planner.deadline import SHORTENED_NOTE, SUMMARISED_NOTE, Deadline
from grid.planner.explain import explain_unsatisfied
from grid.planner.levels import levels, score_placement
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]


def _reasons(problem: PlacementProblem, key: Key) -> list[str]:
    cand = problem.candidates[key]
    reasons: list[str] = []
    if cand.pinned:
        reasons.append("pinned host")
    if cand.incumbent is ResidencyState.READY:
        reasons.append("ready incumbent")
    elif cand.incumbent is not None:
        reasons.append(f"{cand.incumbent.value} incumbent")
    elif cand.cached:
        reasons.append("cached weights")
    else:
        reasons.append("cold load")
    return reasons


def assignments_of(problem: PlacementProblem, placed: set[Key]) -> list[Assignment]:
    """The fixed (unmanaged) replicas plus the placed candidates, with their reasons."""
    assignments = [
        Assignment(
            model_id=f.model_id,
            host_id=f.host_id,
            memory_mb=f.memory_mb,
            runtime=f.runtime,
            existing=True,
            reasons=["unmanaged ready residency"],
        )
        for f in problem.fixed
    ]
    for key in sorted(placed):
        cand = problem.candidates[key]
        assignments.append(
            Assignment(
                model_id=cand.model_id,
                host_id=cand.host_id,
                memory_mb=cand.memory_mb,
                runtime=cand.runtime,
                existing=cand.incumbent is not None,
                reasons=_reasons(problem, key),
            )
        )
    return assignments


def _with_shortened(
    message: str, deadline: Deadline | None, *, unsatisfied_count: int, summarised: int = 0
) -> str:
    if not (unsatisfied_count or summarised) or deadline is None:
        return message
    notes = []
    if unsatisfied_count:
        notes.append(f"{unsatisfied_count} explanation(s) shortened to the static ledger")
    if summarised:
        notes.append(f"{summarised} explanation(s) summarised from a sample of hosts")
    note = f"{' and '.join(notes)}: the time limit of {deadline.limit_s:g} s was reached"
    return f"{message} {note}".strip()


def plan_document(
    problem: PlacementProblem,
    staged: tuple[list[Preemption], set[Key]],
    *,
    engine: str,
    status: str,
    wall_ms: float,
    bounds: dict[str, int] | None = None,
    message: str = "",
    deadline: Deadline | None = None,
    values: dict[str, int] | None = None,
    explain_floor_s: float = 0.0,
) -> Plan:
    """The Plan document of a staged placement (`staged`: stage_changes' preemptions and
    final placement): assignments, every level's value and bound, explanations. `values`:
    score_placement of the final placement when the caller has it (0.2 s at 10,000 hosts);
    `deadline`: the command's budget, which shortens explanations once it has run out (and
    the message says so), and summarises them once it leaves only `explain_floor_s`."""
    preemptions, final = staged
    assignments = assignments_of(problem, final)
    values = values if values is not None else score_placement(problem, final)
    bounds = bounds if bounds is not None else static_bounds(problem)  # capacity-blind
    objective = []
    for level in levels(problem):
        value = values.get(level.name, 0)
        bound = bounds.get(level.name, value)
        # A bound never claims less than the plan achieves (max) or more (min).
        bound = max(bound, value) if level.sense == "max" else min(bound, value)
        objective.append(LevelValue(level=level.name, value=value, bound=bound))
    unsatisfied = explain_unsatisfied(problem, final, preemptions, deadline, explain_floor_s)
    plan = Plan(
        assignments=sorted(assignments, key=lambda a: (a.host_id, a.model_id)),
        desired_replicas={m.model_id: problem.targets[m.model_id].desired for m in problem.models},
        unsatisfied=unsatisfied,
        preemptions=preemptions,
        solver=SolverReport(
            engine=engine,
            status=status,
            wall_ms=round(wall_ms, 1),
            objective=objective,
            message=message,
        ),
    )
    shortened = sum(1 for u in plan.unsatisfied if SHORTENED_NOTE in u.message)
    summarised = sum(1 for u in plan.unsatisfied if SUMMARISED_NOTE in u.message)
    if shortened or summarised:
        plan.solver.message = _with_shortened(
            message, deadline, unsatisfied_count=shortened, summarised=summarised
        )
    return plan
