"""Capacity-blind bounds on every level: cheap proofs that let the solver skip a stage.

Each model could at best reach fixed + min(open, pinned candidates + min(unpinned candidates,
unpinned allowance)) replicas; the replica levels are scored on those counts. The bound of a
minimized level is its smallest conceivable value (0). A hint that meets a level's bound is
optimal on that level whatever the earlier levels fixed.
"""

from __future__ import annotations

import heapq
import operator

from grid.planner.cpsat.allowance import unpinned_allowance
from grid.planner.levels import (
    baseline_members,
    baseline_rounds,
    direct_rounds,
    inferred_members,
    model_scores,
    quality_scores,
    round_members,
)
from grid.planner.problem import PlacementProblem

_PINNED = operator.attrgetter("pinned")


def reachable_replicas(problem: PlacementProblem) -> dict[str, int]:
    out: dict[str, int] = {}
    for profile in problem.models:
        model_id = profile.model_id
        cands = problem.candidates_of_model(model_id)
        pinned = sum(map(_PINNED, cands)) if profile.pinned_hosts else 0
        unpinned = min(len(cands) - pinned, unpinned_allowance(problem, model_id))
        room = problem.open_replicas(model_id)
        out[model_id] = problem.fixed_count(model_id) + min(room, pinned + unpinned)
    return out


def static_bounds(
    problem: PlacementProblem, quality: dict[tuple[str, str], int] | None = None
) -> dict[str, int]:
    reach = reachable_replicas(problem)
    harm = problem.harm_rank
    fixed_pinned = sum(
        1 for f in problem.fixed if f.host_id in problem.model_by_id[f.model_id].pinned_hosts
    )
    bounds = {
        "pinned": fixed_pinned
        + sum(
            min(
                problem.open_replicas(m.model_id),
                sum(map(_PINNED, problem.candidates_of_model(m.model_id))),
            )
            for m in problem.models
            if m.pinned_hosts
        )
    }
    for p in problem.priorities:
        for k in baseline_rounds(problem, p):
            ids = baseline_members(problem, p, k)
            bounds[f"p{p}:baseline:{k}"] = sum(1 for m in ids if reach[m] >= k)
        for k in direct_rounds(problem, p):
            ids = [m for m in round_members(problem, p, k) if reach[m] >= k]
            bounds[f"p{p}:direct:{k}"] = len(ids)
            bounds[f"p{p}:direct:{k}:harm"] = sum(harm[m] for m in ids)
        inferred = inferred_members(problem, p)
        if inferred:
            bounds[f"p{p}:inferred"] = sum(
                min(reach[m], problem.targets[m].desired)
                - min(reach[m], problem.targets[m].baseline)
                for m in inferred
            )
    bounds["domain_shortfall"] = 0
    bounds["disruption"] = 0
    scores = quality if quality is not None else quality_scores(problem)
    best_quality = 0
    for profile in problem.models:
        cands = problem.candidates_of_model(profile.model_id)
        variable = reach[profile.model_id] - problem.fixed_count(profile.model_id)
        values = (
            model_scores(problem, cands)
            if scores is quality_scores(problem)
            else [scores[(c.model_id, c.host_id)] for c in cands]
        )
        best_quality += sum(s for s in heapq.nlargest(variable, values) if s > 0)
    bounds["quality"] = best_quality
    fixed_hosts = {f.host_id for f in problem.fixed}
    bounds["spare_hosts"] = sum(
        1 for h in problem.hosts if h.admitting and h.host_id not in fixed_hosts
    )
    return bounds
