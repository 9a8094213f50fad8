"""Minimum residency and the last ready replica, checked from a hand-made event timeline
(grid/lab/sim_checks.py `timeline_violations`); each rule has a violating timeline and the
closest timeline that obeys it, with the expected verdicts worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.lab.sim_checks import LifeEvent, timeline_violations

pytestmark = pytest.mark.unit

FLOOR = {"m": 300.0, "n": 300.0}


def ready(at: float, host: str, model: str = "m") -> LifeEvent:
    return LifeEvent(at, "ready", host, model)


def drain(at: float, host: str, model: str = "m", **kw: object) -> LifeEvent:
    return LifeEvent(at, "drain", host, model, wanted=kw.pop("wanted", 1), **kw)  # type: ignore[arg-type]


def codes(events: list[LifeEvent]) -> list[str]:
    return [v.code for v in timeline_violations(events, FLOOR)]


def test_drain_before_minimum_residency_is_a_violation() -> None:
    # ready at 100 on a and b; a drained at 399 (299 s < 300 s): broken, b still serves.
    events = [ready(100, "a"), ready(100, "b"), drain(399, "a")]
    found = timeline_violations(events, FLOOR)
    assert [v.code for v in found] == ["minimum_residency_broken"]
    assert found[0].at == 399 and "299 s" in found[0].detail


def test_drain_at_minimum_residency_is_allowed() -> None:
    assert codes([ready(100, "a"), ready(100, "b"), drain(400, "a")]) == []


def test_residency_restarts_after_a_loss() -> None:
    # ready at 0, host lost at 500, ready again at 600: a drain at 800 is 200 s into the new
    # residency, not 800 s into the old one.
    events = [ready(0, "a"), ready(0, "b"), LifeEvent(500, "lost", "a"), ready(600, "a")]
    assert codes([*events, drain(800, "a")]) == ["minimum_residency_broken"]
    assert codes([*events, drain(900, "a")]) == []


def test_drain_on_a_host_that_stopped_admitting_is_not_a_residency_breach() -> None:
    events = [ready(100, "a"), ready(100, "b"), drain(200, "a", admitting=False)]
    assert codes(events) == []


def test_draining_the_last_ready_replica_while_wanted_is_a_violation() -> None:
    # b became ready only after the drain of a: the replacement was not ready first.
    events = [ready(0, "a"), drain(600, "a"), ready(660, "b")]
    found = timeline_violations(events, FLOOR)
    assert [v.code for v in found] == ["last_ready_replica_drained"]
    assert "wanted 1" in found[0].detail


def test_make_before_break_passes() -> None:
    assert codes([ready(0, "a"), ready(540, "b"), drain(600, "a")]) == []
    # another model's replica is no replacement
    assert codes([ready(0, "a"), ready(0, "b", "n"), drain(600, "a")]) == [
        "last_ready_replica_drained"
    ]
    # a replacement that was lost before the drain is no replacement either
    lost = [ready(0, "a"), ready(0, "b"), LifeEvent(500, "lost", "b"), drain(600, "a")]
    assert codes(lost) == ["last_ready_replica_drained"]


def test_last_replica_exceptions_scale_to_zero_and_preemption() -> None:
    assert codes([ready(0, "a"), drain(600, "a", wanted=0)]) == []
    assert codes([ready(0, "a"), drain(600, "a", preemption=True)]) == []


def test_both_rules_at_once() -> None:
    assert codes([ready(0, "a"), drain(60, "a")]) == [
        "minimum_residency_broken",
        "last_ready_replica_drained",
    ]


@pytest.mark.property
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    starts=st.lists(st.integers(0, 20), min_size=1, max_size=4),
    drain_minute=st.integers(0, 30),
)
def test_verdicts_match_a_per_minute_recount(starts: list[int], drain_minute: int) -> None:
    """Replicas of m become ready on hosts h0..hk at the given minutes; h0 is drained at
    `drain_minute` (if it is ready by then). Recount by minutes: residency broken iff h0 has
    been ready fewer than 5 minutes; last replica iff no other host is ready by then."""
    events = [ready(60.0 * s, f"h{i}") for i, s in enumerate(starts)]
    events.append(drain(60.0 * drain_minute, "h0"))
    expected = []
    if starts[0] <= drain_minute:
        if drain_minute - starts[0] < 5:
            expected.append("minimum_residency_broken")
        if not any(s <= drain_minute for s in starts[1:]):
            expected.append("last_ready_replica_drained")
    assert codes(events) == expected
