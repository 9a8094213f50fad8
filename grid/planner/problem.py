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
import operator
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from typing import NamedTuple

from grid.fleet.models import (
    LIVE_STATES,
    REUSABLE_STATES,
    FleetSnapshot,
    Host,
    HostState,
    ModelProfile,
    Residency,
    ResidencyState,
)
from grid.planner.eligibility import compatible_runtimes, host_refusals, pair_refusals
from grid.planner.gcpause import gc_paused
from grid.planner.refusals import RefusalTable
from grid.planner.targets import Target, compute_targets


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
    return _smallest_runtime(model, compatible_runtimes(model, host))


def _smallest_runtime(model: ModelProfile, runtimes: list[str]) -> str | None:
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
        return _exclusion_partners(self.excluded_pairs)

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


def _exclusion_partners(excluded: frozenset[frozenset[str]]) -> dict[str, frozenset[str]]:
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


HostSignature = tuple[tuple[str, ...], ...]


def _signature(host: Host) -> HostSignature:
    """Everything `eligibility.pair_refusals` reads from a host, but its ID."""
    return (
        tuple(host.runtimes),
        tuple(sorted(host.backends)),
        tuple(sorted(host.data_tiers)),
        tuple(sorted(host.tags)),
        tuple(sorted(host.actuator_capabilities)),
        tuple(map(str, host.devices_mb)),  # the GPU filter (gpus.pair_refusal)
    )


class _PairRules:
    """`compatible_runtimes` and `pair_refusals` memoized per (model, host signature): the
    rules themselves stay in eligibility.py; a fleet of 1,000 hosts has a few dozen distinct
    host signatures, so the build asks them a few thousand times instead of 200,000. The
    returned lists are shared: never mutate them."""

    def __init__(self) -> None:
        self._runtimes: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        self._refusals: dict[tuple[str, HostSignature, bool], list[str]] = {}

    def runtimes(self, model: ModelProfile, host: Host, signature: HostSignature) -> list[str]:
        key = (model.model_id, signature[0])
        found = self._runtimes.get(key)
        if found is None:
            found = self._runtimes[key] = compatible_runtimes(model, host)
        return found

    def refusals(
        self,
        model: ModelProfile,
        host: Host,
        signature: HostSignature,
        cached: bool,
        runtimes: list[str],
    ) -> list[str]:
        if model.allowed_hosts or model.denied_hosts:  # the host ID matters: no memo
            return pair_refusals(model, host, cached=cached, runtimes=runtimes)
        key = (model.model_id, signature, cached)
        found = self._refusals.get(key)
        if found is None:
            found = self._refusals[key] = pair_refusals(
                model, host, cached=cached, runtimes=runtimes
            )
        return found


def _pair(
    model: ModelProfile,
    host: Host,
    budget: HostBudget,
    partners: frozenset[str],
    residency: Residency | None,
    rules: _PairRules,
    signature: HostSignature,
) -> tuple[Candidate | None, list[str]]:
    cached = model.model_id in host.cached_models or (
        residency is not None and residency.state is ResidencyState.CACHED
    )
    refusals: list[str] = []
    incumbent: ResidencyState | None = None
    runtimes = rules.runtimes(model, host, signature)
    runtime = _smallest_runtime(model, runtimes)
    if residency is not None and residency.state in LIVE_STATES:
        reusable = (
            residency.is_managed
            and residency.state in REUSABLE_STATES
            and (
                model.artifact_sha256 is None or residency.artifact_sha256 == model.artifact_sha256
            )
            and (residency.runtime is None or residency.runtime in runtimes)
        )
        if not reusable:
            refusals.append("residency_not_reusable")
        else:
            incumbent = residency.state
            runtime = residency.runtime or runtime
    refusals += rules.refusals(model, host, signature, cached or incumbent is not None, runtimes)
    # Exclusions against inventory that stays are static: unmanaged residencies always stay,
    # and every live residency is still there when a new placement starts.
    neighbours = budget.fixed_models if incumbent is not None else budget.live_models
    if partners and not partners.isdisjoint(neighbours):
        refusals.append("colocation_excluded")
    if incumbent is None and budget.new_cap == 0:
        refusals.append("colocation_or_slots_full")
    if budget.desired_cap == 0:
        refusals.append("colocation_or_slots_full")
    if refusals or runtime is None:
        return None, sorted(set(refusals))
    memory = footprint_mb(model, runtime)
    if incumbent is not None and residency is not None:
        memory = max(memory, residency.memory_mb)
    return (
        Candidate(
            model_id=model.model_id,
            host_id=host.host_id,
            runtime=runtime,
            memory_mb=memory,
            new_mb=0 if incumbent is not None else memory,
            disk_mb=0 if (cached or incumbent is not None) else model.artifact_size_mb,
            incumbent=incumbent,
            cached=cached,
            pinned=host.host_id in model.pinned_hosts,
        ),
        [],
    )


NOT_DESIRED = ["not_desired"]  # shared by every refused pair it explains: never mutate
Tail = tuple[str, int, int, int, None, bool, bool]  # a Candidate's fields after its key


@dataclass
class _Shape:
    """One build shape's candidates and refusals, in model order (see `build_problem`)."""

    model_ids: list[str]  # the models with a candidate on every host of the shape
    tails: list[Tail]  # each candidate's fields after its key
    refused: dict[str, list[str]]
    per_host: list[str]  # models whose allow, deny or pin lists name hosts: decided per host
    index: int
    lists: list[list[Candidate]] = field(default_factory=list)  # by_model's list per model


def _host_specific(model: ModelProfile) -> bool:
    return bool(model.allowed_hosts or model.denied_hosts or model.pinned_hosts)


def build_problem(
    snap: FleetSnapshot, targets: dict[str, Target] | None = None
) -> PlacementProblem:
    """Candidates and refusals of every (model, host) pair.

    Hosts without residencies that agree on everything `_pair` reads but their ID (runtimes,
    backends, tiers, tags, actuator, cached weights, slot cap; admitting) form one *build
    shape*: its candidates are decided once per model, and each host of the shape gets a copy
    with its own ID (a model whose allow, deny or pin lists name hosts is decided per host).
    Hosts with residencies are decided pair by pair. The result, its order included, is the
    same as deciding every pair on its own."""
    with gc_paused():
        return _build_problem(snap, targets)


def _build_problem(snap: FleetSnapshot, targets: dict[str, Target] | None) -> PlacementProblem:
    targets = targets if targets is not None else compute_targets(snap)
    models = sorted(snap.models, key=lambda m: (-m.priority, m.model_id))
    hosts = sorted(snap.hosts, key=lambda h: h.host_id)
    excluded = frozenset(
        frozenset((m.model_id, other))
        for m in models
        for other in m.colocation_excludes
        if other != m.model_id
    )
    partners = _exclusion_partners(excluded)
    profiles = {m.model_id: m for m in models}
    budgets = [host_budget(h, snap, profiles) for h in hosts]
    candidates: dict[tuple[str, str], Candidate] = {}
    refusals = RefusalTable()
    by_model: dict[str, list[Candidate]] = {m.model_id: [] for m in models}
    by_host: dict[str, list[Candidate]] = {}
    fixed: list[FixedReplica] = []
    rules = _PairRules()
    shapes: dict[object, _Shape] = {}
    host_shape: dict[str, int] = {}
    shaped_per_host: dict[str, tuple[int, list[str]]] = {}  # shape hosts with per-host models
    not_admitting: dict[tuple[str, ...], dict[str, list[str]]] = {}
    make = tuple.__new__

    def pair(
        model: ModelProfile,
        host: Host,
        budget: HostBudget,
        signature: HostSignature,
        residency: Residency | None,
    ) -> tuple[Candidate | None, list[str]]:
        return _pair(
            model,
            host,
            budget,
            partners.get(model.model_id, frozenset()),
            residency,
            rules,
            signature,
        )

    for host, budget in zip(hosts, budgets, strict=True):
        host_id = host.host_id
        for res in host.residencies:
            prof = profiles.get(res.model_id)
            if (
                prof is not None
                and not res.is_managed
                and res.state is ResidencyState.READY
                and budget.admitting
            ):
                runtime = res.runtime or choose_runtime(prof, host) or "external"
                fixed.append(FixedReplica(res.model_id, host_id, res.memory_mb, runtime))
        if budget.refusals:  # the host takes no new work: skip the pair filters
            shared = not_admitting.get(budget.refusals)
            if shared is None:
                why = list(budget.refusals)
                shared = not_admitting[budget.refusals] = {
                    m.model_id: NOT_DESIRED if targets[m.model_id].desired == 0 else why
                    for m in models
                }
            refusals.set_host(host_id, shared)
            continue
        signature = _signature(host)
        if host.residencies:  # decided pair by pair
            residencies = {r.model_id: r for r in host.residencies}
            own: list[Candidate] = []
            refused: dict[str, list[str]] = {}
            for model in models:
                if targets[model.model_id].desired == 0:
                    refused[model.model_id] = NOT_DESIRED
                    continue
                cand, why = pair(model, host, budget, signature, residencies.get(model.model_id))
                if cand is None:
                    refused[model.model_id] = why
                else:
                    own.append(cand)
            _add_host(host_id, own, candidates, by_model, by_host)
            refusals.set_host(host_id, refused)
            continue
        key = (signature, tuple(sorted(host.cached_models)), host.max_models)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = _Shape([], [], {}, [], len(shapes))
            for model in models:
                if targets[model.model_id].desired == 0:
                    shape.refused[model.model_id] = NOT_DESIRED
                elif _host_specific(model):
                    shape.per_host.append(model.model_id)
                else:
                    cand, why = pair(model, host, budget, signature, None)
                    if cand is None:
                        shape.refused[model.model_id] = why
                    else:
                        shape.model_ids.append(model.model_id)
                        shape.tails.append(cand[2:])  # type: ignore[arg-type]
            shape.lists = [by_model[m] for m in shape.model_ids]
        if not shape.per_host:  # C-level maps: this loop runs once per candidate
            host_shape[host_id] = shape.index
            keys = list(zip(shape.model_ids, repeat(host_id)))
            own = list(map(make, repeat(Candidate), map(operator.add, keys, shape.tails)))
            if own:
                candidates.update(zip(keys, own, strict=True))
                deque(map(list.append, shape.lists, own), maxlen=0)
                by_host[host_id] = own
            refusals.set_host(host_id, shape.refused)
            continue
        shaped_per_host[host_id] = (shape.index, shape.per_host)
        decided: dict[str, Candidate | list[str]] = {
            m: make(Candidate, (m, host_id, *tail))
            for m, tail in zip(shape.model_ids, shape.tails, strict=True)
        }
        decided.update(shape.refused)
        for model_id in shape.per_host:
            cand, why = pair(profiles[model_id], host, budget, signature, None)
            decided[model_id] = why if cand is None else cand
        own, refused = [], {}
        for model in models:
            found = decided[model.model_id]
            if isinstance(found, list):
                refused[model.model_id] = found
            else:
                own.append(found)
        _add_host(host_id, own, candidates, by_model, by_host)
        refusals.set_host(host_id, refused)
    problem = PlacementProblem(
        snapshot=snap,
        targets=targets,
        models=models,
        hosts=budgets,
        candidates=candidates,
        refusals=refusals,
        fixed=fixed,
        excluded_pairs=excluded,
        _by_model={m: cands for m, cands in by_model.items() if cands},
        _by_host=by_host,
    )
    # build_shapes: shape hosts without per-host models (equal candidates but for the host ID:
    # levels.py, types.py), shaped_per_host the others (narrow.py); candidates host by host.
    problem.memo.update(build_shapes=host_shape, shaped_per_host=shaped_per_host, host_major=True)
    return problem


def _add_host(
    host_id: str,
    own: list[Candidate],
    candidates: dict[tuple[str, str], Candidate],
    by_model: dict[str, list[Candidate]],
    by_host: dict[str, list[Candidate]],
) -> None:
    if not own:
        return
    by_host[host_id] = own
    for cand in own:
        candidates[(cand.model_id, host_id)] = cand
        by_model[cand.model_id].append(cand)
