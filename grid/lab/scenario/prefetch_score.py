"""The scenario report's prefetch scorecard, from one run's action records (pure).

Everything here is what the production path did: the planner's cache-only advisories became
predictive LOAD records (grid/runtime/reconcile/cache.py) and its evictions EVICT records; the
simulated nodes executed them. Per run:

- downloads: predictive loads that succeeded (each fetched a missing artifact: the reconciler
  proposes one only when the exact artifact is not cached), and their megabytes;
- hits: downloads a later successful WARM of the same model on the same host used: a warm
  created after the download finished that needed no load of its own (the whole transfer
  avoided), or a warm that joined the still-running predictive load as its dependency (the
  transfer time already done when the placement came is avoided); at most one hit per download;
- unused: downloads no warm ever used; expired and replaced: successful evicts by reason, and
  the predictive megabytes they reclaimed;
- avoided_load_s: the transfer seconds hits took off cold starts (the profile's load estimate,
  what the lab's startup accounting charges a cold start); lead_s: download finished (or, for a
  joined load, started) to the warm that used it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grid.fleet import ActionKind, ActionRecord, ModelProfile, RecordStatus
from grid.runtime.reconcile import EXPIRED_REASON, REPLACED_REASON


@dataclass
class _Download:
    record: ActionRecord
    used: bool = False


@dataclass
class PrefetchScore:
    downloads: int = 0
    downloaded_mb: int = 0
    hits: int = 0
    unused: int = 0
    expired: int = 0
    replaced: int = 0
    reclaimed_mb: int = 0
    avoided_load_s: float = 0.0
    lead_s: list[float] = field(default_factory=list)

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.downloads if self.downloads else None

    def document(self) -> dict[str, Any]:
        rate = self.hit_rate
        return {
            "downloads": self.downloads,
            "hits": self.hits,
            "unused": self.unused,
            "hit_rate": None if rate is None else round(rate, 4),
            "downloaded_mb": self.downloaded_mb,
            "expired": self.expired,
            "replaced": self.replaced,
            "reclaimed_mb": self.reclaimed_mb,
            "avoided_load_s": round(self.avoided_load_s, 1),
            "mean_lead_s": round(statistics.fmean(self.lead_s), 1) if self.lead_s else None,
        }


def _finished(record: ActionRecord) -> float:
    return record.finished_at if record.finished_at is not None else record.created_at


def prefetch_score(
    records: Iterable[ActionRecord], profiles: Mapping[str, ModelProfile]
) -> PrefetchScore:
    ordered = sorted(records, key=lambda r: (r.created_at, r.action_id))
    by_id = {r.action_id: r for r in ordered}
    score = PrefetchScore()
    downloads: dict[tuple[str, str], list[_Download]] = {}
    for rec in ordered:
        prof = profiles.get(rec.model_id)
        if rec.status is not RecordStatus.SUCCEEDED or prof is None:
            continue
        key = (rec.host_id, rec.model_id)
        if rec.kind is ActionKind.LOAD and rec.predictive:
            score.downloads += 1
            score.downloaded_mb += prof.artifact_size_mb
            downloads.setdefault(key, []).append(_Download(rec))
        elif rec.kind is ActionKind.EVICT and rec.predictive:
            score.reclaimed_mb += prof.artifact_size_mb
            if rec.reason.startswith(EXPIRED_REASON):
                score.expired += 1
            elif rec.reason.startswith(REPLACED_REASON):
                score.replaced += 1
        elif rec.kind is ActionKind.WARM:
            _warm(score, rec, prof, downloads.get(key, []), by_id)
    score.unused = sum(1 for found in downloads.values() for d in found if not d.used)
    return score


def _warm(
    score: PrefetchScore,
    warm: ActionRecord,
    prof: ModelProfile,
    found: list[_Download],
    by_id: Mapping[str, ActionRecord],
) -> None:
    loads = [by_id[d] for d in warm.dependencies if d in by_id and by_id[d].kind is ActionKind.LOAD]
    for download in found:
        if download.used:
            continue
        load = download.record
        if not loads and _finished(load) <= warm.created_at:
            lead, avoided = warm.created_at - _finished(load), prof.load_estimate_s
        elif any(d.action_id == load.action_id for d in loads):
            lead = warm.created_at - load.created_at
            avoided = min(prof.load_estimate_s, max(0.0, lead))
        else:
            continue
        download.used = True
        score.hits += 1
        score.avoided_load_s += avoided
        score.lead_s.append(lead)
        return
