"""Slot activity parsing: anything not certainly readable is UNKNOWN (fails safe)."""

from __future__ import annotations

import pytest

from grid.node.engines.probes import ActivityState, parse_slots

pytestmark = pytest.mark.unit


def test_all_slots_idle_is_idle() -> None:
    activity = parse_slots([{"id": 0, "is_processing": False}, {"id": 1, "is_processing": False}])
    assert (activity.state, activity.processing, activity.slots) == (ActivityState.IDLE, 0, 2)


def test_one_processing_slot_makes_the_engine_busy() -> None:
    activity = parse_slots([{"id": 0, "is_processing": False}, {"id": 1, "is_processing": True}])
    assert (activity.state, activity.processing) == (ActivityState.BUSY, 1)
    assert not activity.idle


@pytest.mark.parametrize(
    "payload",
    [
        None,
        {},
        {"slots": []},
        [],
        ["slot"],
        [{"id": 0}],
        [{"id": 0, "is_processing": "false"}],
        [{"id": 0, "is_processing": 0}],
        [{"id": 0, "is_processing": False}, {"id": 1}],
    ],
)
def test_malformed_or_missing_answers_are_unknown(payload: object) -> None:
    activity = parse_slots(payload)
    assert activity.state is ActivityState.UNKNOWN
    assert activity.reason
    assert not activity.idle
