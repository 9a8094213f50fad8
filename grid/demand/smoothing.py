"""Bucketed EWMA, a confidence-weighted positive trend, and the capped cold-start lookahead.

The level is an EWMA over complete buckets, seeded with the first bucket that has data. The
trend is an EWMA of the level's bucket-to-bucket changes, weighted by how many of the last few
changes were rises, so one noisy slope counts little. Only a positive trend is ever reported:
a falling series lowers the level through the EWMA alone, so a negative trend never speeds up
scale-down. The unfinished current bucket may raise the level, never lower it, because a
minute that has barely started looks quiet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

_RISE_EPSILON = 1e-12


@dataclass(frozen=True)
class Smoothed:
    level: float
    trend: float  # level change per bucket, signed
    confidence: float  # share of the recent level changes that were rises, in [0, 1]


def smooth(values: Sequence[float], alpha: float, beta: float, window: int) -> Smoothed:
    """EWMA level and trend over `values` (oldest first, starting at the first data)."""
    if not values:
        return Smoothed(0.0, 0.0, 0.0)
    level = values[0]
    trend = 0.0
    rises: deque[bool] = deque(maxlen=window)
    for value in values[1:]:
        new_level = level + alpha * (value - level)
        change = new_level - level
        trend = beta * change + (1.0 - beta) * trend
        rises.append(change > _RISE_EPSILON)
        level = new_level
    return Smoothed(level=level, trend=trend, confidence=sum(rises) / window)


def raise_with_partial(level: float, partial_value: float, alpha: float) -> float:
    """Fold the unfinished bucket in only when it is above the level."""
    return max(level, level + alpha * (partial_value - level))


def positive_trend_per_minute(
    smoothed: Smoothed,
    level: float,
    bucket_s: float,
    lookahead_cap_s: float,
    lookahead_max_factor: float,
) -> float:
    """The reported trend (concurrency units per minute): positive, confidence-weighted, and
    small enough that projecting it over the longest lookahead adds at most (factor - 1) x level.
    """
    if smoothed.trend <= 0 or level <= 0:
        return 0.0
    per_minute = smoothed.trend * smoothed.confidence * 60.0 / bucket_s
    if lookahead_cap_s <= 0:
        return per_minute
    ceiling = level * (lookahead_max_factor - 1.0) / (lookahead_cap_s / 60.0)
    return max(0.0, min(per_minute, ceiling))


def lookahead_concurrency(
    level: float,
    trend_per_minute: float,
    startup_s: float,
    *,
    cap_s: float = 300.0,
    max_factor: float = 2.0,
) -> float:
    """Concurrency expected once a replica started now is ready: the level plus the positive
    trend over the cold-start path, the path capped at `cap_s` and the result at `max_factor` x
    the level. The planner's target rule (grid/planner/targets.py) calls it.
    """
    if trend_per_minute <= 0 or startup_s <= 0 or level <= 0:
        return level
    horizon_min = min(cap_s, startup_s) / 60.0
    return level + min(trend_per_minute * horizon_min, level * (max_factor - 1.0))
