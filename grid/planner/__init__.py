"""The planner: (snapshot, now) -> Plan (pure). The face: `make_plan`, the problem it builds,
the eligibility filters with their reason texts, targets, the deadline and the plan validator.
The CP-SAT engine has its own face (grid.planner.cpsat). Names are imported on first use
(grid/fleet/faces.py), so importing the face loads no OR-Tools.
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.planner.deadline import Deadline, output_reserve_s, rich_output_s
    from grid.planner.eligibility import REASON_TEXT, explain_reasons, host_refusals, pair_refusals
    from grid.planner.gcpause import freeze_for_exit
    from grid.planner.plan import make_plan
    from grid.planner.preemption_rules import eviction_authority, victim_fence
    from grid.planner.problem import PlacementProblem, allocatable_mb
    from grid.planner.problem_build import build_problem
    from grid.planner.targets import Target, compute_targets
    from grid.planner.vacate import vacate_improve
    from grid.planner.validate import violations

# module -> the names it gives the face, separated by spaces
_EXPORTS: dict[str, str] = {
    "grid.planner.deadline": "Deadline output_reserve_s rich_output_s",
    "grid.planner.eligibility": "REASON_TEXT explain_reasons host_refusals pair_refusals",
    "grid.planner.gcpause": "freeze_for_exit",
    "grid.planner.plan": "make_plan",
    "grid.planner.preemption_rules": "eviction_authority victim_fence",
    "grid.planner.problem": "PlacementProblem allocatable_mb",
    "grid.planner.problem_build": "build_problem",
    "grid.planner.targets": "Target compute_targets",
    "grid.planner.vacate": "vacate_improve",
    "grid.planner.validate": "violations",
}

__all__ = [
    "REASON_TEXT",
    "Deadline",
    "PlacementProblem",
    "Target",
    "allocatable_mb",
    "build_problem",
    "compute_targets",
    "eviction_authority",
    "explain_reasons",
    "freeze_for_exit",
    "host_refusals",
    "make_plan",
    "output_reserve_s",
    "pair_refusals",
    "rich_output_s",
    "vacate_improve",
    "victim_fence",
    "violations",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
