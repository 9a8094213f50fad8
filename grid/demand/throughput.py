"""Measured latency and token throughput per (engine, model, artifact revision) (pure).

One store, `Measurements`, holds what the OpenAI proxy measures: each successful response is
recorded once (grid/router/measure.py `record`), and two readers use it. The router rates
engines by their latency and throughput (grid/router/measure.py); the controller turns the
throughput into each host's `measured_tokens_per_s` for the planning snapshot
(grid/runtime/controller/workload_inputs.py, `estimate`). Both weigh evidence by one rule, the
bounded, confidence-ramped `Ewma`: full confidence after `FULL_CONFIDENCE_SAMPLES` samples, a
half-life of `HALF_LIFE_S`, nothing older than `MAX_AGE_S`, at most `MAX_TRACKED` series
(stalest first out). A sample of one revision never touches another's series, so a replaced
artifact starts from the prior. No clock is read: every call takes `now`.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

ALPHA = 0.3
FULL_CONFIDENCE_SAMPLES = 8
HALF_LIFE_S = 600.0
MAX_AGE_S = 3600.0
MAX_TRACKED = 4096


@dataclass
class Ewma:
    """One exponentially weighted series with its sample count and last update."""

    value: float = 0.0
    samples: int = 0
    updated_at: float = 0.0

    def fold(self, sample: float, now: float) -> None:
        self.value = sample if self.samples == 0 else ALPHA * sample + (1 - ALPHA) * self.value
        self.samples += 1
        self.updated_at = now

    def confidence(self, now: float) -> float:
        age = max(0.0, now - self.updated_at)
        if self.samples == 0 or age > MAX_AGE_S:
            return 0.0
        ramp = min(self.samples, FULL_CONFIDENCE_SAMPLES) / FULL_CONFIDENCE_SAMPLES
        return ramp * math.exp(-math.log(2.0) * age / HALF_LIFE_S)


RevisionKey = tuple[str, str, str]  # (engine_id, model_id, artifact_sha256 or "")


@dataclass(frozen=True)
class PlacementEstimate:
    """One host's measured token throughput for one model revision, blended with its prior."""

    tokens_per_s: float
    weight: float  # the measurement's share: samples / 8, at most 1
    samples: int


def ramp_weight(samples: int) -> float:
    """The share a measurement of `samples` responses gets against the prior (full at 8)."""
    return min(max(samples, 0), FULL_CONFIDENCE_SAMPLES) / FULL_CONFIDENCE_SAMPLES


MAX_LATENCY_S = 86_400.0  # a longer "response" is not a measurement


@dataclass
class Series:
    """One revision's latency and throughput EWMAs, and the host that serves it."""

    host_id: str
    latency: Ewma = field(default_factory=Ewma)
    throughput: Ewma = field(default_factory=Ewma)


class Measurements:
    """Latency and token-throughput EWMAs per (engine, model, artifact revision).

    Thread-safe: the proxy records while the controller's tick reads placement estimates.
    """

    def __init__(self) -> None:
        self._series: dict[RevisionKey, Series] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._series)

    def record(
        self,
        host_id: str,
        key: RevisionKey,
        latency_s: float,
        completion_tokens: float | None,
        now: float,
    ) -> None:
        """One successful response; tokens None (a stream without usage) refreshes latency only."""
        if not (0.0 <= latency_s <= MAX_LATENCY_S):
            return
        with self._lock:
            series = self._series.get(key)
            if series is None:
                # Evict before adding: the new, still empty series would otherwise look stalest.
                while len(self._series) >= MAX_TRACKED:
                    stalest = min(self._series, key=lambda k: self._series[k].latency.updated_at)
                    del self._series[stalest]
                series = self._series[key] = Series(host_id)
            series.latency.fold(latency_s, now)
            if completion_tokens is not None and completion_tokens > 0 and latency_s > 0:
                rate = completion_tokens / latency_s
                if math.isfinite(rate):
                    series.throughput.fold(rate, now)

    def series(self, key: RevisionKey) -> Series | None:
        with self._lock:
            return self._series.get(key)

    def estimate(
        self,
        host_id: str,
        model_id: str,
        artifact_sha256: str | None,
        prior_tokens_per_s: float,
        now: float,
    ) -> PlacementEstimate:
        """weight x measured + (1 - weight) x prior, weight = samples / 8 of the host's
        best-sampled fresh engine of exactly this revision (none: the prior alone)."""
        sha = (artifact_sha256 or "").lower()
        best: Ewma | None = None
        with self._lock:
            for key, series in self._series.items():
                ewma = series.throughput
                if key[1] != model_id or key[2] != sha or series.host_id != host_id:
                    continue
                if ewma.samples == 0 or now - ewma.updated_at > MAX_AGE_S:
                    continue
                if best is None or ewma.samples > best.samples:
                    best = ewma
        if best is None:
            return PlacementEstimate(prior_tokens_per_s, 0.0, 0)
        weight = ramp_weight(best.samples)
        value = weight * best.value + (1 - weight) * prior_tokens_per_s
        return PlacementEstimate(value, weight, best.samples)

    def models_of(self, host_id: str) -> set[str]:
        """The models with a throughput measurement on `host_id`."""
        with self._lock:
            return {
                key[1]
                for key, series in self._series.items()
                if series.host_id == host_id and series.throughput.samples
            }
