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

import copy
import dataclasses
from collections.abc import Callable

from grid.planner.cpsat.ledger import HostLoad, Ledger
from grid.planner.cpsat.scoring import Scorer
from grid.planner.levels import compare
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]
MAX_TRIALS = 96
MAX_HOSTS_PER_MODEL = 16


def vacate_improve(
    problem: PlacementProblem, placed: set[Key], *, out_of_time: Callable[[], bool] | None = None
) -> set[Key]:
    """`placed` improved by kept vacate moves (a feasible placement stays feasible): first
    for models short of their baseline, then for models short of their desired count, each
    pass with its own MAX_TRIALS. `out_of_time` (checked before each model; None: never)
    stops early with the best placement so far, so a large fleet's pass fits its budget."""
    scorer = Scorer(problem)
    best = _Best(problem, Ledger(problem, placed), scorer.replica_score(placed))
    for goal in ("baseline", "desired"):
        trials = 0
        for model in problem.models:  # by priority, then ID
            if trials >= MAX_TRIALS or (out_of_time is not None and out_of_time()):
                break
            model_id = model.model_id
            target = problem.targets[model_id]
            wanted = max(1, target.baseline) if goal == "baseline" else target.desired
            if best.have(model_id) >= wanted:
                continue  # the hosts are listed only for a model that is short
            for host_id in _vacatable_hosts(problem, best, model_id):
                if trials >= MAX_TRIALS or best.have(model_id) >= wanted:
                    break
                trials += 1
                moved = _vacate(problem, best, model_id, host_id)
                if moved is not None:
                    values = scorer.replica_score(moved.placed)
                    if compare(problem, values, best.values, replica_levels_only=True) > 0:
                        best = _Best(problem, moved, values)
    return best.placed


class _Best:
    """The best placement so far with what every trial reads from it, computed once per kept
    move instead of once per trial: replica counts, placements per host, and its ledger
    (a kept trial's own ledger: the one it was checked on)."""

    def __init__(self, problem: PlacementProblem, ledger: Ledger, values: dict[str, int]):
        self.problem = problem
        self.ledger = ledger
        self.placed = set(ledger.placed)
        self.values = values
        self.counts: dict[str, int] = {}
        self.on_host: dict[str, list[Key]] = {}
        for key in self.placed:
            self.counts[key[0]] = self.counts.get(key[0], 0) + 1
            self.on_host.setdefault(key[1], []).append(key)

    def have(self, model_id: str) -> int:
        return self.counts.get(model_id, 0) + self.problem.fixed_count(model_id)

    def load(self, host_id: str) -> int:
        return len(self.on_host.get(host_id, ()))


def _vacatable_hosts(problem: PlacementProblem, best: _Best, model_id: str) -> list[str]:
    hosts = [
        c.host_id
        for c in problem.candidates_of_model(model_id)
        if c.is_new
        and (model_id, c.host_id) not in best.placed
        and not problem.host_by_id[c.host_id].live_models
        and c.memory_mb <= problem.host_by_id[c.host_id].new_budget_mb
    ]
    hosts.sort(key=lambda h: (best.load(h), h))
    return hosts[:MAX_HOSTS_PER_MODEL]


def _vacate(problem: PlacementProblem, best: _Best, model_id: str, host_id: str) -> Ledger | None:
    evicted = sorted(best.on_host.get(host_id, ()))
    ledger = _without(best.ledger, host_id, evicted)
    if ledger.blockers((model_id, host_id)):
        return None
    ledger.add((model_id, host_id))
    for m, _h in evicted:
        for cand in problem.candidates_of_model(m):
            key = (m, cand.host_id)
            if cand.host_id != host_id and key not in ledger.placed and not ledger.blockers(key):
                _own_host(ledger, best.ledger, cand.host_id)
                ledger.add(key)
                break
    return ledger


def _without(base: Ledger, host_id: str, evicted: list[Key]) -> Ledger:
    """A copy of `base` with host_id emptied; host loads stay shared until `_own_host`.

    Every ledger total is a sum or a set union over the placements, so this equals
    `Ledger(problem, base.placed - evicted)` built from scratch (test_scale_vacate.py compares
    the whole pass with a from-scratch one)."""
    ledger = copy.copy(base)
    ledger.hosts = dict(base.hosts)
    ledger.hosts[host_id] = HostLoad(base.hosts[host_id].budget)
    ledger.counts = dict(base.counts)
    ledger.unpinned = dict(base.unpinned)
    ledger.placed = base.placed - set(evicted)
    for key in evicted:
        cand = base.problem.candidates[key]
        ledger.counts[key[0]] -= 1
        if not cand.pinned:
            ledger.unpinned[key[0]] -= 1
    return ledger


def _own_host(ledger: Ledger, base: Ledger, host_id: str) -> None:
    """Copy a host load still shared with `base` before the trial adds to it."""
    load = ledger.hosts[host_id]
    if load is base.hosts[host_id]:
        ledger.hosts[host_id] = dataclasses.replace(
            load, models=set(load.models), new_models=set(load.new_models)
        )
