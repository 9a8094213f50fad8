"""Assemble the hard constraints of a placement model from the constraint families."""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.colocation import add_colocation
from grid.planner.cpsat.disk import add_disk
from grid.planner.cpsat.gpus import add_gpus
from grid.planner.cpsat.memory import add_memory
from grid.planner.cpsat.replicas import add_replicas
from grid.planner.cpsat.slots import add_slots
from grid.planner.cpsat.variables import Guard, PlacementVars
from grid.planner.problem import PlacementProblem

HOST_FAMILIES = (
    "memory", "live_memory", "slots", "colocation", "colocation_exclusion", "disk", "gpu",
)  # fmt: skip


def add_hard_constraints(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    *,
    host_guard: Guard | None = None,
    replica_guard: Guard | None = None,
) -> None:
    """Every hard constraint over xs; host families (and replica bounds) may be guarded."""
    add_memory(model, xs, problem, host_guard)
    add_slots(model, xs, problem, host_guard)
    add_colocation(model, xs, problem, host_guard)
    add_disk(model, xs, problem, host_guard)
    add_gpus(model, xs, problem, host_guard)
    add_replicas(model, xs, problem, replica_guard)
