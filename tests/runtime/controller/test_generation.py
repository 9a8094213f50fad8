"""Plan generations: epoch:sequence:digest, ordered by sequence, never by the clock."""

from __future__ import annotations

import pytest

from grid.fleet.errors import GridError
from grid.fleet.generation import PlanGeneration
from grid.runtime.controller.generation import GenerationCounter, input_digest

pytestmark = pytest.mark.unit


def test_same_inputs_keep_the_generation_and_new_inputs_advance_it() -> None:
    counter = GenerationCounter(epoch="e1")
    first, new1 = counter.advance(input_digest({"hosts": [1]}))
    again, new2 = counter.advance(input_digest({"hosts": [1]}))
    second, new3 = counter.advance(input_digest({"hosts": [2]}))
    assert (new1, new2, new3) == (True, False, True)
    assert first == again and second.sequence == first.sequence + 1
    assert second.newer_than(first) is True and first.newer_than(second) is False


def test_digest_ignores_key_order() -> None:
    assert input_digest({"a": 1, "b": [1, 2]}) == input_digest({"b": [1, 2], "a": 1})
    assert input_digest({"a": 1}) != input_digest({"a": 2})


def test_text_form_sorts_like_the_sequence_and_parses_back() -> None:
    early = PlanGeneration("e1", 9, "d")
    late = PlanGeneration("e1", 10, "c")
    assert str(late).split(":")[1] == "00000000000000000010"
    assert str(early) < str(late)  # zero-padded: lexicographic order is sequence order
    assert PlanGeneration.parse(str(late)) == late


@pytest.mark.parametrize("text", ["", "a:b", "e:12x:d", "e::d", "e:1:"])
def test_malformed_generation_is_refused(text: str) -> None:
    with pytest.raises(GridError) as err:
        PlanGeneration.parse(text)
    assert err.value.code == "invalid_plan_generation"


def test_different_epochs_are_not_comparable() -> None:
    assert PlanGeneration("e1", 5, "d").newer_than(PlanGeneration("e2", 1, "d")) is None


def test_counter_survives_a_round_trip_and_rejects_garbage() -> None:
    counter = GenerationCounter(epoch="e1")
    counter.advance("d1")
    counter.advance("d2")
    restored = GenerationCounter.from_state(counter.to_state())
    nxt, _ = restored.advance("d3")
    assert (nxt.epoch, nxt.sequence) == ("e1", 3)
    for bad in (
        None,
        [],
        {"epoch": "", "sequence": 1},
        {"epoch": "e", "sequence": -1},
        {"epoch": "a:b", "sequence": 1},
        {"epoch": "e", "sequence": True},
    ):
        fresh = GenerationCounter.from_state(bad)
        assert fresh.sequence == 0 and fresh.epoch not in ("", "e", "a:b")
