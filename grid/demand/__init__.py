"""Demand: request observations -> bounded bucketed history -> forecasts and correlations (pure)."""

from grid.demand.config import DEFAULT_WORKLOADS, DemandConfig
from grid.demand.correlation import Relation, RelationKind
from grid.demand.observation import (
    EndpointFamily,
    Modality,
    Observation,
    Outcome,
    parse_observation,
)
from grid.demand.smoothing import lookahead_concurrency
from grid.demand.tracker import DemandTracker, Footprint, ModelForecast

__all__ = [
    "DEFAULT_WORKLOADS",
    "DemandConfig",
    "DemandTracker",
    "EndpointFamily",
    "Footprint",
    "Modality",
    "ModelForecast",
    "Observation",
    "Outcome",
    "Relation",
    "RelationKind",
    "lookahead_concurrency",
    "parse_observation",
]
