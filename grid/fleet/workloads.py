"""Workload vocabulary: the snapshot's `workloads` and `outcomes`, portfolio policy and report.

Schema v1 additions of DESIGN.md's Portfolio contract (see docs/portfolio.md for the reading):

    workloads   {word: WorkloadForecast}   unbound/`auto` demand per workload word, kept apart
                                           from named-model `demand`
    outcomes    [Outcome]                  the evidence store's view for this tick, keyed by
                                           (model_id, workload, artifact_sha256)
    policy.workload_vocabulary             the configured words (default: the spec's nine)
    policy.portfolio                       the portfolio rules' numbers (spec defaults)

Workload words in `workloads`, `outcomes[i].workload` and `models[i].workload_scores` must be
words of the vocabulary; `check_workload_words` raises a `SnapshotError` naming the field path.
The plan's `portfolio` report classes live here too (one vocabulary for producer and reader).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grid.fleet.errors import SnapshotError

DEFAULT_WORKLOAD_VOCABULARY: tuple[str, ...] = (
    "coding",
    "research",
    "marketing",
    "sales",
    "design",
    "image",
    "video",
    "embedding",
    "general",
)
WORD = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
DAY_S = 86400.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)


def _canonical_sha(value: str | None) -> str | None:
    if value is None:
        return None
    lowered = value.lower()
    if len(lowered) != 64 or any(c not in "0123456789abcdef" for c in lowered):
        raise ValueError("artifact_sha256 must be 64 hexadecimal characters")
    return lowered


class Modality(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    VIDEO = "video"
    EMBEDDING = "embedding"


class ReplacementAuthorization(_Strict):
    """A replacement path the plan authorized for a workload (a mature beneficiary's exact
    planner-proved path, docs/portfolio.md "Mature-beneficiary replacement"): `model_id` takes
    `host_id` once `victims` are gone. The controller carries it from the plan into the next
    forecasts until the beneficiary is READY there or the workload's evidence lapses."""

    model_id: str = Field(min_length=1)
    host_id: str = Field(min_length=1)
    victims: list[str] = Field(default_factory=list)


class WorkloadForecast(_Strict):
    """One workload word's forecast over the demand window (unbound and `auto` requests)."""

    offered_concurrency: float = Field(default=0.0, ge=0)  # arrival x service time + queue
    observations: int = Field(default=0, ge=0)  # requests seen in the demand window
    rpm: float = Field(default=0.0, ge=0)
    queue_depth: float = Field(default=0.0, ge=0)  # concurrency units of queued work
    failure_rate: float = Field(default=0.0, ge=0, le=1)
    modality: Modality = Modality.TEXT
    # The model the plan in effect maps this workload to (its `auto` requests route there);
    # the portfolio's mapping hysteresis reads it (grid/planner/portfolio/hysteresis.py).
    # None: no mapping in effect; an id without a profile is ignored.
    mapped_model: str | None = None
    # A replacement the plan in effect authorized for this workload (None: none).
    replacement: ReplacementAuthorization | None = None

    @property
    def arrival_concurrency(self) -> float:
        """The part of offered concurrency that arrivals explain (queued work removed)."""
        return max(0.0, self.offered_concurrency - self.queue_depth)


class Outcome(_Strict):
    """Measured evidence of one (model, workload, artifact revision) for this tick."""

    model_id: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    artifact_sha256: str | None = None
    requests: float = Field(default=0, ge=0)  # effective (decayed) count is allowed
    successes: float = Field(default=0, ge=0)
    mean_latency_ms: float = Field(default=0.0, ge=0)
    age_s: float = Field(default=0.0, ge=0)  # since the newest request
    quality: float | None = Field(default=None, ge=0, le=1)  # labelled quality, mean
    quality_samples: float = Field(default=0, ge=0)
    quality_age_s: float | None = Field(default=None, ge=0)  # since the newest evaluation

    @field_validator("artifact_sha256")
    @classmethod
    def _sha(cls, value: str | None) -> str | None:
        return _canonical_sha(value)

    @model_validator(mode="after")
    def _successes_within_requests(self) -> Outcome:
        if self.successes > self.requests:
            raise ValueError(f"successes {self.successes} exceed requests {self.requests}")
        return self


class PortfolioPolicy(_Strict):
    """The portfolio rules' numbers (the spec's defaults)."""

    min_observations: int = Field(default=3, ge=1)  # evidence gate: observations ...
    min_offered_concurrency: float = Field(default=1.5, gt=0)  # ... or device-time units
    # Words outside the vocabulary are simply never active.
    media_workloads: list[str] = Field(default_factory=lambda: ["image", "video"])
    media_canary_min_concurrency: float = Field(default=1.0, ge=0)  # image/video early canary
    canary_max_replicas: int = Field(default=1, ge=1)  # weak evidence cap
    service_full_requests: float = Field(default=20.0, gt=0)
    quality_full_samples: float = Field(default=8.0, gt=0)
    service_half_life_s: float = Field(default=7 * DAY_S, gt=0)
    quality_half_life_s: float = Field(default=7 * DAY_S, gt=0)
    exploration_bonus: float = Field(default=6.0, ge=0)
    fresh_success_s: float = Field(default=3600.0, gt=0)  # "fresh" successful response
    max_exploration_models: int = Field(default=1, ge=0)
    max_preemption_models: int = Field(default=1, ge=0)
    max_transition_penalty: float = Field(default=10.0, ge=0)
    max_candidates_per_workload: int = Field(default=4, ge=1)
    max_portfolios: int = Field(default=64, ge=1)
    spare_slot_reserve: int = Field(default=2, ge=0)  # slots kept: one unseen workload, one failure
    time_limit_s: float = Field(default=2.0, gt=0)  # CP-SAT budget; coordinate search after it
    # Mapping hysteresis: the mapping in effect keeps a workload unless the new portfolio is
    # better by more than these margins at the level that decides (docs/portfolio.md item 14).
    hysteresis_missing_replicas: int = Field(default=2, ge=0)
    hysteresis_utility_points: float = Field(default=5.0, ge=0)
    # A starved workload's mature beneficiary may replace an incumbent with at least this many
    # times the incumbent's confidence-weighted device-time pressure (docs/portfolio.md).
    mature_replacement_ratio: float = Field(default=1.5, ge=1.0)
    # ... of an incumbent READY at least this long (and past its minimum residency), so two
    # bursty workloads do not trade one room back and forth every few minutes.
    mature_victim_age_s: float = Field(default=1800.0, ge=0)


# ----------------------------------------------------------------------------- plan output


class AdmissionState(StrEnum):
    READY = "ready"
    STARTING = "starting"
    PLANNED = "planned"
    UNDERSUPPLIED = "undersupplied"
    DEFERRED = "deferred"
    CAPACITY_CONTENDED = "capacity-contended"
    BLOCKED_BY_RESIDENCY = "blocked-by-residency"
    INFEASIBLE = "infeasible"
    AWAITING_PLAN = "awaiting-plan"


class AdmissionRow(BaseModel):
    workload: str
    state: AdmissionState
    reason: str  # starts with a stable code: "below_evidence_gate: 2 of 3 observations"
    model_id: str | None
    offered_concurrency: float
    desired: int
    planned: int
    ready: int
    missing: int
    eligible_hosts: int
    startup_s: float | None


class CandidateRow(BaseModel):
    workload: str
    model_id: str
    feasible: bool
    rejection: str | None
    eligible_hosts: int
    best_host: str | None
    startup_s: float | None
    transition_penalty: float
    utility: float
    confidence: float
    exploration_bonus: float
    # The feasibility scan's ranked preemption paths (at most 16), for an uncovered workload's
    # infeasible candidate: "HOST: victim, victim" (docs/portfolio.md item 15). Left out of
    # the document when empty, so the contract's candidate keys are unchanged then.
    preemption_paths: list[str] = Field(default_factory=list)

    @pydantic.model_serializer(mode="wrap")
    def _omit_empty(self, handler: pydantic.SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_empty(handler(self), "preemption_paths")


class PortfolioLevel(BaseModel):
    level: str  # covered, pressure, spare_slots, missing, utility, transition, quality
    sense: str  # max or min
    value: int


class PortfolioSolver(BaseModel):
    engine: str  # cp-sat or coordinate-search
    status: str
    wall_ms: float
    objective: list[PortfolioLevel] = Field(default_factory=list)
    message: str = ""


class PortfolioReport(BaseModel):
    mapping: dict[str, str] = Field(default_factory=dict)
    selected_models: list[str] = Field(default_factory=list)
    exploration_model: str | None = None
    admission: list[AdmissionRow] = Field(default_factory=list)
    candidates: list[CandidateRow] = Field(default_factory=list)
    solver: PortfolioSolver
    # workload -> the replacement this plan authorizes (new, or carried until fulfilled); left
    # out of the document when empty, so the contract's portfolio keys are unchanged then
    replacements: dict[str, ReplacementAuthorization] = Field(default_factory=dict)

    @pydantic.model_serializer(mode="wrap")
    def _omit_empty(self, handler: pydantic.SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_empty(handler(self), "replacements")


def _without_empty(data: Any, key: str) -> dict[str, Any]:
    out = dict(data)
    if not out.get(key):
        out.pop(key, None)
    return out


# ----------------------------------------------------------------------------- validation


def _unknown_word(word: str, path: str, vocabulary: tuple[str, ...]) -> SnapshotError:
    return SnapshotError(
        "unknown_workload",
        f"workload {word!r} is not in the configured vocabulary ({', '.join(vocabulary)})",
        fix="use one of those words, or add it to policy.workload_vocabulary",
        path=path,
    )


class _Scored(Protocol):
    model_id: str
    workload_scores: dict[str, float]


def check_workload_words(
    vocabulary_words: Sequence[str],
    models: Sequence[_Scored],
    workloads: Mapping[str, WorkloadForecast],
    outcomes: Sequence[Outcome],
) -> None:
    """Every workload word is in the vocabulary; every outcome names a configured model.

    Called by FleetSnapshot's validator with its policy vocabulary, models, workloads and
    outcomes (a SnapshotError with the field path on the first problem).
    """
    vocabulary = tuple(vocabulary_words)
    for i, word in enumerate(vocabulary):
        if not WORD.match(word) or word in vocabulary[:i]:
            raise SnapshotError(
                "invalid_workload_vocabulary",
                f"vocabulary word {word!r} is repeated or not a lower-case word of 1-32 letters",
                fix="list distinct lower-case words such as coding, research, general",
                path=f"policy.workload_vocabulary[{i}]",
            )
    words = set(vocabulary)
    for i, model in enumerate(models):
        for word in model.workload_scores:
            if word not in words:
                raise _unknown_word(word, f"models[{i}].workload_scores.{word}", vocabulary)
    for word in workloads:
        if word not in words:
            raise _unknown_word(word, f"workloads.{word}", vocabulary)
    known = {m.model_id for m in models}
    for i, outcome in enumerate(outcomes):
        if outcome.workload not in words:
            raise _unknown_word(outcome.workload, f"outcomes[{i}].workload", vocabulary)
        if outcome.model_id not in known:
            raise SnapshotError(
                "unknown_model",
                f"outcome names model {outcome.model_id!r}, which has no profile",
                fix="add a profile for it under `models`, or drop the outcome entry",
                path=f"outcomes[{i}].model_id",
            )
