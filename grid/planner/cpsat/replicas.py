"""Replica bounds per model: at most the open replicas, and pins are never substituted.

    Σ_h x[m,h]                        ≤ open(m) = desired(m) − fixed(m)
    Σ_{h ∉ pins(m)} x[m,h]            ≤ desired(m) − |pins(m)| − fixed replicas off the pins

The second line reserves one replica for each pinned host: a pin that cannot be honoured
(missing, not admitting or full host) is reported, never moved to another host.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.allowance import pinned_hosts, unpinned_allowance
from grid.planner.cpsat.variables import Guard, PlacementVars, guarded
from grid.planner.problem import PlacementProblem

FAMILY = "replicas"


def add_replicas(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None = None,
) -> None:
    for model_id in xs.models():
        keys = xs.keys_of_model(model_id)
        outside = xs.outside_count(model_id)
        room = problem.open_replicas(model_id) - outside
        if len(keys) > room:
            guarded(model.add(xs.total(keys) <= room), guard, FAMILY, model_id)
        pins = pinned_hosts(problem, model_id)
        if not pins:
            continue
        unpinned = [k for k in keys if k[1] not in pins]
        outside_unpinned = sum(1 for m, h in xs.outside if m == model_id and h not in pins)
        allowance = unpinned_allowance(problem, model_id) - outside_unpinned
        if len(unpinned) > allowance:
            guarded(model.add(xs.total(unpinned) <= allowance), guard, FAMILY, model_id)
