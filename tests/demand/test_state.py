"""Persistence: the state survives JSON, restores the same forecasts, and refuses bad input."""

from __future__ import annotations

import json

import pytest

from grid.demand import DemandConfig, DemandTracker
from grid.fleet.errors import GridError

from .helpers import BUCKET_S, correlation_config, fill_bucket, obs, profiles

pytestmark = pytest.mark.unit

MODELS = ("a", "b", "c")


def _busy_tracker(config: DemandConfig) -> DemandTracker:
    tracker = DemandTracker(MODELS, retiring=["c"], config=config)
    for bucket in range(12):
        fill_bucket(tracker, "a", bucket, bucket + 1, service_time_s=7.0, queue_wait_s=2.0)
        if bucket % 3 == 0:
            fill_bucket(tracker, "b", bucket, 2, service_time_s=0.3, outcome="error")
    tracker.observe(obs("nobody", 100.0))
    tracker.observe(obs("c", 100.0))
    return tracker


def test_state_round_trips_through_json_to_identical_behaviour() -> None:
    config = correlation_config()
    original = _busy_tracker(config)
    restored = DemandTracker.from_state(json.loads(json.dumps(original.to_state())), config)
    now = 12 * BUCKET_S + 10.0
    assert restored.forecast(now, profiles(*MODELS)) == original.forecast(now, profiles(*MODELS))
    assert restored.correlations(now) == original.correlations(now)
    assert restored.footprint() == original.footprint()
    assert (
        restored.ignored
        == original.ignored
        == {
            "unknown_model": 1,
            "retiring_model": 1,
            "stale": 0,
            "future": 0,
        }
    )
    assert restored.retiring == frozenset({"c"})
    # Both keep evolving identically.
    for tracker in (original, restored):
        fill_bucket(tracker, "b", 12, 5)
    later = 13 * BUCKET_S
    assert restored.forecast(later, profiles(*MODELS)) == original.forecast(
        later, profiles(*MODELS)
    )
    assert restored.to_state() == original.to_state()


def test_restoring_under_a_shorter_retention_drops_old_buckets() -> None:
    original = _busy_tracker(DemandConfig(retention_buckets=60))
    restored = DemandTracker.from_state(original.to_state(), DemandConfig(retention_buckets=4))
    assert restored.footprint().max_buckets_per_series <= 5
    assert original.footprint().max_buckets_per_series > 5


def test_state_cannot_smuggle_in_unconfigured_series() -> None:
    state = _busy_tracker(DemandConfig()).to_state()
    state["configured"] = ["b"]
    restored = DemandTracker.from_state(state)
    assert set(restored.forecast(12 * BUCKET_S, profiles(*MODELS))) <= {"b"}
    assert restored.footprint().series == 1


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s.update(version=2),
        lambda s: s.pop("series"),
        lambda s: s.update(watermark="soon"),
        lambda s: s["series"]["a"][0].update(arrivals=-1),
        lambda s: s["series"]["a"][0].update(busy_s=float("inf")),
        lambda s: s["series"]["a"][0].update(latency=[[500, 1]]),
        lambda s: s.update(extra_field=1),
    ],
)
def test_corrupt_state_is_refused_with_a_code(mutate: object) -> None:
    state = _busy_tracker(DemandConfig()).to_state()
    mutate(state)  # type: ignore[operator]
    with pytest.raises(GridError) as err:
        DemandTracker.from_state(state)
    assert err.value.code == "invalid_demand_state"


def test_state_with_another_bucket_length_is_refused() -> None:
    state = _busy_tracker(DemandConfig()).to_state()
    with pytest.raises(GridError) as err:
        DemandTracker.from_state(state, DemandConfig(bucket_s=30.0))
    assert err.value.code == "demand_state_incompatible"
