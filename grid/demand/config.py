"""Tuning of the demand tracker: bucket size, retention, smoothing, correlation thresholds.

The defaults are the spec's numbers where it names them (five-minute/2x lookahead, three
supporting buckets, 0.70 threshold, 2x peak cap, 32 sources) and conservative choices elsewhere.
Everything the tracker keeps is bounded by these numbers, whatever the input volume.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from grid.fleet import DEFAULT_WORKLOAD_VOCABULARY, GridError

# The one workload vocabulary (the snapshot's `policy.workload_vocabulary` default).
DEFAULT_WORKLOADS: tuple[str, ...] = DEFAULT_WORKLOAD_VOCABULARY


@dataclass(frozen=True)
class DemandConfig:
    bucket_s: float = 60.0
    retention_buckets: int = 60
    # EWMA weight of the newest complete bucket, and of the newest level change in the trend.
    level_alpha: float = 0.3
    trend_beta: float = 0.3
    # The trend is weighted by the share of the last N level changes that were rises, so one
    # noisy slope cannot project a load spike.
    trend_confidence_buckets: int = 4
    lookahead_cap_s: float = 300.0
    lookahead_max_factor: float = 2.0
    # An unfinished bucket is rated over at least this share of a bucket, so one request a second
    # into a new minute does not read as a huge rate.
    partial_min_fraction: float = 0.25
    # Latency percentiles, error rate: over this many newest complete buckets plus the current one.
    recent_buckets: int = 5
    # Below both of these a model has no demand worth an entry (a long-idle EWMA tail).
    min_rpm: float = 0.05
    min_concurrency: float = 0.01
    # Correlations between configured models.
    min_support_buckets: int = 3
    association_threshold: float = 0.70
    inferred_peak_factor: float = 2.0
    max_sources: int = 32
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, float) and not math.isfinite(value):
                _invalid(spec.name, "must be a finite number")
        if self.bucket_s <= 0:
            _invalid("bucket_s", "must be positive")
        if self.retention_buckets < 2:
            _invalid("retention_buckets", "must be at least 2 (correlations need a next bucket)")
        for name in ("level_alpha", "trend_beta"):
            if not 0.0 < getattr(self, name) <= 1.0:
                _invalid(name, "must be in (0, 1]")
        if not 0.0 < self.partial_min_fraction <= 1.0:
            _invalid("partial_min_fraction", "must be in (0, 1]")
        if not 0.0 < self.association_threshold <= 1.0:
            _invalid("association_threshold", "must be in (0, 1]")
        for name in ("trend_confidence_buckets", "recent_buckets", "min_support_buckets"):
            if getattr(self, name) < 1:
                _invalid(name, "must be at least 1")
        if self.max_sources < 0:
            _invalid("max_sources", "must be zero or more")
        if self.lookahead_cap_s < 0 or self.lookahead_max_factor < 1.0:
            _invalid("lookahead", "cap must be >= 0 s and factor >= 1")
        if self.inferred_peak_factor < 0 or self.min_rpm < 0 or self.min_concurrency < 0:
            _invalid("inferred_peak_factor", "factors and floors must be zero or more")
        if not self.workloads or len(set(self.workloads)) != len(self.workloads):
            _invalid("workloads", "must be a non-empty list of distinct names")


def _invalid(name: str, why: str) -> None:
    raise GridError(
        "invalid_demand_config",
        f"demand tracker setting {name} {why}",
        fix=f"correct {name} in the demand configuration",
        path=name,
    )
