"""Demand: request observations -> bounded bucketed history -> forecasts and correlations (pure).

Also the workload side (issue 9): the request classifier, workload forecasts, outcome evidence
and workflow learning. docs/workloads.md describes how the controller wires them.
"""

from grid.demand.classify import (
    ClassifierConfig,
    RequestOutcome,
    RequestShape,
    classify,
    classify_request,
    observation_from,
)
from grid.demand.config import DEFAULT_WORKLOADS, DemandConfig
from grid.demand.correlation import Relation, RelationKind
from grid.demand.evidence import EvidenceEntry, EvidenceStore
from grid.demand.observation import (
    EndpointFamily,
    Modality,
    Observation,
    Outcome,
    parse_observation,
)
from grid.demand.smoothing import lookahead_concurrency
from grid.demand.throughput import (
    MAX_AGE_S,
    MAX_TRACKED,
    Ewma,
    Measurements,
    PlacementEstimate,
    RevisionKey,
)
from grid.demand.tracker import DemandTracker, Footprint, ModelForecast
from grid.demand.workflow import LearnedEdge, Step, WorkflowConfig, WorkflowLearner
from grid.demand.workloads import WorkloadReading, WorkloadTracker, feeds_workload

__all__ = [
    "DEFAULT_WORKLOADS",
    "MAX_AGE_S",
    "MAX_TRACKED",
    "ClassifierConfig",
    "DemandConfig",
    "DemandTracker",
    "EndpointFamily",
    "EvidenceEntry",
    "EvidenceStore",
    "Ewma",
    "Footprint",
    "LearnedEdge",
    "Measurements",
    "Modality",
    "ModelForecast",
    "Observation",
    "Outcome",
    "PlacementEstimate",
    "Relation",
    "RelationKind",
    "RequestOutcome",
    "RequestShape",
    "RevisionKey",
    "Step",
    "WorkflowConfig",
    "WorkflowLearner",
    "WorkloadReading",
    "WorkloadTracker",
    "classify",
    "classify_request",
    "feeds_workload",
    "lookahead_concurrency",
    "observation_from",
    "parse_observation",
]
