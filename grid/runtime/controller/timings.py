"""Learned load and warm timings per (host, model, artifact revision). Pure; `now` passed in.

Nodes report monotonic action durations in their acknowledgements. A successful WARM teaches the
warm time; a successful LOAD teaches the cold-fetch time only when the node really fetched the
artifact (`artifact_fetched`), so cache verification cannot make a network transfer look instant.

Each key keeps a bounded eight-sample EWMA (the plain mean of the first eight samples, then a
1/8 weight for each new one). Below four samples the estimate is blended with the profile's
configured prior in proportion to the samples seen; from four on it is authoritative. A sample
older than 30 days expires, so a runtime, storage or network upgrade can relearn. Invalid
reports (not finite, negative, over an hour) are ignored. The artifact digest is part of the
key, and `forget_other_revisions` drops the entries of a model whose digest changed, so new
weights start from the configured priors instead of inheriting optimistic timings.

The snapshot carries each host's own estimates (`learned_startup`), never the fastest host's
in place of the profile: the planner scores every host by its own path, and an unknown host by
the configured priors (issue 8, defect 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from grid.fleet import ActionKind, ActionRecord, LearnedStartup, ModelProfile

EWMA_SAMPLES = 8
AUTHORITATIVE_SAMPLES = 4
EXPIRY_S = 30 * 86_400.0
MAX_REPORT_S = 3_600.0
MAX_ENTRIES = 4_096  # bounded whatever the fleet reports


class Phase(StrEnum):
    LOAD = "load"  # a real artifact fetch
    WARM = "warm"


@dataclass(frozen=True)
class Learned:
    mean_s: float
    samples: int
    updated_at: float


TimingKey = tuple[Phase, str, str, str]  # (phase, host_id, model_id, artifact digest or "")


def valid_report(seconds: object) -> bool:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return False
    value = float(seconds)
    return math.isfinite(value) and 0.0 <= value <= MAX_REPORT_S


class TimingTable:
    def __init__(self) -> None:
        self._entries: dict[TimingKey, Learned] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def learn(
        self,
        record: ActionRecord,
        seconds: object,
        fetched: bool,
        profiles: Mapping[str, ModelProfile],
        now: float,
    ) -> None:
        """Fold a succeeded action's duration: a WARM teaches the warm time, a LOAD the fetch
        time only when it really fetched the artifact."""
        profile = profiles.get(record.model_id)
        digest = (profile.artifact_sha256 or "") if profile is not None else ""
        if record.kind is ActionKind.WARM:
            self.record(Phase.WARM, record.host_id, record.model_id, digest, seconds, now)
        elif record.kind is ActionKind.LOAD and fetched:
            self.record(Phase.LOAD, record.host_id, record.model_id, digest, seconds, now)

    def record(
        self, phase: Phase, host_id: str, model_id: str, digest: str, seconds: object, now: float
    ) -> bool:
        """Fold one measured duration; False (and nothing changes) for an invalid report."""
        if not valid_report(seconds):
            return False
        assert isinstance(seconds, int | float)
        key = (phase, host_id, model_id, digest)
        old = self._live(key, now)
        count = 1 if old is None else min(EWMA_SAMPLES, old.samples + 1)
        if old is None:
            mean = float(seconds)
        else:
            weight = 1.0 / min(EWMA_SAMPLES, old.samples + 1)
            mean = old.mean_s + weight * (float(seconds) - old.mean_s)
        self._entries[key] = Learned(mean_s=mean, samples=count, updated_at=now)
        if len(self._entries) > MAX_ENTRIES:
            oldest = min(self._entries, key=lambda k: self._entries[k].updated_at)
            del self._entries[oldest]
        return True

    def _live(self, key: TimingKey, now: float) -> Learned | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now - entry.updated_at > EXPIRY_S:
            del self._entries[key]
            return None
        return entry

    def learned(
        self, phase: Phase, host_id: str, model_id: str, digest: str, now: float
    ) -> Learned | None:
        return self._live((phase, host_id, model_id, digest), now)

    def estimate(
        self, phase: Phase, host_id: str, model_id: str, digest: str, prior_s: float, now: float
    ) -> float:
        """The configured prior, blended toward the learned mean; learned alone from 4 samples."""
        entry = self._live((phase, host_id, model_id, digest), now)
        if entry is None:
            return prior_s
        weight = min(1.0, entry.samples / AUTHORITATIVE_SAMPLES)
        return (1.0 - weight) * prior_s + weight * entry.mean_s

    def learned_startup(
        self, profiles: Mapping[str, ModelProfile], hosts: Iterable[str], now: float
    ) -> dict[str, dict[str, LearnedStartup]]:
        """Per model and registered host, the phases learned for the model's current artifact
        (blended with the profile's priors below four samples). A host without samples is
        absent, so it keeps the configured priors; no host's timings stand in for another's.
        """
        registered = set(hosts)
        phases: dict[tuple[str, str], dict[str, float]] = {}
        for key in sorted(self._entries):
            phase, host_id, model_id, digest = key
            profile = profiles.get(model_id)
            if profile is None or host_id not in registered:
                continue
            if digest != (profile.artifact_sha256 or "") or self._live(key, now) is None:
                continue
            prior = profile.load_estimate_s if phase is Phase.LOAD else profile.warm_estimate_s
            seconds = self.estimate(phase, host_id, model_id, digest, prior, now)
            phases.setdefault((model_id, host_id), {})[f"{phase.value}_s"] = seconds
        out: dict[str, dict[str, LearnedStartup]] = {}
        for (model_id, host_id), learned in phases.items():
            out.setdefault(model_id, {})[host_id] = LearnedStartup(**learned)
        return out

    def forget_other_revisions(self, digests: dict[str, str]) -> int:
        """Drop entries whose model now has another artifact digest (or no profile)."""
        stale = [k for k in self._entries if digests.get(k[2]) != k[3]]
        for key in stale:
            del self._entries[key]
        return len(stale)

    def summary(self, now: float) -> list[dict[str, Any]]:
        return [
            {
                "phase": phase.value,
                "host_id": host_id,
                "model_id": model_id,
                "artifact_sha256": digest or None,
                "mean_s": round(entry.mean_s, 3),
                "samples": entry.samples,
                "authoritative": entry.samples >= AUTHORITATIVE_SAMPLES,
                "age_s": round(max(0.0, now - entry.updated_at), 1),
            }
            for (phase, host_id, model_id, digest), entry in sorted(self._entries.items())
        ]

    # -- persistence -----------------------------------------------------------------------
    def to_state(self) -> list[dict[str, Any]]:
        return [
            {
                "phase": phase.value,
                "host_id": host_id,
                "model_id": model_id,
                "digest": digest,
                "mean_s": entry.mean_s,
                "samples": entry.samples,
                "updated_at": entry.updated_at,
            }
            for (phase, host_id, model_id, digest), entry in sorted(self._entries.items())
        ]

    @classmethod
    def from_state(cls, rows: Any) -> TimingTable:
        """Restore, silently dropping rows that are malformed (they only ever were hints)."""
        table = cls()
        if not isinstance(rows, list):
            return table
        for row in rows[:MAX_ENTRIES]:
            if not isinstance(row, dict):
                continue
            try:
                phase = Phase(row["phase"])
                host_id, model_id, digest = row["host_id"], row["model_id"], row["digest"]
                samples = row["samples"]
                mean, updated = row["mean_s"], row["updated_at"]
            except (KeyError, ValueError, TypeError):
                continue
            if not all(isinstance(v, str) for v in (host_id, model_id, digest)):
                continue
            if not isinstance(samples, int) or not 1 <= samples <= EWMA_SAMPLES:
                continue
            if not valid_report(mean) or not isinstance(updated, int | float):
                continue
            if not math.isfinite(float(updated)):
                continue
            table._entries[(phase, host_id, model_id, digest)] = Learned(
                mean_s=float(mean), samples=samples, updated_at=float(updated)
            )
        return table
