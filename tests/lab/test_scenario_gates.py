"""Graduation gates computed from hand-made cells (values worked out by hand)."""

from __future__ import annotations

import pytest

from grid.lab.scenario import gates

pytestmark = pytest.mark.unit


def _row(
    served: float,
    score: float,
    least: float,
    churn: int,
    startup: float,
    bad: int = 0,
    sha: str = "a",
) -> dict[str, object]:
    return {
        "served_fraction": served,
        "score": score,
        "least_workload_service": least,
        "churn": churn,
        "startup_s": startup,
        "safety_violations": bad,
        "demand_trace_sha256": sha,
    }


def _cell(machines: int, seed: int, **rows: dict[str, object]) -> dict[str, object]:
    return {"machines": machines, "seed": seed, "strategies": rows}


GOOD = [
    _cell(
        2,
        1,
        smart=_row(0.90, 80, 0.5, 10, 100),
        reactive=_row(0.89, 79, 0.5, 10, 130),
        greedy=_row(0.88, 78, 0.5, 30, 150),
        static=_row(0.80, 70, 0.4, 4, 60),
    ),
    _cell(
        4,
        1,
        smart=_row(0.95, 85, 0.8, 12, 100),
        reactive=_row(0.95, 86, 0.8, 12, 110),
        greedy=_row(0.96, 84, 0.82, 40, 160),
        static=_row(0.90, 75, 0.6, 4, 60),
    ),
    _cell(
        4,
        2,
        smart=_row(0.93, 83, 0.7, 8, 90),
        reactive=_row(0.93, 83, 0.7, 8, 95),
        greedy=_row(0.94, 82, 0.74, 30, 120),
        static=_row(0.92, 80, 0.7, 4, 60),
    ),
]


def _by_name(found: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {g["name"]: g for g in found}  # type: ignore[misc]


def test_a_good_matrix_passes_every_gate_with_hand_worked_values() -> None:
    found = _by_name(gates(GOOD))
    assert all(g["passed"] for g in found.values()), found
    assert found["smart_safety"]["value"] == 0
    assert found["identical_demand_traces"]["value"] == 0
    # score: max over cells of (best other − smart): 2-1 -> -1, 4-1 -> 86-85 = 1, 4-2 -> 0
    assert found["score_regression"]["value"] == pytest.approx(1.0)
    # service: -0.01, 0.96-0.95 = 0.01, 0.94-0.93 = 0.01
    assert found["service_regression"]["value"] == pytest.approx(0.01)
    # smart − static: 0.10, 0.05, 0.01 -> median 0.05
    assert found["median_service_gain_over_static"]["value"] == pytest.approx(0.05)
    # churn: (10 + 12 + 8) / (30 + 40 + 30) = 0.3
    assert found["churn_vs_greedy"]["value"] == pytest.approx(0.3)
    # largest fleet (4): smart − best other least: 0.8-0.82, 0.7-0.74 -> worst -0.04
    assert found["least_workload_largest_fleet"]["value"] == pytest.approx(-0.04)
    # reactive − smart startup: 30 + 10 + 5
    assert found["startup_savings_over_reactive"]["value"] == pytest.approx(45.0)
    assert set(found["smart_safety"]) >= {"name", "passed", "value", "threshold"}


def test_failed_gates_say_by_how_much() -> None:
    bad = [dict(c) for c in GOOD]
    bad[0] = _cell(
        2,
        1,
        smart=_row(0.80, 70, 0.5, 40, 200, bad=2),
        reactive=_row(0.89, 79, 0.5, 10, 130),
        greedy=_row(0.88, 78, 0.5, 30, 150, sha="b"),
        static=_row(0.80, 70, 0.4, 4, 60),
    )
    found = _by_name(gates(bad))
    assert not found["smart_safety"]["passed"] and found["smart_safety"]["value"] == 2
    assert found["smart_safety"]["miss"] == pytest.approx(2.0)
    assert not found["identical_demand_traces"]["passed"]
    # 79 − 70 = 9 points against a 5-point bound: missed by 4
    assert not found["score_regression"]["passed"]
    assert found["score_regression"]["miss"] == pytest.approx(4.0)
    # 0.89 − 0.80 = 0.09 against 0.03
    assert found["service_regression"]["miss"] == pytest.approx(0.06)
    # (40 + 12 + 8) / 100 = 0.6 > 0.5
    assert found["churn_vs_greedy"]["value"] == pytest.approx(0.6)
    assert not found["churn_vs_greedy"]["passed"]
    # 130 − 200 + 10 + 5 = -55: no savings
    assert found["startup_savings_over_reactive"]["value"] == pytest.approx(-55.0)
    assert not found["startup_savings_over_reactive"]["passed"]
    # smart − static: 0, 0.05, 0.01 -> median 0.01 < 0.02
    assert found["median_service_gain_over_static"]["value"] == pytest.approx(0.01)
    assert not found["median_service_gain_over_static"]["passed"]


def _with(cell: dict[str, object], oracle: float | None, changes: int) -> dict[str, object]:
    out = {**cell, "duration_s": 7200}
    rows = dict(out["strategies"])  # type: ignore[call-overload]
    rows["smart"] = {**rows["smart"], "mapping_changes": changes}
    out["strategies"] = rows
    if oracle is not None:
        out["oracle"] = {"served_fraction": oracle, "bound_fraction": oracle, "status": "OPTIMAL"}
    return out


def test_the_score_oracle_and_mapping_gates_by_hand() -> None:
    cells = [_with(GOOD[0], None, 40), _with(GOOD[1], 1.0, 10), _with(GOOD[2], 0.96, 26)]
    found = _by_name(gates(cells))
    # smart − static score: 10, 10, 3 -> median 10; smart − greedy: 2, 1, 1 -> median 1
    assert found["median_score_gain_over_static"]["value"] == pytest.approx(10.0)
    assert found["median_score_gain_over_greedy"]["value"] == pytest.approx(1.0)
    # largest fleet (4): 0.95 / 1.0 = 0.95 and 0.93 / 0.96 = 0.96875 -> worst 0.95
    assert found["served_vs_oracle_largest_fleet"]["value"] == pytest.approx(0.95)
    # largest fleet: (10 + 26) changes over 4 simulated hours
    assert found["mapping_changes_per_hour"]["value"] == pytest.approx(9.0)
    assert all(g["passed"] for g in found.values()), found
    worse = [_with(GOOD[0], None, 40), _with(GOOD[1], 1.2, 30), _with(GOOD[2], 0.96, 26)]
    bad = _by_name(gates(worse))
    assert not bad["served_vs_oracle_largest_fleet"]["passed"]  # 0.95 / 1.2 < 0.9
    assert bad["mapping_changes_per_hour"]["value"] == pytest.approx(14.0)
    assert not bad["mapping_changes_per_hour"]["passed"]


def test_a_smart_score_below_static_fails_the_median_gate() -> None:
    cells = [dict(c) for c in GOOD]
    for c in cells:
        rows = dict(c["strategies"])  # type: ignore[call-overload]
        rows["static"] = {**rows["static"], "score": 90}
        c["strategies"] = rows
    found = _by_name(gates(cells))
    # 80-90, 85-90, 83-90 -> median -7
    assert found["median_score_gain_over_static"]["value"] == pytest.approx(-7.0)
    assert not found["median_score_gain_over_static"]["passed"]
    assert "served_vs_oracle_largest_fleet" not in found  # hand-made cells without the oracle
