"""Bounded deterministic repair of a greedy placement (pure).

Greedy placement can fragment capacity or commit a round's first model to a host that two of
its peers could have shared. For each missing replica, most important first, the repair tries

1. a direct placement (an earlier move may have made room);
2. a move on one of the model's blocked candidate hosts: take one replica off the host (never
   a pinned one), place the missing replica there, fill what is left of the host with other
   missing replicas (most important first), and re-place the displaced replica elsewhere if
   it fits. The move is kept only when it improves the replica levels lexicographically
   (pinned, then per class baseline round by round, direct round by round with measured harm,
   inferred);
   otherwise it is undone exactly.

Every kept move strictly improves levels 1-2, and the number of tried moves is bounded by
`MAX_TRIALS` (independent of fleet size), so the repair ends quickly with the same result for
the same input.
"""

from __future__ import annotations

from grid.planner.heuristic_ledger import PlacementState
from grid.planner.heuristic_order import (
    STAGE_BASELINE,
    STAGE_DIRECT,
    CandidateOrder,
    LevelKey,
    replica_level,
    replica_stage,
)
from grid.planner.problem import Candidate, PlacementProblem

MAX_TRIALS = 256  # tried moves per repair, over all missing replicas
MAX_HOSTS_PER_REPLICA = 8  # blocked candidate hosts examined per missing replica

Journal = list[tuple[int, Candidate]]  # (+1 added / -1 removed, candidate), in order


def repair(state: PlacementState, order: CandidateOrder) -> None:
    trials = 0
    given_up: set[str] = set()
    while trials < MAX_TRIALS:
        model_id = _most_important_missing(state, given_up)
        if model_id is None:
            return
        direct = order.best(state, model_id)
        if direct is not None:
            state.add(direct)
            continue
        improved = False
        for wanted in _blocked_hosts(state, order, model_id):
            for occupant in _occupants(state, wanted.host_id):
                if trials >= MAX_TRIALS:
                    return
                trials += 1
                if _try_move(state, order, wanted, occupant):
                    improved = True
                    break
            if improved:
                break
        if not improved:
            given_up.add(model_id)


def _missing_level(state: PlacementState, model_id: str) -> LevelKey | None:
    problem = state.problem
    if not state.has_room_for_model(model_id):
        return None
    if state.counts[model_id] >= problem.targets[model_id].desired:
        return None
    return replica_level(problem, model_id, state.counts[model_id] + 1)


def _most_important_missing(state: PlacementState, given_up: set[str]) -> str | None:
    best: tuple[LevelKey, str] | None = None
    for model in state.problem.models:
        if model.model_id in given_up:
            continue
        level = _missing_level(state, model.model_id)
        if level is not None and (best is None or (level, model.model_id) < best):
            best = (level, model.model_id)
    return None if best is None else best[1]


def _blocked_hosts(state: PlacementState, order: CandidateOrder, model_id: str) -> list[Candidate]:
    """The model's best candidates that are allowed but do not fit now (bounded)."""
    out: list[Candidate] = []
    for cand in order.in_order(model_id):
        if not state.ledgers[cand.host_id].placed:
            continue  # nothing to take off: an empty host that does not fit stays so
        if state.allowed(cand) and not state.fits(cand):
            out.append(cand)
            if len(out) >= MAX_HOSTS_PER_REPLICA:
                break
    return out


def _occupants(state: PlacementState, host_id: str) -> list[Candidate]:
    """Replicas that may be taken off a host, least important first; never pinned ones."""
    problem = state.problem
    movable = [c for c in state.ledgers[host_id].placed.values() if not c.pinned]
    # Two stable sorts: level descending; among equals new before incumbents, then model_id.
    movable.sort(key=lambda c: (c.incumbent is not None, c.model_id))
    movable.sort(
        key=lambda c: replica_level(problem, c.model_id, state.counts[c.model_id]), reverse=True
    )
    return movable


def _try_move(
    state: PlacementState, order: CandidateOrder, wanted: Candidate, occupant: Candidate
) -> bool:
    journal: Journal = []

    def add(cand: Candidate) -> None:
        state.add(cand)
        journal.append((1, cand))

    state.remove(occupant)
    journal.append((-1, occupant))
    if state.allowed(wanted) and state.fits(wanted):
        add(wanted)
        for cand in _missing_on_host(state, wanted.host_id):
            if state.allowed(cand) and state.fits(cand):
                add(cand)
        elsewhere = order.best(state, occupant.model_id, skip_host=occupant.host_id)
        if elsewhere is not None:
            add(elsewhere)
        if _improves(state.problem, state.counts, journal):
            return True
    for sign, cand in reversed(journal):
        if sign > 0:
            state.remove(cand)
        else:
            state.add(cand)
    return False


def _missing_on_host(state: PlacementState, host_id: str) -> list[Candidate]:
    problem = state.problem
    ranked: list[tuple[LevelKey, str, Candidate]] = []
    for cand in problem.candidates_of_host(host_id):
        level = _missing_level(state, cand.model_id)
        if level is not None:
            ranked.append((level, cand.model_id, cand))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [cand for _level, _model, cand in ranked]


def _improves(problem: PlacementProblem, counts_after: dict[str, int], journal: Journal) -> bool:
    """Is the placement after `journal` lexicographically better on the replica levels?"""
    net: dict[str, int] = {}
    pinned = 0
    for sign, cand in journal:
        net[cand.model_id] = net.get(cand.model_id, 0) + sign
        if cand.pinned:
            pinned += sign
    if pinned:
        return pinned > 0
    # Per level: Δ replica count, then Δ measured harm (direct rounds only), as levels.py.
    delta: dict[tuple[int, int, int], list[int]] = {}
    for model_id, change in net.items():
        after = counts_after[model_id]
        before = after - change
        low, high, sign = (before, after, 1) if change > 0 else (after, before, -1)
        priority = problem.model_by_id[model_id].priority
        for k in range(low + 1, high + 1):
            stage = replica_stage(problem, model_id, k)
            direct = stage == STAGE_DIRECT
            rounds = stage in (STAGE_BASELINE, STAGE_DIRECT)
            entry = delta.setdefault((-priority, stage, k if rounds else 0), [0, 0])
            entry[0] += sign
            entry[1] += sign * problem.harm_rank[model_id] if direct else 0
    for key in sorted(delta):
        count, harm = delta[key]
        if count:
            return count > 0
        if harm:
            return harm > 0
    return False
