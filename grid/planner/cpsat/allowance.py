"""The replica bounds' pin reservation, in plain Python (pure): no OR-Tools import, so the
capacity-blind bounds (bounds.py) and the plan document of a heuristic plan load none."""

from __future__ import annotations

from grid.planner.problem import PlacementProblem


def pinned_hosts(problem: PlacementProblem, model_id: str) -> frozenset[str]:
    return frozenset(problem.model_by_id[model_id].pinned_hosts)


def unpinned_allowance(problem: PlacementProblem, model_id: str) -> int:
    """How many variable placements the model may have away from its pinned hosts."""
    pins = pinned_hosts(problem, model_id)
    fixed_off_pins = sum(
        1 for f in problem.fixed if f.model_id == model_id and f.host_id not in pins
    )
    return max(0, problem.targets[model_id].desired - len(pins) - fixed_off_pins)
