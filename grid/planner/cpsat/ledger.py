"""The placement-wide ledger over the one per-host ledger (grid/planner/ledger.py).

`Ledger` adds the replica bounds and the pins' reservation (cpsat/replicas.py's rule) to the
per-host rules, one candidate at a time. Used to check and repair hints (an incumbent set may
no longer fit), by the host-type disaggregation and vacate moves, to report what blocks one
more replica on a host (the explainer's amounts), and by tests. Every constraint is downward
closed, so checking each addition against the running totals is equivalent to checking the
final set. `Blocker`, `HostLoad`, `host_load` and `host_blockers` are the per-host ledger's.
"""

from __future__ import annotations

from collections.abc import Iterable

from grid.planner.cpsat.allowance import unpinned_allowance
from grid.planner.ledger import Blocker, HostLoad, Rules, blockers, host_blockers, host_load
from grid.planner.problem import Candidate, PlacementProblem

Key = tuple[str, str]
__all__ = ["Blocker", "HostLoad", "Ledger", "host_blockers", "host_load", "placement_problems"]


class Ledger:
    def __init__(self, problem: PlacementProblem, placed: Iterable[Key] = ()) -> None:
        self.problem = problem
        self.rules = Rules.of(problem)
        self.hosts = {h.host_id: HostLoad(h) for h in problem.hosts}
        self.counts: dict[str, int] = {}
        self.unpinned: dict[str, int] = {}
        self.placed: set[Key] = set()
        self.open_replicas = {m.model_id: problem.open_replicas(m.model_id) for m in problem.models}
        self.allowance = {
            m.model_id: unpinned_allowance(problem, m.model_id)
            for m in problem.models
            if m.pinned_hosts
        }
        for key in sorted(set(placed)):
            self.add(key)

    def add(self, key: Key) -> None:
        cand = self.problem.candidates[key]
        self.hosts[cand.host_id].add(cand, self.rules.ceilings.get(cand.model_id, 0))
        self.counts[cand.model_id] = self.counts.get(cand.model_id, 0) + 1
        if not cand.pinned:
            self.unpinned[cand.model_id] = self.unpinned.get(cand.model_id, 0) + 1
        self.placed.add(key)

    def extend(self, keys: Iterable[Key]) -> set[Key]:
        """Add each key that still fits, in order; return the resulting placement."""
        for key in keys:
            if key not in self.placed and not self.blockers(key):
                self.add(key)
        return set(self.placed)

    def blockers(self, key: Key) -> list[Blocker]:
        """Every constraint that placing this candidate now would break."""
        cand = self.problem.candidates[key]
        out = self.host_blockers(cand)
        model_id = cand.model_id
        open_replicas = self.open_replicas[model_id]
        if self.counts.get(model_id, 0) + 1 > open_replicas:
            out.append(Blocker("replicas", None, 1, open_replicas - self.counts.get(model_id, 0)))
        elif not cand.pinned and model_id in self.allowance:
            allowance = self.allowance[model_id]
            used = self.unpinned.get(model_id, 0)
            if used + 1 > allowance:
                out.append(Blocker("replicas", None, 1, allowance - used, "pins"))
        return out

    def host_blockers(self, cand: Candidate) -> list[Blocker]:
        return blockers(self.hosts[cand.host_id], cand, self.rules)


def placement_problems(problem: PlacementProblem, placed: Iterable[Key]) -> list[str]:
    """Why a placement breaks the hard constraints (empty: it satisfies all of them)."""
    ledger = Ledger(problem)
    out: list[str] = []
    for key in sorted(set(placed)):
        if key not in problem.candidates:
            out.append(f"{key[0]} on {key[1]} is not a candidate")
            continue
        for blocker in ledger.blockers(key):
            out.append(f"{key[0]} on {key[1]}: {blocker.family}")
        ledger.add(key)
    return out


def repair_order(problem: PlacementProblem, placed: Iterable[Key]) -> list[Key]:
    """The candidate keys of a placement, most important first: pins, priority, incumbents."""
    rank = {m.model_id: i for i, m in enumerate(problem.models)}
    keys = [k for k in set(placed) if k in problem.candidates]

    def order(key: Key) -> tuple[int, int, int, str, str]:
        cand = problem.candidates[key]
        return (not cand.pinned, rank[cand.model_id], cand.incumbent is None, key[0], key[1])

    return sorted(keys, key=order)


def repair(problem: PlacementProblem, placed: Iterable[Key]) -> set[Key]:
    """A feasible subset, kept greedily in repair_order (a feasible placement stays whole)."""
    return Ledger(problem).extend(repair_order(problem, placed))
