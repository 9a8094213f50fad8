"""The predictive artifact cache's vocabulary (spec "Affinity-bound workflow learning" and the
provenance paragraph of the scenario lab; docs/predictive-cache.md gives the reading).

Snapshot additions (schema v1, all optional):

    predictions               [Prediction]        learned workflow edges whose source workload
                                                  is active now, each naming the next stage's
                                                  model (the controller builds them)
    hosts[i].predictive_cache [PredictiveEntry]   artifacts the node downloaded because of a
                                                  predictive prefetch: exact SHA-256, size,
                                                  when it was cached, whether it was ever warmed
    policy.predictive_disk_reserve_mb             free disk a predictive transfer must leave
                                                  (in `Policy`; 0 disables the reserve)
    policy.prefetch                               the numbers below (`PrefetchPolicy`)

Plan addition: `prefetch` (`PrefetchReport`, absent when there is nothing to say): the
cache-only advisories (at most `max_advisories_per_plan`), the exact evictions (expired or
replaced predictive entries) and what was not staged, with a stable code and a sentence.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)


def _sha(value: str) -> str:
    lowered = value.lower()
    if len(lowered) != 64 or any(c not in "0123456789abcdef" for c in lowered):
        raise ValueError("sha256 must be 64 hexadecimal characters")
    return lowered


class PrefetchPolicy(_Strict):
    """The predictive cache's numbers (the spec's defaults)."""

    enabled: bool = True
    max_advisories_per_plan: int = Field(default=1, ge=0, le=64)  # "one ... advisory"
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)  # edges below: no advisory
    cache_ttl_s: float = Field(default=6 * 3600.0, gt=0)  # unused predictive entries expire
    replacement_min_age_s: float = Field(default=15 * 60.0, ge=0)  # a victim's time in cache
    replacement_gain: float = Field(default=2.0, ge=1.0)  # value per byte over the victims'
    max_replacement_victims: int = Field(default=3, ge=1, le=8)  # searched as one group
    # A model the plan already serves gets a copy for its next replica only while its current
    # plus expected predicted load fills at least this share of the planned replicas' capacity
    # (0.5: a surge the demand lookahead can project, at most 2x, would need one more).
    surge_utilization: float = Field(default=0.5, ge=0.0, le=1.0)


class Prediction(_Strict):
    """A learned workflow edge source -> target whose source workload has demand now."""

    model_id: str = Field(min_length=1)  # the model the target workload would use
    source: str = Field(min_length=1)  # workload word the edge leaves
    target: str = Field(min_length=1)  # workload word it predicts
    confidence: float = Field(gt=0.0, le=1.0)  # the edge's count over its source's departures
    offered_concurrency: float = Field(ge=0)  # the source's current pressure (units)
    lead_s: float | None = Field(default=None, ge=0)  # learned median stage-to-stage lead

    @property
    def edge(self) -> str:
        return f"{self.source}->{self.target}"


class PredictiveEntry(_Strict):
    """One artifact a managed node downloaded because of a predictive prefetch."""

    model_id: str = Field(min_length=1)
    sha256: str
    size_mb: int = Field(ge=0)
    cached_at: float = Field(ge=0)  # controller clock (rebuilt from the node's reported age)
    warmed: bool = False  # ever started by an engine: a used download, never evicted

    @field_validator("sha256")
    @classmethod
    def _exact(cls, value: str) -> str:
        return _sha(value)


# ----------------------------------------------------------------------------- plan output


class PrefetchAdvisory(BaseModel):
    """A cache-only transfer: download and verify, never warm, no memory, no slot."""

    model_id: str
    host_id: str
    sha256: str
    size_mb: int
    edge: str  # "source->target"
    confidence: float
    pressure: float  # the source's offered concurrency
    transfer_s: float  # this host's learned (or configured) artifact transfer time
    lead_s: float | None  # learned stage-to-stage lead (None: unknown)
    counted_s: float  # transfer seconds that can finish before the predicted demand
    value_s: float  # confidence x pressure x counted_s
    value_per_mb: float
    disk_left_mb: int  # post-assignment free disk after this transfer (before the reserve)
    reason: str = ""


class CacheEviction(BaseModel):
    """An exact-SHA eviction of one unused predictive entry."""

    model_id: str
    host_id: str
    sha256: str
    size_mb: int
    code: str  # "expired" or "replaced"
    age_s: float
    beneficiary_model_id: str | None = None  # the stronger prediction a replacement makes room for
    reason: str = ""


class PrefetchSkip(BaseModel):
    """A prediction (or a host) no advisory was staged for, and why."""

    model_id: str
    host_id: str | None = None
    code: str
    message: str
    edge: str = ""


class PrefetchReport(BaseModel):
    advisories: list[PrefetchAdvisory] = Field(default_factory=list)
    evictions: list[CacheEviction] = Field(default_factory=list)
    skipped: list[PrefetchSkip] = Field(default_factory=list)
    reserve_mb: int = 0
