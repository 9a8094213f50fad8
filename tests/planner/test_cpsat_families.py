"""Each CP-SAT constraint family alone: a tiny feasible and a tiny infeasible model.

Every model holds the candidate variables of a hand-written fleet and one family. "Feasible"
cases maximize the number of placements and check the optimum worked out by hand; "infeasible"
cases force a set of placements that the family must refuse. With a guard, the infeasibility
core must name the family and the host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from ortools.sat.python import cp_model

from grid.planner.cpsat.colocation import add_colocation
from grid.planner.cpsat.disk import add_disk
from grid.planner.cpsat.domains import add_domain_shortfall
from grid.planner.cpsat.memory import add_memory
from grid.planner.cpsat.replicas import add_replicas
from grid.planner.cpsat.slots import add_slots
from grid.planner.cpsat.variables import Guard, PlacementVars
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from tests.planner.fleets import host, model, resident, snapshot, want

pytestmark = pytest.mark.unit

Family = Callable[[cp_model.CpModel, PlacementVars, PlacementProblem, Guard | None], None]
NO_HEADROOM = {"memory_headroom_fraction": 0.0}


def _solver() -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    return solver


def most_placements(problem: PlacementProblem, family: Family) -> int:
    """The largest number of candidates the family lets us place at once."""
    model = cp_model.CpModel()
    xs = PlacementVars(model, problem)
    family(model, xs, problem, None)
    model.maximize(cp_model.LinearExpr.sum(list(xs.x.values())))
    solver = _solver()
    assert solver.solve(model) == cp_model.OPTIMAL
    return round(solver.objective_value)


def forced(
    problem: PlacementProblem, family: Family, keys: Iterable[tuple[str, str]]
) -> tuple[str, list[tuple[str, str]]]:
    """Status of forcing these placements under the guarded family, and the core's literals."""
    model = cp_model.CpModel()
    guard = Guard(model)
    xs = PlacementVars(model, problem)
    family(model, xs, problem, guard)
    for key in keys:
        model.add(xs.x[key] == 1)
    model.add_assumptions(list(guard.literals.values()))
    solver = _solver()
    status = solver.solve(model)
    core = [guard.describe(i) for i in solver.sufficient_assumptions_for_infeasibility()]
    return solver.status_name(status), sorted(c for c in core if c is not None)


# ----------------------------------------------------------------------------- memory


def test_memory_footprint_counts_unmanaged_inventory_first() -> None:
    # 10,000 MB less a 2,000 MB external engine leaves 8,000 MB: a (5,000) or b (4,000), not both
    snap = snapshot(
        [host("h", 10000, residencies=[resident("ext", 2000, managed=False)])],
        [model("a", 5000), model("b", 4000)],
        {"a": want(1), "b": want(1)},
        NO_HEADROOM,
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_memory) == 1
    status, core = forced(problem, add_memory, [("a", "h"), ("b", "h")])
    assert status == "INFEASIBLE"
    assert ("memory", "h") in core


def test_memory_both_fit_without_the_external_engine() -> None:
    snap = snapshot(
        [host("h", 10000)],
        [model("a", 5000), model("b", 4000)],
        {"a": want(1), "b": want(1)},
        NO_HEADROOM,
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_memory) == 2
    assert forced(problem, add_memory, [("a", "h"), ("b", "h")])[0] == "OPTIMAL"


def test_live_memory_keeps_room_for_a_draining_process() -> None:
    # the draining 6,000 MB process is live until it is gone: new loads share the other 4,000
    snap = snapshot(
        [host("h", 10000, residencies=[resident("old", 6000, state="draining")])],
        [model("a", 3000), model("b", 3000), model("old", 6000, max_replicas=0)],
        {"a": want(1), "b": want(1)},
        NO_HEADROOM,
    )
    problem = build_problem(snap)
    assert problem.host_by_id["h"].footprint_budget_mb == 10000, "a managed drain is not fixed"
    assert most_placements(problem, add_memory) == 1
    status, core = forced(problem, add_memory, [("a", "h"), ("b", "h")])
    assert status == "INFEASIBLE"
    assert core == [("live_memory", "h")]


def test_an_incumbent_needs_no_new_memory() -> None:
    # a ready incumbent of 6,000 MB stays at zero incremental memory beside a new 3,000 MB load
    snap = snapshot(
        [host("h", 10000, residencies=[resident("kept", 6000)])],
        [model("kept", 6000), model("a", 3000)],
        {"kept": want(1), "a": want(1)},
        NO_HEADROOM,
    )
    problem = build_problem(snap)
    assert forced(problem, add_memory, [("kept", "h"), ("a", "h")])[0] == "OPTIMAL"


# ----------------------------------------------------------------------------- slots


def test_slots_cap_the_number_of_models() -> None:
    snap = snapshot(
        [host("h", 64000, max_models=2)],
        [model("a"), model("b"), model("c")],
        {"a": want(1), "b": want(1), "c": want(1)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_slots) == 2
    status, core = forced(problem, add_slots, [("a", "h"), ("b", "h"), ("c", "h")])
    assert status == "INFEASIBLE"
    assert core == [("slots", "h")]


def test_live_slots_count_a_draining_model() -> None:
    # two slots, one still held by a draining model: one new model may start now
    snap = snapshot(
        [host("h", 64000, max_models=2, residencies=[resident("old", 1000, state="draining")])],
        [model("a"), model("b"), model("old", max_replicas=0)],
        {"a": want(1), "b": want(1)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_slots) == 1


# ----------------------------------------------------------------------------- colocation


def test_an_exclusive_model_takes_its_host_alone() -> None:
    snap = snapshot(
        [host("h", 64000)],
        [model("solo", max_colocated_models=1), model("b"), model("c")],
        {"solo": want(1), "b": want(1), "c": want(1)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_colocation) == 2, "b and c together beat solo alone"
    status, core = forced(problem, add_colocation, [("solo", "h"), ("b", "h")])
    assert status == "INFEASIBLE"
    assert core == [("colocation", "h")]
    assert forced(problem, add_colocation, [("solo", "h")])[0] == "OPTIMAL"


def test_a_ceiling_of_two_allows_one_peer() -> None:
    snap = snapshot(
        [host("h", 64000)],
        [model("pair", max_colocated_models=2), model("b"), model("c")],
        {"pair": want(1), "b": want(1), "c": want(1)},
    )
    problem = build_problem(snap)
    assert forced(problem, add_colocation, [("pair", "h"), ("b", "h")])[0] == "OPTIMAL"
    assert forced(problem, add_colocation, [("pair", "h"), ("b", "h"), ("c", "h")])[0] == (
        "INFEASIBLE"
    )


def test_exclusions_are_reciprocal() -> None:
    # declared by b only, it still keeps a away from b
    snap = snapshot(
        [host("h", 64000)],
        [model("a"), model("b", colocation_excludes=["a"]), model("c")],
        {"a": want(1), "b": want(1), "c": want(1)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_colocation) == 2
    status, core = forced(problem, add_colocation, [("a", "h"), ("b", "h")])
    assert status == "INFEASIBLE"
    assert core == [("colocation_exclusion", "h")]


# ----------------------------------------------------------------------------- disk


def test_disk_is_cumulative_for_uncached_artifacts() -> None:
    snap = snapshot(
        [host("h", 64000, disk_free_mb=5000)],
        [model("a", artifact_size_mb=3000), model("b", artifact_size_mb=3000)],
        {"a": want(1), "b": want(1)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_disk) == 1
    status, core = forced(problem, add_disk, [("a", "h"), ("b", "h")])
    assert status == "INFEASIBLE"
    assert core == [("disk", "h")]


def test_cached_weights_and_unknown_disk_cost_nothing() -> None:
    cached = snapshot(
        [host("h", 64000, disk_free_mb=5000, cached_models=["a"])],
        [model("a", artifact_size_mb=3000), model("b", artifact_size_mb=3000)],
        {"a": want(1), "b": want(1)},
    )
    assert most_placements(build_problem(cached), add_disk) == 2
    unknown = snapshot(
        [host("h", 64000)],
        [model("a", artifact_size_mb=3000), model("b", artifact_size_mb=3000)],
        {"a": want(1), "b": want(1)},
    )
    assert most_placements(build_problem(unknown), add_disk) == 2


# ----------------------------------------------------------------------------- replicas


def test_replicas_never_exceed_the_open_count() -> None:
    snap = snapshot(
        [host("h1"), host("h2"), host("h3")],
        [model("a", max_replicas=3)],
        {"a": want(2)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_replicas) == 2
    status, core = forced(problem, add_replicas, [("a", "h1"), ("a", "h2"), ("a", "h3")])
    assert status == "INFEASIBLE"
    assert core == [("replicas", "a")]


def test_a_pin_to_a_missing_host_is_never_substituted() -> None:
    snap = snapshot(
        [host("h1"), host("h2")],
        [model("a", pinned_hosts=["gone"])],
    )
    problem = build_problem(snap)
    assert problem.targets["a"].desired == 1, "the pin asks for one replica"
    assert len(problem.candidates) == 2, "both present hosts are eligible"
    assert most_placements(problem, add_replicas) == 0


def test_replicas_beyond_the_pins_may_go_anywhere() -> None:
    snap = snapshot(
        [host("h1"), host("h2"), host("h3")],
        [model("a", max_replicas=3, pinned_hosts=["h1"])],
        {"a": want(2)},
    )
    problem = build_problem(snap)
    assert most_placements(problem, add_replicas) == 2
    assert forced(problem, add_replicas, [("a", "h2"), ("a", "h3")])[0] == "INFEASIBLE"
    assert forced(problem, add_replicas, [("a", "h1"), ("a", "h3")])[0] == "OPTIMAL"


# ----------------------------------------------------------------------------- domains


def _least_shortfall(problem: PlacementProblem, replicas: int) -> int:
    model = cp_model.CpModel()
    xs = PlacementVars(model, problem)
    shortfall = add_domain_shortfall(model, xs, problem)
    model.add(xs.replica_count("a") == replicas)
    model.minimize(shortfall)
    solver = _solver()
    assert solver.solve(model) == cp_model.OPTIMAL
    return round(solver.objective_value)


def test_domains_spread_when_a_second_domain_is_eligible() -> None:
    snap = snapshot(
        [
            host("h1", failure_domain="rack-a"),
            host("h2", failure_domain="rack-a"),
            host("h3", failure_domain="rack-b"),
        ],
        [model("a", max_replicas=2, min_failure_domains=2)],
        {"a": want(2)},
    )
    assert _least_shortfall(build_problem(snap), 2) == 0


def test_domain_shortfall_when_one_domain_holds_every_candidate() -> None:
    snap = snapshot(
        [
            host("h1", failure_domain="rack-a", tags=["gpu"]),
            host("h2", failure_domain="rack-a", tags=["gpu"]),
            host("h3", failure_domain="rack-b"),
        ],
        [model("a", max_replicas=2, min_failure_domains=2, required_tags=["gpu"])],
        {"a": want(2)},
    )
    problem = build_problem(snap)
    assert _least_shortfall(problem, 2) == 1
    assert _least_shortfall(problem, 1) == 0, "one replica asks for one domain only"
