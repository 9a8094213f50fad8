"""Proxy-owned latency and throughput EWMAs per (engine, model revision) (pure, bounded).

The router keys its series by `Route.measure_key`: the engine and the model, tagged with the
serving artifact's SHA-256 when the node reports one, so a replaced artifact starts from the
prior. `RevisionMeasurements` (grid/demand/throughput.py, re-exported here) is the placement side
of the same measurements.

Each successful response updates the end-to-end latency EWMA of its engine and model and, when
the completion-token count is known, the token-throughput EWMA. Confidence ramps to full over
eight samples and decays with the age of each estimate's own last update; an estimate older
than `MAX_AGE_S` is ignored. A route with weak or no evidence blends toward the median of the
fresh estimates of the engines serving the same model (its own included); measurements of
other models are never used.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from grid.demand import MAX_AGE_S, MAX_TRACKED, Ewma, RevisionMeasurements

DEFAULT_LATENCY_S = 1.0  # the prior when no engine of the model has fresh evidence

# The shared EWMA bounds, and the placement side (grid/demand/throughput.py), re-exported.
__all__ = [
    "DEFAULT_LATENCY_S",
    "MAX_AGE_S",
    "MAX_TRACKED",
    "MeasureKey",
    "Measurements",
    "RevisionMeasurements",
]

MeasureKey = tuple[str, str]  # (engine_id, model_id)


@dataclass
class _Pair:
    latency: Ewma
    throughput: Ewma


class Measurements:
    def __init__(self) -> None:
        self._pairs: dict[MeasureKey, _Pair] = {}

    def __len__(self) -> int:
        return len(self._pairs)

    def record(
        self, key: MeasureKey, latency_s: float, completion_tokens: int | None, now: float
    ) -> None:
        """One successful response; tokens None (a stream without usage) refreshes latency only."""
        if not (latency_s >= 0.0) or latency_s > 86_400.0:
            return
        pair = self._pairs.get(key)
        if pair is None:
            # Evict before adding: the new, still empty pair would otherwise look stalest.
            while len(self._pairs) >= MAX_TRACKED:
                stalest = min(self._pairs, key=lambda k: self._pairs[k].latency.updated_at)
                del self._pairs[stalest]
            pair = self._pairs[key] = _Pair(Ewma(), Ewma())
        pair.latency.fold(latency_s, now)
        if completion_tokens is not None and completion_tokens > 0 and latency_s > 0:
            pair.throughput.fold(completion_tokens / latency_s, now)

    def _fresh(self, keys: Iterable[MeasureKey], now: float, throughput: bool) -> list[float]:
        values = []
        for key in keys:
            pair = self._pairs.get(key)
            if pair is None:
                continue
            ewma = pair.throughput if throughput else pair.latency
            if ewma.confidence(now) > 0:
                values.append(ewma.value)
        return values

    def _blend(
        self, key: MeasureKey, peers: list[MeasureKey], now: float, throughput: bool
    ) -> float | None:
        """Own estimate weighted by its confidence, the rest from the model's fresh median."""
        comparable = {k for k in peers if k[1] == key[1]} | {key}
        fresh = self._fresh(sorted(comparable), now, throughput)
        if not fresh:
            return None
        median = statistics.median(fresh)
        pair = self._pairs.get(key)
        own = None if pair is None else (pair.throughput if throughput else pair.latency)
        weight = own.confidence(now) if own is not None else 0.0
        if own is None or weight == 0.0:
            return median
        # median + w * (own - median), not w * own + (1 - w) * median: the same blend, but a
        # route whose own estimate is the median gets exactly the median, so equal estimates
        # stay equal and the documented tie-breaks (load, lease freshness) decide.
        return median + weight * (own.value - median)

    def latency_s(self, key: MeasureKey, peers: list[MeasureKey], now: float) -> float:
        """The route's latency estimate: its own EWMA blended toward its model peers' median."""
        blended = self._blend(key, peers, now, throughput=False)
        return DEFAULT_LATENCY_S if blended is None else blended

    def throughput(self, key: MeasureKey, peers: list[MeasureKey], now: float) -> float | None:
        """Completion tokens per second, or None without fresh evidence for this model."""
        blended = self._blend(key, peers, now, throughput=True)
        return blended if blended is not None and blended > 0 else None
