"""Outcome evidence per (model, workload, artifact SHA-256): service and labelled quality. Pure.

Each key holds two independently decaying records:
- service: every served response adds weight 1 to `requests` (and to `successes` when it
  succeeded) and its latency to a weighted latency sum;
- quality: every operator evaluation adds weight 1 to `quality_samples` and its score to a
  weighted quality sum.
Both decay exponentially by age with their own half-life (default seven days): a sample of age
a weighs 0.5 ** (a / half_life). The sums are kept decayed to the record's newest sample
(`service_at`, `quality_at`), so a record changes only when a sample arrives and `now` is only
needed to read it. A response older than the newest one (a late callback) is added with its
own, smaller weight and never moves the record's clock.

Confidence: service reaches full weight after 20 fresh requests (effective weight / 20, at most
1), quality after 8 fresh evaluations (both numbers are `PortfolioPolicy`'s). A fresh latency-
only request therefore cannot revive stale quality: the two records never share a clock.

The artifact SHA-256 is part of the key, so a replaced artifact starts with no evidence, and a
late response of the previous revision updates the previous revision's record only. The store
is a pydantic model (the controller persists `model_dump(mode="json")`) capped at `max_entries`
records; a new key at the cap evicts the record with the oldest newest sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from grid.fleet import GridError, Outcome, PortfolioPolicy

from .observation import Observation
from .state import RESTORE_NEXT_COMMAND

DEFAULT_MAX_ENTRIES = 4096
SHA256_PATTERN = r"^[0-9a-f]{64}$"
MAX_LATENCY_MS = 86_400_000.0

Key = tuple[str, str, str | None]


def decay(age_s: float, half_life_s: float) -> float:
    """The weight of a sample `age_s` old: 0.5 ** (age / half-life); a future sample weighs 1."""
    return float(0.5 ** (max(0.0, age_s) / half_life_s))


def canonical_sha(value: str | None) -> str | None:
    return None if value is None else value.lower()


class EvidenceEntry(BaseModel):
    """The two decaying records of one (model, workload, artifact revision)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, protected_namespaces=())

    model_id: str = Field(min_length=1, max_length=256)
    workload: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    artifact_sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    requests: float = Field(default=0.0, ge=0)  # decayed to service_at
    successes: float = Field(default=0.0, ge=0)
    latency_ms_sum: float = Field(default=0.0, ge=0)  # sum of weight x latency
    service_at: float | None = None  # newest response
    quality_sum: float = Field(default=0.0, ge=0)  # sum of weight x quality
    quality_samples: float = Field(default=0.0, ge=0)
    quality_at: float | None = None  # newest evaluation

    @model_validator(mode="after")
    def _consistent(self) -> EvidenceEntry:
        self.successes = min(self.successes, self.requests)
        self.quality_sum = min(self.quality_sum, self.quality_samples)
        return self

    @property
    def key(self) -> Key:
        return (self.model_id, self.workload, self.artifact_sha256)

    def key_sort(self) -> tuple[str, str, str]:
        return (self.model_id, self.workload, self.artifact_sha256 or "")

    @property
    def last_seen(self) -> float:
        return max(self.service_at or 0.0, self.quality_at or 0.0)

    def add_response(self, ok: bool, latency_ms: float, at: float, half_life_s: float) -> None:
        if self.service_at is None or at >= self.service_at:
            factor = 1.0 if self.service_at is None else decay(at - self.service_at, half_life_s)
            self.requests *= factor
            self.successes *= factor
            self.latency_ms_sum *= factor
            self.service_at = at
            weight = 1.0
        else:  # a late callback: its own age, the record's clock stays
            weight = decay(self.service_at - at, half_life_s)
        self.requests += weight
        self.successes += weight if ok else 0.0
        self.latency_ms_sum += weight * latency_ms

    def add_evaluation(self, quality: float, at: float, half_life_s: float) -> None:
        if self.quality_at is None or at >= self.quality_at:
            factor = 1.0 if self.quality_at is None else decay(at - self.quality_at, half_life_s)
            self.quality_samples *= factor
            self.quality_sum *= factor
            self.quality_at = at
            weight = 1.0
        else:
            weight = decay(self.quality_at - at, half_life_s)
        self.quality_samples += weight
        self.quality_sum += weight * quality

    # -- reading at `now` ----------------------------------------------------------------------

    def effective_requests(self, now: float, policy: PortfolioPolicy) -> float:
        if self.service_at is None:
            return 0.0
        return self.requests * decay(now - self.service_at, policy.service_half_life_s)

    def effective_evaluations(self, now: float, policy: PortfolioPolicy) -> float:
        if self.quality_at is None:
            return 0.0
        return self.quality_samples * decay(now - self.quality_at, policy.quality_half_life_s)

    def service_confidence(self, now: float, policy: PortfolioPolicy) -> float:
        return min(1.0, self.effective_requests(now, policy) / policy.service_full_requests)

    def quality_confidence(self, now: float, policy: PortfolioPolicy) -> float:
        return min(1.0, self.effective_evaluations(now, policy) / policy.quality_full_samples)

    def outcome(self, now: float) -> Outcome:
        """The snapshot row. Counts are decayed to the newest sample and the ages are given, so
        a reader that decays by age (as the planner does) gets the effective counts at `now`."""
        quality = self.quality_sum / self.quality_samples if self.quality_samples > 0 else None
        newest = self.service_at if self.service_at is not None else self.quality_at
        return Outcome(
            model_id=self.model_id,
            workload=self.workload,
            artifact_sha256=self.artifact_sha256,
            requests=self.requests,
            successes=min(self.successes, self.requests),
            mean_latency_ms=self.latency_ms_sum / self.requests if self.requests > 0 else 0.0,
            age_s=max(0.0, now - (newest if newest is not None else now)),
            quality=None if quality is None else min(1.0, max(0.0, quality)),
            quality_samples=self.quality_samples,
            quality_age_s=None if self.quality_at is None else max(0.0, now - self.quality_at),
        )


def _invalid_state(message: str) -> GridError:
    return GridError(
        "invalid_evidence_state",
        message,
        fix="nothing to undo: the controller drops the outcome evidence and rebuilds it from new "
        "requests and evaluations; `grid allocator status` shows the warning",
        next_command=RESTORE_NEXT_COMMAND,
    )


class EvidenceStore(BaseModel):
    """Every (model, workload, revision) record, bounded; `now` and the policy are passed in."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    version: Literal[1] = 1
    max_entries: int = Field(default=DEFAULT_MAX_ENTRIES, ge=1, le=1_000_000)
    entries: list[EvidenceEntry] = Field(default_factory=list)
    _index: dict[Key, EvidenceEntry] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _bounded(self) -> EvidenceStore:
        """One record per key (the newest wins) and at most `max_entries`, newest kept."""
        unique: dict[Key, EvidenceEntry] = {}
        for entry in sorted(self.entries, key=lambda e: e.last_seen):
            unique[entry.key] = entry
        kept = sorted(unique.values(), key=lambda e: -e.last_seen)[: self.max_entries]
        self.entries = sorted(kept, key=lambda e: e.key_sort())
        return self

    def model_post_init(self, context: object, /) -> None:
        self._index = {e.key: e for e in self.entries}

    def __len__(self) -> int:
        return len(self.entries)

    def get(
        self, model_id: str, workload: str, artifact_sha256: str | None
    ) -> EvidenceEntry | None:
        return self._index.get((model_id, workload, canonical_sha(artifact_sha256)))

    def _entry(self, model_id: str, workload: str, artifact_sha256: str | None) -> EvidenceEntry:
        key = (model_id, workload, canonical_sha(artifact_sha256))
        found = self._index.get(key)
        if found is not None:
            return found
        if len(self.entries) >= self.max_entries:
            oldest = min(self.entries, key=lambda e: (e.last_seen, e.key_sort()))
            self.entries.remove(oldest)
            del self._index[oldest.key]
        entry = EvidenceEntry(model_id=model_id, workload=workload, artifact_sha256=key[2])
        self.entries.append(entry)
        self._index[key] = entry
        return entry

    # -- recording -----------------------------------------------------------------------------

    def record_response(
        self,
        model_id: str,
        workload: str,
        artifact_sha256: str | None,
        *,
        ok: bool,
        latency_ms: float,
        at: float,
        now: float,
        policy: PortfolioPolicy,
    ) -> bool:
        """One served response of exactly that revision; False when its numbers are unusable."""
        if not (math.isfinite(latency_ms) and math.isfinite(at)) or latency_ms < 0:
            return False
        entry = self._entry(model_id, workload, artifact_sha256)
        stamp = min(at, now)  # a callback cannot date itself in the future
        entry.add_response(ok, min(latency_ms, MAX_LATENCY_MS), stamp, policy.service_half_life_s)
        return True

    def record_observation(
        self, obs: Observation, artifact_sha256: str | None, now: float, policy: PortfolioPolicy
    ) -> bool:
        """A classified request: evidence for the model that served it (none when none did)."""
        if obs.served_model_id is None:
            return False
        return self.record_response(
            obs.served_model_id,
            obs.workload,
            artifact_sha256,
            ok=not obs.failed,
            latency_ms=obs.latency_s * 1000.0,
            at=obs.timestamp,
            now=now,
            policy=policy,
        )

    def record_evaluation(
        self,
        model_id: str,
        workload: str,
        artifact_sha256: str | None,
        quality: float,
        *,
        now: float,
        policy: PortfolioPolicy,
    ) -> None:
        """One labelled quality in [0, 1] (validated by the caller, see evidence_store.py)."""
        if not (math.isfinite(quality) and 0.0 <= quality <= 1.0):
            raise ValueError("quality must be a finite number in [0, 1]")
        entry = self._entry(model_id, workload, artifact_sha256)
        entry.add_evaluation(quality, now, policy.quality_half_life_s)

    # -- reading -------------------------------------------------------------------------------

    def outcomes(self, now: float, revisions: Mapping[str, str | None]) -> list[Outcome]:
        """The snapshot's `outcomes`: records of configured models at their configured revision
        (`revisions` maps model ID -> configured artifact SHA-256 or None), sorted by key."""
        rows: list[Outcome] = []
        for entry in sorted(self.entries, key=lambda e: e.key_sort()):
            if entry.model_id in revisions and entry.artifact_sha256 == canonical_sha(
                revisions[entry.model_id]
            ):
                rows.append(entry.outcome(now))
        return rows

    def forget(self, keep_models: Mapping[str, object]) -> int:
        """Drop the records of models that are no longer configured; returns how many."""
        gone = [e for e in self.entries if e.model_id not in keep_models]
        for entry in gone:
            self.entries.remove(entry)
            del self._index[entry.key]
        return len(gone)

    # -- persistence ---------------------------------------------------------------------------

    def to_state(self) -> dict[str, object]:
        return self.model_dump(mode="json")

    @classmethod
    def from_state(
        cls, state: Mapping[str, object], max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> EvidenceStore:
        """Validate a persisted store; the configured cap wins over the stored one."""
        try:
            parsed = cls.model_validate({**dict(state), "max_entries": max_entries})
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(part) for part in first.get("loc", ()))
            raise _invalid_state(f"evidence field {path or '(root)'}: {first.get('msg')}") from None
        return parsed
