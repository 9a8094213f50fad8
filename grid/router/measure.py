"""Proxy-owned latency and throughput EWMAs per (engine, model revision) (pure, bounded).

The router keys its series by `Route.measure_key`: the engine and the model, tagged with the
serving artifact's SHA-256 when the node reports one, so a replaced artifact starts from the
prior. `RevisionMeasurements` (below) is the placement side of the same measurements.

Each successful response updates the end-to-end latency EWMA of its engine and model and, when
the completion-token count is known, the token-throughput EWMA. Confidence ramps to full over
eight samples and decays with the age of each estimate's own last update; an estimate older
than `MAX_AGE_S` is ignored. A route with weak or no evidence blends toward the median of the
fresh estimates of the engines serving the same model (its own included); measurements of
other models are never used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

ALPHA = 0.3
FULL_CONFIDENCE_SAMPLES = 8
HALF_LIFE_S = 600.0
MAX_AGE_S = 3600.0
DEFAULT_LATENCY_S = 1.0  # the prior when no engine of the model has fresh evidence
MAX_TRACKED = 4096

MeasureKey = tuple[str, str]  # (engine_id, model_id)


@dataclass
class _Ewma:
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


@dataclass
class _Pair:
    latency: _Ewma
    throughput: _Ewma


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
            pair = self._pairs[key] = _Pair(_Ewma(), _Ewma())
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
        return weight * own.value + (1 - weight) * median

    def latency_s(self, key: MeasureKey, peers: list[MeasureKey], now: float) -> float:
        """The route's latency estimate: its own EWMA blended toward its model peers' median."""
        blended = self._blend(key, peers, now, throughput=False)
        return DEFAULT_LATENCY_S if blended is None else blended

    def throughput(self, key: MeasureKey, peers: list[MeasureKey], now: float) -> float | None:
        """Completion tokens per second, or None without fresh evidence for this model."""
        blended = self._blend(key, peers, now, throughput=True)
        return blended if blended is not None and blended > 0 else None


# ----------------------------------------------------------------------------- for placement

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
        self._ewmas: dict[RevisionKey, _Ewma] = {}
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
            ewma = self._ewmas[key] = _Ewma()
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
        best: _Ewma | None = None
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
