"""Vacate moves: free a whole host for a missing replica that needs one (pure, bounded).

The heuristic's repair moves one replica at a time; a model with a colocation ceiling of 1
(an exclusive host) or a footprint close to a host's whole memory needs every occupant of one
host moved elsewhere, which neither the repair nor CP-SAT (within a budget, on ~80,000
candidates) finds. For each missing replica (first below the baseline, then below the
desired count), most important class first, a vacate move takes a candidate host without
live residencies (live inventory stays during the plan, so it cannot be
vacated), removes every placement there, places the missing replica, and re-places each removed
replica on its first other candidate host that fits (shared fit rule, cpsat/ledger.py). The move
is kept only when the replica levels improve lexicographically (levels.compare), so the result
is never worse than the input; at most MAX_TRIALS moves per pass are tried, hosts with the fewest
placements first (host ID breaks ties), so it ends quickly with the same result every run.
"""

from __future__ import annotations

from grid.planner.cpsat.ledger import Ledger
from grid.planner.cpsat.scoring import Scorer
from grid.planner.levels import compare
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]
MAX_TRIALS = 96
MAX_HOSTS_PER_MODEL = 16


def vacate_improve(problem: PlacementProblem, placed: set[Key]) -> set[Key]:
    """`placed` improved by kept vacate moves (a feasible placement stays feasible): first
    for models short of their baseline, then for models short of their desired count, each
    pass with its own MAX_TRIALS."""
    scorer = Scorer(problem)
    best, best_values = set(placed), scorer.score(placed)
    for goal in ("baseline", "desired"):
        trials = 0
        for model in problem.models:  # by priority, then ID
            target = problem.targets[model.model_id]
            wanted = max(1, target.baseline) if goal == "baseline" else target.desired
            for host_id in _vacatable_hosts(problem, best, model.model_id):
                have = sum(1 for key in best if key[0] == model.model_id)
                if trials >= MAX_TRIALS or have + problem.fixed_count(model.model_id) >= wanted:
                    break
                trials += 1
                moved = _vacate(problem, best, model.model_id, host_id)
                if moved is not None:
                    values = scorer.score(moved)
                    if compare(problem, values, best_values, replica_levels_only=True) > 0:
                        best, best_values = moved, values
    return best


def _vacatable_hosts(problem: PlacementProblem, placed: set[Key], model_id: str) -> list[str]:
    load: dict[str, int] = {}
    for _m, h in placed:
        load[h] = load.get(h, 0) + 1
    hosts = [
        c.host_id
        for c in problem.candidates_of_model(model_id)
        if c.is_new
        and (model_id, c.host_id) not in placed
        and not problem.host_by_id[c.host_id].live_models
        and c.memory_mb <= problem.host_by_id[c.host_id].new_budget_mb
    ]
    hosts.sort(key=lambda h: (load.get(h, 0), h))
    return hosts[:MAX_HOSTS_PER_MODEL]


def _vacate(
    problem: PlacementProblem, placed: set[Key], model_id: str, host_id: str
) -> set[Key] | None:
    evicted = sorted(k for k in placed if k[1] == host_id)
    ledger = Ledger(problem, [k for k in placed if k[1] != host_id])
    if ledger.blockers((model_id, host_id)):
        return None
    ledger.add((model_id, host_id))
    for m, _h in evicted:
        for cand in problem.candidates_of_model(m):
            key = (m, cand.host_id)
            if cand.host_id != host_id and key not in ledger.placed and not ledger.blockers(key):
                ledger.add(key)
                break
    return set(ledger.placed)
