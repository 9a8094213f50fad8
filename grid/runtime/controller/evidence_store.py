"""The controller's outcome evidence: a locked `EvidenceStore` and the evaluation gate.

`EvidenceKeeper` is the one place that changes the controller's evidence: labelled quality from
`POST /allocator/evaluations` (operator capability, checked by the route) and served responses
of classified requests. An evaluation is refused, with nothing recorded, when its model has no
profile (`unknown_model`), its workload is not a vocabulary word (`unknown_workload`), its
quality is not a number in [0, 1] (`invalid_quality`), or its artifact_sha256 is not the
profile's configured revision (`artifact_mismatch`). Without an artifact_sha256 the evaluation
is about the configured revision.

`RequestSignals` bundles what one classified request teaches the controller besides named
model demand: workload demand (grid/demand/workloads.py), outcome evidence for the model that
served it, and workflow transitions (grid/demand/workflow.py), so that wiring the proxy and the
snapshot is a few lines (docs/workloads.md lists them).

Until the controller holds the keeper itself (the persistence step, see docs/workloads.md),
`keeper_for(controller)` keeps one keeper per controller object.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from grid.demand import (
    DemandConfig,
    EvidenceStore,
    LearnedEdge,
    Observation,
    Step,
    WorkflowConfig,
    WorkflowLearner,
    WorkloadTracker,
    feeds_workload,
)
from grid.fleet import GridError, ModelProfile, Outcome, PortfolioPolicy, WorkloadForecast
from grid.fleet.operator import RecordedEvaluation


class EvaluationRequest(BaseModel):
    """The body of POST /allocator/evaluations (types only; the keeper checks the values)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str = Field(min_length=1, max_length=256, description="A configured model ID")
    workload: str = Field(min_length=1, max_length=64, description="A workload vocabulary word")
    quality: float = Field(description="Labelled quality in [0, 1]")
    artifact_sha256: str | None = Field(
        default=None,
        max_length=128,
        description="The artifact revision judged; must be the profile's configured SHA-256",
    )


def _refuse(code: str, message: str, fix: str, status: int, path: str) -> GridError:
    return GridError(
        code,
        message,
        fix=fix,
        path=path,
        next_command="grid allocator status",
        details={"http_status": status},
    )


def check_evaluation(
    body: EvaluationRequest, profiles: Mapping[str, ModelProfile], vocabulary: Sequence[str]
) -> str | None:
    """The configured revision the evaluation is about; GridError when it is refused."""
    profile = profiles.get(body.model)
    if profile is None:
        raise _refuse(
            "unknown_model",
            f"model {body.model!r} has no profile, so it cannot be evaluated",
            "evaluate a configured model (`grid allocator status` lists them)",
            404,
            "model",
        )
    if body.workload not in vocabulary:
        raise _refuse(
            "unknown_workload",
            f"workload {body.workload!r} is not in the configured vocabulary",
            f"use one of: {', '.join(vocabulary)}",
            422,
            "workload",
        )
    if not (math.isfinite(body.quality) and 0.0 <= body.quality <= 1.0):
        raise _refuse(
            "invalid_quality",
            "quality must be a number from 0 (useless) to 1 (perfect)",
            "send quality as a number in [0, 1]",
            422,
            "quality",
        )
    configured = profile.artifact_sha256.lower() if profile.artifact_sha256 else None
    given = body.artifact_sha256.lower() if body.artifact_sha256 is not None else configured
    if given != configured:
        raise _refuse(
            "artifact_mismatch",
            f"the evaluation names another artifact revision than model {body.model!r} has "
            f"configured ({configured or 'none'})",
            "evaluate the configured revision: send its artifact_sha256, or leave it out",
            409,
            "artifact_sha256",
        )
    return configured


class EvidenceKeeper:
    """The controller's evidence store behind a lock (requests and evaluations race)."""

    def __init__(self, store: EvidenceStore | None = None) -> None:
        self._store = store or EvidenceStore()
        self._lock = threading.Lock()

    def record_evaluation(
        self,
        body: EvaluationRequest,
        *,
        profiles: Mapping[str, ModelProfile],
        vocabulary: Sequence[str],
        policy: PortfolioPolicy,
        now: float,
    ) -> RecordedEvaluation:
        revision = check_evaluation(body, profiles, vocabulary)  # raises before anything changes
        with self._lock:
            self._store.record_evaluation(
                body.model, body.workload, revision, body.quality, now=now, policy=policy
            )
            entry = self._store.get(body.model, body.workload, revision)
            assert entry is not None  # just recorded
            row = entry.outcome(now)
            return RecordedEvaluation(
                model_id=body.model,
                workload=body.workload,
                artifact_sha256=revision,
                quality=row.quality,
                quality_samples=row.quality_samples,
                quality_confidence=entry.quality_confidence(now, policy),
            )

    def record_observation(
        self, obs: Observation, artifact_sha256: str | None, now: float, policy: PortfolioPolicy
    ) -> bool:
        with self._lock:
            return self._store.record_observation(obs, artifact_sha256, now, policy)

    def outcomes(self, now: float, profiles: Mapping[str, ModelProfile]) -> list[Outcome]:
        """The snapshot's `outcomes` for the configured models at their configured revisions."""
        revisions = {m: p.artifact_sha256 for m, p in profiles.items()}
        with self._lock:
            return self._store.outcomes(now, revisions)

    def forget(self, profiles: Mapping[str, object]) -> int:
        with self._lock:
            return self._store.forget(profiles)

    def to_state(self) -> dict[str, object]:
        with self._lock:
            return self._store.to_state()

    @classmethod
    def from_state(cls, state: Mapping[str, object] | None) -> EvidenceKeeper:
        """GridError `invalid_evidence_state` for a bad state (the caller warns and starts
        empty)."""
        return cls(EvidenceStore.from_state(state) if state else None)


_KEEPERS: weakref.WeakKeyDictionary[object, EvidenceKeeper] = weakref.WeakKeyDictionary()
_KEEPERS_LOCK = threading.Lock()


def keeper_for(controller: object) -> EvidenceKeeper:
    """The controller's keeper: its own `evidence` attribute once it has one, else one kept
    here per controller object (in memory until the persistence step)."""
    own = getattr(controller, "evidence", None)
    if isinstance(own, EvidenceKeeper):
        return own
    with _KEEPERS_LOCK:
        keeper = _KEEPERS.get(controller)
        if keeper is None:
            keeper = _KEEPERS[controller] = EvidenceKeeper()
        return keeper


@dataclass(frozen=True)
class Signal:
    """What `RequestSignals.observe` did with one request."""

    workload_demand: bool  # True: workload demand only; False: the caller feeds model demand
    evidence: bool  # outcome evidence recorded for the serving model
    workflow: Step


class RequestSignals:
    """Workload demand, outcome evidence and workflow learning of one controller."""

    def __init__(
        self,
        demand: DemandConfig,
        *,
        secret: bytes,
        evidence: EvidenceKeeper | None = None,
        workloads: WorkloadTracker | None = None,
        workflow: WorkflowConfig | None = None,
    ) -> None:
        self.evidence = evidence or EvidenceKeeper()
        self.workloads = workloads or WorkloadTracker(demand)
        self.workflow = WorkflowLearner(secret, workflow)
        self._lock = threading.Lock()

    def observe(
        self,
        obs: Observation,
        *,
        profiles: Mapping[str, ModelProfile],
        policy: PortfolioPolicy,
        now: float,
        served_sha256: str | None = None,
        affinity_digest: str | None = None,
    ) -> Signal:
        """Fold one classified request. `served_sha256` is the artifact revision of the engine
        that served it (evidence is kept per revision); `affinity_digest` the router's hash of
        the request's X-Grid-Affinity-Key, if it had one."""
        unbound = feeds_workload(obs, profiles)
        with self._lock:
            if unbound:
                self.workloads.observe(obs, now)
            step = self.workflow.observe(
                affinity_digest,
                obs.workload,
                started_at=obs.timestamp - obs.latency_s,
                completed_at=obs.timestamp,
                now=now,
            )
        served = obs.served_model_id is not None and obs.served_model_id in profiles
        recorded = served and self.evidence.record_observation(obs, served_sha256, now, policy)
        return Signal(workload_demand=unbound, evidence=recorded, workflow=step)

    def snapshot_fields(
        self, now: float, profiles: Mapping[str, ModelProfile]
    ) -> tuple[dict[str, WorkloadForecast], list[Outcome]]:
        """The snapshot's `workloads` and `outcomes` at `now`."""
        with self._lock:
            self.workloads.prune(now)
            forecast = self.workloads.forecast(now)
        return forecast, self.evidence.outcomes(now, profiles)

    def edges(self, now: float) -> list[LearnedEdge]:
        with self._lock:
            return self.workflow.edges(now)
