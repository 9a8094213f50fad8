"""Measured token throughput per (engine, model, artifact revision): placement evidence (pure).

The OpenAI proxy reports each successful response; the controller keeps one
`RevisionMeasurements` and turns it into each host's `measured_tokens_per_s` for the planning
snapshot (grid/runtime/controller/workload_inputs.py). The router's own latency and throughput
estimates (grid/router/measure.py) use the same bounded, confidence-ramped `Ewma` defined here,
so both sides weigh evidence by one rule: full confidence after `FULL_CONFIDENCE_SAMPLES`
samples, a half-life of `HALF_LIFE_S`, nothing older than `MAX_AGE_S`, at most `MAX_TRACKED`
series (stalest first out). No clock is read: every call takes `now`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


class RevisionMeasurements:
    """Token-throughput EWMAs per (engine, model, artifact revision) for the planning snapshot.

    The router's own `Measurements` rate engines for routing; these feed placement. A sample
    of one revision never touches another's EWMA, so a replaced artifact starts at the prior
    (the host's hardware estimate) and ramps to its own measurement over eight responses.
    Bounded (`MAX_TRACKED`, stalest first out); an estimate older than `MAX_AGE_S` is ignored.
    """

    def __init__(self) -> None:
        self._ewmas: dict[RevisionKey, Ewma] = {}
        self._hosts: dict[RevisionKey, str] = {}

    def __len__(self) -> int:
        return len(self._ewmas)

    def record(
        self,
        host_id: str,
        engine_id: str,
        model_id: str,
        artifact_sha256: str | None,
        latency_s: float,
        completion_tokens: float | None,
        now: float,
    ) -> bool:
        """One successful response; False (nothing recorded) without a usable rate."""
        if completion_tokens is None or not (completion_tokens > 0 and 0 < latency_s <= 86_400):
            return False
        rate = completion_tokens / latency_s
        if not math.isfinite(rate):
            return False
        key = (engine_id, model_id, (artifact_sha256 or "").lower())
        ewma = self._ewmas.get(key)
        if ewma is None:
            while len(self._ewmas) >= MAX_TRACKED:
                stalest = min(self._ewmas, key=lambda k: self._ewmas[k].updated_at)
                del self._ewmas[stalest]
                self._hosts.pop(stalest, None)
            ewma = self._ewmas[key] = Ewma()
            self._hosts[key] = host_id
        ewma.fold(rate, now)
        return True

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
        for key, ewma in self._ewmas.items():
            if key[1] != model_id or key[2] != sha or self._hosts.get(key) != host_id:
                continue
            if now - ewma.updated_at > MAX_AGE_S:
                continue
            if best is None or ewma.samples > best.samples:
                best = ewma
        if best is None:
            return PlacementEstimate(prior_tokens_per_s, 0.0, 0)
        weight = ramp_weight(best.samples)
        value = weight * best.value + (1 - weight) * prior_tokens_per_s
        return PlacementEstimate(value, weight, best.samples)

    def models_of(self, host_id: str) -> set[str]:
        return {key[1] for key, host in self._hosts.items() if host == host_id}
