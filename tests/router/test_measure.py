from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grid.fleet.models import HostState, ResidencyState
from grid.router import Measurements, Route
from grid.router.measure import DEFAULT_LATENCY_S, MAX_AGE_S, MAX_TRACKED

pytestmark = pytest.mark.unit

T = 5000.0
A, B, C = ("a:1", "m"), ("b:1", "m"), ("c:1", "m")


def test_without_evidence_the_prior_is_used() -> None:
    assert Measurements().latency_s(A, [A, B], T) == DEFAULT_LATENCY_S
    assert Measurements().throughput(A, [A, B], T) is None


def test_weak_evidence_blends_toward_the_peers_median() -> None:
    m = Measurements()
    for _ in range(8):
        m.record(B, 2.0, None, T)
        m.record(C, 4.0, None, T)
    assert m.latency_s(A, [A, B, C], T) == pytest.approx(3.0)  # no own data: the peers' median
    m.record(A, 10.0, None, T)  # one sample: 1/8 confidence
    blended = m.latency_s(A, [A, B, C], T)
    assert blended == pytest.approx(10.0 / 8 + 4.0 * 7 / 8)  # median of 2, 4 and 10
    for _ in range(7):
        m.record(A, 10.0, None, T)
    assert m.latency_s(A, [A, B, C], T) == pytest.approx(10.0)  # eight samples: full authority


def test_other_models_are_never_peers() -> None:
    m = Measurements()
    for _ in range(8):
        m.record(("b:1", "other"), 0.1, None, T)
    m.record(A, 3.0, None, T)
    assert m.latency_s(A, [A, ("b:1", "other")], T) == pytest.approx(3.0)


def test_expired_evidence_falls_back_completely() -> None:
    m = Measurements()
    for _ in range(8):
        m.record(A, 9.0, 90, T)
    assert m.latency_s(A, [A], T + MAX_AGE_S + 1) == DEFAULT_LATENCY_S
    assert m.throughput(A, [A], T + MAX_AGE_S + 1) is None


def test_a_stream_without_usage_refreshes_latency_only() -> None:
    m = Measurements()
    m.record(A, 2.0, 100, T)
    m.record(A, 1.0, None, T + 10)
    assert m.throughput(A, [A], T + 10) == pytest.approx(50.0, rel=0.05)


def test_memory_stays_bounded_and_forgets_the_stalest_estimates() -> None:
    m = Measurements()
    for index in range(MAX_TRACKED + 50):
        m.record((f"h:{index}", "m"), 1.0 + index, None, T + index)
    stalest, newest = ("h:0", "m"), (f"h:{MAX_TRACKED + 49}", "m")
    now = T + MAX_TRACKED + 49
    assert m.latency_s(newest, [newest], now) == pytest.approx(MAX_TRACKED + 50.0)
    assert m.latency_s(stalest, [stalest], now) == DEFAULT_LATENCY_S  # forgotten
    assert len(m) == MAX_TRACKED  # the bound itself


def test_a_replaced_artifact_starts_from_the_prior_on_the_same_engine() -> None:
    old = Route(
        "h", "m", 9000, HostState.ACCEPTING, ResidencyState.READY, T, artifact_sha256="a" * 64
    )
    new = Route(
        "h", "m", 9000, HostState.ACCEPTING, ResidencyState.READY, T, artifact_sha256="b" * 64
    )
    assert old.breaker_key == new.breaker_key  # one engine, one circuit
    assert old.measure_key != new.measure_key  # but two measurement series
    m = Measurements()
    for _ in range(8):
        m.record(old.measure_key, 5.0, 50, T)
    assert m.latency_s(old.measure_key, [old.measure_key], T) == pytest.approx(5.0)
    assert m.latency_s(new.measure_key, [new.measure_key], T) == DEFAULT_LATENCY_S
    assert m.throughput(new.measure_key, [new.measure_key], T) is None


@given(
    latency=st.floats(min_value=1e-4, max_value=600.0, allow_nan=False),
    samples=st.integers(min_value=1, max_value=7),
    age=st.floats(min_value=0.0, max_value=MAX_AGE_S / 2),
)
def test_a_route_whose_evidence_is_the_median_estimates_exactly_the_median(
    latency: float, samples: int, age: float
) -> None:
    # The only measured engine of a model: its blend toward the model's median (itself) must be
    # exactly the value an unmeasured peer gets, or float rounding breaks the documented ties
    # (load, then lease freshness) at random. CI saw 1 request in ~20 go to the wrong engine.
    m = Measurements()
    for _ in range(samples):
        m.record(A, latency, None, T)
    assert m.latency_s(A, [A, B], T + age) == m.latency_s(B, [A, B], T + age)
