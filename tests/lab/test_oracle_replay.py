"""Schedules replay valid under the test's own simulator: the greedy schedule, the time-window
search's schedule, and the replayer's verdicts on hand-made broken schedules."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.lab.oracle import (
    Action,
    compile_trace,
    generate_document,
    greedy_schedule,
    parse_trace,
    replay,
    solve_oracle,
)
from grid.lab.oracle.greedy import best_greedy
from grid.lab.oracle.replay import schedule_from_residency
from grid.lab.oracle.tidy import tidy
from tests.lab.test_oracle_exact import tiny_traces
from tests.lab.test_oracle_reference import brute_force, simulate

pytestmark = pytest.mark.property


def _as_dicts(schedule: list[Action]) -> list[dict[str, Any]]:
    return [a.to_dict() for a in schedule]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_traces())
def test_greedy_schedule_is_valid_and_the_replayer_agrees(doc: dict[str, Any]) -> None:
    problem = compile_trace(parse_trace(copy.deepcopy(doc)))
    schedule = greedy_schedule(problem)
    served, mutations = simulate(doc, _as_dicts(schedule))
    result = replay(problem, schedule)
    assert result.valid, result.violations
    assert Fraction(result.total, problem.scale) == served
    assert result.mutations == mutations
    assert served <= brute_force(doc)[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_traces())
def test_window_search_is_valid_and_its_bound_holds(doc: dict[str, Any]) -> None:
    import grid.lab.oracle.search as search
    import grid.lab.oracle.solve as solve

    saved = (solve.FULL_MODEL_CELLS, search.MIN_WINDOW_MINUTES, search.WINDOW_CELLS)
    solve.FULL_MODEL_CELLS, search.MIN_WINDOW_MINUTES, search.WINDOW_CELLS = 0, 2, 1
    try:
        result = solve_oracle(parse_trace(copy.deepcopy(doc)), 2.0, deterministic=True)
    finally:
        solve.FULL_MODEL_CELLS, search.MIN_WINDOW_MINUTES, search.WINDOW_CELLS = saved
    best, _mutations = brute_force(doc)
    served, mutations = simulate(doc, result.to_dict()["schedule"])
    assert float(served) == pytest.approx(result.served, abs=1e-9)
    assert mutations == result.mutations
    assert served <= best
    assert result.bound >= float(best) - 1e-9  # a proven bound is never below the optimum
    assert result.served >= result.greedy_served - 1e-9


def _doc() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "minutes": 4,
        "load_minutes": 1,
        "hold_minutes": 1,
        "hosts": [
            {
                "host_id": "h",
                "capacity_mb": 10,
                "max_models": 1,
                "runtimes": ["r"],
                "down": [[3, 4]],
            }
        ],
        "models": [
            {"model_id": "a", "memory_mb": 6, "runtimes": ["r"]},
            {"model_id": "b", "memory_mb": 5, "runtimes": ["r"]},
        ],
        "demand": {"a": [1.0, 1.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0, 1.0]},
    }


@pytest.mark.parametrize(
    ("actions", "needle"),
    [
        ([(0, "load", "a"), (1, "unload", "a")], "unload needs minute >= 2"),
        ([(0, "unload", "a")], "nothing to unload"),
        ([(0, "load", "a"), (0, "load", "b")], "max_models"),
        ([(3, "load", "a")], "host is down"),
        ([(0, "load", "a"), (1, "load", "a")], "already present"),
        ([(4, "load", "a")], "minute outside"),
    ],
)
def test_replayer_reports_broken_rules(actions: list[tuple[int, str, str]], needle: str) -> None:
    problem = compile_trace(parse_trace(_doc()))
    schedule = [Action(t, act, m, "h") for t, act, m in actions]  # type: ignore[arg-type]
    result = replay(problem, schedule)
    assert any(needle in v for v in result.violations), result.violations


def test_replayer_loss_on_down_is_not_a_mutation() -> None:
    # hand-worked: a loaded at 0 is ready at 1 and 2 (serves 2), lost at 3 with no mutation
    problem = compile_trace(parse_trace(_doc()))
    result = replay(problem, [Action(0, "load", "a", "h")])
    assert result.valid
    assert (result.total, result.mutations) == (2 * problem.scale, 1)


def test_generated_traces_are_seeded_valid_and_realistic() -> None:
    one = generate_document(8, 12, 480, seed=3)
    assert json.dumps(one) == json.dumps(generate_document(8, 12, 480, seed=3))
    assert json.dumps(one) != json.dumps(generate_document(8, 12, 480, seed=4))
    trace = parse_trace(one)
    assert len(trace.hosts) == 8 and len(trace.models) == 12 and trace.minutes == 480
    total = [sum(series[t] for series in trace.demand.values()) for t in range(480)]
    morning, night = sum(total[90:150]), sum(total[:20]) * 3  # 9:30–10:30 against 8:00–8:20
    assert morning > night  # a diurnal surge, not flat noise
    assert any(h.down for h in trace.hosts)


def _rows_to_schedule(problem: Any, rows: list[list[set[int]]]) -> list[dict[str, Any]]:
    return _as_dicts(schedule_from_residency(problem, rows))


def test_tidy_drops_an_idle_stay_and_bridges_a_gap() -> None:
    # hand-worked on one host that fits a and b (11 MB, no slot limit): a is wanted at 1-3, b never
    doc = _doc()
    doc["hosts"][0]["down"] = []
    doc["hosts"][0]["max_models"] = 0
    doc["hosts"][0]["capacity_mb"] = 11
    doc["hold_minutes"] = 0
    doc["demand"] = {"a": [0.0, 1.0, 1.0, 1.0], "b": [0.0, 0.0, 0.0, 0.0]}
    problem = compile_trace(parse_trace(copy.deepcopy(doc)))
    a, b = 0, 1
    # a loaded at 0, unloaded at 2, reloaded at 3; b loaded at 0 and unloaded at 2, idle
    rows = [[{a, b}], [{a, b}], [set()], [{a}]]
    before = simulate(doc, _rows_to_schedule(problem, rows))
    assert before == (Fraction(1), 5)  # a serves at minute 1 only (its reload is ready at 4)
    after_rows = tidy(problem, rows)
    assert after_rows == [[{a}], [{a}], [{a}], [{a}]]
    assert simulate(doc, _rows_to_schedule(problem, after_rows)) == (Fraction(3), 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_traces(), st.data())
def test_tidy_never_lowers_served_nor_raises_mutations(doc: dict[str, Any], data: Any) -> None:
    problem = compile_trace(parse_trace(copy.deepcopy(doc)))
    rows = [[set(r) for r in row] for row in best_greedy(problem)]
    for m, h in problem.pairs():  # add churn: random extra stays, kept only if still valid
        if data.draw(st.booleans()):
            start = data.draw(st.integers(0, problem.minutes - 1))
            end = data.draw(st.integers(start + 1, problem.minutes))
            trial = [[set(r) for r in row] for row in rows]
            for t in range(start, end):
                if problem.up[h][t]:
                    trial[t][h].add(m)
            if replay(problem, schedule_from_residency(problem, trial)).valid:
                rows = trial
    served, mutations = simulate(doc, _rows_to_schedule(problem, rows))
    tidied = tidy(problem, rows)
    after_served, after_mutations = simulate(doc, _rows_to_schedule(problem, tidied))
    assert after_served >= served
    assert after_mutations <= mutations
