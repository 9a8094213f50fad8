from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grid.fleet.models import HostState, ResidencyState
from grid.router import Measurements, Route
from grid.router.measure import (
    DEFAULT_LATENCY_S,
    MAX_AGE_S,
    MAX_TRACKED,
    MeasureKey,
    latency_s,
    record,
    throughput,
)

pytestmark = pytest.mark.unit

T = 5000.0
A, B, C = ("a:1", "m", ""), ("b:1", "m", ""), ("c:1", "m", "")


def rec(m: Measurements, key: MeasureKey, latency: float, tokens: int | None, now: float) -> None:
    m.record(key[0].rsplit(":", 1)[0], key, latency, tokens, now)  # the host of "host:port"


def test_without_evidence_the_prior_is_used() -> None:
    assert latency_s(Measurements(), A, [A, B], T) == DEFAULT_LATENCY_S
    assert throughput(Measurements(), A, [A, B], T) is None


def test_weak_evidence_blends_toward_the_peers_median() -> None:
    m = Measurements()
    for _ in range(8):
        rec(m, B, 2.0, None, T)
        rec(m, C, 4.0, None, T)
    assert latency_s(m, A, [A, B, C], T) == pytest.approx(3.0)  # no own data: the peers' median
    rec(m, A, 10.0, None, T)  # one sample: 1/8 confidence
    blended = latency_s(m, A, [A, B, C], T)
    assert blended == pytest.approx(10.0 / 8 + 4.0 * 7 / 8)  # median of 2, 4 and 10
    for _ in range(7):
        rec(m, A, 10.0, None, T)
    assert latency_s(m, A, [A, B, C], T) == pytest.approx(10.0)  # eight samples: full authority


def test_other_models_are_never_peers() -> None:
    m = Measurements()
    for _ in range(8):
        rec(m, ("b:1", "other", ""), 0.1, None, T)
    rec(m, A, 3.0, None, T)
    assert latency_s(m, A, [A, ("b:1", "other", "")], T) == pytest.approx(3.0)


def test_expired_evidence_falls_back_completely() -> None:
    m = Measurements()
    for _ in range(8):
        rec(m, A, 9.0, 90, T)
    assert latency_s(m, A, [A], T + MAX_AGE_S + 1) == DEFAULT_LATENCY_S
    assert throughput(m, A, [A], T + MAX_AGE_S + 1) is None


def test_a_stream_without_usage_refreshes_latency_only() -> None:
    m = Measurements()
    rec(m, A, 2.0, 100, T)
    rec(m, A, 1.0, None, T + 10)
    assert throughput(m, A, [A], T + 10) == pytest.approx(50.0, rel=0.05)


def test_memory_stays_bounded_and_forgets_the_stalest_estimates() -> None:
    m = Measurements()
    for index in range(MAX_TRACKED + 50):
        rec(m, (f"h:{index}", "m", ""), 1.0 + index, None, T + index)
    stalest, newest = ("h:0", "m", ""), (f"h:{MAX_TRACKED + 49}", "m", "")
    now = T + MAX_TRACKED + 49
    assert latency_s(m, newest, [newest], now) == pytest.approx(MAX_TRACKED + 50.0)
    assert latency_s(m, stalest, [stalest], now) == DEFAULT_LATENCY_S  # forgotten
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
        rec(m, old.measure_key, 5.0, 50, T)
    assert latency_s(m, old.measure_key, [old.measure_key], T) == pytest.approx(5.0)
    assert latency_s(m, new.measure_key, [new.measure_key], T) == DEFAULT_LATENCY_S
    assert throughput(m, new.measure_key, [new.measure_key], T) is None


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
        rec(m, A, latency, None, T)
    assert latency_s(m, A, [A, B], T + age) == latency_s(m, B, [A, B], T + age)


def test_one_record_feeds_routing_and_placement_from_one_store() -> None:
    route = Route(
        "h", "m", 9000, HostState.ACCEPTING, ResidencyState.READY, T, artifact_sha256="A" * 64
    )
    m = Measurements()
    record(m, route, 1.0, None, T)  # latency only: no placement evidence
    assert m.models_of("h") == set()
    assert m.estimate("h", "m", "a" * 64, 60.0, T).samples == 0
    record(m, route, 2.0, 100, T)  # 50 tok/s, one sample: 1/8 of it over the 60 tok/s prior
    assert m.models_of("h") == {"m"} and len(m) == 1
    assert m.estimate("h", "m", "a" * 64, 60.0, T).tokens_per_s == pytest.approx(58.75)
    assert throughput(m, route.measure_key, [route.measure_key], T) == pytest.approx(50.0)
