"""The deterministic greedy placement: the fallback engine and the solver's hint (pure).

The spec's global placement loop, on the ledgers of `problem.py`:

1. seed healthy incumbents that still fit, pinned ones first (a complete current placement is
   its own feasibility witness, so soft scoring never dismantles it);
2. reserve hard pins on their hosts;
3. keep the remaining incumbents, higher priority classes first;
4. per priority class, highest first: required baseline replicas, then directly demanded
   replicas, then inferred-only replicas, one replica per model per round (every model's k-th
   replica before any model's (k+1)-th), each round ordered constrained first, then larger
   memory, then more measured harm, then model_id; each replica goes to the feasible candidate
   with the best quality score plus a bonus for a new failure domain;
5. a bounded deterministic repair (`heuristic_repair.py`) that relocates or displaces a replica
   of lower importance to make room for a missing, more important one;
6. failure-domain spreading (`heuristic_domains.py`): a replica in an already covered domain
   moves to a host in an uncovered one when that host takes it, counts unchanged.

Every step goes through `PlacementState`, which never admits a placement that breaks a hard
constraint, so the result always passes `validate.py`. Iteration is over sorted lists only.
"""

from __future__ import annotations

from grid.fleet import ResidencyState
from grid.planner.heuristic_domains import spread_domains
from grid.planner.heuristic_ledger import Key, PlacementState
from grid.planner.heuristic_order import (
    STAGE_BASELINE,
    STAGE_DIRECT,
    STAGE_INFERRED,
    CandidateOrder,
    replica_stage,
    round_order_key,
)
from grid.planner.heuristic_repair import repair
from grid.planner.levels import quality_scores
from grid.planner.problem import Candidate, PlacementProblem


def heuristic_placement(problem: PlacementProblem) -> set[Key]:
    """A valid placement (candidate keys) built by the spec's deterministic greedy loop."""
    state = PlacementState(problem)
    scores = quality_scores(problem)
    order = CandidateOrder(problem, scores)
    incumbents = _incumbents_in_seed_order(problem, scores)
    _keep(state, [c for c in incumbents if c.pinned])
    _reserve_pins(state, problem)
    _keep(state, [c for c in incumbents if not c.pinned])
    for priority in problem.priorities:
        _fill_class(state, order, problem, priority)
    repair(state, order)
    spread_domains(state, scores)
    return set(state.placed)


def _incumbents_in_seed_order(problem: PlacementProblem, scores: dict[Key, int]) -> list[Candidate]:
    def key(cand: Candidate) -> tuple[int, int, int, str, str]:
        priority = problem.model_by_id[cand.model_id].priority
        ready_first = 0 if cand.incumbent is ResidencyState.READY else 1
        return (
            -priority,
            ready_first,
            -scores[(cand.model_id, cand.host_id)],
            cand.model_id,
            cand.host_id,
        )

    return sorted(problem.incumbent_candidates, key=key)


def _keep(state: PlacementState, candidates: list[Candidate]) -> None:
    for cand in candidates:
        if state.allowed(cand) and state.fits(cand):
            state.add(cand)


def _reserve_pins(state: PlacementState, problem: PlacementProblem) -> None:
    for model in problem.models:  # priority order: a pin of a higher class first
        for host_id in sorted(set(model.pinned_hosts)):
            cand = problem.candidates.get((model.model_id, host_id))
            if cand is not None and state.allowed(cand) and state.fits(cand):
                state.add(cand)


def _fill_class(
    state: PlacementState, order: CandidateOrder, problem: PlacementProblem, priority: int
) -> None:
    members = sorted(
        (m.model_id for m in problem.models if m.priority == priority),
        key=lambda model_id: round_order_key(problem, model_id),
    )
    # Capacity only shrinks during the greedy pass, so a model that once fails to get its
    # next replica cannot get a later one either: drop it from the remaining rounds.
    stuck: set[str] = set()
    for stage in (STAGE_BASELINE, STAGE_DIRECT, STAGE_INFERRED):
        top = max((problem.targets[m].desired for m in members), default=0)
        for k in range(1, top + 1):
            for model_id in members:
                if model_id in stuck or state.counts[model_id] >= k:
                    continue
                if k > problem.targets[model_id].desired:
                    continue
                if replica_stage(problem, model_id, k) != stage:
                    continue
                cand = order.best(state, model_id, greedy=True)
                if cand is None:
                    stuck.add(model_id)
                else:
                    state.add(cand)
