"""The replacement proof (pure): may a stronger prediction take the place of a group of mature,
unused predictive artifacts on a full disk?

Given the incoming artifact (size s, expected startup value v) and the host's post-assignment
free disk F with the predictive reserve R, a group G of victims (sizes s_i, values v_i) is
proven when
    fit:      F + sum(s_i) - R >= s                    (the reported free disk plus what the
                                                        group frees; nothing else is credited)
    value:    v >= sum(v_i)                            (no less total expected startup value)
    density:  v / s >= gain * sum(v_i) / sum(s_i)      (the configured value-per-byte gain)
and v > 0, s > 0. The search is bounded: the victims considered are the union of the `bound`
lowest-value and the `bound` largest candidates, and groups have at most `bound` members. Among
proven groups the one losing the least value wins, then the fewest victims, then the fewest
freed megabytes, then the model ids (deterministic). The whole group is proven before any of
its evictions is issued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class Victim:
    model_id: str
    size_mb: int
    value_s: float


def search_pool(victims: Sequence[Victim], bound: int) -> list[Victim]:
    """The bounded union: the `bound` lowest-value and the `bound` largest victims."""
    lowest = sorted(victims, key=lambda v: (v.value_s, -v.size_mb, v.model_id))[:bound]
    largest = sorted(victims, key=lambda v: (-v.size_mb, v.value_s, v.model_id))[:bound]
    seen: dict[str, Victim] = {}
    for v in [*lowest, *largest]:
        seen.setdefault(v.model_id, v)
    return sorted(seen.values(), key=lambda v: v.model_id)


def proven(
    size_mb: int,
    value_s: float,
    group: Sequence[Victim],
    *,
    free_mb: int,
    reserve_mb: int,
    gain: float,
) -> bool:
    """The three conditions of the module docstring for one group."""
    if not group or size_mb <= 0 or value_s <= 0:
        return False
    freed = sum(v.size_mb for v in group)
    lost = sum(v.value_s for v in group)
    if freed <= 0 or free_mb + freed - reserve_mb < size_mb:
        return False
    if value_s < lost:
        return False
    return value_s * freed >= gain * lost * size_mb  # v/s >= gain * lost/freed, no division


def best_group(
    size_mb: int,
    value_s: float,
    victims: Sequence[Victim],
    *,
    free_mb: int,
    reserve_mb: int,
    gain: float,
    bound: int,
) -> tuple[Victim, ...] | None:
    """The proven group that loses least (None when no group within the bound is proven)."""
    pool = search_pool(victims, bound)
    best: tuple[tuple[float, int, int, tuple[str, ...]], tuple[Victim, ...]] | None = None
    for count in range(1, min(bound, len(pool)) + 1):
        for group in combinations(pool, count):
            if not proven(
                size_mb, value_s, group, free_mb=free_mb, reserve_mb=reserve_mb, gain=gain
            ):
                continue
            rank = (
                sum(v.value_s for v in group),
                count,
                sum(v.size_mb for v in group),
                tuple(v.model_id for v in group),
            )
            if best is None or rank < best[0]:
                best = (rank, group)
    return best[1] if best is not None else None
