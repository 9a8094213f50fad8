"""Both memory ledgers of problem.py, per host.

    desired footprint   Σ_m mem(m,h)·x[m,h]      ≤ allocatable(h) − fixed_mb(h)          (memory)
    make-before-break   Σ_new new_mb(m,h)·x[m,h] ≤ allocatable(h) − live_mb(h) − headroom(h)
                                                                                   (live_memory)
A ledger whose every candidate fits at once is left out: it cannot bind.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Guard, PlacementVars, guarded
from grid.planner.problem import PlacementProblem

FOOTPRINT = "memory"
LIVE = "live_memory"


def add_memory(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None = None,
) -> None:
    for host_id in xs.hosts():
        budget = problem.host_by_id[host_id]
        keys = xs.keys_on_host(host_id)
        sizes = {k: problem.candidates[k].memory_mb for k in keys}
        if sum(sizes.values()) > budget.footprint_budget_mb:
            total = xs.total(keys, sizes.__getitem__)
            guarded(model.add(total <= budget.footprint_budget_mb), guard, FOOTPRINT, host_id)
        new_keys = [k for k in xs.new_keys_on_host(host_id) if problem.candidates[k].new_mb > 0]
        new_sizes = {k: problem.candidates[k].new_mb for k in new_keys}
        if sum(new_sizes.values()) > budget.new_budget_mb:
            total = xs.total(new_keys, new_sizes.__getitem__)
            guarded(model.add(total <= budget.new_budget_mb), guard, LIVE, host_id)
