"""A fake monotonic clock for budget tests: every reading advances it by a fixed step.

It stands in for `time.perf_counter` (an outside thing) in unit tests of pure planning code, so
tests can say "each phase takes one second" without timing anything.
"""

from __future__ import annotations


class FakeStepClock:
    def __init__(self, step_s: float, start: float = 0.0) -> None:
        self.step_s = step_s
        self.now = start
        self.readings = 0

    def __call__(self) -> float:
        value = self.now
        self.now += self.step_s
        self.readings += 1
        return value
