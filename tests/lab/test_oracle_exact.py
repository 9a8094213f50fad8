"""The oracle against exhaustive enumeration: exact served and mutations on tiny traces.

The reference (tests/lab/test_oracle_reference.py) is a DP over per-minute residency states
written without the oracle's code; every oracle schedule is also replayed by the test's own
simulator, which must agree on served and mutations.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.lab.oracle import compile_trace, parse_trace, solve_oracle
from grid.lab.oracle.bound import coupled_bounds, minute_bounds
from tests.lab.test_oracle_reference import brute_force, simulate

pytestmark = pytest.mark.property

LIMIT_S = 20.0


def _check_against_reference(doc: dict[str, Any]) -> None:
    result = solve_oracle(parse_trace(copy.deepcopy(doc)), LIMIT_S, deterministic=True)
    served, mutations = brute_force(doc)
    assert result.status == "OPTIMAL"
    assert Fraction(result.served).limit_denominator(10**6) == served
    assert result.mutations == mutations
    sim_served, sim_mutations = simulate(doc, result.to_dict()["schedule"])
    assert (sim_served, sim_mutations) == (served, mutations)
    assert result.bound >= result.served - 1e-9
    assert result.gap == pytest.approx(0.0, abs=1e-9)


def _doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "minutes": 6,
        "hold_minutes": 1,
        "load_minutes": 1,
        "hosts": [
            {"host_id": "h1", "capacity_mb": 10, "max_models": 0, "runtimes": ["r"]},
            {"host_id": "h2", "capacity_mb": 6, "max_models": 1, "runtimes": ["r", "s"]},
        ],
        "models": [
            {"model_id": "a", "memory_mb": 6, "runtimes": ["r"], "replica_concurrency": 1.0},
            {"model_id": "b", "memory_mb": 4, "runtimes": ["r"], "replica_concurrency": 0.5},
            {"model_id": "c", "memory_mb": 5, "runtimes": ["s"], "replica_concurrency": 2.0},
        ],
        "demand": {
            "a": [1.5, 1.5, 0.0, 0.0, 2.0, 2.0],
            "b": [0.0, 0.5, 1.0, 1.0, 0.0, 0.25],
            "c": [0.0, 0.0, 3.0, 3.0, 1.0, 0.0],
        },
        "initial": [{"model_id": "a", "host_id": "h1"}],
    }
    doc.update(extra)
    return doc


def test_exact_on_a_hand_built_trace() -> None:
    _check_against_reference(_doc())


def test_exact_with_a_down_interval_and_slow_loads() -> None:
    doc = _doc(load_minutes=2, hold_minutes=0)
    doc["hosts"][0]["down"] = [[2, 4]]
    _check_against_reference(doc)


def test_exact_with_zero_load_and_hold() -> None:
    _check_against_reference(_doc(load_minutes=0, hold_minutes=0))


def test_initial_replica_may_leave_at_minute_zero() -> None:
    # b alone is worth serving from minute 1 on h1; a (initial) has no demand and blocks nothing
    doc = _doc(minutes=3, load_minutes=0, hold_minutes=5)
    doc["demand"] = {"a": [0.0, 0.0, 0.0], "b": [0.5, 0.5, 0.5], "c": [0.0, 0.0, 0.0]}
    doc["hosts"][0]["capacity_mb"] = 6  # a and b cannot share h1
    doc["hosts"][1]["runtimes"] = ["s"]
    _check_against_reference(doc)
    result = solve_oracle(parse_trace(doc), LIMIT_S, deterministic=True)
    assert result.served == pytest.approx(1.5)
    assert [(a.minute, a.action) for a in result.schedule] == [(0, "unload"), (0, "load")]


def _switch(load: int, hold: int) -> dict[str, Any]:
    """One host that fits one of a, b: a is worth 2 at minute 0, b 1 per minute from 1 to 3."""
    return {
        "schema_version": 1,
        "minutes": 4,
        "load_minutes": load,
        "hold_minutes": hold,
        "hosts": [{"host_id": "h", "capacity_mb": 6, "runtimes": ["r"]}],
        "models": [
            {"model_id": "a", "memory_mb": 6, "runtimes": ["r"], "replica_concurrency": 2.0},
            {"model_id": "b", "memory_mb": 6, "runtimes": ["r"]},
        ],
        "demand": {"a": [2.0, 0.0, 0.0, 0.0], "b": [0.0, 1.0, 1.0, 1.0]},
    }


@pytest.mark.parametrize(
    ("load", "hold", "served", "mutations"),
    [
        # hand-worked: a loaded at 0 serves 2 and may leave at 0 + load + hold; b then serves
        # from that minute to 3. b alone (loaded at 0) serves 3 with one load.
        (0, 3, 3.0, 1),  # a leaves at 3: 2 + 1 = 3 with 3 mutations, so b alone wins
        (0, 2, 4.0, 3),  # a leaves at 2: 2 + 2
        (0, 1, 5.0, 3),  # a leaves at 1: 2 + 3
        (0, 0, 5.0, 3),
        (1, 0, 3.0, 1),  # a cannot be ready at 0: b loaded at 0, ready at 1, serves 3
    ],
)
def test_hold_and_load_timing_bind(load: int, hold: int, served: float, mutations: int) -> None:
    doc = _switch(load, hold)
    result = solve_oracle(parse_trace(copy.deepcopy(doc)), LIMIT_S, deterministic=True)
    assert (result.served, result.mutations) == (served, mutations)
    _check_against_reference(doc)


# --- random tiny traces ---------------------------------------------------------------------

DEMAND = st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 0.25])


@st.composite
def tiny_traces(draw: st.DrawFn) -> dict[str, Any]:
    minutes = draw(st.integers(1, 5))
    n_hosts = draw(st.integers(1, 2))
    n_models = draw(st.integers(1, 3 if n_hosts == 1 else 2))
    hosts = []
    for i in range(n_hosts):
        down = []
        if draw(st.booleans()) and minutes > 1:
            start = draw(st.integers(0, minutes - 1))
            down = [[start, draw(st.integers(start + 1, minutes))]]
        hosts.append(
            {
                "host_id": f"h{i}",
                "capacity_mb": draw(st.integers(3, 10)),
                "max_models": draw(st.sampled_from([0, 1, 2])),
                "runtimes": draw(st.sampled_from([["r"], ["r", "s"], ["s"]])),
                "down": down,
            }
        )
    models = [
        {
            "model_id": f"m{j}",
            "memory_mb": draw(st.integers(1, 7)),
            "runtimes": draw(st.sampled_from([["r"], ["s"], ["r", "s"]])),
            "replica_concurrency": draw(st.sampled_from([0.5, 1.0, 2.0])),
        }
        for j in range(n_models)
    ]
    demand = {
        m["model_id"]: draw(st.lists(DEMAND, min_size=minutes, max_size=minutes)) for m in models
    }
    initial: list[dict[str, str]] = []
    for host in hosts:
        used, count = 0, 0
        for model in models:
            fits = used + model["memory_mb"] <= host["capacity_mb"] and (
                not host["max_models"] or count < host["max_models"]
            )
            if fits and set(model["runtimes"]) & set(host["runtimes"]) and draw(st.booleans()):
                initial.append({"model_id": model["model_id"], "host_id": host["host_id"]})
                used += model["memory_mb"]
                count += 1
    return {
        "schema_version": 1,
        "minutes": minutes,
        "load_minutes": draw(st.integers(0, 2)),
        "hold_minutes": draw(st.integers(0, 2)),
        "hosts": hosts,
        "models": models,
        "demand": demand,
        "initial": initial,
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_traces())
def test_oracle_equals_brute_force_on_random_tiny_traces(doc: dict[str, Any]) -> None:
    _check_against_reference(doc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_traces())
def test_lp_bounds_are_never_below_the_brute_force_optimum(doc: dict[str, Any]) -> None:
    problem = compile_trace(parse_trace(copy.deepcopy(doc)))
    best = brute_force(doc)[0] * problem.scale
    caps = minute_bounds(problem)
    assert sum(caps) >= best
    assert coupled_bounds(problem, caps) >= best
