"""Incremental ledgers of a partial placement, for the heuristic engine (pure).

`PlacementState` keeps one per-host ledger per host (grid/planner/ledger.py, the rules every
engine and the validator share) plus the placement-wide counts: replicas per model (fixed ones
included, as the levels count them), placements off the pins, and failure domains per model.
Adding and removing a candidate update them in place, which the bounded repair relies on to try
and undo moves; every mutation keeps the hard constraints.
"""

from __future__ import annotations

from grid.planner.ledger import HostLoad, Rules, admits
from grid.planner.problem import Candidate, PlacementProblem

Key = tuple[str, str]


class PlacementState:
    """A partial placement and its ledgers; every mutation keeps the hard constraints."""

    def __init__(self, problem: PlacementProblem) -> None:
        self.problem = problem
        self.ledgers = {h.host_id: HostLoad(h) for h in problem.hosts}
        self.placed: set[Key] = set()
        self.rules = Rules.of(problem)
        self.ceilings = self.rules.ceilings
        # Replica counts include fixed (unmanaged) replicas, as the levels do.
        self.counts = {m.model_id: 0 for m in problem.models}
        self.variable = {m.model_id: 0 for m in problem.models}
        self.nonpinned = {m.model_id: 0 for m in problem.models}
        self.domains: dict[str, dict[str, int]] = {m.model_id: {} for m in problem.models}
        for f in problem.fixed:
            self.counts[f.model_id] += 1
            if f.host_id not in problem.model_by_id[f.model_id].pinned_hosts:
                self.nonpinned[f.model_id] += 1
            domain = problem.host_by_id[f.host_id].domain
            self.domains[f.model_id][domain] = self.domains[f.model_id].get(domain, 0) + 1
        # Pins are reserved: replicas on other hosts are limited to desired − pins, so a pin
        # to an unavailable host is reported instead of being substituted by a new replica.
        self.open = {m.model_id: problem.open_replicas(m.model_id) for m in problem.models}
        self.nonpinned_allowance = {
            m.model_id: max(0, problem.targets[m.model_id].desired - len(set(m.pinned_hosts)))
            for m in problem.models
        }

    # -- questions -------------------------------------------------------------------------
    def has_room_for_model(self, model_id: str) -> bool:
        return self.variable[model_id] < self.open[model_id]

    def allowed(self, cand: Candidate) -> bool:
        """Replica bounds and pin reservation (the same rule as cpsat/replicas.py)."""
        if not self.has_room_for_model(cand.model_id):
            return False
        if cand.pinned:
            return True
        return self.nonpinned[cand.model_id] < self.nonpinned_allowance[cand.model_id]

    def fits(self, cand: Candidate) -> bool:
        """Would adding `cand` keep every per-host hard constraint? (bounds: `allowed`)"""
        return admits(self.ledgers[cand.host_id], cand, self.rules)

    def is_new_domain(self, cand: Candidate) -> bool:
        domain = self.problem.host_by_id[cand.host_id].domain
        return domain not in self.domains[cand.model_id]

    def domain_shortfall(self, model_id: str) -> bool:
        goal = self.problem.model_by_id[model_id].min_failure_domains
        return len(self.domains[model_id]) < goal

    # -- mutations -------------------------------------------------------------------------
    def add(self, cand: Candidate) -> None:
        self.ledgers[cand.host_id].add(cand, self.ceilings.get(cand.model_id, 0))
        self.placed.add((cand.model_id, cand.host_id))
        self._count(cand, +1)

    def remove(self, cand: Candidate) -> None:
        self.ledgers[cand.host_id].remove(cand, self.ceilings)
        self.placed.discard((cand.model_id, cand.host_id))
        self._count(cand, -1)

    def _count(self, cand: Candidate, delta: int) -> None:
        model_id = cand.model_id
        self.counts[model_id] += delta
        self.variable[model_id] += delta
        if not cand.pinned:
            self.nonpinned[model_id] += delta
        domain = self.problem.host_by_id[cand.host_id].domain
        per_domain = self.domains[model_id]
        per_domain[domain] = per_domain.get(domain, 0) + delta
        if per_domain[domain] <= 0:
            del per_domain[domain]
