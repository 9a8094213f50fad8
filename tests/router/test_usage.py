from __future__ import annotations

import json

import pytest

from grid.router.usage import MAX_LINE_BYTES, SseUsageReader, Usage, usage_of

pytestmark = pytest.mark.unit


def test_usage_of_a_complete_answer() -> None:
    body = json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    assert usage_of(body.encode()) == Usage(7, 3)
    assert usage_of(b"not json") is None
    assert usage_of(b'{"usage": {"completion_tokens": -1}}') is None
    assert usage_of(b'{"usage": {"completion_tokens": true}}') is None


def _stream() -> bytes:
    events = [
        {"choices": [{"delta": {"content": "Hel"}}]},
        {"choices": [{"delta": {"content": "lo"}}]},
        {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2}},
    ]
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


@pytest.mark.parametrize("size", [1, 3, 7, 64, 10_000])
def test_stream_usage_survives_any_fragmentation(size: int) -> None:
    data = _stream()
    reader = SseUsageReader()
    for start in range(0, len(data), size):
        reader.feed(data[start : start + size])
    assert reader.usage == Usage(11, 2)


def test_oversized_and_malformed_events_are_ignored() -> None:
    reader = SseUsageReader()
    huge = b'data: {"usage": {"completion_tokens": 999}, "pad": "' + b"x" * MAX_LINE_BYTES + b'"}\n'
    reader.feed(huge)
    reader.feed(b'data: {"usage": {"completion_tokens": \n')
    assert reader.usage is None
    reader.feed(b'data: {"usage": {"completion_tokens": 5}}\r\n')
    assert reader.usage == Usage(None, 5)
