"""A plain-Python mirror of the hard constraints, added to one candidate at a time.

Used to check and repair hints (an incumbent set may no longer fit), to report what blocks
one more replica on a host (the explainer's amounts), and by tests. Every constraint is
downward closed, so checking each addition against the running totals is equivalent to
checking the final set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from grid.planner.cpsat.replicas import unpinned_allowance
from grid.planner.problem import Candidate, HostBudget, PlacementProblem

Key = tuple[str, str]


@dataclass(frozen=True)
class Blocker:
    """One constraint that adding a candidate would break, with the amounts involved."""

    family: str
    host_id: str | None
    need: int = 0
    free: int = 0
    other: str = ""  # the model whose ceiling or exclusion binds

    @property
    def deficit(self) -> int:
        return max(0, self.need - self.free)


@dataclass
class HostLoad:
    budget: HostBudget
    models: set[str] = field(default_factory=set)
    new_models: set[str] = field(default_factory=set)
    footprint_mb: int = 0
    new_mb: int = 0
    disk_mb: int = 0

    def add(self, cand: Candidate) -> None:
        self.models.add(cand.model_id)
        self.footprint_mb += cand.memory_mb
        if cand.is_new:
            self.new_models.add(cand.model_id)
            self.new_mb += cand.new_mb
            self.disk_mb += cand.disk_mb


def host_load(problem: PlacementProblem, host_id: str, placed: Iterable[Candidate]) -> HostLoad:
    """The ledger of one host holding these placements (all on `host_id`)."""
    load = HostLoad(problem.host_by_id[host_id])
    for cand in placed:
        load.add(cand)
    return load


def host_blockers(problem: PlacementProblem, load: HostLoad, cand: Candidate) -> list[Blocker]:
    """Every per-host hard constraint that adding `cand` to `load` would break: the placement
    fit rule (memory ledgers, slots, colocation ceilings and exclusions, disk), shared by the
    solver's hint repair, the explainer and every move that the plan stages (repack.py)."""
    budget = load.budget
    hid = cand.host_id
    out: list[Blocker] = []
    free = budget.footprint_budget_mb - load.footprint_mb
    if cand.memory_mb > free:
        out.append(Blocker("memory", hid, cand.memory_mb, free))
    if cand.is_new:
        live_free = budget.new_budget_mb - load.new_mb
        if cand.new_mb > live_free:
            out.append(Blocker("live_memory", hid, cand.new_mb, live_free))
    out += _slot_blockers(problem, cand, load)
    out += _exclusion_blockers(problem, cand, load)
    if cand.is_new and budget.disk_free_mb is not None and cand.disk_mb > 0:
        disk_free = budget.disk_free_mb - load.disk_mb
        if cand.disk_mb > disk_free:
            out.append(Blocker("disk", hid, cand.disk_mb, disk_free))
    return out


def _slot_blockers(problem: PlacementProblem, cand: Candidate, load: HostLoad) -> list[Blocker]:
    budget = load.budget
    hid = cand.host_id
    out: list[Blocker] = []
    count = len(load.models) + 1
    new_count = len(load.new_models) + 1
    if budget.desired_cap is not None and count > budget.desired_cap:
        out.append(Blocker("slots", hid, count, budget.desired_cap))
    elif cand.is_new and budget.new_cap is not None and new_count > budget.new_cap:
        out.append(Blocker("slots", hid, new_count, budget.new_cap))
    checks = [(load.models | {cand.model_id}, len(budget.fixed_models) + count)]
    if cand.is_new:
        checks.append((load.new_models | {cand.model_id}, len(budget.live_models) + new_count))
    for owners, occupied in checks:
        over = [
            (problem.ceiling(m), m)
            for m in owners
            if problem.ceiling(m) and occupied > problem.ceiling(m)
        ]
        if over:
            ceiling, model_id = min(over)
            out.append(Blocker("colocation", hid, occupied, ceiling, model_id))
            break
    return out


def _exclusion_blockers(
    problem: PlacementProblem, cand: Candidate, load: HostLoad
) -> list[Blocker]:
    if not problem.excluded_pairs:
        return []
    for other in sorted(load.models):
        if problem.excluded(cand.model_id, other):
            return [Blocker("colocation_exclusion", cand.host_id, other=other)]
    return []


class Ledger:
    def __init__(self, problem: PlacementProblem, placed: Iterable[Key] = ()) -> None:
        self.problem = problem
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
        self.hosts[cand.host_id].add(cand)
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
        return host_blockers(self.problem, self.hosts[cand.host_id], cand)


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
