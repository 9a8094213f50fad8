"""Cumulative artifact disk per host whose free disk is known.

    Σ_{new, uncached} artifact(m)·x[m,h] ≤ disk_free(h)
Candidates with cached weights or a live incumbent carry disk_mb = 0 and never count.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Guard, PlacementVars, guarded
from grid.planner.problem import PlacementProblem

FAMILY = "disk"


def add_disk(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None = None,
) -> None:
    for host_id in xs.hosts():
        free = problem.host_by_id[host_id].disk_free_mb
        if free is None:
            continue
        keys = [k for k in xs.keys_on_host(host_id) if problem.candidates[k].disk_mb > 0]
        sizes = {k: problem.candidates[k].disk_mb for k in keys}
        if sum(sizes.values()) > free:
            total = xs.total(keys, sizes.__getitem__)
            guarded(model.add(total <= free), guard, FAMILY, host_id)
