"""A bounded logarithmic latency histogram: sparse bin -> count, at most LATENCY_BINS bins.

Bin i covers [LATENCY_MIN_MS * r**i, LATENCY_MIN_MS * r**(i+1)) with r = 2**(1/4), so a
quantile read from a bin's geometric midpoint is within about 9% of the true value, from
1 ms to several hours; shorter and longer values land in the end bins. Counts, not samples, are
kept, so memory does not grow with traffic, and a single outlier stays in its own bin as tail
evidence without moving the 95th percentile of a busy minute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

LATENCY_MIN_MS = 1.0
BINS_PER_DOUBLING = 4
LATENCY_BINS = 96  # 24 doublings above 1 ms: about 4.7 hours

Histogram = dict[int, int]


def latency_bin(ms: float) -> int:
    if not ms > LATENCY_MIN_MS:  # also catches NaN, which validation already refuses
        return 0
    index = math.floor(math.log2(ms / LATENCY_MIN_MS) * BINS_PER_DOUBLING)
    return min(max(index, 0), LATENCY_BINS - 1)


def bin_midpoint_ms(index: int) -> float:
    return float(LATENCY_MIN_MS * 2.0 ** ((index + 0.5) / BINS_PER_DOUBLING))


def add(hist: Histogram, ms: float, count: int = 1) -> None:
    index = latency_bin(ms)
    hist[index] = hist.get(index, 0) + count


def merged(histograms: Iterable[Mapping[int, int]]) -> Histogram:
    out: Histogram = {}
    for hist in histograms:
        for index, count in hist.items():
            out[index] = out.get(index, 0) + count
    return out


def quantile_ms(hist: Mapping[int, int], q: float) -> float:
    """The q-quantile (0 < q <= 1): midpoint of the bin holding rank ceil(q * n); 0 if empty."""
    total = sum(hist.values())
    if total <= 0:
        return 0.0
    rank = max(1, math.ceil(q * total - 1e-9))
    seen = 0
    for index in sorted(hist):
        seen += hist[index]
        if seen >= rank:
            return bin_midpoint_ms(index)
    return bin_midpoint_ms(max(hist))
