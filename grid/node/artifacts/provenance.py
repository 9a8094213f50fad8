"""Provenance of predictive downloads on a managed node, and the node's own eviction check.

A `PredictiveRecord` exists only for an artifact this node actually downloaded (bytes were
transferred and published) because a command marked `predictive` asked for it; a file that was
already cached, a catalog (operator) file and a demanded download never get one. A warm marks
the record used for good. `evict_refusal` is the node's fail-safe before it deletes anything:
the controller has checked the same facts against the latest heartbeat, but the node's own
state is the last word.

Refusal codes (each with a sentence): evict_sha_missing, evict_not_held, evict_used,
evict_active, evict_operator_cache.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from grid.fleet import LIVE_STATES, ResidencyState, WirePredictiveEntry

MIB = 1024 * 1024


class PredictiveRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model_id: str
    sha256: str
    path: str
    size_bytes: int = Field(ge=0)
    fetched_at: float = Field(ge=0)  # node wall clock (reported as an age)
    warmed: bool = False


EVICT_TEXT: dict[str, str] = {
    "evict_sha_missing": "the evict command names no artifact_sha256, so nothing is deleted",
    "evict_not_held": "this node holds no predictive download of exactly that SHA-256",
    "evict_used": "the download was warmed once; a used artifact is never evicted",
    "evict_active": "the model is live on this node",
    "evict_operator_cache": "the file belongs to the operator's catalog, not to a prediction",
}


def evict_refusal(
    record: PredictiveRecord | None,
    sha256: str | None,
    residency_state: ResidencyState | None,
    catalog_paths: Iterable[str],
) -> str | None:
    """Why the node refuses to evict (None: it may delete exactly `record.path`)."""
    if not sha256:
        return "evict_sha_missing"
    if record is None or record.sha256 != sha256.lower():
        return "evict_not_held"
    if residency_state is not None and residency_state in LIVE_STATES:
        return "evict_active"
    if record.warmed:
        return "evict_used"
    if record.path in set(catalog_paths):
        return "evict_operator_cache"
    return None


def predictive_rows(
    records: Mapping[str, PredictiveRecord], present: Iterable[str], now: float
) -> list[WirePredictiveEntry]:
    """The heartbeat's provenance rows: one per record whose file is still present."""
    here = set(present)
    return [
        WirePredictiveEntry(
            model_id=r.model_id,
            sha256=r.sha256,
            size_mb=math.ceil(r.size_bytes / MIB),
            cached_age_s=round(max(0.0, now - r.fetched_at), 3),
            warmed=r.warmed,
        )
        for _m, r in sorted(records.items())
        if r.model_id in here
    ]
