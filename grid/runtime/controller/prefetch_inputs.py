"""The snapshot's `predictions` for the predictive cache (issue 23), as pure functions of `now`.

A prediction names a model that demand is expected to reach, how sure the evidence is and the
concurrency it would bring; the planner (grid/planner/prefetch) may stage a cache-only advisory
for one that cannot get a serving slot. Two producers, both already learned by the controller:

- a learned workflow edge source -> target whose source workload has offered concurrency now:
  the target workload's model (`target_model`: the portfolio's mapping, else the profile with
  the best workload score), the edge's confidence, the source's offered concurrency as the
  pressure it would bring (a session moves on to its next stage), and the edge's learned
  median stage-to-stage lead;
- a correlation inference of the demand tracker (a quiet model related to a model with direct
  demand now): the relation's share as the confidence, the inferred concurrency over that share
  as the pressure, no lead (unknown timing keeps the whole transfer time).

`snapshot_demand` is the controller's demand step (the workflow pre-warm of
workload_inputs.py) together with these predictions, so one tracker pass serves both. The
scenario lab calls the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grid.demand import LearnedEdge, ModelForecast
from grid.fleet import DemandEntry, ModelProfile, Prediction, WorkloadForecast
from grid.runtime.controller.workload_inputs import prewarm_demand, target_model


def workflow_predictions(
    edges: Sequence[LearnedEdge],
    workloads: Mapping[str, WorkloadForecast],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
) -> list[Prediction]:
    out: list[Prediction] = []
    for edge in edges:
        source = workloads.get(edge.source)
        if source is None or source.offered_concurrency <= 0 or edge.confidence <= 0:
            continue
        model_id = target_model(edge.target, mapping, profiles)
        if model_id is None:
            continue
        out.append(
            Prediction(
                model_id=model_id,
                source=edge.source,
                target=edge.target,
                confidence=min(1.0, edge.confidence),
                offered_concurrency=source.offered_concurrency,
                lead_s=edge.lead_s,
            )
        )
    return out


def correlation_predictions(explained: Mapping[str, ModelForecast]) -> list[Prediction]:
    out: list[Prediction] = []
    for model_id, forecast in sorted(explained.items()):
        relation = forecast.inferred_from
        if relation is None or relation.share <= 0:
            continue
        share = min(1.0, relation.share)
        out.append(
            Prediction(
                model_id=model_id,
                source=relation.source,
                target=model_id,
                confidence=share,
                offered_concurrency=forecast.entry.offered_concurrency / share,
            )
        )
    return out


def snapshot_demand(
    edges: Sequence[LearnedEdge],
    workloads: Mapping[str, WorkloadForecast],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
    explained: Mapping[str, ModelForecast],
) -> tuple[dict[str, DemandEntry], list[Prediction]]:
    """(the snapshot's demand with the workflow pre-warm, its predictions)."""
    forecast = {m: f.entry for m, f in explained.items()}
    demand = prewarm_demand(edges, workloads, mapping, profiles, forecast)
    predictions = workflow_predictions(edges, workloads, mapping, profiles)
    predictions += correlation_predictions(explained)
    return demand, predictions
