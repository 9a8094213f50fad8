"""Token counts of an OpenAI-compatible answer, read without keeping any content (pure).

`usage_of` reads a complete JSON body; `SseUsageReader` is fed a stream's bytes in whatever
fragments they arrive and remembers only the last usage block it saw. Lines are bounded: an
oversized event is skipped whole, and a malformed one is ignored. Nothing else of the stream is
retained.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MAX_LINE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def usage_from(document: object) -> Usage | None:
    if not isinstance(document, dict):
        return None
    usage = document.get("usage")
    if not isinstance(usage, dict):
        return None
    found = Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
    return found if found != Usage() else None


def usage_of(body: bytes) -> Usage | None:
    """The usage block of a complete JSON answer, or None."""
    try:
        return usage_from(json.loads(body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


class SseUsageReader:
    def __init__(self) -> None:
        self._line = bytearray()
        self._skipping = False
        self.usage: Usage | None = None

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._skipping:
                if len(self._line) + len(piece) > MAX_LINE_BYTES:
                    self._skipping = True  # oversized: drop this whole line
                    self._line.clear()
                else:
                    self._line += piece
            if end < 0:
                return
            if not self._skipping:
                self._finish(bytes(self._line))
            self._line.clear()
            self._skipping = False
            start = end + 1

    def _finish(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line.startswith(b"data:") or b'"usage"' not in line:
            return
        found = usage_of(line[5:].strip())
        if found is not None:
            self.usage = found
