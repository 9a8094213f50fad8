"""Failure-domain spreading after the greedy fill: move a replica, never change a count (pure).

The objective ranks domain diversity right after the replica levels, so a replica sitting in a
domain its model already covers is moved to a host in an uncovered domain whenever that host
takes it now. Counts stay the same, so no replica level changes; pinned replicas never move.
New placements move before incumbents (cheaper disruption). Bounded by MAX_ATTEMPTS.
"""

from __future__ import annotations

from grid.planner.heuristic_ledger import Key, PlacementState

MAX_ATTEMPTS = 256
MAX_TARGETS = 24  # best-scored hosts tried per move: keeps a 1,000-host fleet in milliseconds


def spread_domains(state: PlacementState, scores: dict[Key, int]) -> None:
    problem = state.problem
    attempts = 0
    for model in problem.models:  # priority order: the most important models spread first
        goal = model.min_failure_domains
        if goal < 2:
            continue
        model_id = model.model_id
        while _shortfall(state, model_id, goal) > 0 and attempts < MAX_ATTEMPTS:
            attempts += 1
            if not _move_one(state, model_id, scores):
                break


def _shortfall(state: PlacementState, model_id: str, goal: int) -> int:
    return max(0, min(goal, state.counts[model_id]) - len(state.domains[model_id]))


def _move_one(state: PlacementState, model_id: str, scores: dict[Key, int]) -> bool:
    problem = state.problem
    hosts = problem.host_by_id
    covered = state.domains[model_id]
    movable = sorted(
        (
            problem.candidates[(m, h)]
            for m, h in state.placed
            if m == model_id and covered.get(hosts[h].domain, 0) >= 2
        ),
        key=lambda c: (
            c.pinned,
            c.incumbent is not None,
            scores[(c.model_id, c.host_id)],
            c.host_id,
        ),
    )
    targets = sorted(
        (
            c
            for c in problem.candidates_of_model(model_id)
            if hosts[c.host_id].domain not in covered
        ),
        key=lambda c: (-scores[(c.model_id, c.host_id)], c.host_id),
    )[:MAX_TARGETS]
    for old in movable:
        if old.pinned:
            break
        state.remove(old)
        for new in targets:
            if state.allowed(new) and state.fits(new):
                state.add(new)
                return True
        state.add(old)
    return False
