"""The oracle's optional physics (docs/oracle.md "Extended traces"): host speed, throttled
intervals and demand classes served by several models.

References: the exhaustive DP and the action-by-action simulator of test_oracle_reference.py,
whose served is the max-flow value by cut enumeration (no flow algorithm), with exact
fractions; hand-worked values for the small cases.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.lab.oracle import TraceError, compile_trace, parse_trace, replay, solve_oracle
from grid.lab.oracle.bound import coupled_bounds, minute_bounds
from grid.lab.oracle.greedy import greedy_schedule
from grid.lab.oracle.solve import static_bound
from tests.lab.test_oracle_reference import brute_force, simulate

pytestmark = pytest.mark.property

LIMIT_S = 20.0


def _doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "minutes": 4,
        "hold_minutes": 0,
        "load_minutes": 1,
        "hosts": [
            {"host_id": "fast", "capacity_mb": 10, "runtimes": ["r"], "speed": 3.0},
            {"host_id": "slow", "capacity_mb": 10, "runtimes": ["r"], "speed": 1.0},
        ],
        "models": [
            {"model_id": "big", "memory_mb": 8, "runtimes": ["r"], "replica_concurrency": 1.0},
            {"model_id": "small", "memory_mb": 4, "runtimes": ["r"], "replica_concurrency": 1.0},
        ],
        "demand": {"chat": [0.0, 4.0, 4.0, 4.0]},
        "classes": {"chat": ["big", "small"]},
    }
    doc.update(extra)
    return doc


def test_a_class_is_served_on_both_hosts_at_their_speeds() -> None:
    # hand-worked: 8 + 4 > 10, so one model per host; either model serves `chat`. One replica on
    # `fast` (1.0 × 3 = 3 units) and one on `slow` (1 unit): 4 units a minute from minute 1
    # (loaded at 0), 12 in all, with two loads.
    result = solve_oracle(parse_trace(_doc()), LIMIT_S)
    assert result.served == pytest.approx(12.0)
    assert result.mutations == 2
    assert result.status == "OPTIMAL"
    sim = simulate(_doc(), result.to_dict()["schedule"])
    assert sim == (Fraction(12), 2)


def test_throttle_halves_the_host_for_its_interval() -> None:
    doc = _doc()
    doc["hosts"][0]["throttle"] = [[2, 4, 0.5]]
    # fast serves 3 at minute 1 and 1.5 at minutes 2, 3; slow 1 every minute: 4 + 2.5 + 2.5
    result = solve_oracle(parse_trace(doc), LIMIT_S)
    assert result.served == pytest.approx(9.0)
    assert brute_force(doc)[0] == Fraction(9)


def test_a_model_shared_by_two_classes_is_split_by_the_flow() -> None:
    # one host, one slot: `small` serves class x (only small) and class y (big or small).
    doc = _doc(
        hosts=[{"host_id": "h", "capacity_mb": 10, "max_models": 1, "runtimes": ["r"]}],
        demand={"x": [0.0, 0.6, 0.6, 0.6], "y": [0.0, 0.6, 0.6, 0.6]},
        classes={"x": ["small"], "y": ["big", "small"]},
    )
    # small (1 unit) serves x's 0.6 and 0.4 of y; big would serve only y's 0.6: 3 × 1.0
    result = solve_oracle(parse_trace(doc), LIMIT_S)
    assert result.served == pytest.approx(3.0)
    assert [(a.action, a.model_id) for a in result.schedule] == [("load", "small")]


def test_the_contract_defaults_change_nothing() -> None:
    plain = {
        "schema_version": 1,
        "minutes": 3,
        "hosts": [{"host_id": "h", "capacity_mb": 8, "runtimes": ["r"]}],
        "models": [{"model_id": "a", "memory_mb": 4, "runtimes": ["r"]}],
        "demand": {"a": [1.0, 2.0, 0.5]},
    }
    explicit = copy.deepcopy(plain)
    explicit["hosts"][0].update({"speed": 1.0, "throttle": []})
    explicit["classes"] = {}
    a = solve_oracle(parse_trace(plain), LIMIT_S).to_dict()
    b = solve_oracle(parse_trace(explicit), LIMIT_S).to_dict()
    a.pop("wall_s")
    b.pop("wall_s")
    assert a == b


@pytest.mark.parametrize(
    ("spoil", "code", "path"),
    [
        (lambda d: d["classes"].update({"big": ["small"]}), "duplicate_id", "classes.big"),
        (lambda d: d["classes"].update({"x": ["ghost"]}), "unknown_model", "classes.x[0]"),
        (
            lambda d: d["classes"].update({"x": ["big", "big"]}),
            "duplicate_id",
            "classes.x[1]",
        ),
        (lambda d: d["demand"].update({"nobody": [0.0] * 4}), "unknown_model", "demand.nobody"),
        (
            lambda d: d["hosts"][0].update({"throttle": [[3, 9, 0.5]]}),
            "throttle_out_of_range",
            "hosts[0].throttle[0]",
        ),
        (
            lambda d: d["hosts"][0].update({"throttle": [[0, 2, 1.5]]}),
            "out_of_range",
            "hosts[0].throttle[0]",
        ),
        (
            lambda d: d["hosts"][1].update({"throttle": [[0, 3, 0.5], [2, 4, 0.5]]}),
            "throttle_overlap",
            "hosts[1].throttle[1]",
        ),
        (lambda d: d["hosts"][0].update({"speed": 0}), "out_of_range", "hosts[0].speed"),
    ],
)
def test_bad_extended_fields_are_refused(spoil: Any, code: str, path: str) -> None:
    doc = _doc()
    spoil(doc)
    with pytest.raises(TraceError) as err:
        parse_trace(doc)
    assert (err.value.code, err.value.path) == (code, path)


# --- random tiny extended traces --------------------------------------------------------------

DEMAND = st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 0.25])


@st.composite
def tiny_extended(draw: st.DrawFn) -> dict[str, Any]:
    minutes = draw(st.integers(1, 4))
    n_hosts = draw(st.integers(1, 2))
    n_models = draw(st.integers(1, 3 if n_hosts == 1 else 2))
    hosts = []
    for i in range(n_hosts):
        host: dict[str, Any] = {
            "host_id": f"h{i}",
            "capacity_mb": draw(st.integers(3, 10)),
            "max_models": draw(st.sampled_from([0, 1, 2])),
            "runtimes": draw(st.sampled_from([["r"], ["r", "s"]])),
            "speed": draw(st.sampled_from([0.8, 1.0, 3.0])),
        }
        if draw(st.booleans()) and minutes > 1:
            start = draw(st.integers(0, minutes - 1))
            host["throttle"] = [[start, draw(st.integers(start + 1, minutes)), 0.5]]
        hosts.append(host)
    models = [
        {
            "model_id": f"m{j}",
            "memory_mb": draw(st.integers(1, 7)),
            "runtimes": draw(st.sampled_from([["r"], ["s"], ["r", "s"]])),
            "replica_concurrency": draw(st.sampled_from([0.5, 1.0, 2.0])),
        }
        for j in range(n_models)
    ]
    ids = [m["model_id"] for m in models]
    classes = {
        f"w{k}": draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids), unique=True))
        for k in range(draw(st.integers(1, 2)))
    }
    demand = {c: draw(st.lists(DEMAND, min_size=minutes, max_size=minutes)) for c in classes}
    if draw(st.booleans()):
        demand[ids[0]] = draw(st.lists(DEMAND, min_size=minutes, max_size=minutes))
    return {
        "schema_version": 1,
        "minutes": minutes,
        "load_minutes": draw(st.integers(0, 1)),
        "hold_minutes": draw(st.integers(0, 1)),
        "hosts": hosts,
        "models": models,
        "demand": demand,
        "classes": classes,
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_extended())
def test_oracle_equals_brute_force_on_extended_traces(doc: dict[str, Any]) -> None:
    result = solve_oracle(parse_trace(copy.deepcopy(doc)), LIMIT_S, deterministic=True)
    served, mutations = brute_force(doc)
    assert result.status == "OPTIMAL"
    assert Fraction(result.served).limit_denominator(10**6) == served
    assert result.mutations == mutations
    assert simulate(doc, result.to_dict()["schedule"]) == (served, mutations)
    assert result.bound >= result.served - 1e-9


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_extended())
def test_bounds_and_greedy_agree_with_the_reference(doc: dict[str, Any]) -> None:
    problem = compile_trace(parse_trace(copy.deepcopy(doc)))
    best = brute_force(doc)[0] * problem.scale
    caps = minute_bounds(problem)
    assert sum(caps) >= best
    assert coupled_bounds(problem, caps) >= best
    assert static_bound(problem) >= best
    schedule = greedy_schedule(problem)
    mine = replay(problem, schedule)
    ref, _mutations = simulate(doc, [a.to_dict() for a in schedule])
    assert mine.valid
    assert Fraction(mine.total, problem.scale) == ref
