"""Workload forecasts: hand-worked EWMA numbers, separation from model demand, bounds, state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.demand import DemandConfig, DemandTracker, Observation
from grid.demand.workloads import WorkloadTracker, feeds_workload
from grid.fleet.models import FleetSnapshot
from tests.demand.helpers import obs, profiles

pytestmark = pytest.mark.unit

B = 60.0  # the default bucket length


def auto(workload: str, timestamp: float, **fields: object) -> Observation:
    return obs("auto", timestamp, workload=workload, **fields)


def test_offered_concurrency_is_the_smoothed_busy_time_plus_the_queue() -> None:
    tracker = WorkloadTracker()
    # Bucket 8: two 30 s coding requests, served inside the bucket -> 60 busy s = 1.0 in service.
    for _ in range(2):
        tracker.observe(auto("coding", 8 * B + 45, service_time_s=30.0))
    # Bucket 9: one 30 s request (0.5 in service) that failed and saw 2 requests queued behind it.
    tracker.observe(auto("coding", 9 * B + 45, service_time_s=30.0, queue_depth=2, outcome="error"))
    now = 10 * B + 30  # half-way through bucket 10, which has no requests yet
    got = tracker.forecast(now)["coding"]
    # EWMA (alpha 0.3) seeded with bucket 8, then bucket 9; the empty current bucket cannot
    # lower the level.
    concurrency = 1.0 + 0.3 * (0.5 - 1.0)  # 0.85
    queue = 0.0 + 0.3 * (2.0 - 0.0)  # 0.6
    rpm = 2.0 + 0.3 * (1.0 - 2.0)  # 1.7
    assert got.offered_concurrency == pytest.approx(concurrency + queue)  # 1.45
    assert got.queue_depth == pytest.approx(queue)
    assert got.rpm == pytest.approx(rpm)
    assert got.observations == 3
    assert got.failure_rate == pytest.approx(1 / 3)
    assert got.modality.value == "text"


def test_a_long_job_counts_by_its_device_time() -> None:
    tracker = WorkloadTracker()
    # One 90 s video job from 8*60 to 9*60+30: busy 60 s in bucket 8 and 30 s in bucket 9.
    tracker.observe(auto("video", 9 * B + 30, service_time_s=90.0, modality="video"))
    got = tracker.forecast(10 * B + 1)["video"]
    assert got.observations == 1
    # Concurrency 1.0 then 0.5: level 1.0 + 0.3 * (0.5 - 1.0) = 0.85, although only one
    # request arrived (1 rpm x 1.5 min of service).
    assert got.offered_concurrency == pytest.approx(0.85)
    assert got.modality.value == "video"
    # Rates: 0 arrivals in bucket 8 (busy only), 1 in bucket 9: 0 + 0.3 * (1 - 0) = 0.3 rpm.
    assert got.rpm == pytest.approx(0.3)


def test_a_rising_series_reports_a_positive_trend() -> None:
    tracker = WorkloadTracker()
    for bucket, count in enumerate([1, 2, 3, 4, 5]):
        for _ in range(count):
            tracker.observe(auto("research", bucket * B + 50, service_time_s=12.0))
    reading = tracker.readings(5 * B + 1)["research"]
    assert reading.trend_per_minute > 0
    assert reading.mean_service_s == pytest.approx(12.0)
    assert reading.forecast.observations == 15


def test_named_requests_are_model_demand_and_auto_requests_workload_demand() -> None:
    configured = {"coder"}
    named = obs("coder", 8 * B + 45, workload="coding", service_time_s=30.0)
    unbound = auto("coding", 8 * B + 45, service_time_s=30.0, served_model_id="coder")
    assert not feeds_workload(named, configured) and feeds_workload(unbound, configured)
    models, workloads = DemandTracker(configured), WorkloadTracker()
    for o in (named, unbound):
        (workloads if feeds_workload(o, configured) else models).observe(o)
    now = 9 * B + 1
    assert models.forecast(now, profiles("coder"))["coder"].offered_concurrency == 0.5
    assert workloads.forecast(now)["coding"].offered_concurrency == pytest.approx(0.5)
    assert workloads.forecast(now)["coding"].observations == 1


def test_unknown_words_and_stale_requests_are_ignored_and_counted() -> None:
    tracker = WorkloadTracker(DemandConfig(workloads=("general", "coding")))
    assert not tracker.observe(auto("cooking", 100.0))
    assert tracker.observe(auto("coding", 100.0 * B))
    assert not tracker.observe(auto("coding", 1.0))  # 99 buckets older than the newest
    assert tracker.ignored["unknown_workload"] == 1 and tracker.ignored["stale"] == 1
    assert set(tracker.forecast(100.0 * B + 1)) == {"coding"}


def test_the_forecast_is_a_valid_snapshot_mapping_and_survives_a_restart() -> None:
    tracker = WorkloadTracker()
    tracker.observe(auto("image", 8 * B + 45, service_time_s=40.0, modality="image"))
    tracker.observe(auto("coding", 8 * B + 50, service_time_s=3.0))
    now = 9 * B + 10
    snap = FleetSnapshot(now=now, workloads=tracker.forecast(now))
    assert set(snap.workloads) == {"coding", "image"}
    again = WorkloadTracker.from_state(tracker.to_state())
    assert again.forecast(now) == tracker.forecast(now)


def test_a_restore_keeps_only_configured_words() -> None:
    tracker = WorkloadTracker()
    tracker.observe(auto("marketing", 8 * B + 45, service_time_s=10.0))
    tracker.observe(auto("sales", 8 * B + 45, service_time_s=10.0))
    narrower = DemandConfig(workloads=("general", "sales"))
    again = WorkloadTracker.from_state(tracker.to_state(), narrower)
    assert set(again.forecast(9 * B)) == {"sales"}


WORDS = st.sampled_from(["general", "coding", "image", "video", "cooking", "x"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            WORDS,
            st.floats(min_value=0, max_value=50_000),
            st.floats(min_value=0, max_value=5_000),
        ),
        max_size=80,
    )
)
def test_history_stays_bounded_by_the_vocabulary_and_retention(
    requests: list[tuple[str, float, float]],
) -> None:
    config = DemandConfig(retention_buckets=10, workloads=("general", "coding", "image", "video"))
    tracker = WorkloadTracker(config)
    for word, stamp, service in requests:
        tracker.observe(auto(word, stamp, service_time_s=service), stamp)
    footprint = tracker.footprint()
    assert footprint.series <= 4
    assert footprint.max_buckets_per_series <= config.retention_buckets + 1
    newest = max((stamp for _w, stamp, _s in requests), default=0.0)
    forecast = tracker.forecast(newest)
    assert set(forecast) <= set(config.workloads)
    assert all(f.offered_concurrency >= f.queue_depth >= 0 for f in forecast.values())
    accepted = sum(1 for w, _t, _s in requests if w in config.workloads)
    assert sum(f.observations for f in forecast.values()) <= accepted
