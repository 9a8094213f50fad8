"""Acceptance: CP-SAT plans equal an independent reference optimum on the replica levels.

The reference (`tests/planner/reference.py`) re-derives the hard constraints and replica levels
and solves them with HiGHS, one level at a time. On 30 seeded clean fleets every `cpsat` plan
must be valid and reach the reference value of every replica level; every `heuristic` plan must
be valid and can never beat the reference. Hand-checked tiny cases pin the reference itself.
"""

from __future__ import annotations

import pytest

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.levels import compare, levels, score_placement
from grid.planner.plan import make_plan
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.planner.reference import harm_order, reference_optimum, reference_plan
from tests.planner.strategies import clean_fleet

pytestmark = pytest.mark.unit

SEEDS = range(30)


def _variable_pairs(problem: PlacementProblem, plan: Plan) -> set[tuple[str, str]]:
    fixed = {(f.model_id, f.host_id) for f in problem.fixed}
    return {(a.model_id, a.host_id) for a in plan.assignments} - fixed


def _replica_values(problem: PlacementProblem, values: dict[str, int]) -> dict[str, int]:
    return {lvl.name: values[lvl.name] for lvl in levels(problem) if lvl.replica_level}


# ------------------------------------------------------------------- the reference, by hand


def test_reference_max_min_fair_rounds() -> None:
    # three hosts that each take one 4 GB replica; two equal models each want three
    snap = snapshot(
        [host("h1", 5000), host("h2", 5000), host("h3", 5000)],
        [model("a", 4000, max_replicas=3), model("b", 4000, max_replicas=3)],
        {"a": want(3), "b": want(3)},
    )
    ref = reference_optimum(build_problem(snap))
    assert ref.values["p0:direct:1"] == 2, "both models get a first replica"
    assert ref.values["p0:direct:2"] == 1, "the third slot goes to a second replica"
    assert ref.values["p0:direct:3"] == 0
    # equal harm: the lower model ID wins the tie (harm rank 1 of 0..1)
    assert ref.values["p0:direct:2:harm"] == 1
    assert sorted(m for m, _h in ref.placement).count("a") == 2


def test_reference_harm_breaks_the_incomplete_round() -> None:
    snap = snapshot(
        [host("h1", 5000), host("h2", 5000), host("h3", 5000)],
        [model("a", 4000, max_replicas=3), model("b", 4000, max_replicas=3)],
        {"a": want(3), "b": want(3, queue_depth=4)},
    )
    ref = reference_optimum(build_problem(snap))
    assert sorted(m for m, _h in ref.placement).count("b") == 2


def test_reference_pins_before_priority_and_baseline_before_demand() -> None:
    snap = snapshot(
        [host("h1", 5000), host("h2", 5000)],
        [
            model("pinned-low", 4000, priority=0, pinned_hosts=["h1"]),
            model("vip", 4000, priority=100, max_replicas=2, allowed_hosts=["h1"]),
            model("base", 4000, priority=50, min_replicas=1),
            model("asked", 4000, priority=50),
        ],
        {"vip": want(2), "asked": want(1)},
    )
    ref = reference_optimum(build_problem(snap))
    assert ref.values["pinned"] == 1
    assert ref.values["p100:direct:1"] == 0, "the only host vip may use is pinned"
    assert ref.values["p50:baseline:1"] == 1
    assert ref.values["p50:direct:1"] == 0, "the baseline took the last free host"
    assert ref.placement == {("pinned-low", "h1"), ("base", "h2")}


def test_reference_respects_disk_exclusions_ceilings_and_slots() -> None:
    snap = snapshot(
        [
            host("disk", 20_000, disk_free_mb=5000),
            host("slots", 20_000, max_models=1),
            host("alone", 20_000),
        ],
        [
            model("a", 2000, artifact_size_mb=3000, max_replicas=3),
            model("b", 2000, artifact_size_mb=3000, max_replicas=3, colocation_excludes=["c"]),
            model("c", 2000, max_replicas=3, max_colocated_models=1),
        ],
        {"a": want(3), "b": want(3), "c": want(3)},
    )
    ref = reference_optimum(build_problem(snap))
    by_host: dict[str, set[str]] = {}
    for m, h in ref.placement:
        by_host.setdefault(h, set()).add(m)
    assert len(by_host.get("slots", set())) <= 1
    assert not {"a", "b"} <= by_host.get("disk", set()), "6,000 MB of artifacts on 5,000 free"
    for occupants in by_host.values():
        assert not {"b", "c"} <= occupants
        assert "c" not in occupants or occupants == {"c"}
    # Round 1 places a, b and c. Round 2 reaches only one model: c is exclusive, so two c's
    # leave one host for a and b; two a's and two b's must share two hosts besides c's, and
    # neither "slots" (one model) nor "disk" (6,000 MB of artifacts on 5,000) takes both.
    assert ref.values["p0:direct:1"] == 3
    assert ref.values["p0:direct:2"] == 1
    assert ref.values["p0:direct:2:harm"] == 2, "equal harm: a (rank 2 of 0..2) gets it"


def test_reference_uses_the_smaller_runtime_footprint() -> None:
    snap = snapshot(
        [host("h1", 10_000, runtimes=["llama.cpp", "vllm"])],
        [
            model("a", 7000, runtimes=["llama.cpp", "vllm"], runtime_memory_mb={"vllm": 4000}),
            model("b", 5000),
        ],
        {"a": want(1), "b": want(1)},
    )
    ref = reference_optimum(build_problem(snap))
    assert ref.values["p0:direct:1"] == 2, "4,000 + 5,000 fits 9,500; 7,000 + 5,000 would not"


def test_reference_harm_order_matches_the_problem() -> None:
    snap = snapshot(
        [host("h1")],
        [model(m, latency_slo_ms=1000.0) for m in ("c", "b", "a", "d")],
        {
            "a": want(1, queue_depth=1),
            "b": want(1, p95_ms=2500.0),
            "c": want(1, p95_ms=2500.0),
            "d": want(1, rpm=3),
        },
    )
    assert harm_order(snap) == {"d": 0, "c": 1, "b": 2, "a": 3}
    assert build_problem(snap).harm_rank == harm_order(snap)


def test_harm_tie_goes_to_the_lower_model_id_even_for_prefixes() -> None:
    # "a" < "ab": with equal harm "a" must rank higher (problem.py documents this rule)
    snap = snapshot([host("h1")], [model("a"), model("ab")], {"a": want(1), "ab": want(1)})
    assert harm_order(snap) == {"ab": 0, "a": 1}
    assert build_problem(snap).harm_rank == harm_order(snap)


@pytest.mark.parametrize("seed", range(10))
def test_reference_placement_is_valid_and_scores_its_values(seed: int) -> None:
    """The two independent encodings (reference MILP, validator + scorer) agree."""
    snap = clean_fleet(seed)
    problem = build_problem(snap)
    ref = reference_optimum(problem)
    assert list(ref.values) == [lvl.name for lvl in levels(problem) if lvl.replica_level]
    assert violations(snap, reference_plan(problem, ref.placement)) == []
    assert _replica_values(problem, score_placement(problem, ref.placement)) == ref.values


def test_generated_fleets_are_tight() -> None:
    """Most generated fleets cannot place every replica their candidates could take."""
    tight = 0
    for seed in SEEDS:
        problem = build_problem(clean_fleet(seed))
        reachable = sum(
            min(problem.targets[m.model_id].desired, len(problem.candidates_of_model(m.model_id)))
            for m in problem.models
        )
        tight += len(reference_optimum(problem).placement) < reachable
    assert tight >= 20


# ------------------------------------------------------------------- the engines


def _cpsat(snap: FleetSnapshot) -> Plan:
    return make_plan(snap, engine="cpsat", deterministic=True, time_limit_s=10)


@pytest.mark.parametrize("seed", SEEDS)
def test_cpsat_reaches_the_reference_optimum(seed: int) -> None:
    snap = clean_fleet(seed)
    problem = build_problem(snap)
    ref = reference_optimum(problem)
    plan = _cpsat(snap)
    assert violations(snap, plan) == []
    assert plan.solver.engine == "cp-sat", plan.solver.message
    achieved = _replica_values(problem, score_placement(problem, _variable_pairs(problem, plan)))
    assert achieved == ref.values
    reported = {lv.level: lv.value for lv in plan.solver.objective}
    assert {name: reported[name] for name in ref.values} == ref.values


@pytest.mark.parametrize("seed", SEEDS)
def test_heuristic_is_valid_and_never_beats_the_reference(seed: int) -> None:
    snap = clean_fleet(seed)
    problem = build_problem(snap)
    plan = make_plan(snap, engine="heuristic")
    assert violations(snap, plan) == []
    values = score_placement(problem, _variable_pairs(problem, plan))
    ref = reference_optimum(problem)
    assert compare(problem, values, ref.values, replica_levels_only=True) <= 0
