"""The staged-preemption reference itself: it accepts a hand-worked valid transition and
names each broken rule of a tampered one (so the property test's check can fail)."""

from __future__ import annotations

import pytest

from grid.fleet.models import Assignment, FleetSnapshot, Plan, Preemption, SolverReport
from grid.planner.plan import make_plan
from grid.planner.problem_build import build_problem
from tests.planner.fleets import NOW, host, model, resident, snapshot, want
from tests.planner.reference import reference_optimum
from tests.planner.reference_staged import (
    beneficiaries,
    level_values,
    staged_optimum,
    staged_problems,
)

pytestmark = pytest.mark.unit

OLD = NOW - 90_000


def _fleet(need_mb: int = 6000) -> FleetSnapshot:
    """`need` (priority 10, direct) fits h1 only once the idle `low` (priority 0) leaves."""
    return snapshot(
        [host("h1", 8192, residencies=[resident("low", 4000, loaded_at=OLD)])],
        [model("low", 4000, priority=0), model("need", need_mb, priority=10)],
        {"low": want(1), "need": want(1)},
        policy={"memory_headroom_fraction": 0.0},
    )


def _bare(*preemptions: Preemption) -> Plan:
    return Plan(
        preemptions=list(preemptions),
        solver=SolverReport(engine="test", status="", wall_ms=0.0),
    )


def _evict(plan: Plan, **changes: object) -> Plan:
    pre = Preemption(victim_model_id="low", host_id="h1", beneficiary_model_id="need")
    return plan.model_copy(update={"preemptions": [pre.model_copy(update=changes)]})


def test_the_engine_transition_is_accepted_and_worth_the_beneficiary() -> None:
    snap = _fleet()
    problem = build_problem(snap)
    plan = make_plan(snap, engine="cpsat", time_limit_s=5, deterministic=True)
    assert [(p.victim_model_id, p.beneficiary_model_id) for p in plan.preemptions] == [
        ("low", "need")
    ]
    assert staged_problems(problem, plan) == []
    pairs = {(a.model_id, a.host_id) for a in plan.assignments}
    assert pairs == set()  # low leaves the plan; need waits for the freed memory
    future = level_values(problem, pairs | beneficiaries(plan))
    assert future["p10:direct:1"] == 1 and future["p0:direct:1"] == 0  # hand-worked


def test_a_tampered_transition_is_refused_rule_by_rule() -> None:
    snap = _fleet()
    problem = build_problem(snap)
    plan = make_plan(snap, engine="cpsat", time_limit_s=5, deterministic=True)
    # a victim that is not there, then a beneficiary that outranks nobody
    assert staged_problems(problem, _evict(plan, victim_model_id="need"))
    assert any(
        "not below" in p for p in staged_problems(problem, _evict(plan, beneficiary_model_id="low"))
    )
    # the victim kept in the plan, and a relocation to a host that does not get it
    keep = Assignment(model_id="low", host_id="h1", memory_mb=4000, runtime="llama.cpp")
    kept = _evict(plan).model_copy(update={"assignments": [keep]})
    assert any("stays in the plan" in p for p in staged_problems(problem, kept))
    assert any("lacks it" in p for p in staged_problems(problem, _evict(plan, relocated_to="h9")))


def test_a_beneficiary_that_cannot_fit_the_freed_host_is_refused() -> None:
    snap = _fleet(need_mb=9000)  # 9,000 MB > 8,192 MB even on the emptied host
    expected = "do not fit the memory freed"
    problem = build_problem(snap)
    plan = _bare(Preemption(victim_model_id="low", host_id="h1", beneficiary_model_id="need"))
    found = staged_problems(problem, plan)
    assert any(expected in p for p in found), found


def test_correlation_only_demand_has_no_eviction_authority() -> None:
    snap = snapshot(
        [host("h1", 8192, residencies=[resident("low", 4000, loaded_at=OLD)])],
        [model("low", 4000, priority=0), model("need", 6000, priority=10)],
        {"low": want(1), "need": want(1, evidence="inferred")},
        policy={"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    plan = make_plan(snap, engine="cpsat", time_limit_s=5, deterministic=True)
    assert plan.preemptions == []
    tampered = _evict(plan)
    assert any("no eviction authority" in p for p in staged_problems(problem, tampered))


def test_a_young_or_pinned_victim_is_protected() -> None:
    young = snapshot(
        [host("h1", 8192, residencies=[resident("low", 4000, loaded_at=NOW - 10)])],
        [model("low", 4000, priority=0, min_residency_s=300), model("need", 6000, priority=10)],
        {"low": want(1), "need": want(1)},
        policy={"memory_headroom_fraction": 0.0},
    )
    plan = _bare(Preemption(victim_model_id="low", host_id="h1", beneficiary_model_id="need"))
    assert any("minimum residency" in p for p in staged_problems(build_problem(young), plan))
    pinned = snapshot(
        [host("h1", 8192, residencies=[resident("low", 4000, loaded_at=OLD)])],
        [model("low", 4000, priority=0, pinned_hosts=["h1"]), model("need", 6000, priority=10)],
        {"need": want(1)},
        policy={"memory_headroom_fraction": 0.0},
    )
    assert any("pinned" in p for p in staged_problems(build_problem(pinned), plan))


def test_the_staged_optimum_counts_the_beneficiary_in_place_of_its_victim() -> None:
    problem = build_problem(_fleet())
    # Hand-worked: without eviction low keeps h1 (need fits nowhere); staged, need's replica
    # outranks low's, so the future fleet has need and not low.
    assert reference_optimum(problem).values["p10:direct:1"] == 0
    staged = staged_optimum(problem)
    assert (staged["p10:direct:1"], staged["p0:direct:1"]) == (1, 0)
    # Correlation-only demand may not evict: the staged optimum is the plain one.
    inferred = snapshot(
        [host("h1", 8192, residencies=[resident("low", 4000, loaded_at=OLD)])],
        [model("low", 4000, priority=0), model("need", 6000, priority=10)],
        {"low": want(1), "need": want(1, evidence="inferred")},
        policy={"memory_headroom_fraction": 0.0},
    )
    plain = build_problem(inferred)
    assert staged_optimum(plain) == reference_optimum(plain).values
