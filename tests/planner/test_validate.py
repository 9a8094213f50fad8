"""The validator catches each hard-constraint violation in a hand-made plan, and accepts good ones.

Hosts have 10,000 MB allocatable and the default 5 % headroom (500 MB) unless a test says
otherwise, so the make-before-break budget of an empty host is 9,500 MB.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.models import Assignment, FleetSnapshot, Plan, SolverReport, Unsatisfied
from grid.planner.validate import InvalidPlan, check, violations
from tests.planner.fleets import host, model, resident, snapshot, want

pytestmark = pytest.mark.unit


def _a(
    model_id: str, host_id: str, memory_mb: int, existing: bool = False, runtime: str = "llama.cpp"
) -> Assignment:
    return Assignment(
        model_id=model_id, host_id=host_id, memory_mb=memory_mb, runtime=runtime, existing=existing
    )


def _plan(*assignments: Assignment, unsatisfied: list[Unsatisfied] | None = None) -> Plan:
    return Plan(
        assignments=list(assignments),
        unsatisfied=unsatisfied or [],
        solver=SolverReport(engine="hand", status="HAND", wall_ms=0.0),
    )


def _codes(snap: FleetSnapshot, plan: Plan) -> list[str]:
    return sorted({v.code for v in violations(snap, plan)})


def _short(
    model_id: str, missing: int, code: str = "insufficient_capacity", host_id: str | None = None
) -> Unsatisfied:
    return Unsatisfied(
        model_id=model_id, code=code, missing_replicas=missing, message="hand", host_id=host_id
    )


def _two_models(host_fields: dict[str, Any] | None = None, **model_fields: Any) -> FleetSnapshot:
    return snapshot(
        [host("h1", 10_000, **(host_fields or {})), host("h2", 10_000)],
        [model("a", 4000, **model_fields), model("b", 4000)],
        {"a": want(1), "b": want(1)},
    )


# ---------------------------------------------------------------------------- accepted plans


def test_good_plan_is_accepted() -> None:
    snap = _two_models()
    plan = _plan(_a("a", "h1", 4000), _a("b", "h1", 4000))
    assert violations(snap, plan) == []
    check(snap, plan)  # does not raise


def test_empty_plan_with_every_shortfall_explained_is_accepted() -> None:
    snap = _two_models()
    assert violations(snap, _plan(unsatisfied=[_short("a", 1), _short("b", 1)])) == []


def test_incumbent_may_stay_inside_the_headroom_margin() -> None:
    # 9,800 MB live on 10,000: a zero-allocation keep needs no phantom free headroom
    snap = snapshot(
        [host("h1", 10_000, residencies=[resident("a", 9800)])],
        [model("a", 9800)],
        {"a": want(1)},
    )
    assert violations(snap, _plan(_a("a", "h1", 9800, existing=True))) == []


def test_external_replica_is_kept_as_a_fixed_assignment() -> None:
    snap = snapshot(
        [host("h1", 10_000, residencies=[resident("a", 3000, managed=False)])],
        [model("a", 3000)],
        {"a": want(1)},
    )
    assert violations(snap, _plan(_a("a", "h1", 3000, existing=True))) == []
    assert _codes(snap, _plan(unsatisfied=[_short("a", 1)])) == ["fixed_replica_missing"]


# ---------------------------------------------------------------------------- each violation


def test_overcommitted_desired_footprint() -> None:
    # two kept incumbents grew past a raised reserve: 12,000 MB on 10,000 allocatable
    snap = snapshot(
        [
            host(
                "h1",
                12_000,
                reserved_mb=2000,
                residencies=[resident("a", 6000), resident("b", 6000)],
            )
        ],
        [model("a", 6000), model("b", 6000)],
        {"a": want(1), "b": want(1)},
    )
    plan = _plan(_a("a", "h1", 6000, existing=True), _a("b", "h1", 6000, existing=True))
    assert _codes(snap, plan) == ["memory"]


def test_new_allocations_beyond_both_ledgers() -> None:
    snap = _two_models()
    plan = _plan(_a("a", "h1", 6000), _a("b", "h1", 6000))
    assert _codes(snap, plan) == ["live_memory", "memory"]


def test_make_before_break_ledger_counts_live_processes_and_headroom() -> None:
    # live 6,000 (b, not kept) + new 3,800 + headroom 500 > 10,000, though 3,800 fits allocatable
    snap = snapshot(
        [host("h1", 10_000, residencies=[resident("b", 6000)]), host("h2", 10_000)],
        [model("a", 3800), model("b", 6000)],
        {"a": want(1), "b": want(1)},
    )
    plan = _plan(_a("a", "h1", 3800), _a("b", "h2", 6000))
    assert _codes(snap, plan) == ["live_memory"]
    fits = _plan(_a("a", "h2", 3800), _a("b", "h1", 6000, existing=True))
    assert violations(snap, fits) == []


def test_throttled_host_exposes_only_its_fraction() -> None:
    snap = snapshot(
        [host("h1", 10_000, state="throttled", throttle_fraction=0.5)],
        [model("a", 6000)],
        {"a": want(1)},
    )
    assert _codes(snap, _plan(_a("a", "h1", 6000))) == ["live_memory", "memory"]


def test_slot_limit_below_kept_incumbents() -> None:
    snap = snapshot(
        [host("h1", 10_000, max_models=1, residencies=[resident("a", 2000), resident("b", 2000)])],
        [model("a", 2000), model("b", 2000)],
        {"a": want(1), "b": want(1)},
    )
    plan = _plan(_a("a", "h1", 2000, existing=True), _a("b", "h1", 2000, existing=True))
    assert _codes(snap, plan) == ["slots"]


def test_new_model_needs_a_live_free_slot() -> None:
    # b is still live (draining out), so c cannot start beside a until b is gone
    snap = snapshot(
        [host("h1", 10_000, max_models=2, residencies=[resident("a", 2000), resident("b", 2000)])],
        [model("a", 2000), model("b", 2000), model("c", 2000)],
        {"a": want(1), "c": want(1)},
    )
    plan = _plan(_a("a", "h1", 2000, existing=True), _a("c", "h1", 2000))
    assert _codes(snap, plan) == ["live_slots"]


def test_colocation_ceiling() -> None:
    snap = _two_models(max_colocated_models=1)
    plan = _plan(_a("a", "h1", 4000), _a("b", "h1", 4000))
    assert "colocation" in _codes(snap, plan)
    assert violations(snap, _plan(_a("a", "h1", 4000), _a("b", "h2", 4000))) == []


def test_colocation_ceiling_counts_external_residents() -> None:
    snap = snapshot(
        [host("h1", 20_000, residencies=[resident("x", 1000, managed=False)])],
        [model("a", 4000, max_colocated_models=1), model("x", 1000)],
        {"a": want(1), "x": want(1)},
    )
    plan = _plan(_a("x", "h1", 1000, existing=True), _a("a", "h1", 4000))
    assert "colocation" in _codes(snap, plan)


@pytest.mark.parametrize("declared_by", ["a", "b"])
def test_exclusion_is_reciprocal(declared_by: str) -> None:
    snap = snapshot(
        [host("h1", 10_000), host("h2", 10_000)],
        [
            model("a", 4000, colocation_excludes=["b"] if declared_by == "a" else []),
            model("b", 4000, colocation_excludes=["a"] if declared_by == "b" else []),
        ],
        {"a": want(1), "b": want(1)},
    )
    assert _codes(snap, _plan(_a("a", "h1", 4000), _a("b", "h1", 4000))) == ["colocation_exclusion"]


def test_cumulative_artifact_disk() -> None:
    snap = snapshot(
        [host("h1", 10_000, disk_free_mb=5000, cached_models=["c"])],
        [model(m, 2000, artifact_size_mb=3000) for m in ("a", "b", "c")],
        {m: want(1) for m in ("a", "b", "c")},
    )
    both = _plan(_a("a", "h1", 2000), _a("b", "h1", 2000), unsatisfied=[_short("c", 1)])
    assert _codes(snap, both) == ["disk"]
    cached = _plan(_a("a", "h1", 2000), _a("c", "h1", 2000), unsatisfied=[_short("b", 1)])
    assert violations(snap, cached) == [], "cached weights do not pay the disk cost again"


def test_unknown_free_disk_does_not_limit_demanded_placements() -> None:
    snap = snapshot(
        [host("h1", 10_000)],
        [model(m, 2000, artifact_size_mb=900_000) for m in ("a", "b")],
        {m: want(1) for m in ("a", "b")},
    )
    assert violations(snap, _plan(_a("a", "h1", 2000), _a("b", "h1", 2000))) == []


@pytest.mark.parametrize(
    "host_fields",
    [
        {"state": "paused"},
        {"last_heartbeat": 1.0},
        {"ownership": "manual"},
        {"tags": ["laptop"]},
    ],
)
def test_ineligible_host(host_fields: dict[str, Any]) -> None:
    snap = _two_models(host_fields, forbidden_tags=["laptop"])
    plan = _plan(_a("a", "h1", 4000), _a("b", "h2", 4000))
    assert _codes(snap, plan) == ["ineligible_host"]


def test_runtime_mismatch() -> None:
    snap = _two_models({"runtimes": ["llama.cpp"]})
    plan = _plan(_a("a", "h1", 4000, runtime="vllm"), _a("b", "h2", 4000))
    assert _codes(snap, plan) == ["runtime_mismatch"]


def test_memory_understated_for_the_chosen_runtime() -> None:
    snap = snapshot(
        [host("h1", 20_000, runtimes=["vllm"])],
        [model("a", 4000, runtimes=["vllm"], runtime_memory_mb={"vllm": 9000})],
        {"a": want(1)},
    )
    assert _codes(snap, _plan(_a("a", "h1", 4000, runtime="vllm"))) == ["memory_understated"]
    assert violations(snap, _plan(_a("a", "h1", 9000, runtime="vllm"))) == []


def test_too_many_replicas() -> None:
    snap = _two_models()
    plan = _plan(_a("a", "h1", 4000), _a("a", "h2", 4000), _a("b", "h2", 4000))
    assert _codes(snap, plan) == ["replica_bounds"]


def test_duplicate_replica_on_one_host() -> None:
    snap = _two_models()
    plan = _plan(_a("a", "h1", 4000), _a("a", "h1", 4000), _a("b", "h2", 4000))
    assert "duplicate_replica" in _codes(snap, plan)


def test_unknown_host_or_model() -> None:
    snap = _two_models()
    plan = _plan(_a("a", "ghost", 4000), _a("b", "h2", 4000), unsatisfied=[_short("a", 1)])
    assert _codes(snap, plan) == ["unknown_reference"]


def test_wrong_existing_flag() -> None:
    snap = _two_models()
    plan = _plan(_a("a", "h1", 4000, existing=True), _a("b", "h2", 4000))
    assert _codes(snap, plan) == ["existing_flag"]


def test_unexplained_shortfall() -> None:
    snap = snapshot(
        [host("h1", 10_000), host("h2", 10_000)], [model("a", 4000, max_replicas=2)], {"a": want(2)}
    )
    assert _codes(snap, _plan(_a("a", "h1", 4000))) == ["unexplained_shortfall"]
    half = _plan(_a("a", "h1", 4000), unsatisfied=[_short("a", 1, "failure_domain_shortfall")])
    assert _codes(snap, half) == ["unexplained_shortfall"], "a domain shortfall is no replica"
    explained = _plan(_a("a", "h1", 4000), unsatisfied=[_short("a", 1)])
    assert violations(snap, explained) == []


def test_unexplained_pin() -> None:
    snap = snapshot([host("h1", 10_000)], [model("a", 4000, pinned_hosts=["ghost"])])
    generic = _plan(unsatisfied=[_short("a", 1)])
    assert _codes(snap, generic) == ["unexplained_pin"]
    wrong_host = _plan(unsatisfied=[_short("a", 1, "pinned_host_unavailable", host_id="h1")])
    assert _codes(snap, wrong_host) == ["unexplained_pin"]
    reported = _plan(unsatisfied=[_short("a", 1, "pinned_host_unavailable", host_id="ghost")])
    assert violations(snap, reported) == []


def test_check_raises_with_every_violation() -> None:
    snap = _two_models({"state": "paused"})
    with pytest.raises(InvalidPlan) as info:
        check(snap, _plan(_a("a", "h1", 4000), _a("a", "h2", 4000)))
    codes = {v.code for v in info.value.violations}
    assert {"ineligible_host", "replica_bounds", "unexplained_shortfall"} <= codes
