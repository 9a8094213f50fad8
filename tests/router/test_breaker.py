from __future__ import annotations

import pytest

from grid.router import BreakerOutcome, CircuitBreakers, classify_status
from grid.router.breaker import MAX_BACKOFF_S, MAX_TRACKED

pytestmark = pytest.mark.unit

KEY = ("h:1", "m")
T = 1000.0


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, BreakerOutcome.SUCCESS),
        (204, BreakerOutcome.SUCCESS),
        (429, BreakerOutcome.RATE_LIMITED),
        (500, BreakerOutcome.FAILURE),
        (503, BreakerOutcome.FAILURE),
        (None, BreakerOutcome.FAILURE),
        (400, BreakerOutcome.CALLER_ERROR),
        (404, BreakerOutcome.CALLER_ERROR),
    ],
)
def test_statuses_are_classified(status: int | None, outcome: BreakerOutcome) -> None:
    assert classify_status(status) is outcome


def test_429_opens_a_one_second_cooldown_at_once() -> None:
    b = CircuitBreakers()
    b.record(KEY, BreakerOutcome.RATE_LIMITED, T)
    assert not b.available(KEY, T + 0.99)
    assert b.available(KEY, T + 1.0)


def test_one_failure_does_not_open_two_consecutive_do() -> None:
    b = CircuitBreakers()
    b.record(KEY, BreakerOutcome.FAILURE, T)
    assert b.available(KEY, T)
    b.record(KEY, BreakerOutcome.FAILURE, T)
    assert b.state(KEY, T) == "open"
    assert not b.available(KEY, T + 0.5)


def test_a_success_between_failures_resets_the_streak() -> None:
    b = CircuitBreakers()
    b.record(KEY, BreakerOutcome.FAILURE, T)
    b.record(KEY, BreakerOutcome.SUCCESS, T)
    b.record(KEY, BreakerOutcome.FAILURE, T)
    assert b.available(KEY, T) and len(b) == 1


def test_caller_errors_neither_count_nor_reset() -> None:
    b = CircuitBreakers()
    for _ in range(10):
        b.record(KEY, BreakerOutcome.CALLER_ERROR, T)
    assert b.available(KEY, T) and len(b) == 0
    b.record(KEY, BreakerOutcome.FAILURE, T)
    b.record(KEY, BreakerOutcome.CALLER_ERROR, T)
    b.record(KEY, BreakerOutcome.FAILURE, T)
    assert not b.available(KEY, T)


def test_half_open_admits_one_probe_and_its_outcome_decides() -> None:
    b = CircuitBreakers()
    b.record(KEY, BreakerOutcome.FAILURE, T)
    b.record(KEY, BreakerOutcome.FAILURE, T)  # open for 1 s
    assert b.state(KEY, T + 1.0) == "half_open"
    assert b.available(KEY, T + 1.0)
    b.begin(KEY, T + 1.0)  # the probe is in flight
    assert not b.available(KEY, T + 1.1)
    b.record(KEY, BreakerOutcome.FAILURE, T + 1.2)  # probe failed: reopen with 2 s
    assert not b.available(KEY, T + 3.1)
    assert b.available(KEY, T + 3.2)
    b.begin(KEY, T + 3.2)
    b.record(KEY, BreakerOutcome.SUCCESS, T + 3.3)
    assert b.state(KEY, T + 3.3) == "closed" and len(b) == 0


def test_backoff_doubles_and_is_capped_at_30_seconds() -> None:
    b = CircuitBreakers()
    now = T
    opened_for = []
    b.record(KEY, BreakerOutcome.FAILURE, now)
    for _ in range(10):
        b.record(KEY, BreakerOutcome.FAILURE, now)
        start = now
        while not b.available(KEY, now):
            now += 0.25
        opened_for.append(now - start)
        b.begin(KEY, now)
    assert opened_for[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert max(opened_for) == MAX_BACKOFF_S


def test_breakers_are_per_engine_and_model() -> None:
    b = CircuitBreakers()
    for _ in range(2):
        b.record(("h:1", "broken"), BreakerOutcome.FAILURE, T)
    assert not b.available(("h:1", "broken"), T)
    assert b.available(("h:1", "healthy"), T)
    assert b.available(("h:2", "broken"), T)


def test_memory_stays_bounded_and_forgets_the_circuits_closest_to_closing() -> None:
    b = CircuitBreakers()
    for index in range(MAX_TRACKED + 50):
        b.record((f"h:{index}", "m"), BreakerOutcome.RATE_LIMITED, T + index)
    assert len(b) == MAX_TRACKED
    assert b.available(("h:0", "m"), T)  # the earliest cooldown was forgotten
    newest = (f"h:{MAX_TRACKED + 49}", "m")
    assert not b.available(newest, T + MAX_TRACKED + 49)
