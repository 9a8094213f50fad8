"""Model slots per host (problem.py's caps: max_models and the ceilings of fixed/live models).

    desired models   Σ_m x[m,h]     ≤ desired_cap(h)
    new models       Σ_new x[m,h]   ≤ new_cap(h)
Both are the family `slots`; a cap that every candidate fits at once is left out.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Guard, PlacementVars, guarded
from grid.planner.problem import PlacementProblem

FAMILY = "slots"


def add_slots(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None = None,
) -> None:
    for host_id in xs.hosts():
        budget = problem.host_by_id[host_id]
        keys = xs.keys_on_host(host_id)
        if budget.desired_cap is not None and len(keys) > budget.desired_cap:
            count = xs.host_count(host_id)
            guarded(model.add(count <= budget.desired_cap), guard, FAMILY, host_id)
        new_keys = xs.new_keys_on_host(host_id)
        if budget.new_cap is not None and len(new_keys) > budget.new_cap:
            count = xs.host_count(host_id, new_only=True)
            guarded(model.add(count <= budget.new_cap), guard, FAMILY, host_id)
