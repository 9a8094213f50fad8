"""Which observations create demand: configured, non-retiring model IDs only; bad input refused."""

from __future__ import annotations

import pytest

from grid.demand import DemandConfig, DemandTracker, Observation, parse_observation
from grid.fleet.errors import GridError

from .helpers import BUCKET_S, fill_bucket, obs, profiles

pytestmark = pytest.mark.unit


def test_unknown_model_ids_create_no_series_and_are_counted() -> None:
    tracker = DemandTracker(["a"])
    for i in range(5_000):
        assert tracker.observe(obs(f"random-name-{i}", 30.0)) is False
    assert tracker.footprint().series == 0
    assert tracker.ignored["unknown_model"] == 5_000
    assert tracker.forecast(BUCKET_S, profiles("a")) == {}


def test_retiring_model_creates_no_series() -> None:
    tracker = DemandTracker(["a", "old"], retiring=["old"])
    assert tracker.observe(obs("old", 30.0)) is False
    assert tracker.ignored["retiring_model"] == 1
    assert tracker.forecast(BUCKET_S, profiles("a", "old")) == {}


def test_removing_or_retiring_a_model_clears_its_history() -> None:
    tracker = DemandTracker(["a", "b"])
    fill_bucket(tracker, "a", 0, 3)
    fill_bucket(tracker, "b", 0, 3)
    tracker.configure(["a", "b"], retiring=["b"])
    assert set(tracker.forecast(BUCKET_S, profiles("a", "b"))) == {"a"}
    tracker.configure(["b"])  # profile b re-created, a removed: b starts from nothing
    assert tracker.forecast(BUCKET_S, profiles("a", "b")) == {}


def test_fallback_server_never_becomes_direct_demand() -> None:
    tracker = DemandTracker(["a"])
    tracker.observe(obs("auto", 30.0, served_model_id="a", workload="coding"))
    assert tracker.forecast(BUCKET_S, profiles("a")) == {}
    assert tracker.ignored["unknown_model"] == 1


def test_forecast_only_names_the_given_profiles() -> None:
    tracker = DemandTracker(["a", "b"])
    fill_bucket(tracker, "a", 0, 3)
    fill_bucket(tracker, "b", 0, 3)
    assert set(tracker.forecast(BUCKET_S, profiles("b"))) == {"b"}


def test_far_future_observation_is_refused_and_does_not_erase_history() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(retention_buckets=10))
    fill_bucket(tracker, "a", 0, 3)
    now = 50.0
    assert tracker.observe(obs("a", now + 100 * BUCKET_S), now=now) is False
    assert tracker.ignored["future"] == 1
    assert tracker.forecast(BUCKET_S, profiles("a"))["a"].rpm == pytest.approx(3.0)


def test_observation_older_than_retention_is_refused() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(retention_buckets=10))
    now = 100 * BUCKET_S
    tracker.prune(now)
    assert tracker.observe(obs("a", now - 50 * BUCKET_S), now=now) is False
    assert tracker.ignored["stale"] == 1
    assert tracker.footprint().buckets == 0


def test_history_leaves_the_window_as_time_passes() -> None:
    tracker = DemandTracker(["a"], config=DemandConfig(retention_buckets=10))
    fill_bucket(tracker, "a", 0, 3)
    tracker.prune(5 * BUCKET_S)
    assert tracker.footprint().buckets == 1
    tracker.prune(11 * BUCKET_S)
    assert tracker.footprint().series == 0


def test_observation_has_no_place_for_content_or_identity() -> None:
    for field in ("prompt", "response", "api_key", "user", "messages"):
        with pytest.raises(GridError) as err:
            parse_observation({"model_id": "a", "timestamp": 1.0, field: "secret"})
        assert err.value.code == "invalid_observation"
        assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("service_time_s", -1.0),
        ("service_time_s", float("inf")),
        ("queue_wait_s", float("nan")),
        ("timestamp", -5.0),
        ("outcome", "maybe"),
        ("modality", "audio-ish"),
        ("workload", "Not A Word"),
    ],
)
def test_invalid_observation_fields_are_refused_with_a_code(field: str, value: object) -> None:
    with pytest.raises(GridError) as err:
        parse_observation({"model_id": "a", "timestamp": 1.0, field: value})
    assert err.value.code == "invalid_observation"
    assert err.value.path == field


def test_workload_must_come_from_the_configured_vocabulary() -> None:
    parsed = parse_observation({"model_id": "a", "timestamp": 1.0, "workload": "coding"})
    assert isinstance(parsed, Observation)
    with pytest.raises(GridError) as err:
        parse_observation({"model_id": "a", "timestamp": 1.0, "workload": "poetry"})
    assert err.value.code == "unknown_workload"
    custom = parse_observation(
        {"model_id": "a", "timestamp": 1.0, "workload": "poetry"}, workloads=["poetry"]
    )
    assert custom.workload == "poetry"


def test_bad_config_is_refused_with_a_code() -> None:
    with pytest.raises(GridError) as err:
        DemandConfig(bucket_s=0.0)
    assert err.value.code == "invalid_demand_config"
