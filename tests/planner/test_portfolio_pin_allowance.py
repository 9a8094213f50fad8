"""The portfolio's off-pin rule is clamped at zero, as validate.py reads it.

Hand-worked fleet (found by Hypothesis in test_portfolio_properties): every model is pinned to
h0, which is full (m0 and m1 hold it); m2 has an unmanaged replica on h1 and desired 1, so its
room off the pin is 1 − |pins| − 1 fixed replica off the pin = −1. Unclamped, that made every
mapping that does not raise m2's desired count infeasible, so CP-SAT could only map `coding` to
m2 (one replica short: missing 1) and called it OPTIMAL. m3 already serves `coding` with its two
live replicas (no room left: missing 0), which the coordinate search found.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.snapshot import parse_snapshot
from grid.planner.portfolio import build_context, coordinate_search, evaluate
from grid.planner.portfolio.solve import solve_after_search
from tests.planner.portfolio.builders import NOW, plan_of

pytestmark = pytest.mark.unit


def _residency(model_id: str, *, managed: bool = True) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "memory_mb": 1024,
        "managed": managed,
        "last_used_at": NOW - 10,
    }


def _host(host_id: str, residencies: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "host_id": host_id,
        "capacity_mb": 4096,
        "last_heartbeat": NOW,
        "residencies": residencies,
    }


def _model(model_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "memory_mb": 1024,
        "pinned_hosts": ["h0"],
        "load_estimate_s": 4.0,
        "warm_estimate_s": 4.0,
        **extra,
    }


def snapshot() -> Any:
    demand = {"offered_concurrency": 0.2, "rpm": 5.0}
    outcome = {"workload": "coding", "requests": 1.0, "successes": 1.0, "age_s": 5.0}
    return parse_snapshot(
        {
            "schema_version": 1,
            "now": NOW,
            "hosts": [
                _host("h0", [_residency("m0"), _residency("m1")]),
                _host(
                    "h1",
                    [
                        _residency("m1"),
                        _residency("m2", managed=False),
                        _residency("m3"),
                        _residency("m4"),
                    ],
                ),
                _host("h2", [_residency("m3")]),
            ],
            "models": [
                _model("m0"),
                _model("m1"),
                _model("m2", max_replicas=2, workload_scores={"coding": 0.3}),
                _model("m3", workload_scores={"coding": 0.3}),
                _model("m4"),
            ],
            "demand": {m: dict(demand) for m in ("m0", "m1", "m2", "m3")},
            "workloads": {"coding": {"offered_concurrency": 0.2, "observations": 3}},
            "outcomes": [{"model_id": m, **outcome} for m in ("m2", "m3")],
        }
    )


def test_a_pinned_model_short_of_its_pin_does_not_force_the_mapping() -> None:
    snap = snapshot()
    ctx = build_context(snap, plan_of(snap.model_copy(update={"workloads": {}})))
    result = solve_after_search(ctx, coordinate_search(ctx), 20.0)
    assert result is not None and result.status == "OPTIMAL"
    assert result.mapping == {"coding": "m3"}
    assert evaluate(ctx, result.mapping, result.placement)["missing"] == 0
    # The off-pin room of m2 is 0, not negative, whatever the workload asks of it.
    assert ctx.off_pin_allowance("m2", 0) == 0 and ctx.off_pin_allowance("m2", 1) == 0


def test_the_whole_plan_maps_coding_to_the_model_that_serves_it() -> None:
    plan = plan_of(snapshot())
    assert plan.portfolio is not None
    assert plan.portfolio.mapping == {"coding": "m3"}
