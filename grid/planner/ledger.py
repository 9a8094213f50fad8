"""The one per-host ledger: a host's running totals and the hard rules that bound them (pure).

Every path that asks "does this replica fit this host now?" asks here: the heuristic's greedy
pass and repair (heuristic_ledger.PlacementState), the solver's hint repair, the host-type
disaggregation and vacate moves (cpsat/ledger.Ledger), staging (repack.py), the explanations'
amounts (explain.py) and validate.py on a finished plan. (The tests' reference, reference.py,
restates the rules on its own.) A host's ledger (`HostLoad`) keeps, over its placements:
footprint memory, make-before-break memory and artifact disk of the new ones, the placed and
the new models, the smallest colocation ceiling among each. The rules, one per family, in
`RULES` (each returns the Blocker it finds, or None):

    memory                footprint + mem ≤ allocatable − fixed use
    live_memory           a new replica: new + mem ≤ allocatable − live use − headroom
    slots                 models + 1 ≤ desired cap; a new one: new models + 1 ≤ new cap
    colocation            every occupant's own ceiling (fixed occupants count): occupants ≤ c_m;
                          a new one: live occupants and new models ≤ c_m
    colocation_exclusion  no excluded partner among the placed, fixed and (for a new one) live
                          models
    disk                  a new uncached replica: disk + artifact ≤ known free disk
    gpu                   the GPU rows of both ledgers (grid/planner/gpus.py: devices of each
                          memory threshold held exclusively; gpu_ledger.GpuTable per problem)

Adding a family: a rule function appended to RULES (its Blocker family names the constraint),
the totals it reads kept by `HostLoad.add`/`remove`, and its CP-SAT module (cpsat/build.py).
Every rule is downward closed, so checking each addition against the running totals is the
same as checking the final set: validate.py adds every placement of a plan in turn and reports
each family that refuses one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, KeysView, Mapping
from dataclasses import dataclass, field

from grid.fleet import Host, ModelProfile
from grid.planner.gpu_ledger import GpuTable, gpu_table
from grid.planner.problem import Candidate, HostBudget, PlacementProblem

UNLIMITED = 1 << 62


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


@dataclass(frozen=True)
class Rules:
    """What the rules read of the models: own colocation ceilings and exclusion partners; and,
    per host budget, the rules that can refuse anything there (`active`)."""

    ceilings: Mapping[str, int]  # model -> max_colocated_models (0: none)
    partners: Mapping[str, frozenset[str]]  # model -> the models it may not share a host with
    gpus: GpuTable | None = None  # None: no model needs a GPU
    _active: dict[str, tuple[Rule, ...]] = field(default_factory=dict, compare=False)

    def active(self, budget: HostBudget) -> tuple[Rule, ...]:
        """RULES less those that never refuse on this host: slots without caps, colocation
        when no model has a ceiling (fixed occupants' ceilings are in the caps), exclusions
        when no model has a partner, disk when its free disk is unknown."""
        found = self._active.get(budget.host_id)
        if found is None:
            idle: set[Rule] = set()
            if budget.desired_cap is None and budget.new_cap is None:
                idle.add(_slots)
            if not any(self.ceilings.values()):
                idle.add(_colocation)
            if not self.partners:
                idle.add(_exclusion)
            if budget.disk_free_mb is None:
                idle.add(_disk)
            if self.gpus is None:
                idle.add(_gpu)
            found = self._active[budget.host_id] = tuple(r for r in RULES if r not in idle)
        return found

    @classmethod
    def of_snapshot(cls, profiles: Iterable[ModelProfile], hosts: Iterable[Host]) -> Rules:
        """From the snapshot itself (validate.py): exclusions are reciprocal."""
        profiles = list(profiles)
        ceilings = {m.model_id: m.max_colocated_models for m in profiles}
        partners: dict[str, set[str]] = {}
        for m in profiles:
            for other in m.colocation_excludes:
                if other != m.model_id:
                    partners.setdefault(m.model_id, set()).add(other)
                    partners.setdefault(other, set()).add(m.model_id)
        gpus = None
        if any(m.gpu_demand[0] for m in profiles):
            gpus = GpuTable(hosts, {m.model_id: m for m in profiles})
        return cls(ceilings, {k: frozenset(v) for k, v in partners.items()}, gpus)

    @classmethod
    def of(cls, problem: PlacementProblem) -> Rules:
        found = problem.memo.get("ledger_rules")
        if found is None:
            ceilings = {m.model_id: m.max_colocated_models for m in problem.models}
            partners, gpus = problem.exclusion_partners, gpu_table(problem)
            found = problem.memo["ledger_rules"] = cls(ceilings, partners, gpus)
        return found  # type: ignore[return-value]


@dataclass
class HostLoad:
    """One host's placements and the totals the rules bound (fixed and live residencies are
    in its budget)."""

    budget: HostBudget
    placed: dict[str, Candidate] = field(default_factory=dict)  # model -> its candidate
    new_models: set[str] = field(default_factory=set)
    footprint_mb: int = 0  # Σ memory_mb of the placed candidates
    new_mb: int = 0  # Σ new_mb of the placed new candidates
    disk_mb: int = 0  # Σ artifact bytes to fetch
    min_ceiling: int = UNLIMITED  # smallest non-zero ceiling among the placed models
    min_new_ceiling: int = UNLIMITED  # ... among the placed new models
    version: int = 0  # bumped by every add and remove (heuristic_order caches feasibility)

    @property
    def models(self) -> KeysView[str]:
        return self.placed.keys()

    @property
    def new_count(self) -> int:
        return len(self.new_models)

    def add(self, cand: Candidate, ceiling: int = 0) -> None:
        """Place `cand` (its model's own ceiling `ceiling`, 0: none)."""
        self.version += 1
        self.placed[cand.model_id] = cand
        self.footprint_mb += cand.memory_mb
        if ceiling:
            self.min_ceiling = min(self.min_ceiling, ceiling)
        if cand.is_new:
            self.new_models.add(cand.model_id)
            self.new_mb += cand.new_mb
            self.disk_mb += cand.disk_mb
            if ceiling:
                self.min_new_ceiling = min(self.min_new_ceiling, ceiling)

    def remove(self, cand: Candidate, ceilings: Mapping[str, int]) -> None:
        self.version += 1
        del self.placed[cand.model_id]
        self.footprint_mb -= cand.memory_mb
        if cand.is_new:
            self.new_models.discard(cand.model_id)
            self.new_mb -= cand.new_mb
            self.disk_mb -= cand.disk_mb
        self.min_ceiling = min(
            (ceilings[m] for m in self.placed if ceilings.get(m)), default=UNLIMITED
        )
        self.min_new_ceiling = min(
            (ceilings[m] for m in self.new_models if ceilings.get(m)), default=UNLIMITED
        )

    def copy(self) -> HostLoad:
        """An independent copy (copy-on-write trials: vacate.py)."""
        return HostLoad(
            self.budget,
            dict(self.placed),
            set(self.new_models),
            self.footprint_mb,
            self.new_mb,
            self.disk_mb,
            self.min_ceiling,
            self.min_new_ceiling,
            self.version,
        )


Rule = Callable[[HostLoad, Candidate, Rules], "Blocker | None"]


def _memory(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    free = load.budget.footprint_budget_mb - load.footprint_mb
    return Blocker("memory", cand.host_id, cand.memory_mb, free) if cand.memory_mb > free else None


def _live_memory(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    if cand.incumbent is not None:
        return None
    free = load.budget.new_budget_mb - load.new_mb
    return Blocker("live_memory", cand.host_id, cand.new_mb, free) if cand.new_mb > free else None


def _slots(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    budget = load.budget
    count = len(load.placed) + 1
    if budget.desired_cap is not None and count > budget.desired_cap:
        return Blocker("slots", cand.host_id, count, budget.desired_cap)
    if cand.incumbent is None and budget.new_cap is not None:
        new_count = len(load.new_models) + 1
        if new_count > budget.new_cap:
            return Blocker("slots", cand.host_id, new_count, budget.new_cap)
    return None


def _colocation(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    budget, ceilings = load.budget, rules.ceilings
    own = ceilings.get(cand.model_id, 0) or UNLIMITED
    occupied = len(budget.fixed_models) + len(load.placed) + 1
    checks: list[tuple[int, int, Iterable[str]]] = [
        (occupied, min(own, load.min_ceiling), load.placed.keys())
    ]
    if cand.incumbent is None:
        live = len(budget.live_models) + len(load.new_models) + 1
        checks.append((live, min(own, load.min_new_ceiling), load.new_models))
    for occupants, ceiling, owners in checks:
        if occupants > ceiling:  # the binding model: the smallest ceiling, then its ID
            over = [(ceilings.get(m, 0), m) for m in owners if 0 < ceilings.get(m, 0) < occupants]
            if own < occupants:
                over.append((own, cand.model_id))
            ceiling, model_id = min(over)
            return Blocker("colocation", cand.host_id, occupants, ceiling, model_id)
    return None


def _exclusion(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    partners = rules.partners.get(cand.model_id)
    if not partners:
        return None
    budget = load.budget
    neighbours = partners & (load.placed.keys() | set(budget.fixed_models))
    if cand.incumbent is None:
        neighbours |= partners & set(budget.live_models)
    if neighbours:
        return Blocker("colocation_exclusion", cand.host_id, other=min(neighbours))
    return None


def _disk(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    free_mb = load.budget.disk_free_mb
    if cand.incumbent is not None or free_mb is None or not cand.disk_mb:
        return None
    free = free_mb - load.disk_mb
    return Blocker("disk", cand.host_id, cand.disk_mb, free) if cand.disk_mb > free else None


def _gpu(load: HostLoad, cand: Candidate, rules: Rules) -> Blocker | None:
    gpus = rules.gpus
    if gpus is None or not gpus.demand(cand.model_id)[0]:
        return None
    placed = ((m, c.incumbent is None) for m, c in load.placed.items())
    if gpus.fits(cand.host_id, placed, cand.model_id, cand.incumbent is None):
        return None
    return Blocker("gpu", cand.host_id, gpus.demand(cand.model_id)[0])


RULES: tuple[Rule, ...] = (_memory, _live_memory, _slots, _colocation, _exclusion, _disk, _gpu)


def blockers(load: HostLoad, cand: Candidate, rules: Rules) -> list[Blocker]:
    """Every family that refuses `cand` on this host now (empty: it fits)."""
    out = []
    for rule in rules.active(load.budget):
        found = rule(load, cand, rules)
        if found is not None:
            out.append(found)
    return out


def admits(load: HostLoad, cand: Candidate, rules: Rules) -> bool:
    """Does every family admit `cand` on this host now? (A model is placed once per host.)

    The same answer as `not blockers(...)`, written as one conjunction over the running
    totals: the greedy pass asks it ~1 M times at 10,000 hosts, where a call per family cost a
    third more. tests/planner/test_ledger.py holds the two equal on drawn fleets, so a family
    added to RULES must be added here too (its test fails until it is)."""
    placed = load.placed
    model_id = cand.model_id
    if model_id in placed:
        return False
    budget = load.budget
    if load.footprint_mb + cand.memory_mb > budget.footprint_budget_mb:  # memory
        return False
    count = len(placed) + 1
    if budget.desired_cap is not None and count > budget.desired_cap:  # slots
        return False
    ceiling = rules.ceilings.get(model_id, 0)
    occupants = len(budget.fixed_models) + count
    if (ceiling and occupants > ceiling) or occupants > load.min_ceiling:  # colocation
        return False
    new = cand.incumbent is None
    if new:
        if load.new_mb + cand.new_mb > budget.new_budget_mb:  # live_memory
            return False
        new_count = len(load.new_models) + 1
        if budget.new_cap is not None and new_count > budget.new_cap:  # slots (new)
            return False
        live = len(budget.live_models) + new_count
        if (ceiling and live > ceiling) or live > load.min_new_ceiling:  # colocation (live)
            return False
        disk = budget.disk_free_mb
        if disk is not None and cand.disk_mb and load.disk_mb + cand.disk_mb > disk:  # disk
            return False
    partners = rules.partners.get(model_id)
    if partners:  # colocation_exclusion
        if not partners.isdisjoint(placed) or not partners.isdisjoint(budget.fixed_models):
            return False
        if new and not partners.isdisjoint(budget.live_models):
            return False
    gpus = rules.gpus
    if gpus is not None:  # gpu
        placed_new = ((m, c.incumbent is None) for m, c in placed.items())
        return gpus.fits(cand.host_id, placed_new, model_id, new)
    return True


def host_load(problem: PlacementProblem, host_id: str, placed: Iterable[Candidate]) -> HostLoad:
    """The ledger of one host holding these placements (all on `host_id`)."""
    rules = Rules.of(problem)
    load = HostLoad(problem.host_by_id[host_id])
    for cand in placed:
        load.add(cand, rules.ceilings.get(cand.model_id, 0))
    return load


def host_blockers(problem: PlacementProblem, load: HostLoad, cand: Candidate) -> list[Blocker]:
    """Every per-host hard constraint that adding `cand` to `load` would break."""
    return blockers(load, cand, Rules.of(problem))
