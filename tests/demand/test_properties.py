"""Property: whatever the observation stream, memory stays bounded and forecasts stay sane."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.demand import DemandConfig, DemandTracker, Observation
from grid.demand.histogram import LATENCY_BINS

from .helpers import profiles

pytestmark = pytest.mark.property

RETENTION = 8
CONFIGURED = ("a", "b", "c")
CONFIG = DemandConfig(retention_buckets=RETENTION, min_support_buckets=2)

seconds = st.floats(min_value=0.0, max_value=86_400.0, allow_nan=False)
observations = st.builds(
    Observation,
    model_id=st.sampled_from([*CONFIGURED, "old", "auto", "x" * 200]),
    timestamp=st.floats(min_value=0.0, max_value=5_000.0, allow_nan=False),
    service_time_s=st.one_of(st.just(0.0), seconds, st.floats(0.0, 5.0)),
    queue_wait_s=st.one_of(st.just(0.0), seconds, st.floats(0.0, 5.0)),
    queue_depth=st.integers(min_value=0, max_value=1_000_000),
    outcome=st.sampled_from(["ok", "error", "timeout"]),
    input_units=st.floats(min_value=0.0, max_value=1e12, allow_nan=False),
)
steps = st.lists(
    st.tuples(observations, st.one_of(st.none(), st.floats(0.0, 6_000.0))),
    max_size=120,
)


@settings(
    derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(steps=steps, probe=st.floats(min_value=0.0, max_value=7_000.0))
def test_memory_bounded_and_forecasts_finite(
    steps: list[tuple[Observation, float | None]], probe: float
) -> None:
    tracker = DemandTracker(CONFIGURED, retiring=["old"], config=CONFIG)
    for obs, now in steps:
        tracker.observe(obs, now=now)
        footprint = tracker.footprint()
        assert footprint.series <= len(CONFIGURED)
        assert footprint.max_buckets_per_series <= RETENTION + 1
        assert footprint.max_bins_per_bucket <= LATENCY_BINS

    for now in (probe, *(n for _, n in steps[-3:] if n is not None)):
        forecast = tracker.explain(now, profiles(*CONFIGURED, "old", "auto"))
        assert set(forecast) <= set(CONFIGURED)
        for item in forecast.values():
            entry = item.entry
            for value in (
                entry.offered_concurrency,
                entry.rpm,
                entry.queue_depth,
                entry.p95_ms,
                entry.trend,
            ):
                assert math.isfinite(value) and value >= 0.0
            assert 0.0 <= entry.error_rate <= 1.0
            if item.inferred_from is not None:
                assert entry.rpm <= 2.0 * item.peak_rpm + 1e-9

    restored = DemandTracker.from_state(tracker.to_state(), CONFIG)
    assert restored.forecast(probe, profiles(*CONFIGURED)) == tracker.forecast(
        probe, profiles(*CONFIGURED)
    )
