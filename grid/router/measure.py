"""The router's side of the measurements: one record per response, and its reading (pure).

`record` folds each successful response into the one store, `grid.demand.Measurements`, keyed
by `Route.measure_key`: the engine, the model and the serving artifact's SHA-256 when the node
reports one ("" otherwise), so a replaced artifact starts from the prior. The controller reads
the same store for placement (grid/demand/throughput.py `estimate`).

Each successful response updates the end-to-end latency EWMA of its engine and model and, when
the completion-token count is known, the token-throughput EWMA. Confidence ramps to full over
eight samples and decays with the age of each estimate's own last update; an estimate older
than `MAX_AGE_S` is ignored. A route with weak or no evidence blends toward the median of the
fresh estimates of the engines serving the same model revision (its own included);
measurements of other models are never used.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from grid.demand import MAX_AGE_S, MAX_TRACKED, Ewma, Measurements, RevisionKey
from grid.fleet import Route

DEFAULT_LATENCY_S = 1.0  # the prior when no engine of the model has fresh evidence

# The shared EWMA bounds and the store (grid/demand/throughput.py), re-exported.
__all__ = [
    "DEFAULT_LATENCY_S",
    "MAX_AGE_S",
    "MAX_TRACKED",
    "MeasureKey",
    "Measurements",
    "latency_s",
    "record",
    "throughput",
]

MeasureKey = RevisionKey  # (engine_id, model_id, artifact_sha256 or "")


def record(
    store: Measurements,
    route: Route,
    latency_s: float,
    completion_tokens: int | None,
    now: float,
) -> None:
    """One successful response of `route`; tokens None refreshes latency only."""
    store.record(route.host_id, route.measure_key, latency_s, completion_tokens, now)


def _ewma(store: Measurements, key: MeasureKey, throughput: bool) -> Ewma | None:
    series = store.series(key)
    if series is None:
        return None
    return series.throughput if throughput else series.latency


def _fresh(
    store: Measurements, keys: Iterable[MeasureKey], now: float, throughput: bool
) -> list[float]:
    values = []
    for key in keys:
        ewma = _ewma(store, key, throughput)
        if ewma is not None and ewma.confidence(now) > 0:
            values.append(ewma.value)
    return values


def _blend(
    store: Measurements, key: MeasureKey, peers: list[MeasureKey], now: float, throughput: bool
) -> float | None:
    """Own estimate weighted by its confidence, the rest from the revision's fresh median."""
    comparable = {k for k in peers if k[1:] == key[1:]} | {key}
    fresh = _fresh(store, sorted(comparable), now, throughput)
    if not fresh:
        return None
    median = statistics.median(fresh)
    own = _ewma(store, key, throughput)
    weight = own.confidence(now) if own is not None else 0.0
    if own is None or weight == 0.0:
        return median
    # median + w * (own - median), not w * own + (1 - w) * median: the same blend, but a
    # route whose own estimate is the median gets exactly the median, so equal estimates
    # stay equal and the documented tie-breaks (load, lease freshness) decide.
    return median + weight * (own.value - median)


def latency_s(store: Measurements, key: MeasureKey, peers: list[MeasureKey], now: float) -> float:
    """The route's latency estimate: its own EWMA blended toward its model peers' median."""
    blended = _blend(store, key, peers, now, throughput=False)
    return DEFAULT_LATENCY_S if blended is None else blended


def throughput(
    store: Measurements, key: MeasureKey, peers: list[MeasureKey], now: float
) -> float | None:
    """Completion tokens per second, or None without fresh evidence for this model."""
    blended = _blend(store, key, peers, now, throughput=True)
    return blended if blended is not None and blended > 0 else None
