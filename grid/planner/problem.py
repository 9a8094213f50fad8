"""The placement problem every engine solves, precomputed once per snapshot (pure).

Sets
    M  configured models, H hosts, C ⊆ M×H the candidate pairs that pass every static filter.
    A candidate is either an *incumbent* (a managed loading/warming/ready residency that the
    plan may keep at zero incremental memory) or *new* (possibly with cached weights).
Fixed replicas
    Unmanaged (external or manual) ready residencies of configured models on admitting hosts
    count as replicas and are never decision variables; every unmanaged live residency
    consumes memory, a model slot and colocation room first.
Ledgers, for each host h with placements x[m,h] over C:
    desired footprint   Σ_m mem(m,h)·x[m,h]            ≤ allocatable(h) − fixed_mb(h)
    make-before-break   Σ_new mem(m,h)·x[m,h]          ≤ allocatable(h) − live_mb(h) − headroom(h)
    desired models      Σ_m x[m,h]                     ≤ desired_cap(h)   (slots, fixed ceilings)
    new models          Σ_new x[m,h]                   ≤ new_cap(h)       (slots, live ceilings)
    own ceiling c_m     x[m,h] ⇒ fixed_cnt(h) + Σ x[·,h] ≤ c_m
                        new x[m,h] ⇒ live_cnt(h) + Σ_new x[·,h] ≤ c_m
    exclusions          x[a,h] + x[b,h] ≤ 1 for excluded pairs (pairs with fixed/live are static)
    disk (known only)   Σ_uncached-new artifact(m)·x[m,h] ≤ disk_free(h)
Per model: Σ_h x[m,h] ≤ open(m) = desired(m) − fixed replicas(m), and pins are reserved, never
substituted: Σ_{h ∉ pins(m)} x[m,h] ≤ desired(m) − |pins(m)| − fixed replicas off the pins.
where allocatable = (capacity − reserved − external) × throttle_fraction (throttled hosts only),
headroom = policy.memory_headroom_fraction × allocatable, and mem(m,h) is the footprint of the
runtime chosen on h (an incumbent keeps its runtime; else the smallest declared footprint, then
name), never less than an incumbent's reported memory.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from grid.fleet import (
    LIVE_STATES,
    FleetSnapshot,
    Host,
    HostState,
    ModelProfile,
    ResidencyState,
)
from grid.planner.eligibility import compatible_runtimes, host_refusals
from grid.planner.refusals import RefusalTable
from grid.planner.targets import Target


class Candidate(NamedTuple):
    """One (model, host) pair that passes every static filter (a named tuple: fast to build)."""

    model_id: str
    host_id: str
    runtime: str
    memory_mb: int  # desired-footprint ledger
    new_mb: int  # make-before-break ledger (0 for an incumbent)
    disk_mb: int  # artifact bytes to fetch (0 when cached or incumbent)
    incumbent: ResidencyState | None
    cached: bool
    pinned: bool

    @property
    def is_new(self) -> bool:
        return self.incumbent is None


@dataclass(frozen=True)
class FixedReplica:
    model_id: str
    host_id: str
    memory_mb: int
    runtime: str


@dataclass(frozen=True)
class HostBudget:
    host_id: str
    domain: str
    allocatable_mb: int
    headroom_mb: int
    fixed_mb: int
    live_mb: int
    fixed_models: tuple[str, ...]
    live_models: tuple[str, ...]
    slot_limit: int  # 0: unlimited
    desired_cap: int | None  # None: unlimited
    new_cap: int | None
    disk_free_mb: int | None
    refusals: tuple[str, ...]

    # Cached: the heuristic's feasibility test reads them ~1 M times at 10,000 hosts.
    @cached_property
    def footprint_budget_mb(self) -> int:
        return max(0, self.allocatable_mb - self.fixed_mb)

    @cached_property
    def new_budget_mb(self) -> int:
        return max(0, self.allocatable_mb - self.live_mb - self.headroom_mb)

    @property
    def admitting(self) -> bool:
        return not self.refusals


def allocatable_mb(host: Host) -> int:
    raw = max(0, host.capacity_mb - host.reserved_mb - host.external_mb)
    fraction = host.throttle_fraction if host.state is HostState.THROTTLED else 1.0
    return math.floor(raw * fraction)


def footprint_mb(model: ModelProfile, runtime: str) -> int:
    return model.runtime_memory_mb.get(runtime, model.memory_mb)


def choose_runtime(model: ModelProfile, host: Host) -> str | None:
    return smallest_runtime(model, compatible_runtimes(model, host))


def smallest_runtime(model: ModelProfile, runtimes: list[str]) -> str | None:
    """The runtime with the smallest declared footprint, then by name (None: no runtime)."""
    if len(runtimes) <= 1:  # the common case needs no footprint lookups
        return runtimes[0] if runtimes else None
    return min(runtimes, key=lambda rt: (footprint_mb(model, rt), rt))


def _cap(limit: int, count: int) -> int:
    return max(0, limit - count)


@dataclass
class PlacementProblem:
    snapshot: FleetSnapshot
    targets: dict[str, Target]
    models: list[ModelProfile]  # by priority (highest first), then model_id
    hosts: list[HostBudget]  # by host_id
    candidates: dict[tuple[str, str], Candidate]
    refusals: RefusalTable  # a Mapping[(model_id, host_id), reason codes]
    fixed: list[FixedReplica]
    excluded_pairs: frozenset[frozenset[str]]
    # Derived tables computed once per problem by other modules (e.g. quality scores).
    memo: dict[str, object] = field(default_factory=dict, repr=False)
    _by_model: dict[str, list[Candidate]] = field(default_factory=dict, repr=False)
    _by_host: dict[str, list[Candidate]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self._by_model or self._by_host or not self.candidates:  # given by build_problem
            return
        for cand in self.candidates.values():
            self._by_model.setdefault(cand.model_id, []).append(cand)
            self._by_host.setdefault(cand.host_id, []).append(cand)
        for cands in self._by_model.values():
            cands.sort(key=lambda c: c.host_id)

    # -- lookups -------------------------------------------------------------------------
    @cached_property
    def model_by_id(self) -> dict[str, ModelProfile]:
        return {m.model_id: m for m in self.models}

    @cached_property
    def host_by_id(self) -> dict[str, HostBudget]:
        return {h.host_id: h for h in self.hosts}

    def candidates_of_model(self, model_id: str) -> list[Candidate]:
        """The model's candidates by host ID (the list is shared: never mutate it)."""
        return self._by_model.get(model_id, [])

    @cached_property
    def distinct_candidates(self) -> int:
        """Candidates that differ by more than their host ID: those of hosts outside build
        shapes, plus one host's per shape (what per-candidate costs of later phases scale with)."""
        shapes: dict[str, int] = self.memo.get("build_shapes", {})  # type: ignore[assignment]
        seen: set[int] = set()
        out = len(self.candidates)
        for host_id, shape in shapes.items():
            n = len(self._by_host.get(host_id, ()))
            out -= n
            if shape not in seen:
                seen.add(shape)
                out += n
        return out

    @cached_property
    def incumbent_candidates(self) -> list[Candidate]:
        """The candidates that keep a live residency, by host ID: only hosts with a live
        residency have one (`_pair`), the others (millions of candidates) are not read."""
        return [
            cand
            for budget in self.hosts
            if budget.live_models
            for cand in self.candidates_of_host(budget.host_id)
            if cand.incumbent is not None
        ]

    def candidates_of_host(self, host_id: str) -> list[Candidate]:
        return self._by_host.get(host_id, [])

    @cached_property
    def _fixed_counts(self) -> Counter[str]:
        return Counter(f.model_id for f in self.fixed)

    def fixed_count(self, model_id: str) -> int:
        """Unmanaged replicas of the model (asked per model and per replica step: counted once)."""
        return self._fixed_counts[model_id]

    def open_replicas(self, model_id: str) -> int:
        """How many variable placements the model may still receive."""
        return max(0, self.targets[model_id].desired - self.fixed_count(model_id))

    def ceiling(self, model_id: str) -> int:
        model = self.model_by_id.get(model_id)
        return model.max_colocated_models if model is not None else 0

    def excluded(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.excluded_pairs

    @cached_property
    def exclusion_partners(self) -> dict[str, frozenset[str]]:
        """Per model, the models it may not share a host with (absent: none)."""
        return exclusion_partners(self.excluded_pairs)

    @cached_property
    def priorities(self) -> list[int]:
        return sorted({m.priority for m in self.models}, reverse=True)

    @cached_property
    def harm_rank(self) -> dict[str, int]:
        """0..n-1: higher means more measured service harm (model_id breaks exact ties)."""

        def harm(model: ModelProfile) -> tuple[float, ...]:
            d = self.snapshot.demand.get(model.model_id)
            if d is None:
                return (0.0, 0.0, 0.0, 0.0, 0.0)
            slo = model.latency_slo_ms
            ratio = d.p95_ms / slo if slo else 0.0
            return (d.queue_depth, ratio, d.error_rate, d.offered_concurrency, d.rpm)

        ordered = sorted(self.models, key=lambda m: (harm(m), _reverse_id(m.model_id)))
        return {m.model_id: rank for rank, m in enumerate(ordered)}


def _reverse_id(model_id: str) -> tuple[int, ...]:
    # Lower model IDs win exact ties, so they rank higher. The trailing 1 outranks every
    # -ord(c) <= 0, so a proper prefix ("a" < "ab") also sorts after the longer ID.
    return (*(-ord(c) for c in model_id), 1)


def exclusion_partners(excluded: frozenset[frozenset[str]]) -> dict[str, frozenset[str]]:
    partners: dict[str, set[str]] = {}
    for pair in excluded:
        a, b = sorted(pair)
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    return {model_id: frozenset(others) for model_id, others in partners.items()}


def host_budget(host: Host, snap: FleetSnapshot, profiles: dict[str, ModelProfile]) -> HostBudget:
    alloc = allocatable_mb(host)
    live = [r for r in host.residencies if r.state in LIVE_STATES]
    fixed = [r for r in live if not r.is_managed]
    fixed_models = tuple(sorted({r.model_id for r in fixed}))
    live_models = tuple(sorted({r.model_id for r in live}))
    desired_caps: list[int] = []
    new_caps: list[int] = []
    if host.max_models:
        desired_caps.append(_cap(host.max_models, len(fixed_models)))
        new_caps.append(_cap(host.max_models, len(live_models)))
    for model_id in fixed_models:
        prof = profiles.get(model_id)
        if prof is not None and prof.max_colocated_models:
            desired_caps.append(_cap(prof.max_colocated_models, len(fixed_models)))
    for model_id in live_models:
        prof = profiles.get(model_id)
        if prof is not None and prof.max_colocated_models:
            new_caps.append(_cap(prof.max_colocated_models, len(live_models)))
    return HostBudget(
        host_id=host.host_id,
        domain=host.domain,
        allocatable_mb=alloc,
        headroom_mb=math.ceil(snap.policy.memory_headroom_fraction * alloc),
        fixed_mb=sum(r.memory_mb for r in fixed),
        live_mb=sum(r.memory_mb for r in live),
        fixed_models=fixed_models,
        live_models=live_models,
        slot_limit=host.max_models,
        desired_cap=min(desired_caps) if desired_caps else None,
        new_cap=min(new_caps) if new_caps else None,
        disk_free_mb=host.disk_free_mb,
        refusals=tuple(host_refusals(host, snap)),
    )


NOT_DESIRED = ["not_desired"]  # shared by every refused pair it explains: never mutate
