"""One model's history read at `now`: smoothed rates, tail latency, errors, peaks, activity.

Buckets are split into the window of complete buckets [current - retention, current - 1] and
the unfinished current bucket; buckets after the current one (clock skew) are ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import histogram
from .buckets import Series, bucket_index
from .config import DemandConfig
from .correlation import Activity
from .smoothing import positive_trend_per_minute, raise_with_partial, smooth


@dataclass(frozen=True)
class Window:
    current: int  # index of the unfinished bucket holding `now`
    first: int  # index of the oldest complete bucket
    elapsed_s: float  # seconds of the current bucket already past

    @property
    def n_complete(self) -> int:
        return self.current - self.first

    @staticmethod
    def at(now: float, config: DemandConfig) -> Window:
        current = bucket_index(now, config.bucket_s)
        return Window(
            current=current,
            first=current - config.retention_buckets,
            elapsed_s=now - current * config.bucket_s,
        )


@dataclass(frozen=True)
class ModelView:
    rpm: float
    concurrency: float
    queue_depth: float
    trend_per_minute: float
    p95_ms: float
    latency_max_ms: float  # tail evidence: the slowest bin seen recently
    error_rate: float
    peak_rpm: float
    peak_concurrency: float
    mean_service_s: float
    activity: Activity
    current: bool  # arrivals in the unfinished bucket or the last complete one
    arrivals: int = 0  # requests completed in the window (complete buckets and the current one)

    def has_demand(self, config: DemandConfig) -> bool:
        return (
            self.rpm >= config.min_rpm
            or self.concurrency >= config.min_concurrency
            or self.queue_depth >= config.min_concurrency
        )


def _finite(value: float) -> float:
    return value if math.isfinite(value) and value > 0 else 0.0


def read_model(series: Series, window: Window, config: DemandConfig) -> ModelView:
    b = config.bucket_s
    complete = range(window.first, window.current)
    rates = [series.rates(i, b) for i in complete]
    seed = next((k for k, i in enumerate(complete) if i in series.buckets), len(rates))
    tail = rates[seed:]
    alpha, beta = config.level_alpha, config.trend_beta
    conf_window = config.trend_confidence_buckets
    rpm_s = smooth([r.rpm for r in tail], alpha, beta, conf_window)
    conc_s = smooth([r.concurrency for r in tail], alpha, beta, conf_window)
    queue_s = smooth([r.queue for r in tail], alpha, beta, conf_window)

    partial = series.rates(window.current, max(window.elapsed_s, config.partial_min_fraction * b))
    rpm = raise_with_partial(rpm_s.level, partial.rpm, alpha)
    concurrency = raise_with_partial(conc_s.level, partial.concurrency, alpha)
    queue = raise_with_partial(queue_s.level, partial.queue, alpha)
    trend = positive_trend_per_minute(
        conc_s, concurrency, b, config.lookahead_cap_s, config.lookahead_max_factor
    )

    recent = [
        series.buckets[i]
        for i in range(window.current - config.recent_buckets, window.current + 1)
        if i in series.buckets
    ]
    latency = histogram.merged(bucket.latency for bucket in recent)
    arrivals = sum(bucket.arrivals for bucket in recent)
    errors = sum(bucket.errors for bucket in recent)

    mask = 0
    for k, i in enumerate(complete):
        if series.arrivals(i) > 0:
            mask |= 1 << k
    held = [
        series.buckets[i] for i in range(window.first, window.current + 1) if i in series.buckets
    ]
    total_arrivals = sum(bucket.arrivals for bucket in held)
    total_service = sum(bucket.service_s for bucket in held)
    return ModelView(
        rpm=_finite(rpm),
        concurrency=_finite(concurrency),
        queue_depth=_finite(queue),
        trend_per_minute=_finite(trend),
        p95_ms=_finite(histogram.quantile_ms(latency, 0.95)),
        latency_max_ms=_finite(histogram.bin_midpoint_ms(max(latency))) if latency else 0.0,
        error_rate=min(1.0, errors / arrivals) if arrivals else 0.0,
        peak_rpm=_finite(max((r.rpm for r in rates), default=0.0)),
        peak_concurrency=_finite(max((r.concurrency for r in rates), default=0.0)),
        mean_service_s=_finite(total_service / total_arrivals) if total_arrivals else 0.0,
        activity=Activity(mask=mask, rpm=tuple(r.rpm for r in rates)),
        current=series.arrivals(window.current) > 0 or series.arrivals(window.current - 1) > 0,
        arrivals=total_arrivals,
    )
