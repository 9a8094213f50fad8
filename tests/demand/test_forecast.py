"""Direct forecasts: EWMA level, positive trend, lookahead cap, p95, queue, errors, bounds."""

from __future__ import annotations

import math

import pytest

from grid.demand import DemandConfig, DemandTracker, lookahead_concurrency
from grid.fleet.models import Evidence, FleetSnapshot
from grid.planner.targets import model_target

from .helpers import BUCKET_S, concurrency_series, fill_bucket, obs, profile, profiles

pytestmark = pytest.mark.unit


def test_rpm_level_is_the_bucketed_ewma_seeded_with_the_first_bucket() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=0.5))
    for bucket, count in enumerate([4, 4, 8]):
        fill_bucket(tracker, "a", bucket, count)
    # 4 -> 4 -> 4 + 0.5 * (8 - 4) = 6 requests per minute; bucket 3 has just started and is empty,
    # which must not pull the level down.
    entry = tracker.forecast(3 * BUCKET_S, profiles("a"))["a"]
    assert entry.rpm == pytest.approx(6.0)
    assert entry.evidence is Evidence.DIRECT


def test_offered_concurrency_is_arrival_rate_times_service_time() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=1.0))
    fill_bucket(tracker, "a", 0, 12, service_time_s=10.0)
    # 12 requests a minute x 10 s each = 120 busy seconds in 60 s = 2 in service on average.
    entry = tracker.forecast(BUCKET_S, profiles("a"))["a"]
    assert entry.offered_concurrency == pytest.approx(2.0)
    assert entry.rpm == pytest.approx(12.0)


def test_rising_series_reports_its_confidence_weighted_trend() -> None:
    config = DemandConfig(level_alpha=1.0, trend_beta=1.0, trend_confidence_buckets=4)
    tracker = DemandTracker(["a"], config=config)
    concurrency_series(tracker, "a", [1.0, 2.0, 3.0, 4.0])
    entry = tracker.forecast(4 * BUCKET_S, profiles("a"))["a"]
    # Level = last bucket (alpha 1), trend = last change (beta 1) = 1 per minute, weighted by
    # 3 rises among the last 4 changes (only 3 exist): 0.75 per minute.
    assert entry.offered_concurrency == pytest.approx(4.0)
    assert entry.trend == pytest.approx(0.75)


def test_one_noisy_rise_gets_little_trend_weight() -> None:
    config = DemandConfig(level_alpha=1.0, trend_beta=1.0, trend_confidence_buckets=4)
    tracker = DemandTracker(["a"], config=config)
    concurrency_series(tracker, "a", [1.0, 1.0, 1.0, 1.0, 2.0])
    entry = tracker.forecast(5 * BUCKET_S, profiles("a"))["a"]
    assert entry.trend == pytest.approx(0.25)  # a change of 1, one rise in four


def test_steady_series_has_no_trend() -> None:
    tracker = DemandTracker(["a"])
    concurrency_series(tracker, "a", [2.0] * 8)
    entry = tracker.forecast(8 * BUCKET_S, profiles("a"))["a"]
    assert entry.trend == 0.0
    assert entry.offered_concurrency == pytest.approx(2.0)


def test_negative_trend_never_accelerates_scale_down() -> None:
    falling = DemandTracker(["a"])  # default alpha 0.3
    concurrency_series(falling, "a", [8.0, 6.0, 4.0, 2.0])
    flat = DemandTracker(["a"])
    concurrency_series(flat, "a", [2.0, 2.0, 2.0, 2.0])
    now = 4 * BUCKET_S
    down = falling.forecast(now, profiles("a"))["a"]
    # Plain EWMA, no extrapolation: 8 -> 7.4 -> 6.38 -> 5.066 (a Holt forecast would go lower).
    assert down.offered_concurrency == pytest.approx(5.066)
    assert down.trend == 0.0
    level = flat.forecast(now, profiles("a"))["a"]
    assert down.offered_concurrency >= level.offered_concurrency

    model = profile("a", max_replicas=20, replica_concurrency=1.0, target_utilization=1.0)
    snap_down = FleetSnapshot(now=now, models=[model], demand={"a": down})
    snap_flat = FleetSnapshot(now=now, models=[model], demand={"a": level})
    assert model_target(model, snap_down).desired >= model_target(model, snap_flat).desired


def test_step_trend_is_capped_so_lookahead_never_more_than_doubles() -> None:
    config = DemandConfig(level_alpha=1.0, trend_beta=1.0)
    tracker = DemandTracker(["a"], config=config)
    concurrency_series(tracker, "a", [1.0, 1.0, 1.0, 1.0, 100.0])
    entry = tracker.forecast(5 * BUCKET_S, profiles("a"))["a"]
    # Raw: change 99 x confidence 1/4 = 24.75 per minute. Over the 5-minute cap that would add
    # 123.75 > 1 x level, so the trend is held at level x (2 - 1) / 5 min = 20 per minute.
    assert entry.offered_concurrency == pytest.approx(100.0)
    assert entry.trend == pytest.approx(20.0)
    assert lookahead_concurrency(100.0, entry.trend, startup_s=3600.0) == pytest.approx(200.0)
    assert lookahead_concurrency(100.0, entry.trend, startup_s=60.0) == pytest.approx(120.0)


def test_lookahead_horizon_is_capped_at_five_minutes() -> None:
    # A small trend so that the 2x cap does not bind: only the horizon does.
    assert lookahead_concurrency(10.0, 1.0, startup_s=120.0) == pytest.approx(12.0)
    assert lookahead_concurrency(10.0, 1.0, startup_s=300.0) == pytest.approx(15.0)
    assert lookahead_concurrency(10.0, 1.0, startup_s=3000.0) == pytest.approx(15.0)
    assert lookahead_concurrency(10.0, -5.0, startup_s=300.0) == pytest.approx(10.0)


def test_planner_target_from_a_step_forecast_stays_within_twice_the_load() -> None:
    config = DemandConfig(level_alpha=1.0, trend_beta=1.0)
    tracker = DemandTracker(["a"], config=config)
    concurrency_series(tracker, "a", [1.0, 1.0, 1.0, 1.0, 30.0])
    entry = tracker.forecast(5 * BUCKET_S, profiles("a"))["a"]
    model = profile(
        "a",
        max_replicas=1000,
        replica_concurrency=1.0,
        target_utilization=1.0,
        load_estimate_s=3000.0,
    )
    snap = FleetSnapshot(now=5 * BUCKET_S, models=[model], demand={"a": entry})
    with_headroom = entry.offered_concurrency * 1.2  # default demand_headroom_fraction
    desired = model_target(model, snap).desired
    assert desired > math.ceil(with_headroom)  # the lookahead does add replicas ...
    assert desired <= math.ceil(2 * with_headroom)  # ... but at most doubles the load


def test_p95_ignores_one_outlier_among_a_hundred_but_keeps_it_as_tail() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=1.0))
    fill_bucket(tracker, "a", 0, 99, service_time_s=0.1)
    fill_bucket(tracker, "a", 0, 1, service_time_s=30.0)
    forecast = tracker.explain(BUCKET_S, profiles("a"))["a"]
    # The histogram's bins are 2**(1/4) wide: a midpoint is within about 9% of the value.
    assert forecast.entry.p95_ms == pytest.approx(100.0, rel=0.1)
    assert forecast.latency_max_ms == pytest.approx(30_000.0, rel=0.1)
    model = profile("a", latency_slo_ms=500.0, max_replicas=5)
    snap = FleetSnapshot(now=BUCKET_S, models=[model], demand={"a": forecast.entry})
    assert model_target(model, snap).reason != "pressure"


def test_p95_turns_slow_when_the_slow_share_passes_five_percent() -> None:
    tracker = DemandTracker(["a"])
    fill_bucket(tracker, "a", 0, 90, service_time_s=0.1)
    fill_bucket(tracker, "a", 0, 10, service_time_s=30.0)
    entry = tracker.forecast(BUCKET_S, profiles("a"))["a"]
    assert entry.p95_ms == pytest.approx(30_000.0, rel=0.1)


def test_queue_wait_becomes_queue_depth_and_failures_the_error_rate() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=1.0))
    # Six requests completing at 50 s after 10 s service, each queued 20 s before: 120 queued
    # seconds inside bucket 0 -> on average 2 waiting (Little's law).
    for i in range(6):
        outcome = "timeout" if i < 2 else "ok"
        tracker.observe(obs("a", 50.0, service_time_s=10.0, queue_wait_s=20.0, outcome=outcome))
    entry = tracker.forecast(BUCKET_S, profiles("a"))["a"]
    assert entry.queue_depth == pytest.approx(2.0)
    assert entry.error_rate == pytest.approx(2 / 6)


def test_long_job_spreads_its_engine_time_over_the_buckets_it_covered() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=1.0))
    tracker.observe(obs("a", 600.0, service_time_s=300.0))  # ran from 300 s to 600 s
    forecast = tracker.explain(660.0, profiles("a"))["a"]
    # One job in service for five minutes is concurrency 1 in each of those minutes, never 5.
    assert forecast.peak_concurrency == pytest.approx(1.0)


def test_partial_bucket_raises_the_level_but_never_lowers_it() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=0.5))
    fill_bucket(tracker, "a", 0, 10)
    quiet_start = tracker.forecast(BUCKET_S + 30.0, profiles("a"))["a"]
    assert quiet_start.rpm == pytest.approx(10.0)  # bucket 1 is half over and empty: no drop
    for _ in range(20):
        tracker.observe(obs("a", BUCKET_S + 20.0, service_time_s=1.0))
    # 20 requests in the first 30 s is 40 per minute: 10 + 0.5 * (40 - 10) = 25.
    busy_start = tracker.forecast(BUCKET_S + 30.0, profiles("a"))["a"]
    assert busy_start.rpm == pytest.approx(25.0)


def test_idle_demand_decays_away() -> None:
    tracker = DemandTracker(["a"])
    fill_bucket(tracker, "a", 0, 1)
    assert "a" in tracker.forecast(2 * BUCKET_S, profiles("a"))
    assert "a" not in tracker.forecast(30 * BUCKET_S, profiles("a"))


def test_burst_folds_into_its_bucket() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(level_alpha=1.0))
    for i in range(20_000):
        tracker.observe(obs("a", 30.0 + (i % 20), service_time_s=(i % 997) / 100.0))
    footprint = tracker.footprint()
    assert footprint.series == 1
    assert footprint.buckets <= 2  # service time may reach back into the previous bucket
    assert footprint.max_bins_per_bucket <= 96
    assert tracker.forecast(BUCKET_S, profiles("a"))["a"].rpm == pytest.approx(20_000.0)
