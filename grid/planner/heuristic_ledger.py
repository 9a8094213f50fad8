"""Incremental ledgers of a partial placement, for the heuristic engine (pure).

`PlacementState` tracks, per host, exactly the quantities that the hard constraints of
`problem.py` bound (desired footprint, make-before-break memory, desired and new model counts,
the placed models' own colocation ceilings, exclusions, artifact disk), so a feasibility test is
O(models on the host) instead of a rescan of the fleet. Adding and removing a candidate update
them in place, which the bounded repair relies on to try and undo moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grid.planner.gpu_ledger import gpu_table
from grid.planner.problem import Candidate, HostBudget, PlacementProblem

Key = tuple[str, str]
UNLIMITED = 1 << 62


@dataclass
class HostLedger:
    budget: HostBudget
    footprint_mb: int = 0  # Σ memory_mb of placed candidates
    new_mb: int = 0  # Σ new_mb of placed new candidates
    disk_mb: int = 0  # Σ artifact bytes to fetch
    new_count: int = 0
    placed: dict[str, Candidate] = field(default_factory=dict)  # model_id -> candidate
    min_ceiling: int = UNLIMITED  # smallest non-zero ceiling among placed models
    min_new_ceiling: int = UNLIMITED  # ... among placed *new* models
    version: int = 0  # bumped by every add and remove (heuristic_order caches feasibility)


class PlacementState:
    """A partial placement and its ledgers; every mutation keeps the hard constraints."""

    def __init__(self, problem: PlacementProblem) -> None:
        self.problem = problem
        self.gpus = gpu_table(problem)  # None: no model needs a GPU
        self.ledgers = {h.host_id: HostLedger(h) for h in problem.hosts}
        self.placed: set[Key] = set()
        self.ceilings = {m.model_id: m.max_colocated_models for m in problem.models}
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
        led = self.ledgers[cand.host_id]
        budget = led.budget
        model_id = cand.model_id
        if model_id in led.placed:
            return False
        if led.footprint_mb + cand.memory_mb > budget.footprint_budget_mb:
            return False
        count_after = len(led.placed) + 1
        if budget.desired_cap is not None and count_after > budget.desired_cap:
            return False
        ceiling = self.ceilings.get(model_id, 0)
        occupants = len(budget.fixed_models) + count_after
        if (ceiling and occupants > ceiling) or occupants > led.min_ceiling:
            return False
        if cand.is_new:
            if led.new_mb + cand.new_mb > budget.new_budget_mb:
                return False
            if budget.new_cap is not None and led.new_count + 1 > budget.new_cap:
                return False
            live_occupants = len(budget.live_models) + led.new_count + 1
            if (ceiling and live_occupants > ceiling) or live_occupants > led.min_new_ceiling:
                return False
            if (
                budget.disk_free_mb is not None
                and cand.disk_mb
                and led.disk_mb + cand.disk_mb > budget.disk_free_mb
            ):
                return False
        partners = self.problem.exclusion_partners.get(model_id)
        if partners:
            # Live neighbours only matter to a new process; fixed ones are always occupants.
            neighbours = set(led.placed) | set(budget.fixed_models)
            if cand.is_new:
                neighbours |= set(budget.live_models)
            if partners & neighbours:
                return False
        if self.gpus is not None:
            placed = ((m, c.is_new) for m, c in led.placed.items())
            return self.gpus.fits(cand.host_id, placed, model_id, cand.is_new)
        return True

    def is_new_domain(self, cand: Candidate) -> bool:
        domain = self.problem.host_by_id[cand.host_id].domain
        return domain not in self.domains[cand.model_id]

    def domain_shortfall(self, model_id: str) -> bool:
        goal = self.problem.model_by_id[model_id].min_failure_domains
        return len(self.domains[model_id]) < goal

    # -- mutations -------------------------------------------------------------------------
    def add(self, cand: Candidate) -> None:
        led = self.ledgers[cand.host_id]
        led.version += 1
        model_id = cand.model_id
        led.placed[model_id] = cand
        led.footprint_mb += cand.memory_mb
        ceiling = self.ceilings.get(model_id, 0)
        if ceiling:
            led.min_ceiling = min(led.min_ceiling, ceiling)
        if cand.is_new:
            led.new_mb += cand.new_mb
            led.disk_mb += cand.disk_mb
            led.new_count += 1
            if ceiling:
                led.min_new_ceiling = min(led.min_new_ceiling, ceiling)
        self.placed.add((model_id, cand.host_id))
        self._count(cand, +1)

    def remove(self, cand: Candidate) -> None:
        led = self.ledgers[cand.host_id]
        led.version += 1
        model_id = cand.model_id
        del led.placed[model_id]
        led.footprint_mb -= cand.memory_mb
        if cand.is_new:
            led.new_mb -= cand.new_mb
            led.disk_mb -= cand.disk_mb
            led.new_count -= 1
        led.min_ceiling = min(
            (self.ceilings[m] for m in led.placed if self.ceilings.get(m)), default=UNLIMITED
        )
        led.min_new_ceiling = min(
            (self.ceilings[m] for m, c in led.placed.items() if c.is_new and self.ceilings.get(m)),
            default=UNLIMITED,
        )
        self.placed.discard((model_id, cand.host_id))
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
