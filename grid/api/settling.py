"""The restart window of the inference boundary (issue 15, defect 8).

Routes are memory only (the engine keys must never reach a file), so a controller that has just
started knows none until each node's first heartbeat, which is due within its heartbeat interval
(2 s by default). For `ROUTE_SETTLE_S` after the app starts, a request that finds no route for a
configured model, and `GET /v1/models` that finds none at all, wait for the first heartbeats
(polling every `POLL_S`, never past the window) instead of answering "nothing is served". After
the window every answer is immediate, as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

ROUTE_SETTLE_S = 3.0
POLL_S = 0.1

T = TypeVar("T")


class RouteWindow:
    def __init__(self, settle_s: float = ROUTE_SETTLE_S) -> None:
        self.until = time.monotonic() + settle_s

    def left_s(self) -> float:
        return max(0.0, self.until - time.monotonic())

    async def retry(
        self, attempt: Callable[[], Awaitable[T]], settled: Callable[[T], bool], first: T
    ) -> T:
        """`first`, or, while the window lasts and `first` is not settled, the first settled
        result of `attempt` (the last one when the window closes)."""
        result = first
        while not settled(result) and self.left_s() > 0:
            await asyncio.sleep(min(POLL_S, self.left_s()))
            result = await attempt()
        return result
