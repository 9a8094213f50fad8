"""The breaker's numbers are a policy: defaults from the spec, every one configurable."""

from __future__ import annotations

import pytest

from grid.fleet.errors import GridError
from grid.router import BreakerOutcome, BreakerPolicy, CircuitBreakers

pytestmark = pytest.mark.unit

KEY = ("h:1", "m")
T = 1000.0


def open_periods(b: CircuitBreakers, count: int) -> list[float]:
    """Seconds each of `count` consecutive reopenings keeps the route closed (probe fails)."""
    periods: list[float] = []
    now = T
    for _ in range(b.policy.failures_to_open):
        b.record(KEY, BreakerOutcome.FAILURE, now)
    for _ in range(count):
        closed_at = now
        while not b.available(KEY, now):
            now += 0.25
        periods.append(now - closed_at)
        b.begin(KEY, now)  # the half-open probe ...
        b.record(KEY, BreakerOutcome.FAILURE, now)  # ... fails and reopens the circuit
    return periods


def test_the_defaults_are_the_spec_numbers() -> None:
    # Spec: a 429 opens a one-second cooldown; two consecutive failures open the circuit with
    # exponential backoff capped at 30 s.
    b = CircuitBreakers()
    assert open_periods(b, 7) == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    b = CircuitBreakers()
    b.record(KEY, BreakerOutcome.RATE_LIMITED, T)
    assert not b.available(KEY, T + 0.99) and b.available(KEY, T + 1.0)


@pytest.mark.parametrize(
    ("overrides", "periods"),
    [
        ({"first_backoff_s": 5.0, "max_backoff_s": 12.0}, [5.0, 10.0, 12.0, 12.0]),
        ({"first_backoff_s": 0.5, "max_backoff_s": 0.5}, [0.5, 0.5, 0.5, 0.5]),
        ({"failures_to_open": 4, "first_backoff_s": 2.0}, [2.0, 4.0, 8.0, 16.0]),
    ],
)
def test_backoff_follows_the_configured_numbers(
    overrides: dict[str, float], periods: list[float]
) -> None:
    assert open_periods(CircuitBreakers(BreakerPolicy(**overrides)), 4) == periods


@pytest.mark.parametrize("needed", [1, 3, 5])
def test_the_circuit_opens_after_the_configured_failure_count(needed: int) -> None:
    b = CircuitBreakers(BreakerPolicy(failures_to_open=needed))
    for _ in range(needed - 1):
        b.record(KEY, BreakerOutcome.FAILURE, T)
        assert b.available(KEY, T)
    b.record(KEY, BreakerOutcome.FAILURE, T)
    assert b.state(KEY, T) == "open"


def test_rate_limit_cooldown_probe_timeout_and_memory_bound_are_configurable() -> None:
    policy = BreakerPolicy(rate_limit_cooldown_s=2.5, probe_timeout_s=7.0, max_tracked=3)
    b = CircuitBreakers(policy)
    b.record(KEY, BreakerOutcome.RATE_LIMITED, T)
    assert not b.available(KEY, T + 2.49) and b.available(KEY, T + 2.5)
    b.begin(KEY, T + 2.5)  # the probe never reports back
    assert not b.available(KEY, T + 9.49)
    assert b.available(KEY, T + 9.5)  # 7 s after it was sent
    for index in range(10):
        b.record((f"h:{index}", "m"), BreakerOutcome.FAILURE, T)
    assert len(b) == 3


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"failures_to_open": 0}, "failures_to_open"),
        ({"failures_to_open": 1.5}, "failures_to_open"),
        ({"failures_to_open": True}, "failures_to_open"),
        ({"max_tracked": 0}, "max_tracked"),
        ({"rate_limit_cooldown_s": 0}, "rate_limit_cooldown_s"),
        ({"first_backoff_s": -1.0}, "first_backoff_s"),
        ({"max_backoff_s": float("inf")}, "max_backoff_s"),
        ({"probe_timeout_s": float("nan")}, "probe_timeout_s"),
        ({"probe_timeout_s": "60"}, "probe_timeout_s"),
        ({"first_backoff_s": 10.0, "max_backoff_s": 5.0}, "max_backoff_s"),
        ({"cooldown": 1.0}, "cooldown"),
    ],
)
def test_bad_numbers_get_a_stable_code_and_name_the_setting(
    overrides: dict[str, object], named: str
) -> None:
    with pytest.raises(GridError) as caught:
        BreakerPolicy.from_overrides(overrides)
    assert caught.value.code == "invalid_breaker_config"
    assert named in caught.value.message and caught.value.fix
